"""The declarative schema engine: fields with the versions they exist in, encoded and decoded
for any version, flexible (compact + tagged fields) or not.

Messages are plain dicts keyed by snake_case field names; a field absent from a dict is written
as its default, and a field absent from a version decodes as its default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from ..errors import ProtocolEncodeError
from .primitives import MAX_ARRAY_LENGTH, ZERO_UUID, Reader, Writer

ANY = 32767  # "N+" in Kafka's JSON specs

# Primitive type names, as in Kafka's JSON message specs (lower-cased).
PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "string", "bytes",
     "records", "uuid"}
)

FieldType = Union[str, "Struct", "Array"]


@dataclass(frozen=True)
class Array:
    item: FieldType


@dataclass(frozen=True)
class Field:
    name: str
    type: FieldType
    versions: tuple[int, int] = (0, ANY)
    nullable: tuple[int, int] | None = None
    tag: int | None = None
    tagged_versions: tuple[int, int] | None = None
    default: Any = None

    def present_in(self, version: int) -> bool:
        lo, hi = self.tagged_versions if self.tag is not None and self.tagged_versions else self.versions
        return lo <= version <= hi

    def nullable_in(self, version: int) -> bool:
        return self.nullable is not None and self.nullable[0] <= version <= self.nullable[1]


@dataclass(frozen=True)
class Struct:
    fields: tuple[Field, ...]
    _plans: dict[int, tuple[tuple[Field, ...], dict[int, Field]]] = field(
        default_factory=dict, compare=False, repr=False
    )
    # (version, flexible) -> this struct's encoder and decoder for it, made once (see _compile_*)
    _encoders: dict[tuple[int, bool], Callable[[Writer, Mapping[str, Any]], None]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _decoders: dict[tuple[int, bool], Callable[[Reader], dict[str, Any]]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def plan(self, version: int) -> tuple[tuple[Field, ...], dict[int, Field]]:
        """The untagged fields in wire order and the tagged fields by tag, for one version."""
        cached = self._plans.get(version)
        if cached is None:
            present = [f for f in self.fields if f.present_in(version)]
            cached = (
                tuple(f for f in present if f.tag is None),
                {f.tag: f for f in present if f.tag is not None},
            )
            self._plans[version] = cached
        return cached


def F(name: str, type_: FieldType, v: str = "0+", *, null: str | None = None, tag: int | None = None,
      default: Any = None) -> Field:
    """Shorthand mirroring the JSON specs: F("member_id", "string", "0+", null="3+")."""
    versions = parse_versions(v)
    return Field(name, type_, versions, parse_versions(null) if null else None, tag,
                 versions if tag is not None else None, default)


def S(*fields: Field) -> Struct:
    return Struct(tuple(fields))


def A(item: FieldType) -> Array:
    return Array(item)


def parse_versions(text: str) -> tuple[int, int]:
    """'3+' -> (3, ANY); '1-4' -> (1, 4); '2' -> (2, 2); 'none' -> an empty range."""
    if text == "none":
        return (1, 0)
    if text.endswith("+"):
        return (int(text[:-1]), ANY)
    lo, _, hi = text.partition("-")
    return (int(lo), int(hi or lo))


# ---------------------------------------------------------------- defaults

class _Null:
    """The specs' ``"default": "null"`` for a nullable array (arrays otherwise default to [])."""

    def __repr__(self) -> str:
        return "NULL"


NULL: Any = _Null()


def default_value(f: Field, version: int) -> Any:
    if f.default is NULL:
        return None
    if f.default is not None:
        return f.default
    t = f.type
    if t in ("string", "bytes", "records") and (f.nullable_in(version) or _nullable_throughout(f)):
        return None
    if isinstance(t, Struct) and _nullable_throughout(f):  # e.g. a heartbeat's "no new assignment"
        return None
    if isinstance(t, Array):
        return []
    if isinstance(t, Struct):
        return decode_defaults(t, version)
    return _ZERO[t]


def _nullable_throughout(f: Field) -> bool:
    """Nullable in every version it exists in: the specs' `"default": "null"` fields (which Kafka
    requires to be nullable throughout) then read as None also in versions that lack them, e.g. a
    JoinGroup v4 member's group_instance_id (v5+)."""
    return f.nullable is not None and f.nullable[0] <= f.versions[0] and f.nullable[1] >= f.versions[1]


_ZERO: dict[str, Any] = {
    "bool": False, "int8": 0, "int16": 0, "uint16": 0, "int32": 0, "uint32": 0, "int64": 0,
    "float64": 0.0, "string": "", "bytes": b"", "records": None, "uuid": ZERO_UUID,
}


def decode_defaults(struct: Struct, version: int) -> dict[str, Any]:
    return {f.name: default_value(f, version) for f in struct.fields}


# ---------------------------------------------------------------- encoding

# A struct's encoder and decoder are made once per (version, flexible): the fields of that version
# in wire order, each with the function that writes or reads its type, so that a message does not
# look up its plan, test each value's type and find its primitive's method field by field (an idle
# consumer sends and reads thousands of small requests a second).

def encode_struct(w: Writer, struct: Struct, value: Mapping[str, Any], version: int, flexible: bool) -> None:
    encoder = struct._encoders.get((version, flexible))
    if encoder is None:
        encoder = struct._encoders[(version, flexible)] = _compile_encoder(struct, version, flexible)
    encoder(w, value)


def _compile_encoder(struct: Struct, version: int, flexible: bool) -> Callable[[Writer, Mapping[str, Any]], None]:
    untagged, tagged = struct.plan(version)
    # (field, its name, its writer, whether it is a nullable struct: a -1 / 1 marker byte first, as Kafka does)
    steps = tuple((f, f.name, _value_encoder(f.type, version, flexible), isinstance(f.type, Struct)
                   and f.nullable_in(version)) for f in untagged)
    # (tag, name, default: a value equal to it is not sent, writer), in tag order; made once, as `steps`
    tagged_steps = tuple((tag, tagged[tag].name, default_value(tagged[tag], version),
                          _value_encoder(tagged[tag].type, version, True)) for tag in sorted(tagged))

    def encode(w: Writer, value: Mapping[str, Any]) -> None:
        for f, name, write, nullable_struct in steps:
            v = value.get(name, _MISSING)
            if v is _MISSING:
                v = default_value(f, version)
            if nullable_struct:
                w.int8(-1 if v is None else 1)
                if v is None:
                    continue
            write(w, v)
        if flexible:
            _encode_tagged(w, tagged_steps, value)

    return encode


def _value_encoder(t: FieldType, version: int, flexible: bool) -> Callable[[Writer, Any], None]:
    if isinstance(t, str):
        return _ENCODERS[(t, flexible)]
    if isinstance(t, Array):
        write_item = _value_encoder(t.item, version, flexible)

        def write_array(w: Writer, v: Any) -> None:
            n = None if v is None else len(v)
            if n is not None and n > MAX_ARRAY_LENGTH:
                raise ProtocolEncodeError(f"an array of {n} elements is over Kafka's limit of {MAX_ARRAY_LENGTH} "
                                          f"elements (brokers refuse the request)")
            w.array_length(n, flexible)
            for item in v or ():
                write_item(w, item)

        return write_array

    def write_struct(w: Writer, v: Any) -> None:
        encode_struct(w, t, v, version, flexible)

    return write_struct


_MISSING = object()


def _encode_tagged(w: Writer, tagged_steps: Sequence[tuple[int, str, Any, Callable[[Writer, Any], None]]],
                   value: Mapping[str, Any]) -> None:
    """The tagged fields (tag order) whose value is not their default."""
    present = []
    for tag, name, default, write in tagged_steps:
        v = value.get(name, _MISSING)
        if v is not _MISSING and v != default:
            present.append((tag, write, v))
    w.uvarint(len(present))
    for tag, write, v in present:
        inner = Writer()
        write(inner, v)
        w.uvarint(tag)
        w.uvarint(len(inner.buf))
        w.raw(inner.buf)


def _enc(name: str) -> Callable[[Writer, Any], None]:
    method: Callable[[Writer, Any], None] = getattr(Writer, name)
    return method


_ENCODERS: dict[tuple[str, bool], Callable[[Writer, Any], None]] = {}
for _flex in (False, True):
    for _name, _method in (("bool", "boolean"), ("int8", "int8"), ("int16", "int16"),
                           ("uint16", "uint16"), ("int32", "int32"), ("uint32", "uint32"),
                           ("int64", "int64"), ("float64", "float64"), ("uuid", "uuid")):
        _ENCODERS[(_name, _flex)] = _enc(_method)
    _ENCODERS[("string", _flex)] = _enc("compact_string" if _flex else "string")
    _ENCODERS[("bytes", _flex)] = _enc("compact_bytes" if _flex else "bytes_")
    _ENCODERS[("records", _flex)] = _enc("compact_bytes" if _flex else "bytes_")


# ---------------------------------------------------------------- decoding

def decode_struct(r: Reader, struct: Struct, version: int, flexible: bool) -> dict[str, Any]:
    decoder = struct._decoders.get((version, flexible))
    if decoder is None:
        decoder = struct._decoders[(version, flexible)] = _compile_decoder(struct, version, flexible)
    return decoder(r)


def _compile_decoder(struct: Struct, version: int, flexible: bool) -> Callable[[Reader], dict[str, Any]]:
    untagged, tagged = struct.plan(version)
    steps = tuple((f.name, _value_decoder(f.type, version, flexible), isinstance(f.type, Struct)
                   and f.nullable_in(version)) for f in untagged)
    tagged_readers = {tag: (f.name, _value_decoder(f.type, version, True)) for tag, f in tagged.items()}
    fields, count = struct.fields, len(struct.fields)

    def decode(r: Reader) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, read, nullable_struct in steps:
            if nullable_struct and r.int8() < 0:
                out[name] = None
            else:
                out[name] = read(r)
        if flexible:
            _decode_tagged(r, tagged_readers, out)
        if len(out) != count:  # fields this version lacks, tagged fields not sent: their defaults
            for f in fields:
                if f.name not in out:
                    out[f.name] = default_value(f, version)
        return out

    return decode


def _value_decoder(t: FieldType, version: int, flexible: bool) -> Callable[[Reader], Any]:
    if isinstance(t, str):
        return _DECODERS[(t, flexible)]
    if isinstance(t, Array):
        read_item = _value_decoder(t.item, version, flexible)

        def read_array(r: Reader) -> list[Any] | None:
            n = r.array_length(flexible)
            if n < 0:
                return None
            return [read_item(r) for _ in range(n)]

        return read_array

    def read_struct(r: Reader) -> dict[str, Any]:
        return decode_struct(r, t, version, flexible)

    return read_struct


def _decode_tagged(r: Reader, tagged_readers: Mapping[int, tuple[str, Callable[[Reader], Any]]],
                   out: dict[str, Any]) -> None:
    for _ in range(r.tagged_field_count()):
        tag = r.uvarint()
        size = r.uvarint()
        known = tagged_readers.get(tag)
        if known is None or r.error is not None:
            r.skip(size)  # unknown tags are for newer clients: skip them
            continue
        name, read = known
        end = r.pos + size
        out[name] = read(r)
        if r.pos != end and r.error is None:
            r.fail(f"tagged field {name} used {r.pos - end + size} of {size} bytes")


def _dec(name: str) -> Callable[[Reader], Any]:
    method: Callable[[Reader], Any] = getattr(Reader, name)
    return method


_DECODERS: dict[tuple[str, bool], Callable[[Reader], Any]] = {}
for _flex in (False, True):
    for _name, _method in (("bool", "boolean"), ("int8", "int8"), ("int16", "int16"),
                           ("uint16", "uint16"), ("int32", "int32"), ("uint32", "uint32"),
                           ("int64", "int64"), ("float64", "float64"), ("uuid", "uuid")):
        _DECODERS[(_name, _flex)] = _dec(_method)
    _DECODERS[("string", _flex)] = _dec("compact_string" if _flex else "string")
    _DECODERS[("records", _flex)] = _dec("compact_bytes_view" if _flex else "bytes_view")

_DECODERS[("bytes", False)] = lambda r: _to_bytes(r.bytes_view())
_DECODERS[("bytes", True)] = lambda r: _to_bytes(r.compact_bytes_view())


def _to_bytes(view: memoryview | None) -> bytes | None:
    return None if view is None else bytes(view)


def validate_schema(struct: Struct, seen: Sequence[str] = ()) -> None:
    """Catch typos in hand-written schemas at import time of the tests."""
    names = [f.name for f in struct.fields]
    if len(names) != len(set(names)):
        raise ValueError(f"duplicate field names in {seen}: {names}")
    for f in struct.fields:
        t = f.type.item if isinstance(f.type, Array) else f.type
        if isinstance(t, Struct):
            validate_schema(t, (*seen, f.name))
        elif t not in PRIMITIVES:
            raise ValueError(f"unknown type {t!r} for field {'.'.join((*seen, f.name))}")
