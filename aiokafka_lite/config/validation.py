"""Rules across settings, and the errors for names that are not settings.

A value's own type and range are its check's (checks.py); here are the rules that relate settings to one
another: timeouts below timeouts, the backoff caps, static membership and the KIP-848 settings the
broker owns, the TLS and SASL settings that belong together, auto-commit that needs a group. An unknown
name gets a suggestion when it looks like a misspelling, and a Java-only one says what to set instead.

``group_protocol="consumer"`` (KIP-848): the broker owns the session timeout, the heartbeat
interval and the assignment (``group.consumer.session.timeout.ms``,
``group.consumer.heartbeat.interval.ms``, ``group.consumer.assignors``), so, as in Java, setting
``session_timeout_ms``, ``heartbeat_interval_ms`` or ``partition_assignment_strategy`` explicitly
is an error. ``from_kwargs``/``from_properties`` know which settings were given; direct
construction catches a value other than the default.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka_lite.config.security import java_only_hint
from aiokafka_lite.config.settings import FIELD_NAMES, SETTING_DEFAULTS, SettingFields
from aiokafka_lite.config.spelling import spelled
from aiokafka_lite.errors import ConfigError

__all__ = ["BROKER_OWNED_SETTINGS", "check_group", "check_names", "check_security", "check_timeouts",
           "raise_unset_backoff_caps", "refuse_auto_commit_without_group", "refuse_broker_owned", "unknown"]

# The logger cli/main.py silences by name during its pre-check: keep the name, whatever module logs.
log = logging.getLogger("aiokafka_lite.config")


def check_timeouts(settings: SettingFields) -> None:
    """Timeouts and backoffs that must relate to one another."""
    if settings.heartbeat_interval_ms >= settings.session_timeout_ms:
        raise ConfigError(
            f"invalid {spelled('heartbeat_interval_ms')}={settings.heartbeat_interval_ms}: it must be lower "
            f"than {spelled('session_timeout_ms')}={settings.session_timeout_ms} (Kafka requires it), and at "
            "most a third of it so that one late heartbeat does not end the session")
    if settings.fetch_max_wait_ms >= settings.request_timeout_ms:
        raise ConfigError(
            f"invalid {spelled('fetch_max_wait_ms')}={settings.fetch_max_wait_ms}: it must be lower than "
            f"{spelled('request_timeout_ms')}={settings.request_timeout_ms}, or a fetch with no new data "
            "would time out instead of coming back empty")
    for base, cap in (("retry_backoff_ms", "retry_backoff_max_ms"),
                      ("reconnect_backoff_ms", "reconnect_backoff_max_ms")):
        if getattr(settings, base) > getattr(settings, cap):
            # As Java (CommonClientConfigs.warnDisablingExponentialBackoff): allowed, and the
            # cap becomes a static backoff.
            base_ms, cap_ms = getattr(settings, base), getattr(settings, cap)
            log.warning("%s=%d is greater than %s=%d: a static backoff of %d ms will be applied",
                        spelled(base), base_ms, spelled(cap), cap_ms, cap_ms)


def check_group(settings: SettingFields) -> None:
    """Static membership needs a group; KIP-848 leaves some settings to the broker."""
    if settings.group_instance_id is not None and settings.group_id is None:
        raise ConfigError(f"invalid {spelled('group_instance_id')}={settings.group_instance_id!r}: static "
                          f"membership needs a group; set {spelled('group_id')} too")
    if settings.group_protocol == "consumer":
        # Direct construction: a value other than the default was surely set by the caller.
        refuse_broker_owned(n for n in BROKER_OWNED_SETTINGS
                             if getattr(settings, n) != SETTING_DEFAULTS[n])
    elif settings.group_remote_assignor is not None:
        raise ConfigError(f"invalid {spelled('group_remote_assignor')}={settings.group_remote_assignor!r}: "
                          f"it applies to {spelled('group_protocol')}='consumer' only (now 'classic'); "
                          f"use {spelled('partition_assignment_strategy')} with the classic protocol")


def check_security(settings: SettingFields) -> None:
    """SASL needs credentials; an ssl_context excludes the ssl_* files; a key needs its certificate."""
    if settings.security_protocol.startswith("SASL_") and settings.sasl_mechanism == "OAUTHBEARER":
        _check_oauthbearer(settings)
    elif settings.security_protocol.startswith("SASL_"):
        for name in ("sasl_plain_username", "sasl_plain_password"):
            if not getattr(settings, name):
                raise ConfigError(f"missing {spelled(name)}: {spelled('security_protocol')}="
                                  f"{settings.security_protocol!r} with {spelled('sasl_mechanism')}="
                                  f"{settings.sasl_mechanism!r} needs {spelled('sasl_plain_username')} and "
                                  f"{spelled('sasl_plain_password')}")
    if settings.ssl_context is not None:
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password"):
            if getattr(settings, name) is not None:
                raise ConfigError(f"conflicting {spelled(name)}: it would be ignored because "
                                  f"{spelled('ssl_context')} is set; configure the context instead")
    for name in ("ssl_keyfile", "ssl_password"):
        if getattr(settings, name) is not None and settings.ssl_certfile is None:
            raise ConfigError(f"missing {spelled('ssl_certfile')}: {spelled(name)} is set but belongs to a "
                              f"client certificate, which {spelled('ssl_certfile')} names")


_CLIENT_CREDENTIALS = ("sasl_oauthbearer_token_endpoint_url", "sasl_oauthbearer_client_credentials_client_id",
                       "sasl_oauthbearer_client_credentials_client_secret")
_ASSERTION_SOURCES = ("sasl_oauthbearer_assertion_file", "sasl_oauthbearer_assertion_private_key_file")


def _check_oauthbearer(settings: SettingFields) -> None:
    """OAUTHBEARER takes its token from a provider or from the token endpoint, not both; the
    endpoint's grant is client_credentials (a secret or a client assertion) or jwt_bearer (an assertion)."""
    assertion = next((name for name in _ASSERTION_SOURCES if getattr(settings, name)), None)
    given = [name for name in _CLIENT_CREDENTIALS if getattr(settings, name)] + ([assertion] if assertion else [])
    provider = spelled("sasl_oauth_token_provider")
    if settings.sasl_oauth_token_provider is not None:
        if given:
            raise ConfigError(f"conflicting {spelled(given[0])}: {provider} is set, and it alone gives the "
                              "OAUTHBEARER token; set one or the other")
        return
    if settings.sasl_oauthbearer_grant_type == "jwt_bearer":
        needed: tuple[str, ...] = ("sasl_oauthbearer_token_endpoint_url", assertion or _ASSERTION_SOURCES[1])
        flow = "the jwt_bearer grant's"
    else:
        needed = _CLIENT_CREDENTIALS[:2] + ((assertion,) if assertion else _CLIENT_CREDENTIALS[2:])
        flow = "the client-credentials flow's"
    missing = next((name for name in needed if not getattr(settings, name)), None)
    if missing is not None:
        alternative = (f" (or {spelled(_ASSERTION_SOURCES[0])})" if missing == _ASSERTION_SOURCES[1] else
                       f" (or an assertion: {spelled(_ASSERTION_SOURCES[1])})" if missing == _CLIENT_CREDENTIALS[2]
                       else "")
        raise ConfigError(f"missing {spelled(missing)}{alternative}: {spelled('sasl_mechanism')}='OAUTHBEARER' "
                          f"needs {provider}, or {flow} " + ", ".join(spelled(name) for name in needed))
    url = settings.sasl_oauthbearer_token_endpoint_url or ""
    if not url.startswith(("https://", "http://")):
        raise ConfigError(f"invalid {spelled('sasl_oauthbearer_token_endpoint_url')}={url!r}: expected an "
                          "https:// (or http://) URL")


def check_names(names: Iterable[str]) -> None:
    """Every name given as a keyword argument is a setting; unknown names raise with a suggestion."""
    for name in names:
        if name not in FIELD_NAMES:
            hint = java_only_hint(name.replace("_", "."), spelled, dotted=False)
            if hint is not None:
                raise ConfigError(f"unsupported setting {name!r}: {hint}")
            raise unknown(name, FIELD_NAMES, "setting")


def refuse_auto_commit_without_group(given: Mapping[str, Any], group_id: str | None) -> None:
    """An explicit enable_auto_commit=True without a group: the caller believes offsets are committed."""
    if given.get("enable_auto_commit") is True and group_id is None:
        auto, group = spelled("enable_auto_commit"), spelled("group_id")
        raise ConfigError(f"invalid {auto}=True: commits need a group, and {group} is None; "
                          f"set {group} or leave {auto} unset/False")


# Settings the broker owns under KIP-848, and the broker setting that replaces each.
BROKER_OWNED_SETTINGS: dict[str, str] = {
    "session_timeout_ms": "group.consumer.session.timeout.ms",
    "heartbeat_interval_ms": "group.consumer.heartbeat.interval.ms",
    "partition_assignment_strategy": "group.consumer.assignors (choose one with group_remote_assignor)",
}


def refuse_broker_owned(names: Iterable[str]) -> None:
    """Under KIP-848 the settings ``names`` are the broker's: giving any of them is an error."""
    given = sorted(names)
    if given:
        protocol = spelled("group_protocol")
        raise ConfigError(
            f"invalid {', '.join(map(spelled, given))} with {protocol}='consumer': under KIP-848 the broker "
            "owns " + "; ".join(f"{spelled(n)} (broker setting {BROKER_OWNED_SETTINGS[n]})" for n in given)
            + f". Remove the setting, or use {protocol}='classic'")


def raise_unset_backoff_caps(given: dict[str, Any]) -> None:
    """As in Java: a backoff above the default cap raises the cap, unless the cap was given too."""
    for base, cap in (("retry_backoff_ms", "retry_backoff_max_ms"),
                      ("reconnect_backoff_ms", "reconnect_backoff_max_ms")):
        value = given.get(base)
        if cap not in given and type(value) is int and value > SETTING_DEFAULTS[cap]:
            given[cap] = value


def unknown(name: str, known: Iterable[str], what: str) -> ConfigError:
    """The error for a name that is no setting (or property), with a likely misspelling suggested."""
    message = f"unknown {what} {name!r}"
    guesses = difflib.get_close_matches(name, list(known), n=1, cutoff=0.7)
    if "." in name and what == "setting":
        message += "; dotted Kafka names go through ConsumerConfig.from_properties"
        snake = name.replace(".", "_")
        guesses = [snake] if snake in FIELD_NAMES else guesses
    if guesses:
        message += f"; did you mean {guesses[0]!r}?"
    return ConfigError(message)
