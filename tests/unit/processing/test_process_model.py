"""process() against a model (issue 39): a hypothesis state machine drives a Processor over a
scripted RecordSource and checks, after every step, what must hold whatever the ordering of events.

Rules: records arrive (keys, offset gaps, poison records whose handler always fails); a held
("gated") handler finishes, fails, raises its own CancelledError (it awaited a future the test
cancels: the handler's task itself is not cancelled) or hangs (is never released); partitions
are revoked, lost, assigned again; stop(); consumer.close() from another task; the task running
run() is cancelled; after run() ended, the listener process() had is fired and the application
commits. The event loop is driven from the rules (a new loop per example, a few milliseconds per
step), so a failure replays as the printed, shrunk sequence of steps.

Invariants (each kind of violation is its own exception type, so hypothesis reports and shrinks
distinct defects separately):
  a. a committed offset never moves backward;
  b. every record below a committed watermark (and in the committed metadata) was handled (the
     handler succeeded or on_failure took it); handled twice only across a revocation or a loss;
  c. ordering "key"/"partition": no record of a lane starts before the previous one ended, and
     within one assignment they start in offset order;
  d. metrics(): held and tracked_offsets stay within settings.bound;
  e. no handler runs after run() returned or raised;
  f. run() ends within drain_timeout + a margin after stop(), close() or a cancel;
  g. after run() ended nothing more is committed by process() (its old listener fired, close(),
     the application's own commits), and the consumer's listener is the application's again;
  h. a handler's own CancelledError is a failure: the key never stalls (settle: every record of an
     assigned partition is handled), on_failure gets a HandlerCancelledError, run() goes on.

Budget: AIOKAFKA_LITE_MODEL_EXAMPLES (examples per machine), AIOKAFKA_LITE_MODEL_SEED.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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

from aiokafka_lite import errors
from aiokafka_lite.consumer.listener import ConsumerRebalanceListener, call_listener
from aiokafka_lite.errors import CommitFailedError, ConsumerClosedError, HandlerFailedError, IllegalStateError
from aiokafka_lite.processing import Processor, ProcessResult, decode
from aiokafka_lite.processing.listener import ProcessingListener
from aiokafka_lite.structs import ConsumerRecord, OffsetAndMetadata, TopicPartition
from tests.virtual_clock import VirtualClockLoop, violation

EXAMPLES = int(os.environ.get("AIOKAFKA_LITE_MODEL_EXAMPLES", "300"))
SEED = int(os.environ.get("AIOKAFKA_LITE_MODEL_SEED", "39"))
STEPS = int(os.environ.get("AIOKAFKA_LITE_MODEL_STEPS", "40"))
# Kinds of violation to let pass (prefixes, comma-separated), to see what hides behind a known one:
# AIOKAFKA_LITE_MODEL_IGNORE=listener_left shows what a process() that leaves its listener commits.
IGNORE = tuple(kind for kind in os.environ.get("AIOKAFKA_LITE_MODEL_IGNORE", "").split(",") if kind)

TOPIC = "t"
TPS = (TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1))
KEYS: tuple[str | None, ...] = ("a", "b", "c", None)
KINDS = ("ok", "ok", "gated", "gated", "poison")  # repeated: the weights; shrinks towards "ok"
DRAIN = 0.05
POLL = 0.002
COMMIT_INTERVAL = 0.01
TICK = 0.004  # the loop time each ordinary step lets pass
MARGIN = 0.05  # loop time (virtual: a loaded machine cannot stretch it)
SETTLE = 0.3  # how long a settle step waits for every record to be handled

HandlerCancelledError: type[BaseException] | None = getattr(errors, "HandlerCancelledError", None)

_in_revocation: contextvars.ContextVar[bool] = contextvars.ContextVar("in_revocation", default=False)


@dataclass(frozen=True)
class SourceConfig:
    group_id: str | None = "model"
    enable_auto_commit: bool = False
    auto_commit_interval: float = COMMIT_INTERVAL
    max_poll_records: int = 4


@dataclass
class Commit:
    offsets: dict[TopicPartition, OffsetAndMetadata]
    by_app: bool
    after_end: str | None  # how run() had ended when the commit landed; None while it runs


class ScriptedSource:
    """A RecordSource the test scripts: logs that grow, rebalances played at the next poll() (as a
    real consumer runs its listener inside poll()), close() as Consumer.close() (closed at once for
    other callers, then the listener's revocation, which may still commit; a second call waits for
    the first), commits of partitions no longer assigned refused (the generation moved on)."""

    def __init__(self, model: ProcessModel) -> None:
        self.model = model
        self.config = SourceConfig()
        self.logs: dict[TopicPartition, list[ConsumerRecord]] = {tp: [] for tp in TPS}
        self.committed_offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        self.commits: list[Commit] = []
        self.listener: ConsumerRebalanceListener | None = None
        self.listeners: list[ConsumerRebalanceListener | None] = []  # every subscribe()'s, in order
        self.topics = [TOPIC]
        self.closed = False
        self.closing: asyncio.Event | None = None
        self.assigned: set[TopicPartition] = set(TPS)
        self.paused_tps: set[TopicPartition] = set()
        self.positions: dict[TopicPartition, int] = dict.fromkeys(TPS, 0)
        self.epoch: dict[TopicPartition, int] = dict.fromkeys(TPS, 0)  # +1 at each rebalance event
        self.delivered_epoch: dict[tuple[TopicPartition, int], int] = {}
        self.events: list[tuple[str, TopicPartition]] = []
        self.app_committing = False

    # ------------------------------------------------------------ the script

    def append(self, tp: TopicPartition, gap: int, key: str | None) -> ConsumerRecord:
        log = self.logs[tp]
        offset = (log[-1].offset + 1 if log else 0) + gap
        rec = ConsumerRecord(tp.topic, tp.partition, offset, 0, 0, key, f"v{offset}".encode(), [])
        log.append(rec)
        return rec

    def pending(self, tp: TopicPartition) -> bool:
        return any(t == tp for _, t in self.events)

    async def close(self, timeout: float | None = None) -> None:
        if self.closing is not None:
            await self.closing.wait()
            return
        self.closing = asyncio.Event()
        self.closed = True
        try:
            if self.listener is not None and self.assigned:
                token = _in_revocation.set(True)
                try:
                    await call_listener(self.listener.on_partitions_revoked, set(self.assigned),
                                        "on_partitions_revoked")
                finally:
                    _in_revocation.reset(token)
        finally:
            self.assigned.clear()
            self.paused_tps.clear()
            self.closing.set()

    # ------------------------------------------------------------ the interface

    async def poll(self, timeout: float = 1.0, max_records: int | None = None) -> Sequence[ConsumerRecord]:
        self._check_open()
        await self._play_events()
        limit = max_records if max_records is not None else self.config.max_poll_records
        out: list[ConsumerRecord] = []
        for tp in sorted(self.assigned - self.paused_tps):
            for rec in self.logs[tp]:
                if len(out) >= limit:
                    break
                if rec.offset >= self.positions[tp]:
                    out.append(rec)
                    self.positions[tp] = rec.offset + 1
                    self.delivered_epoch[(tp, rec.offset)] = self.epoch[tp]
        await asyncio.sleep(0 if out else timeout)
        self._check_open()
        return out

    async def _play_events(self) -> None:
        while self.events:
            kind, tp = self.events.pop(0)
            listener = self.listener
            if kind == "assign":
                if tp in self.assigned:
                    continue
                self.assigned.add(tp)
                self.epoch[tp] += 1
                committed = self.committed_offsets.get(tp)
                self.positions[tp] = committed.offset if committed is not None else 0
                if listener is not None:
                    await call_listener(listener.on_partitions_assigned, {tp}, "on_partitions_assigned")
                continue
            if tp not in self.assigned:
                continue
            self.epoch[tp] += 1
            self.paused_tps.discard(tp)
            try:
                if listener is not None:
                    callback = listener.on_partitions_revoked if kind == "revoke" else listener.on_partitions_lost
                    await call_listener(callback, {tp}, kind)
            finally:
                self.assigned.discard(tp)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._check_assigned([tp])
        self.positions[tp] = offset

    def pause(self, *tps: TopicPartition) -> None:
        self._check_assigned(tps)
        self.paused_tps |= set(tps)

    def resume(self, *tps: TopicPartition) -> None:
        self._check_assigned(tps)
        self.paused_tps -= set(tps)

    def paused(self) -> set[TopicPartition]:
        self._check_open()
        return set(self.paused_tps)

    def assignment(self) -> set[TopicPartition]:
        self._check_open()
        return set(self.assigned)

    def subscription(self) -> set[str]:
        self._check_open()
        return set(self.topics)

    def subscribe(self, topics: Iterable[str] = (), *, pattern: str | None = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        self._check_open()
        self.topics = list(topics)
        self.listener = listener
        self.listeners.append(listener)

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata] | None = None) -> None:
        assert offsets is not None, "process() always names its offsets"
        self._check_open()
        await asyncio.sleep(0)
        foreign = sorted(tp for tp in offsets if tp not in self.assigned)
        if foreign:
            raise CommitFailedError(f"{foreign} are no longer assigned to this member")
        self.commits.append(Commit(dict(offsets), self.app_committing, self.model.ended_how))
        self.committed_offsets.update(offsets)

    async def committed(self, tps: Iterable[TopicPartition]) -> Mapping[TopicPartition, OffsetAndMetadata | None]:
        self._check_open()
        return {tp: self.committed_offsets.get(tp) for tp in tps}

    def _check_open(self) -> None:
        # close()'s listener may still use the consumer (as Consumer); nobody else may
        if self.closed and not _in_revocation.get():
            raise ConsumerClosedError("the consumer is closed")

    def _check_assigned(self, tps: Iterable[TopicPartition]) -> None:
        self._check_open()
        for tp in tps:
            if tp not in self.assigned:
                raise IllegalStateError(f"{tp} is not assigned")


class AppListener(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, set[TopicPartition]]] = []

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.calls.append(("revoked", set(revoked)))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.calls.append(("assigned", set(assigned)))

    async def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.calls.append(("lost", set(lost)))


@dataclass(eq=False)
class Attempt:
    """One handler call."""

    tp: TopicPartition
    offset: int
    lane: Hashable
    gate: asyncio.Future[None] | None = None
    own_cancel: bool = False  # the test cancelled the future it awaits (not its task)


@dataclass
class Ending:
    how: str  # "stop", "close" or "cancel"
    at: float  # loop time of the request


@dataclass
class Outcome:
    result: ProcessResult | None = None
    error: BaseException | None = None
    lib_committed: dict[TopicPartition, int] = field(default_factory=dict)


class ProcessModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = VirtualClockLoop()
        self.source = ScriptedSource(self)
        self.proc: Processor | None = None
        self.run_task: asyncio.Task[None] | None = None
        self.closer: asyncio.Task[None] | None = None
        self.app_listener: AppListener | None = None
        self.hook = True
        self.ordering = "key"
        self.endings: list[Ending] = []
        self.ended_how: str | None = None  # set the moment run() returns or raises
        self.outcome = Outcome()
        self.kinds: dict[tuple[TopicPartition, int], str] = {}
        self.running: set[Attempt] = set()
        self.running_lanes: dict[tuple[TopicPartition, Hashable], int] = defaultdict(int)
        self.lane_last: dict[tuple[TopicPartition, Hashable, int], int] = {}
        self.gates: list[Attempt] = []
        self.handled: dict[tuple[TopicPartition, int], int] = defaultdict(int)
        self.handled_epoch: dict[tuple[TopicPartition, int], int] = {}
        self.last_outcome: dict[tuple[TopicPartition, int], str] = {}
        self.auto_ok = False  # settling: gated handlers succeed at once
        self.checked_commits = 0
        self.last_commit: dict[TopicPartition, int] = {}
        self.problems: list[AssertionError] = []
        self.seen: Counter[str] = Counter()  # what an example did (for tuning the rules' weights)

    # ------------------------------------------------------------ plumbing

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

    def metrics(self) -> dict[str, Any]:
        async def read() -> dict[str, Any]:
            return self.proc.metrics() if self.proc is not None else {}

        return self.loop.run_until_complete(read())

    @property
    def over(self) -> bool:
        return self.ended_how is not None

    @property
    def running_run(self) -> bool:
        return self.run_task is not None and not self.over and not self.endings

    def lane_of(self, rec: ConsumerRecord) -> Hashable:
        if self.ordering == "partition":
            return "partition"
        if self.ordering == "key" and rec.key is not None:
            return ("key", rec.key)
        return None  # alone: nothing to order it by

    # ------------------------------------------------------------ the application's code

    async def handler(self, rec: ConsumerRecord) -> None:
        tp = TopicPartition(rec.topic, rec.partition)
        if self.over:
            self.fail("handler_after_end", f"{tp} offset {rec.offset} started after run() {self.ended_how}")
        lane = self.lane_of(rec)
        if lane is not None:
            if self.running_lanes[(tp, lane)]:
                self.fail("lane_overlap", f"{tp} offset {rec.offset} started while its {lane} ran another record")
            epoch = self.source.delivered_epoch.get((tp, rec.offset), -1)
            last = self.lane_last.get((tp, lane, epoch))
            if last is not None and rec.offset < last:
                self.fail("lane_order", f"{tp} {lane}: offset {rec.offset} started after offset {last}")
            self.lane_last[(tp, lane, epoch)] = rec.offset
        attempt = Attempt(tp, rec.offset, lane)
        self.running.add(attempt)
        self.running_lanes[(tp, lane)] += 1
        try:
            kind = self.kinds[(tp, rec.offset)]
            await asyncio.sleep(0)
            if kind == "poison":
                raise ValueError(f"poison at {rec.offset}")
            if kind == "gated" and not self.auto_ok:
                attempt.gate = asyncio.get_running_loop().create_future()
                self.gates.append(attempt)
                await attempt.gate
        except asyncio.CancelledError:
            self.last_outcome[(tp, rec.offset)] = "own_cancel" if attempt.own_cancel else "cancelled"
            raise
        except ValueError:
            self.last_outcome[(tp, rec.offset)] = "failed"
            raise
        else:
            self.last_outcome[(tp, rec.offset)] = "ok"
            self.took(tp, rec.offset, "the handler")
        finally:
            self.running.discard(attempt)
            self.running_lanes[(tp, lane)] -= 1

    async def on_failure(self, rec: ConsumerRecord, error: Exception) -> None:
        tp = TopicPartition(rec.topic, rec.partition)
        if self.over:
            self.fail("handler_after_end", f"on_failure for {tp} offset {rec.offset} after run() {self.ended_how}")
        if self.last_outcome.get((tp, rec.offset)) == "own_cancel" and (
                HandlerCancelledError is None or not isinstance(error, HandlerCancelledError)):
            self.fail("own_cancel_error", f"on_failure got {error!r} for a handler's own CancelledError")
        await asyncio.sleep(0)
        self.took(tp, rec.offset, "on_failure")

    def took(self, tp: TopicPartition, offset: int, by: str) -> None:
        where = (tp, offset)
        epoch = self.source.epoch[tp]
        if self.handled[where] and self.handled_epoch[where] == epoch:
            self.fail("handled_twice", f"{tp} offset {offset} handled again ({by}) with no rebalance in between")
        self.handled[where] += 1
        self.handled_epoch[where] = epoch

    async def run(self) -> None:
        assert self.proc is not None
        try:
            self.outcome.result = await self.proc.run()
        except BaseException as exc:  # every way out is checked below
            self.outcome.error = exc
        finally:
            asked = {e.how for e in self.endings}
            if isinstance(self.outcome.error, asyncio.CancelledError):
                self.ended_how = "cancel"
            elif self.outcome.result is not None:
                self.ended_how = self.outcome.result.reason
            else:
                self.ended_how = "error"
            self.at_end(asked)

    def at_end(self, asked: set[str]) -> None:
        how = self.ended_how
        if self.running:
            self.fail("handler_outlived_run", f"{sorted((a.tp, a.offset) for a in self.running)} still running "
                                              f"when run() ended ({how})")
        if not self.source.closed:
            listener = self.source.listener
            if listener is not self.app_listener and type(listener) is not ConsumerRebalanceListener:
                self.fail(f"listener_left_after_{how}", f"the consumer's listener is {listener!r}")
        error, result = self.outcome.error, self.outcome.result
        if isinstance(error, asyncio.CancelledError):
            if "cancel" not in asked:
                self.fail("cancelled_unasked", "run() raised CancelledError; nobody cancelled it")
        elif isinstance(error, HandlerFailedError):
            if self.hook:
                self.fail("run_raised", f"run() raised {error!r} though on_failure was given")
        elif error is not None:
            self.fail("run_raised", f"run() raised {error!r}")
        elif result is not None:
            if result.reason == "stopped" and "stop" not in asked:
                self.fail("ended_unasked", f"run() returned {result}; stop() was not called")
            if result.reason == "closed" and "close" not in asked:
                self.fail("ended_unasked", f"run() returned {result}; the consumer was not closed")
            lib: dict[TopicPartition, int] = {}
            for commit in self.source.commits:
                if not commit.by_app:
                    lib.update((tp, om.offset) for tp, om in commit.offsets.items())
            if result.committed != lib:
                self.fail(f"result_committed_{result.reason}",
                          f"run() says it committed {result.committed}; it committed {lib}")

    # ------------------------------------------------------------ rules: the start

    @initialize(ordering=st.sampled_from(["key", "key", "partition"]), concurrency=st.sampled_from([2, 1, 4]),
                extra=st.integers(0, 4), max_retries=st.sampled_from([1, 0]),
                hook=st.sampled_from([True, True, True, False]), app_listener=st.booleans())
    def start(self, ordering: str, concurrency: int, extra: int, max_retries: int, hook: bool,
              app_listener: bool) -> None:
        self.ordering, self.hook = ordering, hook
        self.app_listener = AppListener() if app_listener else None

        async def build() -> None:
            self.proc = Processor(self.source, self.handler, on_failure=self.on_failure if hook else None,
                                  listener=self.app_listener, concurrency=concurrency, ordering=ordering,
                                  max_pending_records=concurrency + extra, max_retries=max_retries,
                                  retry_backoff=0.001, retry_backoff_max=0.002, drain_timeout=DRAIN,
                                  commit_interval=COMMIT_INTERVAL, poll_timeout=POLL)
            self.run_task = asyncio.create_task(self.run())

        self.loop.run_until_complete(build())
        self.drive(TICK)

    # ------------------------------------------------------------ rules: records and handlers

    @precondition(lambda self: not self.over)
    @rule(partition=st.integers(0, 1),
          records=st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 2), st.sampled_from(KINDS)),
                           min_size=1, max_size=3))
    def arrive(self, partition: int, records: list[tuple[str | None, int, str]]) -> None:
        tp = TPS[partition]
        for key, gap, kind in records:
            rec = self.source.append(tp, gap, key)
            self.kinds[(tp, rec.offset)] = kind
        self.drive(TICK)

    def waiting_gates(self) -> list[Attempt]:
        self.gates = [a for a in self.gates if a.gate is not None and not a.gate.done()]
        return self.gates

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
        """A held handler raises its own CancelledError: the future it awaits is cancelled (by
        "something else"), its task is not."""
        attempt = self.pick(index)
        assert attempt.gate is not None
        self.seen["own_cancel"] += 1
        attempt.own_cancel = True
        attempt.gate.cancel()
        self.drive(TICK)

    def pick(self, index: int) -> Attempt:
        gates = self.waiting_gates()
        return gates[index % len(gates)]

    @rule()
    def wait(self) -> None:
        self.drive(COMMIT_INTERVAL * 1.5)

    # ------------------------------------------------------------ rules: rebalances

    @precondition(lambda self: self.running_run)
    @rule(partition=st.integers(0, 1), kind=st.sampled_from(["revoke", "lose", "assign"]))
    def rebalance(self, partition: int, kind: str) -> None:
        tp = TPS[partition]
        if not self.source.pending(tp) and (tp in self.source.assigned) == (kind != "assign"):
            self.source.events.append((kind, tp))
        self.drive(TICK)

    # ------------------------------------------------------------ rules: the end

    def await_end(self, how: str) -> None:
        ending = Ending(how, self.loop.time())
        self.endings.append(ending)
        limit = DRAIN + MARGIN
        if not self.drive_until(lambda: self.over, limit):
            self.fail(f"run_outlived_{how}", f"run() still running {limit:.2f} s after {how}")

    @precondition(lambda self: self.running_run)
    @rule(how=st.sampled_from(["stop", "close", "cancel"]), now=st.integers(0, 2))
    def end(self, how: str, now: int) -> None:
        """stop(), consumer.close() from another task, or a cancel of the task running run() (one
        time in three: the rest of the time a tick, so that runs last a while)."""
        if now:
            self.drive(TICK)
            return
        self.seen[f"end_{how}"] += 1
        if how == "stop":
            assert self.proc is not None
            self.proc.stop()
        elif how == "cancel":
            assert self.run_task is not None
            self.run_task.cancel()
        else:
            self.closer = self.loop.create_task(self.source.close())
        self.await_end(how)
        if self.closer is not None:
            self.await_close()

    def await_close(self) -> None:
        if not self.drive_until(lambda: self.closer is not None and self.closer.done(), DRAIN + MARGIN):
            self.fail("close_outlived", "consumer.close() still running")

    @precondition(lambda self: self.over and self.closer is None)
    @rule()
    def close_after_end(self) -> None:
        self.closer = self.loop.create_task(self.source.close())
        self.await_close()

    @precondition(lambda self: self.running_run)
    @rule()
    def settle(self) -> None:
        """Every gated handler succeeds from now on: every record of an assigned partition is
        handled soon (a key stalled by a handler's own CancelledError never is)."""
        self.auto_ok = True
        for attempt in self.waiting_gates():
            assert attempt.gate is not None
            attempt.gate.set_result(None)

        def unhandled() -> list[tuple[TopicPartition, int]]:
            return [(tp, r.offset) for tp in sorted(self.source.assigned) for r in self.source.logs[tp]
                    if not self.handled[(tp, r.offset)]]

        done = self.drive_until(lambda: self.over or (not unhandled() and not self.source.events), SETTLE)
        self.auto_ok = False
        if not done:
            metrics = self.metrics()
            self.fail("stalled", f"records never handled: {unhandled()[:6]}; held {metrics.get('held')}, "
                                 f"in flight {metrics.get('in_flight')}")

    # ------------------------------------------------------------ rules: after the end

    def old_listener(self) -> ProcessingListener | None:
        return next((li for li in self.source.listeners if isinstance(li, ProcessingListener)), None)

    @precondition(lambda self: self.over and not self.source.closed and self.old_listener() is not None)
    @rule(kind=st.sampled_from(["revoked", "lost"]))
    def fire_old_listener(self, kind: str) -> None:
        """What the consumer would call had process() left its listener behind."""
        listener = self.old_listener()
        assert listener is not None
        tps = set(self.source.assigned) or set(TPS)
        callback = listener.on_partitions_revoked if kind == "revoked" else listener.on_partitions_lost
        try:
            self.loop.run_until_complete(asyncio.wait_for(callback(tps), DRAIN + MARGIN))
        except Exception as exc:  # anything it raises is the finding
            self.fail("old_listener_raised", f"process()'s old listener raised {exc!r}")

    @precondition(lambda self: self.over and not self.source.closed and self.source.assigned)
    @rule()
    def app_commits(self) -> None:
        """The application commits what it processed itself, past process()'s watermark."""
        offsets = {}
        for tp in sorted(self.source.assigned):
            log = self.source.logs[tp]
            end = log[-1].offset + 1 if log else 0
            now = self.source.committed_offsets.get(tp)
            if now is None or end > now.offset:
                offsets[tp] = OffsetAndMetadata(end, "")
                for rec in log:  # the application processed them itself
                    self.handled[(tp, rec.offset)] += 1
        if not offsets:
            return
        self.source.app_committing = True
        try:
            self.loop.run_until_complete(self.source.commit(offsets))
        finally:
            self.source.app_committing = False

    # ------------------------------------------------------------ invariants

    @invariant()
    def nothing_went_wrong(self) -> None:
        self.raise_problems()

    @invariant()
    def commits_move_forward_and_stop_with_run(self) -> None:
        for commit in self.source.commits[self.checked_commits:]:
            for tp, om in commit.offsets.items():
                before = self.last_commit.get(tp)
                if before is not None and om.offset < before:
                    self.fail("commit_backward", f"{tp} committed {om.offset} after {before} "
                                                 f"({'by the application' if commit.by_app else 'by process()'}"
                                                 f"{'' if commit.after_end is None else ' after run() ended'})")
                self.last_commit[tp] = om.offset
            if commit.after_end is not None and not commit.by_app:
                self.fail(f"commit_after_{commit.after_end}",
                          f"process() committed {commit.offsets} after run() ended ({commit.after_end})")
        self.checked_commits = len(self.source.commits)
        self.raise_problems()

    @invariant()
    def committed_records_were_handled(self) -> None:
        for tp, om in self.source.committed_offsets.items():
            for rec in self.source.logs[tp]:
                if rec.offset < om.offset and not self.handled[(tp, rec.offset)]:
                    self.fail("unhandled_below_watermark",
                              f"{tp} committed {om.offset}; offset {rec.offset} was never handled")
            for start, end in decode(om.metadata, om.offset).ranges:
                for rec in self.source.logs[tp]:
                    if start <= rec.offset < end and not self.handled[(tp, rec.offset)]:
                        self.fail("unhandled_in_metadata", f"{tp} committed {om.offset} with {rec.offset} "
                                                           "marked finished; it was never handled")
        self.raise_problems()

    @invariant()
    def held_within_bounds(self) -> None:
        if self.proc is None:
            return
        metrics = self.metrics()
        bound = self.proc.settings.bound
        if metrics["held"] > bound:
            self.fail("held_over_bound", f"held {metrics['held']} > bound {bound}")
        tracked = metrics.get("tracked_offsets", metrics["held"])
        if tracked > bound:
            self.fail("tracked_over_bound", f"tracked_offsets {tracked} > bound {bound}")
        self.raise_problems()

    # ------------------------------------------------------------ the end of an example

    def teardown(self) -> None:
        try:
            if self.run_task is not None and not self.run_task.done():
                if self.proc is not None:
                    self.proc.stop()
                if not self.drive_until(lambda: self.run_task is None or self.run_task.done(), DRAIN + MARGIN):
                    self.run_task.cancel()
                    self.loop.run_until_complete(asyncio.wait([self.run_task], timeout=5 * MARGIN))
            if self.closer is None:
                self.closer = self.loop.create_task(self.source.close())
            self.loop.run_until_complete(asyncio.wait([self.closer], timeout=5 * MARGIN))
            left = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
            for task in left:
                task.cancel()
            if left:
                self.loop.run_until_complete(asyncio.wait(left, timeout=5 * MARGIN))
            for task in (self.run_task, self.closer):
                if task is not None and task.done() and not task.cancelled():
                    task.exception()  # retrieved: nothing logged at garbage collection
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()


SETTINGS = settings(max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def test_process_keeps_the_model_s_invariants() -> None:
    """The shrunk steps of a failure are printed (state.start(...), state.arrive(...), ...)."""
    run_state_machine_as_test(seed(SEED)(ProcessModel), settings=SETTINGS)
