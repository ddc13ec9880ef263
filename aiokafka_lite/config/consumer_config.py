"""ConsumerConfig: every consumer setting in one validated, frozen object.

Names are Kafka's consumer settings in snake_case (``max.poll.interval.ms`` -> ``max_poll_interval_ms``)
and defaults are the Java KafkaConsumer's (KIP-735: 45 s session timeout). Each field carries its own
check and a one-line description in its metadata, so validation and the README settings table come
from the same place. Anything wrong raises :class:`ConfigError` naming the setting, the value and what
is allowed; secrets are never echoed.

Auto-commit without a group: commits need a group, so with ``group_id=None`` auto-commit is off.
As in Java, leaving ``enable_auto_commit`` at its default turns it off silently, while an explicit
``enable_auto_commit=True`` through :meth:`ConsumerConfig.from_kwargs` / ``from_properties`` is an
error (the caller believes offsets are being committed). Direct construction can't tell the two
apart and always turns it off silently.

``group_protocol="consumer"`` (KIP-848): the broker owns the session timeout, the heartbeat
interval and the assignment (``group.consumer.session.timeout.ms``,
``group.consumer.heartbeat.interval.ms``, ``group.consumer.assignors``), so, as in Java, setting
``session_timeout_ms``, ``heartbeat_interval_ms`` or ``partition_assignment_strategy`` explicitly
is an error. ``from_kwargs``/``from_properties`` know which settings were given; direct
construction catches a value other than the default.
"""

from __future__ import annotations

import contextvars
import difflib
import logging
import re
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple, overload

from aiokafka_lite.config.security import java_only_hint, unused_security_settings
from aiokafka_lite.errors import ConfigError

__all__ = ["KNOWN_ASSIGNORS", "SETTINGS_TABLE", "ConsumerConfig", "Deserializer", "SettingRow",
           "settings_table"]

Deserializer = Callable[[bytes | None], Any]
log = logging.getLogger("aiokafka_lite.config")

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
DEFAULT_PORT = 9092
DEFAULT_SERVERS = (("localhost", DEFAULT_PORT),)
KNOWN_ASSIGNORS = frozenset({"range", "roundrobin", "cooperative-sticky"})
# Java's default since 3.0 (KIP-726): range, with cooperative-sticky listed for a later rolling upgrade.
DEFAULT_ASSIGNORS = ("range", "cooperative-sticky")
# Java waits this much longer than the rebalance timeout for a JoinGroup response, because the
# coordinator may legitimately hold the request for the whole rebalance timeout.
JOIN_GROUP_TIMEOUT_MARGIN_MS = 5000
SECRET_SETTINGS = frozenset({"sasl_plain_password", "ssl_password"})
_MASK = "'***'"

_JAVA_ASSIGNOR_CLASSES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}
_GROUP_INSTANCE_ID = re.compile(r"[a-zA-Z0-9._-]{1,249}")  # Java's rule for static member ids
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")


# Inside from_properties: {field name: the dotted name the caller wrote}. Errors name a setting as
# the caller spelled it: "retry_backoff_ms" through keyword arguments, "retry.backoff.ms" here.
_SPELLING: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "aiokafka_lite_setting_spelling", default=None)


def _n(name: str) -> str:
    """A setting's name as the caller writes it (the Java dotted name inside from_properties)."""
    given = _SPELLING.get()
    return name if given is None else given.get(name, name.replace("_", "."))


def _shown(name: str, value: object) -> str:
    return _MASK if name in SECRET_SETTINGS else repr(value)


def _invalid(name: str, value: object, allowed: str) -> ConfigError:
    return ConfigError(f"invalid {_n(name)}={_shown(name, value)}: expected {allowed}")


# --- per-setting checks: check() validates/normalises a value, parse() reads property-file text ---

class _Check:
    def check(self, name: str, value: Any) -> Any:
        raise NotImplementedError

    def parse(self, name: str, text: str) -> Any:
        return text


class _Int(_Check):
    def __init__(self, minimum: int, maximum: int = INT32_MAX, special: tuple[int, ...] = ()) -> None:
        self.minimum, self.maximum, self.special = minimum, maximum, special
        extra = "".join(f"{s} or " for s in special)
        self.allowed = f"an int, {extra}{minimum} <= value <= {maximum}"

    def check(self, name: str, value: Any) -> Any:
        # bool is an int subclass: True must not pass as 1.
        if isinstance(value, bool) or not isinstance(value, int):
            raise _invalid(name, value, self.allowed)
        if value not in self.special and not self.minimum <= value <= self.maximum:
            raise _invalid(name, value, self.allowed)
        return value

    def parse(self, name: str, text: str) -> Any:
        if not _INTEGER_TEXT.fullmatch(text.strip()):
            raise _invalid(name, text, self.allowed)
        return int(text.strip())


class _Bool(_Check):
    def check(self, name: str, value: Any) -> Any:
        if not isinstance(value, bool):
            raise _invalid(name, value, "True or False")
        return value

    def parse(self, name: str, text: str) -> Any:
        lowered = text.strip().lower()
        if lowered not in ("true", "false"):
            raise _invalid(name, text, "'true' or 'false'")
        return lowered == "true"


class _Ratio(_Check):
    allowed = "a number, 0 < value <= 1"

    def check(self, name: str, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
            raise _invalid(name, value, self.allowed)
        return float(value)

    def parse(self, name: str, text: str) -> Any:
        try:
            return float(text)
        except ValueError:
            raise _invalid(name, text, self.allowed) from None


class _Choice(_Check):
    def __init__(self, *choices: str, upper: bool = False) -> None:
        self.choices, self.upper = choices, upper

    def check(self, name: str, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip().upper() if self.upper else value.strip().lower()
            if value in self.choices:
                return value
        raise _invalid(name, value, "one of " + ", ".join(map(repr, self.choices)))


class _Text(_Check):
    def __init__(self, optional: bool = True, non_empty: bool = False) -> None:
        self.optional, self.non_empty = optional, non_empty

    def check(self, name: str, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if not isinstance(value, str) or (self.non_empty and not value):
            allowed = "a non-empty str" if self.non_empty else "a str"
            raise _invalid(name, value, allowed + (" or None" if self.optional else ""))
        return value


class _GroupInstanceId(_Check):
    def check(self, name: str, value: Any) -> Any:
        if value is None or (isinstance(value, str) and _GROUP_INSTANCE_ID.fullmatch(value)):
            return value
        raise _invalid(name, value, "None or 1-249 characters from [a-zA-Z0-9._-]")


class _Callable(_Check):
    def check(self, name: str, value: Any) -> Any:
        if value is not None and not callable(value):
            raise _invalid(name, value, "None or a callable taking bytes | None")
        return value


class _SslContext(_Check):
    def check(self, name: str, value: Any) -> Any:
        if value is not None and not isinstance(value, ssl.SSLContext):
            raise _invalid(name, value, "None or an ssl.SSLContext")
        return value


class _Servers(_Check):
    allowed = "'host:port' entries, as a comma-separated str or a list (IPv6 as '[::1]:9092')"

    def check(self, name: str, value: Any) -> Any:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple):
            raise _invalid(name, value, self.allowed)
        servers: list[tuple[str, int]] = []
        for entry in value:
            if isinstance(entry, str):
                servers += [self._parse(name, part.strip()) for part in entry.split(",") if part.strip()]
            else:
                servers.append(self._pair(name, entry))
        if not servers:
            raise _invalid(name, value, "at least one " + self.allowed)
        return tuple(dict.fromkeys(servers))  # drop duplicates, keep order

    def _pair(self, name: str, entry: Any) -> tuple[str, int]:
        if isinstance(entry, tuple) and len(entry) == 2:
            host, port = entry
            valid_port = isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536
            if isinstance(host, str) and host and not any(c.isspace() for c in host) and valid_port:
                return host, port
        raise _invalid(name, entry, self.allowed + ", with a port in 1..65535")

    def _parse(self, name: str, entry: str) -> tuple[str, int]:
        if entry.startswith("["):
            host, bracket, rest = entry[1:].partition("]")
            has_port, port_text = rest.startswith(":"), rest[1:]
            if not bracket or (rest and not has_port):
                raise _invalid(name, entry, self.allowed)
        elif entry.count(":") > 1:
            raise _invalid(name, entry, "IPv6 addresses in brackets, e.g. '[::1]:9092'")
        else:
            host, colon, port_text = entry.partition(":")
            has_port = bool(colon)
        if not has_port:
            return self._pair(name, (host, DEFAULT_PORT))
        if not re.fullmatch(r"[0-9]{1,5}", port_text):
            raise _invalid(name, entry, self.allowed + ", with a port in 1..65535")
        return self._pair(name, (host, int(port_text)))


class _Assignors(_Check):
    def check(self, name: str, value: Any) -> Any:
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list | tuple):
            raise _invalid(name, value, self._allowed())
        names = [self._one(name, value, item) for item in items if not isinstance(item, str) or item.strip()]
        if not names or len(set(names)) != len(names):
            raise _invalid(name, value, "a non-empty list without repeats of " + self._allowed())
        return tuple(names)

    def _one(self, name: str, whole: Any, item: Any) -> str:
        if isinstance(item, str):
            text = item.strip().removeprefix("class ").strip()
            short = _JAVA_ASSIGNOR_CLASSES.get(text, text.lower())
            if short in KNOWN_ASSIGNORS:
                return short
        raise _invalid(name, whole, self._allowed())

    @staticmethod
    def _allowed() -> str:
        return "assignor names among " + ", ".join(map(repr, sorted(KNOWN_ASSIGNORS)))


class _Assignor848(_Check):
    choices = ("uniform", "range")

    def check(self, name: str, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str) and value.strip().lower() in self.choices:
            return value.strip().lower()
        raise _invalid(name, value, "None (the broker's default) or one of 'uniform', 'range'")


def _meta(check: _Check, doc: str) -> dict[str, Any]:
    return {"check": check, "doc": doc}


class _Seconds:
    """A read-only view of an ``*_ms`` setting in seconds (durations are seconds in the API)."""

    def __init__(self, ms_name: str) -> None:
        self.ms_name = ms_name

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> _Seconds: ...
    @overload
    def __get__(self, instance: object, owner: type[Any]) -> float: ...
    def __get__(self, instance: object | None, owner: type[Any]) -> float | _Seconds:
        return self if instance is None else float(getattr(instance, self.ms_name)) / 1000


@dataclass(frozen=True, slots=True, repr=False)
class ConsumerConfig:
    """Consumer settings; build with :meth:`from_kwargs` or :meth:`from_properties`."""

    bootstrap_servers: tuple[tuple[str, int], ...] = field(default=DEFAULT_SERVERS, metadata=_meta(
        _Servers(), "Brokers to bootstrap from ('h1:9092,h2:9092' or a list); the rest are discovered."))
    client_id: str = field(default="aiokafka-lite", metadata=_meta(
        _Text(optional=False), "Name sent with every request, for broker logs and quotas."))
    group_id: str | None = field(default=None, metadata=_meta(
        _Text(non_empty=True), "Consumer group; None means no group (assign() only, no commits)."))
    group_instance_id: str | None = field(default=None, metadata=_meta(
        _GroupInstanceId(), "Static membership id (KIP-345): a restart within session_timeout_ms "
        "keeps the assignment without a rebalance. Needs group_id."))
    session_timeout_ms: int = field(default=45000, metadata=_meta(
        _Int(1), "Time without heartbeats after which the coordinator evicts this member; must be "
        "within the broker's group.min/max.session.timeout.ms."))
    heartbeat_interval_ms: int = field(default=3000, metadata=_meta(
        _Int(1), "Time between heartbeats; below session_timeout_ms, ideally at most a third of it."))
    max_poll_interval_ms: int = field(default=300000, metadata=_meta(
        _Int(1), "Longest gap allowed between poll() calls before this member leaves the group; "
        "also the rebalance timeout sent in JoinGroup."))
    max_poll_records: int = field(default=500, metadata=_meta(_Int(1), "Most records one poll() returns."))
    request_timeout_ms: int = field(default=30000, metadata=_meta(
        _Int(1), "Time to wait for a broker's response to one request (JoinGroup waits longer)."))
    default_api_timeout_ms: int = field(default=60000, metadata=_meta(
        _Int(1), "Timeout of awaitable methods (commit, committed, position...) when none is given."))
    retry_backoff_ms: int = field(default=100, metadata=_meta(
        _Int(0, INT64_MAX), "First wait before retrying a failed request; 0 retries at once."))
    retry_backoff_max_ms: int = field(default=1000, metadata=_meta(
        _Int(0, INT64_MAX), "Cap of the exponential retry backoff (KIP-580); below retry_backoff_ms, "
        "a static backoff of this much (as Java)."))
    reconnect_backoff_ms: int = field(default=50, metadata=_meta(
        _Int(0, INT64_MAX), "First wait before reconnecting to a broker."))
    reconnect_backoff_max_ms: int = field(default=1000, metadata=_meta(
        _Int(0, INT64_MAX), "Cap of the exponential reconnect backoff."))
    connections_max_idle_ms: int = field(default=540000, metadata=_meta(
        _Int(1, INT64_MAX, special=(-1,)), "Close connections idle this long; -1 never does."))
    metadata_max_age_ms: int = field(default=300000, metadata=_meta(
        _Int(1, INT64_MAX), "Refresh cluster metadata at least this often; also how soon a pattern "
        "subscription sees new topics."))
    metadata_recovery_strategy: str = field(default="rebootstrap", metadata=_meta(
        _Choice("rebootstrap", "none"), "When no known broker answers for metadata: rebootstrap "
        "(bootstrap_servers again, KIP-899) or none (keep trying the known brokers)."))
    metadata_recovery_rebootstrap_trigger_ms: int = field(default=300000, metadata=_meta(
        _Int(0, INT64_MAX), "With rebootstrap: also bootstrap again after this long without "
        "metadata from any known broker (KIP-1102)."))
    enable_auto_commit: bool = field(default=True, metadata=_meta(
        _Bool(), "Commit the offsets of handed-out records in the background (needs group_id)."))
    auto_commit_interval_ms: int = field(default=5000, metadata=_meta(
        _Int(1), "Time between automatic commits."))
    auto_offset_reset: str = field(default="latest", metadata=_meta(
        _Choice("earliest", "latest", "none"),
        "Where to start without a valid committed offset: earliest, latest, or none (raise). "
        "With none, a truncated log (KIP-320) raises LogTruncationError instead of going back to "
        "where it diverges."))
    isolation_level: str = field(default="read_uncommitted", metadata=_meta(
        _Choice("read_uncommitted", "read_committed"),
        "read_committed hides aborted and still-open transactional records."))
    fetch_min_bytes: int = field(default=1, metadata=_meta(
        _Int(0), "Bytes a fetch response should hold before the broker answers."))
    fetch_max_wait_ms: int = field(default=500, metadata=_meta(
        _Int(0), "Longest time the broker holds a fetch waiting for fetch_min_bytes; must be "
        "below request_timeout_ms."))
    fetch_max_bytes: int = field(default=52428800, metadata=_meta(
        _Int(0), "Soft cap on one fetch response (a bigger first batch still comes through)."))
    max_partition_fetch_bytes: int = field(default=1048576, metadata=_meta(
        _Int(0), "Soft cap on the data per partition in one fetch response."))
    check_crcs: bool = field(default=True, metadata=_meta(_Bool(), "Verify each record batch's CRC32C."))
    exclude_internal_topics: bool = field(default=True, metadata=_meta(
        _Bool(), "Keep internal topics (__consumer_offsets) out of pattern subscriptions."))
    allow_auto_create_topics: bool = field(default=True, metadata=_meta(
        _Bool(), "Let metadata requests create subscribed topics, if the broker allows it."))
    partition_assignment_strategy: tuple[str, ...] = field(default=DEFAULT_ASSIGNORS, metadata=_meta(
        _Assignors(), "Assignors in order of preference: range, roundrobin, cooperative-sticky."))
    client_rack: str = field(default="", metadata=_meta(
        _Text(optional=False), "Rack of this client, to fetch from the closest replica (KIP-392)."))
    key_deserializer: Deserializer | None = field(default=None, metadata=_meta(
        _Callable(), "Callable turning key bytes (or None) into the record key."))
    value_deserializer: Deserializer | None = field(default=None, metadata=_meta(
        _Callable(), "Callable turning value bytes (or None) into the record value."))
    security_protocol: str = field(default="PLAINTEXT", metadata=_meta(
        _Choice("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", upper=True),
        "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."))
    ssl_context: ssl.SSLContext | None = field(default=None, metadata=_meta(
        _SslContext(), "A ready SSLContext; when set, the ssl_* file settings must be unset."))
    ssl_cafile: str | None = field(default=None, metadata=_meta(
        _Text(), "CA bundle to verify brokers (default: the system's CAs)."))
    ssl_certfile: str | None = field(default=None, metadata=_meta(
        _Text(), "Client certificate (PEM) for mutual TLS."))
    ssl_keyfile: str | None = field(default=None, metadata=_meta(
        _Text(), "Private key of ssl_certfile, if in a separate file."))
    ssl_password: str | None = field(default=None, repr=False, metadata=_meta(
        _Text(), "Password of the client's private key."))
    ssl_check_hostname: bool = field(default=True, metadata=_meta(
        _Bool(), "Check the broker's certificate names its host "
        "(ssl.endpoint.identification.algorithm=https)."))
    sasl_mechanism: str = field(default="PLAIN", metadata=_meta(
        _Choice("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", upper=True),
        "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."))
    sasl_plain_username: str | None = field(default=None, metadata=_meta(_Text(), "SASL user name."))
    sasl_plain_password: str | None = field(default=None, repr=False, metadata=_meta(
        _Text(), "SASL password."))
    group_protocol: str = field(default="classic", metadata=_meta(
        _Choice("classic", "consumer"), "Group protocol: classic (JoinGroup/SyncGroup) or consumer "
        "(KIP-848: the broker assigns; Kafka 4.0+)."))
    group_remote_assignor: str | None = field(default=None, metadata=_meta(
        _Assignor848(), "With group_protocol='consumer': the broker-side assignor, uniform or range; "
        "None lets the broker choose (group.consumer.assignors)."))
    heartbeat_mode: str = field(default="task", metadata=_meta(
        _Choice("task", "thread"), "Heartbeat from an asyncio task, or from a thread that keeps "
        "the session alive while the event loop is blocked."))
    stall_warning_ratio: float = field(default=0.5, metadata=_meta(
        _Ratio(), "Warn when the event loop stalls longer than this fraction of session_timeout_ms."))

    # Durations in seconds, for asyncio.
    session_timeout = _Seconds("session_timeout_ms")
    heartbeat_interval = _Seconds("heartbeat_interval_ms")
    max_poll_interval = _Seconds("max_poll_interval_ms")
    # The coordinator waits this long for members to rejoin; Kafka uses max.poll.interval.ms for it.
    rebalance_timeout = _Seconds("max_poll_interval_ms")
    request_timeout = _Seconds("request_timeout_ms")
    default_api_timeout = _Seconds("default_api_timeout_ms")
    retry_backoff = _Seconds("retry_backoff_ms")
    retry_backoff_max = _Seconds("retry_backoff_max_ms")
    reconnect_backoff = _Seconds("reconnect_backoff_ms")
    reconnect_backoff_max = _Seconds("reconnect_backoff_max_ms")
    metadata_max_age = _Seconds("metadata_max_age_ms")
    metadata_recovery_rebootstrap_trigger = _Seconds("metadata_recovery_rebootstrap_trigger_ms")
    auto_commit_interval = _Seconds("auto_commit_interval_ms")
    fetch_max_wait = _Seconds("fetch_max_wait_ms")
    connections_max_idle = _Seconds("connections_max_idle_ms")

    def __post_init__(self) -> None:
        for setting in fields(self):
            value = setting.metadata["check"].check(setting.name, getattr(self, setting.name))
            object.__setattr__(self, setting.name, value)
        self._check_timeouts()
        self._check_group()
        self._check_security()
        if self.group_id is None and self.enable_auto_commit:
            object.__setattr__(self, "enable_auto_commit", False)  # no group, nothing to commit to

    def _check_timeouts(self) -> None:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError(
                f"invalid {_n('heartbeat_interval_ms')}={self.heartbeat_interval_ms}: it must be lower "
                f"than {_n('session_timeout_ms')}={self.session_timeout_ms} (Kafka requires it), and at "
                "most a third of it so that one late heartbeat does not end the session")
        if self.fetch_max_wait_ms >= self.request_timeout_ms:
            raise ConfigError(
                f"invalid {_n('fetch_max_wait_ms')}={self.fetch_max_wait_ms}: it must be lower than "
                f"{_n('request_timeout_ms')}={self.request_timeout_ms}, or a fetch with no new data "
                "would time out instead of coming back empty")
        for base, cap in (("retry_backoff_ms", "retry_backoff_max_ms"),
                          ("reconnect_backoff_ms", "reconnect_backoff_max_ms")):
            if getattr(self, base) > getattr(self, cap):
                # As Java (CommonClientConfigs.warnDisablingExponentialBackoff): allowed, and the
                # cap becomes a static backoff.
                log.warning("%s=%d is greater than %s=%d: a static backoff of %d ms will be applied",
                            _n(base), getattr(self, base), _n(cap), getattr(self, cap), getattr(self, cap))

    def _check_group(self) -> None:
        if self.group_instance_id is not None and self.group_id is None:
            raise ConfigError(f"invalid {_n('group_instance_id')}={self.group_instance_id!r}: static "
                              f"membership needs a group; set {_n('group_id')} too")
        if self.group_protocol == "consumer":
            # Direct construction: a value other than the default was surely set by the caller.
            _refuse_broker_owned(n for n in BROKER_OWNED_SETTINGS
                                 if getattr(self, n) != _SETTING_DEFAULTS[n])
        elif self.group_remote_assignor is not None:
            raise ConfigError(f"invalid {_n('group_remote_assignor')}={self.group_remote_assignor!r}: "
                              f"it applies to {_n('group_protocol')}='consumer' only (now 'classic'); "
                              f"use {_n('partition_assignment_strategy')} with the classic protocol")

    def _check_security(self) -> None:
        if self.security_protocol.startswith("SASL_"):
            for name in ("sasl_plain_username", "sasl_plain_password"):
                if not getattr(self, name):
                    raise ConfigError(f"missing {_n(name)}: {_n('security_protocol')}="
                                      f"{self.security_protocol!r} with {_n('sasl_mechanism')}="
                                      f"{self.sasl_mechanism!r} needs {_n('sasl_plain_username')} and "
                                      f"{_n('sasl_plain_password')}")
        if self.ssl_context is not None:
            for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password"):
                if getattr(self, name) is not None:
                    raise ConfigError(f"conflicting {_n(name)}: it would be ignored because "
                                      f"{_n('ssl_context')} is set; configure the context instead")
        for name in ("ssl_keyfile", "ssl_password"):
            if getattr(self, name) is not None and self.ssl_certfile is None:
                raise ConfigError(f"missing {_n('ssl_certfile')}: {_n(name)} is set but belongs to a "
                                  f"client certificate, which {_n('ssl_certfile')} names")

    def __repr__(self) -> str:
        shown = (f"{s.name}={self._shown_value(s.name)}" for s in fields(self))
        return f"ConsumerConfig({', '.join(shown)})"

    def _shown_value(self, name: str) -> str:
        value = getattr(self, name)
        return _MASK if name in SECRET_SETTINGS and value is not None else repr(value)

    # --- constructors ---

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> ConsumerConfig:
        """Settings by their snake_case names; unknown names raise with a suggestion.

        ssl_* / sasl_* settings that the security_protocol does not use are logged once, as a
        WARNING naming them and the protocol that would use them."""
        for name in kwargs:
            if name not in _FIELD_NAMES:
                hint = java_only_hint(name.replace("_", "."), _n, dotted=False)
                if hint is not None:
                    raise ConfigError(f"unsupported setting {name!r}: {hint}")
                raise _unknown(name, _FIELD_NAMES, "setting")
        settings = dict(kwargs)
        if isinstance(settings.get("group_protocol"), str) \
                and settings["group_protocol"].strip().lower() == "consumer":
            _refuse_broker_owned(n for n in BROKER_OWNED_SETTINGS if n in settings)
        _raise_unset_backoff_caps(settings)
        config = cls(**settings)
        if settings.get("enable_auto_commit") is True and config.group_id is None:
            auto, group = _n("enable_auto_commit"), _n("group_id")
            raise ConfigError(f"invalid {auto}=True: commits need a group, and {group} is None; "
                              f"set {group} or leave {auto} unset/False")
        unused = unused_security_settings(
            config.security_protocol, (n for n in _FIELD_NAMES if settings.get(n) is not None), _n)
        if unused is not None:
            log.warning("%s", unused)
        return config

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> ConsumerConfig:
        """Settings by Java/librdkafka dotted names ("group.id"); string values are converted.

        Exact field names are accepted too, for values with no dotted form (``ssl_context``).
        """
        spelling: dict[str, str] = {}
        token = _SPELLING.set(spelling)
        try:
            settings: dict[str, Any] = {}
            for key, value in properties.items():
                name = _property_field(key)
                if name in settings:
                    raise ConfigError(f"setting {spelling[name]!r} given twice (again as {key!r})")
                spelling[name] = key
                settings[name] = _property_value(name, key, value)
            return cls.from_kwargs(**settings)
        finally:
            _SPELLING.reset(token)

    # --- derived values ---

    @property
    def join_group_request_timeout(self) -> float:
        """The coordinator may hold JoinGroup for the whole rebalance timeout, so wait a bit longer."""
        return max(self.request_timeout_ms, self.max_poll_interval_ms + JOIN_GROUP_TIMEOUT_MARGIN_MS) / 1000

    @property
    def stall_warning_threshold(self) -> float:
        """Seconds of event-loop stall that earn a WARNING."""
        return self.session_timeout_ms * self.stall_warning_ratio / 1000

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    def build_ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context for broker connections, or None when the protocol has no TLS."""
        if not self.uses_ssl:
            return None
        if self.ssl_context is not None:
            return self.ssl_context
        try:
            context = ssl.create_default_context(cafile=self.ssl_cafile)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"invalid ssl_cafile={self.ssl_cafile!r}: {exc}") from exc
        context.check_hostname = self.ssl_check_hostname
        if self.ssl_certfile is not None:
            try:
                context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile, self.ssl_password)
            except (OSError, ssl.SSLError) as exc:
                # The message of these errors never contains the password.
                raise ConfigError(f"invalid ssl_certfile={self.ssl_certfile!r} / ssl_keyfile="
                                  f"{self.ssl_keyfile!r}: {exc}") from exc
        return context


_FIELD_NAMES: tuple[str, ...] = tuple(s.name for s in fields(ConsumerConfig))
_SETTING_DEFAULTS: dict[str, Any] = {s.name: s.default for s in fields(ConsumerConfig)}

# Settings the broker owns under KIP-848, and the broker setting that replaces each.
BROKER_OWNED_SETTINGS: dict[str, str] = {
    "session_timeout_ms": "group.consumer.session.timeout.ms",
    "heartbeat_interval_ms": "group.consumer.heartbeat.interval.ms",
    "partition_assignment_strategy": "group.consumer.assignors (choose one with group_remote_assignor)",
}


def _refuse_broker_owned(names: Iterable[str]) -> None:
    given = sorted(names)
    if given:
        protocol = _n("group_protocol")
        raise ConfigError(
            f"invalid {', '.join(map(_n, given))} with {protocol}='consumer': under KIP-848 the broker "
            "owns " + "; ".join(f"{_n(n)} (broker setting {BROKER_OWNED_SETTINGS[n]})" for n in given)
            + f". Remove the setting, or use {protocol}='classic'")


def _raise_unset_backoff_caps(settings: dict[str, Any]) -> None:
    """As in Java: a backoff above the default cap raises the cap, unless the cap was given too."""
    for base, cap in (("retry_backoff_ms", "retry_backoff_max_ms"),
                      ("reconnect_backoff_ms", "reconnect_backoff_max_ms")):
        value = settings.get(base)
        if cap not in settings and type(value) is int and value > _SETTING_DEFAULTS[cap]:
            settings[cap] = value


def _unknown(name: str, known: Iterable[str], what: str) -> ConfigError:
    message = f"unknown {what} {name!r}"
    guesses = difflib.get_close_matches(name, list(known), n=1, cutoff=0.7)
    if "." in name and what == "setting":
        message += "; dotted Kafka names go through ConsumerConfig.from_properties"
        snake = name.replace(".", "_")
        guesses = [snake] if snake in _FIELD_NAMES else guesses
    if guesses:
        message += f"; did you mean {guesses[0]!r}?"
    return ConfigError(message)


# --- Java/librdkafka property names ---

_PROPERTY_NAMES: dict[str, str] = {name.replace("_", "."): name for name in _FIELD_NAMES} | {
    "sasl.username": "sasl_plain_username",       # librdkafka
    "sasl.password": "sasl_plain_password",       # librdkafka
    "sasl.mechanisms": "sasl_mechanism",          # librdkafka
    "ssl.ca.location": "ssl_cafile",              # librdkafka
    "ssl.certificate.location": "ssl_certfile",   # librdkafka
    "ssl.key.location": "ssl_keyfile",            # librdkafka
    "ssl.key.password": "ssl_password",           # Java and librdkafka
}
_HOSTNAME_CHECK_PROPERTY = "ssl.endpoint.identification.algorithm"

# Java consumer settings (and prefixes) with no equivalent here: rejected, never silently ignored.
_UNSUPPORTED_PROPERTIES = frozenset({
    "interceptor.classes", "metric.reporters", "metrics.num.samples", "metrics.recording.level",
    "metrics.sample.window.ms", "auto.include.jmx.reporter", "enable.metrics.push",
    "client.dns.lookup", "send.buffer.bytes", "receive.buffer.bytes",
    "socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms",
    "security.providers", "ssl.protocol", "ssl.enabled.protocols",
    "ssl.cipher.suites", "ssl.provider", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation", "ssl.engine.factory.class", "sasl.jaas.config",
    "sasl.client.callback.handler.class",
})
_UNSUPPORTED_PREFIXES = ("ssl.keystore.", "ssl.truststore.", "sasl.kerberos.", "sasl.login.",
                         "sasl.oauthbearer.")


def _property_field(key: str) -> str:
    """The field a dotted property sets; unknown or unsupported ones raise."""
    if key == _HOSTNAME_CHECK_PROPERTY:
        return "ssl_check_hostname"
    hint = java_only_hint(key, _n, dotted=True)
    if hint is not None:
        raise ConfigError(f"unsupported setting {key!r}: {hint}")
    if key in _UNSUPPORTED_PROPERTIES or key.startswith(_UNSUPPORTED_PREFIXES):
        raise ConfigError(f"unsupported setting {key!r}: a Java consumer setting aiokafka-lite does "
                          "not support")
    name = _PROPERTY_NAMES.get(key) or (key if key in _FIELD_NAMES else None)
    if name is None:
        raise _unknown(key, _PROPERTY_NAMES, "property")
    return name


def _property_value(name: str, key: str, value: Any) -> Any:
    """A property's value for its field (property-file text converted)."""
    if key == _HOSTNAME_CHECK_PROPERTY:
        return _hostname_check(value)
    if isinstance(value, str):
        check: _Check = _FIELD_CHECKS[name]
        return check.parse(name, value)
    return value


def _hostname_check(value: Any) -> bool:
    if isinstance(value, str) and value.strip().lower() in ("https", ""):
        return value.strip().lower() == "https"
    raise _invalid(_HOSTNAME_CHECK_PROPERTY, value, "'https' (check host names) or '' (do not)")


_FIELD_CHECKS: dict[str, _Check] = {s.name: s.metadata["check"] for s in fields(ConsumerConfig)}


# --- documentation table ---

class SettingRow(NamedTuple):
    name: str
    default: Any
    description: str


def settings_table() -> list[SettingRow]:
    """(name, default, description) for every setting, in declaration order, for the README."""
    return [SettingRow(s.name, s.default, s.metadata["doc"]) for s in fields(ConsumerConfig)]


SETTINGS_TABLE: tuple[SettingRow, ...] = tuple(settings_table())
