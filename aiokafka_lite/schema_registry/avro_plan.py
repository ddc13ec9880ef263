"""Avro straight into Arrow: the reader schema as the native column's layout (``shape``), and for
each writer schema the program that reads the writer's bytes into it (``plan``), both as the nested
tuples the native ``AvroArrowBuilder`` runs (``native/src/avro``).

The layout is ``avro_arrow.arrow_type``'s, told as Arrow format strings. The program follows the Avro
spec's schema resolution as fastavro (the reference path) does: fields matched by name or alias,
writer fields the reader lacks skipped, reader fields the writer lacks given their default, enum
symbols by name (the reader's default for an unknown one), promotions int -> long/float/double,
long -> float/double, float -> double, bytes <-> string, and each branch of a writer union resolved
on its own (one the reader cannot take fails the record that picks it). A pair of schemas outside
that (a field without a default, a logical type read as another) raises ``NativePlanUnavailable``:
poll_arrow() then decodes with fastavro, which raises the spec's error for such records or reads them.
"""

from __future__ import annotations

import struct
from typing import Any

from ..protocol.records.build import encode_varint

_PRIMITIVE_SHAPES = {
    "null": ("null", "n"), "boolean": ("bool", "b"), "int": ("i32", "i"), "long": ("i64", "l"),
    "float": ("f32", "f"), "double": ("f64", "g"), "bytes": ("var", "z"), "string": ("var", "u"),
}
_LOGICAL_FORMATS = {
    ("int", "date"): ("i32", "tdD"), ("int", "time-millis"): ("i32", "ttm"), ("long", "time-micros"): ("i64", "ttu"),
    ("long", "timestamp-millis"): ("i64", "tsm:UTC"), ("long", "timestamp-micros"): ("i64", "tsu:UTC"),
    ("long", "local-timestamp-millis"): ("i64", "tsm:"), ("long", "local-timestamp-micros"): ("i64", "tsu:"),
}
# What each writer primitive may be read as (the spec's promotions).
_PROMOTIONS = {
    "null": {"null"}, "boolean": {"boolean"}, "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"}, "float": {"float", "double"}, "double": {"double"},
    "bytes": {"bytes", "string"}, "string": {"string", "bytes"},
}
_KNOWN_LOGICAL = {"date", "time-millis", "time-micros", "timestamp-millis", "timestamp-micros",
                  "local-timestamp-millis", "local-timestamp-micros", "decimal", "uuid"}


class NativePlanUnavailable(Exception):
    """The native decoder does not read this writer schema into this reader schema."""


class Schema:
    """A parsed schema (fastavro's ``parse_schema``) with the named types it can refer to."""

    def __init__(self, parsed: Any) -> None:
        self.parsed = parsed
        self.named: dict[str, Any] = parsed.get("__named_schemas", {}) if isinstance(parsed, dict) else {}

    def deref(self, schema: Any) -> Any:
        """``schema`` with a reference by name replaced by its definition, ``{"type": "long"}`` by ``"long"``."""
        if isinstance(schema, str):
            if schema in _PROMOTIONS:
                return schema
            if schema in self.named:
                return self.named[schema]
            raise NativePlanUnavailable(f"unknown Avro type name {schema!r}")
        if isinstance(schema, dict) and isinstance(schema.get("type"), str) and schema["type"] in _PROMOTIONS \
                and schema.get("logicalType") not in _KNOWN_LOGICAL:
            return schema["type"]  # an unknown logical type is its underlying type, as the spec says
        return schema


def _nullable(schema: Any) -> tuple[bool, Any]:
    """As ``avro_arrow._nullable``: whether ``schema`` admits null, and the one other type."""
    if not isinstance(schema, list):
        return schema == "null", schema
    rest = [branch for branch in schema if branch != "null"]
    if len(rest) == len(schema) or len(rest) != 1:
        raise NativePlanUnavailable(f"the union {schema!r} has no single Arrow type")
    return True, rest[0]


def _logical(schema: Any) -> str | None:
    return schema.get("logicalType") if isinstance(schema, dict) else None


def shape(reader: Schema) -> tuple[Any, ...]:
    """The native layout of the reader schema's values (the root: the column, always nullable)."""
    return _shape(reader, _nullable(reader.parsed)[1])


def _shape(reader: Schema, schema: Any) -> tuple[Any, ...]:
    schema = reader.deref(schema)
    if isinstance(schema, str):
        return _PRIMITIVE_SHAPES[schema]
    if isinstance(schema, list):
        return _shape(reader, _nullable(schema)[1])
    kind, logical = schema["type"], _logical(schema) or ""
    if (kind, logical) in _LOGICAL_FORMATS:
        return _LOGICAL_FORMATS[kind, logical]
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
        if precision <= 38:
            return ("decimal", f"d:{precision},{scale}", 16)
        return ("decimal", f"d:{precision},{scale},256", 32)
    if logical == "uuid":
        raise NativePlanUnavailable("a uuid has no Arrow column type here")
    if kind in ("record", "error"):
        fields = []
        for field in schema["fields"]:
            nullable, inner = _nullable(field["type"])
            fields.append((field["name"], nullable, _shape(reader, inner)))
        return ("struct", "+s", fields)
    if kind == "enum":
        return ("var", "u")
    if kind == "fixed":
        return ("fixed", f"w:{int(schema['size'])}", int(schema["size"]))
    if kind == "array":
        nullable, inner = _nullable(schema["items"])
        return ("list", "+l", nullable, _shape(reader, inner))
    if kind == "map":
        nullable, inner = _nullable(schema["values"])
        return ("map", "+m", nullable, _shape(reader, inner))
    return _shape(reader, kind)


def plan(writer: Schema, reader: Schema) -> tuple[Any, ...]:
    """The program reading values written with ``writer`` into ``shape(reader)``."""
    return _Resolver(writer, reader).resolve(writer.parsed, reader.parsed)


class _Resolver:
    def __init__(self, writer: Schema, reader: Schema) -> None:
        self.writer = writer
        self.reader = reader

    def resolve(self, written: Any, read: Any) -> tuple[Any, ...]:
        """The op reading ``written`` into the place of ``read`` (a union with null: a nullable place)."""
        nullable, target = _nullable(read) if isinstance(read, list) else (False, read)
        written = self.writer.deref(written)
        if isinstance(written, list):
            return ("union", [self._branch(branch, nullable, target) for branch in written])
        if written == "null":
            if nullable or self.reader.deref(target) == "null":
                return ("null",)
            raise NativePlanUnavailable("a null written where the reader has no null")
        return self._direct(written, self.reader.deref(target))

    def _branch(self, branch: Any, nullable: bool, target: Any) -> tuple[Any, ...]:
        try:
            if self.writer.deref(branch) == "null" and nullable:
                return ("null",)
            return self.resolve(branch, target)
        except NativePlanUnavailable as exc:
            return ("fail", f"the writer's union branch {branch!r} cannot be read as {target!r}: {exc}")

    def _direct(self, written: Any, read: Any) -> tuple[Any, ...]:
        w_kind = written if isinstance(written, str) else written["type"]
        r_kind = read if isinstance(read, str) else read["type"]
        w_logical, r_logical = _logical(written), _logical(read)
        if w_logical is not None and w_logical != r_logical:
            raise NativePlanUnavailable(f"a {w_logical} value read as {r_logical or r_kind}")
        if r_logical == "decimal":
            return self._decimal(written, read, w_kind, r_kind)
        if w_kind in _PROMOTIONS and r_kind in _PROMOTIONS:
            if r_kind not in _PROMOTIONS[w_kind]:
                raise NativePlanUnavailable(f"a {w_kind} cannot be read as a {r_kind}")
            return (w_kind if w_kind != "boolean" else "bool",)
        if w_kind != r_kind and not {w_kind, r_kind} <= {"record", "error"}:
            raise NativePlanUnavailable(f"a {w_kind} cannot be read as a {r_kind}")
        if r_kind in ("record", "error"):
            return self._record(written, read)
        if r_kind == "enum":
            symbols = read["symbols"]
            default = read.get("default")
            return ("enum", [s if s in symbols else default for s in written["symbols"]], list(written["symbols"]))
        if r_kind == "fixed":
            if int(written["size"]) != int(read["size"]):
                raise NativePlanUnavailable(f"fixed of {written['size']} bytes read as fixed of {read['size']}")
            return ("fixed", int(written["size"]))
        if r_kind == "array":
            return ("array", self.resolve(written["items"], read["items"]))
        if r_kind == "map":
            return ("map", self.resolve(written["values"], read["values"]))
        raise NativePlanUnavailable(f"a {w_kind} cannot be read as a {r_kind}")

    def _decimal(self, written: Any, read: Any, w_kind: str, r_kind: str) -> tuple[Any, ...]:
        if _logical(written) != "decimal" or w_kind != r_kind or any(
                int(written.get(key, 0)) != int(read.get(key, 0)) for key in ("precision", "scale")):
            raise NativePlanUnavailable("a decimal read from another type or scale")
        return ("decimal_bytes",) if w_kind == "bytes" else ("decimal_fixed", int(written["size"]))

    def _record(self, written: dict[str, Any], read: dict[str, Any]) -> tuple[Any, ...]:
        by_name: dict[str, int] = {}
        for index, field in enumerate(read["fields"]):
            for name in (field["name"], *field.get("aliases", ())):
                by_name.setdefault(name, index)
        steps: list[tuple[Any, ...]] = []
        filled: set[int] = set()
        for field in written["fields"]:
            found = by_name.get(field["name"])
            if found is None or found in filled:
                steps.append(("skip", skip_op(self.writer, field["type"])))
                continue
            index = found
            filled.add(index)
            steps.append(("field", index, self.resolve(field["type"], read["fields"][index]["type"])))
        for index, field in enumerate(read["fields"]):
            if index in filled:
                continue
            if "default" not in field:
                raise NativePlanUnavailable(f"the reader's field {field['name']!r} is not written and has no default")
            payload = encode_default(self.reader, field["type"], field["default"])
            steps.append(("default", index, payload, _Resolver(self.reader, self.reader).resolve(field["type"],
                                                                                                  field["type"])))
        return ("record", steps)


def skip_op(writer: Schema, schema: Any) -> tuple[Any, ...]:
    """An op that reads past a value of ``schema`` (no target: nothing checked beyond the bytes)."""
    schema = writer.deref(schema)
    if isinstance(schema, list):
        return ("union", [skip_op(writer, branch) for branch in schema])
    kind = schema if isinstance(schema, str) else schema["type"]
    if kind in ("string", "bytes"):
        return ("bytes",)  # skipped unread: not checked as UTF-8 (as fastavro skips it)
    if kind == "boolean":
        return ("bool",)
    if kind in _PROMOTIONS:
        return (kind,)
    if kind in ("record", "error"):
        return ("record", [("skip", skip_op(writer, field["type"])) for field in schema["fields"]])
    if kind == "enum":
        return ("long",)
    if kind == "fixed":
        return ("fixed", int(schema["size"]))
    if kind == "array":
        return ("array", skip_op(writer, schema["items"]))
    if kind == "map":
        return ("map", skip_op(writer, schema["values"]))
    return skip_op(writer, kind)


def encode_default(schema_of: Schema, schema: Any, value: Any) -> bytes:
    """A field's default (its JSON value, as the spec gives it) in Avro's binary encoding."""
    out = bytearray()
    _encode(schema_of, schema, value, out)
    return bytes(out)


def _encode(schema_of: Schema, schema: Any, value: Any, out: bytearray) -> None:
    schema = schema_of.deref(schema)
    if isinstance(schema, list):  # a union's default is of its first branch
        encode_varint(0, out)
        _encode(schema_of, schema[0], value, out)
        return
    kind = schema if isinstance(schema, str) else schema["type"]
    if kind == "null":
        return
    if kind == "boolean":
        out.append(1 if value else 0)
    elif kind in ("int", "long"):
        encode_varint(int(value), out)
    elif kind == "float":
        out += struct.pack("<f", float(value))
    elif kind == "double":
        out += struct.pack("<d", float(value))
    elif kind in ("bytes", "string", "fixed"):
        data = value.encode("latin-1" if kind != "string" else "utf-8") if isinstance(value, str) else bytes(value)
        if _logical(schema) == "decimal":
            raise NativePlanUnavailable("a decimal field's default")
        if kind != "fixed":
            encode_varint(len(data), out)
        out += data
    elif kind == "enum":
        encode_varint(schema["symbols"].index(value), out)
    elif kind == "array":
        if value:
            encode_varint(len(value), out)
            for item in value:
                _encode(schema_of, schema["items"], item, out)
        encode_varint(0, out)
    elif kind == "map":
        if value:
            encode_varint(len(value), out)
            for key, item in value.items():
                _encode(schema_of, "string", key, out)
                _encode(schema_of, schema["values"], item, out)
        encode_varint(0, out)
    elif kind in ("record", "error"):
        for field in schema["fields"]:
            _encode(schema_of, field["type"], value.get(field["name"], field.get("default")), out)
    else:
        raise NativePlanUnavailable(f"a default of type {kind!r}")
