"""`consume` against a server that accepts the connection and never answers ApiVersions (an HTTP
server, a port of something else), or never answers the TLS handshake, says so on stderr within a few
seconds, not after the request's (or the handshake's) own timeout of silence (docs/cli.md "When the
cluster cannot be reached"); SIGINT then ends it as usual."""

from __future__ import annotations

import select
import signal
import socket
import time

from .test_cli_signals import signal_and_wait, start

SAID_WITHIN = 5.0


def first_line_said_to_a_silent_server(notice: bytes, *options: str) -> tuple[str, str]:
    """`consume` against a server that listens and never accepts (the kernel takes the connection,
    nothing answers): its first stderr line once ``notice`` was said, and the address; then SIGINT
    ends it with 130, no traceback and nothing on stdout."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        address = f"127.0.0.1:{server.getsockname()[1]}"
        began = time.monotonic()
        proc = start("consume", "orders", "-b", address, *options)
        got = b""
        while notice not in got and time.monotonic() - began < SAID_WITHIN:
            ready, _, _ = select.select([proc.stderr], [], [], max(SAID_WITHIN - (time.monotonic() - began), 0))
            chunk = proc.stderr.read(65536) if ready and proc.stderr else b""
            if not chunk:
                break
            got += chunk
        took = time.monotonic() - began
        code, out, err, _ = signal_and_wait(proc, signal.SIGINT)
    assert notice in got, f"not said within {SAID_WITHIN} s (after {took:.1f} s): {got!r}; then {err!r}"
    assert code == 130, got.decode() + err
    assert "Traceback" not in got.decode() + err
    assert out == ""
    return got.decode().splitlines()[0], address


def test_consume_says_at_once_that_the_server_does_not_answer_api_versions() -> None:
    line, address = first_line_said_to_a_silent_server(b"accepted the connection but has not answered ApiVersions for")
    assert line.startswith(f"aiokafka-lite: cannot reach the cluster yet: {address} accepted the connection but "
                           "has not answered ApiVersions for "), line
    assert "request_timeout_ms" in line, line


def test_consume_says_at_once_that_the_server_does_not_answer_the_tls_handshake() -> None:
    line, address = first_line_said_to_a_silent_server(
        b"accepted the connection but has not answered the TLS handshake for", "-X", "security.protocol=SSL")
    assert line == (f"aiokafka-lite: cannot reach the cluster yet: {address} accepted the connection but has not "
                    "answered the TLS handshake for 2 s (not a TLS listener?); waiting up to 10 s for it (the TLS "
                    "handshake's timeout); still trying for 60 s (default_api_timeout_ms)"), line
