"""Per-setting checks: each validates and normalises one value, and reads it from property-file text.

A check knows one setting's type and range; the error it raises names the setting, the value (masked
if secret) and what is allowed. Rules that relate two settings live in validation.py and security.py.
"""

from __future__ import annotations

import re
import ssl
from typing import Any

from aiokafka_lite.config.spelling import invalid

__all__ = [
    "DEFAULT_PORT",
    "INT32_MAX",
    "INT64_MAX",
    "KNOWN_ASSIGNORS",
    "Assignors",
    "Bool",
    "Check",
    "Choice",
    "GroupInstanceId",
    "Int",
    "IntOrWord",
    "OffsetReset",
    "OptionalCallable",
    "OptionalSslContext",
    "Ratio",
    "RemoteAssignor",
    "SaslExtensions",
    "Servers",
    "Text",
    "TokenProvider",
    "iso_duration_ms",
]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
DEFAULT_PORT = 9092
KNOWN_ASSIGNORS = frozenset({"range", "roundrobin", "cooperative-sticky"})

_JAVA_ASSIGNOR_CLASSES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}
_GROUP_INSTANCE_ID = re.compile(r"[a-zA-Z0-9._-]{1,249}")  # Java's rule for static member ids
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
# java.time.Duration's text (days, hours, minutes, seconds; letters in either case), without a sign:
# KIP-1106's by_duration takes no negative durations.
_ISO_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:[.,](\d{1,9}))?S)?)?", re.IGNORECASE)
BY_DURATION = "by_duration:"


class Check:
    """One setting's check: check() validates/normalises a value, parse() reads property-file text."""

    def check(self, name: str, value: Any) -> Any:
        raise NotImplementedError

    def parse(self, name: str, text: str) -> Any:
        return text


class Int(Check):
    def __init__(self, minimum: int, maximum: int = INT32_MAX, special: tuple[int, ...] = ()) -> None:
        self.minimum, self.maximum, self.special = minimum, maximum, special
        extra = "".join(f"{s} or " for s in special)
        self.allowed = f"an int, {extra}{minimum} <= value <= {maximum}"

    def check(self, name: str, value: Any) -> Any:
        # bool is an int subclass: True must not pass as 1.
        if isinstance(value, bool) or not isinstance(value, int):
            raise invalid(name, value, self.allowed)
        if value not in self.special and not self.minimum <= value <= self.maximum:
            raise invalid(name, value, self.allowed)
        return value

    def parse(self, name: str, text: str) -> Any:
        if not _INTEGER_TEXT.fullmatch(text.strip()):
            raise invalid(name, text, self.allowed)
        return int(text.strip())


class IntOrWord(Int):
    """An int in a range, or one word (``"auto"``), in any case and with spaces around it."""

    def __init__(self, minimum: int, maximum: int, word: str) -> None:
        super().__init__(minimum, maximum)
        self.word = word
        self.allowed = f"{word!r} or an int, {minimum} <= value <= {maximum}"

    def check(self, name: str, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() == self.word:
            return self.word
        return super().check(name, value)

    def parse(self, name: str, text: str) -> Any:
        if text.strip().lower() == self.word:
            return self.word
        return super().parse(name, text)


class Bool(Check):
    def check(self, name: str, value: Any) -> Any:
        if not isinstance(value, bool):
            raise invalid(name, value, "True or False")
        return value

    def parse(self, name: str, text: str) -> Any:
        lowered = text.strip().lower()
        if lowered not in ("true", "false"):
            raise invalid(name, text, "'true' or 'false'")
        return lowered == "true"


class Ratio(Check):
    allowed = "a number, 0 < value <= 1"

    def check(self, name: str, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
            raise invalid(name, value, self.allowed)
        return float(value)

    def parse(self, name: str, text: str) -> Any:
        try:
            return float(text)
        except ValueError:
            raise invalid(name, text, self.allowed) from None


class Choice(Check):
    def __init__(self, *choices: str, upper: bool = False) -> None:
        self.choices, self.upper = choices, upper

    def check(self, name: str, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip().upper() if self.upper else value.strip().lower()
            if value in self.choices:
                return value
        raise invalid(name, value, "one of " + ", ".join(map(repr, self.choices)))


def iso_duration_ms(text: str) -> int | None:
    """Milliseconds of an ISO-8601 duration as java.time.Duration writes it (``PT1H``,
    ``P1DT12H``, ``PT0.5S``), or None when ``text`` is not one (or is negative)."""
    match = _ISO_DURATION.fullmatch(text)
    if match is None or not any(match.groups()) or text.upper().endswith("T"):
        return None
    days, hours, minutes, seconds = (int(group or 0) for group in match.groups()[:4])
    fraction = match.group(5) or ""
    return (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000 + int((fraction + "000")[:3])


class OffsetReset(Check):
    """auto_offset_reset: earliest, latest, none, or by_duration:<ISO-8601 duration> (KIP-1106)."""

    allowed = "'earliest', 'latest', 'none' or 'by_duration:' and an ISO-8601 duration such as 'PT1H' or 'P1DT12H'"

    def check(self, name: str, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if text.lower() in ("earliest", "latest", "none"):
                return text.lower()
            if text.lower().startswith(BY_DURATION) and iso_duration_ms(text[len(BY_DURATION):]) is not None:
                return BY_DURATION + text[len(BY_DURATION):].upper()
        raise invalid(name, value, self.allowed)


class Text(Check):
    def __init__(self, optional: bool = True, non_empty: bool = False) -> None:
        self.optional, self.non_empty = optional, non_empty

    def check(self, name: str, value: Any) -> Any:
        if value is None and self.optional:
            return None
        if not isinstance(value, str) or (self.non_empty and not value):
            allowed = "a non-empty str" if self.non_empty else "a str"
            raise invalid(name, value, allowed + (" or None" if self.optional else ""))
        return value


class GroupInstanceId(Check):
    def check(self, name: str, value: Any) -> Any:
        if value is None or (isinstance(value, str) and _GROUP_INSTANCE_ID.fullmatch(value)):
            return value
        raise invalid(name, value, "None or 1-249 characters from [a-zA-Z0-9._-]")


class OptionalCallable(Check):
    def check(self, name: str, value: Any) -> Any:
        if value is not None and not callable(value):
            raise invalid(name, value, "None or a callable taking bytes | None")
        return value


class TokenProvider(Check):
    """OAUTHBEARER's token provider: a coroutine function (or any callable returning an awaitable)."""

    def check(self, name: str, value: Any) -> Any:
        if value is not None and not callable(value):
            raise invalid(name, value, "None or an async callable returning an OAuthBearerToken")
        return value


class SaslExtensions(Check):
    """SASL extensions (KIP-342): names of letters, printable values; text 'name=value,name=value'."""

    _KEY = re.compile(r"[A-Za-z]+")
    _VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")
    allowed = "a dict of str to str, names of letters only (not 'auth'), values of printable ASCII"

    def check(self, name: str, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and k != "auth" and self._KEY.fullmatch(k)
                and self._VALUE.fullmatch(v) for k, v in value.items()):
            raise invalid(name, value, self.allowed)
        return dict(value)

    def parse(self, name: str, text: str) -> Any:
        pairs = [part.partition("=") for part in text.split(",") if part.strip()]
        if any(not sep for _, sep, _ in pairs):
            raise invalid(name, text, "'name=value' pairs separated by commas")
        return {key.strip(): value.strip() for key, _, value in pairs}


class OptionalSslContext(Check):
    def check(self, name: str, value: Any) -> Any:
        if value is not None and not isinstance(value, ssl.SSLContext):
            raise invalid(name, value, "None or an ssl.SSLContext")
        return value


class Servers(Check):
    allowed = "'host:port' entries, as a comma-separated str or a list (IPv6 as '[::1]:9092')"

    def check(self, name: str, value: Any) -> Any:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple):
            raise invalid(name, value, self.allowed)
        servers: list[tuple[str, int]] = []
        for entry in value:
            if isinstance(entry, str):
                servers += [self._parse(name, part.strip()) for part in entry.split(",") if part.strip()]
            else:
                servers.append(self._pair(name, entry))
        if not servers:
            raise invalid(name, value, "at least one " + self.allowed)
        return tuple(dict.fromkeys(servers))  # drop duplicates, keep order

    def _pair(self, name: str, entry: Any) -> tuple[str, int]:
        if isinstance(entry, tuple) and len(entry) == 2:
            host, port = entry
            valid_port = isinstance(port, int) and not isinstance(port, bool) and 0 < port < 65536
            if isinstance(host, str) and host and not any(c.isspace() for c in host) and valid_port:
                return host, port
        raise invalid(name, entry, self.allowed + ", with a port in 1..65535")

    def _parse(self, name: str, entry: str) -> tuple[str, int]:
        if entry.startswith("["):
            host, bracket, rest = entry[1:].partition("]")
            has_port, port_text = rest.startswith(":"), rest[1:]
            if not bracket or (rest and not has_port):
                raise invalid(name, entry, self.allowed)
        elif entry.count(":") > 1:
            raise invalid(name, entry, "IPv6 addresses in brackets, e.g. '[::1]:9092'")
        else:
            host, colon, port_text = entry.partition(":")
            has_port = bool(colon)
        if not has_port:
            return self._pair(name, (host, DEFAULT_PORT))
        if not re.fullmatch(r"[0-9]{1,5}", port_text):
            raise invalid(name, entry, self.allowed + ", with a port in 1..65535")
        return self._pair(name, (host, int(port_text)))


class Assignors(Check):
    def check(self, name: str, value: Any) -> Any:
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list | tuple):
            raise invalid(name, value, self._allowed())
        names = [self._one(name, value, item) for item in items if not isinstance(item, str) or item.strip()]
        if not names or len(set(names)) != len(names):
            raise invalid(name, value, "a non-empty list without repeats of " + self._allowed())
        return tuple(names)

    def _one(self, name: str, whole: Any, item: Any) -> str:
        if isinstance(item, str):
            text = item.strip().removeprefix("class ").strip()
            short = _JAVA_ASSIGNOR_CLASSES.get(text, text.lower())
            if short in KNOWN_ASSIGNORS:
                return short
        raise invalid(name, whole, self._allowed())

    @staticmethod
    def _allowed() -> str:
        return "assignor names among " + ", ".join(map(repr, sorted(KNOWN_ASSIGNORS)))


class RemoteAssignor(Check):
    choices = ("uniform", "range")

    def check(self, name: str, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str) and value.strip().lower() in self.choices:
            return value.strip().lower()
        raise invalid(name, value, "None (the broker's default) or one of 'uniform', 'range'")
