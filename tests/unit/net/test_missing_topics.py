"""A subscribed topic the metadata calls unknown, then present (created by someone, or by a broker
that creates topics on demand): one WARNING while it is missing, and one INFO naming it once it
exists, which says how a misspelt name comes to exist (allow_auto_create_topics). Scripted metadata
answers, no broker."""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

import pytest

from aiokafka_lite._net.cluster import Cluster
from aiokafka_lite._net.options import ConnectionOptions
from aiokafka_lite.config import ConsumerConfig

UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5


def answer(topic: str, error_code: int, partitions: int = 0) -> dict[str, Any]:
    return {
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "c", "controller_id": 1,
        "topics": [{"name": topic, "topic_id": uuid.UUID(int=0 if error_code else 7), "is_internal": False,
                    "error_code": error_code, "partitions": [
                        {"partition_index": p, "leader_id": 1, "leader_epoch": 0, "replica_nodes": [1],
                         "isr_nodes": [1], "offline_replicas": [], "error_code": 0} for p in range(partitions)]}],
    }


def run(cluster: Cluster, topic: str, codes: list[tuple[int, int]]) -> None:
    """Each scripted metadata answer, then the check a poll() makes after a refresh."""
    for now, (code, partitions) in enumerate(codes):
        cluster.metadata.update(answer(topic, code, partitions), [topic], float(now))
        cluster.raise_topic_errors([topic], subscribed=True)


def said(caplog: pytest.LogCaptureFixture, topic: str, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level and repr(topic) in r.getMessage()]


@pytest.mark.parametrize("appears_as", [(0, 1), (LEADER_NOT_AVAILABLE, 0)], ids=["present", "leader-not-yet"])
def test_a_missing_topic_that_appears_is_one_info_line_naming_it(caplog: pytest.LogCaptureFixture,
                                                                   appears_as: tuple[int, int]) -> None:
    caplog.set_level(logging.DEBUG, logger="aiokafka_lite")
    cluster = Cluster(ConnectionOptions.from_settings(ConsumerConfig()), [("127.0.0.1", 9092)])  # the defaults
    missing = (UNKNOWN_TOPIC_OR_PARTITION, 0)
    run(cluster, "ordrs", [missing, missing, missing, appears_as, (0, 1), (0, 1)])

    assert len(said(caplog, "ordrs", logging.WARNING)) == 1
    infos = said(caplog, "ordrs", logging.INFO)
    assert len(infos) == 1, caplog.text
    assert re.match(r"topic 'ordrs': it exists now, \d+\.\d s after the first metadata that said it does not \(",
                    infos[0]), infos[0]
    # the consumer's default lets a broker create it on demand: the line says how to stop that
    assert "auto.create.topics.enable" in infos[0]
    assert "if the name is a typo, set allow_auto_create_topics=False" in infos[0]


def test_without_auto_creation_the_line_does_not_blame_it(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="aiokafka_lite")
    config = ConsumerConfig(allow_auto_create_topics=False)
    cluster = Cluster(ConnectionOptions.from_settings(config), [("127.0.0.1", 9092)])
    run(cluster, "orders", [(UNKNOWN_TOPIC_OR_PARTITION, 0), (0, 1), (0, 1)])
    [info] = said(caplog, "orders", logging.INFO)
    assert re.fullmatch(r"topic 'orders': it exists now, \d+\.\d s after the first metadata that said it does not "
                        r"\(created since\)", info), info


def test_a_topic_never_missing_is_not_mentioned(caplog: pytest.LogCaptureFixture) -> None:
    """As on Tansu, which creates a topic on the first request that names it: nothing to say."""
    caplog.set_level(logging.DEBUG, logger="aiokafka_lite")
    cluster = Cluster(ConnectionOptions.from_settings(ConsumerConfig()), [("127.0.0.1", 9092)])
    run(cluster, "orders", [(0, 1), (0, 1)])
    assert said(caplog, "orders", logging.INFO) == said(caplog, "orders", logging.WARNING) == []
