"""Log truncation detection (KIP-320): what to do when the leader's log diverges from what we read.

The consumer remembers the leader epoch of the last record it consumed. Fetch v12+ sends it as
``last_fetched_epoch``; a leader whose log differs answers with ``diverging_epoch``: the largest
epoch it has up to ours and where that epoch ends. For brokers without Fetch v12 the consumer asks
OffsetsForLeaderEpoch after a leader change, which answers the same pair. Either way the answer
goes through ``check_divergence()``:

- the epoch ends at or after our position: nothing we consumed is gone, go on from there;
- it ends before our position: records we consumed were truncated. With a reset strategy the
  position moves back to the divergence point (logged at WARNING with both offsets), so the
  records that replaced them are read; with ``auto_offset_reset='none'`` a ``LogTruncationError``
  (Java's LogTruncationException) says where, and the position stays until the user seeks;
- no epoch at all (the leader holds nothing up to our epoch): the whole log diverges; the
  reset strategy applies, or LogTruncationError without a divergent offset.

Never skips or re-reads silently. Sans-IO.
"""

from __future__ import annotations

import logging

from ..errors import LogTruncationError
from ..structs import TopicPartition
from ..subscription import ResetStrategy, SubscriptionState

log = logging.getLogger("aiokafka_lite.consumer.log_truncation")


def check_divergence(subscription: SubscriptionState, tp: TopicPartition, position: int,
                     epoch: int, end_offset: int) -> bool:
    """Apply the leader's (``epoch``, ``end_offset``) answer for a position of ``tp``; True when
    consumed records turned out truncated (the position moved back, or a reset is pending)."""
    name = f"{tp.topic}-{tp.partition}"
    if epoch >= 0 and end_offset >= position:
        # Our epoch's records up to the position are on the leader; fetch on in the epoch it knows.
        subscription.seek(tp, position, epoch)
        return False
    none = subscription.default_reset is ResetStrategy.NONE
    if epoch < 0 or end_offset < 0:
        if none:
            raise LogTruncationError(
                f"log truncation detected for {name} at offset {position}: the leader holds no "
                f"record of the consumed leader epoch, and auto_offset_reset='none': seek() to go on",
                tp.topic, tp.partition, position, None, None)
        log.warning("log truncation detected for %s at offset %d: the leader holds no record of the "
                    "consumed leader epoch; resetting to the %s offset", name, position,
                    subscription.default_reset.value)
        subscription.request_reset(tp)
        return True
    if none:
        raise LogTruncationError(
            f"log truncation detected for {name}: consumed up to offset {position}, but the log "
            f"diverges from offset {end_offset} (leader epoch {epoch}), and auto_offset_reset='none': "
            f"seek() to go on", tp.topic, tp.partition, position, end_offset, epoch)
    log.warning("log truncation detected for %s: consumed up to offset %d, but the log diverges from "
                "offset %d (leader epoch %d); resetting the position to %d", name, position, end_offset,
                epoch, end_offset)
    subscription.seek(tp, end_offset, epoch)
    return True
