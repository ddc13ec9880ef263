"""What an event loop's close() leaves open, or hangs on, named with who holds it.

uvloop's close() warns (ResourceWarning) about each libuv handle still open and then closes it,
from inside a libuv callback. When warnings are errors, as in this suite, the warning raises there,
is printed as "Exception ignored", and the handle is never closed: close() then waits for it
forever (uvloop 0.23.0; ``tests/unit/test_loop_leftovers.py`` shows it with uvloop alone).
``new_uvloop()`` makes the loops the suite runs on with ``--event-loop=uvloop``: their close()
records those warnings instead, so every handle closes, and then fails the test that left them,
naming each handle's protocol and who holds it. asyncio's own loop warns when a transport is
collected instead (tests/conftest.py's garbage collection after each test).

``watch_loop_close(seconds, directory)`` (with AIOKAFKA_LITE_CLOSE_WATCH=SECONDS, which
scripts/flake_hunt.py sets) is for hunting any other hang in close(): a close() that takes longer
writes, to ``directory``, the connections open just before it, this process's descriptors and
every thread's stack.
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import os
import re
import socket
import threading
import types
import warnings
from pathlib import Path

import pytest
import uvloop


class TellingUvloop(uvloop.Loop):
    """A uvloop loop whose close() fails, naming them, when handles were left open (see above)."""

    def close(self) -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            super().close()
        left = []
        for warning in caught:
            if issubclass(warning.category, ResourceWarning):
                left.append(_owner_of(str(warning.message)))
            else:
                warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
        if left:
            pytest.fail("the event loop closed with resources the test left open: " + "; ".join(left), pytrace=False)


def new_uvloop() -> asyncio.AbstractEventLoop:
    return TellingUvloop()


def _owner_of(message: str) -> str:
    """uvloop's "unclosed resource <TCPTransport closed=False ... 0xADDRESS>", with the protocol of
    that transport (found by its id) and who holds the protocol."""
    address = re.search(r"0x([0-9a-f]+)>", message)
    if address is None:
        return message
    wanted = int(address.group(1), 16)
    for thing in gc.get_objects():
        held = getattr(thing, "__dict__", {}).values() if isinstance(thing, asyncio.BaseProtocol) else ()
        if any(id(value) == wanted for value in held):
            return f"{message}: protocol {_name(thing)}, held by {_holders(thing)}"
    return message


def watch_loop_close(seconds: float, directory: Path) -> None:
    close = asyncio.Runner.close

    def watched_close(runner: asyncio.Runner) -> None:
        before = open_connections()
        closed = threading.Event()

        def report() -> None:
            if closed.wait(seconds):
                return
            with (directory / f"close-watch-{os.getpid()}.txt").open("w") as out:
                out.write(f"the event loop's close() still runs after {seconds} s; open just before it:\n")
                out.write("\n".join(before) or "(nothing)")
                out.write("\n\nthis process's descriptors now (an epoll's lists what it waits on):\n")
                out.write(descriptors())
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


def descriptors() -> str:
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


def open_connections() -> list[str]:
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
