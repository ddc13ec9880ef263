"""Running a CLI coroutine: Ctrl-C / SIGTERM ask it to stop, Kafka errors become one line on stderr."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator

from ..errors import KafkaError, KafkaTimeoutError

EXIT_OK = 0
EXIT_KAFKA_ERROR = 1

Command = Callable[[asyncio.Event], Awaitable[int]]


class CommandFailed(KafkaError):
    """A failure the command explains itself (a group that does not exist, a refused reset): its
    message alone is the line on stderr, without an error type in front."""


async def _with_stop_signals(command: Command) -> int:
    """Run ``command(stop)``; SIGINT and SIGTERM set ``stop`` so the command can close what it opened."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
            pass
    try:
        return await command(stop)
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


@contextlib.contextmanager
def _warnings_on_stderr() -> Iterator[None]:
    """The client's WARNINGs (e.g. a bootstrap server that cannot be reached) as one line each on
    stderr, in the CLI's own voice; nothing below WARNING, so a healthy run prints nothing extra."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("aiokafka-lite: %(message)s"))
    logger = logging.getLogger("aiokafka_lite")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def run_command(command: Command) -> int:
    """The exit code of ``command``; a KafkaError is reported on stderr as exit code 1."""
    try:
        with _warnings_on_stderr():
            return asyncio.run(_with_stop_signals(command))
    except CommandFailed as exc:
        print(f"aiokafka-lite: {exc}", file=sys.stderr)
        return EXIT_KAFKA_ERROR
    except KafkaError as exc:
        print(f"aiokafka-lite: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_KAFKA_ERROR
    except KeyboardInterrupt:  # a second Ctrl-C while closing
        return EXIT_OK


async def first_of(awaitable: Awaitable[object], stop: asyncio.Event) -> bool:
    """Await ``awaitable`` unless ``stop`` is set first (then cancel it); True if it finished."""
    work = asyncio.ensure_future(awaitable)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        work.cancel()  # we were cancelled: do not leave the work running behind us
        raise
    finally:
        stopper.cancel()
    if work.done():
        work.result()
        return True
    work.cancel()
    try:
        await work
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # we are being cancelled ourselves, not just the work
    return False


def run_step_command(what: str, work: Callable[[], Awaitable[int]]) -> int:
    """Run ``work`` as a CLI command: Ctrl-C stops it cleanly, and whatever fails is one line on stderr."""
    async def command(stop: asyncio.Event) -> int:
        codes: list[int] = []

        async def attempt() -> None:
            codes.append(await work())

        try:
            if not await first_of(attempt(), stop):
                return EXIT_OK
        except KafkaError:
            raise
        except TimeoutError as exc:  # a deadline no step mapped: still one line
            raise KafkaTimeoutError(f"{what} did not complete in time") from exc
        except Exception as exc:  # whatever it is, the user gets one line, not a traceback
            raise KafkaError(f"{what} failed: {type(exc).__name__}: {exc}") from exc
        return codes[0]

    return run_command(command)
