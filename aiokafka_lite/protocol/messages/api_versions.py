"""ApiVersions (key 18): which versions of each API the broker speaks.

v5 (KIP-1242, Kafka 4.4) carries the cluster id and node id the client means to reach; a broker
that is not that node of that cluster answers REBOOTSTRAP_REQUIRED. The response is unchanged.
"""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

REQUEST = S(
    F("client_software_name", "string", "3+"),
    F("client_software_version", "string", "3+"),
    F("cluster_id", "string", "5+", null="5+"),  # null: not known (a bootstrap connection)
    F("node_id", "int32", "5+", default=-1),
)

RESPONSE = S(
    F("error_code", "int16"),
    F("api_keys", A(S(
        F("api_key", "int16"),
        F("min_version", "int16"),
        F("max_version", "int16"),
    ))),
    F("throttle_time_ms", "int32", "1+"),
    F("supported_features", A(S(
        F("name", "string", "3+"),
        F("min_version", "int16", "3+"),
        F("max_version", "int16", "3+"),
    )), "3+", tag=0),
    F("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
    F("finalized_features", A(S(
        F("name", "string", "3+"),
        F("max_version_level", "int16", "3+"),
        F("min_version_level", "int16", "3+"),
    )), "3+", tag=2),
    F("zk_migration_ready", "bool", "3+", tag=3),
)

API_VERSIONS = Api(18, "ApiVersions", 0, 5, 3, REQUEST, RESPONSE)
