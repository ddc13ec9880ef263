"""An API key's request/response schemas, request framing, and version negotiation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ProtocolDecodeError, ProtocolEncodeError, UnsupportedVersionError
from .primitives import Reader, Writer
from .schema import Struct, decode_struct, encode_struct


@dataclass(frozen=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int | None  # first version using compact types and tagged fields
    request: Struct
    response: Struct

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    def request_header_version(self, version: int) -> int:
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        # ApiVersions answers with header v0 at every version, so a client that sent a version the
        # broker does not know can still read the error (KIP-511).
        if self.key == API_VERSIONS_KEY:
            return 0
        return 1 if self.is_flexible(version) else 0

    def check_version(self, version: int) -> None:
        if not self.min_version <= version <= self.max_version:
            raise UnsupportedVersionError(
                f"{self.name} v{version} is outside this client's range "
                f"v{self.min_version}-v{self.max_version}"
            )


API_VERSIONS_KEY = 18


def encode_request(api: Api, version: int, correlation_id: int, client_id: str | None,
                   body: Mapping[str, Any]) -> bytes:
    """One size-prefixed request frame ready for the socket."""
    api.check_version(version)
    w = Writer()
    w.int32(0)  # size, patched below
    w.int16(api.key)
    w.int16(version)
    w.int32(correlation_id)
    w.string(client_id)  # the client id stays a classic nullable string in header v2
    flexible = api.is_flexible(version)
    if flexible:
        w.uvarint(0)  # no header tagged fields
    try:
        encode_struct(w, api.request, body, version, flexible)
    except ProtocolEncodeError as exc:
        raise ProtocolEncodeError(f"cannot encode {api.name} v{version} request: {exc}") from None
    w.buf[0:4] = (len(w.buf) - 4).to_bytes(4, "big")
    return bytes(w.buf)


def decode_request(api: Api, frame: bytes | memoryview) -> tuple[int, int, dict[str, Any]]:
    """(version, correlation id, body) of a request frame without its size prefix (tests, fakes)."""
    r = Reader(frame)
    r.int16()
    version = r.int16()
    correlation_id = r.int32()
    r.string()
    flexible = api.is_flexible(version)
    if flexible:
        _skip_tagged(r)
    body = decode_struct(r, api.request, version, flexible)
    r.finish(f"{api.name} v{version} request", allow_trailing=False)
    return version, correlation_id, body


def peek_correlation_id(frame: bytes | memoryview) -> int:
    if len(frame) < 4:
        raise ProtocolDecodeError(f"response frame of {len(frame)} bytes has no correlation id")
    return int.from_bytes(frame[0:4], "big", signed=True)


def decode_response(api: Api, version: int, frame: bytes | memoryview) -> dict[str, Any]:
    """The body of a response frame (size prefix already stripped)."""
    r = Reader(frame)
    r.int32()  # correlation id, matched by the caller
    if api.response_header_version(version) >= 1:
        _skip_tagged(r)
    body = decode_struct(r, api.response, version, api.is_flexible(version))
    # Trailing bytes are tolerated: a newer broker may add fields; missing bytes are not.
    r.finish(f"{api.name} v{version} response")
    return body


def encode_response(api: Api, version: int, correlation_id: int, body: Mapping[str, Any]) -> bytes:
    """A size-prefixed response frame (used by tests and in-process fakes)."""
    w = Writer()
    w.int32(0)
    w.int32(correlation_id)
    if api.response_header_version(version) >= 1:
        w.uvarint(0)
    encode_struct(w, api.response, body, version, api.is_flexible(version))
    w.buf[0:4] = (len(w.buf) - 4).to_bytes(4, "big")
    return bytes(w.buf)


def _skip_tagged(r: Reader) -> None:
    for _ in range(r.tagged_field_count("header tagged fields")):
        r.uvarint()
        r.skip(r.uvarint())


def pick_version(api: Api, broker_min: int, broker_max: int, client_max: int | None = None) -> int:
    """The highest version both this client and the broker support."""
    top = min(api.max_version, broker_max, api.max_version if client_max is None else client_max)
    bottom = max(api.min_version, broker_min)
    if top < bottom:
        raise UnsupportedVersionError(
            f"{api.name}: the broker supports v{broker_min}-v{broker_max}, "
            f"this client v{api.min_version}-v{api.max_version}; no common version"
        )
    return top
