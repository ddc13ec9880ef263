"""OpenTelemetry metrics as protobuf bytes: the ``MetricsData`` message a PushTelemetry carries (KIP-714).

A small protobuf writer for the few OTLP messages a client's metrics need, by the field numbers of
opentelemetry-proto (``opentelemetry/proto/metrics/v1/metrics.proto``, ``common/v1/common.proto``,
``resource/v1/resource.proto``):

    MetricsData      1 resource_metrics (ResourceMetrics, repeated)
    ResourceMetrics  1 resource (Resource), 2 scope_metrics (ScopeMetrics, repeated)
    Resource         1 attributes (KeyValue, repeated)
    ScopeMetrics     1 scope (InstrumentationScope), 2 metrics (Metric, repeated)
    InstrumentationScope  1 name, 2 version
    Metric           1 name, 2 description, 3 unit, 5 gauge (Gauge), 7 sum (Sum)
    Gauge            1 data_points (NumberDataPoint, repeated)
    Sum              1 data_points, 2 aggregation_temporality (enum: 1 delta, 2 cumulative), 3 is_monotonic
    NumberDataPoint  2 start_time_unix_nano (fixed64), 3 time_unix_nano (fixed64), 4 as_double (double),
                     6 as_int (sfixed64), 7 attributes (KeyValue, repeated)
    KeyValue         1 key, 2 value (AnyValue)
    AnyValue         1 string_value, 3 int_value (int64), 4 double_value

Pure: no I/O, no clocks (every timestamp is given).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# Wire types.
_VARINT, _FIXED64, _LEN = 0, 1, 2

TEMPORALITY_DELTA = 1
TEMPORALITY_CUMULATIVE = 2

AttributeValue = str | int | float


@dataclass(frozen=True)
class Point:
    """One metric with one data point: a gauge, or a monotonic sum (``start_ns`` set)."""

    name: str
    value: int | float
    time_ns: int
    unit: str = ""
    description: str = ""
    start_ns: int | None = None  # a sum (counter) from start_ns; None: a gauge
    delta: bool = False  # a sum's temporality: the change since start_ns, else the total since it
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)

    @property
    def is_sum(self) -> bool:
        return self.start_ns is not None


def _varint(out: bytearray, value: int) -> None:
    value &= 0xFFFFFFFFFFFFFFFF  # negative int64s take ten bytes, as protobuf writes them
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _key(out: bytearray, number: int, wire_type: int) -> None:
    _varint(out, (number << 3) | wire_type)


def _bytes_field(out: bytearray, number: int, data: bytes | bytearray) -> None:
    _key(out, number, _LEN)
    _varint(out, len(data))
    out += data


def _string_field(out: bytearray, number: int, text: str) -> None:
    if text:  # proto3: an empty string is the default and is not written
        _bytes_field(out, number, text.encode())


def _fixed64_field(out: bytearray, number: int, value: int) -> None:
    _key(out, number, _FIXED64)
    out += struct.pack("<Q", value & 0xFFFFFFFFFFFFFFFF)


def _double_field(out: bytearray, number: int, value: float) -> None:
    _key(out, number, _FIXED64)
    out += struct.pack("<d", value)


def _any_value(value: AttributeValue) -> bytearray:
    out = bytearray()
    if isinstance(value, str):
        _bytes_field(out, 1, value.encode())
    elif isinstance(value, int):  # bool too, as 0 or 1
        _key(out, 3, _VARINT)
        _varint(out, int(value))
    else:
        _double_field(out, 4, value)
    return out


def _attributes(out: bytearray, number: int, attributes: Mapping[str, AttributeValue]) -> None:
    for key, value in attributes.items():
        kv = bytearray()
        _string_field(kv, 1, key)
        _bytes_field(kv, 2, _any_value(value))
        _bytes_field(out, number, kv)


def _data_point(point: Point) -> bytearray:
    out = bytearray()
    if point.start_ns is not None:
        _fixed64_field(out, 2, point.start_ns)
    _fixed64_field(out, 3, point.time_ns)
    if isinstance(point.value, int) and not isinstance(point.value, bool):
        _key(out, 6, _FIXED64)  # sfixed64
        out += struct.pack("<q", point.value)
    else:
        _double_field(out, 4, float(point.value))
    _attributes(out, 7, point.attributes)
    return out


def encode_metric(point: Point) -> bytes:
    """One ``Metric`` message (its bytes without a key), so a caller can keep within a size limit."""
    out = bytearray()
    _string_field(out, 1, point.name)
    _string_field(out, 2, point.description)
    _string_field(out, 3, point.unit)
    data = bytearray()
    _bytes_field(data, 1, _data_point(point))
    if point.is_sum:
        _key(data, 2, _VARINT)
        _varint(data, TEMPORALITY_DELTA if point.delta else TEMPORALITY_CUMULATIVE)
        _key(data, 3, _VARINT)
        _varint(data, 1)  # is_monotonic: counters only go up
        _bytes_field(out, 7, data)
    else:
        _bytes_field(out, 5, data)
    return bytes(out)


def encode_metrics_data(metrics: Iterable[bytes], resource: Mapping[str, AttributeValue],
                        scope_name: str, scope_version: str = "") -> bytes:
    """A ``MetricsData`` of one resource and one instrumentation scope holding ``metrics``
    (each from :func:`encode_metric`)."""
    scope = bytearray()
    _string_field(scope, 1, scope_name)
    _string_field(scope, 2, scope_version)
    scope_metrics = bytearray()
    _bytes_field(scope_metrics, 1, scope)
    for metric in metrics:
        _bytes_field(scope_metrics, 2, metric)
    resource_message = bytearray()
    _attributes(resource_message, 1, resource)
    resource_metrics = bytearray()
    _bytes_field(resource_metrics, 1, resource_message)
    _bytes_field(resource_metrics, 2, scope_metrics)
    out = bytearray()
    _bytes_field(out, 1, resource_metrics)
    return bytes(out)


def framing_size(metric: bytes) -> int:
    """Bytes ``metric`` adds to a ``MetricsData`` (its key and length prefix included)."""
    length = len(metric)
    prefix = 1
    while length >= 0x80:
        length >>= 7
        prefix += 1
    return 1 + prefix + len(metric)
