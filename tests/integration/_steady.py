"""A steady stream of records for rebalance tests: a reference producer in a thread, spreading
records over every partition at a fixed rate until stopped."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

FLUSH_TIMEOUT = 60.0


def confluent_version() -> str:
    import confluent_kafka

    return str(confluent_kafka.libversion()[0])


class SteadyProducer:
    def __init__(self, bootstrap: str, topic: str, partitions: int, per_second: float) -> None:
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

    def __enter__(self) -> SteadyProducer:
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        # The records still queued go out now; a peer that cannot deliver them in a minute is the
        # peer's failure, said here: otherwise they would look lost by the consumer.
        queued = self._producer.flush(FLUSH_TIMEOUT)
        if exc_type is not None:
            return  # the test's own failure is the one to see
        assert not self.failures, self.failures[:3]
        said = (f"the reference producer (librdkafka {confluent_version()}) delivered {self.delivered} of "
                f"{self.sent} records; {queued} still queued {FLUSH_TIMEOUT:.0f} s after production stopped")
        assert queued == 0, said
        assert self.delivered == self.sent, said

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
