"""confluent-kafka's asyncio consumer (``confluent_kafka.aio.AIOConsumer``): ``await consume(num_messages=...)``
in a loop, the loop an asyncio user of librdkafka runs. Each call goes through a thread pool to the
blocking consumer; settings as the sync rows (``confluent.config``)."""

from __future__ import annotations

import asyncio

from confluent_kafka.aio import AIOConsumer

from benchmarks.clients._harness import Result, Spec, Stopwatch, run
from benchmarks.clients.confluent import assignment, config, extra, touch


async def _consume(spec: Spec, watch: Stopwatch) -> Result:
    consumer = AIOConsumer(config(spec))
    try:
        await consumer.assign(assignment(spec))
        count = payload = 0
        while count < spec.records:
            messages = await consumer.consume(num_messages=spec.batch, timeout=1.0)
            watch.first(len(messages))
            payload += touch(messages)
            count += len(messages)
        watch.stop()
    finally:
        await consumer.close()
    return count, payload


def consume(spec: Spec, watch: Stopwatch) -> Result:
    return asyncio.run(_consume(spec, watch))


if __name__ == "__main__":
    run(consume, extra)
