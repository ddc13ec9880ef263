"""The share group acknowledgement ledger, batch coalescing, share session epochs and acquired
records (fetch/share/ledger.py, session.py, records.py): no broker, no event loop."""

from __future__ import annotations

import pytest

from aiokafka_lite.errors import IllegalStateError, InvalidArgumentError
from aiokafka_lite.fetch.share.ledger import AckType, ShareAcknowledgements, coalesce
from aiokafka_lite.fetch.share.records import AcquiredRange, AcquiredRecords
from aiokafka_lite.fetch.share.session import (
    FINAL_EPOCH,
    INVALID_SHARE_SESSION_EPOCH,
    SHARE_SESSION_NOT_FOUND,
    ShareSession,
)
from aiokafka_lite.protocol.records.build import build_control_batch, build_record_batch
from aiokafka_lite.protocol.records.decode import decode_records
from aiokafka_lite.structs import TopicPartition

pytestmark = pytest.mark.usefixtures("record_decoder")

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
ACCEPT, RELEASE, REJECT, GAP, RENEW = AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.GAP, AckType.RENEW


def batch(base: int, count: int) -> bytes:
    return build_record_batch([(b"k%d" % (base + i), b"v%d" % (base + i)) for i in range(count)], base_offset=base)


# ---------------------------------------------------------------------- coalescing


def test_coalesce_uniform_range_has_one_type() -> None:
    assert coalesce({5: 1, 3: 1, 4: 1}) == [{"first_offset": 3, "last_offset": 5, "acknowledge_types": [1]}]


def test_coalesce_mixed_range_has_one_type_per_offset() -> None:
    assert coalesce({0: 1, 1: 2, 2: 1, 3: 0}) == [
        {"first_offset": 0, "last_offset": 3, "acknowledge_types": [1, 2, 1, 0]}]


def test_coalesce_splits_at_holes() -> None:
    assert coalesce({0: 1, 1: 1, 4: 3, 6: 2, 7: 0}) == [
        {"first_offset": 0, "last_offset": 1, "acknowledge_types": [1]},
        {"first_offset": 4, "last_offset": 4, "acknowledge_types": [3]},
        {"first_offset": 6, "last_offset": 7, "acknowledge_types": [2, 0]},
    ]
    assert coalesce({}) == []


# ---------------------------------------------------------------------- the ledger


def test_ledger_explicit_decisions_gaps_and_take() -> None:
    acks = ShareAcknowledgements()
    acks.delivered(T0, [0, 1, 3])
    acks.gaps(T0, [2])
    assert acks.undecided() == 3
    acks.acknowledge(T0, 0, ACCEPT)
    acks.acknowledge(T0, 1, RELEASE)
    acks.acknowledge(T0, 3, 3)
    assert acks.undecided() == 0
    assert acks.pending() == {T0}
    assert acks.take([T0, T1], renewals=False) == {
        T0: [{"first_offset": 0, "last_offset": 3, "acknowledge_types": [1, 2, 0, 3]}]}
    assert acks.pending() == set()
    assert acks.take([T0], renewals=False) == {}


def test_ledger_refuses_what_is_not_awaiting_a_decision() -> None:
    acks = ShareAcknowledgements()
    acks.delivered(T0, [7])
    with pytest.raises(IllegalStateError):
        acks.acknowledge(T0, 8, ACCEPT)  # never handed out
    acks.acknowledge(T0, 7, ACCEPT)
    with pytest.raises(IllegalStateError):
        acks.acknowledge(T0, 7, REJECT)  # already decided
    with pytest.raises(InvalidArgumentError):
        acks.acknowledge(T0, 7, GAP)
    with pytest.raises(InvalidArgumentError):
        acks.acknowledge(T0, 7, 9)


def test_ledger_implicit_accepts_all_handed_out() -> None:
    acks = ShareAcknowledgements()
    acks.delivered(T0, range(10, 15))
    acks.delivered(T1, [0])
    acks.accept_delivered()
    assert acks.undecided() == 0
    assert acks.take([T0, T1], renewals=False) == {
        T0: [{"first_offset": 10, "last_offset": 14, "acknowledge_types": [1]}],
        T1: [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}


def test_ledger_renew_keeps_the_record_undecided_and_goes_only_when_allowed() -> None:
    acks = ShareAcknowledgements()
    acks.delivered(T0, [0, 1])
    acks.acknowledge(T0, 0, RENEW)
    acks.acknowledge(T0, 1, ACCEPT)
    assert acks.undecided() == 1
    assert acks.has_renewals([T0])
    assert acks.take([T0], renewals=False) == {T0: [{"first_offset": 1, "last_offset": 1, "acknowledge_types": [1]}]}
    assert acks.take([T0], renewals=True) == {T0: [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [4]}]}
    acks.acknowledge(T0, 0, ACCEPT)  # the final decision still comes
    assert acks.take([T0], renewals=True) == {T0: [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]}


def test_a_decision_in_a_fetch_takes_the_unsent_renewal_of_that_record_with_it() -> None:
    """A renewal marked but not sent, then the record decided and the decision sent with a fetch
    (which carries no renewals): the renewal must not go after it, or the broker refuses the whole
    partition's acknowledgements (INVALID_RECORD_STATE) in that request, other records' renewals too."""
    acks = ShareAcknowledgements()
    acks.delivered(T0, [0, 1])
    acks.acknowledge(T0, 0, RENEW)
    acks.renew_waiting(T0, [5])
    acks.acknowledge(T0, 0, ACCEPT)
    acks.acknowledge_all([_Handed("t", 0, 1)], REJECT)
    acks.release(T0, [5])  # never handed out, given back
    assert acks.take([T0], renewals=False) == {T0: [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [1, 3]},
                                                   {"first_offset": 5, "last_offset": 5, "acknowledge_types": [2]}]}
    assert not acks.has_renewals([T0])
    assert acks.take([T0], renewals=True) == {}


class _Handed:
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self.topic, self.partition, self.offset = topic, partition, offset


def test_ledger_release_and_forget() -> None:
    acks = ShareAcknowledgements()
    acks.release(T0, [3, 4])
    acks.delivered(T1, [0])
    acks.acknowledge(T1, 0, ACCEPT)
    assert acks.forget([T1]) == 1
    assert acks.take([T0, T1], renewals=False) == {
        T0: [{"first_offset": 3, "last_offset": 4, "acknowledge_types": [2]}]}


# ---------------------------------------------------------------------- share sessions


def test_session_epochs_adds_and_forgets() -> None:
    session = ShareSession()
    first = session.fetch_plan({T0, T1})
    assert (first.epoch, first.send, first.forget, first.opens) == (0, {T0, T1}, set(), True)
    second = session.fetch_plan({T0, T1})
    assert (second.epoch, second.send, second.forget) == (1, set(), set())
    assert session.acknowledge_epoch() == 2
    third = session.fetch_plan({T0})
    assert (third.epoch, third.send, third.forget) == (3, set(), {T1})
    fourth = session.fetch_plan({T0, T1})
    assert (fourth.epoch, fourth.send, fourth.forget) == (4, {T1}, set())
    assert session.epoch == 5
    assert session.opened == 1


@pytest.mark.parametrize("code", [SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH])
def test_session_errors_start_over_at_zero(code: int) -> None:
    session = ShareSession()
    session.fetch_plan({T0})
    session.fetch_plan({T0})
    assert session.answered(0)
    assert not session.answered(code)
    assert (session.epoch, session.resets, session.open) == (0, 1, False)
    again = session.fetch_plan({T0})
    assert (again.epoch, again.send) == (0, {T0})
    with pytest.raises(ValueError, match="open share session"):
        ShareSession().acknowledge_epoch()  # nothing to acknowledge in before a session is open
    assert FINAL_EPOCH == -1


def test_session_epoch_wraps_to_one() -> None:
    session = ShareSession(epoch=2**31 - 1, partitions={T0})
    assert session.fetch_plan({T0}).epoch == 2**31 - 1
    assert session.epoch == 1


# ---------------------------------------------------------------------- acquired records


def test_only_acquired_offsets_are_handed_out() -> None:
    data = batch(0, 10)  # the batch holds 0-9; the broker acquired 2-4 and 7-8 for us
    acquired = AcquiredRecords(T0, 1, memoryview(data), [AcquiredRange(7, 8, 3), AcquiredRange(2, 4, 1)], 100.0)
    records, gaps = acquired.take(100)
    assert [(r.offset, r.value, r.delivery_count, r.acquisition_deadline) for r in records] == [
        (2, b"v2", 1, 100.0), (3, b"v3", 1, 100.0), (4, b"v4", 1, 100.0), (7, b"v7", 3, 100.0), (8, b"v8", 3, 100.0)]
    assert gaps == []
    assert acquired.exhausted
    # ConsumerRecord's fields first, as the same decoder gives them to the Consumer
    assert [r[:9] for r in records] == [tuple(c) for c in decode_records(data, "t", 0) if c.offset in {2, 3, 4, 7, 8}]


def test_acquired_offsets_without_records_are_gaps() -> None:
    # 0-2 records, 3 a transaction marker, 4-5 records, then 6-7 acquired but compacted away.
    data = batch(0, 3) + build_control_batch(1, base_offset=3, producer_id=9) + batch(4, 2)
    acquired = AcquiredRecords(T0, 1, data, [AcquiredRange(0, 7, 1)], 5.0)
    first, gaps = acquired.take(2)
    assert [r.offset for r in first] == [0, 1]
    assert gaps == []
    rest, gaps = acquired.take(10)
    assert [r.offset for r in rest] == [2, 4, 5]
    assert gaps == [3, 6, 7]
    assert acquired.exhausted
    assert acquired.remaining() == []


def test_max_records_leaves_the_rest_remaining() -> None:
    acquired = AcquiredRecords(T0, 1, batch(0, 6), [AcquiredRange(0, 5, 2)], 0.0)
    records, _ = acquired.take(4)
    assert [r.offset for r in records] == [0, 1, 2, 3]
    assert acquired.remaining() == [4, 5]
    assert not acquired.exhausted


def test_reacquired_offsets_drop_stale_decisions_and_waits() -> None:
    acks = ShareAcknowledgements()
    acks.delivered(T0, [0, 1, 2, 3])
    acks.acknowledge(T0, 0, ACCEPT)
    acks.acknowledge(T0, 1, RENEW)
    assert acks.reacquired(T0, [0, 1, 2]) == 3  # the decision for 0, the waits of 1 and 2
    assert acks.undecided() == 1  # 3 still awaits its decision
    assert acks.take([T0], renewals=True) == {}
    assert acks.reacquired(T1, [0]) == 0
    assert acks.lapsed == 3  # each record once (1 was both awaiting a decision and renewing)


def test_lapsed_counts_records_not_gaps_nor_decisions_already_sent() -> None:
    acks = ShareAcknowledgements()
    acks.delivered(T0, [0, 1])
    acks.gaps(T0, [2])
    acks.acknowledge(T0, 0, ACCEPT)
    acks.take([T0], renewals=False)  # 0 and the gap at 2 went to the broker
    acks.gaps(T0, [5])
    assert acks.reacquired(T0, [0, 1, 2, 5]) == 2  # 1's wait and the unsent gap at 5
    assert acks.lapsed == 1  # only 1 was a record this member held past its lock


def test_acknowledge_all_decides_a_batch_by_partition_and_skips_what_awaits_nothing() -> None:
    from collections import namedtuple
    Rec = namedtuple("Rec", "topic partition offset")
    a, b = TopicPartition("jobs", 0), TopicPartition("jobs", 1)
    ledger = ShareAcknowledgements()
    ledger.delivered(a, range(5))
    ledger.delivered(b, range(2))
    ledger.acknowledge(a, 1, AckType.REJECT)  # decided already: skipped below
    done = ledger.acknowledge_all([Rec("jobs", 0, 0), Rec("jobs", 0, 1), Rec("jobs", 0, 2), Rec("jobs", 1, 1),
                                   Rec("jobs", 0, 9), Rec("mail", 0, 0)], AckType.ACCEPT)
    assert done == 3
    assert ledger.undecided() == 3  # a's 3 and 4, b's 0
    assert ledger.take([a, b], renewals=False) == {
        a: [{"first_offset": 0, "last_offset": 2, "acknowledge_types": [1, 3, 1]}],
        b: [{"first_offset": 1, "last_offset": 1, "acknowledge_types": [1]}]}
    with pytest.raises(InvalidArgumentError):
        ledger.acknowledge_all([Rec("jobs", 0, 3)], AckType.RENEW)  # renew is one record's, not a batch's
    assert ledger.undecided() == 3
