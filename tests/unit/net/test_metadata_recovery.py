"""When the client goes back to bootstrap_servers (KIP-899, KIP-1102): the decisions, on a fake clock."""

from __future__ import annotations

import pytest

from aiokafka_lite._net.exceptions import MisroutedConnectionError
from aiokafka_lite._net.options import ConnectionOptions
from aiokafka_lite._net.recovery import Failure, MetadataRecovery
from aiokafka_lite.config import ConsumerConfig
from aiokafka_lite.errors import BrokerError, ConfigError

TRIGGER = 300.0


def test_a_failed_round_over_the_known_brokers_rebootstraps() -> None:
    recovery = MetadataRecovery("rebootstrap", TRIGGER)
    recovery.attempting(0.0)
    assert recovery.reason(1.0) is None  # still trying the known brokers
    assert recovery.reason(1.0, Failure.UNREACHABLE) == "no known broker could be reached"
    assert recovery.reason(1.0, Failure.REQUIRED) == "a broker answered REBOOTSTRAP_REQUIRED"


def test_the_trigger_counts_from_the_first_unanswered_attempt_and_a_refresh_resets_it() -> None:
    recovery = MetadataRecovery("rebootstrap", TRIGGER)
    recovery.attempting(10.0)
    recovery.attempting(200.0)  # a later attempt of the same streak keeps the first start
    assert recovery.reason(309.9) is None
    reason = recovery.reason(310.0)
    assert reason is not None
    assert "300.0 s" in reason
    assert "metadata_recovery_rebootstrap_trigger_ms" in reason
    recovery.refreshed()
    assert recovery.reason(10_000.0) is None


def test_rebootstrapping_counts_and_gives_the_bootstrap_servers_a_fresh_trigger_period() -> None:
    recovery = MetadataRecovery("rebootstrap", TRIGGER)
    recovery.attempting(0.0)
    recovery.rebootstrapping()
    assert recovery.rebootstraps == 1
    assert recovery.reason(TRIGGER * 2) is None
    recovery.attempting(TRIGGER * 2)
    assert recovery.reason(TRIGGER * 3) is not None


def test_strategy_none_never_rebootstraps() -> None:
    recovery = MetadataRecovery("none", TRIGGER)
    recovery.attempting(0.0)
    assert recovery.reason(TRIGGER * 10) is None
    assert recovery.reason(1.0, Failure.UNREACHABLE) is None
    assert recovery.reason(1.0, Failure.REQUIRED) is None


def test_settings_default_to_javas_and_reach_the_connection_options() -> None:
    config = ConsumerConfig()
    assert (config.metadata_recovery_strategy, config.metadata_recovery_rebootstrap_trigger_ms) == \
        ("rebootstrap", 300000)
    options = ConnectionOptions.from_settings(ConsumerConfig.from_properties({
        "metadata.recovery.strategy": "NONE", "metadata.recovery.rebootstrap.trigger.ms": "1500"}))
    assert (options.metadata_recovery_strategy, options.metadata_recovery_rebootstrap_trigger) == ("none", 1.5)


@pytest.mark.parametrize(("setting", "value"), [("metadata_recovery_strategy", "sometimes"),
                                                ("metadata_recovery_rebootstrap_trigger_ms", -1)])
def test_bad_recovery_settings_are_config_errors_naming_them(setting: str, value: object) -> None:
    with pytest.raises(ConfigError, match=setting):
        ConsumerConfig.from_kwargs(**{setting: value})


def test_rebootstrap_required_is_a_named_non_retriable_broker_error() -> None:
    error = BrokerError(129)
    assert error.name == "REBOOTSTRAP_REQUIRED"
    assert not error.retriable


def _misrouted(expected: str = "A", found: str | None = None) -> MisroutedConnectionError:
    return MisroutedConnectionError("broker 127.0.0.1:9092 (node 1)", expected, found)


def test_a_misrouted_connection_rebootstraps_at_once_and_is_said_once_after() -> None:
    recovery = MetadataRecovery("rebootstrap", TRIGGER)
    first, repeat = _misrouted(), _misrouted(found="B")
    recovery.misrouted(first)
    recovery.misrouted(repeat)  # the same news meanwhile: the first is kept
    assert recovery.reason(0.0) == ("broker 127.0.0.1:9092 (node 1) is not of cluster 'A': it answered "
                                    "ApiVersions with REBOOTSTRAP_REQUIRED (KIP-1242)")
    assert recovery.reason(0.0, Failure.MISROUTED) == recovery.reason(0.0)
    assert recovery.take_rebootstrapped_misrouting() is None  # not rebootstrapped yet
    recovery.rebootstrapping()
    assert recovery.reason(0.0) is None
    assert recovery.take_rebootstrapped_misrouting() is first
    assert recovery.take_rebootstrapped_misrouting() is None


def test_strategy_none_does_not_act_on_a_misrouted_connection() -> None:
    recovery = MetadataRecovery("none", TRIGGER)
    recovery.misrouted(_misrouted())
    assert recovery.reason(0.0, Failure.MISROUTED) is None
    assert recovery.misrouting is None


def test_the_cluster_check_is_on_by_default_maps_from_java_and_needs_rebootstrap() -> None:
    assert ConsumerConfig().metadata_cluster_check_enable is True
    assert ConnectionOptions.from_settings(ConsumerConfig()).checks_cluster
    off = ConsumerConfig.from_properties({"metadata.cluster.check.enable": "false"})
    assert off.metadata_cluster_check_enable is False
    assert not ConnectionOptions.from_settings(off).checks_cluster
    assert not ConnectionOptions(metadata_recovery_strategy="none").checks_cluster  # as Java: ignored
