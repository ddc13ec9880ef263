"""ListGroups (key 16): the groups a broker coordinates."""

from __future__ import annotations

from ..api import Api
from ..schema import A, F, S

REQUEST = S(
    F("states_filter", A("string"), "4+"),  # KIP-518
    F("types_filter", A("string"), "5+"),  # KIP-848
)

RESPONSE = S(
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("groups", A(S(
        F("group_id", "string"),
        F("protocol_type", "string"),
        F("group_state", "string", "4+"),
        F("group_type", "string", "5+"),
    ))),
)

LIST_GROUPS = Api(16, "ListGroups", 0, 5, 3, REQUEST, RESPONSE)
