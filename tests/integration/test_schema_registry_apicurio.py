"""SchemaRegistryClient against a real registry: Apicurio Registry's Confluent-compatible API
(the ``schema_registry`` fixture), with Confluent's own Python client as a peer that registers
and reads what ours reads and registers."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.schema_registry import (
    RegisteredSchema,
    SchemaNotFoundError,
    SchemaRegistryClient,
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
    SchemaType,
)
from aiokafka_lite.testing._process import BrokerStartError, BrokerUnavailable, processes_in_group
from aiokafka_lite.testing.schema_registry import ApicurioRegistry, confluent_client_config, find_java21

pytestmark = pytest.mark.asyncio

AVRO = {"type": "record", "name": "Order", "namespace": "shop",
        "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None}]}
PROTOBUF = 'syntax = "proto3";\npackage shop;\n\nmessage Order {\n  int64 id = 1;\n  string note = 2;\n}\n'
JSON_SCHEMA = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
               "properties": {"id": {"type": "integer"}}, "required": ["id"]}


def subject(kind: str) -> str:
    return f"orders-{kind}-{uuid.uuid4().hex[:8]}-value"


def same_text(schema_type: str, registered: str, read: str) -> bool:
    """Avro comes back compacted (as Confluent's registry does too); the others verbatim."""
    return json.loads(registered) == json.loads(read) if schema_type == "AVRO" else registered == read


async def test_our_schemas_read_back_by_id_subject_version_and_latest(schema_registry: Any) -> None:
    schemas: dict[SchemaType, str] = {"AVRO": json.dumps(AVRO), "PROTOBUF": PROTOBUF, "JSON": json.dumps(JSON_SCHEMA)}
    async with SchemaRegistryClient(schema_registry.url) as client:
        subjects = {kind: subject(kind.lower()) for kind in schemas}
        ids = {kind: await client.register(subjects[kind], text, kind, timeout=30) for kind, text in schemas.items()}
        assert len(set(ids.values())) == 3
        for kind, text in schemas.items():
            by_id = await client.get_schema(ids[kind], timeout=10)
            assert (by_id.schema_id, by_id.schema_type, by_id.references) == (ids[kind], kind, [])
            assert same_text(kind, text, by_id.schema), by_id.schema
            for version in (1, "latest"):
                found = await client.get_version(subjects[kind], version, timeout=10)
                assert (found.subject, found.version, found.schema_id, found.schema_type) == (
                    subjects[kind], 1, ids[kind], kind)
                assert same_text(kind, text, found.schema)
            assert await client.get_versions(subjects[kind], timeout=10) == [1]
        assert set(subjects.values()) <= set(await client.get_subjects(timeout=10))
        # The same schema again: the same id, no new version (as Confluent's registry does).
        assert await client.register(subjects["AVRO"], schemas["AVRO"], timeout=30) == ids["AVRO"]
        # A second version becomes "latest".
        evolved = {**AVRO, "fields": [*AVRO["fields"], {"name": "qty", "type": "int", "default": 1}]}
        second = await client.register(subjects["AVRO"], json.dumps(evolved), timeout=30)
        assert await client.get_versions(subjects["AVRO"], timeout=10) == [1, 2]
        latest = await client.get_version(subjects["AVRO"], "latest", timeout=10)
        assert (latest.version, latest.schema_id) == (2, second)


def confluent_client(url: str) -> tuple[Any, Any]:
    """Confluent's own (synchronous) SchemaRegistryClient and its Schema class, or a skip naming what
    it lacks (its schema registry needs the confluent-kafka[schemaregistry] extra: authlib, ...)."""
    try:
        with warnings.catch_warnings():  # authlib warns of its own httpx module on import
            warnings.simplefilter("ignore")
            from confluent_kafka.schema_registry import Schema
            from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
    except ImportError as exc:
        pytest.skip(f"confluent_kafka.schema_registry needs the confluent-kafka[schemaregistry] extra: {exc}")
    return ConfluentClient(confluent_client_config(url)), Schema


async def test_confluents_client_and_ours_read_each_others_schemas(schema_registry: Any) -> None:
    peer, Schema = confluent_client(schema_registry.url)
    try:
        peer_subject, peer_text = subject("peer"), json.dumps({**AVRO, "name": "PeerOrder"})
        peer_id = await asyncio.to_thread(peer.register_schema, peer_subject, Schema(peer_text, "AVRO"))
        proto_subject = subject("peer-proto")
        proto_id = await asyncio.to_thread(peer.register_schema, proto_subject, Schema(PROTOBUF.replace(
            "Order", "PeerOrder"), "PROTOBUF"))
        async with SchemaRegistryClient(schema_registry.url) as client:
            ours = await client.get_schema(peer_id, timeout=10)
            assert ours.schema_type == "AVRO"
            assert json.loads(ours.schema) == json.loads(peer_text)
            assert (await client.get_version(peer_subject, "latest", timeout=10)).schema_id == peer_id
            proto = await client.get_version(proto_subject, 1, timeout=10)
            assert (proto.schema_id, proto.schema_type) == (proto_id, "PROTOBUF")
            assert "message PeerOrder" in proto.schema
            our_subject = subject("ours")
            our_id = await client.register(our_subject, json.dumps(JSON_SCHEMA), "JSON", timeout=30)
        theirs = await asyncio.to_thread(peer.get_schema, our_id)
        assert theirs.schema_type == "JSON"
        assert json.loads(theirs.schema_str) == JSON_SCHEMA
        registered = await asyncio.to_thread(peer.get_latest_version, our_subject)
        assert (registered.schema_id, registered.version) == (our_id, 1)
    finally:
        peer.close()


async def test_unknown_id_subject_and_version_are_not_found(schema_registry: Any) -> None:
    async with SchemaRegistryClient(schema_registry.url) as client:
        with pytest.raises(SchemaNotFoundError, match="schema id 987654321: schema not found") as caught:
            await client.get_schema(987654321, timeout=10)
        assert schema_registry.url in str(caught.value)
        assert caught.value.error_code == 40403
        missing = subject("missing")
        with pytest.raises(SchemaNotFoundError, match="subject not found"):
            await client.get_version(missing, "latest", timeout=10)
        with pytest.raises(SchemaNotFoundError, match="subject not found"):
            await client.get_versions(missing, timeout=10)
        present = subject("present")
        await client.register(present, json.dumps(AVRO), timeout=30)
        with pytest.raises(SchemaNotFoundError, match="version not found") as caught:
            await client.get_version(present, 7, timeout=10)
        assert caught.value.error_code == 40402
        with pytest.raises(SchemaRegistryError, match="HTTP 422 error_code 42201"):
            await client.register(present, "{not a schema", timeout=30)


async def test_a_stopped_registry_is_a_clear_error_within_the_timeout() -> None:
    registry = ApicurioRegistry()
    registry.start()
    try:
        url, leader = registry.url, registry.pid
        assert leader is not None
        async with SchemaRegistryClient(url) as client:
            schema_id = await client.register(subject("stopped"), json.dumps(AVRO), timeout=30)
            assert isinstance(await client.get_schema(schema_id, timeout=10), RegisteredSchema)
            await asyncio.to_thread(registry.stop)
            assert processes_in_group(leader) == []
            started = time.monotonic()
            with pytest.raises(SchemaRegistryUnavailableError) as caught:
                await client.get_schema(schema_id + 1000, timeout=2.0)
            elapsed = time.monotonic() - started
            assert (await client.get_schema(schema_id, timeout=2.0)).schema_id == schema_id  # cached
    finally:
        registry.stop()
    assert elapsed < 2.5
    assert url in str(caught.value)
    assert "ConnectError" in str(caught.value)


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        with refused:
            return refused.code, refused.read().decode()


async def test_apicurio_deviations_still_hold(schema_registry: Any) -> None:
    """The deviations aiokafka_lite.testing.schema_registry's docstring lists (update both together)."""
    present = subject("deviations")
    async with SchemaRegistryClient(schema_registry.url) as client:
        await client.register(present, json.dumps(AVRO), timeout=30)
        with pytest.raises(SchemaRegistryError, match="Failed to discover artifact type from content"):
            await client.register(present, "{not a schema", timeout=30)
    status, body = await asyncio.to_thread(http_get, f"{schema_registry.url}/subjects/{present}/versions/0")
    assert (status, json.loads(body)["error_code"]) == (404, 40402)  # Confluent: 422, 42202
    assert await asyncio.to_thread(http_get, f"{schema_registry.url}/schemas/ids/abc") == (404, "")
    status, body = await asyncio.to_thread(http_get, f"{schema_registry.url}/subjects/{present}/versions/-1")
    assert (status, json.loads(body)["version"]) == (200, 1)


def answered(url: str, path: str, wait: float) -> bool:
    """``path`` asked on a fresh connection (HTTP/1.1 GET, keep-alive, raw socket): did the answer's
    first bytes come within ``wait`` seconds?"""
    parsed = urllib.parse.urlsplit(url)
    host, port = parsed.hostname or "", parsed.port or 80
    with socket.create_connection((host, port), timeout=wait) as conn:
        conn.sendall(f"GET {parsed.path}{path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                     f"Accept: application/vnd.schemaregistry.v1+json\r\n\r\n".encode())
        try:
            head = conn.recv(16)
        except TimeoutError:
            return False
    if not head.startswith(b"HTTP/1.1 "):
        raise AssertionError(f"{path}: not an HTTP answer: {head!r}")
    return True


def lost_requests(url: str, rounds: int, wait: float, at_least: int = 1000) -> tuple[int, int]:
    """``rounds`` x (a path of ours, then a path of theirs), eight connections at a time; stops at
    the first of theirs lost once ``at_least`` rounds were asked. Returns (ours lost, theirs lost)."""
    def ours(i: int) -> str:
        return f"/schemas/ids/{i}" if i % 2 else f"/subjects/s{i}/versions"

    def theirs(i: int) -> str:
        return f"/associations/resources/-/t{i}?resourceType=topic&associationType=value"

    lost = {"ours": 0, "theirs": 0}
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for first in range(0, rounds, 400):
            batch = range(first, min(first + 400, rounds))
            asked = [(kind, pool.submit(answered, url, path(i), wait))
                     for i in batch for kind, path in (("ours", ours), ("theirs", theirs))]
            for kind, answer in asked:
                lost[kind] += not answer.result()
            if lost["theirs"] and first + len(batch) >= at_least:
                break
    return lost["ours"], lost["theirs"]


async def test_apicurio_loses_requests_to_associations_only(schema_registry: Any) -> None:
    """A deviation of the docstring's list, and why confluent-kafka's client gets a timeout here:
    Apicurio now and then reads a request to a path it has no route for (``associations/...``,
    what confluent-kafka's serializers ask first, is one) and never answers it: the connection stays
    open, no thread is busy with it (a JVM thread dump shows the pool idle), nothing is logged.
    Measured here (2 cores), 2026-11-30: 1 in 400 to 1 in 700 on fresh keep-alive connections,
    the same with 1 or 8 cores given to the JVM and under CPU load, none of 3,000 with
    ``Connection: close``; the paths our client uses (a schema by id, a subject's versions) lost
    none of 6,000. Its rate depends on the machine: CI's machine lost none of 5,000 once, so when
    none is lost in 20,000 this test is skipped, saying so, rather than passed or failed."""
    ours_lost, theirs_lost = await asyncio.to_thread(lost_requests, schema_registry.url, 20_000, 2.0)
    assert ours_lost == 0
    if not theirs_lost:
        pytest.skip("Apicurio answered all 20,000 requests to associations/...: the loss did not show on this machine")


def registry_processes() -> set[int]:
    """Pids of running Apicurio Registry JVMs (their command line names quarkus-run.jar)."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"quarkus-run.jar" in (entry / "cmdline").read_bytes():
                found.add(int(entry.name))
        except OSError:
            continue
    return found


async def test_a_start_that_times_out_leaves_no_process_behind() -> None:
    try:
        find_java21()
    except BrokerUnavailable as exc:
        pytest.skip(str(exc))
    before = registry_processes()
    registry = ApicurioRegistry(startup_timeout=0.5)
    with pytest.raises(BrokerStartError, match="not ready after"):
        await asyncio.to_thread(registry.start)
    assert registry.pid is None
    assert registry_processes() <= before
