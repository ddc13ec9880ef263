"""A Spark standalone cluster on loopback, for tests and benchmarks of the Spark source: a master and
worker JVMs started from the pyspark distribution's own classes (``bin/spark-class``; pyspark and
Java 17 needed), so that executors and their Python workers run in processes of their own and
import aiokafka_lite as it is installed.

Each worker offers one core; executors (one per worker with ``spark.executor.cores=1``) run in the
worker's work directory, ``<work-dir>/<app id>/<executor id>``, which is how a test tells which
executor ran a task. Started and stopped like the brokers: every JVM in its own process group.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ._process import LOCALHOST, ManagedProcess, free_port, port_accepts, wait_until

START_TIMEOUT = 90.0
MASTER_READY = "I have been elected leader! New state: ALIVE"
WORKER_READY = "Successfully registered with master"


@dataclass(frozen=True)
class SparkStandalone:
    master_url: str
    worker_dirs: tuple[Path, ...]


def spark_home() -> Path:
    import pyspark  # imported here: the rest of aiokafka_lite.testing works without it
    return Path(pyspark.__file__).resolve().parent


def _environment() -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": LOCALHOST,
            "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"}


def _logged_line(process: ManagedProcess, line: str) -> bool:
    return line in process.log_tail(max_chars=200_000)


@contextmanager
def spark_standalone(workdir: Path, workers: int = 2, worker_memory: str = "1500m") -> Iterator[SparkStandalone]:
    """A master and ``workers`` workers of one core each; stopped, with their executors, on exit."""
    spark_class = str(spark_home() / "bin" / "spark-class")
    env = _environment()
    port = free_port()
    with ExitStack() as stack:
        master = ManagedProcess(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", LOCALHOST, "--port", str(port),
             "--webui-port", str(free_port())], workdir / "master.log", env=env, cwd=workdir)
        stack.callback(master.stop)
        wait_until(lambda: port_accepts(port) and _logged_line(master, MASTER_READY), timeout=START_TIMEOUT,
                   what="Spark master", process=master, interval=0.2)
        master_url = f"spark://{LOCALHOST}:{port}"
        dirs = []
        for number in range(workers):
            work_dir = workdir / f"worker-{number}"
            work_dir.mkdir()
            worker = ManagedProcess(
                [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", LOCALHOST, "--cores", "1",
                 "--memory", worker_memory, "--webui-port", str(free_port()), "--work-dir", str(work_dir),
                 master_url], workdir / f"worker-{number}.log", env=env, cwd=workdir)
            stack.callback(worker.stop)
            wait_until(partial(_logged_line, worker, WORKER_READY), timeout=START_TIMEOUT,
                       what=f"Spark worker {number}", process=worker, interval=0.2)
            dirs.append(work_dir)
        yield SparkStandalone(master_url, tuple(dirs))
