"""`aiokafka-lite groups list [--state S,...]`: every group of the cluster with its type, state, member
count and protocol type: the groups and types kafka-groups.sh --list shows (classic, consumer, share,
streams), with the states of kafka-consumer-groups.sh --list --state and the member counts of its
--describe --state.

Each broker coordinates some groups, so each is asked: ListGroups with an empty types filter (v5+,
KIP-848: every type, each named in the answer) and the states filter (v4+, KIP-518); on older
versions every group is classic, the state comes from DescribeGroups and the filter is applied
here. Member counts come from one describe call per group type and coordinator: DescribeGroups
(classic), ConsumerGroupDescribe (consumer), ShareGroupDescribe (share, KIP-932). Streams groups
(KIP-1071) are listed without a member count: StreamsGroupDescribe is not implemented here.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import asdict, dataclass
from typing import Any, TextIO

from .._net.cluster import Cluster
from ..errors import BrokerError, UnsupportedVersionError
from ..protocol.messages import CONSUMER_GROUP_DESCRIBE, DESCRIBE_GROUPS, LIST_GROUPS, SHARE_GROUP_DESCRIBE
from .group_admin import admin_cluster, bounded
from .groups import TIMEOUT_SECONDS
from .run import EXIT_OK, run_step_command

# The states of every group type as the broker spells them (Kafka's GroupState; NotReady: streams).
STATES = ("Stable", "Empty", "PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling",
          "NotReady", "Dead")
NOT_CLASSIC = frozenset({"consumer", "share", "streams"})


@dataclass
class GroupListing:
    group_id: str
    group_type: str  # "classic", "consumer" (KIP-848), "share" (KIP-932) or "streams" (KIP-1071)
    state: str
    members: int | None  # None: not known (a streams group, or one gone between listing and describing it)
    coordinator: int
    protocol_type: str  # "consumer", "share", "streams", "connect", ...; "": a group that only committed offsets


def parse_states(text: str) -> set[str]:
    """``Stable,empty`` as the broker's spellings; ValueError naming the valid ones otherwise."""
    by_lower = {s.lower(): s for s in STATES}
    states = set()
    for item in text.split(","):
        state = by_lower.get(item.strip().lower())
        if state is None:
            raise ValueError(f"--state {item.strip()!r} is not a group state; valid: {', '.join(STATES)}")
        states.add(state)
    return states


async def _list_on(cluster: Cluster, node_id: int, states: set[str]) -> list[dict[str, Any]]:
    body = {"states_filter": sorted(states), "types_filter": []}  # empty: every type
    response = await cluster.send(node_id, LIST_GROUPS, body)
    if response["error_code"]:
        raise BrokerError(response["error_code"], f"ListGroups on node {node_id}")
    groups: list[dict[str, Any]] = response["groups"]
    return groups


async def _consumer_groups(cluster: Cluster, node_id: int, ids: list[str]) -> dict[str, tuple[str, int]]:
    if not ids:
        return {}
    try:
        response = await cluster.send(node_id, CONSUMER_GROUP_DESCRIBE,
                                      {"group_ids": ids, "include_authorized_operations": False})
    except UnsupportedVersionError:
        return {}
    return {g["group_id"]: (g["group_state"], len(g["members"])) for g in response["groups"] if not g["error_code"]}


async def _share_groups(cluster: Cluster, node_id: int, ids: list[str]) -> dict[str, tuple[str, int]]:
    if not ids:
        return {}
    try:
        response = await cluster.send(node_id, SHARE_GROUP_DESCRIBE,
                                      {"group_ids": ids, "include_authorized_operations": False})
    except UnsupportedVersionError:
        return {}
    return {g["group_id"]: (g["group_state"], len(g["members"])) for g in response["groups"] if not g["error_code"]}


async def _classic_groups(cluster: Cluster, node_id: int, ids: list[str]) -> dict[str, tuple[str, int]]:
    if not ids:
        return {}
    response = await cluster.send(node_id, DESCRIBE_GROUPS, {"groups": ids, "include_authorized_operations": False})
    return {g["group_id"]: (g["group_state"], len(g["members"])) for g in response["groups"]
            if not g["error_code"] and g["group_state"] != "Dead"}


async def _listings_on(cluster: Cluster, node_id: int, states: set[str]) -> list[GroupListing]:
    listed = await _list_on(cluster, node_id, states)
    # A broker without ListGroups v5 has only classic groups.
    types = {g["group_id"]: (g.get("group_type") or "classic").lower() for g in listed}
    described = await _consumer_groups(cluster, node_id, [g for g, t in types.items() if t == "consumer"])
    described |= await _share_groups(cluster, node_id, [g for g, t in types.items() if t == "share"])
    described |= await _classic_groups(cluster, node_id, [g for g, t in types.items() if t not in NOT_CLASSIC])
    listings = []
    for g in listed:
        listed_state = g.get("group_state") or ""
        state, members = described.get(g["group_id"], (listed_state or "Dead", None))
        # ListGroups' own state wins (it is what --state filtered on), unless it is none Kafka
        # names: Tansu 0.6 lists every group as "Unknown" though DescribeGroups says Empty.
        state = listed_state if listed_state in STATES else state
        if not states or state in states:
            listings.append(GroupListing(g["group_id"], types[g["group_id"]], state, members, node_id,
                                         g["protocol_type"]))
    return listings


async def list_groups(bootstrap: str, states: set[str] | None = None,
                      timeout: float = TIMEOUT_SECONDS) -> list[GroupListing]:
    """Every group of the cluster (in ``states`` when given), sorted by id."""
    async with admin_cluster(bootstrap, timeout) as cluster, bounded("listing the groups", timeout):
        nodes = sorted(cluster.metadata.brokers)
        found = await asyncio.gather(*(_listings_on(cluster, node, states or set()) for node in nodes))
    return sorted((g for listings in found for g in listings), key=lambda g: g.group_id)


def render_text(groups: list[GroupListing], out: TextIO) -> None:
    out.write("GROUP  TYPE  STATE  MEMBERS  PROTOCOL\n")
    for g in groups:
        members = "-" if g.members is None else g.members
        out.write(f"{g.group_id}  {g.group_type}  {g.state}  {members}  {g.protocol_type or '-'}\n")


def render_json(groups: list[GroupListing], out: TextIO) -> None:
    out.write(json.dumps([asdict(g) for g in groups], indent=2) + "\n")


def run_list(bootstrap: str, *, states: set[str], output_format: str) -> int:
    async def work() -> int:
        groups = await list_groups(bootstrap, states)
        (render_json if output_format == "json" else render_text)(groups, sys.stdout)
        return EXIT_OK

    return run_step_command("listing the groups", work)
