"""What the brokers' answers do: a Fetch response becomes one ``CompletedFetch`` per partition in
the buffer; an OffsetForLeaderEpoch answer is checked for log truncation (KIP-320); a partition's
error code, met when its turn to be handed out comes, becomes a retry, an offset reset or an
error for poll(); a partition refused because its leader moved, whose answer names the new leader
(KIP-951), moves there at once instead; and ``transient()`` says which request failures the
fetcher retries by itself. No I/O here.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any, NamedTuple

from .._net.metadata import BrokerInfo
from ..errors import (
    ERROR_CODE_BY_NAME,
    BrokerError,
    CorruptRecordError,
    KafkaConnectionError,
    KafkaTimeoutError,
    LogTruncationError,
    OffsetOutOfRangeError,
    ProtocolDecodeError,
    is_retriable,
)
from ..protocol.records.decode import PartitionRecords, fetch_continuation
from ..structs import TopicPartition
from ..subscription import ResetStrategy, SubscriptionState
from .buffer import FetchBuffer
from .completed import CompletedFetch
from .epoch_validation import EpochEnd
from .log_truncation import check_divergence
from .requests import FetchPlanner, FetchTarget

# The fetch path's one logger, whichever module of it speaks.
log = logging.getLogger("aiokafka_lite.consumer.fetcher")

_OFFSET_OUT_OF_RANGE = ERROR_CODE_BY_NAME["OFFSET_OUT_OF_RANGE"]
_CORRUPT_MESSAGE = ERROR_CODE_BY_NAME["CORRUPT_MESSAGE"]
# The answers that may name the partition's new leader (KIP-951, Fetch v16+).
_LEADER_MOVED = frozenset({ERROR_CODE_BY_NAME["NOT_LEADER_OR_FOLLOWER"], ERROR_CODE_BY_NAME["FENCED_LEADER_EPOCH"]})


class Stored(NamedTuple):
    """What one Fetch answer did: ``buffered`` anything (or moved a partition to the leader the
    broker named: fetch again at once), and how many ``record_bytes`` it carried for the partitions
    asked (what tells a busy broker, lane_policy.py)."""

    buffered: bool
    record_bytes: int


class ResponseHandler:
    """Applies answers to ``buffer``, ``planner`` and ``subscription``."""

    def __init__(self, subscription: SubscriptionState, planner: FetchPlanner, buffer: FetchBuffer, *,
                 check_crcs: bool, read_committed: bool) -> None:
        self._subscription = subscription
        self._planner = planner
        self._buffer = buffer
        self._check_crcs = check_crcs
        self._read_committed = read_committed

    def store(self, node_id: int, targets: Mapping[TopicPartition, FetchTarget],
              incarnations: Mapping[TopicPartition, int], response: Mapping[str, Any],
              names: Mapping[uuid.UUID, str]) -> Stored:
        """Buffer each partition's data. ``names``: topic id -> name, for an answer naming topics
        by id."""
        if response.get("error_code"):
            raise BrokerError(response["error_code"], f"Fetch from broker {node_id}")
        stored = False
        record_bytes = 0
        endpoints = {e["node_id"]: BrokerInfo(e["node_id"], e["host"], e["port"], e["rack"])
                     for e in response.get("node_endpoints") or ()}
        for topic in response["responses"]:
            name = topic["topic"] or names.get(topic["topic_id"])
            for part in topic["partitions"]:
                tp = TopicPartition(name or "", part["partition_index"])
                target = targets.get(tp)
                if target is None:
                    continue  # not asked for (a confused broker): ignore
                if part["records"] is not None:
                    record_bytes += len(part["records"])
                if part["error_code"] in _LEADER_MOVED and self._moved(node_id, tp, part, endpoints):
                    stored = True
                    continue
                completed = self._completed_fetch(node_id, tp, target.offset, incarnations[tp], part)
                if completed is not None:
                    self._buffer.store(completed)
                    stored = True
        if stored:
            self._buffer.wake()
        return Stored(stored, record_bytes)

    def _moved(self, node_id: int, tp: TopicPartition, part: Mapping[str, Any],
               endpoints: Mapping[int, BrokerInfo]) -> bool:
        """The answer for ``tp`` names its new leader and our metadata took it: no refresh, no
        backoff (False: the error is handled as without a hint)."""
        leader = part.get("current_leader")
        if leader is None or not self._planner.leader_hint(tp, node_id, leader, endpoints):
            return False
        log.info("fetch for %s-%d (broker %d): %s; broker %d leads it now (epoch %d): fetching from it",
                 tp.topic, tp.partition, node_id, BrokerError(part["error_code"]).name,
                 leader["leader_id"], leader["leader_epoch"])
        return True

    def _completed_fetch(self, node_id: int, tp: TopicPartition, position: int, incarnation: int,
                         part: Mapping[str, Any]) -> CompletedFetch | None:
        code = part["error_code"]
        data = part["records"]
        self._planner.note_preferred_replica(node_id, tp, part["preferred_read_replica"])
        completed = CompletedFetch(
            tp, node_id, incarnation, position, code, part["high_watermark"], part["last_stable_offset"],
            part["log_start_offset"], None, 0 if data is None else len(data))
        diverging = part.get("diverging_epoch")
        if code == 0 and diverging is not None and (diverging["epoch"] >= 0 or diverging["end_offset"] >= 0):
            completed.diverging = diverging["epoch"], diverging["end_offset"]
            return completed  # the broker sends no records with it
        if code == 0 and not data:
            state = completed.current_state(self._subscription.assignment)
            if state is not None:
                completed.apply_marks(state)  # nothing new, but the lag is worth knowing
            return None
        if code == 0:
            aborted = part["aborted_transactions"]
            completed.records = PartitionRecords(
                tp.topic, tp.partition, data, position, check_crcs=self._check_crcs,
                read_committed=self._read_committed,
                aborted_transactions=[(a["producer_id"], a["first_offset"]) for a in aborted or ()])
            end = fetch_continuation(data)
            if end is not None and end[0] > position:
                completed.data_end, completed.data_end_epoch = end
        return completed

    def epoch_answered(self, tp: TopicPartition, target: FetchTarget, incarnation: int, answer: EpochEnd) -> None:
        """Apply the leader's OffsetForLeaderEpoch ``answer`` for the position in ``target``."""
        state = self._subscription.assignment.get(tp)
        if state is None or state.incarnation != incarnation or state.position != target.offset:
            return  # revoked or seeked meanwhile: the new position gets its own check
        if answer.error_code:
            if not is_retriable(answer.error_code):
                self._buffer.add_error(BrokerError(answer.error_code, f"OffsetForLeaderEpoch for {tp}"))
            self._planner.metadata_refresh_needed = True  # e.g. FENCED_LEADER_EPOCH: our metadata is behind
            self._planner.back_off_partition(tp)
            return
        try:
            check_divergence(self._subscription, tp, target.offset, answer.leader_epoch, answer.end_offset)
        except LogTruncationError as exc:
            self._buffer.add_error(exc)  # raised from the next poll; asked again after a backoff
            self._planner.back_off_partition(tp)
            self._buffer.wake()
            return
        if state.leader_epoch is not None:
            self._planner.epochs_checked(tp, (target.current_leader_epoch, state.leader_epoch))


def partition_error(cf: CompletedFetch, subscription: SubscriptionState, planner: FetchPlanner) -> None:
    """Act on the error code of ``cf`` when its turn to be handed out comes; raises what poll()
    must see."""
    tp, code = cf.tp, cf.error_code
    where = f"{tp.topic}-{tp.partition} at offset {cf.position} (broker {cf.node_id})"
    if planner.drop_preferred_replica(tp, cf.node_id):  # a follower could not serve us: back to the leader
        log.info("preferred read replica failed for %s: %s", where, BrokerError(code).name)
        return
    if code == _OFFSET_OUT_OF_RANGE:
        _offset_out_of_range(cf, where, subscription)
    elif code == _CORRUPT_MESSAGE:
        raise CorruptRecordError("the broker reports a corrupt message", tp.topic, tp.partition,
                                 cf.position)
    elif is_retriable(code):
        log.info("fetch for %s: %s; refreshing metadata", where, BrokerError(code).name)
        planner.metadata_refresh_needed = True
        planner.back_off_partition(tp)
    else:
        raise BrokerError(code, f"Fetch for {where}")


def _offset_out_of_range(cf: CompletedFetch, where: str, subscription: SubscriptionState) -> None:
    if subscription.default_reset is ResetStrategy.NONE:
        # A broker answering OFFSET_OUT_OF_RANGE may leave both bounds unknown (-1): not worth saying.
        known = [f"{name} {value}" for name, value in (("log start", cf.log_start_offset),
                                                       ("high watermark", cf.high_watermark)) if value >= 0]
        bounds = f" ({', '.join(known)})" if known else ""
        raise OffsetOutOfRangeError(
            f"fetch offset {cf.position} is out of range for {cf.tp.topic}-{cf.tp.partition}{bounds} "
            f"and auto_offset_reset='none': seek() to a valid offset")
    log.info("fetch offset out of range for %s: resetting to %s", where,
             subscription.default_reset.value)
    subscription.request_reset(cf.tp)


def transient(exc: Exception) -> bool:
    """Network trouble the fetcher retries by itself (as Java's poll does), never shown to poll()."""
    if isinstance(exc, CorruptRecordError):
        return False
    if isinstance(exc, KafkaConnectionError | KafkaTimeoutError | ProtocolDecodeError):
        return True
    return isinstance(exc, BrokerError) and exc.retriable
