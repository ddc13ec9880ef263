"""ConsumerConfig: Java defaults, every validation rule, property-name mapping, secret masking."""

from __future__ import annotations

import dataclasses
import logging
import re
import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.config import KNOWN_ASSIGNORS, SETTINGS_TABLE, ConsumerConfig, settings_table
from aiokafka_lite.errors import ConfigError

SASL = {"security_protocol": "SASL_PLAINTEXT", "sasl_plain_username": "alice"}
SECRET = "hunter2-s3cr3t"

# The Java KafkaConsumer's defaults (session.timeout.ms from KIP-735), by our snake_case names.
JAVA_DEFAULTS: dict[str, Any] = {
    "session_timeout_ms": 45000,
    "heartbeat_interval_ms": 3000,
    "max_poll_interval_ms": 300000,
    "max_poll_records": 500,
    "request_timeout_ms": 30000,
    "default_api_timeout_ms": 60000,
    "retry_backoff_ms": 100,
    "retry_backoff_max_ms": 1000,
    "reconnect_backoff_ms": 50,
    "reconnect_backoff_max_ms": 1000,
    "bootstrap_resolve_timeout_ms": 0,   # Java 4.4's default (KIP-909)
    "connections_max_idle_ms": 540000,
    "metadata_max_age_ms": 300000,
    "auto_commit_interval_ms": 5000,
    "auto_offset_reset": "latest",
    "isolation_level": "read_uncommitted",
    "fetch_min_bytes": 1,
    "fetch_max_wait_ms": 500,
    "fetch_max_bytes": 52428800,
    "max_partition_fetch_bytes": 1048576,
    "check_crcs": True,
    "exclude_internal_topics": True,
    "allow_auto_create_topics": True,
    "partition_assignment_strategy": ("range", "cooperative-sticky"),
    "client_rack": "",
    "security_protocol": "PLAINTEXT",
    "sasl_mechanism": "PLAIN",
    "ssl_check_hostname": True,
    "group_id": None,
    "group_instance_id": None,
}


def error_of(**kwargs: Any) -> str:
    with pytest.raises(ConfigError) as info:
        ConsumerConfig.from_kwargs(**kwargs)
    return str(info.value)


# --- defaults and immutability ---

def test_defaults_are_the_java_consumer_defaults() -> None:
    config = ConsumerConfig()
    assert {name: getattr(config, name) for name in JAVA_DEFAULTS} == JAVA_DEFAULTS


def test_our_own_defaults() -> None:
    config = ConsumerConfig()
    assert config.client_id == "aiokafka-lite"
    assert config.bootstrap_servers == (("localhost", 9092),)
    assert config.heartbeat_mode == "task"
    assert config.stall_warning_ratio == 0.5
    assert config.key_deserializer is None
    assert config.value_deserializer is None
    assert config.ssl_context is None
    assert config.sasl_plain_password is None


def test_auto_commit_is_on_by_default_with_a_group() -> None:
    assert ConsumerConfig.from_kwargs(group_id="g").enable_auto_commit is True


def test_auto_commit_is_silently_off_without_a_group_when_left_at_default() -> None:
    assert ConsumerConfig.from_kwargs().enable_auto_commit is False
    assert ConsumerConfig().enable_auto_commit is False
    assert ConsumerConfig.from_kwargs(enable_auto_commit=False).enable_auto_commit is False


def test_explicit_auto_commit_without_a_group_is_an_error_like_java() -> None:
    message = error_of(enable_auto_commit=True)
    assert "enable_auto_commit" in message
    assert "group_id" in message
    with pytest.raises(ConfigError, match=r"enable\.auto\.commit=True.*group\.id is None") as info:
        ConsumerConfig.from_properties({"enable.auto.commit": "true"})
    assert "_" not in str(info.value)  # every name as the properties spell them


def test_config_is_frozen_and_slotted() -> None:
    config = ConsumerConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_poll_records = 10  # type: ignore[misc]
    assert not hasattr(config, "__dict__")


def test_replace_revalidates() -> None:
    config = ConsumerConfig.from_kwargs(group_id="g")
    assert dataclasses.replace(config, max_poll_records=7).max_poll_records == 7
    with pytest.raises(ConfigError, match="max_poll_records"):
        dataclasses.replace(config, max_poll_records=0)


def test_equal_configs_compare_and_hash_equal() -> None:
    first = ConsumerConfig.from_kwargs(bootstrap_servers="a:1,b:2", group_id="g")
    second = ConsumerConfig.from_kwargs(bootstrap_servers=["a:1", ("b", 2)], group_id="g")
    assert first == second
    assert hash(first) == hash(second)


# --- bootstrap servers ---

@pytest.mark.parametrize(("given", "expected"), [
    ("h1:9092,h2:9093", (("h1", 9092), ("h2", 9093))),
    (" h1:1 , h2 ", (("h1", 1), ("h2", 9092))),
    (["h1:1", "h2:2"], (("h1", 1), ("h2", 2))),
    (["h1:1,h2:2"], (("h1", 1), ("h2", 2))),
    (("h1", "h1:9092"), (("h1", 9092),)),                  # duplicates dropped, order kept
    ("[::1]:9093", (("::1", 9093),)),
    ("[fe80::1%eth0]", (("fe80::1%eth0", 9092),)),
    ([("127.0.0.1", 19092)], (("127.0.0.1", 19092),)),
    ("localhost:65535", (("localhost", 65535),)),
])
def test_bootstrap_servers_are_normalised(given: Any, expected: tuple[tuple[str, int], ...]) -> None:
    assert ConsumerConfig.from_kwargs(bootstrap_servers=given).bootstrap_servers == expected


@pytest.mark.parametrize("given", [
    "", " , ", [], "h:0", "h:65536", "h:abc", "h:", "::1:9092", "[::1", "[::1]9092", ":9092",
    9092, b"h:1", ["h:1", 3], [("h", True)], [("h", "1")], [("", 1)], "h 1:2",
])
def test_bad_bootstrap_servers_are_rejected(given: Any) -> None:
    assert "bootstrap_servers" in error_of(bootstrap_servers=given)


def test_unbracketed_ipv6_gets_a_hint() -> None:
    assert "[::1]:9092" in error_of(bootstrap_servers="::1")


# --- types and ranges ---

@pytest.mark.parametrize(("name", "value"), [
    ("max_poll_records", True),                 # bool is not an int
    ("session_timeout_ms", "45000"),
    ("request_timeout_ms", 30000.0),
    ("fetch_max_bytes", None),
    ("enable_auto_commit", 1),                  # nor is an int a bool
    ("check_crcs", "true"),
    ("client_id", None),
    ("client_rack", 5),
    ("group_id", 7),
    ("stall_warning_ratio", True),
    ("stall_warning_ratio", "0.5"),
    ("key_deserializer", "org.apache.kafka.common.serialization.StringDeserializer"),
    ("value_deserializer", 3),
    ("ssl_context", "not a context"),
    ("ssl_cafile", 1),
    ("sasl_plain_username", 1),
    ("auto_offset_reset", None),
])
def test_wrong_types_are_rejected_naming_setting_and_value(name: str, value: Any) -> None:
    message = error_of(**{"group_id": "g", name: value})
    assert name in message
    assert repr(value) in message
    assert "expected" in message


# (setting, smallest valid value, largest valid value) — one below / above must fail.
INT_RANGES = [
    ("session_timeout_ms", 2, 2**31 - 1),      # 1 is in range, but leaves no room for a heartbeat
    ("heartbeat_interval_ms", 1, 44999),
    ("max_poll_interval_ms", 1, 2**31 - 1),
    ("max_poll_records", 1, 2**31 - 1),
    ("request_timeout_ms", 1, 2**31 - 1),
    ("default_api_timeout_ms", 1, 2**31 - 1),
    ("auto_commit_interval_ms", 1, 2**31 - 1),
    ("fetch_min_bytes", 0, 2**31 - 1),
    ("fetch_max_bytes", 0, 2**31 - 1),
    ("max_partition_fetch_bytes", 0, 2**31 - 1),
    ("fetch_max_wait_ms", 0, 29999),
    ("retry_backoff_ms", 0, 2**63 - 1),          # Java: atLeast(0)
    ("retry_backoff_max_ms", 0, 2**63 - 1),      # below retry_backoff_ms: a static backoff, as Java
    ("reconnect_backoff_ms", 0, 2**63 - 1),
    ("reconnect_backoff_max_ms", 0, 2**63 - 1),
    ("bootstrap_resolve_timeout_ms", 0, 2**63 - 1),
    ("metadata_max_age_ms", 1, 2**63 - 1),
    ("connections_max_idle_ms", 1, 2**63 - 1),
]


@pytest.mark.parametrize(("name", "low", "high"), INT_RANGES)
def test_int_ranges(name: str, low: int, high: int) -> None:
    base: dict[str, int] = {"session_timeout_ms": {"heartbeat_interval_ms": 1},
                            "request_timeout_ms": {"fetch_max_wait_ms": 0}}.get(name, {})
    for ok in (low, high):
        assert getattr(ConsumerConfig.from_kwargs(**base, **{name: ok}), name) == ok
    for bad in (low - 1, high + 1):
        message = error_of(**base, **{name: bad})
        assert name in message
        assert str(bad) in message


def test_int_error_states_the_allowed_range() -> None:
    assert "1 <= value <= 2147483647" in error_of(max_poll_records=0)
    assert "session_timeout_ms=0: expected an int, 1 <= value" in error_of(session_timeout_ms=0)


def test_connections_max_idle_accepts_minus_one_for_never() -> None:
    assert ConsumerConfig.from_kwargs(connections_max_idle_ms=-1).connections_max_idle_ms == -1
    assert "-1 or 1 <= value" in error_of(connections_max_idle_ms=0)


@pytest.mark.parametrize(("name", "given", "stored"), [
    ("auto_offset_reset", "EARLIEST", "earliest"),
    ("auto_offset_reset", "none", "none"),
    ("isolation_level", "read_committed", "read_committed"),
    ("security_protocol", "ssl", "SSL"),
    ("sasl_mechanism", "scram-sha-512", "SCRAM-SHA-512"),
    ("heartbeat_mode", "thread", "thread"),
])
def test_choices_are_case_insensitive(name: str, given: str, stored: str) -> None:
    assert getattr(ConsumerConfig.from_kwargs(**{name: given}), name) == stored


@pytest.mark.parametrize(("name", "value", "choice"), [
    ("auto_offset_reset", "smallest", "'earliest'"),
    ("isolation_level", "committed", "'read_committed'"),
    ("security_protocol", "TLS", "'SASL_SSL'"),
    ("sasl_mechanism", "GSSAPI", "'SCRAM-SHA-256'"),
    ("heartbeat_mode", "process", "'thread'"),
])
def test_bad_choices_list_the_allowed_ones(name: str, value: str, choice: str) -> None:
    message = error_of(**{name: value})
    assert name in message
    assert repr(value) in message
    assert choice in message


@pytest.mark.parametrize("ratio", [0, -0.1, 1.01, 2])
def test_stall_warning_ratio_range(ratio: float) -> None:
    assert "0 < value <= 1" in error_of(stall_warning_ratio=ratio)


def test_stall_warning_ratio_accepts_an_int_one() -> None:
    config = ConsumerConfig.from_kwargs(stall_warning_ratio=1)
    assert config.stall_warning_ratio == 1.0
    assert isinstance(config.stall_warning_ratio, float)


def test_empty_group_id_is_rejected() -> None:
    assert "group_id" in error_of(group_id="")


def test_deserializers_accept_callables() -> None:
    config = ConsumerConfig.from_kwargs(key_deserializer=bytes.decode, value_deserializer=len)
    assert config.key_deserializer is bytes.decode
    assert config.value_deserializer is len


# --- cross-field rules ---

@pytest.mark.parametrize("heartbeat", [10000, 10001])
def test_heartbeat_must_be_below_session_timeout(heartbeat: int) -> None:
    message = error_of(session_timeout_ms=10000, heartbeat_interval_ms=heartbeat)
    assert "heartbeat_interval_ms" in message
    assert "session_timeout_ms=10000" in message
    assert "lower than" in message
    assert "Kafka requires it" in message


def test_heartbeat_just_below_session_timeout_is_accepted() -> None:
    assert ConsumerConfig.from_kwargs(session_timeout_ms=3001).heartbeat_interval_ms == 3000


def test_fetch_max_wait_must_be_below_request_timeout() -> None:
    message = error_of(fetch_max_wait_ms=30000)
    assert "fetch_max_wait_ms" in message
    assert "request_timeout_ms=30000" in message


@pytest.mark.parametrize(("base", "cap"), [("retry_backoff_ms", "retry_backoff_max_ms"),
                                           ("reconnect_backoff_ms", "reconnect_backoff_max_ms")])
def test_backoff_above_default_cap_raises_the_cap_unless_the_cap_is_given(base: str, cap: str) -> None:
    assert getattr(ConsumerConfig.from_kwargs(**{base: 5000}), cap) == 5000
    assert getattr(ConsumerConfig.from_kwargs(**{base: 10}), cap) == 1000
    direct: dict[str, Any] = {base: 5000}
    assert getattr(ConsumerConfig(**direct), cap) == 1000  # direct construction: no guessing


@pytest.mark.parametrize(("base", "cap"), [("retry_backoff_ms", "retry_backoff_max_ms"),
                                           ("reconnect_backoff_ms", "reconnect_backoff_max_ms")])
def test_backoff_above_an_explicit_cap_is_a_static_backoff_with_a_warning_like_java(
        base: str, cap: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="aiokafka_lite.config"):
        config = ConsumerConfig.from_kwargs(**{base: 5000, cap: 2000})
    assert (getattr(config, base), getattr(config, cap)) == (5000, 2000)
    assert f"{base}=5000 is greater than {cap}=2000: a static backoff of 2000 ms" in caplog.text
    caplog.clear()
    dotted = {base.replace("_", "."): "5000", cap.replace("_", "."): "2000"}
    with caplog.at_level(logging.WARNING, logger="aiokafka_lite.config"):
        ConsumerConfig.from_properties(dotted)
    assert f"{base.replace('_', '.')}=5000 is greater than {cap.replace('_', '.')}=2000" in caplog.text


def test_group_instance_id_needs_a_group() -> None:
    message = error_of(group_instance_id="pod-1")
    assert "group_instance_id" in message
    assert "group_id" in message
    assert ConsumerConfig.from_kwargs(group_id="g", group_instance_id="pod-1").group_instance_id == "pod-1"


@pytest.mark.parametrize("instance_id", ["", "has space", "a/b", "x" * 250, 5])
def test_group_instance_id_uses_javas_character_rules(instance_id: Any) -> None:
    assert "group_instance_id" in error_of(group_id="g", group_instance_id=instance_id)


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("missing", ["sasl_plain_username", "sasl_plain_password"])
def test_sasl_protocols_need_credentials(protocol: str, missing: str) -> None:
    given = {"sasl_plain_username": "alice", "sasl_plain_password": SECRET}
    given[missing] = ""
    message = error_of(security_protocol=protocol, **given)
    assert f"missing {missing}" in message
    assert SECRET not in message


def test_sasl_credentials_are_accepted_and_ignored_for_plaintext() -> None:
    config = ConsumerConfig.from_kwargs(**SASL, sasl_plain_password=SECRET, sasl_mechanism="SCRAM-SHA-256")
    assert config.uses_sasl
    assert not config.uses_ssl
    plain = ConsumerConfig.from_kwargs(sasl_plain_username="alice")
    assert not plain.uses_sasl


def test_ssl_context_conflicts_with_file_settings() -> None:
    context = ssl.create_default_context()
    for name in ("ssl_cafile", "ssl_certfile"):
        assert f"conflicting {name}" in error_of(ssl_context=context, **{name: "/x.pem"})
    assert ConsumerConfig.from_kwargs(ssl_context=context).ssl_context is context


@pytest.mark.parametrize("name", ["ssl_keyfile", "ssl_password"])
def test_key_settings_need_a_certificate(name: str) -> None:
    message = error_of(**{name: SECRET})
    assert "missing ssl_certfile" in message
    assert SECRET not in message


# --- assignors ---

def test_known_assignors() -> None:
    assert frozenset({"range", "roundrobin", "cooperative-sticky"}) == KNOWN_ASSIGNORS


@pytest.mark.parametrize(("given", "expected"), [
    ("range", ("range",)),
    ("cooperative-sticky, range", ("cooperative-sticky", "range")),
    (["RoundRobin"], ("roundrobin",)),
    ("org.apache.kafka.clients.consumer.RangeAssignor,"
     "class org.apache.kafka.clients.consumer.CooperativeStickyAssignor", ("range", "cooperative-sticky")),
])
def test_assignor_names_are_normalised(given: Any, expected: tuple[str, ...]) -> None:
    config = ConsumerConfig.from_kwargs(partition_assignment_strategy=given)
    assert config.partition_assignment_strategy == expected


@pytest.mark.parametrize("given", ["sticky", "org.apache.kafka.clients.consumer.StickyAssignor", "",
                                   [], ["range", "range"], ["range", 1], 42])
def test_bad_assignors_are_rejected_with_the_known_names(given: Any) -> None:
    message = error_of(partition_assignment_strategy=given)
    assert "partition_assignment_strategy" in message
    assert "'cooperative-sticky'" in message


# --- unknown names ---

@pytest.mark.parametrize(("typo", "meant"), [
    ("session_timout_ms", "session_timeout_ms"),
    ("max_poll_record", "max_poll_records"),
    ("heartbeat_interval", "heartbeat_interval_ms"),
    ("auto_offset_rest", "auto_offset_reset"),
])
def test_misspelled_setting_gets_a_suggestion(typo: str, meant: str) -> None:
    message = error_of(**{typo: 1})
    assert f"unknown setting {typo!r}" in message
    assert f"did you mean {meant!r}?" in message


def test_unrelated_unknown_setting_gets_no_suggestion() -> None:
    message = error_of(banana=1)
    assert "unknown setting 'banana'" in message
    assert "did you mean" not in message


def test_dotted_name_in_kwargs_points_to_from_properties() -> None:
    message = error_of(**{"group.id": "g"})
    assert "from_properties" in message
    assert "did you mean 'group_id'?" in message


def test_misspelled_property_gets_a_dotted_suggestion() -> None:
    with pytest.raises(ConfigError, match=r"did you mean 'max\.poll\.interval\.ms'\?"):
        ConsumerConfig.from_properties({"max.poll.interval": 1000})


# --- from_properties ---

def test_from_properties_maps_java_names_and_converts_strings() -> None:
    config = ConsumerConfig.from_properties({
        "bootstrap.servers": "k1:9092,k2:9093",
        "group.id": "billing",
        "client.id": "svc",
        "max.poll.interval.ms": "60000",
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": " 2000 ",
        "enable.auto.commit": "FALSE",
        "check.crcs": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
        "security.protocol": "sasl_ssl",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": SECRET,
        "stall.warning.ratio": "0.25",
        "group.protocol": "classic",
    })
    assert config.bootstrap_servers == (("k1", 9092), ("k2", 9093))
    assert (config.group_id, config.client_id) == ("billing", "svc")
    assert (config.max_poll_interval_ms, config.session_timeout_ms, config.heartbeat_interval_ms) == (
        60000, 10000, 2000)
    assert config.enable_auto_commit is False
    assert config.check_crcs is False
    assert (config.auto_offset_reset, config.isolation_level) == ("earliest", "read_committed")
    assert config.partition_assignment_strategy == ("roundrobin",)
    assert (config.security_protocol, config.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-256")
    assert (config.sasl_plain_username, config.sasl_plain_password) == ("alice", SECRET)
    assert config.stall_warning_ratio == 0.25


def test_from_properties_maps_kip_909_bootstrap_resolve_timeout() -> None:
    config = ConsumerConfig.from_properties({"bootstrap.servers": "k1:9092",
                                             "bootstrap.resolve.timeout.ms": "120000"})
    assert config.bootstrap_resolve_timeout_ms == 120000
    assert config.bootstrap_resolve_timeout == 120.0


def test_from_properties_librdkafka_ssl_aliases() -> None:
    config = ConsumerConfig.from_properties({
        "ssl.ca.location": "/ca.pem", "ssl.certificate.location": "/c.pem",
        "ssl.key.location": "/k.pem", "ssl.key.password": SECRET, "sasl.mechanisms": "plain",
    })
    assert (config.ssl_cafile, config.ssl_certfile, config.ssl_keyfile) == ("/ca.pem", "/c.pem", "/k.pem")
    assert config.ssl_password == SECRET
    assert config.sasl_mechanism == "PLAIN"


@pytest.mark.parametrize(("algorithm", "expected"), [("https", True), ("HTTPS", True), ("", False)])
def test_endpoint_identification_maps_to_hostname_check(algorithm: str, expected: bool) -> None:
    config = ConsumerConfig.from_properties({"ssl.endpoint.identification.algorithm": algorithm})
    assert config.ssl_check_hostname is expected


def test_unknown_endpoint_identification_algorithm_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"ssl\.endpoint\.identification\.algorithm"):
        ConsumerConfig.from_properties({"ssl.endpoint.identification.algorithm": "ldap"})


@pytest.mark.parametrize(("key", "text"), [
    ("max.poll.records", "12.5"), ("max.poll.records", "many"), ("max.poll.records", ""),
    ("enable.auto.commit", "yes"), ("check.crcs", "1"), ("stall.warning.ratio", "half"),
])
def test_unconvertible_strings_are_rejected(key: str, text: str) -> None:
    with pytest.raises(ConfigError, match=f"invalid {re.escape(key)}=") as info:
        ConsumerConfig.from_properties({"group.id": "g", key: text})
    assert repr(text) in str(info.value)


def test_converted_values_are_still_range_checked() -> None:
    with pytest.raises(ConfigError, match=r"max\.poll\.records=0"):
        ConsumerConfig.from_properties({"max.poll.records": "0"})


@pytest.mark.parametrize("key", ["interceptor.classes", "metric.reporters", "client.dns.lookup",
                                 "ssl.truststore.location", "ssl.keystore.password", "sasl.jaas.config",
                                 "sasl.kerberos.service.name", "sasl.oauthbearer.jwks.endpoint.url"])
def test_known_but_unsupported_java_settings_are_rejected(key: str) -> None:
    with pytest.raises(ConfigError, match="unsupported setting") as info:
        ConsumerConfig.from_properties({key: "x"})
    assert key in str(info.value)


def test_group_protocol_defaults_to_classic_and_accepts_consumer() -> None:
    assert ConsumerConfig().group_protocol == "classic"
    assert ConsumerConfig().group_remote_assignor is None
    config = ConsumerConfig.from_properties({"group.id": "g", "group.protocol": "CONSUMER",
                                             "group.remote.assignor": "uniform"})
    assert (config.group_protocol, config.group_remote_assignor) == ("consumer", "uniform")
    assert ConsumerConfig.from_kwargs(group_protocol="consumer", group_remote_assignor="range") \
        .group_remote_assignor == "range"


@pytest.mark.parametrize(("key", "value"), [("group_protocol", "kip848"), ("group_protocol", None),
                                            ("group_remote_assignor", "sticky"),
                                            ("group_remote_assignor", 1)])
def test_invalid_group_protocol_settings_are_rejected(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=key):
        ConsumerConfig.from_kwargs(**({"group_protocol": "consumer"} | {key: value}))


@pytest.mark.parametrize(("name", "value", "broker_setting"), [
    ("session_timeout_ms", 45000, "group.consumer.session.timeout.ms"),   # even the default value
    ("heartbeat_interval_ms", 1000, "group.consumer.heartbeat.interval.ms"),
    ("partition_assignment_strategy", ["range"], "group.consumer.assignors"),
])
def test_consumer_protocol_refuses_explicit_broker_owned_settings(name: str, value: Any,
                                                                  broker_setting: str) -> None:
    with pytest.raises(ConfigError, match=name) as info:
        ConsumerConfig.from_kwargs(group_id="g", group_protocol="consumer", **{name: value})
    assert broker_setting in str(info.value)
    assert "KIP-848" in str(info.value)
    ConsumerConfig.from_kwargs(group_id="g", group_protocol="classic", **{name: value})  # fine there


def test_consumer_protocol_refuses_broker_owned_properties() -> None:
    with pytest.raises(ConfigError, match=r"invalid session\.timeout\.ms with group\.protocol='consumer'"):
        ConsumerConfig.from_properties({"group.protocol": "consumer", "session.timeout.ms": "30000"})


def test_direct_construction_refuses_non_default_broker_owned_settings() -> None:
    with pytest.raises(ConfigError, match="heartbeat_interval_ms"):
        ConsumerConfig(group_protocol="consumer", heartbeat_interval_ms=1000)
    assert ConsumerConfig(group_protocol="consumer").session_timeout_ms == 45000


def test_remote_assignor_needs_the_consumer_protocol() -> None:
    with pytest.raises(ConfigError, match=r"group_remote_assignor='range'.*consumer"):
        ConsumerConfig.from_kwargs(group_remote_assignor="range")


def test_same_setting_twice_through_an_alias_is_rejected() -> None:
    with pytest.raises(ConfigError, match=re.escape("'sasl.username' given twice (again as 'sasl.plain.username')")):
        ConsumerConfig.from_properties({"sasl.username": "a", "sasl.plain.username": "b"})


def test_from_properties_accepts_objects_by_field_name() -> None:
    context = ssl.create_default_context()
    config = ConsumerConfig.from_properties({"security.protocol": "SSL", "ssl_context": context})
    assert config.ssl_context is context


# --- secrets never leak ---

def test_passwords_are_masked_in_repr_and_str() -> None:
    config = ConsumerConfig.from_kwargs(**SASL, sasl_plain_password=SECRET, ssl_certfile="/c.pem",
                                        ssl_password=SECRET + "x")
    for text in (repr(config), str(config), f"{config}"):
        assert SECRET not in text
        assert "sasl_plain_password='***'" in text
        assert "ssl_password='***'" in text
        assert "sasl_plain_username='alice'" in text


def test_unset_passwords_show_as_none() -> None:
    assert "sasl_plain_password=None" in repr(ConsumerConfig())


def test_secret_fields_are_excluded_from_dataclass_repr() -> None:
    hidden = {f.name for f in dataclasses.fields(ConsumerConfig) if not f.repr}
    assert hidden == {"sasl_plain_password", "ssl_password", "sasl_oauthbearer_client_credentials_client_secret",
                      "sasl_oauthbearer_assertion_private_key_passphrase"}


@pytest.mark.parametrize("name", ["sasl_plain_password", "ssl_password"])
def test_invalid_password_values_are_not_echoed(name: str) -> None:
    bad_secret = [SECRET]  # not a str
    message = error_of(ssl_certfile="/c.pem", **{name: bad_secret})
    assert name in message
    assert SECRET not in message
    assert "'***'" in message


def test_unrelated_errors_do_not_mention_the_password() -> None:
    message = error_of(**SASL, sasl_plain_password=SECRET, max_poll_records=0)
    assert SECRET not in message


# --- derived values ---

def test_seconds_views() -> None:
    config = ConsumerConfig.from_kwargs(group_id="g", session_timeout_ms=10000, heartbeat_interval_ms=2500,
                                        max_poll_interval_ms=60000, request_timeout_ms=20000,
                                        default_api_timeout_ms=15000, retry_backoff_ms=250,
                                        metadata_max_age_ms=30000, auto_commit_interval_ms=1500)
    assert (config.session_timeout, config.heartbeat_interval) == (10.0, 2.5)
    assert (config.max_poll_interval, config.rebalance_timeout) == (60.0, 60.0)
    assert (config.request_timeout, config.default_api_timeout) == (20.0, 15.0)
    assert (config.retry_backoff, config.retry_backoff_max) == (0.25, 1.0)
    assert (config.reconnect_backoff, config.reconnect_backoff_max) == (0.05, 1.0)
    assert (config.metadata_max_age, config.auto_commit_interval, config.fetch_max_wait) == (30.0, 1.5, 0.5)
    assert config.stall_warning_threshold == 5.0


def test_join_group_timeout_is_rebalance_timeout_plus_five_seconds() -> None:
    assert ConsumerConfig().join_group_request_timeout == 305.0
    short = ConsumerConfig.from_kwargs(max_poll_interval_ms=1000, request_timeout_ms=30000)
    assert short.join_group_request_timeout == 30.0  # never below the plain request timeout


# --- TLS context ---

def test_no_tls_context_without_tls() -> None:
    assert ConsumerConfig().build_ssl_context() is None
    assert ConsumerConfig.from_kwargs(**SASL, sasl_plain_password="p").build_ssl_context() is None


@pytest.mark.parametrize("check_hostname", [True, False])
def test_default_tls_context_verifies_certificates(check_hostname: bool) -> None:
    config = ConsumerConfig.from_kwargs(security_protocol="SSL", ssl_check_hostname=check_hostname)
    context = config.build_ssl_context()
    assert context is not None
    assert context.check_hostname is check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED


def test_given_tls_context_is_used_as_is() -> None:
    given = ssl.create_default_context()
    config = ConsumerConfig.from_kwargs(security_protocol="SASL_SSL", ssl_context=given,
                                        sasl_plain_username="u", sasl_plain_password="p")
    assert config.build_ssl_context() is given


def test_missing_ca_file_is_a_config_error(tmp_path: Path) -> None:
    config = ConsumerConfig.from_kwargs(security_protocol="SSL", ssl_cafile=str(tmp_path / "none.pem"))
    with pytest.raises(ConfigError, match="ssl_cafile"):
        config.build_ssl_context()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_encrypted_client_key_loads_and_a_wrong_password_does_not_leak(tmp_path: Path) -> None:
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=test", "-passout", f"pass:{SECRET}"],
                   check=True, capture_output=True)
    settings = {"security_protocol": "SSL", "ssl_certfile": str(cert), "ssl_keyfile": str(key)}
    assert ConsumerConfig.from_kwargs(**settings, ssl_password=SECRET).build_ssl_context() is not None
    wrong = ConsumerConfig.from_kwargs(**settings, ssl_password=SECRET + "-wrong")
    with pytest.raises(ConfigError, match="ssl_certfile") as info:
        wrong.build_ssl_context()
    assert SECRET not in str(info.value)


# --- settings table ---

def test_settings_table_covers_every_setting_with_its_default() -> None:
    reference = ConsumerConfig(group_id="g")  # a group keeps enable_auto_commit at its default
    rows = settings_table()
    assert [row.name for row in rows] == [f.name for f in dataclasses.fields(ConsumerConfig)]
    assert tuple(rows) == SETTINGS_TABLE
    for row in rows:
        assert row.description.strip(), row.name
        if row.name != "group_id":
            assert row.default == getattr(reference, row.name), row.name


def test_settings_table_descriptions_say_what_timeouts_govern() -> None:
    docs = {row.name: row.description for row in SETTINGS_TABLE}
    assert "heartbeat" in docs["session_timeout_ms"]
    assert "poll()" in docs["max_poll_interval_ms"]
    assert "rebalance" in docs["max_poll_interval_ms"]
    assert "pattern" in docs["metadata_max_age_ms"]


def test_retry_backoff_max_from_java_property_names() -> None:
    config = ConsumerConfig.from_properties({"retry.backoff.ms": "200", "retry.backoff.max.ms": "5000"})
    assert (config.retry_backoff_ms, config.retry_backoff_max_ms) == (200, 5000)
    assert config.retry_backoff_max == 5.0
    config = ConsumerConfig.from_properties({"retry.backoff.ms": "200", "retry.backoff.max.ms": "50"})
    assert (config.retry_backoff, config.retry_backoff_max) == (0.2, 0.05)  # Java: static 50 ms


def test_thread_heartbeats_work_with_either_group_protocol() -> None:
    for protocol in ("classic", "consumer"):
        config = ConsumerConfig.from_kwargs(group_id="g", group_protocol=protocol, heartbeat_mode="thread")
        assert config.heartbeat_mode == "thread"


# --- fetch_connections_per_broker: "auto" (the default) or a number of connections ---

def test_fetch_connections_per_broker_is_auto_by_default() -> None:
    assert ConsumerConfig.from_kwargs().fetch_connections_per_broker == "auto"


@pytest.mark.parametrize(("given", "expected"), [
    ("auto", "auto"), (" AUTO ", "auto"), ("Auto", "auto"), (1, 1), (2, 2), (8, 8)])
def test_fetch_connections_per_broker_takes_auto_or_one_to_eight(given: Any, expected: Any) -> None:
    assert ConsumerConfig.from_kwargs(fetch_connections_per_broker=given).fetch_connections_per_broker == expected


@pytest.mark.parametrize("given", [0, 9, -1, True, 2.0, "2", "", "automatic", None, [2]])
def test_fetch_connections_per_broker_refuses_anything_else_naming_it(given: Any) -> None:
    message = error_of(fetch_connections_per_broker=given)
    assert f"fetch_connections_per_broker={given!r}" in message
    assert "'auto' or an int, 1 <= value <= 8" in message


@pytest.mark.parametrize(("text", "expected"), [("auto", "auto"), ("AUTO", "auto"), ("1", 1), (" 3 ", 3)])
def test_fetch_connections_per_broker_from_properties(text: str, expected: Any) -> None:
    config = ConsumerConfig.from_properties({"fetch.connections.per.broker": text})
    assert config.fetch_connections_per_broker == expected


@pytest.mark.parametrize("text", ["0", "9", "two", "auto2", "2.5"])
def test_fetch_connections_per_broker_property_text_refused(text: str) -> None:
    with pytest.raises(ConfigError, match=r"fetch\.connections\.per\.broker="):
        ConsumerConfig.from_properties({"fetch.connections.per.broker": text})
