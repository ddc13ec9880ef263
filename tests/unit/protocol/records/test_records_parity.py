"""Parity: the Rust and the Python record decoders agree on damaged input, byte for byte.

Every input is decoded through ``PartitionRecords`` once per decoder; both must hand out the same
records, then stop with the same error type at the same place (after the same records). The corpus
is the fuzz suite's (``valid_fetch`` of ``build_record_batch`` over every codec, plus xerial
snappy, log-append time and offset gaps), damaged by seeded mutations and truncations, with the
CRCs sometimes recomputed so the damage reaches the decompressors and the record loop.
"""

from __future__ import annotations

import random
import struct
import time

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiokafka_lite.errors import KafkaError
from aiokafka_lite.protocol import native
from aiokafka_lite.protocol.compression import Codec
from aiokafka_lite.protocol.records.build import RecordSpec, build_record_batch
from aiokafka_lite.protocol.records.decode import PartitionRecords
from tests.decoders import require_native
from tests.unit.protocol.records import test_records_fuzz as fuzz

PARITY_CASES = 100_000
Outcome = tuple[list[tuple[object, ...]], str | None]


@pytest.fixture(autouse=True)
def _restore_decoder() -> object:
    require_native()
    before = native.decoder()
    yield
    native.use_decoder(before)


def _decode(data: bytes, check_crcs: bool, read_committed: bool) -> Outcome:
    reader = PartitionRecords("t", 0, data, 0, check_crcs=check_crcs, read_committed=read_committed,
                              aborted_transactions=[(1, 0)], max_decompressed_bytes=64 * 1024)
    got: list[tuple[object, ...]] = []
    try:
        while chunk := reader.take(7):
            got.extend(tuple(record) for record in chunk)
    except KafkaError as exc:
        return got, type(exc).__name__
    return got, None


def outcomes(data: bytes, check_crcs: bool, read_committed: bool = False) -> tuple[Outcome, Outcome]:
    native.use_decoder("python")
    python = _decode(data, check_crcs, read_committed)
    native.use_decoder("native")
    return python, _decode(data, check_crcs, read_committed)


def _specs(rng: random.Random) -> list[RecordSpec]:
    def nullable() -> bytes | None:
        return None if rng.random() < 0.2 else rng.randbytes(rng.choice((0, 1, 5, 40, 130)))

    def headers() -> list[tuple[str, bytes | None]]:
        return [] if rng.random() < 0.7 else [("h\u00e9"[: rng.randint(0, 2)], nullable())
                                              for _ in range(rng.randint(1, 3))]
    return [RecordSpec(nullable(), nullable(), headers(), rng.randint(1_600_000_000_000, 1_800_000_000_000))
            for _ in range(rng.randint(0, 8))]


def corpus(seed: int = 7) -> list[bytes]:
    """Valid fetch responses: the fuzz suite's, over every codec, plus framing variants."""
    rng = random.Random(seed)
    out: list[bytes] = []
    for _ in range(12):
        records = _specs(rng)
        for codec in Codec:
            out.append(fuzz.valid_fetch(records, codec, legacy=rng.random() < 0.3))
        gaps = [RecordSpec(s.key, s.value, s.headers, s.timestamp, offset_delta=3 * i)
                for i, s in enumerate(records)]
        out.append(build_record_batch(records, codec=Codec.SNAPPY, xerial=True, base_offset=3))
        out.append(build_record_batch(records, timestamp_type=1, partition_leader_epoch=4))
        out.append(build_record_batch(gaps, codec=rng.choice(list(Codec)), base_offset=10))
    return out


def _fix_crcs(raw: bytearray) -> None:
    """Recompute the CRC of every complete v2 batch, so damage gets past the checksum."""
    pos = 0
    while len(raw) - pos >= 61:
        length = struct.unpack_from(">i", raw, pos + 8)[0]
        end = pos + 12 + length
        if length < 49 or end > len(raw) or raw[pos + 16] != 2:
            return
        struct.pack_into(">I", raw, pos + 17, crc32c(bytes(raw[pos + 21:end])))
        pos = end


def damaged(rng: random.Random, bases: list[bytes]) -> tuple[bytes, bool]:
    """One damaged input (and whether to check CRCs)."""
    if rng.random() < 0.05:
        return rng.randbytes(rng.randint(0, 400)), False
    raw = bytearray(rng.choice(bases))
    if raw:
        # Aim most damage at the records (after the 61-byte header) where it is most interesting.
        low = 61 if len(raw) > 61 and rng.random() < 0.7 else 0
        for _ in range(rng.randint(1, 6)):
            raw[rng.randrange(low, len(raw))] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
    if rng.random() < 0.3:
        raw = raw[: rng.randint(0, len(raw))]
    fixed = rng.random() < 0.6
    if fixed:
        _fix_crcs(raw)
    return bytes(raw), fixed or rng.random() < 0.3


def test_decoders_agree_on_valid_input() -> None:
    for data in corpus():
        python, rust = outcomes(data, check_crcs=True)
        assert python == rust
        assert python[1] is None


def test_decoders_agree_on_100k_damaged_inputs() -> None:
    rng = random.Random(20240607)
    bases = corpus()
    started = time.perf_counter()
    errors = 0
    for case in range(PARITY_CASES):
        data, check_crcs = damaged(rng, bases)
        python, rust = outcomes(data, check_crcs, read_committed=case % 4 == 0)
        assert python == rust, f"case {case}: {data.hex()} check_crcs={check_crcs}"
        errors += python[1] is not None
    elapsed = time.perf_counter() - started
    print(f"parity: {PARITY_CASES} damaged inputs, {errors} errors, in {elapsed:.1f} s")


nullable_bytes = st.none() | st.binary(max_size=200)
record_specs = st.lists(st.builds(RecordSpec, nullable_bytes, nullable_bytes,
                                  st.lists(st.tuples(st.text(max_size=6), nullable_bytes), max_size=3),
                                  st.integers(0, 2**50), offset_delta=st.none()), max_size=10)


@given(record_specs, st.sampled_from(list(Codec)), st.booleans(), st.data())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_decoders_agree_hypothesis(records: list[RecordSpec], codec: Codec, legacy: bool,
                                   data: st.DataObject) -> None:
    raw = bytearray(fuzz.valid_fetch(records, codec, legacy))
    for _ in range(data.draw(st.integers(0, 6))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    raw = raw[: data.draw(st.integers(0, len(raw)))]
    if data.draw(st.booleans()):
        _fix_crcs(raw)
    for check_crcs in (True, False):
        python, rust = outcomes(bytes(raw), check_crcs)
        assert python == rust


@given(st.binary(max_size=400))
@settings(max_examples=300, deadline=None)
def test_decoders_agree_on_random_bytes(raw: bytes) -> None:
    python, rust = outcomes(raw, check_crcs=False)
    assert python == rust
