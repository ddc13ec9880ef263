"""What process() needs of a consumer: public methods only, so a scripted fake stands in for it in
the unit tests, and `Consumer` satisfies it as it is."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from ..consumer.listener import ConsumerRebalanceListener
from ..structs import ConsumerRecord, OffsetAndMetadata, TopicPartition


class SourceConfig(Protocol):
    @property
    def group_id(self) -> str | None: ...
    @property
    def enable_auto_commit(self) -> bool: ...
    @property
    def auto_commit_interval(self) -> float: ...
    @property
    def max_poll_records(self) -> int: ...


class RecordSource(Protocol):
    @property
    def config(self) -> SourceConfig: ...

    async def close(self, timeout: float | None = ...) -> None: ...

    async def poll(self, timeout: float = ..., max_records: int | None = ...) -> Sequence[ConsumerRecord]: ...

    def seek(self, tp: TopicPartition, offset: int) -> None: ...

    def pause(self, *tps: TopicPartition) -> None: ...

    def resume(self, *tps: TopicPartition) -> None: ...

    def paused(self) -> set[TopicPartition]: ...

    def assignment(self) -> set[TopicPartition]: ...

    def subscription(self) -> set[str]: ...

    def subscribe(self, topics: Iterable[str] = ..., *, pattern: str | None = ...,
                  listener: ConsumerRebalanceListener | None = ...) -> None: ...

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = ...) -> None: ...

    async def committed(self, tps: Iterable[TopicPartition]) -> Mapping[TopicPartition, OffsetAndMetadata | None]: ...


if TYPE_CHECKING:  # mypy checks here that the Consumer satisfies the interface as it is
    from ..consumer.consumer import Consumer

    def _a_consumer_is_a_source(consumer: Consumer) -> RecordSource:
        return consumer
