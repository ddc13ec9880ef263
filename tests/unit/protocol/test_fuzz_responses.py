"""Bad input: every response decoder, at every version, fed damaged real-looking responses.

Samples are drawn from each API's own schema (so a new field is fuzzed without touching this
file), encoded with ``encode_response``, then damaged: bytes flipped, inserted, deleted, the frame
truncated, or a length/count field replaced by 2**31-1 (an attacker's "2 GB follows"). The only
exception allowed out is ``ProtocolDecodeError``; every decode is fast, and decoding allocates
little (tracemalloc peak), so a hostile length never makes us allocate what it announces.

Each test counts the cases it ran in ``CASES``; ``test_zz_report_case_count`` prints the total.
"""

from __future__ import annotations

import collections
import contextlib
import time
import tracemalloc
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiokafka_lite.errors import ProtocolDecodeError
from aiokafka_lite.protocol import APIS_BY_KEY, Api, decode_response, encode_response
from aiokafka_lite.protocol.api import peek_correlation_id
from aiokafka_lite.protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from aiokafka_lite.protocol.schema import Array, Field, FieldType, Struct
from aiokafka_lite.structs import TopicPartition

CASES: collections.Counter[str] = collections.Counter()
RAN: set[str] = set()  # this module's tests that ran in this process (xdist may share them out)


@pytest.fixture(autouse=True)
def _note_the_run(request: pytest.FixtureRequest) -> None:
    RAN.add(request.node.nodeid)

ALL_VERSIONS = [
    (api, v)
    for api in sorted(APIS_BY_KEY.values(), key=lambda a: a.key)
    for v in range(api.min_version, api.max_version + 1)
]
VERSION_IDS = [f"{api.name}-v{v}" for api, v in ALL_VERSIONS]

# A decode's own CPU time (this thread's), not the wall clock: a decode that loops on a bogus count
# takes seconds of CPU, a real one about a millisecond (under tracemalloc), and a loaded machine
# (CI's two cores beside brokers) can deschedule the test for longer than either.
SLOW_DECODE_SECONDS = 0.5
PEAK_BYTES = 4 * 1024 * 1024

# ---------------------------------------------------------------- bodies drawn from the schema

INT_BOUNDS = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1),
}


def body_strategy(struct: Struct, version: int) -> st.SearchStrategy[dict[str, Any]]:
    fields = {f.name: field_strategy(f, version) for f in struct.fields if f.present_in(version)}
    return st.fixed_dictionaries(fields)


def field_strategy(f: Field, version: int) -> st.SearchStrategy[Any]:
    value = type_strategy(f.type, version)
    if f.nullable_in(version) and not isinstance(f.type, Struct):
        return st.none() | value
    return value


def type_strategy(t: FieldType, version: int) -> st.SearchStrategy[Any]:
    if isinstance(t, Array):
        return st.lists(type_strategy(t.item, version), max_size=2)
    if isinstance(t, Struct):
        return body_strategy(t, version)
    if t in INT_BOUNDS:
        lo, hi = INT_BOUNDS[t]
        return st.integers(lo, hi)
    simple: dict[str, st.SearchStrategy[Any]] = {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "string": st.text(max_size=8),
        "bytes": st.binary(max_size=8),
        "records": st.binary(max_size=16),
        "uuid": st.uuids(),
    }
    return simple[t]


def sample_body(struct: Struct, version: int) -> dict[str, Any]:
    """A deterministic body with one element in every array and non-empty strings/bytes, so
    every length and count field of the schema appears in the encoded frame."""
    out: dict[str, Any] = {}
    for f in struct.fields:
        if f.present_in(version):
            out[f.name] = _sample(f.type, version, f.name)
    return out


def _sample(t: FieldType, version: int, name: str) -> Any:
    if isinstance(t, Array):
        return [_sample(t.item, version, name)]
    if isinstance(t, Struct):
        return sample_body(t, version)
    samples: dict[str, Any] = {"bool": True, "float64": 0.5, "string": name, "bytes": b"ab",
                               "records": b"abcd", "uuid": uuid.uuid5(uuid.NAMESPACE_DNS, name)}
    return samples.get(t, 1)


def frame_of(api: Api, version: int, body: dict[str, Any]) -> bytes:
    """The response frame as the connection hands it to the decoder (size prefix stripped)."""
    return encode_response(api, version, 42, body)[4:]


# ---------------------------------------------------------------- the oracle

def decode_only_typed_errors(api: Api, version: int, frame: bytes) -> None:
    """Decode; anything but success or ProtocolDecodeError fails the test (pytest shows it)."""
    began, began_cpu = time.perf_counter(), time.thread_time()
    with contextlib.suppress(ProtocolDecodeError):
        decode_response(api, version, frame)
    cpu = time.thread_time() - began_cpu
    assert cpu < SLOW_DECODE_SECONDS, (f"{api.name} v{version}: {cpu:.3f} s of CPU "
                                       f"({time.perf_counter() - began:.3f} s) for {len(frame)} bytes")


# ---------------------------------------------------------------- mutations

BIG_INT32 = (2**31 - 1).to_bytes(4, "big")
BIG_INT16 = (2**15 - 1).to_bytes(2, "big")
BIG_UVARINT = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x07])  # 2**31 - 1


def big_length_mutations(frame: bytes) -> list[bytes]:
    """At every offset: an int32, an int16 and a varint replaced by their largest lengths.

    Exhaustive over offsets, so every length and count field of the frame is hit at least once.
    """
    out = []
    for i in range(len(frame)):
        out.append(frame[:i] + BIG_INT32 + frame[i + 4:])
        out.append(frame[:i] + BIG_INT16 + frame[i + 2:])
        out.append(frame[:i] + BIG_UVARINT + frame[i + 1:])
    return out


@st.composite
def mutated(draw: st.DrawFn, frame: bytes) -> bytes:
    raw = bytearray(frame)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "big"]))
        at = draw(st.integers(0, max(len(raw) - 1, 0)))
        if kind == "flip" and raw:
            raw[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and raw:
            raw[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            raw[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del raw[at:at + draw(st.integers(1, 8))]
        else:
            raw[at:at + 4] = draw(st.sampled_from([BIG_INT32, BIG_INT16, BIG_UVARINT, b"\xff\xff\xff\xff"]))
    if draw(st.booleans()):
        raw = raw[: draw(st.integers(0, len(raw)))]
    return bytes(raw)


# ---------------------------------------------------------------- tests

@pytest.mark.parametrize(("api", "version"), ALL_VERSIONS, ids=VERSION_IDS)
def test_truncations_and_huge_lengths_raise_only_protocol_errors(api: Api, version: int) -> None:
    frame = frame_of(api, version, sample_body(api.response, version))
    decode_response(api, version, frame)  # the undamaged sample decodes
    cases = [frame[:n] for n in range(len(frame))] + big_length_mutations(frame)
    tracemalloc.start()
    try:
        for case in cases:
            decode_only_typed_errors(api, version, case)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    CASES["truncations and 2**31-1 lengths"] += len(cases)
    assert peak < PEAK_BYTES, f"{api.name} v{version}: decoding damaged frames peaked at {peak} bytes"


APIS = sorted(APIS_BY_KEY.values(), key=lambda a: a.key)


@pytest.mark.parametrize("api", APIS, ids=[a.name for a in APIS])
def test_truncated_frames_fail_rather_than_decode(api: Api) -> None:
    """A frame cut short must not decode as a shorter valid message (only the tail may be
    tolerated: trailing bytes are allowed, missing ones are not)."""
    for version in range(api.min_version, api.max_version + 1):
        frame = frame_of(api, version, sample_body(api.response, version))
        for n in range(len(frame)):
            with pytest.raises(ProtocolDecodeError):
                decode_response(api, version, frame[:n])
            CASES["truncations must fail"] += 1


@pytest.mark.parametrize(("api", "version"), ALL_VERSIONS, ids=VERSION_IDS)
@given(data=st.data())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_frames_raise_only_protocol_errors(api: Api, version: int, data: st.DataObject) -> None:
    body = data.draw(body_strategy(api.response, version), label="body")
    frame = frame_of(api, version, body)
    assert decode_response(api, version, frame) is not None
    damaged = data.draw(mutated(frame), label="damaged")
    decode_only_typed_errors(api, version, damaged)
    CASES["hypothesis mutations"] += 1


@pytest.mark.parametrize(("api", "version"), ALL_VERSIONS, ids=VERSION_IDS)
@given(raw=st.binary(max_size=200))
@settings(max_examples=15, deadline=None)
def test_random_bytes_raise_only_protocol_errors(api: Api, version: int, raw: bytes) -> None:
    decode_only_typed_errors(api, version, raw)
    CASES["random bytes"] += 1


def test_peek_correlation_id_rejects_short_frames() -> None:
    for n in range(4):
        with pytest.raises(ProtocolDecodeError):
            peek_correlation_id(b"\x00" * n)
        CASES["correlation id"] += 1
    assert peek_correlation_id(b"\xff\xff\xff\xfe") == -2


# ---------------------------------------------------------------- the embedded consumer protocol

topic_names = st.text(min_size=1, max_size=6)
partitions = st.lists(st.builds(TopicPartition, topic_names, st.integers(0, 2**31 - 1)), max_size=3)
subscriptions = st.builds(ConsumerProtocolSubscription, st.lists(topic_names, max_size=3),
                          st.none() | st.binary(max_size=6), partitions, st.integers(-1, 2**31 - 1),
                          st.none() | st.text(max_size=4))
assignments = st.builds(ConsumerProtocolAssignment, partitions, st.none() | st.binary(max_size=6))


@given(subscriptions, st.integers(0, 3), st.data())
@settings(max_examples=300, deadline=None)
def test_damaged_subscriptions_raise_only_protocol_errors(sub: ConsumerProtocolSubscription,
                                                          version: int, data: st.DataObject) -> None:
    damaged = data.draw(mutated(encode_subscription(sub, version)))
    with contextlib.suppress(ProtocolDecodeError):
        decode_subscription(damaged)
    CASES["consumer protocol"] += 1


@given(assignments, st.data())
@settings(max_examples=300, deadline=None)
def test_damaged_assignments_raise_only_protocol_errors(assignment: ConsumerProtocolAssignment,
                                                        data: st.DataObject) -> None:
    damaged = data.draw(mutated(encode_assignment(assignment)))
    with contextlib.suppress(ProtocolDecodeError):
        decode_assignment(damaged)
    CASES["consumer protocol"] += 1


@pytest.mark.parametrize("decoder", [decode_subscription, decode_assignment],
                         ids=["subscription", "assignment"])
def test_consumer_protocol_huge_lengths_do_not_allocate(decoder: Any) -> None:
    sample = (encode_subscription(ConsumerProtocolSubscription(["t"], b"u", [TopicPartition("t", 1)], 3, "r"))
              if decoder is decode_subscription
              else encode_assignment(ConsumerProtocolAssignment([TopicPartition("t", 1)], b"u")))
    cases = big_length_mutations(sample)
    tracemalloc.start()
    try:
        for case in cases:
            with contextlib.suppress(ProtocolDecodeError):
                decoder(case)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    CASES["consumer protocol"] += len(cases)
    assert peak < PEAK_BYTES


def test_zz_report_case_count(capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest) -> None:
    """Runs last in this module (pytest keeps file order): prints how many damaged inputs ran, and
    checks the count when this process ran the whole module (not when -k or xdist's workers split it)."""
    total = sum(CASES.values())
    with capsys.disabled():
        print(f"\nfuzz cases run: {total} " + ", ".join(f"{k}: {v}" for k, v in sorted(CASES.items())))
    module = {item.nodeid for item in request.session.items if item.path == request.node.path}
    if module <= RAN:
        assert total > 1000
