"""KIP-266 in every state of the consumer (issue #11, item 1): every awaitable public method x
every state -> returns, or raises KafkaTimeoutError, within its own timeout + 0.2 s (poll():
returns empty), or raises a clear typed error at once where the state makes the call meaningless.
One deadline per call, connecting included.

States: not started (a live broker), start failed (an earlier start() timed out), broker silent
(accepts connections, never answers), coordinator unknown (FindCoordinator keeps failing, on
librdkafka's mock), rebalancing (another member joined; this one has not rejoined yet, on Apache
Kafka), closing (close() is revoking through a slow listener), closed.

Every state under both group protocols (the ``group_protocol`` fixture). "rebalancing" under the
consumer protocol (KIP-848) is its nearest equivalent: there is no rejoin, but the heartbeat brought
a target assignment that takes a partition away, and the member is RECONCILING until a poll()
revokes it (reconciliation runs in poll(), as in Java's AsyncKafkaConsumer). The silent and mock
brokers need no KIP-848 support: the consumer uses assign() there and never heartbeats.

Set DEADLINE_REPORT=<file> to append one JSON line per case (state, method, outcome, overrun).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from aiokafka_lite import Consumer, ConsumerRebalanceListener, ConsumerRecords, TopicPartition
from aiokafka_lite.errors import ConsumerClosedError, KafkaError, KafkaTimeoutError
from aiokafka_lite.testing.helpers import create_topic
from aiokafka_lite.testing.mock_cluster import ApiKey

from ..tcp_proxy import silent_server
from ._consumers import Poller, poll_until
from ._protocols import GroupProtocol

pytestmark = pytest.mark.asyncio

TIMEOUT = 1.0
SLACK = 0.2
AT_ONCE = 0.2
COORDINATOR_NOT_AVAILABLE = 15

METHODS: dict[str, Callable[[Consumer, TopicPartition], Awaitable[Any]]] = {
    "start": lambda c, tp: c.start(timeout=TIMEOUT),
    "poll": lambda c, tp: c.poll(timeout=TIMEOUT),
    "commit": lambda c, tp: c.commit({tp: 1}, timeout=TIMEOUT),
    "committed": lambda c, tp: c.committed([tp], timeout=TIMEOUT),
    "position": lambda c, tp: c.position(tp, timeout=TIMEOUT),
    "seek_to_beginning": lambda c, tp: c.seek_to_beginning(tp, timeout=TIMEOUT),
    "seek_to_end": lambda c, tp: c.seek_to_end(tp, timeout=TIMEOUT),
    "beginning_offsets": lambda c, tp: c.beginning_offsets([tp], timeout=TIMEOUT),
    "end_offsets": lambda c, tp: c.end_offsets([tp], timeout=TIMEOUT),
    "offsets_for_times": lambda c, tp: c.offsets_for_times({tp: 0}, timeout=TIMEOUT),
    "partitions_for": lambda c, tp: c.partitions_for(tp.topic, timeout=TIMEOUT),
    "list_topics": lambda c, tp: c.list_topics(timeout=TIMEOUT),
    "close": lambda c, tp: c.close(timeout=TIMEOUT),
}
STATES = ["not_started", "start_failed", "broker_silent", "coordinator_unknown", "rebalancing", "closing",
          "closed"]


def base_settings(bootstrap: str, group: str, protocol: GroupProtocol) -> dict[str, Any]:
    return protocol.settings(dict(
        bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
        session_timeout_ms=6000, heartbeat_interval_ms=300, request_timeout_ms=5000, retry_backoff_ms=50,
        reconnect_backoff_max_ms=300))


class SlowRevoke(ConsumerRebalanceListener):
    async def on_partitions_revoked(self, revoked):
        await asyncio.sleep(20)


@contextlib.asynccontextmanager
async def consumer_in(state: str, request: pytest.FixtureRequest, topic: str, group: str,
                      protocol: GroupProtocol) -> AsyncIterator[tuple[Consumer, TopicPartition]]:
    tp = TopicPartition(topic, 0)
    async with contextlib.AsyncExitStack() as stack:
        consumer = await _put_in(state, request, tp, group, protocol, stack)
        try:
            yield consumer, tp
        finally:
            await consumer.close(timeout=1)


async def _put_in(state: str, request: pytest.FixtureRequest, tp: TopicPartition, group: str,
                  protocol: GroupProtocol, stack: contextlib.AsyncExitStack) -> Consumer:
    """A consumer in `state`; what keeps it there is left on `stack`."""
    topic = tp.topic
    if state in ("start_failed", "broker_silent"):
        consumer = Consumer(**base_settings(await stack.enter_async_context(silent_server()), group, protocol))
        consumer.assign([tp])
        if state == "start_failed":
            with pytest.raises(KafkaTimeoutError):
                await consumer.start(timeout=0.3)
        return consumer
    if state == "coordinator_unknown":
        mock = request.getfixturevalue("mock_cluster")
        mock.create_topic(topic, partitions=1)
        mock.push_request_errors(ApiKey.FIND_COORDINATOR, [COORDINATOR_NOT_AVAILABLE] * 1000)
        consumer = Consumer(**base_settings(mock.bootstrap_servers, group, protocol))
        consumer.assign([tp])
        await consumer.start(timeout=10)
        return consumer
    broker = request.getfixturevalue("apache_kafka_broker")
    # KIP-848 "rebalancing" needs a partition to take away from this member (see the docstring).
    every = {TopicPartition(topic, p) for p in range(1 if protocol.is_classic or state != "rebalancing" else 2)}
    create_topic(broker, topic, partitions=len(every))
    consumer = Consumer(**base_settings(broker.bootstrap_servers, group, protocol))
    if state == "not_started":
        consumer.assign([tp])
        return consumer
    consumer.subscribe([topic], listener=SlowRevoke() if state == "closing" else None)
    await poll_until(consumer, lambda _: consumer.assignment() == every, timeout=30)
    if state == "closed":
        await consumer.close(timeout=5)
        return consumer
    if state == "closing":
        closing = asyncio.create_task(consumer.close(timeout=30))
        stack.push_async_callback(_cancelled, closing)
        await asyncio.sleep(0.3)  # close() is now in the slow revocation
        assert not closing.done()
        return consumer
    assert state == "rebalancing"
    other = await stack.enter_async_context(
        Consumer(topic, **base_settings(broker.bootstrap_servers, group, protocol)))
    await stack.enter_async_context(Poller(other))
    if protocol.is_classic:
        # The other member's JoinGroup starts a rebalance; our next heartbeats (every 0.3 s) learn
        # of it, and the group waits for this member to rejoin.
        await asyncio.sleep(1.0)
        assert consumer.metrics()["group_state"] == "STABLE"
    else:
        # The other member's heartbeat bumps the group epoch; our next heartbeat (every 0.5 s,
        # the broker's interval) brings a target without one partition, which waits for a poll().
        await _wait_for_state(consumer, "RECONCILING", timeout=10)
        assert consumer.assignment() == every
    assert not other.assignment()
    return consumer


async def _wait_for_state(consumer: Consumer, state: str, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while consumer.metrics()["group_state"] != state:
        assert loop.time() < deadline, f"group_state {consumer.metrics()['group_state']}, not {state}"
        await asyncio.sleep(0.05)


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _report(state: str, method: str, outcome: str, elapsed: float) -> None:
    path = os.environ.get("DEADLINE_REPORT")
    if path:
        with open(path, "a") as out:
            out.write(json.dumps({"state": state, "method": method, "outcome": outcome,
                                  "elapsed": round(elapsed, 3), "overrun": round(elapsed - TIMEOUT, 3)}) + "\n")


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("state", STATES)
async def test_call_is_bounded_by_its_own_timeout(request, apache_kafka_broker, unique_topic, unique_group,
                                                   group_protocol, state, method):
    # apache_kafka_broker (session-wide) is named so that group_protocol runs the consumer case;
    # consumer_in() picks each state's broker.
    async with consumer_in(state, request, unique_topic, unique_group, group_protocol) as (consumer, tp):
        loop = asyncio.get_running_loop()
        started = loop.time()
        outcome = "returned"
        error: BaseException | None = None
        try:
            result = await asyncio.wait_for(METHODS[method](consumer, tp), TIMEOUT + 10)
        except KafkaError as exc:
            error = exc
            outcome = type(exc).__name__
        elapsed = loop.time() - started
        _report(state, method, outcome, elapsed)
        assert elapsed <= TIMEOUT + SLACK, f"{method} in state {state}: {outcome} after {elapsed:.3f} s"
        if method == "poll" and state not in ("closing", "closed"):
            assert error is None, f"poll() raised {error!r}"
            assert isinstance(result, ConsumerRecords)
        if state in ("closing", "closed") and method != "close":
            assert isinstance(error, ConsumerClosedError), f"{method}: {outcome}"
            assert elapsed <= AT_ONCE
        if isinstance(error, KafkaTimeoutError):
            assert elapsed >= TIMEOUT - 0.05  # a timeout is the caller's, not an earlier one's
        elif error is not None:
            assert elapsed <= AT_ONCE, f"{method} in state {state}: {outcome} only after {elapsed:.3f} s"
