"""One ShareAcknowledge request of a share group member, and what its answer means for the ledger.

The fetcher's commit(), close(), settling of partitions no longer fetched from a broker, and the
lock renewals (renewals.py) all send their decisions through ``send_acknowledgements``. A broker
below ShareAcknowledge v2 has no RENEW: the other decisions go, each renewing partition reports
UnsupportedVersionError. A session the broker ended puts the decisions back in the ledger for the
new session's first request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ...errors import KafkaError, UnsupportedVersionError, broker_error
from ...protocol.messages import SHARE_ACKNOWLEDGE
from ...structs import TopicPartition
from ..offset_lookup import ConnectionLike
from .ledger import AckType, Batch, ShareAcknowledgements, coalesce, expand
from .requests import RENEW_VERSION, ShareFetchSettings, ack_outcome, answered_partitions
from .session import FINAL_EPOCH, ShareSession

AckResults = dict[TopicPartition, KafkaError | None]


class Acknowledged(NamedTuple):
    results: AckResults  # per partition: None (done) or the error
    lock_ms: int | None  # v2: the acquisition lock duration the broker applies (renewals start it over)


async def send_acknowledgements(conn: ConnectionLike, node: int, session: ShareSession, version: int,
                                taken: dict[TopicPartition, list[Batch]], *, settings: ShareFetchSettings,
                                acks: ShareAcknowledgements, topic_ids: Callable[[Any], dict[str, Any]],
                                timeout: float, epoch: int | None = None) -> Acknowledged:
    """One ShareAcknowledge to ``node`` carrying ``taken`` (``epoch``: -1 closes the session)."""
    results: AckResults = {}
    renewing = {tp for tp, batches in taken.items() if AckType.RENEW in expand(batches).values()}
    if renewing and version < RENEW_VERSION:  # the broker has no RENEW: the rest go, the renewals not
        for tp in renewing:
            kept = {o: t for o, t in expand(taken.pop(tp)).items() if t is not AckType.RENEW}
            if kept:
                taken[tp] = coalesce(kept)
            results[tp] = UnsupportedVersionError(f"broker {node} cannot renew acquisition locks (v{version})")
    if not taken and epoch != FINAL_EPOCH:
        return Acknowledged(results, None)
    ids = topic_ids(taken)
    epoch = session.acknowledge_epoch() if epoch is None else epoch
    try:
        response = await conn.send(SHARE_ACKNOWLEDGE, version,
                                   settings.acknowledge_body(epoch, taken, ids, renew=bool(renewing)), timeout=timeout)
    except BaseException:
        session.reset()
        raise
    lock_ms = response.get("acquisition_lock_timeout_ms") or None
    code = response["error_code"]
    if code:
        session.answered(code)
        if epoch != FINAL_EPOCH and not session.open:  # the session ended: they go with the next one
            acks.restore(taken)
        refused = broker_error(code, f"ShareAcknowledge to broker {node}")
        return Acknowledged({**results, **dict.fromkeys(taken, refused)}, lock_ms)
    answered: AckResults = dict.fromkeys(taken)
    for tp, part in answered_partitions(response, {v: k for k, v in ids.items()}):
        if tp in taken:
            answered[tp] = ack_outcome(part["error_code"], f"acknowledging {tp}")
    # A partition whose renewals could not go reports that, unless the rest failed too.
    return Acknowledged({**results, **{tp: error for tp, error in answered.items()
                                       if error is not None or tp not in results}}, lock_ms)


def has_final_decisions(batches: list[Batch]) -> bool:
    """The batches decide something (accept, release, reject, gap), not only renew."""
    return any(t != AckType.RENEW for batch in batches for t in batch["acknowledge_types"])
