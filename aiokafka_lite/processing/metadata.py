"""The finished offsets above a partition's watermark, as commit metadata (pure: no I/O).

process() commits the lowest unfinished offset (the watermark). Records above it that already
finished would be processed again after a restart; to prevent that, their offsets ride along in the
commit's metadata string and the next owner skips them.

Format: ``"akl1:"`` + urlsafe base64 (no padding) of bytes

    kind (1 byte)   0 = runs, 1 = bitmap
    base            unsigned LEB128 varint: the committed offset these bytes are relative to
    payload         runs: varints u1, f1, u2, f2, ... alternating run lengths, starting with an
                    unfinished run at ``base`` (the watermark is unfinished by definition) and ending
                    with a finished run; every run >= 1
                    bitmap: bit i (least significant bit first) = offset base + i finished

The encoder writes whichever kind is shorter. When even that exceeds ``max_bytes`` (Kafka refuses
metadata over the broker's ``offset.metadata.max.bytes``, 4096 by default), it keeps the longest
prefix of finished ranges that fits and drops the rest: a dropped offset is only processed again,
never lost (at least once holds), and ``Encoded.truncated`` says it happened.

Decoding metadata without the prefix (empty, or another application's) yields nothing: it is not
ours. Metadata with the prefix that cannot be read raises ``OffsetMetadataError``.
"""

from __future__ import annotations

import base64
import binascii
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import OffsetMetadataError

PREFIX = "akl1:"
KIND_RUNS = 0
KIND_BITMAP = 1
# A bitmap is never built wider than this (bits): beyond it, runs are always the shorter form.
_MAX_BITMAP_BITS = 8 * 65536

Range = tuple[int, int]  # [start, end): finished offsets


@dataclass(frozen=True)
class Encoded:
    metadata: str
    truncated: bool  # some finished offsets did not fit and were left out


class FinishedRanges:
    """Decoded finished offsets as sorted, disjoint, half-open ranges (a run of a billion offsets
    costs one tuple, not a billion set entries)."""

    def __init__(self, ranges: Sequence[Range] = ()) -> None:
        self.ranges = list(ranges)
        self._starts = [start for start, _ in self.ranges]

    def __contains__(self, offset: object) -> bool:
        if not isinstance(offset, int):
            return False
        i = bisect_right(self._starts, offset) - 1
        return i >= 0 and offset < self.ranges[i][1]

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def count(self) -> int:
        return sum(end - start for start, end in self.ranges)

    def above(self, offset: int) -> list[Range]:
        """The ranges (cut) holding offsets >= offset."""
        return [(max(start, offset), end) for start, end in self.ranges if end > offset]


def ranges_of(offsets: Iterable[int]) -> list[Range]:
    """Sorted half-open ranges of a set of offsets."""
    out: list[Range] = []
    for offset in sorted(set(offsets)):
        if out and out[-1][1] == offset:
            out[-1] = (out[-1][0], offset + 1)
        else:
            out.append((offset, offset + 1))
    return out


def merge(ranges: Iterable[Range]) -> list[Range]:
    out: list[Range] = []
    for start, end in sorted(r for r in ranges if r[1] > r[0]):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def encode(base: int, finished: Sequence[Range], max_bytes: int = 4096) -> Encoded:
    """Metadata for a commit at offset ``base`` with these finished ranges (all above ``base``,
    sorted and disjoint, as ``merge`` returns them) in at most ``max_bytes`` characters."""
    if base < 0:
        raise ValueError(f"base offset must be >= 0, got {base}")
    if finished and finished[0][0] <= base:
        raise ValueError(f"finished offsets must lie above the watermark {base}, got {finished[0]}")
    if not finished:
        return Encoded("", False)
    text = _encode_all(base, finished)
    if len(text) <= max_bytes:
        return Encoded(text, False)
    lo, hi = 0, len(finished)  # the longest prefix that fits: lo fits (0 ranges: ""), hi does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if len(_encode_all(base, finished[:mid])) <= max_bytes:
            lo = mid
        else:
            hi = mid
    return Encoded(_encode_all(base, finished[:lo]) if lo else "", True)


def _encode_all(base: int, finished: Sequence[Range]) -> str:
    runs = _runs_payload(base, finished)
    span = finished[-1][1] - base
    kind, payload = KIND_RUNS, runs
    if span <= _MAX_BITMAP_BITS and (span + 7) // 8 < len(runs):
        kind, payload = KIND_BITMAP, _bitmap_payload(base, finished, span)
    raw = bytes([kind]) + _varint(base) + payload
    return PREFIX + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _runs_payload(base: int, finished: Sequence[Range]) -> bytes:
    out = bytearray()
    at = base
    for start, end in finished:
        out += _varint(start - at)
        out += _varint(end - start)
        at = end
    return bytes(out)


def _bitmap_payload(base: int, finished: Sequence[Range], span: int) -> bytes:
    bits = bytearray((span + 7) // 8)
    for start, end in finished:
        for offset in range(start - base, end - base):
            bits[offset >> 3] |= 1 << (offset & 7)
    return bytes(bits)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def decode(metadata: str, committed: int) -> FinishedRanges:
    """The finished offsets recorded in ``metadata`` for a commit at offset ``committed``.
    Not ours (no prefix): empty. Ours but unreadable, or for another offset: OffsetMetadataError."""
    if not metadata.startswith(PREFIX):
        return FinishedRanges()
    body = metadata[len(PREFIX):]
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError) as exc:
        raise OffsetMetadataError(f"commit metadata is not base64: {metadata[:40]!r}") from exc
    reader = _Reader(raw)
    kind = reader.byte()
    base = reader.varint()
    if base != committed:
        raise OffsetMetadataError(f"commit metadata is for offset {base}, the committed offset is {committed}")
    if kind == KIND_RUNS:
        ranges = _decode_runs(reader, base)
    elif kind == KIND_BITMAP:
        ranges = _decode_bitmap(reader.rest(), base)
    else:
        raise OffsetMetadataError(f"commit metadata of unknown kind {kind}")
    return FinishedRanges(ranges)


def _decode_runs(reader: _Reader, base: int) -> list[Range]:
    ranges: list[Range] = []
    at = base
    while not reader.at_end():
        gap, length = reader.varint(), reader.varint()
        if gap < 1 or length < 1:
            raise OffsetMetadataError("commit metadata holds an empty run")
        ranges.append((at + gap, at + gap + length))
        at += gap + length
    return ranges


def _decode_bitmap(bits: bytes, base: int) -> list[Range]:
    if bits and bits[0] & 1:
        raise OffsetMetadataError("commit metadata marks the committed offset itself as finished")
    return ranges_of(base + i for i in range(len(bits) * 8) if bits[i >> 3] & (1 << (i & 7)))


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data, self._at = data, 0

    def at_end(self) -> bool:
        return self._at >= len(self._data)

    def byte(self) -> int:
        if self.at_end():
            raise OffsetMetadataError("commit metadata is cut short")
        value = self._data[self._at]
        self._at += 1
        return value

    def varint(self) -> int:
        value = shift = 0
        while True:
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise OffsetMetadataError("commit metadata holds a varint longer than 64 bits")

    def rest(self) -> bytes:
        rest, self._at = self._data[self._at:], len(self._data)
        return rest
