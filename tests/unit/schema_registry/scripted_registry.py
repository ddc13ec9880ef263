"""A tiny scripted HTTP/1.1 server on 127.0.0.1 standing in for a schema registry in unit tests.

Each request is recorded (method, path, headers, body) and answered by the test's ``answer``
function: a (status, body) pair, or None for a server that never answers (the connection stays
open until the server is closed). Keep-alive, Content-Length bodies only: what httpx sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

Reply = tuple[int, bytes | str | Any] | None


@dataclass
class SeenRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class ScriptedRegistry:
    def __init__(self, answer: Callable[[SeenRequest], Reply], delay: float = 0.0) -> None:
        self.answer, self.delay = answer, delay
        self.requests: list[SeenRequest] = []
        self._writers: set[asyncio.StreamWriter] = set()
        self._closing = asyncio.Event()
        self._arrived = asyncio.Condition()
        self._server: asyncio.Server | None = None

        self.url = ""  # the Confluent-compatible base, once started

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/apis/ccompat/v7"

    async def close(self) -> None:
        self._closing.set()
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()
        for writer in list(self._writers):
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def wait_for_requests(self, count: int) -> None:
        async with self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= count)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while (request := await _read_request(reader)) is not None:
                async with self._arrived:
                    self.requests.append(request)
                    self._arrived.notify_all()
                reply = self.answer(request)
                if reply is None:
                    await self._closing.wait()
                    return
                if self.delay:
                    await asyncio.sleep(self.delay)
                writer.write(_response(*reply))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()


async def _read_request(reader: asyncio.StreamReader) -> SeenRequest | None:
    line = await reader.readline()
    if not line:
        return None
    method, path, _version = line.decode().split(" ", 2)
    headers = {}
    while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = header.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return SeenRequest(method, path, headers, body)


def _response(status: int, body: bytes | str | Any) -> bytes:
    if isinstance(body, str):
        data = body.encode()
    elif isinstance(body, bytes):
        data = body
    else:
        data = json.dumps(body).encode()
    head = (f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            f"Connection: keep-alive\r\n\r\n")
    return head.encode() + data


@contextlib.asynccontextmanager
async def scripted_registry(answer: Callable[[SeenRequest], Reply], delay: float = 0.0
                            ) -> AsyncIterator[ScriptedRegistry]:
    server = ScriptedRegistry(answer, delay)
    await server.start()
    try:
        yield server
    finally:
        await server.close()


def schema_answer(schema_id: int) -> tuple[int, dict[str, Any]]:
    return 200, {"schema": f'{{"type": "record", "name": "R{schema_id}", "fields": []}}'}
