"""Which task holds which handed-out record, until it is decided.

Several tasks may poll one ShareConsumer at once; the acknowledgement mode is kept per task. A
record handed to a task is *held* by it until it is acknowledged. Implicit mode accepts a task's
held records when that task polls again, or when the task ends (as Java accepts whatever was
delivered); a task that ends cancelled releases them (delivered again, to any member). Explicit
mode refuses a poll from a task still holding undecided records (Java's rule, per task) and
releases what a task held when it ended. No I/O: the ShareConsumer applies the decisions this returns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from ..fetch.share.ledger import AckType
from ..fetch.share.records import ShareRecord

Key = tuple[str, int, int]  # topic, partition, offset
Owner = Any  # the asyncio.Task a record was handed to (None outside a task)


def key_of(record: ShareRecord) -> Key:
    return record[:3]  # topic, partition, offset: a slice, not three attribute look-ups


class HeldRecords:
    """Per task, its handed-out records awaiting a decision."""

    def __init__(self, on_task_end: Callable[[list[ShareRecord], AckType], None]) -> None:
        """``on_task_end(records, type)``: a task ended holding ``records``; decide them as ``type``."""
        self._by_task: dict[Owner, dict[Key, ShareRecord]] = {}
        self._owner: dict[Key, Owner] = {}
        self._on_task_end = on_task_end
        self.explicit = False

    def __len__(self) -> int:
        return len(self._owner)

    def hand_out(self, task: Owner, records: Iterable[ShareRecord]) -> None:
        held = self._by_task.get(task)
        if held is None:
            held = self._by_task[task] = {}
            if isinstance(task, asyncio.Task):
                task.add_done_callback(self._task_ended)
        owners = self._owner
        for record in records:
            key = key_of(record)
            earlier = owners.get(key)
            if earlier is not None and earlier is not task:  # its lock lapsed, and it came back
                self._by_task.get(earlier, {}).pop(key, None)
            owners[key] = task
            held[key] = record

    def of_task(self, task: Owner) -> list[ShareRecord]:
        return list(self._by_task.get(task, {}).values())

    def holds(self, record: ShareRecord) -> bool:
        """This delivery of ``record`` awaits a decision (not an earlier one whose lock lapsed)."""
        current = self.current(record)
        return current is not None and current.delivery_count == record.delivery_count

    def current(self, record: ShareRecord) -> ShareRecord | None:
        """The delivery of ``record``'s offset a task holds now, if any: its delivery_count says
        whether it is ``record``'s or a later one (the lock lapsed and the record came back)."""
        key = key_of(record)
        if key not in self._owner:
            return None
        return self._by_task.get(self._owner[key], {}).get(key)

    def every(self) -> list[ShareRecord]:
        return [r for held in self._by_task.values() for r in held.values()]

    def decided(self, record: ShareRecord) -> None:
        """``record`` was acknowledged (accept, release or reject): no task holds it any more."""
        self.decided_all((record,))

    def decided_all(self, records: Iterable[ShareRecord]) -> None:
        """``decided`` for many records (a task's whole batch, in implicit mode)."""
        owners, by_task = self._owner, self._by_task
        for record in records:
            key = key_of(record)
            held = by_task.get(owners.pop(key, None))
            if held is not None:
                held.pop(key, None)

    def forget(self) -> None:
        """The member left the group and the broker released every record it held: none is held now."""
        self._by_task.clear()
        self._owner.clear()

    def _task_ended(self, task: asyncio.Task[Any]) -> None:
        held = self._by_task.pop(task, None)
        if not held:
            return
        for key in held:
            self._owner.pop(key, None)
        # An error the task ended with stays the task's to report (not retrieved here): implicit
        # mode accepts, as Java's accepts whatever was delivered; only a cancellation releases.
        accept = not self.explicit and not task.cancelled()
        self._on_task_end(list(held.values()), AckType.ACCEPT if accept else AckType.RELEASE)
