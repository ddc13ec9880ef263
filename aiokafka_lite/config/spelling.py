"""How a ConfigError names a setting and shows its value.

Errors name a setting as the caller spelled it: "retry_backoff_ms" through keyword arguments,
"retry.backoff.ms" inside ``from_properties``. This module owns the record of that spelling (a context
variable set for the duration of one ``from_properties`` call) and the masking of secret values.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from aiokafka_lite.errors import ConfigError

__all__ = ["MASK", "SECRET_SETTINGS", "invalid", "shown", "spelled", "spelled_as_given"]

SECRET_SETTINGS = frozenset({"sasl_plain_password", "ssl_password",
                             "sasl_oauthbearer_client_credentials_client_secret"})
MASK = "'***'"

# Inside from_properties: {field name: the dotted name the caller wrote}.
_SPELLING: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "aiokafka_lite_setting_spelling", default=None)


@contextmanager
def spelled_as_given() -> Iterator[dict[str, str]]:
    """Within the block, errors name settings by the dotted names recorded in the dict yielded."""
    spelling: dict[str, str] = {}
    token = _SPELLING.set(spelling)
    try:
        yield spelling
    finally:
        _SPELLING.reset(token)


def spelled(name: str) -> str:
    """A setting's name as the caller writes it (the Java dotted name inside from_properties)."""
    given = _SPELLING.get()
    return name if given is None else given.get(name, name.replace("_", "."))


def shown(name: str, value: object) -> str:
    return MASK if name in SECRET_SETTINGS else repr(value)


def invalid(name: str, value: object, allowed: str) -> ConfigError:
    return ConfigError(f"invalid {spelled(name)}={shown(name, value)}: expected {allowed}")
