"""The share fetcher's lock renewals (fetch/share/renewals.py, KIP-1222) and acquire mode (KIP-1206)
against scripted ShareFetch/ShareAcknowledge answers: records waiting in the buffer and records a
handler keeps are renewed before their short locks lapse, in one ShareAcknowledge with is_renew_ack;
others are not; renewing stops at the bound and on a broker without RENEW, said once."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from aiokafka_lite.fetch.share.acknowledge import Acknowledged
from aiokafka_lite.fetch.share.buffer import AcquiredBuffer
from aiokafka_lite.fetch.share.ledger import AckType, ShareAcknowledgements, expand
from aiokafka_lite.fetch.share.records import AcquiredRange, AcquiredRecords
from aiokafka_lite.fetch.share.renewals import LockRenewals
from aiokafka_lite.protocol.messages import SHARE_ACKNOWLEDGE, SHARE_FETCH
from aiokafka_lite.structs import TopicPartition

from .test_share_fetcher import (
    T0,
    FakeCluster,
    acks_in,
    batch,
    fetch_answer,
    fetcher_for,
    part,
    records_of,
    until_requests,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("record_decoder")]

LOCK_MS = 400  # max_wait_ms is 100 (fetcher_for): renewed 250 ms after the answer at the latest


def renewals(cluster: FakeCluster) -> list[dict[int, list[dict[str, Any]]]]:
    return [acks_in(body) for body in cluster.sent(SHARE_ACKNOWLEDGE) if body["is_renew_ack"]]


async def test_records_waiting_to_be_handed_out_are_renewed_before_their_lock_lapses() -> None:
    cluster = FakeCluster({T0: 1})
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 4), [(0, 3, 1)]), lock_ms=LOCK_MS))
    fetcher = fetcher_for(cluster, explicit=True)
    try:
        fetcher.assign([T0])
        await fetcher.wait_for_data(5.0)
        loop = asyncio.get_running_loop()
        began = loop.time()
        await asyncio.sleep(3 * LOCK_MS / 1000)  # nothing handed out for three lock durations
        # renewed once: the answer (ack_answer) gives a 30 s lock, which needs no renewal yet
        assert renewals(cluster) == [{0: [{"first_offset": 0, "last_offset": 3,
                                           "acknowledge_types": [AckType.RENEW]}]}]
        records = fetcher.fetched_records(2)[T0]
        assert records[0].acquisition_deadline - began > 25  # the renewed deadline goes with them
        assert fetcher.renewal_metrics()["records_renewed"] == 4
    finally:
        await fetcher.close(1.0)


async def test_a_kept_record_is_renewed_and_one_handed_out_without_a_handler_is_not() -> None:
    cluster = FakeCluster({T0: 1})
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 2), [(0, 1, 1)]), lock_ms=LOCK_MS))
    fetcher = fetcher_for(cluster, explicit=True)
    try:
        fetcher.assign([T0])
        kept, left = (await records_of(fetcher))[T0]
        fetcher.keep_locked(kept)
        answers = [fetch_answer(lock_ms=LOCK_MS)]  # the next fetches find nothing
        cluster.answer(SHARE_FETCH, answers[0])
        await asyncio.sleep(3 * LOCK_MS / 1000)
        sent = renewals(cluster)
        assert sent
        assert all(acks == {0: [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [AckType.RENEW]}]}
                   for acks in sent), sent  # never offset 1: no handler keeps it
        fetcher.release_lock(kept)
        count = len(renewals(cluster))
        await asyncio.sleep(3 * LOCK_MS / 1000)
        assert len(renewals(cluster)) == count
        fetcher.acknowledge(kept, AckType.ACCEPT)
        fetcher.acknowledge(left, AckType.ACCEPT)
    finally:
        await fetcher.close(1.0)


async def test_a_decision_pending_for_the_broker_goes_with_the_renewal() -> None:
    cluster = FakeCluster({T0: 1})
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 2), [(0, 1, 1)]), lock_ms=LOCK_MS))
    fetcher = fetcher_for(cluster, explicit=True)
    try:
        fetcher.assign([T0])
        kept, done = (await records_of(fetcher))[T0]
        await until_requests(cluster, SHARE_FETCH, 2)
        fetcher.keep_locked(kept)
        fetcher.acknowledge(done, AckType.ACCEPT)  # the fetch in flight was built before it
        await asyncio.sleep(LOCK_MS / 1000)
        assert renewals(cluster)[0] == {0: [{"first_offset": 0, "last_offset": 1,
                                             "acknowledge_types": [AckType.RENEW, AckType.ACCEPT]}]}
        assert fetcher.take_acknowledgement_results() == {T0: None}  # the accept's result, as any other
    finally:
        await fetcher.close(1.0)


async def test_renewing_stops_at_the_bound_said_once(caplog: pytest.LogCaptureFixture) -> None:
    cluster = FakeCluster({T0: 1})
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 2), [(0, 1, 1)]), lock_ms=LOCK_MS))
    fetcher = fetcher_for(cluster, explicit=True, renewal_max=0.5)
    try:
        fetcher.assign([T0])
        kept, other = (await records_of(fetcher))[T0]
        fetcher.keep_locked(kept)
        fetcher.keep_locked(other)
        await asyncio.sleep(1.5)
        assert renewals(cluster)  # within the bound
        count = len(renewals(cluster))
        await asyncio.sleep(0.5)
        assert len(renewals(cluster)) == count
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1
        assert "share_lock_renewal_max_ms" in warnings[0]
        assert fetcher.renewal_metrics()["given_up"] == 2
    finally:
        await fetcher.close(1.0)


async def test_a_broker_without_renew_ends_renewing_said_once(caplog: pytest.LogCaptureFixture) -> None:
    cluster = FakeCluster({T0: 1})
    cluster.version = 1
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 2), [(0, 1, 1)]), lock_ms=LOCK_MS))
    fetcher = fetcher_for(cluster, explicit=True)
    try:
        fetcher.assign([T0])
        kept, _ = (await records_of(fetcher))[T0]
        fetcher.keep_locked(kept)
        await asyncio.sleep(3 * LOCK_MS / 1000)
        assert renewals(cluster) == []  # v1 has no is_renew_ack: nothing goes
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1
        assert "cannot renew" in warnings[0]
        assert fetcher.renewal_metrics()["watched"] == 0
    finally:
        await fetcher.close(1.0)


@pytest.mark.parametrize(("mode", "wire"), [("batch_optimized", 0), ("record_limit", 1)])
async def test_the_acquire_mode_goes_in_every_share_fetch(mode: str, wire: int) -> None:
    cluster = FakeCluster({T0: 1})
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 2), [(0, 1, 1)])))
    fetcher = fetcher_for(cluster, acquire_mode=mode, max_records=7)
    try:
        fetcher.assign([T0])
        await records_of(fetcher)
        [first, *_] = cluster.sent(SHARE_FETCH)
        assert (first["share_acquire_mode"], first["max_records"]) == (wire, 7)
    finally:
        await fetcher.close(1.0)


async def test_a_record_handed_out_while_its_batch_is_being_renewed_takes_that_renewal() -> None:
    """The waiting batch's renewal is on its way (the broker has not answered) when a handler takes
    one of its records, with the deadline it had before: that record's lock was renewed by that
    request, so it is not counted as lapsed when its old deadline passes; it gets the new one."""
    acks, buffer, gate, went = ShareAcknowledgements(), AcquiredBuffer(refill_at=10), asyncio.Event(), asyncio.Event()
    requests: list[dict[TopicPartition, Any]] = []

    async def send(node: int, taken: dict[TopicPartition, Any]) -> Acknowledged:
        requests.append(taken)
        went.set()
        await gate.wait()
        return Acknowledged(dict.fromkeys(taken), 30_000)

    renewals = LockRenewals(acks=acks, buffer=buffer, nodes={T0: 1}, send=send, session_open=lambda node: True,
                            on_results=lambda results: None, queue_wait=0.1, bound=60.0, retry_backoff=0.05)
    loop = asyncio.get_running_loop()
    try:
        renewals.lock_is(LOCK_MS)
        acquired = AcquiredRecords(T0, 1, batch(0, 2), [AcquiredRange(0, 1, 1)], loop.time() + LOCK_MS / 1000)
        buffer.add(acquired)
        renewals.waiting(acquired)
        await asyncio.wait_for(went.wait(), 5.0)
        (record, _), _gaps = acquired.take(2)
        acks.delivered(T0, [0, 1])
        renewals.keep(record)  # its deadline: the one before the renewal under way
        await asyncio.sleep(LOCK_MS / 1000)  # past that deadline, the answer still to come
        gate.set()
        await asyncio.sleep(0.05)
        assert renewals.metrics()["lapsed"] == 0
        assert len(requests) == 1  # no renewal of its own: the batch's covered it
        assert renewals.metrics()["watched"] >= 1
    finally:
        for task in renewals.halt(final=True):
            await asyncio.gather(task, return_exceptions=True)


async def test_a_renewal_due_while_another_to_the_same_broker_waits_goes_at_once() -> None:
    """Two handlers' records from two answers, 0.1 s apart: the second's renewal falls due while
    the first's waits at the broker (behind a long poll). It goes at once, to queue behind the same
    long poll; waiting for the first's answer would add a second long poll to its wait, and at
    the broker its lock lapses (INVALID_RECORD_STATE; seen in CI with 1.5 s locks)."""
    acks, buffer, gate, both = ShareAcknowledgements(), AcquiredBuffer(refill_at=10), asyncio.Event(), asyncio.Event()
    requests: list[dict[TopicPartition, Any]] = []
    loop = asyncio.get_running_loop()

    async def send(node: int, taken: dict[TopicPartition, Any]) -> Acknowledged:
        requests.append(taken)
        if len(requests) == 2:
            both.set()
        await gate.wait()  # the broker answers once the long poll ahead of them ends
        return Acknowledged(dict.fromkeys(taken), LOCK_MS)

    renewals = LockRenewals(acks=acks, buffer=buffer, nodes={T0: 1}, send=send, session_open=lambda node: True,
                            on_results=lambda results: None, queue_wait=0.1, bound=60.0, retry_backoff=0.05)
    try:
        renewals.lock_is(LOCK_MS)
        for offset in (0, 1):
            acquired = AcquiredRecords(T0, 1, batch(offset, 1), [AcquiredRange(offset, offset, 1)],
                                       loop.time() + LOCK_MS / 1000)
            [record], _gaps = acquired.take(1)
            acks.delivered(T0, [offset])
            renewals.keep(record)
            await asyncio.sleep(0.1)
        async with asyncio.timeout(LOCK_MS / 1000):  # the first still unanswered
            await both.wait()
        assert [expand(taken[T0]) for taken in requests[:2]] == [{0: AckType.RENEW}, {1: AckType.RENEW}]
        gate.set()
        await asyncio.sleep(0.05)
        assert renewals.metrics()["records_renewed"] >= 2  # (renewed again since: their answers came late)
        assert renewals.metrics()["renewals_failed"] == renewals.metrics()["lapsed"] == 0
    finally:
        for task in renewals.halt(final=True):
            await asyncio.gather(task, return_exceptions=True)


async def test_a_lock_is_counted_from_when_its_share_fetch_went_not_from_its_answer() -> None:
    """The broker starts the lock between the request and the answer: an answer after a 0.3 s long
    poll (or a busy loop that read it late) leaves up to 0.3 s less of the lock than it says."""
    cluster = FakeCluster({T0: 1})
    fetcher = fetcher_for(cluster, explicit=True)
    loop = asyncio.get_running_loop()
    try:
        fetcher.assign([T0])
        await until_requests(cluster, SHARE_FETCH, 1)
        went = loop.time()
        await asyncio.sleep(0.3)  # the long poll
        cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 1), [(0, 0, 1)])))
        [record] = (await records_of(fetcher))[T0]
        assert went - 0.05 <= record.acquisition_deadline - 30.0 <= went + 0.05
        fetcher.acknowledge(record, AckType.ACCEPT)
    finally:
        await fetcher.close(1.0)


async def test_an_answer_all_handed_out_is_watched_no_longer() -> None:
    """What the schedule keeps is bounded by what waits: an answer handed out whole leaves it at
    once (not when its renewal would have been due, 15 s later under a 30 s lock, holding its data)."""
    cluster = FakeCluster({T0: 1})
    cluster.answer(SHARE_FETCH, fetch_answer(part(0, batch(0, 4), [(0, 3, 1)])))
    fetcher = fetcher_for(cluster, explicit=True)
    try:
        fetcher.assign([T0])
        await fetcher.wait_for_data(5.0)
        assert fetcher.renewal_metrics()["watched"] == 1
        fetcher.fetched_records(2, strict=False)
        assert fetcher.renewal_metrics()["watched"] == 1  # two still wait
        fetcher.fetched_records(2, strict=False)
        assert fetcher.renewal_metrics()["watched"] == 0
    finally:
        await fetcher.close(1.0)
