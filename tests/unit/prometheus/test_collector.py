"""aiokafka_lite.prometheus: metrics() snapshots to metric families, labels per consumer, values
a snapshot lacks, the collector's bookkeeping, and its own text writer against prometheus_client's."""

from __future__ import annotations

import contextlib
import copy
import gc
import subprocess
import sys
import threading
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from aiokafka_lite import Consumer, ShareConsumer
from aiokafka_lite.consumer.metrics import COMMIT_LATENCY_BOUNDS, CommitFigures
from aiokafka_lite.errors import InvalidArgumentError
from aiokafka_lite.fetch.share.ledger import AckType
from aiokafka_lite.prometheus import ConsumerCollector, register, unregister
from aiokafka_lite.prometheus.families import FAMILIES, LabelCache, samples_of, text
from aiokafka_lite.share.acks import AckCounts


def stable_snapshot(client_id: str = "billing-1", group_id: str | None = "billing") -> dict[str, Any]:
    """What metrics() says of a classic member in a stable group (the keys the collector reads)."""
    commits = CommitFigures()
    commits.completed(0.003)
    commits.completed(0.2)
    commits.failed()
    return {
        "client_id": client_id, "group_id": group_id, "started": True, "closed": False, "polls": 42,
        "heartbeat_mode": "task", "loop_stalls": 1, "longest_loop_stall_seconds": 0.75,
        "record_decoder": "native", **commits.as_dict(), "records_consumed": 300, "bytes_consumed": 45000,
        "fetch_sessions": {1: {"session_id": 77, "epoch": 3, "partitions": 3, "full_fetches": 1,
                               "incremental_fetches": 9, "partitions_sent": 5}},
        "fetching_from": {"orders-0": 1, "orders-eu-12": 1, "orders-1": 1},
        "seconds_since_last_poll": 0.25, "assignment": ["orders-0", "orders-1", "orders-eu-12"],
        "lag": {"orders-0": 0, "orders-1": 7, "orders-eu-12": None},
        "group_protocol": "classic", "rebalance_protocol": "cooperative", "group_state": "STABLE",
        "generation_id": 5, "member_id": "m-1", "rebalances": 2, "heartbeats_sent": 30, "heartbeat_failures": 1,
        "poll_interval_lapses": 0, "group_health": {"healthy": True}, "heartbeat_rtt_seconds": 0.002,
        "connection_failures": {}, "rebootstraps": 0,
    }


def share_snapshot(client_id: str = "jobs-1", group_id: str = "workers") -> dict[str, Any]:
    """What ShareConsumer.metrics() says of a stable explicit-mode member (its AckCounts are real)."""
    counts = AckCounts()
    delivered = [{"delivery_count": n} for n in (1, 1, 1, 1, 1, 1, 2, 2, 3, 11)]
    counts.deliveries.update(r["delivery_count"] for r in delivered)
    counts.handed_out = len(delivered)
    for kind, n in ((AckType.ACCEPT, 6), (AckType.RELEASE, 2), (AckType.REJECT, 1), (AckType.RENEW, 3)):
        counts.count(kind, n)
    counts.acknowledgement_errors = 1
    return {
        "client_id": client_id, "group_id": group_id, "started": True, "closed": False, "polls": 12,
        "bootstrap_failures": None, "acknowledgement_mode": "explicit", "records_held": 1, "records_kept": 0,
        **counts.as_dict(), "records_acquired": 14, "records_lapsed": 2, "fetches_in_flight": 1,
        "share_sessions": {1: {"epoch": 4, "partitions": 2, "opened": 1, "resets": 0}},
        "lock_renewals": {"records_renewed": 9, "renewals_failed": 1, "given_up": 0, "lapsed": 0, "watched": 1},
        "lag": {"jobs-0": 3, "jobs-1": None},  # the share lag (KIP-1226); partition 1's not known yet
        "member": {"group_id": group_id, "group_protocol": "share", "group_state": "STABLE", "member_id": "m-9",
                   "member_epoch": 7, "heartbeat_interval_ms": 5000, "heartbeats_sent": 20, "heartbeat_failures": 0,
                   "last_heartbeat_seconds_ago": 1.5, "heartbeat_rtt_seconds": 0.004, "last_poll_seconds_ago": 0.5,
                   "assigned_partitions": 2, "assignments": 1, "joins": 1, "fenced": 0, "poll_interval_lapses": 1,
                   "last_leave_delay_seconds": None},
    }


class FakeConsumer:
    def __init__(self, snapshot: dict[str, Any]) -> None:
        self.snapshot = snapshot
        self.calls = 0

    def metrics(self) -> dict[str, Any]:
        self.calls += 1
        return copy.deepcopy(self.snapshot)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in out, f"duplicate sample {key}"
            out[key] = s.value
    return out


def scrape(collector: ConsumerCollector) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Through a registry and prometheus_client's writer, checked equal to the collector's own writer."""
    registry = CollectorRegistry()
    registry.register(collector)
    theirs = samples(generate_latest(registry).decode())
    first = collector.text()
    assert collector.text() == first  # the second scrape writes from the labels kept by the first
    ours = samples(first.decode())
    assert ours == theirs
    return ours


def value(got: dict, name: str, **labels: str) -> float:
    return got[(name, tuple(sorted(labels.items())))]


def test_a_stable_members_snapshot_maps_to_conventional_families():
    consumer = FakeConsumer(stable_snapshot())  # held here: a collector holds its consumers weakly
    got = scrape(ConsumerCollector([consumer]))
    who = {"client_id": "billing-1", "group_id": "billing"}
    assert value(got, "aiokafka_lite_consumed_records_total", **who) == 300
    assert value(got, "aiokafka_lite_consumed_bytes_total", **who) == 45000
    assert value(got, "aiokafka_lite_partition_lag", **who, topic="orders", partition="1") == 7
    assert value(got, "aiokafka_lite_partition_lag", **who, topic="orders", partition="0") == 0
    # A topic with "-" in its name keeps it; a partition whose lag is unknown has no sample.
    assert not [k for k in got if k[0] == "aiokafka_lite_partition_lag" and ("topic", "orders-eu") in k[1]]
    assert value(got, "aiokafka_lite_assigned_partitions", **who) == 3
    assert value(got, "aiokafka_lite_commits_total", **who) == 2
    assert value(got, "aiokafka_lite_commit_failures_total", **who) == 1
    assert value(got, "aiokafka_lite_commit_duration_seconds_count", **who) == 2
    assert value(got, "aiokafka_lite_commit_duration_seconds_sum", **who) == pytest.approx(0.203)
    assert value(got, "aiokafka_lite_commit_duration_seconds_bucket", **who, le="0.0025") == 0
    assert value(got, "aiokafka_lite_commit_duration_seconds_bucket", **who, le="0.005") == 1
    assert value(got, "aiokafka_lite_commit_duration_seconds_bucket", **who, le="0.25") == 2
    assert value(got, "aiokafka_lite_commit_duration_seconds_bucket", **who, le="+Inf") == 2
    assert value(got, "aiokafka_lite_rebalances_total", **who, group_protocol="classic") == 2
    assert value(got, "aiokafka_lite_group_state", **who, state="STABLE") == 1
    assert value(got, "aiokafka_lite_group_generation", **who) == 5
    assert value(got, "aiokafka_lite_group_healthy", **who) == 1
    assert value(got, "aiokafka_lite_heartbeats_total", **who) == 30
    assert value(got, "aiokafka_lite_heartbeat_failures_total", **who) == 1
    assert value(got, "aiokafka_lite_heartbeat_round_trip_seconds", **who) == 0.002
    assert value(got, "aiokafka_lite_time_since_last_poll_seconds", **who) == 0.25
    assert value(got, "aiokafka_lite_poll_interval_lapses_total", **who) == 0
    assert value(got, "aiokafka_lite_event_loop_stalls_total", **who) == 1
    assert value(got, "aiokafka_lite_event_loop_longest_stall_seconds", **who) == 0.75
    assert value(got, "aiokafka_lite_fetch_session_partitions", **who, node="1", connection="0") == 3
    assert value(got, "aiokafka_lite_fetch_requests_total", **who, node="1", connection="0", kind="full") == 1
    assert value(got, "aiokafka_lite_fetch_requests_total", **who, node="1", connection="0", kind="incremental") == 9
    assert value(got, "aiokafka_lite_polls_total", **who) == 42
    assert value(got, "aiokafka_lite_connection_failures", **who) == 0
    assert value(got, "aiokafka_lite_rebootstraps_total", **who) == 0
    assert value(got, "aiokafka_lite_consumer_info", **who, group_protocol="classic", rebalance_protocol="cooperative",
                 heartbeat_mode="task", record_decoder="native") == 1


def test_several_consumers_are_told_apart_by_client_id_and_group_id():
    a, b = stable_snapshot("worker-a", "billing"), stable_snapshot("worker-b", "audit")
    b["records_consumed"] = 11
    b["lag"] = {"orders-0": 4}
    consumers = [FakeConsumer(a), FakeConsumer(b)]
    got = scrape(ConsumerCollector(consumers))
    consumed = {dict(k[1])["client_id"]: v for k, v in got.items() if k[0] == "aiokafka_lite_consumed_records_total"}
    assert consumed == {"worker-a": 300, "worker-b": 11}
    assert value(got, "aiokafka_lite_partition_lag", client_id="worker-b", group_id="audit", topic="orders",
                 partition="0") == 4
    assert value(got, "aiokafka_lite_partition_lag", client_id="worker-a", group_id="billing", topic="orders",
                 partition="1") == 7


def test_values_a_snapshot_lacks_give_no_sample():
    """A consumer that never started and has no group: no group, heartbeat or lag samples."""
    consumer = Consumer(bootstrap_servers="127.0.0.1:1", client_id="lonely")
    got = scrape(ConsumerCollector([consumer]))
    names = {name for name, _ in got}
    assert "aiokafka_lite_consumed_records_total" in names
    for absent in ("aiokafka_lite_partition_lag", "aiokafka_lite_group_state", "aiokafka_lite_heartbeats_total",
                   "aiokafka_lite_heartbeat_round_trip_seconds", "aiokafka_lite_time_since_last_poll_seconds",
                   "aiokafka_lite_rebalances_total", "aiokafka_lite_fetch_session_partitions"):
        assert absent not in names
    assert value(got, "aiokafka_lite_consumed_records_total", client_id="lonely", group_id="") == 0
    assert value(got, "aiokafka_lite_consumer_info", client_id="lonely", group_id="", group_protocol="",
                 rebalance_protocol="", heartbeat_mode="task", record_decoder=consumer.metrics()["record_decoder"]) == 1


def test_a_kip848_member_and_several_fetch_connections():
    snap = stable_snapshot()
    del snap["rebalance_protocol"]
    snap["group_protocol"] = "consumer"
    lane = {"session_id": 5, "epoch": 1, "partitions": 2, "full_fetches": 1, "incremental_fetches": 4,
            "partitions_sent": 2}
    snap["fetch_sessions"] = {1: {**lane, "lanes": 2, "connections": {0: lane, 1: {**lane, "partitions": 1}}},
                              2: {**lane, "lanes": 1}}
    consumer = FakeConsumer(snap)
    got = scrape(ConsumerCollector([consumer]))
    who = {"client_id": "billing-1", "group_id": "billing"}
    assert value(got, "aiokafka_lite_rebalances_total", **who, group_protocol="consumer") == 2
    assert value(got, "aiokafka_lite_fetch_session_partitions", **who, node="1", connection="1") == 1
    assert value(got, "aiokafka_lite_fetch_session_partitions", **who, node="1", connection="0") == 2
    assert value(got, "aiokafka_lite_fetch_connections", **who, node="1") == 2
    assert value(got, "aiokafka_lite_fetch_connections", **who, node="2") == 1


def test_label_values_are_escaped():
    odd = 'a "quoted" \\ back\nslash 100%s'
    consumer = FakeConsumer(stable_snapshot(odd, "g"))
    got = scrape(ConsumerCollector([consumer]))
    assert value(got, "aiokafka_lite_polls_total", client_id=odd, group_id="g") == 42


def test_the_same_client_and_group_twice_is_refused():
    first, second = FakeConsumer(stable_snapshot()), FakeConsumer(stable_snapshot("billing-2"))
    collector = ConsumerCollector([first])
    with pytest.raises(InvalidArgumentError, match="client_id='billing-1' and group_id='billing'"):
        collector.add(FakeConsumer(stable_snapshot()))
    collector.add(second)
    collector.add(second)  # the same consumer again: nothing changes
    assert len(collector) == 2


def test_closed_and_collected_consumers_leave_the_collector():
    kept, closing, dropped = (FakeConsumer(stable_snapshot(f"c{i}")) for i in range(3))
    collector = ConsumerCollector([kept, closing, dropped])
    closing.snapshot["closed"] = True
    del dropped
    gc.collect()
    got = scrape(collector)
    assert {dict(k[1])["client_id"] for k in got} == {"c0"}
    assert len(collector) == 1
    collector.remove(kept)
    assert len(collector) == 0
    assert not [k for k in samples(collector.text().decode()) if k[0].startswith("aiokafka_lite")]


def test_a_consumer_registered_during_a_scrape_is_not_lost():
    """register() from another thread while a scrape is inside a consumer's metrics(): the scrape's
    forgetting of closed and collected consumers must not forget the new ones. The scrape is held
    there by an Event, so the interleaving is the same on every run; then more registrations race a
    scrape loop."""
    registry = CollectorRegistry()
    scraper_inside, registered, scraped, stop = (threading.Event() for _ in range(4))

    class HeldOnce(FakeConsumer):  # the scrape thread's first metrics() call waits for the registrations
        def metrics(self) -> dict[str, Any]:
            if threading.current_thread() is scraper and not scraper_inside.is_set():
                scraper_inside.set()
                assert registered.wait(10)
            return super().metrics()

    errors: list[BaseException] = []

    def scrape_loop() -> None:
        try:
            while not stop.is_set():
                collector.collect()
                scraped.set()
        except BaseException as exc:  # said by the assertions below
            errors.append(exc)

    def lost() -> list[str]:
        exposed = {dict(k[1])["client_id"] for k in samples(generate_latest(registry).decode())
                   if k[0] == "aiokafka_lite_polls_total"}
        return sorted({c.snapshot["client_id"] for c in consumers} - exposed, key=lambda name: (len(name), name))

    scraper = threading.Thread(target=scrape_loop, name="scrape")
    consumers = [HeldOnce(stable_snapshot("held"))]
    collector = register(consumers[0], registry=registry)
    scraper.start()
    try:
        assert scraper_inside.wait(10)
        consumers += [FakeConsumer(stable_snapshot(f"during-{i}")) for i in range(20)]
        for consumer in consumers[1:]:
            assert register(consumer, registry=registry) is collector
        registered.set()
        assert scraped.wait(10)  # the held scrape is over
        assert not errors
        assert not lost(), f"lost while a scrape ran: {lost()[:3]}..."
        more = [FakeConsumer(stable_snapshot(f"racing-{i}")) for i in range(200)]
        consumers += more
        for consumer in more:
            register(consumer, registry=registry)
    finally:
        registered.set()
        stop.set()
        scraper.join(10)
    assert not errors
    assert not lost(), f"lost racing a scrape loop: {lost()[:3]}..."
    assert len(collector) == len(consumers)


def test_a_consumer_registered_by_a_metrics_call_is_not_lost():
    """The same on one thread: a metrics() call, made by a scrape, that registers another consumer."""
    late = FakeConsumer(stable_snapshot("late"))
    collector = ConsumerCollector()

    class Registering(FakeConsumer):
        armed = False

        def metrics(self) -> dict[str, Any]:
            if self.armed:  # once, and not while add() reads it
                self.armed = False
                collector.add(late)
            return super().metrics()

    registering = Registering(stable_snapshot("registering"))
    collector.add(registering)
    registering.armed = True
    collector.collect()  # registers `late`, which the scrapes from the next one on expose
    assert len(collector) == 2
    assert {dict(k[1])["client_id"] for k in scrape(collector)} == {"registering", "late"}


def test_the_same_client_and_group_added_at_once_from_two_threads_is_refused_once():
    """Two add()s of look-alike consumers, each having checked the covered consumers before either
    appended: a covered consumer's metrics() holds each thread's check at a barrier until both are
    inside it, so the interleaving is the same on every run. Exactly one wins."""
    arrived = threading.Barrier(2, timeout=10)

    class Meeting(FakeConsumer):  # read by both add()s' duplicate checks: they meet in there
        armed = False

        def metrics(self) -> dict[str, Any]:
            if self.armed and threading.current_thread().name.startswith("add-"):
                arrived.wait()
            return super().metrics()

    covered = Meeting(stable_snapshot("covered"))
    collector = ConsumerCollector([covered])
    covered.armed = True
    twins = [FakeConsumer(stable_snapshot("twin")) for _ in range(2)]
    outcomes: list[BaseException | None] = []

    def add(consumer: FakeConsumer) -> None:
        try:
            collector.add(consumer)
        except BaseException as exc:  # said by the assertions below
            outcomes.append(exc)
        else:
            outcomes.append(None)

    threads = [threading.Thread(target=add, args=(twin,), name=f"add-{i}") for i, twin in enumerate(twins)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    covered.armed = False
    refused = [o for o in outcomes if o is not None]
    assert len(outcomes) == 2
    assert len(refused) == 1, f"both registered: {outcomes}"
    assert isinstance(refused[0], InvalidArgumentError)
    assert "client_id='twin' and group_id='billing'" in str(refused[0])
    assert len(collector) == 2
    assert {dict(k[1])["client_id"] for k in scrape(collector)} == {"covered", "twin"}


def test_register_into_a_new_registry_from_two_threads_makes_one_collector():
    """register()'s first use of a registry from two threads at once: one collector is made and
    registered, and the look-alike consumer is refused with the documented error (not prometheus_client's
    'Duplicated timeseries', nor two collectors each exposing one). The registry's register() is the
    hook: it waits (at most 1 s) for the other thread to get there too."""
    arrived = threading.Barrier(2, timeout=1)

    class Meeting(CollectorRegistry):
        def register(self, collector: Any) -> None:
            with contextlib.suppress(threading.BrokenBarrierError):  # the other waits for this one: fine
                arrived.wait()
            super().register(collector)

    registry = Meeting()
    twins = [FakeConsumer(stable_snapshot("twin")) for _ in range(2)]
    outcomes: list[BaseException | ConsumerCollector] = []

    def run(consumer: FakeConsumer) -> None:
        try:
            outcomes.append(register(consumer, registry=registry))
        except BaseException as exc:  # said by the assertions below
            outcomes.append(exc)

    threads = [threading.Thread(target=run, args=(twin,)) for twin in twins]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(outcomes) == 2
    assert len(errors) == 1, f"both registered: {outcomes}"
    assert isinstance(errors[0], InvalidArgumentError), repr(errors[0])
    exposed = [k for k in samples(generate_latest(registry).decode()) if k[0] == "aiokafka_lite_polls_total"]
    assert [dict(k[1])["client_id"] for k in exposed] == ["twin"]


def test_register_keeps_one_collector_per_registry_and_describes_without_scraping():
    registry = CollectorRegistry()
    a, b = FakeConsumer(stable_snapshot("a")), FakeConsumer(stable_snapshot("b"))
    first = register(a, registry=registry)
    calls = a.calls
    assert register(b, registry=registry) is first  # registering it again would raise Duplicated...
    assert a.calls == calls + 1  # add() compares labels; registering never scraped
    assert "aiokafka_lite_consumed_records_total" in generate_latest(registry).decode()
    unregister(a, registry=registry)
    assert len(first) == 1
    assert 'client_id="a"' not in generate_latest(registry).decode()


def test_the_label_cache_is_cleared_when_it_outgrows_its_limit():
    snap = stable_snapshot()
    snap["lag"] = {f"orders-{p}": 0 for p in range(50)}
    cache = LabelCache(limit=40)
    consumers = [(("c", "g"), samples_of(snap, cache))]
    first = text(consumers, cache)
    assert first.decode().count("aiokafka_lite_partition_lag{") == 50
    assert len(cache.partitions) == 50
    cache.trim()
    assert (cache.partitions, cache.labels) == ({}, {})
    assert text([(("c", "g"), samples_of(snap, cache))], cache) == first


def test_commit_figures_buckets():
    figures = CommitFigures()
    for seconds in (0.001, 0.0011, 30.0):
        figures.completed(seconds)
    got = figures.as_dict()["commit_latency_seconds"]
    buckets = dict((le, n) for le, n in got["buckets"])
    assert list(buckets) == list(COMMIT_LATENCY_BOUNDS)
    assert (buckets[0.001], buckets[0.0025], buckets[10.0], got["count"]) == (1, 2, 2, 3)


def test_without_prometheus_client_the_import_says_which_extra_to_install():
    code = ("import sys; sys.modules['prometheus_client'] = None\n"
            "try:\n    import aiokafka_lite.prometheus\nexcept ImportError as exc:\n    print(exc)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "pip install '.[prometheus]' in the aiokafka-lite clone" in out.stdout


def test_a_share_consumers_snapshot_maps_to_the_share_families_and_the_consumers_alike():
    """A ShareConsumer's figures (issue 44): its own share_* families, and the Consumer's families
    that mean the same for it (polls, records handed out, the member's); none that do not."""
    share = FakeConsumer(share_snapshot())
    got = scrape(ConsumerCollector([share]))
    who = {"client_id": "jobs-1", "group_id": "workers"}
    assert value(got, "aiokafka_lite_share_consumer_info", **who, acknowledgement_mode="explicit") == 1
    assert value(got, "aiokafka_lite_share_acquired_records_total", **who) == 14
    assert value(got, "aiokafka_lite_share_acknowledged_records_total", **who, type="accept") == 6
    assert value(got, "aiokafka_lite_share_acknowledged_records_total", **who, type="release") == 2
    assert value(got, "aiokafka_lite_share_acknowledged_records_total", **who, type="reject") == 1
    assert value(got, "aiokafka_lite_share_renewed_records_total", **who) == 9 + 3  # the keeper's, acknowledge()'s
    assert value(got, "aiokafka_lite_share_lock_renewal_failures_total", **who) == 1
    assert value(got, "aiokafka_lite_share_lapsed_records_total", **who) == 2
    assert value(got, "aiokafka_lite_share_held_records", **who) == 1
    assert value(got, "aiokafka_lite_share_acknowledgement_errors_total", **who) == 1
    assert value(got, "aiokafka_lite_share_delivery_count_bucket", **who, le="1.0") == 6
    assert value(got, "aiokafka_lite_share_delivery_count_bucket", **who, le="2.0") == 8
    assert value(got, "aiokafka_lite_share_delivery_count_bucket", **who, le="3.0") == 9
    assert value(got, "aiokafka_lite_share_delivery_count_bucket", **who, le="10.0") == 9
    assert value(got, "aiokafka_lite_share_delivery_count_bucket", **who, le="+Inf") == 10
    assert value(got, "aiokafka_lite_share_delivery_count_count", **who) == 10
    assert value(got, "aiokafka_lite_share_delivery_count_sum", **who) == 6 + 4 + 3 + 11
    assert value(got, "aiokafka_lite_consumed_records_total", **who) == 10
    assert value(got, "aiokafka_lite_polls_total", **who) == 12
    assert value(got, "aiokafka_lite_assigned_partitions", **who) == 2
    assert value(got, "aiokafka_lite_group_state", **who, state="STABLE") == 1
    assert value(got, "aiokafka_lite_group_generation", **who) == 7
    assert value(got, "aiokafka_lite_heartbeats_total", **who) == 20
    assert value(got, "aiokafka_lite_heartbeat_failures_total", **who) == 0
    assert value(got, "aiokafka_lite_heartbeat_round_trip_seconds", **who) == 0.004
    assert value(got, "aiokafka_lite_time_since_last_poll_seconds", **who) == 0.5
    assert value(got, "aiokafka_lite_poll_interval_lapses_total", **who) == 1
    assert value(got, "aiokafka_lite_partition_lag", **who, topic="jobs", partition="0") == 3  # the Consumer's family
    assert [k for k in got if k[0] == "aiokafka_lite_partition_lag"] == [
        ("aiokafka_lite_partition_lag", tuple(sorted({**who, "topic": "jobs", "partition": "0"}.items())))]
    share_names = {f.full_name for f in FAMILIES if f.name.startswith("share_")}
    exposed = {name.removesuffix("_total").removesuffix("_info").removesuffix("_bucket").removesuffix("_count")
               .removesuffix("_sum") for name, _ in got}
    assert share_names <= exposed
    # Not a Consumer's: no commits (a share commit is another thing), rebalances or fetch sessions.
    for absent in ("aiokafka_lite_consumer_info", "aiokafka_lite_commits_total",
                   "aiokafka_lite_rebalances_total", "aiokafka_lite_fetch_session_partitions"):
        assert absent not in {name for name, _ in got}


def test_a_consumer_and_a_share_consumer_in_one_registry():
    """register() takes either, into the same collector; a Consumer's snapshot gives no share family."""
    registry = CollectorRegistry()
    consumer, share = FakeConsumer(stable_snapshot()), FakeConsumer(share_snapshot())
    assert register(share, registry=registry) is register(consumer, registry=registry)
    got = samples(generate_latest(registry).decode())
    shares = {dict(k[1])["client_id"] for k in got if k[0].startswith("aiokafka_lite_share_")}
    assert shares == {"jobs-1"}
    consumed = {dict(k[1])["client_id"]: v for k, v in got.items() if k[0] == "aiokafka_lite_consumed_records_total"}
    assert consumed == {"billing-1": 300, "jobs-1": 10}


def test_a_share_consumer_not_started_gives_its_counters_and_no_member_figures():
    share = ShareConsumer("jobs", bootstrap_servers="127.0.0.1:1", group_id="workers", client_id="lonely")
    got = scrape(ConsumerCollector([share]))
    who = {"client_id": "lonely", "group_id": "workers"}
    assert value(got, "aiokafka_lite_share_consumer_info", **who, acknowledgement_mode="implicit") == 1
    assert value(got, "aiokafka_lite_consumed_records_total", **who) == 0
    assert value(got, "aiokafka_lite_share_acknowledged_records_total", **who, type="accept") == 0
    assert value(got, "aiokafka_lite_share_delivery_count_count", **who) == 0
    names = {name for name, _ in got}
    for absent in ("aiokafka_lite_share_acquired_records_total", "aiokafka_lite_share_renewed_records_total",
                   "aiokafka_lite_group_state", "aiokafka_lite_heartbeats_total"):
        assert absent not in names  # no fetcher or member yet: unknown, not zero
