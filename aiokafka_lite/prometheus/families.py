"""From ``metrics()`` snapshots to Prometheus metric families. Pure: snapshots in, samples out.

``FAMILIES`` is the table: each family's name, type, help and labels beyond ``client_id`` and
``group_id``; ``samples_of(snapshot)`` reads one consumer's snapshot into rows per family (a value
the snapshot lacks, or holds as None, gives no sample; a ShareConsumer's snapshot, told by its
``acknowledgement_mode``, gives the ``share_*`` families and the Consumer's that mean the same);
``metric_families()`` makes prometheus_client ``Metric`` objects of the rows (what a registry
collects) and ``text()`` writes the same samples in the text exposition format directly, several
times faster than prometheus_client's writer, which validates and escapes every label of every
sample (1,000 partitions are 1,000 lag samples).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)

NAMESPACE = "aiokafka_lite"
CONSUMER_LABELS = ("client_id", "group_id")
TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Row = tuple[tuple[str, ...], Any]  # the values of the family's own labels, and the sample's value
Rows = dict[str, list[Row]]  # family name -> rows, for one consumer


@dataclass(frozen=True, slots=True)
class Family:
    name: str  # after the namespace; a counter's without `_total`, an info's without `_info`
    type: str  # counter | gauge | histogram | info
    help: str
    source: str  # the metrics() key(s) it comes from (docs/prometheus.md lists them)
    labels: tuple[str, ...] = ()  # beyond client_id and group_id

    @property
    def full_name(self) -> str:
        return f"{NAMESPACE}_{self.name}"


FAMILIES = (
    Family("consumer", "info", "The consumer's settings and the record decoder in use",
           "group_protocol, rebalance_protocol, heartbeat_mode, record_decoder",
           ("group_protocol", "rebalance_protocol", "heartbeat_mode", "record_decoder")),
    Family("consumed_records", "counter", "Records handed out by poll()", "records_consumed"),
    Family("consumed_bytes", "counter", "Bytes of fetched record batches whose records were all handed out",
           "bytes_consumed"),
    Family("polls", "counter", "Calls of poll()", "polls"),
    Family("assigned_partitions", "gauge", "Partitions assigned to the consumer", "assignment"),
    Family("partition_lag", "gauge", "Records between the position and the high watermark (a ShareConsumer: "
           "records from the share-partition start offset to the end not yet acknowledged, KIP-1226)",
           "lag", ("topic", "partition")),
    Family("commits", "counter", "Commits that completed", "commits"),
    Family("commit_failures", "counter", "Commits that failed, timed out or were cancelled by close()",
           "commit_failures"),
    Family("commit_duration_seconds", "histogram", "Time a completed commit took, retries included",
           "commit_latency_seconds"),
    Family("rebalances", "counter", "Rebalances the member took part in", "rebalances", ("group_protocol",)),
    Family("group_generation", "gauge", "Generation (classic) or member epoch (KIP-848)", "generation_id"),
    Family("group_state", "gauge", "1 for the member's current state", "group_state", ("state",)),
    Family("group_healthy", "gauge", "1 while the membership is healthy (group_health)", "group_health"),
    Family("heartbeats", "counter", "Heartbeats sent", "heartbeats_sent"),
    Family("heartbeat_failures", "counter", "Heartbeats that failed", "heartbeat_failures"),
    Family("heartbeat_round_trip_seconds", "gauge", "Round trip of the last successful heartbeat",
           "heartbeat_rtt_seconds"),
    Family("time_since_last_poll_seconds", "gauge", "Seconds since the last poll()", "seconds_since_last_poll"),
    Family("poll_interval_lapses", "counter",
           "Times the watchdog left the group because max_poll_interval_ms passed without a poll()",
           "poll_interval_lapses"),
    Family("event_loop_stalls", "counter", "Times the event loop was blocked long enough to endanger the session",
           "loop_stalls"),
    Family("event_loop_longest_stall_seconds", "gauge", "The longest event loop stall seen",
           "longest_loop_stall_seconds"),
    Family("fetch_session_partitions", "gauge", "Partitions in the fetch session (KIP-227) with a broker",
           "fetch_sessions", ("node", "connection")),
    Family("fetch_requests", "counter", "Fetch requests sent in a session, full or incremental",
           "fetch_sessions", ("node", "connection", "kind")),
    Family("fetch_connections", "gauge", "Connections the fetches to a broker use now "
           "(fetch_connections_per_broker; 'auto': 2 while reading a backlog)", "fetch_sessions", ("node",)),
    Family("connection_failures", "gauge", "Broker connections failing now", "connection_failures"),
    Family("rebootstraps", "counter", "Returns to bootstrap_servers (KIP-899)", "rebootstraps"),
    # A ShareConsumer's own (KIP-932); it has the Consumer's polls, consumed records and member families too.
    Family("share_consumer", "info", "The share consumer's acknowledgement mode", "acknowledgement_mode",
           ("acknowledgement_mode",)),
    Family("share_acquired_records", "counter", "Records the broker acquired (locked) for this share member",
           "records_acquired"),
    Family("share_acknowledged_records", "counter", "Records decided: accepted, released or rejected",
           "accepted, released, rejected", ("type",)),
    Family("share_renewed_records", "counter", "Acquisition lock renewals (KIP-1222), one per record renewed",
           "lock_renewals.records_renewed, renewed"),
    Family("share_lock_renewal_failures", "counter", "Record lock renewals that did not get through",
           "lock_renewals.renewals_failed"),
    Family("share_lapsed_records", "counter", "Records whose acquisition lock lapsed while this member held them",
           "records_lapsed"),
    Family("share_delivery_count", "histogram", "Records handed out by their delivery count (1: the first delivery)",
           "delivery_counts"),
    Family("share_held_records", "gauge", "Records handed out and awaiting a decision", "records_held"),
    Family("share_acknowledgement_errors", "counter", "Partitions whose acknowledgements failed",
           "acknowledgement_errors"),
)
BY_NAME = {f.name: f for f in FAMILIES}


@dataclass
class LabelCache:
    """Label values and strings kept from one scrape to the next (a partition's are the same every
    time): parsing and escaping them was half of a scrape's cost at 1,000 partitions. Cleared
    when it outgrows ``limit`` entries (partitions come and go with rebalances)."""

    limit: int = 100_000
    partitions: dict[str, tuple[str, str]] = field(default_factory=dict)  # lag key -> (topic, partition)
    labels: dict[tuple[str, ...], dict[tuple[str, ...], str]] = field(default_factory=dict)  # names -> values -> text

    def trim(self) -> None:
        if len(self.partitions) > self.limit or sum(map(len, self.labels.values())) > self.limit:
            self.partitions.clear()
            self.labels.clear()


# ---------------------------------------------------------------- one snapshot -> rows

def consumer_labels(snapshot: Mapping[str, Any]) -> tuple[str, str]:
    """(client_id, group_id) of a snapshot; a consumer without a group has group_id ""."""
    return str(snapshot.get("client_id") or ""), str(snapshot.get("group_id") or "")


def _number(value: Any) -> float | int | None:
    if value is None or isinstance(value, str):
        return None
    return int(value) if isinstance(value, bool) else value


def _plain(snapshot: Mapping[str, Any], rows: Rows) -> None:
    """The families read from one key each, without labels of their own."""
    _plain_from(snapshot, _PLAIN, rows)


_PLAIN = (("consumed_records", "records_consumed"), ("consumed_bytes", "bytes_consumed"), ("polls", "polls"),
          ("commits", "commits"), ("commit_failures", "commit_failures"), ("group_generation", "generation_id"),
          ("heartbeats", "heartbeats_sent"), ("heartbeat_failures", "heartbeat_failures"),
          ("heartbeat_round_trip_seconds", "heartbeat_rtt_seconds"),
          ("time_since_last_poll_seconds", "seconds_since_last_poll"),
          ("poll_interval_lapses", "poll_interval_lapses"), ("event_loop_stalls", "loop_stalls"),
          ("event_loop_longest_stall_seconds", "longest_loop_stall_seconds"), ("rebootstraps", "rebootstraps"))


def samples_of(snapshot: Mapping[str, Any], cache: LabelCache | None = None) -> Rows:
    """One consumer's samples per family name (families without a sample are left out)."""
    if "acknowledgement_mode" in snapshot:  # a ShareConsumer's (share/consumer.py metrics())
        return share_samples_of(snapshot, cache)
    info = tuple(str(snapshot.get(key) or "") for key in BY_NAME["consumer"].labels)
    rows: Rows = {"consumer": [(info, 1)]}
    _plain(snapshot, rows)
    assignment = snapshot.get("assignment")
    if assignment is not None:
        rows["assigned_partitions"] = [((), len(assignment))]
    lag = snapshot.get("lag")
    if lag:
        rows["partition_lag"] = _lag_rows(lag, {} if cache is None else cache.partitions)
    latency = snapshot.get("commit_latency_seconds")
    if latency is not None:
        rows["commit_duration_seconds"] = [((), latency)]
    if snapshot.get("rebalances") is not None:
        rows["rebalances"] = [((str(snapshot.get("group_protocol") or ""),), snapshot["rebalances"])]
    if snapshot.get("group_state") is not None:
        rows["group_state"] = [((str(snapshot["group_state"]),), 1)]
    health = snapshot.get("group_health")
    if health is not None:
        rows["group_healthy"] = [((), int(bool(health.get("healthy"))))]
    sessions = snapshot.get("fetch_sessions")
    if sessions:
        _session_rows(sessions, rows)
    failing = snapshot.get("connection_failures")
    if failing is not None:
        rows["connection_failures"] = [((), len(failing))]
    return rows


def share_samples_of(snapshot: Mapping[str, Any], cache: LabelCache | None = None) -> Rows:
    """A ShareConsumer's samples: its own families, and the Consumer's that mean the same for it."""
    rows: Rows = {"share_consumer": [((str(snapshot["acknowledgement_mode"]),), 1)]}
    _plain_from(snapshot, _SHARE_PLAIN, rows)
    _plain_from(snapshot.get("member") or {}, _SHARE_MEMBER, rows)
    decided: list[Row] = [((kind,), snapshot[key]) for kind, key in _DECISIONS if snapshot.get(key) is not None]
    if decided:
        rows["share_acknowledged_records"] = decided
    renewals = snapshot.get("lock_renewals")
    if renewals is not None:
        rows["share_renewed_records"] = [((), renewals["records_renewed"] + (snapshot.get("renewed") or 0))]
        rows["share_lock_renewal_failures"] = [((), renewals["renewals_failed"])]
    if snapshot.get("delivery_counts") is not None:
        rows["share_delivery_count"] = [((), snapshot["delivery_counts"])]
    lag = snapshot.get("lag")  # the share lag (KIP-1226), share/lag.py
    if lag:
        rows["partition_lag"] = _lag_rows(lag, {} if cache is None else cache.partitions)
    state = (snapshot.get("member") or {}).get("group_state")
    if state is not None:
        rows["group_state"] = [((str(state),), 1)]
    return rows


def _plain_from(figures: Mapping[str, Any], names: Iterable[tuple[str, str]], rows: Rows) -> None:
    for name, key in names:
        value = _number(figures.get(key))
        if value is not None:
            rows[name] = [((), value)]


_SHARE_PLAIN = (("polls", "polls"), ("consumed_records", "records_handed_out"),
                ("share_acquired_records", "records_acquired"), ("share_lapsed_records", "records_lapsed"),
                ("share_held_records", "records_held"), ("share_acknowledgement_errors", "acknowledgement_errors"))
_SHARE_MEMBER = (("assigned_partitions", "assigned_partitions"), ("group_generation", "member_epoch"),
                 ("heartbeats", "heartbeats_sent"), ("heartbeat_failures", "heartbeat_failures"),
                 ("heartbeat_round_trip_seconds", "heartbeat_rtt_seconds"),
                 ("time_since_last_poll_seconds", "last_poll_seconds_ago"),
                 ("poll_interval_lapses", "poll_interval_lapses"))
_DECISIONS = (("accept", "accepted"), ("release", "released"), ("reject", "rejected"))


def _lag_rows(lag: Mapping[str, int | None], partitions: dict[str, tuple[str, str]]) -> list[Row]:
    out: list[Row] = []
    for key, value in lag.items():
        if value is not None:
            labels = partitions.get(key)
            if labels is None:
                # "topic-partition": the partition follows the last "-" (a topic may hold "-").
                topic, _, partition = key.rpartition("-")
                labels = partitions[key] = (topic, partition)
            out.append((labels, value))
    return out


def _session_rows(sessions: Mapping[Any, Mapping[str, Any]], rows: Rows) -> None:
    partitions: list[Row] = []
    requests: list[Row] = []
    connections: list[Row] = []
    for node, session in sessions.items():
        connections.append(((str(node),), session.get("lanes", 1)))
        # One connection per broker: the session itself; more: each one's under "connections".
        lanes = session.get("connections") or {0: session}
        for lane, st in lanes.items():
            where = (str(node), str(lane))
            partitions.append((where, st["partitions"]))
            requests.append(((*where, "full"), st["full_fetches"]))
            requests.append(((*where, "incremental"), st["incremental_fetches"]))
    rows["fetch_session_partitions"] = partitions
    rows["fetch_requests"] = requests
    rows["fetch_connections"] = connections


# ---------------------------------------------------------------- rows -> prometheus_client metrics

Consumers = Sequence[tuple[tuple[str, str], Rows]]  # per consumer: (client_id, group_id) and its rows


def metric_families(consumers: Consumers) -> list[Metric]:
    """Every family (empty ones too: a registry describes the collector with them)."""
    out: list[Metric] = []
    for family in FAMILIES:
        labels = [*CONSUMER_LABELS, *family.labels]
        metric = _MAKERS[family.type](family.full_name, family.help, labels=labels)
        for who, rows in consumers:
            for values, value in rows.get(family.name, ()):
                if family.type == "histogram":
                    buckets = [(_float(le), count) for le, count in value["buckets"]]
                    metric.add_metric([*who, *values], [*buckets, ("+Inf", value["count"])], value["sum"])
                elif family.type == "info":
                    metric.add_metric([*who, *values], {})
                else:
                    metric.add_metric([*who, *values], value)
        out.append(metric)
    return out


_MAKERS: dict[str, Callable[..., Any]] = {
    "counter": CounterMetricFamily, "gauge": GaugeMetricFamily, "histogram": HistogramMetricFamily,
    "info": InfoMetricFamily}


# ---------------------------------------------------------------- rows -> text exposition format

def text(consumers: Consumers, cache: LabelCache | None = None) -> bytes:
    """The text exposition format (version 0.0.4) of the same samples as metric_families()."""
    cache = LabelCache() if cache is None else cache
    prefixes = [(f'{CONSUMER_LABELS[0]}="{_escape(who[0])}",{CONSUMER_LABELS[1]}="{_escape(who[1])}"', rows)
                for who, rows in consumers]
    out: list[str] = []
    for family in FAMILIES:
        name = family.full_name
        exposed = {"counter": f"{name}_total", "info": f"{name}_info"}.get(family.type, name)
        kind = "gauge" if family.type == "info" else family.type
        out.append(f"# HELP {exposed} {family.help}\n# TYPE {exposed} {kind}\n")
        for prefix, rows in prefixes:
            family_rows = rows.get(family.name)
            if family_rows:
                if family.type == "histogram":
                    _histogram_lines(out, exposed, prefix, family_rows)
                else:
                    _lines(out, exposed, prefix, family.labels, family_rows, cache)
    return "".join(out).encode()


def _lines(out: list[str], name: str, prefix: str, label_names: tuple[str, ...], rows: Iterable[Row],
           cache: LabelCache) -> None:
    prefix = prefix.replace("%", "%%")  # a client_id may hold a "%"
    if not label_names:
        template = f"{name}{{{prefix}}} %s\n"
        out.extend([template % _value(value) for _, value in rows])
        return
    # One %-template per family and consumer and each row's labels as kept from the last scrape:
    # a thousand lag lines are a thousand dict look-ups and `%` operations.
    template = f"{name}{{{prefix},%s}} %s\n"
    known = cache.labels.setdefault(label_names, {})
    get = known.get
    out.extend([template % (get(values) or _label_text(known, label_names, values), _value(value))
                for values, value in rows])


def _label_text(known: dict[tuple[str, ...], str], label_names: tuple[str, ...], values: tuple[str, ...]) -> str:
    text = known[values] = ",".join(f'{label}="{_escape(v)}"' for label, v in zip(label_names, values, strict=True))
    return text


def _histogram_lines(out: list[str], name: str, prefix: str, rows: Iterable[Row]) -> None:
    for _, value in rows:
        for le, count in value["buckets"]:
            out.append(f'{name}_bucket{{{prefix},le="{_float(le)}"}} {_value(count)}\n')
        out.append(f'{name}_bucket{{{prefix},le="+Inf"}} {_value(value["count"])}\n')
        out.append(f"{name}_count{{{prefix}}} {_value(value['count'])}\n")
        out.append(f"{name}_sum{{{prefix}}} {_value(value['sum'])}\n")


def _value(value: float | int) -> str:
    return str(value) if type(value) is int else _float(value)


def _float(value: float) -> str:
    """As Go writes a float (what the format expects): +Inf, -Inf, NaN, else the shortest repr."""
    if math.isfinite(value):
        return repr(float(value))
    return "NaN" if math.isnan(value) else "+Inf" if value > 0 else "-Inf"


def _escape(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value
