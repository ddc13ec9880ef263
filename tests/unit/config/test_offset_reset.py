"""auto_offset_reset's values, by_duration (KIP-1106) among them, and the ISO-8601 durations it takes
(java.time.Duration's text: days, hours, minutes, seconds; no sign, weeks, months or years)."""

from __future__ import annotations

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.config import ConsumerConfig
from aiokafka_lite.config.checks import iso_duration_ms
from aiokafka_lite.errors import ConfigError
from aiokafka_lite.subscription import ResetStrategy, SubscriptionState


@pytest.mark.parametrize(("text", "ms"), [
    ("PT1H", 3_600_000), ("pt1h", 3_600_000), ("P1D", 86_400_000), ("P1DT2H3M4.5S", 93_784_500),
    ("PT90M", 5_400_000), ("PT0.5S", 500), ("PT1,25S", 1_250), ("PT1.0009S", 1_000), ("P0D", 0),
])
def test_iso_durations(text: str, ms: int) -> None:
    assert iso_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "P1DT", "-PT1H", "PT-1H", "P1W", "P1M", "P1Y", "1H", "PT1H ", "PT1.S"])
def test_not_iso_durations(text: str) -> None:
    assert iso_duration_ms(text) is None


@pytest.mark.parametrize(("given", "kept"), [
    ("earliest", "earliest"), (" Latest ", "latest"), ("NONE", "none"),
    ("by_duration:PT1H", "by_duration:PT1H"), ("BY_DURATION:p1dt12h", "by_duration:P1DT12H"),
])
def test_auto_offset_reset_values(given: str, kept: str) -> None:
    assert ConsumerConfig(auto_offset_reset=given).auto_offset_reset == kept


@pytest.mark.parametrize("given", ["by_duration:", "by_duration:1h", "by_duration:-PT1H", "by_time:PT1H", "smallest",
                                   1])
def test_other_auto_offset_reset_values_say_what_is_allowed(given: object) -> None:
    with pytest.raises(ConfigError, match=r"invalid auto_offset_reset=.*expected 'earliest', 'latest', 'none' "
                                          r"or 'by_duration:' and an ISO-8601 duration such as 'PT1H'"):
        ConsumerConfig(auto_offset_reset=given)


def test_by_duration_from_java_properties_reaches_the_subscription() -> None:
    consumer = Consumer.from_properties({"bootstrap.servers": "127.0.0.1:9092",
                                         "auto.offset.reset": "by_duration:PT30M"})
    assert consumer.config.auto_offset_reset == "by_duration:PT30M"
    state = SubscriptionState.for_reset(consumer.config.auto_offset_reset)
    assert (state.default_reset, state.reset_duration_ms) == (ResetStrategy.BY_DURATION, 1_800_000)
    assert SubscriptionState.for_reset("none").default_reset is ResetStrategy.NONE
