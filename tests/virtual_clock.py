"""Shared by the stateful model tests (tests/unit/processing/test_process_model.py and
tests/unit/share/test_share_model.py): an event loop on a virtual clock, and violations of a type
of their own per kind."""

from __future__ import annotations

import asyncio
import selectors

BUSY = 1e-5  # the virtual time one turn of the event loop takes

_violation_types: dict[str, type[AssertionError]] = {}


def violation(kind: str, message: str) -> AssertionError:
    """An AssertionError of a type of its own per kind: hypothesis tells distinct defects apart by
    the exception's type and origin, and shrinks each on its own."""
    cls = _violation_types.get(kind)
    if cls is None:
        name = "".join(part.capitalize() for part in kind.split("_")) + "Violation"
        cls = _violation_types[kind] = type(name, (AssertionError,), {})
    return cls(f"{kind}: {message}")


class _VirtualSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """Never blocks: where the loop would wait for its next timer, the virtual clock jumps to it.
    Each turn of the loop costs BUSY of virtual time too, so a task that only ever yields (a busy
    loop) lets time pass, as it would on a real clock, instead of freezing the clock for ever."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.busy_turns = 0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if not ready and timeout is not None and timeout > BUSY:
            self.now += timeout
        else:
            self.now += BUSY
            self.busy_turns += 1
        return ready


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop on a virtual clock: every example replays the same way (hypothesis shrinks and
    replays it), sleeps and timeouts cost no real time, and "within drain_timeout" is exact."""

    def __init__(self) -> None:
        self._clock = _VirtualSelector()
        super().__init__(self._clock)

    def time(self) -> float:
        return self._clock.now
