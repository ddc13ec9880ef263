"""process_share() and the ShareConsumer against a model (issue 39): hypothesis state machines whose
steps are the orderings example tests never try; a failure prints the shrunk sequence of steps.

ShareProcessModel: process_share() over a scripted share source (a broker in miniature: a released
record comes back with its delivery count one higher, archived at the delivery limit; close()
takes back what was handed out). Rules: records arrive (poison: the handler always fails); a held
("gated") handler finishes, fails, raises its own CancelledError (the future it awaits is cancelled,
its task is not) or hangs; stop(); the consumer closed from another task; the task running run()
cancelled. Invariants: each delivery decided at most once, never after run() ended, and every one
decided when run() ends on an open consumer; a record is released or rejected only for its own
handler's failure (no good record's delivery count raised by another's), accepted only when its
handler succeeded; no handler runs after run() ended; run() ends within drain_timeout + a margin
after stop, close or cancel; it returns reason="stopped" only when stop() was called (a handler's
own CancelledError does not end the pool); settle: every record is eventually accepted or rejected.

DeserializerModel: the real ShareConsumer on tests/unit/share/fake.py's scripted parts (with a
fetcher that redelivers what is released), a value deserializer failing on some records. Rules:
records arrive, the application polls (max_records varies) and accepts or releases what it got.
Invariants: a record the deserializer fails on never reaches the application; a good record is
released only by the application, so each delivery it gets has delivery_count = 1 + the
application's own releases of it; settle: every good record is accepted exactly once.

Budget: AIOKAFKA_LITE_MODEL_EXAMPLES (examples per machine), AIOKAFKA_LITE_MODEL_SEED,
AIOKAFKA_LITE_MODEL_STEPS, AIOKAFKA_LITE_MODEL_IGNORE (kinds of violation to let pass).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from aiokafka_lite import ShareConsumer, errors
from aiokafka_lite.errors import ConsumerClosedError, HandlerFailedError, IllegalStateError, RecordDeserializationError
from aiokafka_lite.fetch.share.ledger import AckType
from aiokafka_lite.fetch.share.records import ShareRecord
from aiokafka_lite.processing import ShareProcessor, ShareProcessResult
from aiokafka_lite.share import consumer as share_module
from tests.virtual_clock import VirtualClockLoop, violation

from .fake import FakeCluster, FakeFetcher, FakeMember, record

EXAMPLES = int(os.environ.get("AIOKAFKA_LITE_MODEL_EXAMPLES", "300"))
SEED = int(os.environ.get("AIOKAFKA_LITE_MODEL_SEED", "39"))
STEPS = int(os.environ.get("AIOKAFKA_LITE_MODEL_STEPS", "40"))
IGNORE = tuple(kind for kind in os.environ.get("AIOKAFKA_LITE_MODEL_IGNORE", "").split(",") if kind)

KINDS = ("ok", "ok", "gated", "gated", "poison")  # repeated: the weights; shrinks towards "ok"
LIMIT = 5  # the broker's group.share.delivery.count.limit
DRAIN = 0.05
POLL = 0.002
TICK = 0.004
MARGIN = 0.05  # loop time (virtual: a loaded machine cannot stretch it)
SETTLE = 0.3

HandlerCancelledError: type[BaseException] | None = getattr(errors, "HandlerCancelledError", None)
Delivery = tuple[int, int]  # offset, delivery count


class Machine(RuleBasedStateMachine):
    """The loop and the bookkeeping of violations both machines share."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = VirtualClockLoop()
        self.problems: list[AssertionError] = []
        self.seen: Counter[str] = Counter()  # what an example did (for tuning the rules' weights)

    def fail(self, kind: str, message: str) -> None:
        if not kind.startswith(IGNORE):
            self.problems.append(violation(kind, message))

    def raise_problems(self) -> None:
        if self.problems:
            raise self.problems[0]

    def drive(self, seconds: float) -> None:
        self.loop.run_until_complete(asyncio.sleep(seconds))

    def drive_until(self, condition: Callable[[], bool], limit: float) -> bool:
        async def until() -> None:
            deadline = self.loop.time() + limit
            while self.loop.time() < deadline:
                if condition():
                    return
                await asyncio.sleep(0.001)

        self.loop.run_until_complete(until())
        return condition()

    def finish_loop(self) -> None:
        try:
            left = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
            for task in left:
                task.cancel()
            if left:
                self.loop.run_until_complete(asyncio.wait(left, timeout=5.0))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()


# ------------------------------------------------------------ process_share() over a scripted source

class ScriptedShare:
    """A share source the test scripts: one record per poll, a release redelivers the record with
    its delivery count one higher (archived at LIMIT), close() takes back what is handed out."""

    explicit = True

    def __init__(self, model: ShareProcessModel) -> None:
        self.model = model
        self.queue: list[ShareRecord] = []
        self.outstanding: dict[Delivery, ShareRecord] = {}
        self.decided: dict[Delivery, AckType] = {}
        self.closed = False
        self.renewing_now: set[Delivery] = set()

    async def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ShareRecord]:
        if self.closed:
            raise ConsumerClosedError("closed")
        if not self.queue:
            await asyncio.sleep(min(timeout, POLL))
            if self.closed:
                raise ConsumerClosedError("closed")
            return []
        rec = self.queue.pop(0)
        self.outstanding[(rec.offset, rec.delivery_count)] = rec
        return [rec]

    def acknowledge(self, rec: ShareRecord, type: AckType | str = "accept") -> None:
        assert isinstance(type, AckType)
        if self.closed:
            raise ConsumerClosedError("closed")  # not a decision: the broker took it back
        delivery = (rec.offset, rec.delivery_count)
        assert delivery not in self.renewing_now, f"{delivery} decided while its handler's block runs"
        self.model.deciding(delivery, type)
        if delivery not in self.outstanding:
            raise IllegalStateError(f"{delivery} is not awaiting a decision")
        del self.outstanding[delivery]
        self.decided[delivery] = type
        if type is AckType.RELEASE and rec.delivery_count < LIMIT:
            self.queue.append(rec._replace(delivery_count=rec.delivery_count + 1))

    @contextlib.contextmanager
    def renewing(self, rec: ShareRecord) -> Iterator[ShareRecord]:
        """The handler's block: the record's lock kept while it runs; over before any decision."""
        self.renewing_now.add((rec.offset, rec.delivery_count))
        try:
            yield rec
        finally:
            self.renewing_now.discard((rec.offset, rec.delivery_count))

    async def close(self) -> None:
        self.closed = True
        await asyncio.sleep(0)
        self.outstanding.clear()  # the broker releases what the closed member held


@dataclass(eq=False)
class Attempt:
    delivery: Delivery
    gate: asyncio.Future[None] | None = None
    own_cancel: bool = False


class ShareProcessModel(Machine):
    def __init__(self) -> None:
        super().__init__()
        self.source = ScriptedShare(self)
        self.proc: ShareProcessor | None = None
        self.run_task: asyncio.Task[None] | None = None
        self.closer: asyncio.Task[None] | None = None
        self.hook = True
        self.max_retries: int | None = 3
        self.kinds: dict[int, str] = {}
        self.outcomes: dict[Delivery, str] = {}  # each delivery's handler: ok, failed, own_cancel, cancelled
        self.running: set[Attempt] = set()
        self.gates: list[Attempt] = []
        self.final: dict[int, AckType] = {}  # accepted or rejected
        self.endings: list[str] = []
        self.ended_how: str | None = None
        self.result: ShareProcessResult | None = None
        self.error: BaseException | None = None
        self.auto_ok = False

    @property
    def over(self) -> bool:
        return self.ended_how is not None

    @property
    def running_run(self) -> bool:
        return self.run_task is not None and not self.over and not self.endings

    # ------------------------------------------------------------ the application's code

    async def handler(self, rec: ShareRecord) -> None:
        delivery = (rec.offset, rec.delivery_count)
        if self.over:
            self.fail("handler_after_end", f"the handler of {delivery} started after run() {self.ended_how}")
        attempt = Attempt(delivery)
        self.running.add(attempt)
        self.outcomes[delivery] = "started"
        try:
            kind = self.kinds[rec.offset]
            await asyncio.sleep(0)
            if kind == "poison":
                raise ValueError(f"poison at {rec.offset}")
            if kind == "gated" and not self.auto_ok:
                attempt.gate = asyncio.get_running_loop().create_future()
                self.gates.append(attempt)
                await attempt.gate
        except asyncio.CancelledError:
            self.outcomes[delivery] = "own_cancel" if attempt.own_cancel else "cancelled"
            raise
        except ValueError:
            self.outcomes[delivery] = "failed"
            raise
        else:
            self.outcomes[delivery] = "ok"
        finally:
            self.running.discard(attempt)

    async def on_failure(self, rec: ShareRecord, error: Exception) -> None:
        delivery = (rec.offset, rec.delivery_count)
        if self.over:
            self.fail("handler_after_end", f"on_failure for {delivery} after run() {self.ended_how}")
        if self.outcomes.get(delivery) == "own_cancel" and (
                HandlerCancelledError is None or not isinstance(error, HandlerCancelledError)):
            self.fail("own_cancel_error", f"on_failure got {error!r} for a handler's own CancelledError")
        await asyncio.sleep(0)

    def deciding(self, delivery: Delivery, kind: AckType) -> None:
        """The source is told to decide ``delivery``: is that this delivery's decision to make?"""
        if self.over:
            self.fail("decided_after_end", f"{delivery} decided {kind.name} after run() {self.ended_how}")
        if delivery in self.source.decided:
            self.fail("decided_twice", f"{delivery} decided {kind.name} after {self.source.decided[delivery].name}")
            return
        if delivery not in self.source.outstanding:
            self.fail("decided_unknown", f"{delivery} decided {kind.name}; it was never handed out")
            return
        outcome = self.outcomes.get(delivery)
        if kind is AckType.ACCEPT and outcome != "ok":
            self.fail("accepted_a_failure", f"{delivery} accepted; its handler: {outcome}")
        if kind in (AckType.RELEASE, AckType.REJECT) and outcome not in ("failed", "own_cancel", "cancelled"):
            self.fail(f"{kind.name.lower()}d_without_failure",
                      f"{delivery} {kind.name.lower()}d; its own handler: {outcome} (another record's failure "
                      "raised its delivery count)")
        if kind in (AckType.ACCEPT, AckType.REJECT):
            self.final[delivery[0]] = kind

    async def run(self) -> None:
        assert self.proc is not None
        try:
            self.result = await self.proc.run()
        except BaseException as exc:  # every way out is checked below
            self.error = exc
        finally:
            if isinstance(self.error, asyncio.CancelledError):
                self.ended_how = "cancel"
            elif self.result is not None:
                self.ended_how = self.result.reason
            else:
                self.ended_how = "error"
            self.at_end()

    def at_end(self) -> None:
        how, asked = self.ended_how, set(self.endings)
        if self.running:
            self.fail("handler_outlived_run", f"{sorted(a.delivery for a in self.running)} running when run() "
                                              f"ended ({how})")
        if not self.source.closed and self.source.outstanding:
            self.fail(f"undecided_after_{how}", f"run() ended ({how}) leaving {sorted(self.source.outstanding)} "
                                                "undecided")
        if isinstance(self.error, asyncio.CancelledError):
            if "cancel" not in asked:
                self.fail("cancelled_unasked", "run() raised CancelledError; nobody cancelled it")
        elif isinstance(self.error, HandlerFailedError):
            if self.hook:
                self.fail("run_raised", f"run() raised {self.error!r} though on_failure was given")
        elif self.error is not None:
            self.fail("run_raised", f"run() raised {self.error!r}")
        elif self.result is not None:
            if self.result.reason == "stopped" and "stop" not in asked:
                self.fail("stopped_unasked", f"run() returned {self.result}; stop() was not called")
            if self.result.reason == "closed" and "close" not in asked:
                self.fail("closed_unasked", f"run() returned {self.result}; the consumer was not closed")

    # ------------------------------------------------------------ rules

    @initialize(concurrency=st.sampled_from([2, 1, 4]), max_retries=st.sampled_from([1, 0, 2, None]),
                hook=st.sampled_from([True, True, True, False]))
    def start(self, concurrency: int, max_retries: int | None, hook: bool) -> None:
        self.hook, self.max_retries = hook, max_retries

        async def build() -> None:
            self.proc = ShareProcessor(self.source, self.handler, on_failure=self.on_failure if hook else None,
                                       concurrency=concurrency, max_retries=max_retries, drain_timeout=DRAIN,
                                       poll_timeout=POLL)
            self.run_task = asyncio.create_task(self.run())

        self.loop.run_until_complete(build())
        self.drive(TICK)

    @precondition(lambda self: not self.over)
    @rule(kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=3))
    def arrive(self, kinds: list[str]) -> None:
        for kind in kinds:
            offset = len(self.kinds)
            self.kinds[offset] = kind
            self.source.queue.append(record(offset))
        self.drive(TICK)

    def waiting_gates(self) -> list[Attempt]:
        self.gates = [a for a in self.gates if a.gate is not None and not a.gate.done()]
        return self.gates

    def pick(self, index: int) -> Attempt:
        gates = self.waiting_gates()
        return gates[index % len(gates)]

    @precondition(lambda self: self.waiting_gates())
    @rule(index=st.integers(0, 7), fail=st.booleans())
    def release(self, index: int, fail: bool) -> None:
        """A held handler finishes or fails."""
        gate = self.pick(index).gate
        assert gate is not None
        if fail:
            gate.set_exception(ValueError("failed"))
        else:
            gate.set_result(None)
        self.drive(TICK)

    @precondition(lambda self: self.waiting_gates())
    @rule(index=st.integers(0, 7))
    def own_cancel(self, index: int) -> None:
        """A held handler raises its own CancelledError (the future it awaits is cancelled)."""
        attempt = self.pick(index)
        assert attempt.gate is not None
        self.seen["own_cancel"] += 1
        attempt.own_cancel = True
        attempt.gate.cancel()
        self.drive(TICK)

    @rule()
    def wait(self) -> None:
        self.drive(TICK * 4)

    @precondition(lambda self: self.running_run)
    @rule(how=st.sampled_from(["stop", "close", "cancel"]), now=st.integers(0, 2))
    def end(self, how: str, now: int) -> None:
        """stop(), the consumer closed from another task, or a cancel of the task running run()
        (one time in three: the rest of the time a tick, so that runs last a while)."""
        if now:
            self.drive(TICK)
            return
        self.seen[f"end_{how}"] += 1
        self.endings.append(how)
        assert self.proc is not None
        assert self.run_task is not None
        if how == "stop":
            self.proc.stop()
        elif how == "cancel":
            self.run_task.cancel()
        else:
            self.closer = self.loop.create_task(self.source.close())
        limit = DRAIN + POLL + MARGIN
        if not self.drive_until(lambda: self.over, limit):
            self.fail(f"run_outlived_{how}", f"run() still running {limit:.3f} s after {how} (handlers running: "
                                             f"{sorted(a.delivery for a in self.running)})")

    @precondition(lambda self: self.running_run)
    @rule()
    def settle(self) -> None:
        """Every gated handler succeeds from now on: every record is soon accepted or rejected
        (a poison record under max_retries=None is left to the broker's limit)."""
        self.auto_ok = True
        for attempt in self.waiting_gates():
            assert attempt.gate is not None
            attempt.gate.set_result(None)

        def open_records() -> list[int]:
            return [offset for offset, kind in self.kinds.items() if offset not in self.final
                    and not (kind == "poison" and self.max_retries is None)
                    and not any(d[0] == offset and d[1] >= LIMIT and k is AckType.RELEASE
                                for d, k in self.source.decided.items())]

        done = self.drive_until(lambda: self.over or not open_records(), SETTLE)
        self.auto_ok = False
        if not done:
            self.fail("stalled", f"records never accepted nor rejected: {open_records()[:6]}; handlers running "
                                 f"{sorted(a.delivery for a in self.running)}")

    # ------------------------------------------------------------ invariants

    @invariant()
    def nothing_went_wrong(self) -> None:
        self.raise_problems()

    def teardown(self) -> None:
        try:
            if self.run_task is not None and not self.run_task.done():
                assert self.proc is not None
                self.proc.stop()
                if not self.drive_until(lambda: self.run_task is None or self.run_task.done(), DRAIN + MARGIN):
                    self.run_task.cancel()
                    self.loop.run_until_complete(asyncio.wait([self.run_task], timeout=5.0))
            if self.closer is not None:
                self.loop.run_until_complete(asyncio.wait([self.closer], timeout=5.0))
        finally:
            self.finish_loop()


# ------------------------------------------------------------ the ShareConsumer and a failing deserializer

def text(value: bytes | None) -> str:
    if value is None or value.startswith(b"BAD"):
        raise ValueError(f"cannot read {value!r}")
    return value.decode()


class RedeliveringFetcher(FakeFetcher):
    """FakeFetcher as a broker would answer: a released record is delivered again with its delivery
    count one higher, archived at LIMIT."""

    def __init__(self) -> None:
        super().__init__()
        self.archived: set[int] = set()
        self.raw: dict[int, ShareRecord] = {}  # as the broker has them (the application sees them deserialized)

    def add(self, *records: ShareRecord) -> None:
        for rec in records:
            self.raw.setdefault(rec.offset, rec)
        super().add(*records)

    def acknowledge(self, rec: ShareRecord, kind: AckType) -> None:
        super().acknowledge(rec, kind)
        if kind is AckType.RELEASE:
            if rec.delivery_count >= LIMIT:
                self.archived.add(rec.offset)
            else:
                self.add(self.raw[rec.offset]._replace(delivery_count=rec.delivery_count + 1))


class DeserializerModel(Machine):
    def __init__(self) -> None:
        super().__init__()
        self.patch = pytest.MonkeyPatch()
        self.fetcher = RedeliveringFetcher()
        self.patch.setattr(share_module, "make_cluster", lambda config: FakeCluster())
        self.patch.setattr(share_module, "make_member", lambda config, cluster, on_change: FakeMember(on_change))
        self.patch.setattr(share_module, "make_fetcher", lambda config, cluster, member_id: self.fetcher)
        self.share: ShareConsumer | None = None
        self.bad: set[int] = set()
        self.offsets = 0
        self.app_releases: defaultdict[int, int] = defaultdict(int)
        self.accepted: Counter[int] = Counter()

    @initialize(max_poll_records=st.integers(1, 4))
    def start(self, max_poll_records: int) -> None:
        self.share = ShareConsumer("jobs", bootstrap_servers="127.0.0.1:1", group_id="workers",
                                   share_acknowledgement_mode="explicit", value_deserializer=text,
                                   max_poll_records=max_poll_records)

    @rule(bad=st.lists(st.booleans(), min_size=1, max_size=4))
    def arrive(self, bad: list[bool]) -> None:
        for is_bad in bad:
            offset = self.offsets
            self.offsets += 1
            if is_bad:
                self.bad.add(offset)
            self.fetcher.add(record(offset, value=b"BAD" if is_bad else f"good{offset}".encode()))

    async def poll_and_decide(self, releases: list[bool], max_records: int | None) -> int:
        """One poll in a task of its own (as a worker's); each record accepted or released."""
        assert self.share is not None
        try:
            got = await self.share.poll(0.01, max_records=max_records)
        except RecordDeserializationError as exc:
            if exc.offset not in self.bad:
                self.fail("good_record_refused", f"poll() raised for offset {exc.offset}: {exc}")
            return -1
        for i, rec in enumerate(got):
            if rec.offset in self.bad:
                self.fail("bad_record_handed_out", f"offset {rec.offset} reached the application")
            expected = 1 + self.app_releases[rec.offset]
            if rec.delivery_count != expected:
                self.fail("delivery_count_raised", f"offset {rec.offset} delivered with count {rec.delivery_count}; "
                                                   f"the application released it {expected - 1} times")
            if releases and releases[i % len(releases)]:
                self.app_releases[rec.offset] += 1
                self.share.acknowledge(rec, "release")
            else:
                self.accepted[rec.offset] += 1
                self.share.acknowledge(rec, "accept")
        return len(got)

    @rule(releases=st.lists(st.booleans(), max_size=3), max_records=st.sampled_from([None, 1, 2]))
    def app_polls(self, releases: list[bool], max_records: int | None) -> None:
        self.loop.run_until_complete(self.loop.create_task(self.poll_and_decide(releases, max_records)))

    @rule()
    def settle(self) -> None:
        """The application polls and accepts until nothing is left: every good record accepted once."""
        for _ in range(4 * (self.offsets + 1) * LIMIT):
            got = self.loop.run_until_complete(self.loop.create_task(self.poll_and_decide([], None)))
            if got == 0 and not self.fetcher.queue:
                break  # nothing handed out, nothing raised, nothing left to fetch
        good = [o for o in range(self.offsets) if o not in self.bad]
        missing = [o for o in good if self.accepted[o] != 1]
        if missing:
            self.fail("good_record_not_accepted_once", f"offsets {missing[:6]} accepted "
                                                       f"{[self.accepted[o] for o in missing[:6]]} times")

    @invariant()
    def only_the_application_releases_good_records(self) -> None:
        released: Counter[int] = Counter(o for o, kind in self.fetcher.acks if kind is AckType.RELEASE)
        for offset, times in sorted(released.items()):
            if offset not in self.bad and times > self.app_releases[offset]:
                self.fail("good_record_released_by_consumer",
                          f"offset {offset} released {times} times; the application released it "
                          f"{self.app_releases[offset]} times (another record's failure raised its delivery count)")
        self.raise_problems()

    def teardown(self) -> None:
        try:
            if self.share is not None:
                self.loop.run_until_complete(self.share.close(1.0))
        finally:
            try:
                self.finish_loop()
            finally:
                self.patch.undo()


SETTINGS = settings(max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def test_process_share_keeps_the_model_s_invariants() -> None:
    """The shrunk steps of a failure are printed (state.start(...), state.arrive(...), ...)."""
    run_state_machine_as_test(seed(SEED)(ShareProcessModel), settings=SETTINGS)


def test_a_bad_record_does_not_raise_the_delivery_count_of_good_ones() -> None:
    run_state_machine_as_test(seed(SEED)(DeserializerModel), settings=SETTINGS)

