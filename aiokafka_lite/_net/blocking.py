"""A blocking connection for the heartbeat thread (heartbeat_mode="thread"): a plain socket that
keeps working while the event loop is blocked. One request at a time, same wire code (sans-IO
protocol layer), same version negotiation and SASL exchange as the asyncio connection."""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from typing import Any

from ..errors import KafkaConnectionError, ProtocolDecodeError, UnsupportedVersionError
from ..protocol.api import Api, decode_response, encode_request, peek_correlation_id, pick_version
from ..protocol.messages import API_VERSIONS
from .exceptions import map_exceptions
from .negotiation import api_versions_body, api_versions_ranges, api_versions_retry
from .options import ConnectionOptions
from .sasl import next_request, sasl_exchange, session_lifetime
from .tls import build_ssl_context

log = logging.getLogger("aiokafka_lite.net")


class BlockingConnection:
    def __init__(self, host: str, port: int, options: ConnectionOptions, timeout: float | None) -> None:
        self.host, self.port, self.options = host, port, options
        self._lock = threading.Lock()  # one request at a time; close() may come from another thread
        self._correlation_id = 0
        self._versions: dict[int, tuple[int, int]] = {}
        self._reauthenticate_at: float | None = None  # KIP-368, on the monotonic clock
        with map_exceptions(f"connecting to {self}", timeout):
            sock = socket.create_connection((host, port), timeout=timeout)
            context: ssl.SSLContext | None = build_ssl_context(options)
            if context is not None:
                sock = context.wrap_socket(sock, server_hostname=host)
        self._sock: socket.socket | None = sock
        try:
            self._negotiate(timeout)
            if options.uses_sasl:
                self._authenticate(timeout)
        except BaseException:
            self.close()
            raise

    def __str__(self) -> str:
        return f"broker {self.host}:{self.port} (heartbeat thread)"

    def _negotiate(self, timeout: float | None) -> None:
        body = api_versions_body(self.options)
        version = API_VERSIONS.max_version
        frame = self._exchange(API_VERSIONS, version, body, timeout)
        retry = api_versions_retry(frame, version)
        if retry is not None:
            version = retry
            frame = self._exchange(API_VERSIONS, version, body, timeout)
        self._versions = api_versions_ranges(frame, version, str(self))

    def _authenticate(self, timeout: float | None) -> None:
        tokens = self.options.oauth_tokens
        token = tokens.token_blocking(timeout) if tokens is not None and self.options.sasl_mechanism == \
            "OAUTHBEARER" else None
        exchange = sasl_exchange(self.options, self.version_for, str(self), token)
        request = next_request(exchange)
        response: dict[str, Any] | None = None
        while request is not None:
            api, version, body = request
            response = decode_response(api, version, self._exchange(api, version, body, timeout))
            request = next_request(exchange, response)
        lifetime = session_lifetime(response)
        # One request at a time, sent every heartbeat interval: sign in again at half the session, so
        # the request after the due time still comes before the session lapses (KIP-368).
        self._reauthenticate_at = None if lifetime is None else time.monotonic() + lifetime / 2

    def version_for(self, api: Api, client_max: int | None = None) -> int:
        broker_range = self._versions.get(api.key)
        if broker_range is None:
            raise UnsupportedVersionError(f"{self} does not support {api.name}")
        return pick_version(api, broker_range[0], broker_range[1], client_max)

    def send(self, api: Api, version: int, body: Mapping[str, Any], *, timeout: float | None) -> dict[str, Any]:
        if self._reauthenticate_at is not None and time.monotonic() >= self._reauthenticate_at:
            self._authenticate(timeout)
            log.debug("%s: re-authenticated (KIP-368)", self)
        return decode_response(api, version, self._exchange(api, version, body, timeout))

    def _exchange(self, api: Api, version: int, body: Mapping[str, Any], timeout: float | None) -> bytes:
        with self._lock, map_exceptions(f"{api.name} v{version} to {self}", timeout):
            sock = self._sock
            if sock is None:
                raise KafkaConnectionError(f"{self} is closed")
            self._correlation_id += 1
            sock.settimeout(timeout)
            sock.sendall(encode_request(api, version, self._correlation_id, self.options.client_id, body))
            size = int.from_bytes(self._read(sock, 4), "big", signed=True)
            if not 4 <= size <= self.options.max_frame_bytes:
                self.close()
                raise ProtocolDecodeError(f"{self} sent a frame of {size} bytes")
            frame = self._read(sock, size)
            if peek_correlation_id(frame) != self._correlation_id:
                self.close()
                raise ProtocolDecodeError(f"{self} answered out of order")
            return frame

    @staticmethod
    def _read(sock: socket.socket, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise EOFError("the broker closed the connection")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        """Idempotent; safe from any thread (it unblocks a recv in progress)."""
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
