"""protocol/otlp.py: OTLP MetricsData bytes, read back with a tiny protobuf reader written here from the
wire format (varint keys: field number << 3 | wire type), and one message checked against bytes
worked out by hand."""

from __future__ import annotations

import struct
from typing import Any

from aiokafka_lite.protocol.otlp import (
    TEMPORALITY_CUMULATIVE,
    TEMPORALITY_DELTA,
    Point,
    encode_metric,
    encode_metrics_data,
    framing_size,
)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) in order: ints for varints, 8 raw bytes for fixed64,
    bytes for length-delimited fields."""
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = _varint(data, pos)
            value, pos = data[pos:pos + size], pos + size
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.append((number, wire, value))
    assert pos == len(data)
    return out


def one(data: bytes, number: int) -> Any:
    (value,) = [v for n, _, v in fields(data) if n == number]
    return value


def every(data: bytes, number: int) -> list[Any]:
    return [v for n, _, v in fields(data) if n == number]


def attributes(message: bytes, number: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in every(message, number):
        any_value = fields(one(kv, 2))
        ((kind, _, raw),) = any_value
        out[one(kv, 1).decode()] = raw.decode() if kind == 1 else raw if kind == 3 else struct.unpack("<d", raw)[0]
    return out


def test_a_gauge_matches_bytes_worked_out_by_hand() -> None:
    point = Point("a", 1.5, time_ns=2)
    expected = (b"\x0a\x01a"  # 1 name, length 1, "a"
                b"\x2a\x14"  # 5 gauge, length 20
                b"\x0a\x12"  # 1 data_points, length 18
                b"\x19" + struct.pack("<Q", 2)  # 3 time_unix_nano, fixed64
                + b"\x21" + struct.pack("<d", 1.5))  # 4 as_double
    assert encode_metric(point) == expected


def test_metrics_data_reads_back_with_resource_scope_gauges_and_sums() -> None:
    gauge = Point("org.apache.kafka.consumer.last.poll.seconds.ago", 0.25, time_ns=10**18, unit="s",
                  description="since poll")
    lag = Point("org.apache.kafka.consumer.fetch.manager.records.lag", 7, time_ns=10**18,
                attributes={"topic": "t-1", "partition": "0"})
    counter = Point("org.apache.kafka.consumer.coordinator.commit.total", 42, time_ns=10**18, start_ns=5)
    delta = Point("org.apache.kafka.consumer.fetch.manager.records.consumed.total", 3, time_ns=10**18,
                  start_ns=9, delta=True)
    data = encode_metrics_data([encode_metric(p) for p in (gauge, lag, counter, delta)],
                               {"client_id": "c", "pid": 12}, "aiokafka_lite", "1.0")

    resource_metrics = one(data, 1)
    assert attributes(one(resource_metrics, 1), 1) == {"client_id": "c", "pid": 12}
    scope_metrics = one(resource_metrics, 2)
    scope = one(scope_metrics, 1)
    assert (one(scope, 1), one(scope, 2)) == (b"aiokafka_lite", b"1.0")
    metrics = every(scope_metrics, 2)
    assert [one(m, 1).decode() for m in metrics] == [p.name for p in (gauge, lag, counter, delta)]

    g = metrics[0]
    assert (one(g, 2), one(g, 3)) == (b"since poll", b"s")
    point = one(one(g, 5), 1)
    assert struct.unpack("<Q", one(point, 3))[0] == 10**18
    assert struct.unpack("<d", one(point, 4))[0] == 0.25

    lag_point = one(one(metrics[1], 5), 1)
    assert struct.unpack("<q", one(lag_point, 6))[0] == 7  # as_int, sfixed64
    assert attributes(lag_point, 7) == {"topic": "t-1", "partition": "0"}

    for metric, start, value, temporality in ((metrics[2], 5, 42, TEMPORALITY_CUMULATIVE),
                                              (metrics[3], 9, 3, TEMPORALITY_DELTA)):
        total = one(metric, 7)  # a Sum, not a Gauge
        assert every(metric, 5) == []
        assert one(total, 2) == temporality
        assert one(total, 3) == 1  # monotonic
        number = one(total, 1)
        assert struct.unpack("<Q", one(number, 2))[0] == start
        assert struct.unpack("<q", one(number, 6))[0] == value


def test_framing_size_is_what_a_metric_adds_to_its_scope() -> None:
    for size in (1, 127, 128, 20000):
        metric = encode_metric(Point("x" * size, 1, time_ns=1))
        with_it = encode_metrics_data([metric], {}, "s")
        without = encode_metrics_data([], {}, "s")
        # The three enclosing lengths may grow too (by up to two bytes each below 2 MiB).
        assert 0 <= len(with_it) - len(without) - framing_size(metric) <= 6


def test_negative_ints_and_empty_strings() -> None:
    metric = encode_metric(Point("n", -1, time_ns=0))
    point = one(one(metric, 5), 1)
    assert struct.unpack("<q", one(point, 6))[0] == -1
    assert every(metric, 2) == []
    assert every(metric, 3) == []
