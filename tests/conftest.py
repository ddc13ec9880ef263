"""Suite-wide test configuration.

The Kafka broker fixtures (``kafka_broker``, ``tansu_broker``, ``apache_kafka_broker``,
``kafka39_broker``, ``mock_cluster``, ``unique_topic``, ``unique_group``) come from the pytest plugin
``aiokafka_lite.testing.plugin``, which the package registers as a ``pytest11`` entry point; choose
the default broker with ``--kafka-broker=tansu|kafka|kafka39|mock``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.broker_logs import broker_logs, errors_since, log_sizes

# Helper modules full of asserts: rewritten like test modules, so a failure shows the values.
pytest.register_assert_rewrite("tests.conformance._kit", "tests.integration._consumers", "tests.integration._ledger",
                              "tests.integration._steady")


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist's workers start with SIGINT ignored, which every child process inherits: a
    # documented command stopped with Ctrl-C (test_doc_blocks) would never see it. Ctrl-C as usual.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # Without the plugin every broker fixture would be "not found"; say how to fix that instead.
    if not config.pluginmanager.has_plugin("aiokafka_lite"):
        raise pytest.UsageError(
            "the aiokafka_lite pytest plugin is not loaded: install the package "
            "(pip install -e '.[test]') or pass -p aiokafka_lite.testing.plugin")


class _LoopErrors(logging.Handler):
    """What asyncio reported to its exception handler during one test (a task destroyed while
    pending, an exception never retrieved, a callback that raised): each one is a defect of the
    test or of the client, so the test that caused it fails with the message."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage().splitlines()[0])


_loop_errors = _LoopErrors()
logging.getLogger("asyncio").addHandler(_loop_errors)


# A socket, transport or task a test left behind fails that test, not whichever test the garbage
# collector happens to run in next: these autouse fixtures are set up before all others of their
# scope, so they are torn down after them, and they collect the garbage then; pytest's own check of
# unraisable exceptions (a ResourceWarning from a socket's finalizer) runs after the fixtures' teardown
# and so fails this test. Where the object was created: PYTHONTRACEMALLOC=25.
# A whole collection walks every object alive (80 ms a test, which tripled the unit run), so what
# survives one is frozen, and the next test's collection walks only what was made since. An object
# that outlived its test and was dropped later is frozen too: each module's end unfreezes and
# collects everything (failing the module's last test), and so does the session's.
@pytest.fixture(autouse=True, scope="session")
def _collect_garbage_at_the_end() -> Iterator[None]:
    yield
    gc.unfreeze()


@pytest.fixture(autouse=True, scope="module")
def _collect_module_garbage() -> Iterator[None]:
    yield
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _fail_on_loop_errors()


@pytest.fixture(autouse=True)
def _collect_test_garbage() -> Iterator[None]:
    yield
    gc.collect()
    gc.freeze()
    _fail_on_loop_errors()


def _fail_on_loop_errors() -> None:
    messages, _loop_errors.messages = _loop_errors.messages, []
    if messages:
        pytest.fail("asyncio reported an error no one handled during this test: " + "; ".join(messages),
                    pytrace=False)


_close_watch = os.environ.get("AIOKAFKA_LITE_CLOSE_WATCH")
if _close_watch:
    from tests.loop_leftovers import watch_loop_close

    watch_loop_close(float(_close_watch), Path(os.environ.get("AIOKAFKA_LITE_CLOSE_WATCH_DIR", ".")))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--event-loop", choices=("asyncio", "uvloop"), default="asyncio",
                     help="the event loop the async tests run on (default: asyncio's own)")
    parser.addoption("--module-durations", type=int, default=0, metavar="N",
                     help="list the N test modules that took longest (setup, call and teardown summed)")


# Seconds per test module, for --module-durations: where the suite's time goes, which the
# slowest-tests list alone does not show when hundreds of short tests add up.
_module_seconds: Counter[str] = Counter()


_LOG_SIZES = pytest.StashKey[dict[str, int]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    item.stash[_LOG_SIZES] = log_sizes(broker_logs(getattr(item, "funcargs", {})))
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if not report.failed or report.when == "setup" or _LOG_SIZES not in item.stash:
        return
    for name, path in broker_logs(getattr(item, "funcargs", {})).items():
        errors = errors_since(path, item.stash[_LOG_SIZES].get(name, 0))
        if errors:
            report.sections.append((f"{name} logged at ERROR during the test ({path.name})", errors))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _module_seconds[report.nodeid.split("::", 1)[0]] += report.duration


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    count = config.getoption("--module-durations")
    if count and _module_seconds:
        terminalreporter.section(f"slowest {count} test modules")
        for module, seconds in _module_seconds.most_common(count):
            terminalreporter.write_line(f"{seconds:8.1f}s {module}")


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> dict[str, Callable[[], Any]]:
    """`--event-loop=uvloop` runs every async test on uvloop (pytest-asyncio's loop-factory hook)."""
    if config.getoption("--event-loop") != "uvloop":
        return {"asyncio": asyncio.new_event_loop}
    from tests.loop_leftovers import new_uvloop  # imports uvloop

    return {"uvloop": new_uvloop}


def pytest_report_header(config: pytest.Config) -> str:
    from aiokafka_lite.protocol import native
    if native.decoder() == "native":
        return "aiokafka-lite record decoder: native"
    return f"aiokafka-lite record decoder: python ({native.why_python()})"
