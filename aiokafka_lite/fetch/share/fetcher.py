"""The fetch side of a KIP-932 share group member: ShareFetch per leader, acquired records handed
out, acknowledgements sent.

Flow: ``assign()`` sets the partitions (from the membership); ``send_fetches()`` starts one ShareFetch
task per leader broker with assigned partitions and none of its acquired records still waiting to be
handed out (acquiring more than we hand out would only let locks lapse). Each request goes in that
broker's share session (session.py) and carries the decisions taken since (ledger.py) for
the partitions acquired from it. Answers become ``AcquiredRecords`` (records.py), handed out by
``fetched_records()`` as ``ShareRecord``s. ``commit()`` sends the pending decisions alone
(ShareAcknowledge); ``close()`` cancels the tasks and ends every session with epoch -1, carrying the
last decisions (records fetched and never handed out are released). renewals.py renews the locks of
records waiting here and of records a handler works on (``keep_locked``, KIP-1222) before they
lapse; ``acquire_mode`` "record_limit" has the broker acquire at most ``max_records`` (KIP-1206).
Every request is bounded by the request timeout (a ShareFetch by that plus its long poll); a broker
that answers with nothing at once, or fails, is retried after a backoff, never in a loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ..._net.backoff import Backoff
from ..._net.metadata import BrokerInfo
from ...errors import BrokerError, IllegalStateError, KafkaError, KafkaTimeoutError, broker_error
from ...liveness.deadlines import merge_within
from ...protocol.messages import SHARE_ACKNOWLEDGE, SHARE_FETCH
from ...structs import TopicPartition
from ..offset_lookup import ConnectionLike
from ..requests import FetchCluster
from ..responses import transient
from .acknowledge import Acknowledged, send_acknowledgements
from .acknowledge import AckResults as AckResults
from .buffer import AcquiredBuffer
from .ledger import AckType, Batch, ShareAcknowledgements
from .records import AcquiredRange, AcquiredRecords, ShareRecord
from .renewals import LockRenewals
from .requests import (
    ACQUIRE_MODES,
    LEADER_MOVED,
    MAX_SHARE_VERSION,
    ShareFetchSettings,
    ack_outcome,
    answered_partitions,
    as_kafka_error,
)
from .session import FINAL_EPOCH, SHARE_SESSION_NOT_FOUND, ShareSession

log = logging.getLogger("aiokafka_lite.share.fetcher")


class ShareFetcher:
    """Fetches the records a share group member acquires, hands them out, and acknowledges them."""

    def __init__(self, cluster: FetchCluster, *, group_id: str, member_id: str, explicit: bool = False,
                 max_wait_ms: int = 500, min_bytes: int = 1, max_bytes: int = 52_428_800,
                 max_records: int = 500, request_timeout: float = 30.0, check_crcs: bool = True,
                 retry_backoff: float = 0.1, retry_backoff_max: float = 1.0,
                 max_version: int = MAX_SHARE_VERSION, acquire_mode: str = "batch_optimized",
                 renewal_max: float = 300.0) -> None:
        self._cluster = cluster
        self._settings = ShareFetchSettings(group_id, member_id, max_wait_ms, min_bytes, max_bytes,
                                            max_records, max_records, ACQUIRE_MODES[acquire_mode])
        self._explicit = explicit
        self._request_timeout = request_timeout
        self._check_crcs = check_crcs
        self._retry_backoff, self._retry_backoff_max = retry_backoff, retry_backoff_max
        self._max_version = max_version
        self._assignment: set[TopicPartition] = set()
        self._sessions: dict[int, ShareSession] = {}
        self._acks = ShareAcknowledgements()
        self._acquired_from: dict[TopicPartition, int] = {}  # acknowledgements go to that broker
        self._buffer = AcquiredBuffer(refill_at=2 * max_records)  # acquired, not yet all handed out
        self._ack_results: AckResults = {}  # of acknowledgements sent with fetches, not yet taken
        self._acquired = 0  # records the broker acquired for this member (metrics)
        self._renewals = LockRenewals(  # keeps the locks of records waiting here and of handlers' records
            acks=self._acks, buffer=self._buffer, nodes=self._acquired_from, send=self._send_on,
            session_open=lambda node: node in self._sessions and self._sessions[node].open,
            on_results=lambda results: self._ack_results.update(results),  # replaced when taken
            queue_wait=max_wait_ms / 1000, bound=renewal_max, retry_backoff=retry_backoff)
        self._errors: list[KafkaError] = []  # raised once each from fetched_records()
        self._in_flight: dict[int, asyncio.Task[None]] = {}
        self._side_tasks: set[asyncio.Task[Any]] = set()  # metadata refreshes
        self._failures: dict[int, Backoff] = {}
        self._not_before: dict[int, float] = {}
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self._refresh_needed = False
        self._ready = asyncio.Event()
        self._closed = self._ending = False  # _ending: end_sessions() runs, no fetch starts

    # ------------------------------------------------------------------ state the facade reads

    @property
    def explicit(self) -> bool:
        return self._explicit

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def sessions(self) -> dict[int, dict[str, Any]]:
        """Per broker: its share session's next epoch, partitions, and how often it was opened and reset."""
        return {node: {"epoch": s.epoch, "partitions": len(s.partitions), "opened": s.opened, "resets": s.resets}
                for node, s in sorted(self._sessions.items())}

    def in_flight(self) -> int:
        return len(self._in_flight)

    def has_buffered(self) -> bool:
        """Acquired records (or an error) wait to be handed out."""
        return bool(self._buffer or self._errors)

    # ------------------------------------------------------------------ assignment

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        """The member's partitions now. Records buffered for a partition that left are released
        (with the next request to their broker); its sessions forget it at their next fetch."""
        new = set(tps)
        for tp in self._assignment - new:
            self._acks.release(tp, self._buffer.drop(tp))
        self._assignment = new
        self.send_fetches()

    # ------------------------------------------------------------------ fetching

    def send_fetches(self) -> int:
        """Start a ShareFetch to every leader with none in flight and little buffered (buffer.py);
        returns how many started."""
        if self._closed or self._ending:
            return 0
        loop = asyncio.get_running_loop()
        now = loop.time()
        by_node: dict[int, set[TopicPartition]] = {}
        for tp, node in self._cluster.leaders_for(self._assignment).items():
            if node is None or self._cluster.topic_id(tp.topic) is None:
                self._refresh_needed = True
            else:  # every partition, buffered ones too: the session keeps them (forgetting releases)
                by_node.setdefault(node, set()).add(tp)
        if self._refresh_needed:
            self._refresh_metadata()
        busy = self._buffer.busy_nodes()
        started = 0
        for node, wanted in by_node.items():
            if node in self._in_flight or node in busy or self._not_before.get(node, 0.0) > now:
                continue
            self._in_flight[node] = loop.create_task(self._fetch(node, wanted),
                                                     name=f"aiokafka-lite share fetch from broker {node}")
            started += 1
        for node, session in self._sessions.items():  # no partition fetched there now: settle alone
            mine = self._acks.pending(tp for tp, n in self._acquired_from.items() if n == node)
            if mine and session.open and node not in by_node and node not in self._in_flight:
                self._in_flight[node] = loop.create_task(self._settle(node, mine),
                                                         name=f"aiokafka-lite share acknowledge to broker {node}")
        return started

    async def _settle(self, node: int, tps: set[TopicPartition]) -> None:
        try:  # taken when it runs: one cancelled before (by close(), end_sessions()) leaves them pending
            self._ack_results.update(await self._acknowledge_on(node, self._acks.take(tps, renewals=True)))
        finally:
            self._in_flight.pop(node, None)

    async def _fetch(self, node: int, wanted: set[TopicPartition]) -> None:
        loop = asyncio.get_running_loop()
        session = self._sessions.setdefault(node, ShareSession())
        stored: bool | None = None
        taken: dict[TopicPartition, list[Batch]] = {}
        try:
            conn: ConnectionLike = await self._cluster.connection(node, timeout=self._request_timeout)
            version = conn.version_for(SHARE_FETCH, self._max_version)
            mine = self._acks.pending(tp for tp, n in self._acquired_from.items() if n == node)
            if mine - wanted and session.open:  # partitions no longer fetched from here: settle them alone
                taken = self._acks.take(mine - wanted, renewals=True)
                self._ack_results.update((await self._acknowledge(conn, node, taken, version)).results)
            plan = session.fetch_plan(wanted)
            taken = {} if plan.opens else self._acks.take(mine & wanted, renewals=False)
            ids = self._topic_ids(wanted | plan.forget | taken.keys())
            sent = loop.time()
            response = await conn.send(SHARE_FETCH, version, self._settings.fetch_body(plan, taken, ids),
                                       timeout=self._request_timeout + self._settings.max_wait_ms / 1000)
            stored = self._store(node, session, response, taken, ids, sent)
            self._failures.pop(node, None)  # succeeded: the next failure starts the backoff over
        except Exception as exc:
            session.reset()
            self._ack_results.update(dict.fromkeys(taken, as_kafka_error(exc)))
            self._failed(node, exc)
        except BaseException:  # cancelled: whether the broker applied the request is unknown
            session.reset()
            raise
        finally:
            self._in_flight.pop(node, None)
        if stored is None:
            return
        # A broker answering "nothing" without holding the long poll would make a busy loop: back off.
        if stored or loop.time() - sent >= self._settings.max_wait_ms / 2000:
            self.send_fetches()
        else:
            self._retry_later(node, self._retry_backoff)

    def _store(self, node: int, session: ShareSession, response: Mapping[str, Any],
               taken: Mapping[TopicPartition, list[Batch]], ids: Mapping[str, Any], sent: float) -> bool:
        """Apply a ShareFetch answer (sent at ``sent``); True: something buffered, or fetch again at once."""
        code = response["error_code"]
        if not session.answered(code):
            log.info("broker %d ended the share session: %s; opening a new one", node, BrokerError(code).name)
            self._acks.restore(taken)  # not applied: they go with the new session's first acknowledgements
            return True
        if code:
            raise broker_error(code, f"ShareFetch to broker {node}")
        self._renewals.lock_is(response["acquisition_lock_timeout_ms"])
        # The broker started the locks after ``sent``: so counted, they lapse no sooner than we think,
        # however late the answer reached us (a long poll, a busy loop).
        deadline = sent + response["acquisition_lock_timeout_ms"] / 1000
        endpoints = {e["node_id"]: BrokerInfo(e["node_id"], e["host"], e["port"], e["rack"])
                     for e in response.get("node_endpoints") or ()}
        stored = False
        for tp, part in answered_partitions(response, {v: k for k, v in ids.items()}):
            if tp in taken:
                self._ack_results[tp] = ack_outcome(part["acknowledge_error_code"], f"acknowledging {tp}")
            stored |= self._partition(node, tp, part, deadline, endpoints)
        if stored:
            self._ready.set()
        return stored

    def _partition(self, node: int, tp: TopicPartition, part: Mapping[str, Any], deadline: float,
                   endpoints: Mapping[int, BrokerInfo]) -> bool:
        code = part["error_code"]
        if code in LEADER_MOVED:
            leader = part.get("current_leader")
            hinted = (leader is not None and leader["leader_id"] >= 0 and self._cluster.apply_leader_hint(
                tp, leader["leader_id"], leader["leader_epoch"], endpoints))
            log.info("share fetch for %s (broker %d): %s; %s", tp, node, BrokerError(code).name,
                     "the answer names its leader" if hinted else "refreshing metadata")
            self._refresh_needed |= not hinted
            return hinted
        if code:
            self._errors.append(broker_error(code, f"ShareFetch for {tp} (broker {node})"))
            self._ready.set()
            return False
        acquired = [AcquiredRange(a["first_offset"], a["last_offset"], a["delivery_count"])
                    for a in part["acquired_records"] or ()]
        if not acquired:
            return False
        offsets = [o for r in acquired for o in range(r.first_offset, r.last_offset + 1)]
        self._acquired += len(offsets)
        self._acquired_from[tp] = node
        if tp not in self._assignment or self._buffer.has_next(tp):  # revoked meanwhile: give them back
            self._acks.release(tp, offsets)
            return False
        if self._acks.reacquired(tp, offsets):
            log.info("records of %s came back to this member after their locks lapsed: earlier decisions dropped", tp)
            self._renewals.forget(tp, offsets)
        records = AcquiredRecords(tp, node, part["records"], acquired, deadline, check_crcs=self._check_crcs)
        self._buffer.add(records)
        self._renewals.waiting(records)
        return True

    def _topic_ids(self, tps: Iterable[TopicPartition]) -> dict[str, Any]:
        ids: dict[str, Any] = {}
        for tp in tps:
            topic_id = self._cluster.topic_id(tp.topic)
            if topic_id is None:
                self._refresh_needed = True
                raise KafkaError(f"the id of topic {tp.topic!r} is not known yet")
            ids[tp.topic] = topic_id
        return ids

    # ------------------------------------------------------------------ failures, retries, metadata

    def _failed(self, node: int, exc: Exception) -> None:
        backoff = self._failures.setdefault(node, Backoff(self._retry_backoff, self._retry_backoff_max))
        backoff.failed(asyncio.get_running_loop().time())
        delay = backoff.delay()
        log.info("share fetch from broker %d failed: %s; retrying in %.3f s", node, exc, delay)
        if not transient(exc):  # said once by the next fetched_records(); retried all the same
            self._errors.append(as_kafka_error(exc))
            self._ready.set()
        self._refresh_needed = True
        self._retry_later(node, delay)

    def _retry_later(self, node: int, delay: float) -> None:
        loop = asyncio.get_running_loop()
        self._not_before[node] = loop.time() + delay
        if (timer := self._timers.pop(node, None)) is not None:
            timer.cancel()
        if not self._closed:
            self._timers[node] = loop.call_later(delay, self._retry, node)

    def _retry(self, node: int) -> None:
        self._timers.pop(node, None)
        self._not_before.pop(node, None)
        self.send_fetches()

    def _refresh_metadata(self) -> None:
        if self._side_tasks:
            return
        task = asyncio.get_running_loop().create_task(self._refresh(), name="aiokafka-lite share fetch metadata")
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    async def _refresh(self) -> None:
        topics = sorted({tp.topic for tp in self._assignment})
        try:
            await self._cluster.refresh_metadata(topics, timeout=self._request_timeout)
            self._refresh_needed = False
        except Exception as exc:
            log.info("metadata refresh for share fetching failed: %s", exc)
            await asyncio.sleep(self._retry_backoff_max)
        self._side_tasks.clear()  # the only one: done, so the next refresh may start
        self.send_fetches()

    # ------------------------------------------------------------------ handing out, acknowledging

    def fetched_records(self, max_records: int, *, strict: bool = True) -> dict[TopicPartition, list[ShareRecord]]:
        """Up to ``max_records`` acquired records, partitions in turn. Implicit mode first accepts
        everything handed out before; explicit mode refuses (IllegalStateError) while a record
        handed out before awaits its acknowledgement, as Java's poll() does, unless not ``strict``
        (the ShareConsumer keeps that rule per task). A stored error is raised once."""
        if not self._explicit:
            self._acks.accept_delivered()
        elif strict and (undecided := self._acks.undecided()):
            raise IllegalStateError(f"{undecided} records handed out earlier are not acknowledged: in "
                                    "explicit mode acknowledge each record before fetching more")
        if self._errors:
            raise self._errors.pop(0)
        out: dict[TopicPartition, list[ShareRecord]] = {}
        drained = False
        for tp in self._buffer.partitions():
            if max_records <= 0:
                break
            acquired = self._buffer.current(tp)
            try:
                records, gaps = acquired.take(max_records)
            except KafkaError as exc:  # undecodable: give the rest back, say why
                self._acks.release(tp, acquired.remaining())
                self._buffer.finished(tp)
                self._renewals.handed_out(acquired)
                drained = True
                self._errors.append(exc)
                continue
            self._acks.gaps(tp, gaps)
            if records:
                self._acks.delivered(tp, (r.offset for r in records))
                out[tp] = records
                max_records -= len(records)
            drained |= acquired.left <= self._buffer.refill_at  # time to ask for more?
            if acquired.exhausted:
                self._buffer.finished(tp)
                self._renewals.handed_out(acquired)
            else:  # let the next partition go first next time
                self._buffer.rotate(tp)
        if not self._buffer and not self._errors:
            self._ready.clear()
        if drained:
            self.send_fetches()
        return out

    def acknowledge(self, record: ShareRecord, ack_type: AckType | int = AckType.ACCEPT) -> None:
        """Decide ``record`` (accept, release, reject, or renew on v2 brokers); sent with the next
        fetch from its broker, or by ``commit()``. Explicit mode only, as in Java."""
        if not self._explicit:
            raise IllegalStateError("acknowledge() is for explicit acknowledgement mode; implicit mode "
                                    "accepts every record at the next fetch")
        self._acks.acknowledge(TopicPartition(record.topic, record.partition), record.offset, ack_type)

    def acknowledge_all(self, records: Iterable[ShareRecord], ack_type: AckType) -> int:
        """Decide many records alike (accept, release, reject): how many awaited a decision."""
        if not self._explicit:
            raise IllegalStateError("acknowledge_all() is for explicit acknowledgement mode")
        return self._acks.acknowledge_all(records, ack_type)

    def keep_locked(self, record: ShareRecord) -> None:
        """A handler works on ``record``: renew its acquisition lock before it lapses (KIP-1222, v2
        brokers) until ``release_lock()`` or renewal_max seconds; a decision ends it too."""
        self._renewals.keep(record)

    def release_lock(self, record: ShareRecord) -> None:
        """No longer renew ``record``'s lock (its handler ended)."""
        self._renewals.release(TopicPartition(record.topic, record.partition), record.offset)

    def renewal_metrics(self) -> dict[str, int]:
        return self._renewals.metrics()

    def record_counts(self) -> dict[str, int]:  # lapsed: acquired again before a decision went (ledger.py)
        return {"records_acquired": self._acquired, "records_lapsed": self._acks.lapsed}

    def take_acknowledgement_results(self) -> AckResults:
        """The results of the acknowledgements sent with fetches since the last call (None: done)."""
        results, self._ack_results = self._ack_results, {}
        return results

    async def wait_for_data(self, timeout: float | None) -> None:
        """Return when records (or an error) wait to be handed out, or after ``timeout`` seconds."""
        if self._closed:
            return
        try:
            async with asyncio.timeout(timeout):
                await self._ready.wait()
        except TimeoutError:
            return

    async def commit(self, timeout: float | None) -> AckResults:
        """Send every pending decision now with ShareAcknowledge (implicit mode: accept what was
        handed out); per partition, the result: None, or the error (KafkaTimeoutError after ``timeout``)."""
        if not self._explicit:
            self._acks.accept_delivered()
        by_node: dict[int, set[TopicPartition]] = {}
        for tp in self._acks.pending():
            by_node.setdefault(self._acquired_from[tp], set()).add(tp)
        results: AckResults = {}
        tasks = []
        for node, tps in by_node.items():
            session = self._sessions.get(node)
            if session is None or not session.open:  # kept for the first fetch of a new session
                results.update(dict.fromkeys(tps, broker_error(SHARE_SESSION_NOT_FOUND, f"acknowledging on {node}")))
                continue
            # Taken now, before a fetch task about to start can take them: they are this call's.
            taken = self._acks.take(tps, renewals=True)
            tasks.append(asyncio.ensure_future(self._acknowledge_on(node, taken)))
        if not await merge_within(tasks, timeout, results):
            lapsed = KafkaTimeoutError(f"acknowledgements not answered within {timeout} s")
            results.update({tp: results.get(tp, lapsed) for tps in by_node.values() for tp in tps})
        return results

    async def _acknowledge_on(self, node: int, taken: dict[TopicPartition, list[Batch]],
                              epoch: int | None = None) -> AckResults:
        return (await self._send_on(node, taken, epoch)).results

    async def _send_on(self, node: int, taken: dict[TopicPartition, list[Batch]],
                       epoch: int | None = None) -> Acknowledged:
        try:
            conn: ConnectionLike = await self._cluster.connection(node, timeout=self._request_timeout)
            version = conn.version_for(SHARE_ACKNOWLEDGE, self._max_version)
            return await self._acknowledge(conn, node, taken, version, epoch)
        except Exception as exc:
            return Acknowledged(dict.fromkeys(taken, as_kafka_error(exc)), None)

    async def _acknowledge(self, conn: ConnectionLike, node: int, taken: dict[TopicPartition, list[Batch]],
                           version: int, epoch: int | None = None) -> Acknowledged:
        """One ShareAcknowledge to ``node`` carrying ``taken`` (``epoch``: -1 closes the session)."""
        done = await send_acknowledgements(
            conn, node, self._sessions[node], version, taken, settings=self._settings, acks=self._acks,
            topic_ids=self._topic_ids, timeout=self._request_timeout + self._settings.max_wait_ms / 1000, epoch=epoch)
        self._renewals.lock_is(done.lock_ms)
        return done

    # ------------------------------------------------------------------ closing

    async def close(self, timeout: float | None = None) -> AckResults:
        """Stop fetching, then end every share session with epoch -1, carrying the last decisions
        (implicit mode: accept what was handed out; records never handed out are released).
        Returns those acknowledgements' results. Idempotent; bounded by ``timeout``."""
        if self._closed:
            return {}
        self._closed = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        return await self._end_sessions(timeout, accept=not self._explicit)

    async def end_sessions(self, timeout: float | None) -> AckResults:
        """The member left the group (its poll deadline lapsed): end every share session with epoch -1
        now, carrying the decisions taken, so the broker hands the rest it acquired for us (held records
        too) to live members, as Java does. The undecided are forgotten; later fetches open new sessions."""
        self._ending = True
        try:
            return await self._end_sessions(timeout, accept=False)
        finally:
            self._ending = False
            self.send_fetches()

    async def _end_sessions(self, timeout: float | None, accept: bool) -> AckResults:
        # Renewals stop too: the sessions' end releases what they held.
        tasks = [*self._in_flight.values(), *self._side_tasks, *self._renewals.halt(final=self._closed)]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        self._in_flight.clear()  # a task cancelled before its first step never ran its own clean-up
        if accept:
            self._acks.accept_delivered()
        for tp, offsets in self._buffer.drain().items():
            self._acks.release(tp, offsets)
        self._ready.set()
        ends = []  # a session a cancelled fetch reset may still be open on its broker: ended too
        for node, session in self._sessions.items():
            if session.started:
                mine = self._acks.pending(tp for tp, n in self._acquired_from.items() if n == node)
                ends.append(asyncio.ensure_future(self._end_session(node, self._acks.take(mine, renewals=False))))
        self._acks.forget(set(self._acquired_from))  # what no decision came for: the broker releases it
        results: AckResults = {}
        if not await merge_within(ends, timeout, results):
            log.info("share sessions not all closed within %s s", timeout)
        return results

    async def _end_session(self, node: int, taken: dict[TopicPartition, list[Batch]]) -> AckResults:
        try:
            return await self._acknowledge_on(node, taken, FINAL_EPOCH)
        finally:
            self._sessions[node].close()
