"""Low-level exceptions become this client's typed errors here, and only here (httpcore-style)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProtocolDecodeError,
)

# Failures worth trying another broker (or the same one again) for.
TRANSIENT = (KafkaConnectionError, KafkaTimeoutError, ProtocolDecodeError)


class MisroutedConnectionError(KafkaConnectionError):
    """The broker at a known broker's address is not that broker of the cluster the client knows
    (KIP-1242): it answered ApiVersions v5 with REBOOTSTRAP_REQUIRED, or Metadata with another
    cluster id (``found``; None when it did not say). The connection is useless; a rebootstrap
    finds where the cluster is now. A connection error, so every caller retries it."""

    def __init__(self, broker: str, expected: str, found: str | None) -> None:
        self.broker = broker  # "broker host:port (node n)"
        self.expected = expected
        self.found = found
        how = "answered ApiVersions with REBOOTSTRAP_REQUIRED (KIP-1242)" if found is None \
            else f"answered Metadata for cluster {found!r}"
        super().__init__(f"{broker} is not of cluster {expected!r}: it {how}")


def translate(exc: BaseException, context: str, timeout: float | None = None) -> KafkaError:
    """The typed error for ``exc``, chained to it; ``context`` says what was being done with which broker.

    A failed certificate verification becomes ``AuthenticationError``: the broker's identity could
    not be proven, and retrying the same connection will not change that. Every other TLS failure is
    a ``KafkaConnectionError`` (a reset during the handshake is worth retrying).
    """
    if isinstance(exc, KafkaError):
        return exc
    error = _typed(exc, context, timeout)
    # Chained even when not raised here (the reader task hands its error to waiting requests): the
    # low-level cause tells what a failure means (see connect_failure).
    error.__cause__ = exc
    return error


def _typed(exc: BaseException, context: str, timeout: float | None) -> KafkaError:
    if isinstance(exc, ssl.SSLCertVerificationError):
        # verify_message is only set on errors raised by a real handshake.
        reason = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or exc
        return AuthenticationError(f"{context}: TLS certificate verification failed: {reason}")
    if isinstance(exc, asyncio.IncompleteReadError):
        where = "mid-frame" if exc.partial else "between frames"
        return KafkaConnectionError(f"{context}: the broker closed the connection ({where})")
    if isinstance(exc, TimeoutError):
        limit = "" if timeout is None else f" within {timeout:.3f}s"
        return KafkaTimeoutError(f"{context}: no answer{limit}")
    if isinstance(exc, ssl.SSLError):
        return KafkaConnectionError(f"{context}: TLS error: {getattr(exc, 'reason', None) or exc}")
    if isinstance(exc, OSError):
        return KafkaConnectionError(f"{context}: {exc.strerror or exc or type(exc).__name__}")
    return KafkaConnectionError(f"{context}: {type(exc).__name__}: {exc}")


_MAPPED = (OSError, EOFError, TimeoutError, asyncio.IncompleteReadError)


@contextmanager
def map_exceptions(context: str, timeout: float | None = None) -> Iterator[None]:
    """Re-raise low-level I/O errors as typed ``KafkaError`` subclasses, chained with ``from``.

    Our own errors pass through untouched (``KafkaTimeoutError`` is itself a ``TimeoutError``), and
    so does ``CancelledError``: it is a ``BaseException`` and never caught here.
    """
    try:
        yield
    except KafkaError:
        raise
    except _MAPPED as exc:
        raise translate(exc, context, timeout) from exc
