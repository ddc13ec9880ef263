"""Work of the poll path that outlives one poll(): the rebalance step, position look-ups,
metadata refreshes. A poll() starts a step and waits for it; when its timeout lapses it stops
waiting and the step goes on, so the next poll() (even poll(timeout=0)) finds it further along
or done instead of starting it again. Only close() cancels a step."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

Start = Callable[[], Coroutine[Any, Any, None]]


class PollSteps:
    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}

    async def wait(self, name: str, start: Start | None) -> asyncio.Task[None] | None:
        """Wait for the step `name`, starting it with `start()` when none is running (None: do
        not start one). Returns the finished task, whose outcome the caller takes; None when
        there was nothing to wait for."""
        task = self._tasks.get(name)
        if task is None:
            if start is None:
                return None
            task = asyncio.create_task(start(), name=f"aiokafka-lite {name}")
            self._tasks[name] = task
        if not task.done():  # a finished step costs no trip through the loop (poll(timeout=0))
            await asyncio.wait({task})
        if self._tasks.get(name) is task:
            del self._tasks[name]
        return task

    def start(self, name: str, start: Start | None, on_done: Callable[[], None]) -> asyncio.Task[None] | None:
        """Start the step `name` if none is running (None: do not start one), without waiting.
        Returns the step's task once it has finished (the caller takes its outcome), else None;
        `on_done` is called when a step started here finishes."""
        task = self._tasks.get(name)
        if task is None:
            if start is None:
                return None
            task = asyncio.create_task(start(), name=f"aiokafka-lite {name}")
            task.add_done_callback(lambda _: on_done())
            self._tasks[name] = task
        if not task.done():
            return None
        del self._tasks[name]
        return task

    def running(self, name: str) -> asyncio.Task[None] | None:
        task = self._tasks.get(name)
        return task if task is not None and not task.done() else None

    async def cancel(self, name: str | None = None) -> None:
        """Cancel and await the step `name` (None: every step)."""
        names = list(self._tasks) if name is None else [name]
        for key in names:
            task = self._tasks.pop(key, None)
            if task is None:
                continue
            if task.done():
                if not task.cancelled():
                    task.exception()  # retrieved: its outcome no longer has a taker
                continue
            task.cancel()
            await asyncio.wait({task})  # the task's own end is not raised; our cancellation is
            if not task.cancelled():
                task.exception()  # it ended some other way meanwhile: retrieved, dropped


class PollPresence:
    """Whether a poll() is waiting for the rebalance step right now. A step that keeps running
    between polls (cooperative) runs the listener callbacks only while one is: as in Java,
    where they run inside poll(), never while the application is processing records. From
    until_polled() to callbacks_done() every poll() waits (one whose timeout lapses returns
    empty) and hands out nothing."""

    def __init__(self) -> None:
        self._waiting = 0
        self._arrived = asyncio.Event()
        self._released = asyncio.Event()
        self._released.set()

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        self._waiting += 1
        self._arrived.set()
        try:
            yield
        finally:
            self._waiting -= 1
            if not self._waiting:
                self._arrived.clear()

    async def until_polled(self, wake: Callable[[], None]) -> None:
        self._released.clear()
        if not self._waiting:
            wake()  # a poll() waiting for records looks at the member again
            await self._arrived.wait()

    def callbacks_done(self) -> None:
        self._released.set()

    @property
    def held(self) -> bool:
        """A step's callbacks are due or under way: poll() must wait for them."""
        return not self._released.is_set()

    async def until_released(self, step: asyncio.Task[None]) -> None:
        """Wait until the step's callbacks are done, or the step has ended."""
        released = asyncio.ensure_future(self._released.wait())
        try:
            await asyncio.wait({step, released}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            released.cancel()
