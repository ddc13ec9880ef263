"""One asyncio stream to one broker: framing, correlation ids, pipelined requests, negotiation.

Design choices:

* Many requests may be in flight. Each ``send`` registers a pending entry and awaits its own
  future; the read side (frames.py ``FrameProtocol``) receives whole frames and hands each to the
  oldest pending entry. Kafka answers in order, so a correlation id that is not the oldest one is a
  protocol violation: the connection is closed and every waiter fails.
* A request that times out or is cancelled keeps its pending entry (its future is merely done). Its
  late response is read as a whole frame and dropped, so the stream stays positioned at a frame
  boundary and the connection stays usable. Closing instead would also kill the unrelated requests
  pipelined behind it (a long-poll fetch next to an offsets request).
* Responses are decoded by the awaiting caller, not on the read side: a cancelled caller costs
  no decoding, and a large fetch response is decoded in the task that wants it.
* Re-authentication (KIP-368): when the SASL exchange returns a session lifetime, a timer starts an
  owned task before it lapses. The task closes the gate (new requests wait), lets the requests in
  flight finish (the broker answers them first), runs the SASL exchange again with a fresh token,
  and opens the gate. Frames keep arriving the usual way (the loop's or the native reader thread),
  so the exchange is ordinary requests between other requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..errors import (
    KafkaConnectionError,
    KafkaError,
    ProtocolDecodeError,
    UnsupportedVersionError,
)
from ..protocol.api import Api, decode_response, encode_request, peek_correlation_id, pick_version
from ..protocol.messages.api_versions import API_VERSIONS
from .connect_failure import Step, api_versions_unanswered, explain, tls_handshake_unanswered
from .exceptions import MisroutedConnectionError, map_exceptions, translate
from .frame_thread import ThreadedFrames
from .frame_thread import available as frame_thread_available
from .frames import FrameProtocol
from .monitor import ConnectionMonitor
from .negotiation import (
    IntendedBroker,
    api_versions_body,
    api_versions_ranges,
    api_versions_retry,
    refused_as_misrouted,
)
from .options import ConnectionOptions
from .sasl import next_request, sasl_exchange, session_lifetime
from .tls import build_ssl_context, open_transport

if TYPE_CHECKING:
    from .oauth import OAuthTokens

log = logging.getLogger("aiokafka_lite.net")


class RequestTimeoutDefault:
    """The type of DEFAULT: a request bounded by the connection's request_timeout."""

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Final = RequestTimeoutDefault()
"""``timeout=DEFAULT``: the connection's ``request_timeout``; ``None`` means no limit."""

Timeout = float | None | RequestTimeoutDefault

REAUTH_MIN_INTERVAL = 1.05  # seconds: Kafka refuses re-authentications less than 1 s apart
# A broker answers ApiVersions in milliseconds: a server that took the connection and is silent this
# long is news at once (most likely not Kafka), though open() waits on for a slow broker's answer.
SILENCE_SAID_AFTER = 2.0


@dataclass(slots=True)
class _Pending:
    correlation_id: int
    api: Api
    version: int
    future: asyncio.Future[bytes | memoryview]
    sent_at: float


class Connection:
    """A negotiated (and, if configured, authenticated) connection to one broker."""

    def __init__(self, host: str, port: int, transport: asyncio.Transport, frames: FrameProtocol,
                 options: ConnectionOptions, node_id: int | None = None,
                 monitor: ConnectionMonitor | None = None) -> None:
        self.host = host
        self.port = port
        self._address = (host, port)
        # Shared by the cluster's connections so that a failure repeating across reconnects is
        # said once; a connection opened on its own gets a monitor of its own.
        self._monitor = monitor or ConnectionMonitor()
        self.node_id = node_id
        self.options = options
        self._transport = transport
        self._frames = frames
        self._threaded: ThreadedFrames | None = None  # the read side, once on a native thread
        self._pending: deque[_Pending] = deque()
        self._next_correlation_id = 0
        self._closed_by: KafkaError | None = None
        self._broker_versions: dict[int, tuple[int, int]] = {}
        self.api_versions_version = -1  # the ApiVersions version the broker answered
        # Until open() returns, a failure is open()'s to explain (connect_failure), not the monitor's.
        self._opening = True
        self.last_used = time.monotonic()
        self._last_received = self.last_used
        # KIP-368: the timer that starts re-authentication, its task, the gate new requests wait
        # behind while it runs, and the waiter of "no request in flight".
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Task[None] | None = None
        self._reauth_gate: asyncio.Event | None = None
        self._idle_waiter: asyncio.Future[None] | None = None
        self._session_lifetime = 0.0
        self._session_ends = 0.0  # on the loop's clock
        self.reauthentications = 0
        frames.attach(self._on_frame, self._read_failed)

    # ------------------------------------------------------------------ opening

    @classmethod
    async def open(cls, host: str, port: int, options: ConnectionOptions, *,
                   timeout: Timeout = DEFAULT,
                   node_id: int | None = None,
                   monitor: ConnectionMonitor | None = None,
                   on_silence: Callable[[str], None] | None = None,
                   intended: IntendedBroker | None = None) -> Connection:
        """Connect, negotiate API versions and authenticate, all within one ``timeout``; an
        OAUTHBEARER token is not the broker's to give, so the provider has its own (request_timeout),
        whose error names it. ``on_silence`` is told once, SILENCE_SAID_AFTER seconds into an
        unanswered TLS handshake or ApiVersions, what that means; waiting goes on to the timeout.
        ``intended``: the cluster and node meant, for the broker to check (KIP-1242)."""
        seconds = options.request_timeout if isinstance(timeout, RequestTimeoutDefault) else timeout
        ssl_context = build_ssl_context(options)
        step = Step.CONNECT  # the failing step tells what an error means (connect_failure)
        try:
            with map_exceptions(f"connecting to {connection_name(host, port, node_id)}", seconds):
                async with asyncio.timeout(seconds) as budget:
                    name, address = connection_name(host, port, node_id), address_name(host, port, node_id)
                    transport, frames = await open_transport(
                        lambda: FrameProtocol(options.max_frame_bytes, lambda: name), host, port, ssl_context,
                        lambda: _told_if_silent(on_silence, tls_handshake_unanswered, address, seconds))
                    conn = cls(host, port, transport, frames, options, node_id, monitor)
                    try:
                        step = Step.API_VERSIONS
                        with _told_if_silent(on_silence, api_versions_unanswered, address, seconds):
                            await conn._negotiate_versions(intended)
                        if options.uses_sasl:
                            if options.oauth_tokens is not None and options.sasl_mechanism == "OAUTHBEARER":
                                step = Step.TOKEN  # its failures are the provider's, not the broker's
                                await _token_off_the_clock(budget, options.oauth_tokens)
                            step = Step.SASL
                            await conn._authenticate()
                    except BaseException:
                        await conn.close()
                        raise
        except KafkaError as exc:
            explained = explain(exc, step, address_name(host, port, node_id), options, seconds)
            if explained is exc:
                raise
            raise explained from exc
        conn._opening = False
        if ssl_context is None and frame_thread_available():
            try:
                conn._read_on_a_thread()
            except BaseException:  # not for want of a thread (that falls back): close, not leave open
                await conn.close()
                raise
        log.debug("connected to %s", conn)
        conn._monitor.connected(conn._address)
        return conn

    def _read_on_a_thread(self) -> None:
        """From now on, receive frames on a native thread (another core than the application's;
        plaintext only: TLS records must be read through the loop's ssl object). Nothing is in
        flight after open(), so the loop's reader stops at a frame boundary."""
        sock = self._transport.get_extra_info("socket")
        if sock is None:
            return
        self._transport.pause_reading()
        try:
            self._threaded = ThreadedFrames(sock.fileno(), asyncio.get_running_loop(), self._on_frame,
                                            self._read_failed, self.options.max_frame_bytes, peer=str(self),
                                            zero_copy=True, context=self._reading_context)
        except OSError as exc:  # no thread or fd to spare: the loop keeps receiving, as on TLS
            log.debug("%s: receiving on the event loop (no reader thread: %s)", self, exc)
            self._transport.resume_reading()

    async def _negotiate_versions(self, intended: IntendedBroker | None = None) -> None:
        body = api_versions_body(self.options, intended)
        version = API_VERSIONS.max_version
        frame = await self._exchange(API_VERSIONS, version, body, None)
        retry = api_versions_retry(frame, version)
        if retry is not None:
            version = retry
            frame = await self._exchange(API_VERSIONS, version, body, None)
        if intended is not None and refused_as_misrouted(frame, version):
            raise MisroutedConnectionError(str(self), intended.cluster_id, None)
        self._broker_versions = api_versions_ranges(frame, version, str(self))
        self.api_versions_version = version

    async def _authenticate(self, min_token_life: float = 0.0) -> None:
        """Drive the SASL exchange (sasl.py) on this connection, with nothing else in flight: when
        fresh, and again to re-authenticate (KIP-368). The caller bounds it. A session lasts no
        longer than its token: re-authenticating asks for one with ``min_token_life`` seconds left."""
        tokens = self.options.oauth_tokens
        token = await tokens.token(min_token_life) if tokens is not None \
            and self.options.sasl_mechanism == "OAUTHBEARER" else None
        exchange = sasl_exchange(self.options, self.version_for, str(self), token)
        request = next_request(exchange)
        response: dict[str, Any] | None = None
        while request is not None:
            api, version, body = request
            response = decode_response(api, version, await self._exchange(api, version, body, None, gated=False))
            request = next_request(exchange, response)
        self._schedule_reauthentication(session_lifetime(response))

    def _schedule_reauthentication(self, lifetime: float | None) -> None:
        """Re-authenticate at 85-95 % of the session (as Java), leaving time to let the requests in
        flight finish (a fetch long-polls) before the broker would close the connection."""
        if lifetime is None:
            return
        self._session_lifetime = lifetime
        self._session_ends = asyncio.get_running_loop().time() + lifetime
        delay = max(lifetime * 0.5, min(lifetime * random.uniform(0.85, 0.95), lifetime - 2.0))
        # The broker refuses a re-authentication begun within a second of the last one.
        delay = max(delay, min(REAUTH_MIN_INTERVAL, lifetime * 0.9))
        self._reauth_timer = asyncio.get_running_loop().call_later(delay, self._start_reauthentication)

    def _start_reauthentication(self) -> None:
        self._reauth_timer = None
        if self._closed_by is None and self._reauth_task is None:
            self._reauth_task = asyncio.get_running_loop().create_task(
                self._reauthenticate(), name=f"re-authenticate {self}")

    async def _reauthenticate(self) -> None:
        gate = self._reauth_gate = asyncio.Event()
        try:
            if not await self._until_idle():
                return
            # Our clock started the session when the answer arrived, the broker's a little earlier.
            margin = min(1.0, self._session_lifetime * 0.1)
            if asyncio.get_running_loop().time() >= self._session_ends - margin:
                # A request held past the session's end (a JoinGroup through a long rebalance): the
                # broker would close the connection at our next request, so close it now, quietly;
                # the next request opens a new one and signs in.
                log.debug("%s: its SASL session ended while a request was in flight; reconnecting", self)
                self._shutdown(KafkaConnectionError(f"{self}: its SASL session ended (KIP-368); reconnecting"))
                return
            async with asyncio.timeout(self.options.request_timeout):
                await self._authenticate(min_token_life=self._session_lifetime / 2)
            self.reauthentications += 1
            self._monitor.reauthenticated()
            log.debug("%s: re-authenticated (KIP-368)", self)
        except Exception as exc:  # the session cannot go on: fail the waiters, the next send reconnects
            error = exc if isinstance(exc, KafkaError) else translate(exc, f"re-authenticating with {self}")
            log.warning("%s: re-authentication failed, closing the connection: %s", self, error)
            self._shutdown(error)
        finally:
            self._reauth_task = None
            self._reauth_gate = None
            gate.set()

    async def _until_idle(self) -> bool:
        """Until no request is in flight (the broker answers them before the re-authentication), or
        False when the connection closed meanwhile or every request still pending has lost its
        caller (timed out or cancelled) for a request timeout: a silent broker, so close."""
        while self._pending and self._closed_by is None:
            self._idle_waiter = asyncio.get_running_loop().create_future()
            done, _ = await asyncio.wait([self._idle_waiter], timeout=self.options.request_timeout)
            if not done and all(entry.future.done() for entry in self._pending):
                self._shutdown(KafkaConnectionError(f"{self} stopped answering (while re-authenticating)"))
        return self._closed_by is None

    # ------------------------------------------------------------------ versions

    @property
    def broker_versions(self) -> Mapping[int, tuple[int, int]]:
        """The broker's (min, max) version for each API key it supports."""
        return self._broker_versions

    def version_for(self, api: Api, client_max: int | None = None) -> int:
        """The highest version of ``api`` both sides speak (UnsupportedVersionError if none)."""
        broker_range = self._broker_versions.get(api.key)
        if broker_range is None:
            raise UnsupportedVersionError(f"{self} does not support {api.name} (API key {api.key})")
        return pick_version(api, broker_range[0], broker_range[1], client_max)

    # ------------------------------------------------------------------ requests

    async def send(self, api: Api, version: int, body: Mapping[str, Any], *,
                   timeout: Timeout = DEFAULT) -> dict[str, Any]:
        """Send one request and return its decoded response body.

        ``timeout`` covers writing and waiting; DEFAULT is ``options.request_timeout``, None is no
        limit. Raises KafkaTimeoutError, KafkaConnectionError or ProtocolDecodeError.
        """
        seconds = self.options.request_timeout if isinstance(timeout, RequestTimeoutDefault) else timeout
        frame = await self._exchange(api, version, body, seconds)
        return decode_response(api, version, frame)

    async def _exchange(self, api: Api, version: int, body: Mapping[str, Any],
                        seconds: float | None, *, gated: bool = True) -> bytes | memoryview:
        with map_exceptions(f"{api.name} v{version} to {self}", seconds):
            loop = asyncio.get_running_loop()
            deadline = None if seconds is None else loop.time() + seconds
            gate = self._reauth_gate
            if gated and gate is not None:  # re-authenticating: wait, within this request's time
                async with asyncio.timeout_at(deadline):
                    await gate.wait()
            pending = self._enqueue(api, version, body)
            try:
                async with asyncio.timeout_at(deadline):
                    await self._drain()
                    # On timeout or cancellation this future is cancelled; the entry stays queued so
                    # the reader can recognise and drop the late response.
                    return await pending.future
            except TimeoutError:
                self._drop_if_silent(pending)
                raise

    def _drop_if_silent(self, timed_out: _Pending) -> None:
        """Close a connection that still owes an older timed-out answer and received nothing at all
        while ``timed_out`` waited: the peer is gone without FIN or RST (a half-open connection).
        Keeping it would make every later request on it time out too; closing lets the next one
        reconnect. A slow but live broker sends frames, so one timeout alone never closes."""
        oldest = self._pending[0] if self._pending else None
        if (oldest is not None and oldest is not timed_out and oldest.future.done()
                and self._last_received < timed_out.sent_at):
            self._monitor.half_open(str(self), self._address,
                                    f"closing the connection: no answer to {oldest.api.name} "
                                    f"v{oldest.version} nor to anything sent since (half-open?)")
            self._shutdown(KafkaConnectionError(
                f"{self} stopped answering: closed after two requests timed out with nothing received"))

    def _enqueue(self, api: Api, version: int, body: Mapping[str, Any]) -> _Pending:
        if self._closed_by is not None:
            raise KafkaConnectionError(f"{self} is closed: {self._closed_by}")
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(api, version, correlation_id, self.options.client_id, body)
        pending = _Pending(correlation_id, api, version, asyncio.get_running_loop().create_future(),
                           time.monotonic())
        self._pending.append(pending)
        self._transport.write(frame)
        self.last_used = time.monotonic()
        return pending

    async def _drain(self) -> None:
        try:
            await self._frames.drain()
        except OSError as exc:
            # The write side broke: fail every waiter (this one included) with the typed error.
            self._shutdown(translate(exc, f"writing to {self}"))

    # ------------------------------------------------------------------ reading

    def _on_frame(self, frame: bytes | memoryview) -> None:
        try:
            self._route(frame)
        except Exception as exc:  # an answer out of order: the stream cannot be trusted any more
            self._read_failed(exc)

    def _read_failed(self, exc: BaseException) -> None:
        """The read side ended (EOF, reset, a bad frame): fail every waiter with the typed error."""
        if self._closed_by is not None:
            return
        oldest = self._oldest_request()
        error = translate(exc, self._reading_context(oldest))
        if not self._opening:
            self._monitor.closed(str(self), self._address, error, oldest)
        self._shutdown(error)

    def _reading_context(self, oldest: tuple[Api, int, tuple[int, int] | None] | None = None) -> str:
        """What the read side was doing, naming ``oldest`` (default: the oldest request pending)."""
        oldest = oldest or self._oldest_request()
        # Naming the request the broker was answering is the clue when it drops the same one
        # every time (a version it advertises but cannot parse).
        awaiting = "" if oldest is None else f" awaiting {oldest[0].name} v{oldest[1]}"
        return f"reading from {self}{awaiting}"

    def _oldest_request(self) -> tuple[Api, int, tuple[int, int] | None] | None:
        """The request the broker was answering when it closed the connection, if any."""
        if not self._pending:
            return None
        oldest = self._pending[0]
        return oldest.api, oldest.version, self._broker_versions.get(oldest.api.key)

    def _route(self, frame: bytes | memoryview) -> None:
        correlation_id = peek_correlation_id(frame)
        if not self._pending:
            raise ProtocolDecodeError(f"{self} sent a response (correlation id {correlation_id}) "
                                      "to no request")
        pending = self._pending[0]
        if correlation_id != pending.correlation_id:
            raise ProtocolDecodeError(
                f"{self} answered correlation id {correlation_id}, expected "
                f"{pending.correlation_id} ({pending.api.name} v{pending.version})")
        self._pending.popleft()
        if not self._pending and self._idle_waiter is not None and not self._idle_waiter.done():
            self._idle_waiter.set_result(None)  # re-authentication may begin
        self.last_used = self._last_received = time.monotonic()
        if self._monitor.watching(self._address):  # a drop streak on this broker may end here
            self._monitor.answered(self._address, pending.api, pending.version)
        if not pending.future.done():  # a timed-out or cancelled request's answer is dropped
            pending.future.set_result(frame)

    # ------------------------------------------------------------------ closing

    @property
    def closed(self) -> bool:
        return self._closed_by is not None

    @property
    def closed_by(self) -> KafkaError | None:
        """Why the connection is closed (None while open)."""
        return self._closed_by

    @property
    def in_flight(self) -> int:
        return sum(1 for p in self._pending if not p.future.done())

    def _shutdown(self, error: KafkaError) -> None:
        """Mark closed, fail every waiter with ``error``, abort the transport. Idempotent, sync."""
        if self._closed_by is not None:
            return
        self._closed_by = error
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
        if self._idle_waiter is not None and not self._idle_waiter.done():
            self._idle_waiter.set_result(None)
        if self._reauth_task is not None and self._reauth_task is not asyncio.current_task():
            self._reauth_task.cancel()
        pending, self._pending = self._pending, deque()
        for entry in pending:
            if not entry.future.done():
                entry.future.set_exception(error)
        if self._threaded is not None:
            self._threaded.close()  # first: its dup of the socket would keep the connection open
        self._transport.abort()

    async def close(self) -> None:
        """Close the connection and wait until the socket is released. Idempotent; in-flight requests fail."""
        self._shutdown(KafkaConnectionError(f"{self} was closed by the client"))
        task = self._reauth_task
        if task is not None and task is not asyncio.current_task():
            await asyncio.wait([task])  # cancelled by _shutdown; owned, so awaited
        # The transport was aborted; its connection_lost comes on the next loop iterations.
        await self._frames.wait_lost()

    def __repr__(self) -> str:
        return f"<Connection {connection_name(self.host, self.port, self.node_id)}>"

    def __str__(self) -> str:
        return connection_name(self.host, self.port, self.node_id)


@contextlib.contextmanager
def _told_if_silent(on_silence: Callable[[str], None] | None, saying: Callable[[str, float, float | None], str],
                    address: str, seconds: float | None) -> Iterator[None]:
    """Tell ``on_silence`` once, in ``saying``'s words, if the exchange inside lasts SILENCE_SAID_AFTER s."""
    after = SILENCE_SAID_AFTER
    if on_silence is None or (seconds is not None and seconds <= after):
        yield  # the timeout comes first and says it
        return
    timer = asyncio.get_running_loop().call_later(after, lambda: on_silence(saying(address, after, seconds)))
    try:
        yield
    finally:
        timer.cancel()


async def _token_off_the_clock(budget: asyncio.Timeout, tokens: OAuthTokens) -> None:
    """Fetch the OAUTHBEARER token with open()'s ``budget`` paused: the provider is bounded by its
    own timeout (request_timeout), whose error names the provider, not a broker giving "no answer"."""
    loop = asyncio.get_running_loop()
    deadline, started = budget.when(), loop.time()
    budget.reschedule(None)
    await tokens.token()
    if deadline is not None:
        budget.reschedule(deadline + loop.time() - started)


def connection_name(host: str, port: int, node_id: int | None) -> str:
    return f"broker {address_name(host, port, node_id)}"


def address_name(host: str, port: int, node_id: int | None = None) -> str:
    return f"{host}:{port}" + ("" if node_id is None else f" (node {node_id})")
