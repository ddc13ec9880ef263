"""GetTelemetrySubscriptions (key 71): which client metrics the broker wants, and how (KIP-714).

v0 only, flexible. The first request carries the zero UUID as the client instance id and the broker
assigns one; an empty ``requested_metrics`` means no metrics are wanted, a single empty string all.
"""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

REQUEST = S(
    F("client_instance_id", "uuid"),
)

RESPONSE = S(
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("client_instance_id", "uuid"),  # assigned when the request's was zero, else zero
    F("subscription_id", "int32"),
    F("accepted_compression_types", A("int8")),  # record-batch codes: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
    F("push_interval_ms", "int32"),
    F("telemetry_max_bytes", "int32"),
    F("delta_temporality", "bool"),
    F("requested_metrics", A("string")),  # name prefixes
)

GET_TELEMETRY_SUBSCRIPTIONS = Api(71, "GetTelemetrySubscriptions", 0, 0, 0, REQUEST, RESPONSE)
