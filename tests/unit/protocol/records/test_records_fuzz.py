"""Property tests: round trips of arbitrary records, and damaged input only raises KafkaError."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiokafka_lite.errors import KafkaError
from aiokafka_lite.protocol.compression import Codec
from aiokafka_lite.protocol.records.build import RecordSpec, build_legacy_message_set, build_record_batch
from aiokafka_lite.protocol.records.decode import PartitionRecords, decode_records

pytestmark = pytest.mark.usefixtures("record_decoder")

nullable_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=10), nullable_bytes), max_size=4)
specs = st.lists(st.builds(RecordSpec, nullable_bytes, nullable_bytes, headers,
                           st.integers(1_600_000_000_000, 1_800_000_000_000),
                           offset_delta=st.none()), min_size=0, max_size=20)
codecs = st.sampled_from(list(Codec))


@given(specs, codecs, st.integers(0, 2**40))
@settings(max_examples=150, deadline=None)
def test_round_trip(records: list[RecordSpec], codec: Codec, base_offset: int) -> None:
    data = build_record_batch(records, base_offset=base_offset, codec=codec)
    decoded = decode_records(data, "t", 0, base_offset)
    assert [(r.offset, r.key, r.value, tuple(r.headers), r.timestamp) for r in decoded] == [
        (base_offset + i, s.key, s.value, tuple(s.headers), s.timestamp) for i, s in enumerate(records)]


def valid_fetch(records: list[RecordSpec], codec: Codec, legacy: bool) -> bytes:
    data = build_record_batch(records, codec=codec)
    data += build_record_batch(records, base_offset=len(records) + 1)
    if legacy:
        data += build_legacy_message_set(records, magic=1, base_offset=2 * len(records) + 5,
                                         codec=codec if codec != Codec.ZSTD else Codec.NONE)
    return data


def decode_all(data: bytes, check_crcs: bool) -> None:
    reader = PartitionRecords("t", 0, data, 0, check_crcs=check_crcs, read_committed=True,
                              aborted_transactions=[(1, 0)])
    for _ in range(5):
        reader.take(7)


@given(specs, codecs, st.booleans(), st.data())
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_mutations_and_truncations_raise_only_kafka_errors(records: list[RecordSpec], codec: Codec,
                                                           legacy: bool, data: st.DataObject) -> None:
    raw = bytearray(valid_fetch(records, codec, legacy))
    for _ in range(data.draw(st.integers(1, 6))):
        index = data.draw(st.integers(0, len(raw) - 1))
        raw[index] = data.draw(st.integers(0, 255))
    raw = raw[: data.draw(st.integers(0, len(raw)))]
    for check_crcs in (True, False):
        with contextlib.suppress(KafkaError):
            decode_all(bytes(raw), check_crcs)


@given(st.binary(max_size=400))
@settings(max_examples=300, deadline=None)
def test_random_bytes_raise_only_kafka_errors(raw: bytes) -> None:
    with contextlib.suppress(KafkaError):
        decode_all(raw, check_crcs=False)
