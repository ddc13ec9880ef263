"""poll_arrow(): one Arrow record batch per poll, the same records, positions and commits as poll()."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from aiokafka_lite import Consumer, TopicPartition
from aiokafka_lite.errors import InvalidArgumentError
from aiokafka_lite.protocol.native import DecoderName
from aiokafka_lite.testing.helpers import create_topic, produce
from tests.decoders import decoder_in_use

from ._consumers import poll_until

pytestmark = pytest.mark.asyncio
COUNT = 400
SPARK_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]


@pytest.fixture(params=["native", "python"])
def decoder(request: pytest.FixtureRequest) -> Iterator[DecoderName]:
    with decoder_in_use(request.param) as name:
        yield name


def _sent() -> list[dict[str, Any]]:
    return [{"key": None if i % 5 == 0 else f"k{i}", "value": b"" if i % 7 == 0 else f"v{i}" * (i % 13),
             "partition": i % 2, "headers": [("h", f"{i}".encode()), ("n", None)] if i % 3 == 0 else None}
            for i in range(COUNT)]


async def test_poll_arrow_hands_out_what_poll_does(kafka_broker: Any, unique_topic: str, unique_group: str,
                                                   decoder: str) -> None:
    create_topic(kafka_broker, unique_topic, partitions=2)
    produce(kafka_broker.bootstrap_servers, unique_topic, _sent())
    conf = {"bootstrap_servers": kafka_broker.bootstrap_servers, "auto_offset_reset": "earliest",
            "enable_auto_commit": False}
    async with Consumer(**conf) as reference:
        reference.assign([TopicPartition(unique_topic, p) for p in (0, 1)])
        expected = await poll_until(reference, lambda got: len(got) >= COUNT)
    tps = [TopicPartition(unique_topic, p) for p in (0, 1)]
    async with Consumer(group_id=unique_group, **conf) as consumer:
        consumer.assign(tps)
        batches = []
        while sum(b.num_rows for b in batches) < COUNT:
            batch = await consumer.poll_arrow(timeout=10, max_records=150)
            assert batch.num_rows <= 150
            batches.append(batch)
        table = pa.Table.from_batches([pa.record_batch(b) for b in batches])
        assert table.column_names == SPARK_COLUMNS
        assert consumer.metrics()["record_decoder"] == decoder
        got = sorted(zip(*(table.column(name).to_pylist() for name in SPARK_COLUMNS), strict=True),
                     key=lambda row: (row[3], row[4]))
        want = sorted(expected, key=lambda r: (r.partition, r.offset))
        assert [(k, v, t, p, o, ts_type, [(h["key"], h["value"]) for h in hs])
                for k, v, t, p, o, _ts, ts_type, hs in got] == [
            (r.key, r.value, r.topic, r.partition, r.offset, r.timestamp_type, list(r.headers)) for r in want]
        assert [int(ts.timestamp() * 1000) for *_, ts, _, _ in got] == [r.timestamp for r in want]
        ends = {tp: 1 + max(r.offset for r in want if r.partition == tp.partition) for tp in tps}
        assert {tp: await consumer.position(tp) for tp in tps} == ends
        await consumer.commit()
        assert {tp: om.offset for tp, om in (await consumer.committed(tps)).items() if om} == ends
        empty = await consumer.poll_arrow(timeout=0.2)
        assert empty.num_rows == 0
        assert pa.record_batch(empty).schema.names == SPARK_COLUMNS


async def test_poll_arrow_refuses_deserializers_before_consuming(kafka_broker: Any, unique_topic: str) -> None:
    create_topic(kafka_broker, unique_topic, partitions=1)
    produce(kafka_broker.bootstrap_servers, unique_topic, [(None, "v")])
    tp = TopicPartition(unique_topic, 0)
    async with Consumer(bootstrap_servers=kafka_broker.bootstrap_servers, auto_offset_reset="earliest",
                        value_deserializer=bytes.decode) as consumer:
        consumer.assign([tp])
        with pytest.raises(InvalidArgumentError, match="raw bytes"):
            await consumer.poll_arrow(timeout=1)
        records = await poll_until(consumer, lambda got: len(got) >= 1)
        assert [r.value for r in records] == ["v"]
