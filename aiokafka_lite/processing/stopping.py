"""process() and process_share() take a ``stop`` event: run the helper until it is set."""

from __future__ import annotations

import asyncio
from typing import Protocol, TypeVar

R = TypeVar("R", covariant=True)


class Stoppable(Protocol[R]):
    async def run(self) -> R: ...

    def stop(self) -> None: ...


async def run_until(helper: Stoppable[R], stop: asyncio.Event | None) -> R:
    """``helper.run()``, with ``helper.stop()`` called once ``stop`` is set; nothing left behind."""
    if stop is None:
        return await helper.run()
    waiter = asyncio.create_task(_stop_when(stop, helper))
    try:
        return await helper.run()
    finally:
        waiter.cancel()
        await asyncio.wait([waiter])


async def _stop_when(event: asyncio.Event, helper: Stoppable[R]) -> None:
    await event.wait()
    helper.stop()
