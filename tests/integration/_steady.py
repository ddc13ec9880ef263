"""A steady stream of records for rebalance tests: a reference producer in a thread, spreading
records over every partition at a fixed rate until stopped."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any

FLUSH_TIMEOUT = 60.0


def confluent_version() -> str:
    import confluent_kafka

    return str(confluent_kafka.libversion()[0])


class SteadyProducer:
    """``async with SteadyProducer(...) as producer:`` produces until the block ends, then waits (off
    the event loop) until every record is delivered, and fails naming the producer if one is not."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, per_second: float, *,
                 flush_timeout: float = FLUSH_TIMEOUT) -> None:
        import confluent_kafka  # the reference producer, as in aiokafka_lite.testing.helpers

        # Idempotent: a retry (a broker restarting) neither reorders nor repeats records in the log.
        config = {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
        if os.environ.get("AIOKAFKA_LITE_TEST_RDKAFKA_DEBUG"):  # librdkafka's own story, on stderr
            config["debug"] = os.environ["AIOKAFKA_LITE_TEST_RDKAFKA_DEBUG"]
        self._producer: Any = confluent_kafka.Producer(config)
        self._topic = topic
        self._partitions = partitions
        self._interval = 1.0 / per_second
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady producer", daemon=True)
        self.sent = 0
        self.delivered = 0  # acknowledged by the broker
        self.failures: list[str] = []
        self._flush_timeout = flush_timeout

    async def __aenter__(self) -> SteadyProducer:
        self._thread.start()
        return self

    async def __aexit__(self, exc_type: object, *exc: object) -> None:
        self._stop.set()
        # Off the event loop: the producer may need it to deliver (a TcpProxy the test runs on this
        # loop), and the consumers need it meanwhile. flush() on the loop froze both: in stop 47's
        # CI the rebootstrap test's producer, which had not yet found the replaced brokers through
        # the proxy, got no answer for as long as flush() blocked, and its records were never sent.
        queued = await asyncio.to_thread(self._finish)
        if exc_type is not None:
            return  # the test's own failure is the one to see
        assert not self.failures, self.failures[:3]
        said = (f"the reference producer (librdkafka {confluent_version()}) delivered {self.delivered} of "
                f"{self.sent} records; {queued} still queued {self._flush_timeout:.0f} s after production stopped")
        assert queued == 0, said
        assert self.delivered == self.sent, said

    def _finish(self) -> int:
        """Stop producing; deliver what is queued. Returns how many records are still queued."""
        self._thread.join(10)
        return int(self._producer.flush(self._flush_timeout))

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            partition = self.sent % self._partitions
            self._producer.produce(self._topic, value=b"%d" % self.sent, partition=partition,
                                   on_delivery=self._delivered)
            self.sent += 1
            self._producer.poll(0)
            next_at += self._interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.failures.append(str(err))
        else:
            self.delivered += 1
