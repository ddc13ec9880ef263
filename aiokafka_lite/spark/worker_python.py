"""Check, when the source is registered, that a local Spark's Python workers can import it.

Spark runs the data source in Python workers it starts itself, with the interpreter the
SparkContext took from ``PYSPARK_PYTHON`` when it was made, else ``python3`` from PATH: not
necessarily the Python that made the session. A worker unpickles the source's class before any of
this package's code runs, so when that interpreter lacks ``aiokafka_lite`` the query fails inside
Spark (``ModuleNotFoundError: No module named 'aiokafka_lite'`` in an ``AnalysisException``) and
nothing here can say why. In local mode every worker runs on this machine, so ``register()`` asks
that interpreter first and raises a ``ConfigError`` naming it and the fix. On a cluster the
executors' Pythons are elsewhere: docs/spark.md says how to set them up.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Any

from ..errors import ConfigError

# What a worker imports beyond pyspark (Spark puts its own pyspark on the workers' PYTHONPATH).
NEEDED = ("aiokafka_lite", "pyarrow")
_PROBE = ("import importlib.util, sys; "
          f"print(','.join(m for m in {NEEDED!r} if importlib.util.find_spec(m) is None))")
FIX = ("set os.environ[\"PYSPARK_PYTHON\"] = sys.executable before the SparkSession is made (this "
       "Python: {here}), or point PYSPARK_PYTHON at a Python with aiokafka-lite installed; see "
       "docs/spark.md")


def check_spark(spark: Any) -> None:
    """Raise ConfigError when ``spark`` (a SparkSession) runs locally with Python workers that
    cannot import this package. Sessions without a SparkContext (Spark Connect) are not checked."""
    try:
        context = spark.sparkContext
        master, python = str(context.master), str(context.pythonExec)
    except Exception:  # Spark Connect has no SparkContext here; its server has its own Python
        return
    if master.startswith("local"):
        problem = worker_python_problem(python)
        if problem is not None:
            raise ConfigError(problem)


def worker_python_problem(python: str) -> str | None:
    """Why the Python workers of a local Spark, running ``python``, would fail to load the source."""
    path = shutil.which(python)
    said = f"Spark's Python workers run {python!r} (PYSPARK_PYTHON when the SparkContext was made, else python3)"
    fix = FIX.format(here=sys.executable)
    if path is None:
        where = "does not exist" if os.sep in python else "is not on PATH"
        return f"{said}, which {where}: each read would fail inside Spark; {fix}"
    if os.path.abspath(path) == os.path.abspath(sys.executable):
        return None
    try:
        probe = subprocess.run([path, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{said}, found at {path}, which could not be run ({exc}); {fix}"
    missing = probe.stdout.strip() if probe.returncode == 0 else f"anything (it exited with {probe.returncode})"
    if not missing:
        return None
    return (f"{said}, found at {path}, which cannot import {missing.replace(',', ', ')}: each read would fail "
            f"inside Spark with ModuleNotFoundError in an AnalysisException; {fix}")
