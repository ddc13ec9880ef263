"""Suite-wide test configuration.

The Kafka broker fixtures (``kafka_broker``, ``tansu_broker``, ``apache_kafka_broker``,
``kafka39_broker``, ``mock_cluster``, ``unique_topic``, ``unique_group``) come from the pytest plugin
``aiokafka_lite.testing.plugin``, which the package registers as a ``pytest11`` entry point; choose
the default broker with ``--kafka-broker=tansu|kafka|kafka39|mock``.
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import logging
import os
import signal
import socket
import threading
import types
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


# For hunting a hang in an event loop's close() (uvloop's waits for what libuv still counts as
# active): with AIOKAFKA_LITE_CLOSE_WATCH=SECONDS (scripts/flake_hunt.py sets it), a close() that
# takes longer writes, to $AIOKAFKA_LITE_CLOSE_WATCH_DIR, the connections open just before it (who
# holds each, a few referrers up) and every thread's stack. Nothing is patched without it.
def _watch_loop_close(seconds: float, directory: Path) -> None:
    close = asyncio.Runner.close

    def watched_close(runner: asyncio.Runner) -> None:
        before = _open_connections()
        closed = threading.Event()

        def report() -> None:
            if closed.wait(seconds):
                return
            with (directory / f"close-watch-{os.getpid()}.txt").open("w") as out:
                out.write(f"the event loop's close() still runs after {seconds} s; open just before it:\n")
                out.write("\n".join(before) or "(nothing)")
                out.write("\n\nthis process's descriptors now (an epoll's lists what it waits on):\n")
                out.write(_descriptors())
                out.write("\n\nevery thread's stack:\n")
                out.flush()
                faulthandler.dump_traceback(out, all_threads=True)

        watch = threading.Thread(target=report, name="close-watch", daemon=True)
        watch.start()
        try:
            close(runner)
        finally:
            closed.set()
            watch.join()  # gone before the next test, which may count threads

    asyncio.Runner.close = watched_close  # type: ignore[method-assign,assignment]


def _descriptors() -> str:
    """Each open descriptor: what it is, and for an epoll the descriptors it waits on."""
    lines, ports = [], _tcp_ports()
    for fd in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            info = Path(f"/proc/self/fdinfo/{fd}").read_text() if "eventpoll" in target else ""
        except OSError:
            continue
        waits = " ".join(line.split()[1] for line in info.splitlines() if line.startswith("tfd:"))
        inode = target.removeprefix("socket:[").removesuffix("]") if target.startswith("socket:") else ""
        lines.append(f"fd {fd}: {target}" + (f" waits on fds {waits}" if info else "")
                     + (f" {ports[inode]}" if inode in ports else ""))
    return "\n".join(lines)


def _tcp_ports() -> dict[str, str]:
    """Socket inode -> "local port -> remote port, state" of this machine's TCP sockets."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, remote = (int(end.rsplit(":", 1)[1], 16) for end in fields[1:3])
            found[fields[9]] = f"port {local} -> {remote}, state {fields[3]}"
    return found


def _open_connections() -> list[str]:
    """Protocols whose transport is not closing and connected sockets, each with its holders."""
    found: list[str] = []
    for thing in gc.get_objects():
        if isinstance(thing, asyncio.BaseProtocol):
            for value in list(getattr(thing, "__dict__", {}).values()):
                # uvloop's transports are not asyncio.BaseTransport instances: known by their methods.
                if hasattr(value, "is_closing") and hasattr(value, "get_extra_info") and not value.is_closing():
                    found.append(f"{_name(thing)} with {_name(value)} to {value.get_extra_info('peername')}; "
                                 f"held by {_holders(thing)}")
                    break
        elif isinstance(thing, socket.socket) and thing.fileno() >= 0:
            try:
                peer = thing.getpeername()
            except OSError:
                continue
            if peer:
                found.append(f"socket fd {thing.fileno()} to {peer}; held by {_holders(thing)}")
    return found


def _name(thing: object) -> str:
    return f"{type(thing).__module__}.{type(thing).__qualname__}"


# Referrers that are plumbing, not owners: not named, and not followed further up.
_PLUMBING = (dict, list, tuple, set, types.FrameType, types.CellType, types.ModuleType, types.FunctionType,
             types.MethodType, types.CoroutineType, asyncio.Future, asyncio.AbstractEventLoop, asyncio.Runner)


def _holders(thing: object, depth: int = 3) -> str:
    """The objects that refer to ``thing``, up to ``depth`` steps (through containers, not loops)."""
    names: list[str] = []
    level, seen = [thing], {id(thing)}
    for _ in range(depth):
        above: list[object] = []
        for obj in level:
            for referrer in gc.get_referrers(obj):
                if id(referrer) in seen or referrer is level or referrer is above:
                    continue
                seen.add(id(referrer))
                if isinstance(referrer, (dict, list, tuple, set, types.CellType)):
                    above.append(referrer)
                elif not isinstance(referrer, _PLUMBING) and not _name(referrer).startswith(("uvloop.", "_cython")):
                    names.append(_name(referrer))
                    above.append(referrer)
        level = above[:100]
    return ", ".join(dict.fromkeys(names)) or "(nothing found)"


_close_watch = os.environ.get("AIOKAFKA_LITE_CLOSE_WATCH")
if _close_watch:
    _watch_loop_close(float(_close_watch), Path(os.environ.get("AIOKAFKA_LITE_CLOSE_WATCH_DIR", ".")))


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
    import uvloop

    return {"uvloop": uvloop.new_event_loop}


def pytest_report_header(config: pytest.Config) -> str:
    from aiokafka_lite.protocol import native
    if native.decoder() == "native":
        return "aiokafka-lite record decoder: native"
    return f"aiokafka-lite record decoder: python ({native.why_python()})"
