"""Consumers bounced on a three-broker cluster (#14): consumer_test.py's test_consumer_bounce in
apache/kafka. Three members consume a replicated topic with manual commits while a steady producer
writes to it; ROUNDS[mode] times the members are bounced, all at once or one at a time (waiting for the
group to be stable again and every partition to be consumed between bounces):

- clean: SIGTERM; the member commits the batch in hand and closes (LeaveGroup). Nothing may be
  delivered twice.
- hard: SIGKILL; no commit, no LeaveGroup; the kernel closes the sockets. The coordinator keeps the
  dead member until session_timeout_ms lapses. Records may come again, but only those the dead
  member had read and not yet committed.

Each member is a process (scripts/_chaos_member.py, the chaos soak's member) because only a process
can die the way a crashed service does: an in-process consumer dropped without close() would keep
its heartbeat task running, and silencing it would take reaching into the consumer's private
state. The members' logs are tallied as the chaos soak tallies them (scripts/chaos_soak.py).

The figures of each run are appended to the file named by $CLUSTER_REPORT (JSON lines), if set.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException

from aiokafka_lite.testing.kafka_cluster import KafkaCluster
from scripts.chaos_soak import MEMBER_SETTINGS, PARTITIONS, LogReader, Member, Tally, broker_view

from ._consumers import report, until
from ._steady import SteadyProducer

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]
MEMBERS = 3
# Rounds of bounces: "all" bounces every member at once 3 times; "rolling" bounces the 3 members
# one after another twice, so 6 bounces (each waits for a stable group, for a hard one the session).
ROUNDS = {"all": 3, "rolling": 2}
RATE = 200.0  # records/s over all partitions
# Records/s each member processes (a paced sleep between logging a batch and committing it): the
# members keep up with RATE, and a bounce usually finds one holding records it has not committed.
PROCESSING_RATE = 150.0
# The smallest session timeout the broker allows by default (group.min.session.timeout.ms): a hard
# bounce costs this long before the dead member's partitions move. max_poll_interval_ms is also the
# rebalance timeout: room for a loaded machine.
SETTINGS = {**MEMBER_SETTINGS, "session_timeout_ms": 6000, "heartbeat_interval_ms": 1000,
            "max_poll_interval_ms": 10000}
STABLE_TIMEOUT = 60.0


class BouncedMember(Member):
    """A member slot whose process is stopped cleanly or killed, then started again."""

    def __init__(self, index: int, workdir: Path, spec: dict[str, Any], reader: LogReader) -> None:
        super().__init__(index, workdir, spec, reader)
        self.killed_logs: list[Path] = []

    @property
    def client_id(self) -> str:
        return f"bounce-m{self.index}-{self.incarnation}"

    @property
    def log(self) -> Path:
        return self.workdir / f"member{self.index}-{self.incarnation}.log"

    def start(self) -> None:
        # The client id names the incarnation, so the group's member list tells new from dead.
        client_id = f"bounce-m{self.index}-{self.incarnation + 1}"  # super().start() counts it up
        self.spec = {**self.spec, "settings": {**SETTINGS, "client_id": client_id}}
        super().start()

    def stop_or_kill(self, hard: bool) -> None:
        """SIGKILL (a crash) or SIGTERM (the member commits, closes and exits)."""
        assert self.process is not None
        if hard:
            self.killed_logs.append(self.log)
            self.kill()
        else:
            self.process.send_signal(signal.SIGTERM)

    async def exited(self, timeout: float) -> None:
        if self.process is not None:  # (None: killed, already reaped)
            returncode = await asyncio.to_thread(self.process.wait, timeout)  # a timeout leaves it to kill()
            self.process = None
            assert returncode == 0, f"member {self.index} exited with {returncode} after SIGTERM"


def group_view(bootstrap: str, group: str) -> tuple[str, set[str], int]:
    """The coordinator's view: group state, client ids of the members, partitions assigned."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})
    described = admin.describe_consumer_groups([group])[group].result(timeout=10)
    assigned = sum(len(m.assignment.topic_partitions) for m in described.members)
    return described.state.name, {m.client_id for m in described.members}, assigned


class Bounce:
    """Three member processes of one group, their logs tallied as they are written."""

    def __init__(self, cluster: KafkaCluster, topic: str, group: str, workdir: Path) -> None:
        self.bootstrap, self.topic, self.group, self.workdir = cluster.bootstrap_servers, topic, group, workdir
        self.tally = Tally(expected={})  # the end offsets are known once production stops
        self.reader = LogReader(self.tally)
        (workdir / "pace").write_text(f"{PROCESSING_RATE}\n")
        spec = {"bootstrap": self.bootstrap, "topic": topic, "group": group, "pace": str(workdir / "pace"),
                "stall_seconds": 0.0, "settings": SETTINGS}
        self.members = [BouncedMember(i, workdir, spec, self.reader) for i in range(MEMBERS)]
        self.rebalance_seconds: list[float] = []

    async def stable_and_consuming(self) -> None:
        """Kafka's await_all_members + await_consumed_messages: the group is stable with exactly the
        live incarnations holding every partition, then every partition has a commit after that."""
        began = time.monotonic()
        expected = {m.client_id for m in self.members}
        view: tuple[str, set[str], int] = ("", set(), 0)
        deadline = began + STABLE_TIMEOUT
        while view != ("STABLE", expected, PARTITIONS):
            self.check_alive()
            assert time.monotonic() < deadline, f"group not stable with {sorted(expected)}: {view}"
            await asyncio.sleep(0.25)
            with contextlib.suppress(KafkaException, TimeoutError):  # a coordinator moving: ask again
                view = await asyncio.to_thread(group_view, self.bootstrap, self.group)
        stable_at = time.monotonic()
        self.rebalance_seconds.append(stable_at - began)

        def consumed_since() -> bool:
            self.reader.read_new()
            return all(any(t > stable_at for t, _offset in self.tally.commits.get(p, ())) for p in range(PARTITIONS))
        await until(consumed_since, 30, "a commit on every partition after the group stabilised", interval=0.2)

    def check_alive(self) -> None:
        for member in self.members:
            member.check_alive()

    async def bounce(self, members: list[BouncedMember], hard: bool) -> None:
        for member in members:
            member.stop_or_kill(hard)
        for member in members:
            await member.exited(timeout=30)
        for member in members:
            member.start()
        await self.stable_and_consuming()

    async def drained(self, ends: dict[int, int]) -> float:
        """Seconds until every record up to ``ends`` was processed and committed."""
        began = time.monotonic()
        self.tally.expected = ends

        def done() -> bool:
            self.reader.read_new()
            self.check_alive()
            return self.tally.done
        await until(done, 60, f"every record committed; committed {self.tally.committed}, end offsets {ends}",
                    interval=0.2)
        return time.monotonic() - began

    def stop(self) -> None:
        for member in self.members:
            member.kill()

    def member_output(self) -> dict[str, str]:
        """What each incarnation wrote to stderr (WARNING+ logs, tracebacks): none when healthy."""
        return {out.name: out.read_text(errors="replace")[:800] for out in self.workdir.glob("*.out")
                if out.stat().st_size}

    def killed_windows(self) -> list[set[tuple[int, int]]]:
        """Per killed incarnation: the records it had read and not committed when it died."""
        windows = []
        for member in self.members:
            for log in member.killed_logs:
                own = Tally(expected={})
                for line in log.read_text(encoding="ascii").splitlines():
                    own.feed(line)
                windows.append({(p, o) for p, o in own.seen if o >= own.committed.get(p, 0)})
        return windows


@pytest.mark.parametrize("mode", ["all", "rolling"])
@pytest.mark.parametrize("shutdown", ["clean", "hard"])
async def test_consumer_bounce(kafka_cluster: KafkaCluster, unique_topic: str, unique_group: str, tmp_path: Path,
                               shutdown: str, mode: str) -> None:
    hard = shutdown == "hard"
    kafka_cluster.create_topic(unique_topic, partitions=PARTITIONS)
    bounce = Bounce(kafka_cluster, unique_topic, unique_group, tmp_path)
    began = time.monotonic()
    try:
        async with SteadyProducer(bounce.bootstrap, unique_topic, PARTITIONS, RATE) as producer:
            for member in bounce.members:
                member.start()
            await bounce.stable_and_consuming()
            for _round in range(ROUNDS[mode]):
                if mode == "all":
                    await bounce.bounce(bounce.members, hard)
                else:
                    for member in bounce.members:
                        await bounce.bounce([member], hard)
        _committed, ends = await broker_view(bounce.bootstrap, unique_topic, unique_group)
        assert sum(ends.values()) == producer.sent
        drain = await bounce.drained(ends)
    finally:
        bounce.stop()
    bounce.reader.read_new()
    committed, _ends = await broker_view(bounce.bootstrap, unique_topic, unique_group)
    tally = bounce.tally
    windows = bounce.killed_windows()
    extra = {pos: n - 1 for pos, n in tally.seen.items() if n > 1}
    outside = {pos: n for pos, n in extra.items() if n > sum(pos in w for w in windows)}
    row = {"test": "consumer_bounce", "shutdown": shutdown, "mode": mode, "rounds": ROUNDS[mode],
           "records": tally.total,
           "lost": tally.lost, "duplicates": tally.duplicates, "uncommitted_at_death": sum(map(len, windows)),
           "redelivered_after_commit": tally.redelivered_after_commit(),
           "failed_commits": sum(tally.failed_commits.values()),
           "longest_rebalance_s": round(max(bounce.rebalance_seconds), 2), "drain_s": round(drain, 2),
           "wall_s": round(time.monotonic() - began, 1)}
    report(row)

    noisy = bounce.member_output()
    assert not noisy, f"members logged at WARNING or above: {noisy}"
    assert tally.lost == 0
    assert tally.bad_values == 0
    assert committed == ends, f"committed {committed}, end offsets {ends}"
    assert tally.redelivered_after_commit() == 0, "a record came again after a commit covering it had returned"
    if hard:
        assert not outside, f"{len(outside)} records came again that no dead member held uncommitted, " \
                            f"e.g. {list(outside.items())[:5]}"
    else:
        assert not windows
        assert tally.duplicates == 0, f"a clean bounce delivered records twice, e.g. {list(extra.items())[:5]}"
