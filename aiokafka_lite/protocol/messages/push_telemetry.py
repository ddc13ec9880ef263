"""PushTelemetry (key 72): one push of client metrics, OTLP ``MetricsData`` protobuf bytes (KIP-714).

v0 (as Kafka 4.3.1 defines it), flexible. ``terminating`` marks the last push of a
client being closed; ``compression_type`` is a record-batch code (0 none) the broker said it accepts.
"""

from __future__ import annotations

from ..api import Api
from ..schema import F, S

REQUEST = S(
    F("client_instance_id", "uuid"),
    F("subscription_id", "int32"),
    F("terminating", "bool"),
    F("compression_type", "int8"),
    F("metrics", "bytes"),
)

RESPONSE = S(
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
)

PUSH_TELEMETRY = Api(72, "PushTelemetry", 0, 0, 0, REQUEST, RESPONSE)
