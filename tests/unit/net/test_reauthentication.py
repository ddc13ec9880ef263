"""Re-authentication (KIP-368) against the scripted fake broker of test_connection: a connection signs in
again between requests (the one in flight answered first, a new one held until the exchange is done),
and a session that ends while a request is held closes the connection quietly instead."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from aiokafka_lite import OAuthBearerToken
from aiokafka_lite._net import Connection, ConnectionOptions
from aiokafka_lite.protocol.messages import METADATA, SASL_AUTHENTICATE, SASL_HANDSHAKE

from .test_connection import FakeBroker, Peer, meta_body, metadata_answer


def oauth_options() -> ConnectionOptions:
    async def provider() -> OAuthBearerToken:
        return OAuthBearerToken.with_lifetime("header.payload.", 3600)
    return ConnectionOptions(security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                             sasl_oauth_token_provider=provider, request_timeout=5.0)


def reauthenticating_broker(first_session_ms: int, seen: list[str], hold: float) -> Any:
    """Signs in with a session of ``first_session_ms`` (the next one unlimited); answers Metadata,
    holding the one for topic "slow" ``hold`` seconds; ``seen`` records what arrived, in order."""
    async def script(peer: Peer) -> None:
        await peer.answer_api_versions()
        sessions = iter([first_session_ms])
        while True:
            api, version, cid, body = await peer.read_request()
            if api is SASL_HANDSHAKE:
                seen.append("handshake")
                await peer.respond(api, version, cid, {"error_code": 0, "mechanisms": ["OAUTHBEARER"]})
            elif api is SASL_AUTHENTICATE:
                assert body["auth_bytes"] == b"n,,\x01auth=Bearer header.payload.\x01\x01"
                seen.append("authenticate")
                await peer.respond(api, version, cid, {"error_code": 0, "error_message": None, "auth_bytes": b"",
                                                       "session_lifetime_ms": next(sessions, 0)})
            else:
                name = body["topics"][0]["name"]
                seen.append(name)
                if name == "slow":
                    await asyncio.sleep(hold)
                await peer.respond(api, version, cid, metadata_answer(name))
    return script


@pytest.mark.asyncio
async def test_a_connection_signs_in_again_between_requests(caplog: pytest.LogCaptureFixture) -> None:
    """Session 3 s: re-authentication begins at 1.5 s, while "slow" (sent at 1.0 s) is held until
    2.0 s; "later", sent at 1.7 s, waits until the new session is set up."""
    seen: list[str] = []
    async with FakeBroker(reauthenticating_broker(3000, seen, hold=1.0)) as broker:
        conn = await Connection.open("127.0.0.1", broker.port, oauth_options(), timeout=5.0)
        try:
            await asyncio.sleep(1.0)
            slow = asyncio.create_task(conn.send(METADATA, 12, meta_body("slow")))
            await asyncio.sleep(0.7)
            later = await conn.send(METADATA, 12, meta_body("later"))
            assert (await slow)["cluster_id"] == "slow"
            assert later["cluster_id"] == "later"
            assert conn.reauthentications == 1
            assert not conn.closed
        finally:
            await conn.close()
        assert not broker.errors, broker.errors
    assert seen == ["handshake", "authenticate", "slow", "handshake", "authenticate", "later"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("aiokafka_lite")]


@pytest.mark.asyncio
async def test_a_session_that_ends_while_a_request_is_held_closes_the_connection_quietly(
        caplog: pytest.LogCaptureFixture) -> None:
    """Session 2 s: "slow", sent at 0.5 s, is answered at 2.5 s, after the session's end; the broker
    would close the connection at the next request, so the client closes it instead, no WARNING."""
    seen: list[str] = []
    async with FakeBroker(reauthenticating_broker(2000, seen, hold=2.0)) as broker:
        conn = await Connection.open("127.0.0.1", broker.port, oauth_options(), timeout=5.0)
        try:
            await asyncio.sleep(0.5)
            began = time.monotonic()
            assert (await conn.send(METADATA, 12, meta_body("slow")))["cluster_id"] == "slow"
            assert time.monotonic() - began > 1.5
            await asyncio.sleep(0.1)
            assert conn.closed
            assert "its SASL session ended" in str(conn.closed_by)
        finally:
            await conn.close()
        assert not broker.errors, broker.errors
    assert seen == ["handshake", "authenticate", "slow"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("aiokafka_lite")]
