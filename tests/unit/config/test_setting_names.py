"""An error about a setting names it as the caller wrote it: snake_case through keyword
arguments, the dotted Java name through from_properties; and whatever ConsumerConfig accepts,
Consumer() builds (no internal name such as ``retry_backoff`` can surface)."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.config import INT32_MAX, INT64_MAX, ConsumerConfig
from aiokafka_lite.errors import ConfigError

NOWHERE = "127.0.0.1:1"

# (keyword arguments, the same as properties, what the message says for each)
CASES: list[tuple[dict[str, Any], dict[str, Any], tuple[str, ...], tuple[str, ...]]] = [
    ({"retry_backoff_ms": -1}, {"retry.backoff.ms": "-1"},
     ("invalid retry_backoff_ms=-1",), ("invalid retry.backoff.ms=",)),
    ({"retry_backoff_ms": math.nan}, {"retry.backoff.ms": math.nan},
     ("invalid retry_backoff_ms=nan",), ("invalid retry.backoff.ms=nan",)),
    ({"request_timeout_ms": 10**30}, {"request.timeout.ms": 10**30},
     ("invalid request_timeout_ms=10000", "<= 2147483647"), ("invalid request.timeout.ms=10000",)),
    ({"heartbeat_interval_ms": 10000, "session_timeout_ms": 10000},
     {"heartbeat.interval.ms": "10000", "session.timeout.ms": "10000"},
     ("invalid heartbeat_interval_ms=10000", "session_timeout_ms=10000"),
     ("invalid heartbeat.interval.ms=10000", "session.timeout.ms=10000")),
    ({"fetch_max_wait_ms": 30000}, {"fetch.max.wait.ms": "30000"},
     ("invalid fetch_max_wait_ms=30000", "request_timeout_ms=30000"),
     ("invalid fetch.max.wait.ms=30000", "request.timeout.ms=30000")),
    ({"group_instance_id": "pod-1"}, {"group.instance.id": "pod-1"},
     ("invalid group_instance_id='pod-1'", "set group_id too"),
     ("invalid group.instance.id='pod-1'", "set group.id too")),
    ({"enable_auto_commit": True}, {"enable.auto.commit": "true"},
     ("invalid enable_auto_commit=True", "group_id is None"),
     ("invalid enable.auto.commit=True", "group.id is None")),
    ({"group_remote_assignor": "range"}, {"group.remote.assignor": "range"},
     ("invalid group_remote_assignor='range'", "group_protocol='consumer'"),
     ("invalid group.remote.assignor='range'", "group.protocol='consumer'")),
    ({"group_id": "g", "group_protocol": "consumer", "heartbeat_interval_ms": 1000},
     {"group.id": "g", "group.protocol": "consumer", "heartbeat.interval.ms": "1000"},
     ("invalid heartbeat_interval_ms with group_protocol='consumer'",),
     ("invalid heartbeat.interval.ms with group.protocol='consumer'",)),
    ({"security_protocol": "SASL_PLAINTEXT", "sasl_plain_password": "pw"},
     {"security.protocol": "SASL_PLAINTEXT", "sasl.password": "pw"},   # librdkafka's alias
     ("missing sasl_plain_username", "security_protocol='SASL_PLAINTEXT'"),
     ("missing sasl.plain.username", "security.protocol='SASL_PLAINTEXT'", "sasl.password")),
    ({"ssl_keyfile": "k.pem"}, {"ssl.key.location": "k.pem"},
     ("missing ssl_certfile: ssl_keyfile is set",),
     ("missing ssl.certfile: ssl.key.location is set",)),
]


@pytest.mark.parametrize(("kwargs", "properties", "says", "says_dotted"), CASES)
def test_errors_name_settings_as_the_caller_wrote_them(kwargs: dict[str, Any], properties: dict[str, Any],
                                                       says: tuple[str, ...], says_dotted: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError) as info:
        Consumer(bootstrap_servers=NOWHERE, **kwargs)
    for part in says:
        assert part in str(info.value)
    with pytest.raises(ConfigError) as info:
        Consumer.from_properties({"bootstrap.servers": NOWHERE, **properties})
    for part in says_dotted:
        assert part in str(info.value)
    for name in kwargs:
        assert name not in str(info.value)  # no snake_case name where the caller used dotted ones


def test_spelling_does_not_leak_out_of_from_properties() -> None:
    with pytest.raises(ConfigError):
        ConsumerConfig.from_properties({"retry.backoff.ms": "-1"})
    with pytest.raises(ConfigError, match="invalid retry_backoff_ms=-1"):
        ConsumerConfig.from_kwargs(retry_backoff_ms=-1)


MS_SETTINGS = [f.name for f in dataclasses.fields(ConsumerConfig) if f.name.endswith("_ms")]


@pytest.mark.parametrize("bad", [math.nan, math.inf, 1.5, 100.0, True, "100", None], ids=repr)
@pytest.mark.parametrize("name", MS_SETTINGS)
def test_every_ms_setting_refuses_nan_and_non_integers(name: str, bad: Any) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"invalid {name}={bad!r}: expected an int")):
        ConsumerConfig.from_kwargs(**{name: bad})
    dotted = name.replace("_", ".")
    if not isinstance(bad, str):  # text is parsed as property-file text: "100" is fine there
        with pytest.raises(ConfigError, match=re.escape(f"invalid {dotted}={bad!r}: expected an int")):
            ConsumerConfig.from_properties({dotted: bad})
    for text in ("nan", "1.5", "1e3", "", "1" + "0" * 30):
        with pytest.raises(ConfigError, match=re.escape(f"invalid {dotted}=")):
            ConsumerConfig.from_properties({dotted: text})


@pytest.mark.parametrize("build", [
    lambda **s: Consumer(bootstrap_servers=NOWHERE, group_id="g", **s),
    lambda **s: Consumer.from_properties({"bootstrap.servers": NOWHERE, "group.id": "g",
                                          **{k.replace("_", "."): str(v) for k, v in s.items()}}),
], ids=["kwargs", "properties"])
@pytest.mark.parametrize("settings", [
    {"retry_backoff_ms": 0},
    {"retry_backoff_ms": 0, "retry_backoff_max_ms": 0},
    {"retry_backoff_ms": 0, "reconnect_backoff_ms": 0, "reconnect_backoff_max_ms": 0},
    {"retry_backoff_ms": 5000, "retry_backoff_max_ms": 100},   # Java: a static 100 ms backoff
    {"retry_backoff_ms": INT64_MAX, "reconnect_backoff_ms": INT64_MAX},
    {"session_timeout_ms": 2, "heartbeat_interval_ms": 1, "max_poll_interval_ms": 1,
     "request_timeout_ms": 1, "fetch_max_wait_ms": 0, "default_api_timeout_ms": 1},
    {"session_timeout_ms": INT32_MAX, "heartbeat_interval_ms": INT32_MAX - 1,
     "max_poll_interval_ms": INT32_MAX, "request_timeout_ms": INT32_MAX,
     "default_api_timeout_ms": INT32_MAX, "metadata_max_age_ms": INT64_MAX},
], ids=repr)
def test_whatever_the_config_accepts_builds_a_consumer(build: Any, settings: dict[str, int]) -> None:
    consumer = build(**settings)
    for name, value in settings.items():
        assert getattr(consumer.config, name) == value
