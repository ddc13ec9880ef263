"""The prefetch pipeline: one long-poll Fetch in flight per broker connection, a bounded buffer of
fetched bytes.

Flow: ``send_fetches()`` starts one fetch task per lane (a broker, or, when
``fetch_connections_per_broker`` gives it more than one, one of several connections to it, each
fetching its own share of that broker's partitions; lane_policy.py says how many, from how busy
its answers are with ``"auto"``) that has a fetchable partition with nothing buffered
(``FetchPlanner`` in requests.py decides what and where); each response partition
becomes a ``CompletedFetch`` (completed.py) holding the raw bytes, stored by ``ResponseHandler``
(responses.py) in the ``FetchBuffer`` (buffer.py), decoded lazily as ``fetched_records()`` hands
records out. Memory stays bounded: per partition the completed fetch being handed out and at most
one fetched ahead that continues it (buffer.py). A task whose fetch succeeded starts the next round
itself, so the pipeline keeps prefetching between polls. This module owns the tasks, each broker's
lane's fetch session, each broker's failures, and the retry timers. A fetch session the consumer is
done with is closed on the broker (sessions.py ``end()``): a lane's once ``"auto"`` retired it and
its last fetch was answered, in the background; at close(), briefly, those of the lanes with no
fetch in flight (``close()`` says why not the others).
"""

from __future__ import annotations

# The public API contract gives every awaitable a `timeout` (see DESIGN.md), implemented with
# exactly one asyncio.timeout() per call, which is what ASYNC109 asks for anyway.
import asyncio
import functools
import logging
import time
from collections.abc import Container, Mapping
from typing import Any

from .._net.backoff import Backoff
from .._net.failure_log import FailureLog
from ..errors import BrokerError, DeserializerNotReadyError
from ..protocol.messages import FETCH
from ..structs import OffsetAndMetadata, TopicPartition
from ..subscription import SubscriptionState
from .buffer import FetchBuffer
from .completed import Deserializer, Records, ValueConverter, converter
from .epoch_validation import epoch_ends, supported
from .lane_policy import AUTO, LanePolicy, busy_response
from .offset_lookup import READ_COMMITTED, ConnectionLike
from .requests import (
    LAST_FETCHED_EPOCH_VERSION,
    MAX_FETCH_VERSION,
    NAMES_FETCH_VERSION,
    FetchCluster,
    FetchPlanner,
    FetchSettings,
    FetchTarget,
    Lane,
)
from .responses import ResponseHandler, partition_error, transient
from .sessions import FetchPlan, FetchSession

# Named, not __name__: the fetch path's modules all log here, wherever they live.
log = logging.getLogger("aiokafka_lite.consumer.fetcher")

# How long close() waits for its sessions' last requests to be answered (or request_timeout_ms, if
# shorter). They go only where no fetch is in flight, so an answer comes after one round trip.
SESSION_END_LIMIT = 0.25


class Fetcher:
    """Prefetches records for the fetchable partitions of ``subscription`` and hands them out."""

    def __init__(self, cluster: FetchCluster, subscription: SubscriptionState, *,
                 fetch_min_bytes: int = 1, fetch_max_wait_ms: int = 500,
                 fetch_max_bytes: int = 52_428_800, max_partition_fetch_bytes: int = 1_048_576,
                 isolation_level: int = 0, check_crcs: bool = True, request_timeout: float = 30.0,
                 key_deserializer: Deserializer | None = None,
                 value_deserializer: Deserializer | None = None,
                 client_rack: str | None = None, retry_backoff: float = 0.1,
                 retry_backoff_max: float = 1.0, max_fetch_version: int = MAX_FETCH_VERSION,
                 fetch_connections_per_broker: int | str = AUTO, lane_policy: LanePolicy | None = None) -> None:
        self._cluster = cluster
        self._subscription = subscription
        self._settings = FetchSettings(fetch_max_wait_ms, fetch_min_bytes, fetch_max_bytes,
                                       max_partition_fetch_bytes, isolation_level, client_rack or "")
        self._request_timeout = request_timeout
        self._retry_backoff = retry_backoff
        self._retry_backoff_max = retry_backoff_max
        self._max_fetch_version = max_fetch_version  # lower only to test what older brokers get
        # The planner asks it, answers teach it; ``lane_policy``: the setting's, with other thresholds (tests).
        self._lanes = lane_policy or LanePolicy(fetch_connections_per_broker)
        self._planner = FetchPlanner(cluster, subscription, retry_backoff, self._lanes)
        self._buffer = FetchBuffer(
            subscription, convert=converter(key_deserializer, value_deserializer),
            partition_max_bytes=max_partition_fetch_bytes,
            partition_error=functools.partial(partition_error, subscription=subscription, planner=self._planner))
        self._responses = ResponseHandler(subscription, self._planner, self._buffer, check_crcs=check_crcs,
                                          read_committed=isolation_level == READ_COMMITTED)
        # Per broker: failed fetches back off exponentially (KIP-580) and are said once.
        self._node_failures: dict[int, tuple[Backoff, FailureLog]] = {}
        self._in_flight: dict[Lane, asyncio.Task[None]] = {}  # an epoch check goes on lane 0
        self._in_flight_tps: set[TopicPartition] = set()
        self._retry_timers: dict[int, asyncio.TimerHandle] = {}
        self._sessions: dict[Lane, FetchSession[FetchTarget]] = {}  # KIP-227
        self._conns: dict[Lane, ConnectionLike] = {}  # the one each lane's last fetch went on
        self._ending: dict[Lane, asyncio.Task[None]] = {}  # a session's last request (epoch -1)
        self._closed = False

    @property
    def metadata_refresh_needed(self) -> bool:
        """Set when a partition's leader is unknown or moved; the poll path refreshes and clears it."""
        return self._planner.metadata_refresh_needed

    @metadata_refresh_needed.setter
    def metadata_refresh_needed(self, needed: bool) -> None:
        self._planner.metadata_refresh_needed = needed

    # ------------------------------------------------------------------ metrics

    def has_buffered(self) -> bool:
        """True when a partition that is not paused has data (or an error) waiting."""
        return self._buffer.has_buffered()

    def in_flight(self) -> int:
        """Fetch requests currently in flight (at most one per broker connection)."""
        return len(self._in_flight)

    def fetch_sources(self) -> dict[TopicPartition, int | None]:
        """Per assigned partition, the broker its next fetch goes to: a preferred read replica
        (KIP-392) or the leader (None: no leader known)."""
        return self._planner.fetch_nodes(self._subscription.assignment)

    def sessions(self) -> dict[int, dict[str, Any]]:
        """Per broker: its fetch session (id 0: none) and how many full and incremental fetches went
        out; "lanes", how many connections its partitions are spread over now; once it had more
        than one (or may have, a fixed setting above 1), the first one's session, and each one's
        under "connections"."""
        assigned: dict[int | None, int] = {}
        for node_id in self.fetch_sources().values():
            assigned[node_id] = assigned.get(node_id, 0) + 1
        lanes_of = {node for node, lane in self._sessions if lane > 0}
        by_node: dict[int, dict[str, Any]] = {}
        for (node, lane), st in sorted(self._sessions.items()):
            session = {"session_id": st.session_id, "epoch": st.epoch, "partitions": len(st.partitions),
                       "full_fetches": st.full_requests, "incremental_fetches": st.incremental_requests,
                       "partitions_sent": st.partitions_sent}
            entry = by_node.setdefault(node, {
                **session, "lanes": max(1, min(self._lanes.lanes(node), assigned.get(node, 0)))})
            if node in lanes_of or (self._lanes.lanes(node) > 1 and not self._lanes.adaptive):
                entry.setdefault("connections", {})[lane] = session
        return by_node

    def buffered_bytes(self) -> int:
        return self._buffer.buffered_bytes()

    def consumed(self) -> dict[str, int]:
        """Records handed out so far, and the bytes of the fetched data whose records were all handed out."""
        return {"records_consumed": self._buffer.records_consumed, "bytes_consumed": self._buffer.bytes_consumed}

    # ------------------------------------------------------------------ sending

    def send_fetches(self) -> int:
        """Start a fetch to every broker that has work and none in flight; returns how many started."""
        if self._closed:
            return 0
        loop = asyncio.get_running_loop()
        checks: dict[int, dict[TopicPartition, FetchTarget]] = {}
        # A lane whose session is being closed gets nothing until that is answered.
        busy_lanes: Container[Lane] = self._in_flight.keys() | self._ending.keys() if self._ending else self._in_flight
        plans = self._planner.plan(loop.time(), self._buffer.completed,
                                   (self._in_flight_tps, self._buffer.ahead), busy_lanes, checks)
        assignment = self._subscription.assignment
        for node_id, targets in checks.items():  # before fetching on from that broker
            if (node_id, 0) in self._in_flight:
                continue
            incarnations = {tp: assignment[tp].incarnation for tp in targets}
            self._in_flight[(node_id, 0)] = loop.create_task(
                self._check_epochs(node_id, targets, incarnations),
                name=f"aiokafka-lite leader epoch check on broker {node_id}")
            self._in_flight_tps.update(targets)
        started = 0
        for lane, offsets in plans.items():
            if lane in self._in_flight:
                continue  # its epoch check goes first
            incarnations = {tp: assignment[tp].incarnation for tp in offsets}
            task = loop.create_task(self._fetch(lane, offsets, incarnations),
                                    name=f"aiokafka-lite fetch from broker {lane[0]}")
            self._in_flight[lane] = task
            self._in_flight_tps.update(offsets)
            started += 1
        self._end_retired_sessions()
        return started

    async def _check_epochs(self, node_id: int, targets: dict[TopicPartition, FetchTarget],
                            incarnations: Mapping[TopicPartition, int]) -> None:
        """Learn the broker's Fetch version and, below v12, ask OffsetForLeaderEpoch where each
        position's epoch ends on the leader; then fetch on."""
        try:
            conn: ConnectionLike = await self._cluster.connection(node_id, timeout=self._request_timeout)
            version = conn.version_for(FETCH, self._max_fetch_version)
            self._planner.fetch_version(node_id, version)
            if version >= LAST_FETCHED_EPOCH_VERSION or not supported(conn):
                # Fetch checks by itself; or the broker is too old to ask at all (Java skips too).
                for tp, target in targets.items():
                    self._planner.epochs_checked(tp, (target.current_leader_epoch, target.last_fetched_epoch))
            else:
                asked = {tp: (t.current_leader_epoch, t.last_fetched_epoch) for tp, t in targets.items()}
                for tp, answer in (await epoch_ends(conn, asked, self._request_timeout)).items():
                    self._responses.epoch_answered(tp, targets[tp], incarnations[tp], answer)
            self._fetch_succeeded(node_id)
        except Exception as exc:
            self._fetch_failed(node_id, exc)
            return
        finally:
            self._in_flight.pop((node_id, 0), None)
            self._in_flight_tps.difference_update(targets)
        self.send_fetches()

    async def _fetch(self, lane: Lane, targets: dict[TopicPartition, FetchTarget],
                     incarnations: Mapping[TopicPartition, int]) -> None:
        loop = asyncio.get_running_loop()
        began = loop.time()
        stored: bool | None = None  # None: the fetch failed
        session = self._sessions.setdefault(lane, FetchSession[FetchTarget]())
        max_wait_ms = self._settings.max_wait_ms
        node_id = lane[0]
        try:
            conn: ConnectionLike = await self._cluster.connection(node_id, timeout=self._request_timeout,
                                                                  lane=lane[1])
            self._conns[lane] = conn
            # By topic id (v13+) when every topic's id is known, the session's too; else by name.
            ids = self._planner.topic_ids({tp.topic for tp in targets} | {tp.topic for tp in session.partitions})
            version = conn.version_for(FETCH, self._max_fetch_version if ids is not None
                                       else min(self._max_fetch_version, NAMES_FETCH_VERSION))
            self._planner.fetch_version(node_id, version)
            plan = session.plan(targets, version, ids)
            # The broker holds the request up to max_wait_ms before answering: allow for that.
            timeout = self._request_timeout + max_wait_ms / 1000
            sent = loop.time()
            response = await conn.send(FETCH, version, self._settings.body(plan, plan.topic_ids or {}),
                                       timeout=timeout)
            seconds = loop.time() - sent
            if session.answered(plan, response.get("error_code", 0), response.get("session_id", 0)):
                names = {topic_id: topic for topic, topic_id in (plan.topic_ids or {}).items()}
                answer = self._responses.store(node_id, targets, incarnations, response, names)
                stored = answer.buffered
                self._observe(node_id, len(targets), seconds, answer.record_bytes)
            else:
                # Sessions end when the broker evicts them (its cache is full): as in Java, INFO.
                log.info("broker %d ended fetch session %d: %s; the next fetch is a full one", node_id,
                         plan.session_id, BrokerError(response["error_code"]).name)
                stored = True  # nothing stored, but fetch again at once (a full fetch)
            self._fetch_succeeded(node_id)
        except Exception as exc:
            session.failed()
            self._fetch_failed(node_id, exc)
        except BaseException:  # cancelled: whether the broker applied the request is unknown
            session.failed()
            raise
        finally:
            self._in_flight.pop(lane, None)
            self._in_flight_tps.difference_update(targets)
        if stored is None:
            return
        # Keep prefetching the partitions that got nothing new. A broker that answers "nothing"
        # without holding the long poll would make that a busy loop: back off instead.
        if stored or loop.time() - began >= max_wait_ms / 2000:
            self.send_fetches()
        else:
            self._retry_later(node_id)

    def _observe(self, node_id: int, partitions: int, seconds: float, record_bytes: int) -> None:
        """Tell the lane policy how busy one answer from ``node_id`` was (``"auto"``)."""
        if not self._lanes.adaptive:
            return
        settings = self._settings
        busy = busy_response(seconds=seconds, max_wait=settings.max_wait_ms / 1000, record_bytes=record_bytes,
                             partitions=partitions, partition_max_bytes=settings.partition_max_bytes,
                             max_bytes=settings.max_bytes)
        if self._lanes.observe(node_id, busy, asyncio.get_running_loop().time()):
            log.debug("fetching from broker %d on %d connection(s) now", node_id, self._lanes.lanes(node_id))

    # ------------------------------------------------------------------ ending sessions (KIP-227)

    def _end_retired_sessions(self) -> None:
        """Close the fetch session of each lane the lane policy retired (``"auto"``: the broker is
        back to fewer lanes), once that lane's last fetch is answered."""
        for lane, session in self._sessions.items():
            if (session.session_id != 0 and lane[1] >= self._lanes.lanes(lane[0])
                    and lane not in self._in_flight and lane not in self._ending):
                self._end_session(lane, session, self._request_timeout)

    def _end_session(self, lane: Lane, session: FetchSession[FetchTarget], timeout: float) -> None:
        """Send ``session``'s last request (epoch -1) on the connection ``lane`` last fetched on, as
        an owned task, if that connection is still open; none is opened for it (the broker evicts the
        session in time, and a later fetch on the lane names it to close it)."""
        conn = self._conns.get(lane)
        if conn is None or conn.closed:
            return
        plan = session.end()
        if plan is not None:
            self._ending[lane] = asyncio.get_running_loop().create_task(
                self._send_end(lane, conn, plan, timeout), name=f"aiokafka-lite fetch session end on broker {lane[0]}")

    async def _send_end(self, lane: Lane, conn: ConnectionLike, plan: FetchPlan[FetchTarget], timeout: float) -> None:
        """Best effort: a failure is said at DEBUG only, and changes nothing else (no backoff)."""
        node_id = lane[0]
        try:
            # No partitions and no long poll: the broker drops the session and answers at once.
            body = {**self._settings.body(plan, {}), "max_wait_ms": 0}
            response = await conn.send(FETCH, conn.version_for(FETCH, self._max_fetch_version), body,
                                       timeout=timeout)
            error = response.get("error_code", 0)
            if error:  # e.g. the broker had evicted it already
                log.debug("closing fetch session %d on broker %d: %s", plan.session_id, node_id,
                          BrokerError(error).name)
            else:
                log.debug("closed fetch session %d on broker %d (connection %d)", plan.session_id, node_id, lane[1])
        except Exception as exc:
            log.debug("closing fetch session %d on broker %d failed: %s", plan.session_id, node_id, exc)
        finally:
            self._ending.pop(lane, None)
        self.send_fetches()  # a lane opened again meanwhile waited for this

    # ------------------------------------------------------------------ failures

    def _fetch_failed(self, node_id: int, exc: Exception) -> None:
        failures = self._node_failures.get(node_id)
        if failures is None:
            failures = self._node_failures[node_id] = (
                Backoff(self._retry_backoff, self._retry_backoff_max),
                # A broker restart fails fetches too: normal operation, never a WARNING.
                FailureLog(log, f"fetch from broker {node_id}", warn_after_failures=None))
        backoff, said = failures
        backoff.failed(time.monotonic())
        delay = backoff.delay()
        said.failed(exc, then=f"retrying in {delay:.3f} s")
        if not transient(exc):
            self._buffer.add_error(exc)  # raised once from the next fetched_records()
        self._planner.metadata_refresh_needed = True
        self._planner.forget_node(node_id)
        self._retry_later(node_id, delay)
        self._buffer.wake()

    def _fetch_succeeded(self, node_id: int) -> None:
        failures = self._node_failures.pop(node_id, None)
        if failures is not None:
            failures[1].recovered()

    def _retry_later(self, node_id: int, delay: float | None = None) -> None:
        """No fetch to ``node_id`` for `delay` (one retry backoff); then send_fetches() runs by itself."""
        delay = self._retry_backoff if delay is None else delay
        loop = asyncio.get_running_loop()
        self._planner.back_off_node(node_id, loop.time() + delay)
        timer = self._retry_timers.pop(node_id, None)
        if timer is not None:
            timer.cancel()
        if not self._closed:
            self._retry_timers[node_id] = loop.call_later(delay, self._retry, node_id)

    def _retry(self, node_id: int) -> None:
        self._retry_timers.pop(node_id, None)
        # The timer's firing ends the backoff: uvloop's timers run on a millisecond clock and may
        # fire a fraction of one before loop.time() reaches the backoff's end, and then nothing
        # would send this node's fetch until the next poll() pass.
        self._planner.back_off_node(node_id, 0.0)
        self.send_fetches()

    # ------------------------------------------------------------------ handing out, waiting, closing

    def fetched_records(self, max_records: int,
                        convert: ValueConverter | None = None) -> dict[TopicPartition, Records]:
        """Up to ``max_records`` buffered records, taking partitions in turn; positions advance.

        A stored error (from a fetch task, or one met after records were already collected) is
        raised from here, once. A record a deserializer fails on is different: the records before it
        are handed out, then its RecordDeserializationError is raised by every call (the partition
        next in line, as in Java) until a seek moves the partition past it.
        """
        return self._buffer.fetched_records(max_records, convert)

    def next_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """For each partition the last fetched_records() moved, its new position (KIP-1094)."""
        return self._buffer.next_offsets()

    def take_not_ready(self) -> DeserializerNotReadyError | None:
        """A deserializer that stopped the last hand-out before a record it must prepare for
        (DeserializerNotReadyError), once: await its prepare() before the next hand-out."""
        return self._buffer.take_not_ready()

    def not_ready_pending(self) -> bool:
        """Whether the last hand-out stopped before a record its deserializer must prepare for."""
        return self._buffer.not_ready_pending()

    def wake(self) -> None:
        """End a wait_for_data() early: the poll path has something else to do (e.g. rejoin)."""
        self._buffer.wake()

    async def wait_for_data(self, timeout: float | None) -> None:
        """Return when records (or an error) are ready to hand out, or after ``timeout`` seconds."""
        if self._closed:
            return
        await self._buffer.wait(timeout)

    async def close(self) -> None:
        """Cancel in-flight fetches, drop buffered data, and close on the broker the fetch sessions
        of the lanes that had no fetch in flight (best effort, within ``SESSION_END_LIMIT``).
        Idempotent.

        A lane with a fetch in flight keeps its session on the broker (until the broker evicts it,
        as before): its connection would answer the closing request only after that fetch, a long
        poll of up to fetch_max_wait_ms, and close(timeout) must not take that long past its timeout
        (Kafka's PlaintextConsumerCloseTest holds Java's to it; this forced part of close() does not
        know the timeout). Waiting for it within the caller's timeout would belong in close()'s
        graceful part (consumer/closing.py), which does not reach the fetcher.
        """
        self._closed = True
        idle = [lane for lane in self._sessions if lane not in self._in_flight]
        for timer in self._retry_timers.values():
            timer.cancel()
        self._retry_timers.clear()
        tasks = list(self._in_flight.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)  # the caller's own cancellation still propagates
        self._in_flight.clear()
        self._in_flight_tps.clear()
        self._buffer.clear()  # wakes any waiter: nothing more will arrive
        await self._end_sessions(idle)

    async def _end_sessions(self, lanes: list[Lane]) -> None:
        """Close the session of each of ``lanes`` still open on a connection still open, and wait for
        those answers (and for a retired lane's still under way) within the limit; past it, give up."""
        limit = min(self._request_timeout, SESSION_END_LIMIT)
        for lane in lanes:
            if lane not in self._ending:
                self._end_session(lane, self._sessions[lane], limit)
        ending = list(self._ending.values())
        if not ending:
            return
        try:
            await asyncio.wait(ending, timeout=limit)
        finally:
            for task in ending:
                task.cancel()  # (none left but a retired lane's own past the limit, or if we are cancelled)
        await asyncio.wait(ending)
