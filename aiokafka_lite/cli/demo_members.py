"""The demo's members and the ledger of what each read: the facts behind the sentences it prints."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable
from typing import Any

from .. import Consumer
from ..structs import ConsumerRecord


class Ledger:
    """Who read each record first, and which records a poll read again.

    A record is its partition and offset; an order is its key, so a record the producer retried
    into the log twice is one order, and reading both copies is no re-read.
    """

    def __init__(self) -> None:
        self.first_reader: dict[tuple[int, int], str] = {}
        self.orders: set[Any] = set()  # the keys read
        self.produced: Counter[int] = Counter()  # partition -> orders sent to it
        self.first_reads: Counter[int] = Counter()  # partition -> records read for the first time
        self.rereads: Counter[tuple[str, str]] = Counter()  # (reader, first reader) -> records

    def read(self, reader: str, records: Iterable[ConsumerRecord]) -> int:
        """Note ``records`` as read by ``reader``; how many there were."""
        count = 0
        for record in records:
            count += 1
            where = (record.partition, record.offset)
            first = self.first_reader.get(where)
            if first is None:
                self.first_reader[where] = reader
                self.first_reads[record.partition] += 1
            else:
                self.rereads[reader, first] += 1
            self.orders.add(record.key)
        return count

    def unread_on(self, partitions: Iterable[int]) -> int:
        """Orders sent to ``partitions`` that no member has read yet."""
        return sum(max(0, self.produced[p] - self.first_reads[p]) for p in partitions)


class Member:
    """One consumer of the demo group, with a poll loop that can hang in its handler and restart."""

    def __init__(self, name: str, consumer: Consumer, ledger: Ledger) -> None:
        self.name, self.consumer, self.ledger = name, consumer, ledger
        self.consumed = 0
        self.task: asyncio.Task[None] | None = None
        self._hang_requested = False
        self.stuck_batch = 0  # records in the batch its handler hangs on; 0 while it is not stuck

    @property
    def polling(self) -> bool:
        return self.task is not None and not self.task.done()

    def start_polling(self) -> None:
        self._hang_requested, self.stuck_batch = False, 0
        self.task = asyncio.create_task(self._poll_loop(), name=f"demo member {self.name}")

    def hang_on_next_batch(self) -> None:
        """The handler of the next batch that has records hangs: no poll() after it until restarted."""
        self._hang_requested = True

    async def stop_polling(self) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
            self.task = None

    async def _poll_loop(self) -> None:
        while True:
            read = self.ledger.read(self.name, await self.consumer.poll(timeout=0.2))
            self.consumed += read
            if read and self._hang_requested:
                # The loop ends here, as a handler that never returns would leave it: the records
                # were handed out, and nothing commits them (auto-commit runs inside a later poll).
                self.stuck_batch = read
                return

    def partitions(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def owns(self, count: int) -> bool:
        return len(self.consumer.assignment()) == count

    def figure(self, name: str) -> Any:
        return self.consumer.metrics().get(name)
