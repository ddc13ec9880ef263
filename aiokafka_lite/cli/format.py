"""How the CLI shows bytes: UTF-8 text where the bytes are valid UTF-8, otherwise base64 (JSON) or
hex (text), always labelled so a reader can tell which."""

from __future__ import annotations

import base64
import json
from typing import Any

from ..structs import ConsumerRecord


def json_bytes(data: bytes | None) -> Any:
    """A JSON value: the UTF-8 string, or ``{"base64": ...}`` when the bytes are not UTF-8."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def _as_bytes(value: Any) -> bytes | None:
    # Records reach the CLI undeserialized, but a header value or a user deserializer may hand
    # over something else; show it as its text.
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return str(value).encode("utf-8")


def _decoded(value: Any) -> bool:
    """A key or value a deserializer made into data (a schema registry's record: a dict)."""
    return isinstance(value, dict | list | int | float | bool)


def _json_default(value: Any) -> Any:
    # Inside decoded data: Avro bytes and fixed as bytes are shown, dates, decimals and UUIDs as text.
    if isinstance(value, bytes | bytearray | memoryview):
        return json_bytes(bytes(value))
    return str(value)


def _json_field(value: Any) -> Any:
    return value if _decoded(value) else json_bytes(_as_bytes(value))


def record_json(record: ConsumerRecord) -> str:
    """One record as one line of JSON (a decoded key or value as JSON data)."""
    return json.dumps({
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": _json_field(record.key),
        "value": _json_field(record.value),
        "headers": [[name, json_bytes(_as_bytes(value))] for name, value in record.headers],
    }, ensure_ascii=False, default=_json_default)


def _text_field(value: Any) -> str:
    if _decoded(value):
        return json.dumps(value, ensure_ascii=False, default=_json_default)
    return _quoted(_as_bytes(value))


def _quoted(data: bytes | None) -> str:
    """A quoted string for UTF-8 bytes, unquoted ``0x...`` hex otherwise: the two cannot be confused."""
    if data is None:
        return "null"
    try:
        return json.dumps(data.decode("utf-8"), ensure_ascii=False)
    except UnicodeDecodeError:
        return "0x" + data.hex()


def record_text(record: ConsumerRecord) -> str:
    """One record as one readable line: ``topic[partition]@offset key=... value=... headers=...``."""
    line = (f"{record.topic}[{record.partition}]@{record.offset} "
            f"key={_text_field(record.key)} value={_text_field(record.value)}")
    if record.headers:
        shown = ", ".join(f"{name}={_quoted(_as_bytes(value))}" for name, value in record.headers)
        line += f" headers={{{shown}}}"
    return line
