"""Confluent's wire format (aiokafka_lite.schema_registry.wire): round trips, the Protobuf message
indexes with the single-0 shortcut, and each malformed value refused with WireFormatError."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from aiokafka_lite.schema_registry import WireFormatError, wire


@pytest.mark.parametrize("schema_id", [0, 1, 258, 0xFFFFFFFF])
def test_frame_and_parse_round_trip(schema_id: int) -> None:
    framed = wire.frame(schema_id, b"payload")
    assert framed[:5] == b"\x00" + schema_id.to_bytes(4, "big")
    parsed_id, payload = wire.parse(framed)
    assert (parsed_id, bytes(payload)) == (schema_id, b"payload")


def test_parse_hands_out_a_view_of_the_input_not_a_copy() -> None:
    framed = bytearray(wire.frame(7, b"abc"))
    _, payload = wire.parse(framed)
    framed[5] = ord("x")
    assert bytes(payload) == b"xbc"


def test_an_empty_payload_after_the_header_is_fine() -> None:
    assert wire.parse(b"\x00\x00\x00\x00\x05") == (5, memoryview(b""))


def test_known_bytes_of_a_confluent_avro_value() -> None:
    # id 1, then the Avro int 42 (zig-zag 84 = 0x54), as Confluent's serializer writes it.
    schema_id, payload = wire.parse(bytes.fromhex("00" "00000001" "54"))
    assert (schema_id, bytes(payload)) == (1, b"\x54")


@pytest.mark.parametrize(("indexes", "expected_bytes"), [
    ([0], b"\x00"),               # the shortcut: one byte 0 means [0]
    ([1], b"\x02\x02"),           # count 1, index 1 (zig-zag: 2)
    ([0, 0], b"\x04\x00\x00"),    # not the shortcut: count 2
    ([2, 1, 70], b"\x06\x04\x02\x8c\x01"),   # 70 -> zig-zag 140 -> varint 8c 01
])
def test_protobuf_indexes_round_trip(indexes: list[int], expected_bytes: bytes) -> None:
    framed = wire.frame_protobuf(9, indexes, b"msg")
    assert framed[5:-3] == expected_bytes
    schema_id, parsed, payload = wire.parse_protobuf(framed)
    assert (schema_id, parsed, bytes(payload)) == (9, indexes, b"msg")


def test_an_empty_index_list_is_framed_as_the_first_message() -> None:
    assert wire.parse_protobuf(wire.frame_protobuf(3, [], b"m"))[1] == [0]


@pytest.mark.parametrize(("value", "message"), [
    (b"", "empty value"),
    (b"\x01\x00\x00\x00\x01payload", "unknown magic byte 1 (0x01)"),
    (b"\xff", "unknown magic byte 255 (0xff)"),
    (b"\x00\x00\x01", "value too short: 3 bytes"),
])
def test_malformed_values_are_refused(value: bytes, message: str) -> None:
    with pytest.raises(WireFormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        wire.parse(value)
    with pytest.raises(WireFormatError):
        wire.parse_protobuf(value)


@pytest.mark.parametrize(("after_header", "message"), [
    (b"", "message-index count at byte 5: the value ends inside it"),
    (b"\x80", "message-index count at byte 5: the value ends inside it"),
    (b"\x02", "message-index count 1 is more than the 0 bytes left"),
    (b"\x04\x02", "message-index count 2 is more than the 1 bytes left"),
    (b"\x04\x02\x80", "message index 1 at byte 7: the value ends inside it"),
    (b"\x01", "negative message-index count -1"),
    (b"\x02\x01", "negative message index -1 at position 0"),
    (b"\xff" * 11, "message-index count at byte 5: longer than 10 bytes"),
])
def test_malformed_protobuf_indexes_are_refused(after_header: bytes, message: str) -> None:
    with pytest.raises(WireFormatError, match=message):
        wire.parse_protobuf(b"\x00\x00\x00\x00\x01" + after_header)


def test_frame_refuses_what_cannot_be_written() -> None:
    with pytest.raises(WireFormatError, match="schema id 4294967296 does not fit"):
        wire.frame(2**32, b"")
    with pytest.raises(WireFormatError, match="schema id -1 does not fit"):
        wire.frame(-1, b"")
    with pytest.raises(WireFormatError, match="must not be negative"):
        wire.frame_protobuf(1, [-1], b"")


def test_wire_is_sans_io() -> None:
    tree = ast.parse(Path(wire.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported, "the walk found no imports at all"
    assert not imported & {"asyncio", "socket", "ssl", "selectors", "httpx"}
