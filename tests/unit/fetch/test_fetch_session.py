"""FetchSession (KIP-227): which partitions each request names, and how errors start over."""

from __future__ import annotations

import uuid

from aiokafka_lite.fetch.sessions import FetchSession
from aiokafka_lite.structs import TopicPartition

A, B, C = (TopicPartition("t", p) for p in range(3))
V12 = 12


def opened(session_id: int = 77) -> FetchSession:
    """A session the broker granted on a full fetch of A and B at offsets 0 and 5."""
    session = FetchSession()
    plan = session.plan({A: 0, B: 5}, V12)
    assert (plan.session_id, plan.epoch, plan.send, plan.forget) == (0, 0, {A: 0, B: 5}, [])
    assert session.answered(plan, 0, session_id)
    assert (session.session_id, session.epoch, session.partitions) == (session_id, 1, {A: 0, B: 5})
    return session


def test_incremental_requests_name_only_what_moved_and_what_to_forget() -> None:
    session = opened()
    unchanged = session.plan({A: 0, B: 5}, V12)
    assert (unchanged.session_id, unchanged.epoch, unchanged.send, unchanged.forget) == (77, 1, {}, [])
    assert unchanged.wanted == {A: 0, B: 5}  # the answer may still carry data for both
    assert session.answered(unchanged, 0, 77)
    moved = session.plan({A: 9, C: 1}, V12)  # A moved, B no longer wanted, C new
    assert (moved.epoch, moved.send, moved.forget) == (2, {A: 9, C: 1}, [B])
    assert session.answered(moved, 0, 77)
    assert (session.epoch, session.partitions) == (3, {A: 9, C: 1})
    assert (session.full_requests, session.incremental_requests, session.partitions_sent) == (1, 2, 4)


def test_no_session_granted_means_full_fetches() -> None:
    session = FetchSession()
    for _ in range(3):
        plan = session.plan({A: 0, B: 5}, V12)
        assert (plan.session_id, plan.epoch, plan.send) == (0, 0, {A: 0, B: 5})
        assert session.answered(plan, 0, 0)
    assert (session.full_requests, session.incremental_requests) == (3, 0)


def test_brokers_before_fetch_v7_get_sessionless_full_fetches() -> None:
    session = opened()
    plan = session.plan({A: 3}, 6)
    assert (plan.session_id, plan.epoch, plan.send, plan.forget) == (0, -1, {A: 3}, [])
    assert session.answered(plan, 0, 0)
    assert (session.session_id, session.epoch, session.partitions) == (0, 0, {})


def test_session_id_not_found_opens_a_new_session() -> None:
    session = opened()
    plan = session.plan({A: 4, B: 5}, V12)
    assert not session.answered(plan, 70, 0)  # FETCH_SESSION_ID_NOT_FOUND: no data in the answer
    full = session.plan({A: 4, B: 5}, V12)
    assert (full.session_id, full.epoch, full.send) == (0, 0, {A: 4, B: 5})


def test_a_wrong_epoch_or_a_lost_request_closes_the_old_session_in_the_next_full_fetch() -> None:
    for fail in (lambda s, p: s.answered(p, 71, 0), lambda s, p: s.failed()):
        session = opened()
        fail(session, session.plan({A: 4, B: 5}, V12))
        full = session.plan({A: 4, B: 5}, V12)
        assert (full.session_id, full.epoch, full.send) == (77, 0, {A: 4, B: 5})  # "close 77, open anew"
        assert session.answered(full, 0, 78)
        assert (session.session_id, session.epoch) == (78, 1)


def test_other_top_level_errors_leave_the_session_alone() -> None:
    session = opened()
    plan = session.plan({A: 4, B: 5}, V12)
    assert session.answered(plan, 3, 77)  # not a session error: the caller deals with it
    assert (session.epoch, session.partitions) == (1, {A: 0, B: 5})


def test_the_epoch_wraps_to_one() -> None:
    session = opened()
    session.epoch = 2**31 - 1
    assert session.answered(session.plan({A: 0, B: 5}, V12), 0, 77)
    assert session.epoch == 1



ID_T, ID_T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def test_a_session_starts_over_when_topics_change_from_names_to_ids_and_back() -> None:
    session = opened()  # topics named (v12)
    by_id = session.plan({A: 0, B: 5}, 16, {"t": ID_T})  # every topic id known now: by id
    assert (by_id.session_id, by_id.epoch, by_id.send, by_id.topic_ids) == (77, 0, {A: 0, B: 5}, {"t": ID_T})
    assert session.answered(by_id, 0, 78)  # 77 closed, 78 opened
    assert (session.session_id, session.epoch, session.topic_ids) == (78, 1, {"t": ID_T})
    same = session.plan({A: 0, B: 5}, 16, {"t": ID_T})
    assert (same.epoch, same.send) == (1, {})  # incremental again
    back = session.plan({A: 0, B: 5}, V12, None)  # a topic id unknown again: by name, a new session
    assert (back.session_id, back.epoch, back.send, back.topic_ids) == (78, 0, {A: 0, B: 5}, None)


def test_a_topic_with_a_new_id_starts_the_session_over() -> None:
    session = FetchSession[int]()
    first = session.plan({A: 0}, 16, {"t": ID_T})
    assert session.answered(first, 0, 90)
    same = session.plan({A: 0}, 16, {"t": ID_T})
    assert (same.epoch, same.send) == (1, {})
    recreated = session.plan({A: 0}, 16, {"t": ID_T2})  # "t" deleted and created again
    assert (recreated.session_id, recreated.epoch, recreated.send) == (90, 0, {A: 0})
    assert recreated.topic_ids == {"t": ID_T2}
