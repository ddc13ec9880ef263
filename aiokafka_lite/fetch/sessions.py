"""Incremental fetch sessions (KIP-227): one per broker, so a Fetch names only what changed.

The first request to a broker is a full fetch that asks for a session (id 0, epoch 0). Once the
broker grants one, each request carries the session id and the next epoch and lists only the
partitions that are new or whose fetch offset moved, plus the ones to forget; the broker keeps
the rest and answers only for partitions with news. A session error (70, 71) or a failed request
starts over with a full fetch, closing the old session (Java's FetchSessionHandler does the same).
A broker that grants no session (id 0 in the answer) gets full fetches, as before KIP-227.
A session the consumer is done with (its lane retired, the consumer closing) is closed with one
last request, ``end()``: its id, epoch -1 and no partitions. The broker's session cache is shared by
all its clients (max.incremental.fetch.session.cache.slots), and a consumer's new session can evict
only one created over two minutes before: each left behind holds a slot at least that long, and
clients that find the cache full get full fetches.
A session names its topics one way, by name (Fetch v7-v12) or by id (v13+, KIP-516): when the
version crosses that line (a topic id became known or unknown), or a topic of the session has a
new id (deleted and created again), the session starts over.
Sans-IO: no asyncio, no sockets.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ..structs import TopicPartition

# What a request says about one partition (requests.py's FetchTarget: offset and epochs); a
# partition is sent again whenever it changes.
P = TypeVar("P")

FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
SESSION_ERRORS = frozenset({FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH})
MIN_SESSION_VERSION = 7  # Fetch v7 added session_id, session_epoch and forgotten_topics_data
TOPIC_ID_VERSION = 13  # Fetch v13+ names topics by id
_INITIAL_EPOCH = 0  # with id 0: "open a session"; with an id: "close it and open a new one"
FINAL_EPOCH = -1  # with an id: "close this session" (KIP-227); the broker creates none then either
_SESSIONLESS_EPOCH = FINAL_EPOCH  # with id 0: a full fetch that asks for no session
_MAX_EPOCH = 2**31 - 1


@dataclass(frozen=True, slots=True)
class FetchPlan(Generic[P]):
    """One request's session fields and partitions: ``send`` goes in ``topics``, ``forget`` in
    ``forgotten_topics_data``; ``wanted`` is every partition the answer may carry data for."""

    session_id: int
    epoch: int
    send: dict[TopicPartition, P]
    forget: list[TopicPartition]
    wanted: dict[TopicPartition, P]
    topic_ids: Mapping[str, uuid.UUID] | None = None  # topics named by these ids (Fetch v13+); None: by name

    @property
    def full(self) -> bool:
        return self.epoch in (_INITIAL_EPOCH, _SESSIONLESS_EPOCH)


@dataclass(slots=True)
class FetchSession(Generic[P]):
    """The client side of one broker's fetch session."""

    session_id: int = 0
    epoch: int = _INITIAL_EPOCH
    # What the broker holds for the session: partition -> what was last sent for it.
    partitions: dict[TopicPartition, P] = field(default_factory=dict)
    full_requests: int = 0
    incremental_requests: int = 0
    partitions_sent: int = 0  # over every answered request: what sessions save shows here
    topic_ids: Mapping[str, uuid.UUID] | None = None  # the ids its topics were named by (None: by name)

    def plan(self, wanted: dict[TopicPartition, P], version: int,
             topic_ids: Mapping[str, uuid.UUID] | None = None) -> FetchPlan[P]:
        """The request that fetches ``wanted`` (partition -> fetch offset and epochs) at Fetch
        ``version``; ``topic_ids``: the id of every topic wanted or held (v13+ names them so)."""
        ids = dict(topic_ids or {}) if version >= TOPIC_ID_VERSION else None
        if version < MIN_SESSION_VERSION:
            return FetchPlan(0, _SESSIONLESS_EPOCH, dict(wanted), [], dict(wanted), ids)
        if self.session_id != 0 and self.epoch != _INITIAL_EPOCH and self._renamed(ids):
            self._restart(close=True)
        if self.session_id == 0 or self.epoch == _INITIAL_EPOCH:
            return FetchPlan(self.session_id, _INITIAL_EPOCH, dict(wanted), [], dict(wanted), ids)
        held = self.partitions
        send = {tp: target for tp, target in wanted.items() if held.get(tp) != target}
        forget = [tp for tp in held if tp not in wanted]
        return FetchPlan(self.session_id, self.epoch, send, forget, dict(wanted), ids)

    def _renamed(self, ids: Mapping[str, uuid.UUID] | None) -> bool:
        """The session's partitions were named another way: by name, or by another topic id."""
        if ids is None or self.topic_ids is None:
            return (ids is None) != (self.topic_ids is None)
        return any(self.topic_ids.get(tp.topic) != ids.get(tp.topic) for tp in self.partitions)

    def answered(self, plan: FetchPlan[P], error_code: int, session_id: int) -> bool:
        """Record the broker's answer to ``plan``; False when it was a session error (the answer
        carries no data then, and the next request is a full fetch)."""
        if error_code in SESSION_ERRORS:
            self._restart(close=error_code != FETCH_SESSION_ID_NOT_FOUND)
            return False
        if error_code:
            return True  # not about the session: the caller handles it; the session is unchanged
        self.partitions_sent += len(plan.send)
        if plan.full:
            self.full_requests += 1
            if plan.epoch == _SESSIONLESS_EPOCH or session_id == 0:
                self.session_id, self.epoch = 0, _INITIAL_EPOCH  # none granted: full fetches
                self.partitions.clear()
                return True
            self.session_id, self.epoch, self.topic_ids = session_id, 1, plan.topic_ids
            self.partitions = dict(plan.send)
            return True
        self.incremental_requests += 1
        for tp in plan.forget:
            self.partitions.pop(tp, None)
        self.partitions.update(plan.send)
        self.topic_ids = plan.topic_ids  # those of the topics it added too
        self.epoch = 1 if self.epoch == _MAX_EPOCH else self.epoch + 1
        return True

    def end(self) -> FetchPlan[P] | None:
        """The request that closes this session on the broker (its id, epoch -1, no partitions: the
        broker drops the session and answers at once), or None when the broker holds none of ours.
        Forgotten here at once, answered or not: a later fetch opens a new session."""
        if self.session_id == 0:
            return None
        plan: FetchPlan[P] = FetchPlan(self.session_id, FINAL_EPOCH, {}, [], {})
        self.topic_ids = None
        self._restart(close=False)
        return plan

    def failed(self) -> None:
        """The request got no answer: whether the broker applied it is unknown, so start over."""
        self._restart(close=True)

    def _restart(self, close: bool) -> None:
        # Closing names the old session in the next full fetch (id kept, epoch 0) so the broker
        # frees it at once instead of waiting for it to expire.
        if not close:
            self.session_id = 0
        self.epoch = _INITIAL_EPOCH
        self.partitions.clear()
