"""ApiVersions negotiation, sans-I/O: the request body, the retry decision and the broker's ranges.

Shared by the asyncio connection and the heartbeat thread's blocking one, which each send the
request with their own I/O: send at our highest version; on UNSUPPORTED_VERSION retry once as the
answer says (KIP-511). A connection to a known broker names, from v5 on, the cluster and node it is
meant for (KIP-1242); a broker that is not that node of that cluster answers REBOOTSTRAP_REQUIRED,
which the connection raises as MisroutedConnectionError. Older brokers never see the names (the
retry at their version has no room for them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import BrokerError, ProtocolDecodeError
from ..protocol.api import decode_response
from ..protocol.messages.api_versions import API_VERSIONS
from .options import ConnectionOptions

UNSUPPORTED_VERSION = 35
REBOOTSTRAP_REQUIRED = 129
CLUSTER_CHECK_VERSION = 5  # KIP-1242: ApiVersions names the cluster and node meant


@dataclass(frozen=True, slots=True)
class IntendedBroker:
    """Which broker a connection is meant for (KIP-1242): known once metadata named it."""

    cluster_id: str
    node_id: int


def api_versions_body(options: ConnectionOptions, intended: IntendedBroker | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"client_software_name": options.client_software_name,
                            "client_software_version": options.client_software_version}
    if intended is not None:
        body.update(cluster_id=intended.cluster_id, node_id=intended.node_id)
    return body


def api_versions_retry(frame: bytes | memoryview, version: int) -> int | None:
    """The version to resend ApiVersions at, or None when this answer is final."""
    if _error_code(frame) != UNSUPPORTED_VERSION:
        return None
    return min(_fallback_version(frame), version - 1)


def refused_as_misrouted(frame: bytes | memoryview, version: int) -> bool:
    """Whether the final answer to a request naming a cluster and node says this broker is not
    that node of that cluster (KIP-1242: REBOOTSTRAP_REQUIRED, from v5 on)."""
    return version >= CLUSTER_CHECK_VERSION and _error_code(frame) == REBOOTSTRAP_REQUIRED


def api_versions_ranges(frame: bytes | memoryview, version: int, peer: str) -> dict[int, tuple[int, int]]:
    """The broker's (min, max) version per API key from its final ApiVersions answer."""
    response = decode_response(API_VERSIONS, version, frame)
    if response["error_code"]:
        raise BrokerError(response["error_code"], f"ApiVersions v{version} from {peer}")
    return _ranges(response)


def _error_code(frame: bytes | memoryview) -> int:
    # ApiVersions responses use header v0 at every version, so the error code follows the
    # correlation id directly.
    return int.from_bytes(frame[4:6], "big", signed=True) if len(frame) >= 6 else 0


def _fallback_version(frame: bytes | memoryview) -> int:
    """The ApiVersions version to retry with after UNSUPPORTED_VERSION.

    KIP-511: the broker answers in v0 and lists the ApiVersions range it speaks. A body that does
    not decode as v0 (librdkafka's mock cluster sends one) means: retry at v0, which every broker speaks.
    """
    try:
        response = decode_response(API_VERSIONS, 0, frame)
    except ProtocolDecodeError:
        return 0
    return _ranges(response).get(API_VERSIONS.key, (0, 0))[1]


def _ranges(response: Mapping[str, Any]) -> dict[int, tuple[int, int]]:
    return {k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"] or ()}
