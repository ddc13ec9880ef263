"""process() on a scripted consumer: ordering under concurrency, the watermark, back-pressure,
revocation and loss, retries and the hook, how it ends."""

from __future__ import annotations

import asyncio
import logging
import random
from collections import defaultdict

import pytest

from aiokafka_lite.consumer.listener import ConsumerRebalanceListener
from aiokafka_lite.errors import ConfigError, HandlerFailedError, IllegalStateError, InvalidArgumentError, KafkaError
from aiokafka_lite.processing import Processor, decode, encode, process
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition

from .fake import FakeConfig, FakeConsumer, until

FAST = {"poll_timeout": 0.005, "commit_interval": 0.01, "retry_backoff": 0.001, "retry_backoff_max": 0.004}
DEADLINE = 20.0  # generous: a loaded machine slows the loop, never the logic


class Recorder:
    """A handler that sleeps a seeded random while, noting order and concurrency."""

    def __init__(self, seed: int = 1, longest: float = 0.003) -> None:
        self.rng = random.Random(seed)
        self.longest = longest
        self.seen: dict[tuple[int, object], list[int]] = defaultdict(list)
        self.by_partition: dict[int, list[int]] = defaultdict(list)
        self.count: dict[tuple[int, int], int] = defaultdict(int)
        self.running = 0
        self.most = 0
        self.most_per_partition: dict[int, int] = defaultdict(int)
        self._running_in: dict[int, int] = defaultdict(int)

    async def __call__(self, record) -> None:
        self.running += 1
        self._running_in[record.partition] += 1
        self.most = max(self.most, self.running)
        self.most_per_partition[record.partition] = max(self.most_per_partition[record.partition],
                                                        self._running_in[record.partition])
        self.seen[(record.partition, record.key)].append(record.offset)
        self.by_partition[record.partition].append(record.offset)
        self.count[(record.partition, record.offset)] += 1
        try:
            await asyncio.sleep(self.rng.random() * self.longest)
        finally:
            self.running -= 1
            self._running_in[record.partition] -= 1


async def run_until(fake: FakeConsumer, processor: Processor, done) -> object:
    """Run the processor until done() holds, then stop it; its result."""
    task = asyncio.create_task(processor.run())
    async with asyncio.timeout(DEADLINE):
        while not done():
            assert not task.done(), task.result()
            await asyncio.sleep(0.002)
    processor.stop()
    async with asyncio.timeout(DEADLINE):
        return await task


def all_committed(fake: FakeConsumer) -> bool:
    ends = fake.end_offsets()
    return all(fake.committed_offsets.get(tp, OffsetAndMetadata(-1)).offset == end for tp, end in ends.items())


def commits_of(fake: FakeConsumer, tp: TopicPartition) -> list[int]:
    return [commit[tp].offset for commit in fake.commits if tp in commit]


@pytest.mark.asyncio
async def test_key_order_is_kept_while_many_keys_run_at_once():
    fake = FakeConsumer.with_records(partitions=3, per_partition=300, keys=40)
    handler = Recorder()
    processor = Processor(fake, handler, concurrency=16, ordering="key", **FAST)
    result = await run_until(fake, processor, lambda: all_committed(fake))
    assert result.processed == 900
    assert result.reason == "stopped"
    assert all(n == 1 for n in handler.count.values())
    assert len(handler.count) == 900
    for offsets in handler.seen.values():
        assert offsets == sorted(offsets)
    assert handler.most == 16  # concurrency reached, never passed
    assert max(handler.most_per_partition.values()) > 1  # concurrency inside a partition
    for tp in fake.logs:
        assert commits_of(fake, tp) == sorted(commits_of(fake, tp))  # monotonic
        assert fake.committed_offsets[tp] == OffsetAndMetadata(300, "")


@pytest.mark.asyncio
async def test_partition_order_runs_one_record_per_partition():
    fake = FakeConsumer.with_records(partitions=3, per_partition=60, keys=10)
    handler = Recorder(longest=0.001)
    processor = Processor(fake, handler, concurrency=16, ordering="partition", **FAST)
    await run_until(fake, processor, lambda: all_committed(fake))
    assert max(handler.most_per_partition.values()) == 1
    assert handler.most > 1
    for offsets in handler.by_partition.values():
        assert offsets == list(range(60))


@pytest.mark.asyncio
async def test_no_ordering_runs_one_key_concurrently():
    fake = FakeConsumer.with_records(partitions=1, per_partition=100, keys=1)
    handler = Recorder()
    processor = Processor(fake, handler, concurrency=10, ordering="none", **FAST)
    result = await run_until(fake, processor, lambda: all_committed(fake))
    assert handler.most == 10
    assert result.processed == 100


@pytest.mark.asyncio
async def test_the_watermark_waits_for_a_slow_record_and_the_metadata_holds_the_rest():
    fake = FakeConsumer.with_records(partitions=1, per_partition=20, keys=20)
    tp = TopicPartition("t", 0)
    release = asyncio.Event()
    done: set[int] = set()

    async def handler(record) -> None:
        if record.offset == 3:
            await release.wait()
        done.add(record.offset)

    processor = Processor(fake, handler, concurrency=8, **FAST)
    task = asyncio.create_task(processor.run())
    async with asyncio.timeout(DEADLINE):
        await until(lambda: tp in fake.committed_offsets
                    and decode(fake.committed_offsets[tp].metadata, 3).count() == 16)
    committed = fake.committed_offsets[tp]
    assert committed.offset == 3
    assert decode(committed.metadata, 3).ranges == [(4, 20)]
    release.set()
    async with asyncio.timeout(DEADLINE):
        await until(lambda: all_committed(fake))
    processor.stop()
    await task
    assert fake.committed_offsets[tp] == OffsetAndMetadata(20, "")


@pytest.mark.asyncio
async def test_a_restart_skips_what_the_metadata_marks_finished():
    tp = TopicPartition("t", 0)
    committed = {tp: OffsetAndMetadata(3, encode(3, [(5, 8), (15, 17)]).metadata)}
    fake = FakeConsumer.with_records(partitions=1, per_partition=20, keys=4, committed_offsets=committed)
    handler = Recorder(longest=0.001)
    processor = Processor(fake, handler, concurrency=4, **FAST)
    result = await run_until(fake, processor, lambda: all_committed(fake))
    seen = sorted(offset for _, offset in handler.count)
    assert seen == [3, 4, *range(8, 15), 17, 18, 19]
    assert result.skipped == 5
    assert result.processed == 12
    assert processor.metrics()["skipped"] == 5


@pytest.mark.asyncio
async def test_unreadable_metadata_is_counted_and_processing_starts_at_the_committed_offset(caplog):
    tp = TopicPartition("t", 0)
    fake = FakeConsumer.with_records(partitions=1, per_partition=10, keys=2,
                                     committed_offsets={tp: OffsetAndMetadata(4, "akl1:!!garbage")})
    handler = Recorder(longest=0.0)
    processor = Processor(fake, handler, **FAST)
    with caplog.at_level(logging.WARNING, "aiokafka_lite.consumer.process"):
        result = await run_until(fake, processor, lambda: all_committed(fake))
    assert sorted(offset for _, offset in handler.count) == list(range(4, 10))
    assert processor.metrics()["metadata_errors"] == 1
    assert result.skipped == 0
    assert "starting at the committed offset 4" in caplog.text


@pytest.mark.asyncio
async def test_back_pressure_pauses_and_resumes_while_poll_goes_on():
    fake = FakeConsumer.with_records(partitions=2, per_partition=200, keys=50,
                                     config=FakeConfig(max_poll_records=30))
    release = asyncio.Event()

    async def handler(record) -> None:
        await release.wait()

    processor = Processor(fake, handler, concurrency=5, max_pending_records=40, **FAST)
    task = asyncio.create_task(processor.run())
    async with asyncio.timeout(DEADLINE):
        await until(lambda: fake.paused() == set(fake.logs))
        polls = len(fake.poll_times)
        await until(lambda: len(fake.poll_times) >= polls + 20)  # paused, and poll() keeps being called
    assert processor.metrics()["held"] <= 40
    assert processor.metrics()["in_flight"] == 5
    gaps = [b - a for a, b in zip(fake.poll_times, fake.poll_times[1:], strict=False)]
    assert max(gaps) < 1.0
    release.set()
    async with asyncio.timeout(DEADLINE):
        while not all_committed(fake):
            assert processor.metrics()["held"] <= 40
            await asyncio.sleep(0.001)
    processor.stop()
    result = await task
    assert result.processed == 400
    assert fake.paused() == set()


@pytest.mark.asyncio
async def test_the_application_s_own_pause_is_left_alone():
    fake = FakeConsumer.with_records(partitions=2, per_partition=20, keys=5)
    mine = TopicPartition("t", 1)
    fake.pause(mine)
    processor = Processor(fake, Recorder(longest=0.0), **FAST)
    await run_until(fake, processor, lambda: fake.committed_offsets.get(TopicPartition("t", 0)) is not None
                    and fake.committed_offsets[TopicPartition("t", 0)].offset == 20)
    assert fake.paused() == {mine}
    assert mine not in fake.committed_offsets


class Calls(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked):
        self.calls.append(("revoked", revoked))

    async def on_partitions_assigned(self, assigned):
        self.calls.append(("assigned", assigned))

    def on_partitions_lost(self, lost):
        self.calls.append(("lost", lost))


@pytest.mark.asyncio
async def test_revoke_waits_a_bounded_time_then_commits_the_watermark():
    fake = FakeConsumer.with_records(partitions=2, per_partition=30, keys=30)
    stuck, tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 0), TopicPartition("t", 1)
    started: set[tuple[int, int]] = set()
    cancelled: list[int] = []

    async def handler(record) -> None:
        started.add((record.partition, record.offset))
        if record.partition == 0 and record.offset in (5, 6):
            try:
                await asyncio.sleep(3600)  # never finishes on its own
            except asyncio.CancelledError:
                cancelled.append(record.offset)
                raise

    user = Calls()
    processor = Processor(fake, handler, concurrency=4, drain_timeout=0.05, listener=user, **FAST)
    task = asyncio.create_task(processor.run())
    async with asyncio.timeout(DEADLINE):
        await until(lambda: (0, 5) in started and (0, 6) in started and len(started) >= 32)
    fake.queue("revoke", {stuck})
    async with asyncio.timeout(DEADLINE):
        await until(lambda: ("revoked", {tp0}) in user.calls)
    assert sorted(cancelled) == [5, 6]
    assert fake.committed_offsets[tp0].offset == 5  # the lowest unfinished
    assert decode(fake.committed_offsets[tp0].metadata, 5).ranges[0][0] == 7
    assert tp0 not in processor.metrics()["watermarks"]
    assert "t-0" not in processor.metrics()["watermarks"]
    n0 = len([s for s in started if s[0] == 0])
    async with asyncio.timeout(DEADLINE):
        await until(lambda: tp1 in fake.committed_offsets and fake.committed_offsets[tp1].offset == 30)
    assert len([s for s in started if s[0] == 0]) == n0  # nothing of the revoked partition starts
    processor.stop()
    await task


@pytest.mark.asyncio
async def test_lost_partitions_cancel_their_handlers_and_commit_nothing():
    fake = FakeConsumer.with_records(partitions=2, per_partition=30, keys=30)
    tp0 = TopicPartition("t", 0)
    cancelled: list[int] = []

    async def handler(record) -> None:
        if record.partition == 0:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.append(record.offset)
                raise

    user = Calls()
    processor = Processor(fake, handler, concurrency=4, listener=user, commit_interval=3600, poll_timeout=0.005)
    task = asyncio.create_task(processor.run())
    async with asyncio.timeout(DEADLINE):
        await until(lambda: processor.metrics()["in_flight"] >= 4)
    fake.queue("lose", {tp0})
    async with asyncio.timeout(DEADLINE):
        await until(lambda: ("lost", {tp0}) in user.calls)
    assert cancelled
    assert all(tp0 not in commit for commit in fake.commits)
    processor.stop()
    result = await task
    assert tp0 not in result.committed
    assert result.committed[TopicPartition("t", 1)] == 30


@pytest.mark.asyncio
async def test_a_failing_key_retries_then_goes_to_the_hook_and_blocks_no_other_key():
    fake = FakeConsumer.with_records(partitions=2, per_partition=50, keys=5)
    attempts: dict[tuple[int, int], int] = defaultdict(int)
    hooked: list[tuple[int, int, str]] = []
    good: list[int] = []

    async def handler(record) -> None:
        attempts[(record.partition, record.offset)] += 1
        if record.key == "k3":
            raise ValueError(f"bad {record.offset}")
        good.append(record.offset)

    async def dead_letter(record, error) -> None:
        hooked.append((record.partition, record.offset, str(error)))

    processor = Processor(fake, handler, concurrency=8, max_retries=2, on_failure=dead_letter, **FAST)
    result = await run_until(fake, processor, lambda: all_committed(fake))
    bad = [(r.partition, r.offset) for log in fake.logs.values() for r in log if r.key == "k3"]
    assert sorted((p, o) for p, o, _ in hooked) == sorted(bad)
    for partition in (0, 1):  # the hook sees a key's records in order too
        offsets = [o for p, o, _ in hooked if p == partition]
        assert offsets == sorted(offsets)
    assert all(attempts[b] == 3 for b in bad)
    assert result.retries == 2 * len(bad)
    assert result.failed == len(bad)
    assert result.processed == 100 - len(bad) == len(good)
    assert hooked[0][2].startswith("bad ")


@pytest.mark.asyncio
async def test_without_a_hook_a_failure_stops_process_and_raises_after_committing_what_is_done():
    fake = FakeConsumer.with_records(partitions=1, per_partition=20, keys=20)
    tp = TopicPartition("t", 0)

    async def handler(record) -> None:
        if record.offset == 10:
            raise RuntimeError("boom")

    with pytest.raises(HandlerFailedError, match="failed 2 times") as caught:
        async with asyncio.timeout(DEADLINE):
            await process(fake, handler, concurrency=2, ordering="partition", max_retries=1, **FAST)
    assert caught.value.record.offset == 10
    assert caught.value.attempts == 2
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert fake.committed_offsets[tp].offset == 10


@pytest.mark.asyncio
async def test_a_hook_that_raises_stops_process():
    fake = FakeConsumer.with_records(partitions=1, per_partition=5, keys=5)

    async def handler(record) -> None:
        raise RuntimeError("always")

    def hook(record, error) -> None:
        raise OSError("dead-letter topic unreachable")

    with pytest.raises(HandlerFailedError, match="on_failure raised") as caught:
        async with asyncio.timeout(DEADLINE):
            await process(fake, handler, max_retries=0, on_failure=hook, **FAST)
    assert isinstance(caught.value.__cause__, OSError)


@pytest.mark.asyncio
async def test_cancelling_process_cancels_every_handler_and_re_raises():
    fake = FakeConsumer.with_records(partitions=2, per_partition=30, keys=30)
    running: set[int] = set()
    cancelled = 0

    async def handler(record) -> None:
        nonlocal cancelled
        running.add(record.offset)
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled += 1
            raise

    task = asyncio.create_task(process(fake, handler, concurrency=6, **FAST))
    async with asyncio.timeout(DEADLINE):
        await until(lambda: len(running) >= 6)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled == 6
    assert {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} == set()


@pytest.mark.asyncio
async def test_close_in_another_task_ends_process_cleanly_after_commit():
    fake = FakeConsumer.with_records(partitions=2, per_partition=40, keys=8)
    slow = asyncio.Event()

    async def handler(record) -> None:
        if record.offset >= 20:
            await slow.wait()

    processor = Processor(fake, handler, concurrency=32, drain_timeout=0.05, **FAST)
    task = asyncio.create_task(processor.run())
    async with asyncio.timeout(DEADLINE):
        await until(lambda: processor.metrics()["processed"] >= 40)
    await fake.close()  # close()'s revocation drains (bounded) and commits
    async with asyncio.timeout(DEADLINE):
        result = await task
    assert result.reason == "closed"
    assert {tp: om.offset for tp, om in fake.committed_offsets.items()} == {tp: 20 for tp in fake.logs}


@pytest.mark.asyncio
async def test_a_stop_event_ends_process():
    fake = FakeConsumer.with_records(partitions=1, per_partition=10, keys=2)
    stop = asyncio.Event()
    task = asyncio.create_task(process(fake, Recorder(longest=0.0), stop=stop, **FAST))
    async with asyncio.timeout(DEADLINE):
        await until(lambda: all_committed(fake))
    stop.set()
    async with asyncio.timeout(DEADLINE):
        assert (await task).reason == "stopped"


@pytest.mark.asyncio
async def test_handlers_longer_than_a_poll_never_open_a_poll_gap():
    fake = FakeConsumer.with_records(partitions=1, per_partition=20, keys=20)

    async def handler(record) -> None:
        await asyncio.sleep(0.15)

    processor = Processor(fake, handler, concurrency=2, ordering="partition", **FAST)
    await run_until(fake, processor, lambda: processor.metrics()["processed"] >= 4)
    gaps = [b - a for a, b in zip(fake.poll_times, fake.poll_times[1:], strict=False)]
    assert max(gaps) < 0.1  # each poll waits poll_timeout (5 ms); a loaded machine adds a little


@pytest.mark.asyncio
async def test_the_application_listener_hears_after_process_did_its_part():
    fake = FakeConsumer.with_records(partitions=1, per_partition=5, keys=5)
    tp = TopicPartition("t", 0)
    user = Calls()
    committed_when_told: list[int | None] = []
    user.on_partitions_revoked = lambda revoked: committed_when_told.append(fake.committed_offsets[tp].offset)
    processor = Processor(fake, Recorder(longest=0.0), listener=user, commit_interval=3600, poll_timeout=0.005)
    task = asyncio.create_task(processor.run())
    async with asyncio.timeout(DEADLINE):
        await until(lambda: processor.metrics()["processed"] >= 5)
    fake.queue("revoke", {tp})
    fake.queue("assign", {tp})
    async with asyncio.timeout(DEADLINE):
        await until(lambda: ("assigned", {tp}) in user.calls)
    assert committed_when_told == [5]
    processor.stop()
    await task


@pytest.mark.asyncio
async def test_a_consumer_that_auto_commits_or_has_no_group_is_refused():
    fake = FakeConsumer.with_records(partitions=1, per_partition=1, keys=1, config=FakeConfig(enable_auto_commit=True))
    with pytest.raises(ConfigError, match="enable_auto_commit=False"):
        await process(fake, Recorder())
    fake = FakeConsumer.with_records(partitions=1, per_partition=1, keys=1, config=FakeConfig(group_id=None))
    with pytest.raises(IllegalStateError, match="group_id"):
        await process(fake, Recorder())


@pytest.mark.parametrize(("setting", "value"), [
    ("concurrency", 0), ("concurrency", 2.5), ("ordering", "keys"), ("max_pending_records", 3),
    ("max_retries", -1), ("retry_backoff", float("nan")), ("drain_timeout", -1.0), ("commit_interval", True),
    ("metadata_max_bytes", -5),
])
def test_bad_settings_are_refused_by_name(setting, value):
    fake = FakeConsumer.with_records(partitions=1, per_partition=1, keys=1)
    with pytest.raises(InvalidArgumentError, match=setting):
        Processor(fake, Recorder(), concurrency=4 if setting != "concurrency" else value,
                  **{k: v for k, v in {setting: value}.items() if k != "concurrency"})


def test_a_misspelt_setting_is_refused_with_the_closest_name():
    fake = FakeConsumer.with_records(partitions=1, per_partition=1, keys=1)
    with pytest.raises(InvalidArgumentError,
                       match=r"process\(\) has no setting 'concurency'; did you mean 'concurrency'"):
        Processor(fake, Recorder(), concurency=4)
    with pytest.raises(InvalidArgumentError,
                       match="no setting 'colour'; the settings are commit_interval, concurrency"):
        Processor(fake, Recorder(), colour="blue")


@pytest.mark.asyncio
async def test_unhashable_keys_are_refused_under_key_ordering():
    fake = FakeConsumer.with_records(partitions=1, per_partition=2, keys=1)
    tp = TopicPartition("t", 0)
    fake.logs[tp] = [r._replace(key={"id": 1}) for r in fake.logs[tp]]
    with pytest.raises(InvalidArgumentError, match="hashable keys"):
        async with asyncio.timeout(DEADLINE):
            await process(fake, Recorder(), **FAST)


@pytest.mark.asyncio
async def test_a_plain_function_handler_is_refused():
    fake = FakeConsumer.with_records(partitions=1, per_partition=2, keys=1)
    with pytest.raises(InvalidArgumentError, match="coroutine function"):
        async with asyncio.timeout(DEADLINE):
            await process(fake, lambda record: None, **FAST)


@pytest.mark.asyncio
async def test_an_error_from_poll_drains_commits_and_is_raised():
    fake = FakeConsumer.with_records(partitions=1, per_partition=10, keys=10)
    tp = TopicPartition("t", 0)
    real_poll = fake.poll
    polls = 0

    async def poll(timeout: float = 1.0, max_records: int | None = None):
        nonlocal polls
        polls += 1
        if polls == 3:
            raise KafkaError("fatal from the group")
        return await real_poll(timeout, max_records)

    fake.poll = poll  # type: ignore[method-assign]
    with pytest.raises(KafkaError, match="fatal from the group"):
        async with asyncio.timeout(DEADLINE):
            await process(fake, Recorder(longest=0.01), **FAST)
    assert fake.committed_offsets[tp].offset == 10  # the records taken before were drained and committed


@pytest.mark.asyncio
async def test_a_processor_runs_once():
    fake = FakeConsumer.with_records(partitions=1, per_partition=3, keys=1)
    processor = Processor(fake, Recorder(longest=0.0), **FAST)
    await run_until(fake, processor, lambda: all_committed(fake))
    with pytest.raises(IllegalStateError, match="runs once"):
        await processor.run()


@pytest.mark.asyncio
async def test_cancelling_process_also_cancels_a_commit_under_way():
    fake = FakeConsumer.with_records(partitions=1, per_partition=10, keys=10)
    entered = asyncio.Event()

    async def slow_commit(offsets=None) -> None:
        entered.set()
        await asyncio.sleep(3600)

    fake.commit = slow_commit  # type: ignore[method-assign]
    stop = asyncio.Event()
    task = asyncio.create_task(process(fake, Recorder(longest=0.0), stop=stop, **FAST))
    async with asyncio.timeout(DEADLINE):
        await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} == set()


@pytest.mark.asyncio
async def test_quick_handlers_at_the_bound_do_not_wait_a_poll_timeout_for_room():
    """At max_pending_records poll() is still called, without waiting: a handler finishing ends the
    wait, not a record arriving. With a poll_timeout of 2 s, each of the 20 times the bound is
    reached would otherwise cost 2 s (the run passes its 20 s deadline); stop() at the end may
    still take one poll_timeout (it is noticed between polls)."""
    fake = FakeConsumer.with_records(partitions=2, per_partition=1000, keys=2000)

    async def handler(record) -> None:
        pass

    slow_polls = {**FAST, "poll_timeout": 2.0}
    processor = Processor(fake, handler, concurrency=10, max_pending_records=100, **slow_polls)
    result = await run_until(fake, processor, lambda: all_committed(fake))
    assert result.processed == 2000
    assert len(fake.poll_times) >= 20  # poll() went on being called at the bound (KIP-62)
