"""Recognising Tansu from its answers (recorded from Tansu 0.6.0, Apache Kafka 4.3.1 and 3.9.1)."""

from __future__ import annotations

from typing import Any

from aiokafka_lite._net.broker_identity import TANSU_NODE_ID, looks_like_tansu

# ApiVersions v3 answers, without the api_keys list.
TANSU_060 = {"error_code": 0, "supported_features": [], "finalized_features_epoch": -1, "finalized_features": []}
KAFKA_431 = {"error_code": 0, "supported_features": [{"name": "metadata.version", "min_version": 7, "max_version": 30}],
             "finalized_features_epoch": 13,
             "finalized_features": [{"name": "metadata.version", "max_version_level": 30, "min_version_level": 30}]}
KAFKA_391 = {"error_code": 0, "supported_features": [{"name": "metadata.version", "min_version": 1, "max_version": 21}],
             "finalized_features_epoch": 7,
             "finalized_features": [{"name": "metadata.version", "max_version_level": 21, "min_version_level": 21}]}


def test_tansu_is_node_111_with_no_features() -> None:
    assert looks_like_tansu([TANSU_NODE_ID], TANSU_060)


def test_apache_kafka_is_not_tansu() -> None:
    assert not looks_like_tansu([1], KAFKA_431)
    assert not looks_like_tansu([1], KAFKA_391)


def test_one_signal_alone_is_not_enough() -> None:
    # A KRaft Kafka configured with node.id=111 still finalizes metadata.version...
    assert not looks_like_tansu([111], KAFKA_431)
    # ...and a broker without features but with other node ids is not Tansu's hard-coded one.
    assert not looks_like_tansu([1], TANSU_060)
    assert not looks_like_tansu([111, 112], TANSU_060)
    assert not looks_like_tansu([], TANSU_060)


def test_features_announced_in_any_field_rule_tansu_out() -> None:
    only_epoch: dict[str, Any] = {**TANSU_060, "finalized_features_epoch": 3}
    only_supported: dict[str, Any] = {**TANSU_060, "supported_features": KAFKA_431["supported_features"]}
    assert not looks_like_tansu([111], only_epoch)
    assert not looks_like_tansu([111], only_supported)
