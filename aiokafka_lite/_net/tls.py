"""The TLS context for SSL / SASL_SSL listeners, and the TCP connection its handshake starts on."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from contextlib import AbstractContextManager

from ..errors import ConfigError
from .connect_failure import TLS_HANDSHAKE_TIMEOUT
from .frames import FrameProtocol
from .options import ConnectionOptions


def build_ssl_context(options: ConnectionOptions) -> ssl.SSLContext | None:
    """None for plaintext listeners; the caller's own context if given; else a verifying one.

    The built context always requires a valid certificate chain (CERT_REQUIRED) and, unless
    ``ssl_check_hostname`` is False, a certificate naming the host we dialled.
    """
    if not options.uses_tls:
        return None
    if options.ssl_context is not None:
        return options.ssl_context
    context = _default_context(options.ssl_cafile)
    # check_hostname must be switched off before verify_mode could be lowered; we never lower it.
    context.check_hostname = options.ssl_check_hostname
    context.verify_mode = ssl.CERT_REQUIRED
    if options.ssl_certfile is not None:
        _load_client_certificate(context, options)
    elif options.ssl_keyfile is not None:
        raise ConfigError("ssl_keyfile is set but ssl_certfile is not: a client key needs its certificate")
    return context


def _default_context(cafile: str | None) -> ssl.SSLContext:
    try:
        # cafile=None loads the system's trusted roots.
        return ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"ssl_cafile={cafile!r}: cannot load CA certificates: {_reason(exc)}") from exc


def _load_client_certificate(context: ssl.SSLContext, options: ConnectionOptions) -> None:
    try:
        context.load_cert_chain(options.ssl_certfile or "", options.ssl_keyfile, options.ssl_password)
    except (OSError, ssl.SSLError) as exc:
        # The password is never part of the message, only which files failed and why.
        raise ConfigError(f"ssl_certfile={options.ssl_certfile!r}, ssl_keyfile={options.ssl_keyfile!r}: "
                          f"cannot load the client certificate: {_reason(exc)}") from exc


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and getattr(exc, "reason", None):
        return str(exc.reason)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


async def open_transport(factory: Callable[[], FrameProtocol], host: str, port: int, ssl_context: ssl.SSLContext | None,
                         watching_handshake: Callable[[], AbstractContextManager[None]],
                         ) -> tuple[asyncio.Transport, FrameProtocol]:
    """loop.create_connection; on TLS listeners the handshake is a second step (loop.start_tls), so
    that it alone runs inside ``watching_handshake()`` (which tells a silent one early)."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.create_connection(factory, host, port)
    if ssl_context is None:
        return transport, protocol
    try:
        with watching_handshake():
            tls_transport = await loop.start_tls(transport, protocol, ssl_context, server_hostname=host,
                                                 ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT)
    except BaseException:
        transport.abort()  # start_tls closes it on failure; a cancellation may come before that
        raise
    if tls_transport is None:  # typeshed allows it; asyncio and uvloop return one or raise
        transport.abort()
        raise ConnectionResetError("the TLS handshake ended without a transport")
    # start_tls does not call connection_made again: the protocol must write through the TLS one.
    protocol.upgraded_to(tls_transport)
    return tls_transport, protocol
