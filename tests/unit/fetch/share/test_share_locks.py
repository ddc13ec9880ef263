"""LockSchedule (fetch/share/locks.py): when each watched acquisition lock is renewed, given up or
dropped, on a clock the test gives (no asyncio)."""

from __future__ import annotations

from aiokafka_lite.fetch.share.locks import LockSchedule


def test_a_lock_is_renewed_at_half_its_duration_or_earlier_behind_a_long_poll() -> None:
    schedule: LockSchedule[str] = LockSchedule(queue_wait=0.5)
    assert schedule.lead(30.0) == 15.0  # half
    assert schedule.lead(2.0) == 1.0
    assert schedule.lead(1.0) == 0.75  # the long poll's 0.5 s and a quarter second more
    assert schedule.lead(0.5) == 0.4  # never most of the lock: at 80 %


def test_due_renews_once_until_answered_then_from_the_new_deadline() -> None:
    schedule: LockSchedule[str] = LockSchedule(queue_wait=0.5)
    schedule.watch("r", deadline=30.0, until=100.0)
    assert schedule.next_wake(30.0) == 15.0
    assert schedule.due(14.9, 30.0).renew == []
    assert schedule.due(15.0, 30.0).renew == ["r"]
    assert schedule.due(16.0, 30.0).renew == []  # on its way: not twice
    assert schedule.next_wake(30.0) is None
    schedule.renewed(["r"], deadline=45.0)
    assert schedule.deadline("r") == 45.0
    assert schedule.next_wake(30.0) == 30.0


def test_a_failed_renewal_is_retried_after_the_backoff_while_the_lock_holds() -> None:
    schedule: LockSchedule[str] = LockSchedule(queue_wait=0.5)
    schedule.watch("r", deadline=2.0, until=100.0)
    assert schedule.due(1.0, 2.0).renew == ["r"]
    schedule.failed(["r"], retry_at=1.5)
    assert schedule.next_wake(2.0) == 1.5
    assert schedule.due(1.2, 2.0).renew == []
    assert schedule.due(1.5, 2.0).renew == ["r"]
    schedule.failed(["r"], retry_at=2.5)  # past the deadline: the lock lapses first
    assert schedule.next_wake(2.0) == 2.0
    due = schedule.due(2.0, 2.0)
    assert (due.renew, due.lapsed) == ([], ["r"])
    assert "r" not in schedule


def test_renewing_stops_at_the_bound() -> None:
    schedule: LockSchedule[str] = LockSchedule(queue_wait=0.5)
    schedule.watch("r", deadline=2.0, until=3.5)
    assert schedule.due(1.0, 2.0).renew == ["r"]
    schedule.renewed(["r"], deadline=3.0)
    assert schedule.due(2.0, 2.0).renew == ["r"]
    schedule.renewed(["r"], deadline=4.0)
    assert schedule.next_wake(2.0) == 3.0
    assert schedule.due(3.0, 2.0).renew == ["r"]
    schedule.renewed(["r"], deadline=5.0)
    assert schedule.next_wake(2.0) == 3.5  # the bound comes before the next renewal (4.0)
    due = schedule.due(3.5, 2.0)
    assert (due.renew, due.given_up) == ([], ["r"])
    assert len(schedule) == 0


def test_watching_again_keeps_the_deadline_and_takes_the_new_bound() -> None:
    schedule: LockSchedule[str] = LockSchedule(queue_wait=0.5)
    schedule.watch("r", deadline=10.0, until=20.0)
    schedule.watch("r", deadline=1.0, until=50.0)
    assert schedule.deadline("r") == 10.0
    schedule.unwatch("r")
    assert schedule.next_wake(10.0) is None
