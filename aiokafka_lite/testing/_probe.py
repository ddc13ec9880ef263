"""A tiny blocking Kafka client for readiness checks: ApiVersions v0 and a brokers-only Metadata.

It deliberately does not use the client's own protocol package, so a bug there cannot make the
test brokers look broken (or healthy).
"""

from __future__ import annotations

import socket
import struct

API_VERSIONS = 18
METADATA = 3
_CLIENT_ID = b"aiokafka-lite-probe"


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str | None:
        length = self.take(">h")
        if length < 0:
            return None
        text = self.data[self.pos:self.pos + length].decode()
        self.pos += length
        return text


def _request(sock: socket.socket, api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, len(_CLIENT_ID)) + _CLIENT_ID
    payload = header + body
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    size = struct.unpack(">i", _read_exactly(sock, 4))[0]
    response = _read_exactly(sock, size)
    if struct.unpack_from(">i", response)[0] != correlation_id:
        raise ConnectionError("probe: correlation id mismatch")
    return response[4:]


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < count:
        chunk = sock.recv(count - len(chunks))
        if not chunk:
            raise ConnectionError("probe: connection closed by broker")
        chunks += chunk
    return bytes(chunks)


def _parse_api_versions(body: bytes) -> dict[int, tuple[int, int]]:
    reader = _Reader(body)
    error = reader.take(">h")
    if error != 0:
        raise ConnectionError(f"probe: ApiVersions error code {error}")
    versions: dict[int, tuple[int, int]] = {}
    for _ in range(reader.take(">i")):
        key, low, high = reader.take(">h"), reader.take(">h"), reader.take(">h")
        versions[key] = (low, high)
    return versions


def _metadata_body(version: int) -> bytes:
    body = struct.pack(">i", 0)  # an empty topic list: brokers only (v1+)
    if version >= 4:
        body += b"\x00"  # allow_auto_topic_creation
    if version >= 8:
        body += b"\x00\x00"  # include cluster / topic authorized operations
    return body


def _parse_metadata_brokers(body: bytes, version: int) -> list[tuple[int, str, int]]:
    reader = _Reader(body)
    if version >= 3:
        reader.take(">i")  # throttle_time_ms
    brokers = []
    for _ in range(reader.take(">i")):
        node_id, host, port = reader.take(">i"), reader.string(), reader.take(">i")
        reader.string()  # rack
        brokers.append((node_id, host or "", port))
    return brokers


def api_versions(host: str, port: int, timeout: float = 2.0) -> dict[int, tuple[int, int]]:
    """The broker's ApiVersions v0 answer: {api_key: (min_version, max_version)}."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        return _parse_api_versions(_request(sock, API_VERSIONS, 0, 1, b""))


def metadata_brokers(host: str, port: int, timeout: float = 2.0) -> list[tuple[int, str, int]]:
    """Ask for cluster metadata (no topics); return the advertised brokers as (id, host, port)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        versions = _parse_api_versions(_request(sock, API_VERSIONS, 0, 1, b""))
        low, high = versions.get(METADATA, (-1, -1))
        version = max(low, 1)
        if version > min(high, 8):
            raise ConnectionError(f"probe: no Metadata version in 1..8 (broker has {low}..{high})")
        body = _request(sock, METADATA, version, 2, _metadata_body(version))
        return _parse_metadata_brokers(body, version)


def kafka_ready(host: str, port: int, timeout: float = 2.0) -> bool:
    """True once the broker answers Metadata with at least one broker."""
    try:
        return bool(metadata_brokers(host, port, timeout))
    except (OSError, ConnectionError, struct.error):
        return False
