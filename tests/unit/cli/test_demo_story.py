"""`aiokafka-lite demo`'s ledger and done line: what it says was read, and read twice, is what was."""

from __future__ import annotations

from aiokafka_lite.cli.demo_members import Ledger
from aiokafka_lite.cli.demo_story import Orders, summary
from aiokafka_lite.structs import ConsumerRecord


def record(partition: int, offset: int, order: int) -> ConsumerRecord:
    return ConsumerRecord("demo-orders", partition, offset, 0, 0, f"order-{order}".encode(), b"{}", [])


def orders_sent(ledger: Ledger, count: int) -> Orders:
    orders = Orders("127.0.0.1:9", "demo-orders", ledger)  # never sends: the ledger is filled by hand
    orders.sent = count
    return orders


def test_a_record_another_member_reads_again_is_a_reread_of_the_first_readers():
    ledger = Ledger()
    ledger.produced.update({0: 2, 1: 1})
    assert ledger.read("A", [record(0, 0, 0), record(0, 1, 1)]) == 2
    assert ledger.unread_on([0, 1]) == 1
    assert ledger.read("B", [record(0, 1, 1), record(1, 0, 2)]) == 2
    assert ledger.rereads == {("B", "A"): 1}
    assert ledger.unread_on([0, 1]) == 0
    assert summary(2, 2, orders_sent(ledger, 3)) == (
        "done: A consumed 2 records, B 2; all 3 orders read; "
        "B re-read 1 that A had been handed but not committed: at-least-once")


def test_an_order_the_log_holds_twice_is_one_order_and_no_reread():
    # A producer retry can land a record twice; reading both copies reads no record twice.
    ledger = Ledger()
    ledger.read("A", [record(0, 0, 0), record(0, 1, 0)])
    assert not ledger.rereads
    assert summary(2, 0, orders_sent(ledger, 1)) == (
        "done: A consumed 2 records, B 0; all 1 orders read; none read twice")


def test_the_done_line_says_which_orders_were_not_read():
    ledger = Ledger()
    ledger.read("B", [record(1, 0, 0)])
    assert summary(0, 1, orders_sent(ledger, 3)) == (
        "done: A consumed 0 records, B 1; 2 of the 3 orders not read; none read twice")
