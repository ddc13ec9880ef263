"""The Arrow type of an Avro schema, for ``poll_arrow()`` with an ``AvroDeserializer``: the values
column becomes typed data (a record a struct of its fields) instead of bytes.

The mapping follows the Avro spec's types as fastavro decodes them: null, boolean, int (int32),
long (int64), float, double, bytes (binary), string (utf8), record (struct), enum (utf8: fastavro
gives the symbol), array (list), map (map<utf8, ...>), fixed (fixed-size binary), and a union of
null and one type (that type, nullable). Logical types: date (date32), time-millis (time32 ms),
time-micros (time64 us), timestamp-millis and timestamp-micros (timestamp, UTC), local-timestamp-*
(timestamp without a zone), decimal (decimal128 or decimal256 by precision). A uuid is refused,
and so is any other union (it has no single Arrow column type): ``InvalidArgumentError`` names
where. pyarrow is imported by the caller (``arrow.py``: it is needed only for Arrow output).
"""

from __future__ import annotations

from typing import Any

from aiokafka_lite.errors import InvalidArgumentError

_PRIMITIVES = {"null": "null", "boolean": "bool_", "int": "int32", "long": "int64", "float": "float32",
               "double": "float64", "bytes": "binary", "string": "utf8"}


def arrow_type(pa: Any, schema: Any) -> Any:
    """The pyarrow type of the values of ``schema`` (an Avro schema as parsed JSON or by fastavro)."""
    return _Mapper(pa).type_of(schema, "the schema")


class _Mapper:
    def __init__(self, pa: Any) -> None:
        self.pa = pa
        self.named: dict[str, Any] = {}  # full name -> Arrow type, for later references by name

    def type_of(self, schema: Any, where: str) -> Any:
        pa = self.pa
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return getattr(pa, _PRIMITIVES[schema])()
            if schema in self.named:
                return self.named[schema]
            raise InvalidArgumentError(f"{where}: unknown Avro type name {schema!r}")
        if isinstance(schema, list):
            return self._union(schema, where)
        if not isinstance(schema, dict) or "type" not in schema:
            raise InvalidArgumentError(f"{where}: not an Avro schema: {schema!r}")
        logical = self._logical(schema)
        if logical is not None:
            return logical
        kind = schema["type"]
        if kind == "record" or kind == "error":
            fields = [self._field(field, where) for field in schema.get("fields", [])]
            return self._name(schema, pa.struct(fields))
        if kind == "enum":
            return self._name(schema, pa.utf8())
        if kind == "fixed":
            return self._name(schema, pa.binary(int(schema["size"])))
        if kind == "array":
            return pa.list_(self._item(schema["items"], f"{where}'s items"))
        if kind == "map":
            return pa.map_(pa.utf8(), self._item(schema["values"], f"{where}'s values"))
        return self.type_of(kind, where)  # {"type": "long"} and the like

    def _field(self, field: dict[str, Any], where: str) -> Any:
        name = field["name"]
        nullable, inner = _nullable(field["type"])
        return self.pa.field(name, self.type_of(inner, f"field {name!r} of {where}"), nullable=nullable)

    def _item(self, schema: Any, where: str) -> Any:
        nullable, inner = _nullable(schema)
        return self.pa.field("item" if "item" in where else "value", self.type_of(inner, where), nullable=nullable)

    def _union(self, branches: list[Any], where: str) -> Any:
        nullable, inner = _nullable(branches)
        if not nullable or isinstance(inner, list):
            raise InvalidArgumentError(f"{where}: the union {branches!r} has no single Arrow type (only a union "
                                       "of null and one type has: that type, nullable)")
        return self.type_of(inner, where)

    def _name(self, schema: dict[str, Any], arrow: Any) -> Any:
        name = schema.get("name")
        if isinstance(name, str):
            namespace = schema.get("namespace")
            full = name if "." in name or not namespace else f"{namespace}.{name}"
            self.named[full] = self.named[name] = arrow
        return arrow

    def _logical(self, schema: dict[str, Any]) -> Any:
        pa, logical, kind = self.pa, schema.get("logicalType"), schema.get("type")
        if logical == "date" and kind == "int":
            return pa.date32()
        if logical == "time-millis" and kind == "int":
            return pa.time32("ms")
        if logical == "time-micros" and kind == "long":
            return pa.time64("us")
        if logical in ("timestamp-millis", "timestamp-micros", "local-timestamp-millis",
                       "local-timestamp-micros") and kind == "long":
            unit = "ms" if logical.endswith("millis") else "us"
            return pa.timestamp(unit, tz=None if logical.startswith("local") else "UTC")
        if logical == "decimal" and kind in ("bytes", "fixed"):
            precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
            decimal = pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
            return self._name(schema, decimal) if kind == "fixed" else decimal
        if logical == "uuid" and kind == "string":
            raise InvalidArgumentError(f"{schema!r}: a uuid has no Arrow column type here yet (fastavro reads it as "
                                       "uuid.UUID, which pyarrow takes only outside a struct); read it as a string "
                                       "in the reader schema")
        return None  # an unknown logical type is its underlying type, as the spec says


def _nullable(schema: Any) -> tuple[bool, Any]:
    """Whether ``schema`` is a union with null, and the rest (one schema, or a list if several)."""
    if not isinstance(schema, list):
        return schema == "null", schema
    rest = [branch for branch in schema if branch != "null"]
    if len(rest) == len(schema):
        return False, schema
    return True, rest[0] if len(rest) == 1 else rest
