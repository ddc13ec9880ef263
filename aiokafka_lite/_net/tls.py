"""The TLS context for SSL / SASL_SSL listeners, and the TCP connection its handshake starts on."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TypeVar

from ..errors import ConfigError
from .connect_failure import TLS_HANDSHAKE_TIMEOUT
from .options import ConnectionOptions

_Protocol = TypeVar("_Protocol", bound=asyncio.BaseProtocol)


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



async def open_transport(factory: Callable[[], _Protocol], host: str, port: int, ssl_context: ssl.SSLContext | None,
                         watching_handshake: Callable[[], AbstractContextManager[None]],
                         ) -> tuple[asyncio.Transport, _Protocol]:
    """loop.create_connection, with the TCP connect made here first on TLS listeners, so that the
    handshake alone runs inside ``watching_handshake()`` (which tells a silent one early)."""
    loop = asyncio.get_running_loop()
    if ssl_context is None:
        return await loop.create_connection(factory, host, port)
    sock = await _connect_tcp(host, port)
    try:
        with watching_handshake():
            return await loop.create_connection(factory, sock=sock, ssl=ssl_context, server_hostname=host,
                                                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT)
    except BaseException:
        sock.close()  # no transport took it (a no-op if one did and closed it)
        raise


async def _connect_tcp(host: str, port: int) -> socket.socket:
    """A connected non-blocking socket to ``host``'s first address that takes it, in getaddrinfo's
    order (as loop.create_connection tries them)."""
    loop = asyncio.get_running_loop()
    errors: list[OSError] = []
    for family, kind, proto, _, address in await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            await loop.sock_connect(sock, address)
        except OSError as exc:
            sock.close()
            errors.append(exc)
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    if len(errors) == 1:
        raise errors[0]
    # As asyncio says it (connect_failure reads "Multiple exceptions" texts for refused connections).
    raise OSError(f"Multiple exceptions: {', '.join(str(exc) for exc in errors)}")
