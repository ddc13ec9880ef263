"""ConsumerConfig: every consumer setting in one validated, frozen object.

The settings themselves (names, types, defaults, checks, descriptions) are the fields of
:class:`SettingFields` (settings.py); this class checks them on construction, builds from keyword
arguments or Java/librdkafka properties, and derives what the rest of the client needs (durations in
seconds, the TLS context). Anything wrong raises :class:`ConfigError` naming the setting, the value
and what is allowed; secrets are never echoed.

Auto-commit without a group: commits need a group, so with ``group_id=None`` auto-commit is off.
As in Java, leaving ``enable_auto_commit`` at its default turns it off silently, while an explicit
``enable_auto_commit=True`` through :meth:`ConsumerConfig.from_kwargs` / ``from_properties`` is an
error (the caller believes offsets are being committed). Direct construction can't tell the two
apart and always turns it off silently.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, overload

from aiokafka_lite.config.properties import settings_from_properties
from aiokafka_lite.config.security import unused_security_settings
from aiokafka_lite.config.settings import FIELD_NAMES, SettingFields
from aiokafka_lite.config.spelling import MASK, SECRET_SETTINGS, spelled, spelled_as_given
from aiokafka_lite.config.validation import (
    BROKER_OWNED_SETTINGS,
    check_group,
    check_names,
    check_security,
    check_timeouts,
    raise_unset_backoff_caps,
    refuse_auto_commit_without_group,
    refuse_broker_owned,
)
from aiokafka_lite.errors import ConfigError

__all__ = ["JOIN_GROUP_TIMEOUT_MARGIN_MS", "ConsumerConfig"]

# The logger cli/main.py silences by name during its pre-check: keep the name, whatever module logs.
log = logging.getLogger("aiokafka_lite.config")

# Java waits this much longer than the rebalance timeout for a JoinGroup response, because the
# coordinator may legitimately hold the request for the whole rebalance timeout.
JOIN_GROUP_TIMEOUT_MARGIN_MS = 5000


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
class ConsumerConfig(SettingFields):
    """Consumer settings; build with :meth:`from_kwargs` or :meth:`from_properties`."""

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
    bootstrap_resolve_timeout = _Seconds("bootstrap_resolve_timeout_ms")
    metadata_max_age = _Seconds("metadata_max_age_ms")
    metadata_recovery_rebootstrap_trigger = _Seconds("metadata_recovery_rebootstrap_trigger_ms")
    auto_commit_interval = _Seconds("auto_commit_interval_ms")
    fetch_max_wait = _Seconds("fetch_max_wait_ms")
    connections_max_idle = _Seconds("connections_max_idle_ms")

    def __post_init__(self) -> None:
        for setting in fields(self):
            value = setting.metadata["check"].check(setting.name, getattr(self, setting.name))
            object.__setattr__(self, setting.name, value)
        check_timeouts(self)
        check_group(self)
        check_security(self)
        if self.group_id is None and self.enable_auto_commit:
            object.__setattr__(self, "enable_auto_commit", False)  # no group, nothing to commit to

    def __repr__(self) -> str:
        shown = (f"{s.name}={self._shown_value(s.name)}" for s in fields(self))
        return f"ConsumerConfig({', '.join(shown)})"

    def _shown_value(self, name: str) -> str:
        value = getattr(self, name)
        return MASK if name in SECRET_SETTINGS and value is not None else repr(value)

    # --- constructors ---

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> ConsumerConfig:
        """Settings by their snake_case names; unknown names raise with a suggestion.

        ssl_* / sasl_* settings that the security_protocol does not use are logged once, as a
        WARNING naming them and the protocol that would use them."""
        check_names(kwargs)
        settings = dict(kwargs)
        if isinstance(settings.get("group_protocol"), str) \
                and settings["group_protocol"].strip().lower() == "consumer":
            refuse_broker_owned(n for n in BROKER_OWNED_SETTINGS if n in settings)
        raise_unset_backoff_caps(settings)
        config = cls(**settings)
        refuse_auto_commit_without_group(settings, config.group_id)
        unused = unused_security_settings(
            config.security_protocol, (n for n in FIELD_NAMES if settings.get(n) is not None), spelled)
        if unused is not None:
            log.warning("%s", unused)
        return config

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> ConsumerConfig:
        """Settings by Java/librdkafka dotted names ("group.id"); string values are converted.

        Exact field names are accepted too, for values with no dotted form (``ssl_context``).
        """
        with spelled_as_given() as spelling:
            return cls.from_kwargs(**settings_from_properties(properties, spelling))

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
