"""tests/broker_logs.py: a failing test's report gets the ERROR entries its brokers logged while it
ran, with their stack traces, and nothing logged before it began."""

from __future__ import annotations

from pathlib import Path

from tests.broker_logs import MAX_LINES, broker_logs, errors_since, log_sizes

BEFORE = "[2026-11-29 23:00:00,000] ERROR an older error, not this test's (kafka.server.KafkaApis)\n"
DURING = """[2026-11-29 23:00:01,000] INFO [GroupCoordinator id=1] Member joined (GroupCoordinator)
[2026-11-29 23:00:02,000] ERROR [GroupCoordinator id=1] Heartbeat failed with unexpected error (GroupCoordinator)
java.lang.IllegalStateException: something the broker did not expect
\tat org.apache.kafka.coordinator.group.GroupMetadataManager.heartbeat(GroupMetadataManager.java:1)
[2026-11-29 23:00:03,000] WARN a warning is not taken (kafka.server.KafkaApis)
"""


def test_only_the_errors_logged_since_the_offset_with_their_traces(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(BEFORE)

    class Broker:
        log_path = log

    class NeverStarted:
        @property
        def log_path(self) -> Path:
            raise RuntimeError("never started")

    logs = broker_logs({"apache_kafka_broker": Broker(), "other": NeverStarted(), "unique_topic": "t"})
    assert logs == {"apache_kafka_broker": log}
    sizes = log_sizes(logs)
    with log.open("a") as f:
        f.write(DURING)
    said = errors_since(log, sizes["apache_kafka_broker"]).splitlines()
    assert said == DURING.splitlines()[1:4]
    assert errors_since(log, log.stat().st_size) == ""
    assert errors_since(tmp_path / "gone.log", 0).startswith("(unreadable: ")


def test_a_flood_is_cut_with_a_count(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(f"[t] ERROR number {i}\n" for i in range(MAX_LINES + 5)))
    said = errors_since(log, 0).splitlines()
    assert len(said) == MAX_LINES + 1
    assert said[-1] == f"... 5 more lines in {log}"
