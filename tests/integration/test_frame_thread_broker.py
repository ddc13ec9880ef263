"""ThreadedFrames against a real broker: pipelined requests on a plain socket, the answers received
on the native thread, whole and in order, and decoded from zero-copy views."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from aiokafka_lite._net import frame_thread
from aiokafka_lite.protocol import API_VERSIONS, decode_response, encode_request
from aiokafka_lite.protocol.api import peek_correlation_id
from tests.decoders import require_native

BODY = {"client_software_name": "aiokafka-lite", "client_software_version": "test"}


@pytest.fixture(params=[
    pytest.param("tansu_broker", marks=pytest.mark.broker("tansu")),
    pytest.param("apache_kafka_broker", marks=pytest.mark.broker("kafka")),
])
def broker(request: pytest.FixtureRequest) -> Any:
    require_native()
    return request.getfixturevalue(request.param)


@pytest.mark.asyncio
@pytest.mark.parametrize("zero_copy", [False, True], ids=["bytes", "zero-copy"])
async def test_pipelined_answers_arrive_whole_and_in_order(broker: Any, zero_copy: bool) -> None:
    host, _, port = broker.bootstrap_servers.split(",")[0].rpartition(":")
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    await loop.sock_connect(sock, (host, int(port)))
    answers: list[Any] = []
    errors: list[Exception] = []
    done = asyncio.Event()

    def on_frame(frame: Any) -> None:
        answers.append(frame)
        if len(answers) == 50:
            done.set()

    frames = frame_thread.ThreadedFrames(sock.fileno(), loop, on_frame, errors.append, 1 << 20,
                                         zero_copy=zero_copy)
    try:
        requests = b"".join(encode_request(API_VERSIONS, 3, cid, "frames", BODY) for cid in range(1, 51))
        await loop.sock_sendall(sock, requests)
        async with asyncio.timeout(30):
            await done.wait()
    finally:
        frames.close()
        sock.close()
    assert errors == []
    assert [peek_correlation_id(frame) for frame in answers] == list(range(1, 51))
    assert all(decode_response(API_VERSIONS, 3, frame)["error_code"] == 0 for frame in answers)
