"""tests/loop_leftovers.py: uvloop's close() hangs when warnings are errors and a handle was left
open (uvloop alone shows it); the suite's uvloop loops fail the test that left it instead, naming
the holder."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator

import pytest

from tests.loop_leftovers import TellingUvloop

LEAVE_A_CONNECTION = """
import asyncio

class Holder:  # what the failure should name
    def __init__(self, writer):
        self.writer = writer

kept = []

async def leave_open():
    server = await asyncio.start_server(lambda reader, writer: kept.append(writer), "127.0.0.1", 0)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
    kept.extend([server, Holder(writer)])
"""


def test_uvloop_alone_hangs_in_close_when_warnings_are_errors() -> None:
    """The peer's defect (uvloop 0.23.0): its close() warns about each handle left open from inside
    a libuv callback; the warning raises there, the handle is never closed and close() waits for
    it. With warnings as warnings it closes at once (the control)."""
    script = LEAVE_A_CONNECTION + textwrap.dedent("""
        import uvloop
        loop = uvloop.new_event_loop()
        loop.run_until_complete(leave_open())
        loop.close()
        print("closed")
    """)
    control = subprocess.run([sys.executable, "-W", "default", "-c", script], capture_output=True, text=True,
                             timeout=30)
    assert control.stdout.strip() == "closed"
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-W", "error::ResourceWarning", "-c", script], capture_output=True,
                       timeout=5)


def test_the_suites_uvloop_fails_the_test_naming_who_holds_what_was_left() -> None:
    namespace: dict[str, object] = {}
    exec(compile(LEAVE_A_CONNECTION, "<leave_open>", "exec"), namespace)
    loop = TellingUvloop()
    loop.run_until_complete(namespace["leave_open"]())  # type: ignore[operator]
    with warnings_as_errors(), pytest.raises(pytest.fail.Exception) as failed:
        loop.close()
    assert loop.is_closed()
    message = str(failed.value)
    assert "the event loop closed with resources the test left open" in message
    assert "unclosed resource <TCPTransport" in message
    assert "protocol asyncio.streams.StreamReaderProtocol, held by" in message
    assert "Holder" in message
    with warnings.catch_warnings(record=True):  # asyncio's StreamWriter warns when collected after its loop closed
        warnings.simplefilter("always")
        namespace.clear()
        gc.collect()


def test_the_suites_uvloop_closes_quietly_when_nothing_was_left() -> None:
    loop = TellingUvloop()
    loop.run_until_complete(asyncio.sleep(0))
    with warnings_as_errors():
        loop.close()
    assert loop.is_closed()


@contextlib.contextmanager
def warnings_as_errors() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield
