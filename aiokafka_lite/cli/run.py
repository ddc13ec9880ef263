"""Running a CLI coroutine: Ctrl-C / SIGTERM ask it to stop, Kafka errors become one line on stderr.

A command that a signal cut short exits 128 + the signal's number (130 after SIGINT, 143 after
SIGTERM), the status a shell reports for a process that signal ended, and Kafka's own tools exit
with; only after closing what it opened, without a traceback.
"""

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
# What a command returns when ``stop`` cut it short; run_command makes it the signal's exit status.
STOPPED = -1
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

Command = Callable[[asyncio.Event], Awaitable[int]]


class CommandFailed(KafkaError):
    """A failure the command explains itself (a group that does not exist, a refused reset): its
    message alone is the line on stderr, without an error type in front."""


def signal_status(sig: signal.Signals) -> int:
    """The exit status after ``sig`` stopped the command: 130 for SIGINT, 143 for SIGTERM."""
    return 128 + int(sig)


class StopSignals:
    """While entered (on the running loop's thread), SIGINT and SIGTERM set ``event`` rather than
    end the process; ``status`` is the exit status for the first of them that came."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.received: signal.Signals | None = None
        self._installed: list[signal.Signals] = []

    def _receive(self, sig: signal.Signals) -> None:
        if self.received is None:
            self.received = sig
        self.event.set()

    def __enter__(self) -> StopSignals:
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            try:
                loop.add_signal_handler(sig, self._receive, sig)
                self._installed.append(sig)
            except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
                pass
        return self

    def __exit__(self, *exc_info: object) -> None:
        loop = asyncio.get_running_loop()
        while self._installed:
            loop.remove_signal_handler(self._installed.pop())

    @property
    def status(self) -> int:
        return signal_status(self.received or signal.SIGINT)


async def _with_stop_signals(command: Command) -> int:
    """Run ``command(stop)``; SIGINT and SIGTERM set ``stop`` so the command can close what it opened."""
    with StopSignals() as signals:
        code = await command(signals.event)
    return signals.status if code == STOPPED else code


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
    """The exit code of ``command``: STOPPED is the stop signal's status; a KafkaError is reported on
    stderr as exit code 1."""
    try:
        with _warnings_on_stderr():
            return asyncio.run(_with_stop_signals(command))
    except CommandFailed as exc:
        print(f"aiokafka-lite: {exc}", file=sys.stderr)
        return EXIT_KAFKA_ERROR
    except KafkaError as exc:
        print(f"aiokafka-lite: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_KAFKA_ERROR
    except KeyboardInterrupt:  # Ctrl-C just before the signal handlers were in place, or after
        return signal_status(signal.SIGINT)


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
    """Run ``work`` as a CLI command: Ctrl-C or SIGTERM stops it cleanly (exit 130 or 143), and
    whatever fails is one line on stderr."""
    async def command(stop: asyncio.Event) -> int:
        codes: list[int] = []

        async def attempt() -> None:
            codes.append(await work())

        try:
            if not await first_of(attempt(), stop):
                return STOPPED
        except KafkaError:
            raise
        except TimeoutError as exc:  # a deadline no step mapped: still one line
            raise KafkaTimeoutError(f"{what} did not complete in time") from exc
        except Exception as exc:  # whatever it is, the user gets one line, not a traceback
            raise KafkaError(f"{what} failed: {type(exc).__name__}: {exc}") from exc
        return codes[0]

    return run_command(command)
