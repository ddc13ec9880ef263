"""The examples the API property test draws, and how one runs: the drawn steps (Call, Broker,
Pause, Example), one call as it happened (Run), one example's record (Outcome) and the runner that
plays an example against a consumer in its own event loop (ExampleRunner). The invariants and the
test itself are in test_api_properties.py."""

from __future__ import annotations

import asyncio
import itertools
import math
import threading
from dataclasses import dataclass, field
from typing import Any

from aiokafka_lite import Consumer, OffsetAndMetadata, TopicPartition

from ._proxied_tansu import ProxiedTansu, sockets_to

MARGIN = 2.0  # seconds a call may overrun its bound on this loaded machine
API_TIMEOUT = 2.0  # default_api_timeout_ms and request_timeout_ms, in seconds
POLL_DEFAULT = 1.0
CLOSE_DEFAULT = 30.0
EXAMPLE_LIMIT = 120.0  # an example takes a minute at most (six steps, then close(30 s)): beyond, it hung


class _Omitted:
    def __repr__(self) -> str:
        return "default"


OMITTED: Any = _Omitted()  # the timeout argument left out



def broker_state(state: str) -> dict[str, Any]:
    """ProxiedTansu.set()'s arguments for a drawn broker state."""
    return {"latency": 0.2 if state == "slow" else 0.0, "gone": state == "gone", "closed": state == "closed"}



# ------------------------------------------------------------------------------- examples

class _Step:
    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # Hypothesis prints steps by their repr
        printer.text(repr(self))


@dataclass(frozen=True)
class Call(_Step):
    method: str
    timeout: Any = OMITTED
    cancel_after: float | None = None  # the test cancels the call's task after this long
    wait: bool = True  # await it (within its bound) before the next step, or leave it running
    offset: int = 0  # commit/commit_async: the offset committed; async for: how many records

    def __repr__(self) -> str:
        arg = f"{self.offset}, " if self.method in ("commit", "commit_async", "async_for") else ""
        text = f"{self.method}({arg}timeout={self.timeout!r})"
        if self.cancel_after is not None:
            text += f" cancelled after {self.cancel_after}s"
        return text + ("" if self.wait else " in background")


@dataclass(frozen=True)
class Broker(_Step):
    state: str  # up | slow | gone (connections reset, new ones refused) | closed (the proxy's port closed)

    def __repr__(self) -> str:
        return f"broker {self.state}"


@dataclass(frozen=True)
class Pause(_Step):
    seconds: float

    def __repr__(self) -> str:
        return f"sleep({self.seconds})"


@dataclass(frozen=True)
class Example:
    start: str  # as Broker.state, or dead (bootstrap at a port nobody ever listened on)
    membership: str  # subscribe | assign
    steps: tuple[Any, ...]
    final_close: Any

    def __repr__(self) -> str:
        steps = "; ".join(map(repr, self.steps))
        return (f"Example(broker {self.start}, {self.membership}: {steps}; "
                f"close(timeout={self.final_close!r}))")



# ------------------------------------------------------------------------------- running one

@dataclass
class Run:
    """One call as it happened (times are loop times)."""

    call: Call
    started: float
    task: asyncio.Task[None] | None = None
    ended: float | None = None
    result: Any = None
    error: BaseException | None = None
    cancelled_by_test: bool = False
    abandoned: bool = False  # still running at the end of the example: cancelled by the clean-up
    closing_before: bool = False  # a close() had begun when this call started
    commit_seq: int | None = None  # the commit's place in submission order
    callback_error: Any = "not called"  # commit_async: what its callback was told
    future_state: str = ""  # commit_async: the future's state when the callback ran
    leftover_tasks: list[str] = field(default_factory=list)  # close(): pending when it returned
    leftover_sockets: list[str] = field(default_factory=list)

    def outcome(self) -> str:
        if self.ended is None:
            return "still running"
        if self.error is not None:
            return f"raised {type(self.error).__name__}: {self.error}"
        return f"returned {self.result!r:.80}"

    def __repr__(self) -> str:
        took = "" if self.ended is None else f" after {self.ended - self.started:.3f}s"
        return f"{self.call!r} -> {self.outcome()}{took}"


@dataclass
class Outcome:
    example: Example
    runs: list[Run] = field(default_factory=list)
    delivered: list[tuple[float, int]] = field(default_factory=list)  # (loop time, offset) as handed out
    first_seek: float = math.inf
    first_close_end: float = math.inf
    closing_from: float = math.inf
    rebalances: int = 0
    hung: list[str] = field(default_factory=list)
    began: float = 0.0
    loop_errors: list[str] = field(default_factory=list)  # what reached the loop's exception handler
    collected: list[str] = field(default_factory=list)  # ResourceWarnings of what gc found left open
    stuck: bool = False  # the example outlasted EXAMPLE_LIMIT: the watchdog cancelled it

    def explain(self, message: str) -> str:
        """`message`, then every call of the example as it went (seconds from the example's start)."""
        lines = [f"  +{r.started - self.began:.3f}s {r!r}{' [cancelled by the test]' * r.cancelled_by_test}"
                 for r in self.runs]
        offsets = [offset for _, offset in self.delivered]
        return "\n".join([message, "calls:", *lines, f"offsets handed out: {offsets}"])


class ExampleRunner:
    def __init__(self, example: Example, bootstrap: str, socket_port: int, topic: str, group: str) -> None:
        self.example = example
        self.bootstrap = bootstrap
        self.socket_port = socket_port
        self.tp = TopicPartition(topic, 0)
        self.group = group
        self.out = Outcome(example)
        self.commit_seq = itertools.count()
        self.own: set[asyncio.Task[Any]] = set()

    def consumer(self) -> Consumer:
        ms = int(API_TIMEOUT * 1000)
        consumer = Consumer(bootstrap_servers=self.bootstrap, group_id=self.group, auto_offset_reset="earliest",
                            enable_auto_commit=False, session_timeout_ms=2000, heartbeat_interval_ms=500,
                            request_timeout_ms=ms, default_api_timeout_ms=ms, retry_backoff_ms=50,
                            reconnect_backoff_max_ms=300, max_poll_records=50)
        if self.example.membership == "subscribe":
            consumer.subscribe([self.tp.topic])
        else:
            consumer.assign([self.tp])
        return consumer

    async def run(self, proxied: ProxiedTansu) -> Outcome:
        loop = asyncio.get_running_loop()
        main = asyncio.current_task()
        assert main is not None
        self.own.add(main)
        self.out.began = loop.time()
        loop.set_exception_handler(self.loop_error)
        # From another thread: a loop whose timers stopped firing cannot notice by itself.
        watchdog = threading.Timer(EXAMPLE_LIMIT, loop.call_soon_threadsafe, (self.stuck, main))
        watchdog.daemon = True
        watchdog.start()
        try:
            await self.steps(proxied, self.consumer())
        finally:
            watchdog.cancel()
        return self.out

    def stuck(self, main: asyncio.Task[Any]) -> None:
        self.out.stuck = True
        main.cancel()

    async def steps(self, proxied: ProxiedTansu, consumer: Consumer) -> None:
        loop = asyncio.get_running_loop()
        for step in self.example.steps:
            if isinstance(step, Pause):
                await asyncio.sleep(step.seconds)
            elif isinstance(step, Broker):
                await proxied.set_async(**broker_state(step.state))
            else:
                run = self.launch(consumer, step)
                if step.wait:
                    assert run.task is not None
                    await asyncio.wait({run.task}, timeout=min(self.bound(run) - loop.time(), 3.0))
        final = self.launch(consumer, Call("close", self.example.final_close))
        assert final.task is not None
        await asyncio.wait({final.task}, timeout=self.bound(final) - loop.time() + MARGIN)
        pending = {r.task for r in self.out.runs if r.task is not None and not r.task.done()}
        if pending:
            await asyncio.wait(pending, timeout=MARGIN)
        for r in self.out.runs:
            if r.task is not None and not r.task.done():
                self.out.hung.append(repr(r))
                r.abandoned = True
                r.task.cancel()
        self.out.rebalances = int(consumer.metrics().get("rebalances") or 0)

    def bound(self, run: Run) -> float:
        """When `run` must have ended by: its own timeout, or when a close() returned (+ MARGIN)."""
        own = math.inf
        t = run.call.timeout
        if run.call.method == "close":
            own = CLOSE_DEFAULT if t is OMITTED else API_TIMEOUT if t is None else t
        elif run.call.method == "commit_async":
            own = API_TIMEOUT + self.earlier_commits_end(run) - run.started  # bounded once it runs
        elif run.call.method == "async_for":
            own = math.inf  # ends when the consumer closes
        elif run.call.method in ("poll", "poll_arrow") and t is OMITTED:
            own = POLL_DEFAULT
        elif t is OMITTED:
            own = API_TIMEOUT
        elif isinstance(t, float | int) and (math.isnan(t) or t < 0):
            own = 0.0  # InvalidArgumentError at once
        elif isinstance(t, float | int):
            own = t
        elif t is None and run.call.method in ("poll", "poll_arrow"):
            own = 0.0  # not a number: InvalidArgumentError at once
        limit = run.started + own
        if self.out.first_close_end < math.inf and run.call.method != "close":
            limit = min(limit, max(run.started, self.out.first_close_end))
        return limit + MARGIN

    def loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """An error no one awaited ("Future exception was never retrieved", a failing callback)."""
        self.out.loop_errors.append(f"{context.get('message')}: {context.get('exception')!r}")

    def earlier_commits_end(self, run: Run) -> float:
        """When the commits made before `run` had all ended (commits complete in order)."""
        ends = [r.ended if r.ended is not None else math.inf for r in self.out.runs
                if r.commit_seq is not None and run.commit_seq is not None and r.commit_seq < run.commit_seq]
        return max([run.started, *ends])

    def launch(self, consumer: Consumer, call: Call) -> Run:
        loop = asyncio.get_running_loop()
        run = Run(call, loop.time(), closing_before=self.out.closing_from <= loop.time())
        self.out.runs.append(run)
        if call.method == "close":
            self.out.closing_from = min(self.out.closing_from, loop.time())
        run.task = asyncio.create_task(self.perform(consumer, run), name=f"test: {call!r}")
        run.task.add_done_callback(lambda task: self.never_ran(run, task))
        self.own.add(run.task)
        if call.cancel_after is not None:
            loop.call_later(call.cancel_after, self.cancel, run)
        return run

    def cancel(self, run: Run) -> None:
        assert run.task is not None
        if run.task.cancel():
            run.cancelled_by_test = True

    def never_ran(self, run: Run, task: asyncio.Task[None]) -> None:
        """A task cancelled before its first step never called the consumer: it ends cancelled."""
        if run.ended is None and task.cancelled():
            run.error = asyncio.CancelledError()
            run.ended = asyncio.get_running_loop().time()

    async def perform(self, consumer: Consumer, run: Run) -> None:
        loop = asyncio.get_running_loop()
        try:
            run.result = await self.invoke(consumer, run)
        except BaseException as exc:  # every outcome is recorded, and judged after the example
            run.error = exc
        run.ended = loop.time()
        if run.call.method == "close":
            self.close_returned(run)

    def close_returned(self, run: Run) -> None:
        """Right when a close() returns: what of the consumer is still there."""
        assert run.ended is not None
        if not isinstance(run.error, asyncio.CancelledError):  # a cancelled one is judged by itself
            self.out.first_close_end = min(self.out.first_close_end, run.ended)
        run.leftover_tasks = [repr(t) for t in asyncio.all_tasks() if t not in self.own and not t.done()]
        run.leftover_sockets = sockets_to(self.socket_port)

    async def invoke(self, consumer: Consumer, run: Run) -> Any:
        call, tp = run.call, self.tp
        kw = {} if call.timeout is OMITTED else {"timeout": call.timeout}
        method = call.method
        if method in ("poll", "poll_arrow"):
            batch = await getattr(consumer, method)(**kw)
            offsets = [r.offset for r in batch] if method == "poll" else \
                batch.to_pyarrow().column("offset").to_pylist()
            self.deliver(offsets)
            return f"{len(offsets)} records"
        if method in ("seek_to_beginning", "seek_to_end"):
            self.out.first_seek = min(self.out.first_seek, asyncio.get_running_loop().time())
            return await getattr(consumer, method)(tp, **kw)
        if method == "commit":
            run.commit_seq = next(self.commit_seq)
            return await consumer.commit({tp: OffsetAndMetadata(call.offset)}, **kw)
        if method == "commit_async":
            return await self.commit_async(consumer, run)
        if method == "async_for":
            return await self.iterate(consumer, call.offset)
        if method == "position":
            return await consumer.position(tp, **kw)
        if method == "offsets_for_times":
            return await consumer.offsets_for_times({tp: 0}, **kw)
        if method == "close":
            return await consumer.close(**kw)
        return await getattr(consumer, method)([tp], **kw)  # committed, end_offsets, beginning_offsets

    async def commit_async(self, consumer: Consumer, run: Run) -> Any:
        fut: asyncio.Future[None] | None = None

        def callback(offsets: Any, error: BaseException | None) -> None:
            run.callback_error = error
            run.future_state = "cancelled" if fut is not None and fut.cancelled() else "done"

        run.commit_seq = next(self.commit_seq)
        fut = consumer.commit_async({self.tp: OffsetAndMetadata(run.call.offset)}, callback=callback)
        return await fut

    async def iterate(self, consumer: Consumer, count: int) -> str:
        got = 0
        async for record in consumer:
            self.deliver([record.offset])
            got += 1
            if got >= count:
                break
        return f"{got} records"

    def deliver(self, offsets: list[int]) -> None:
        now = asyncio.get_running_loop().time()
        self.out.delivered.extend((now, offset) for offset in offsets)
