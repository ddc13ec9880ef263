"""The finished-offsets metadata: round trips, the size bound and its cut, garbage refused."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite.errors import OffsetMetadataError
from aiokafka_lite.processing.metadata import PREFIX, decode, encode, merge, ranges_of


def finished_sets(draw_base: int = 0):
    return st.sets(st.integers(min_value=1, max_value=5000), max_size=300)


@settings(max_examples=200, deadline=None)
@given(base=st.integers(min_value=0, max_value=2**62), offsets=finished_sets())
def test_round_trip(base, offsets):
    finished = ranges_of(base + o for o in offsets)
    encoded = encode(base, finished, max_bytes=1 << 20)
    assert not encoded.truncated
    assert decode(encoded.metadata, base).ranges == finished


def test_no_finished_offsets_is_empty_metadata():
    assert encode(7, []).metadata == ""
    assert not decode("", 7)


def test_dense_offsets_take_the_bitmap_and_sparse_ones_the_runs():
    alternating = ranges_of(range(101, 2001, 2))  # every other offset: a bitmap beats 2 varints per run
    dense = encode(100, alternating).metadata
    raw = base64.urlsafe_b64decode(dense[len(PREFIX):] + "==")
    assert raw[0] == 1
    sparse = encode(100, [(10_000, 10_001), (900_000, 900_010)]).metadata
    raw = base64.urlsafe_b64decode(sparse[len(PREFIX):] + "==")
    assert raw[0] == 0
    assert len(sparse) < 40
    assert decode(dense, 100).ranges == alternating


def test_a_long_run_costs_a_few_bytes_and_decodes_without_expanding():
    encoded = encode(5, [(6, 10**12)])
    assert len(encoded.metadata) < 30
    ranges = decode(encoded.metadata, 5)
    assert ranges.count() == 10**12 - 6
    assert 10**11 in ranges
    assert 5 not in ranges
    assert 10**12 not in ranges


@pytest.mark.parametrize("limit", [4096, 200, 40, 10])
def test_too_many_finished_offsets_are_cut_to_a_prefix_that_fits(limit):
    finished = ranges_of(o for o in range(1, 200_000, 3))  # scattered: neither form fits 4096
    encoded = encode(0, finished, max_bytes=limit)
    assert encoded.truncated
    assert len(encoded.metadata.encode()) <= limit
    kept = decode(encoded.metadata, 0).ranges
    assert kept == finished[:len(kept)]  # a prefix: the lowest finished offsets are kept
    if limit >= 40:
        assert kept


def test_finished_offsets_must_lie_above_the_base():
    with pytest.raises(ValueError, match="above the watermark"):
        encode(10, [(10, 12)])


@pytest.mark.parametrize("metadata", ["", "app-specific text", "{\"json\": 1}", "akl2:AAAA"])
def test_metadata_of_others_is_not_ours(metadata):
    assert not decode(metadata, 3)


def _ours(raw: bytes) -> str:
    return PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(("metadata", "error"), [
    (PREFIX + "@@@", "not base64"),
    (PREFIX + "A", "not base64"),
    (_ours(b""), "cut short"),
    (_ours(b"\x00"), "cut short"),
    (_ours(b"\x00\x03\x01"), "cut short"),  # a gap without its length
    (_ours(b"\x00\x03\x80"), "cut short"),  # a varint cut in the middle
    (_ours(b"\x00\x03\x00\x01"), "empty run"),
    (_ours(b"\x00\x04\x01\x01"), "for offset 4"),
    (_ours(b"\x07\x03"), "unknown kind"),
    (_ours(b"\x01\x03\x01"), "committed offset itself"),
    (_ours(b"\x00" + b"\xff" * 10 + b"\x01"), "longer than 64 bits"),
])
def test_unreadable_metadata_of_ours_raises_a_typed_error(metadata, error):
    with pytest.raises(OffsetMetadataError, match=error):
        decode(metadata, 3)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_decode_or_raise_the_typed_error(raw):
    try:
        ranges = decode(_ours(raw), 3)
    except OffsetMetadataError:
        return
    assert all(3 < start < end for start, end in ranges.ranges)


def test_merge_joins_touching_ranges():
    assert merge([(5, 7), (1, 3), (3, 4), (6, 9)]) == [(1, 4), (5, 9)]
