"""The options of Spark's own Kafka source, parsed and checked once (no I/O here; pyspark only when
``valueFormat=avro`` asks which Spark type the value column takes, in ``value_format.py``).

Names and meanings follow Spark's Kafka integration guide so a query can switch between
``format("kafka")`` and ``format("aiokafka_lite")`` by changing one word. Spark hands a Python data
source its options case-insensitively (lower-cased keys), so every lookup here is lower-case.
``valueFormat``, ``schemaRegistryUrl`` and ``valueAvroSchema`` are this source's own (Avro values decoded).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..structs import TopicPartition
from .value_format import ValueFormat, parse_value_format

EARLIEST = -2  # Spark's (and Kafka's ListOffsets) sentinel for "the log start"
LATEST = -1    # ... and for "the high watermark"

KAFKA_PREFIX = "kafka."
DEFAULT_MAX_TRIGGER_DELAY = 900.0  # seconds: Spark's maxTriggerDelay default, 15m

# Options this source understands, lower-cased, with the spelling users write (for messages).
KNOWN_OPTIONS = {
    "subscribe": "subscribe",
    "subscribepattern": "subscribePattern",
    "assign": "assign",
    "startingoffsets": "startingOffsets",
    "endingoffsets": "endingOffsets",
    "maxoffsetspertrigger": "maxOffsetsPerTrigger",
    "minoffsetspertrigger": "minOffsetsPerTrigger",
    "maxtriggerdelay": "maxTriggerDelay",
    "minpartitions": "minPartitions",
    "maxrecordsperpartition": "maxRecordsPerPartition",
    "startingtimestamp": "startingTimestamp",
    "startingoffsetsbytimestamp": "startingOffsetsByTimestamp",
    "startingoffsetsbytimestampstrategy": "startingOffsetsByTimestampStrategy",
    "endingtimestamp": "endingTimestamp",
    "endingoffsetsbytimestamp": "endingOffsetsByTimestamp",
    "failondataloss": "failOnDataLoss",
    "includeheaders": "includeHeaders",
    "kafkaconsumer.polltimeoutms": "kafkaConsumer.pollTimeoutMs",
    "valueformat": "valueFormat",
    "schemaregistryurl": "schemaRegistryUrl",
    "valueavroschema": "valueAvroSchema",
}

# Options of Spark's Kafka source that mean nothing here, accepted so that a query moves over unchanged:
# no consumer group is used (no group id to prefix), and the driver's offset look-ups retry within
# kafka.default.api.timeout.ms as the Java consumer's do, not a number of times.
NO_EFFECT_OPTIONS = {
    "groupidprefix": "groupIdPrefix", "fetchoffset.numretries": "fetchOffset.numRetries",
    "fetchoffset.retryintervalms": "fetchOffset.retryIntervalMs",
}

# Consumer settings the source owns: offsets live in Spark's checkpoint, never in a group.
RESERVED_KAFKA_SETTINGS = ("group.id", "auto.offset.reset", "enable.auto.commit",
                           "key.deserializer", "value.deserializer")

SUBSCRIPTION_OPTIONS = ("subscribe", "subscribePattern", "assign")


@dataclass(frozen=True)
class Subscription:
    """What to read: named topics, a topic-name pattern, or fixed partitions."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartition, ...] = ()

    def describe(self) -> str:
        if self.pattern is not None:
            return f"subscribePattern={self.pattern!r}"
        if self.partitions:
            return f"assign={[f'{tp.topic}-{tp.partition}' for tp in self.partitions]}"
        return f"subscribe={list(self.topics)}"


@dataclass(frozen=True)
class OffsetSpec:
    """``"earliest"``/``"latest"`` (``default``) or per-partition offsets (-2 earliest, -1 latest).

    With ``by_timestamp`` the values are timestamps (ms since the epoch), each standing for the first
    offset whose record timestamp is at or after it; where there is none, ``on_no_match`` says what
    to do: ``"latest"`` (the high watermark) or ``"error"``.
    """

    option: str
    default: int | None = None
    per_partition: Mapping[TopicPartition, int] = field(default_factory=dict)
    by_timestamp: bool = False
    on_no_match: str = "latest"

    def for_partitions(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The offset or sentinel for each partition; a JSON spec must name every one."""
        if self.default is not None:
            return dict.fromkeys(tps, self.default)
        missing = sorted(set(tps) - set(self.per_partition))
        if missing:
            names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing)
            what = "timestamps" if self.by_timestamp else "offsets"
            how = "" if self.by_timestamp else " (-2 earliest, -1 latest)"
            raise ConfigError(f"option {self.option} gives {what} per partition but not for {names}; "
                              f"name every partition of the subscription{how}")
        return {tp: self.per_partition[tp] for tp in tps}


@dataclass(frozen=True)
class SourceOptions:
    """Every option, checked; picklable so executors get it with the reader."""

    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    consumer_properties: tuple[tuple[str, str], ...] = ()
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay: float = DEFAULT_MAX_TRIGGER_DELAY
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = True
    poll_timeout: float = 120.0
    value_format: ValueFormat = field(default_factory=ValueFormat)

    def consumer_settings(self) -> dict[str, str]:
        """Java-style consumer properties for ``Consumer.from_properties``."""
        # No topic created by asking for it: Spark's source never creates one (its driver asks an admin client).
        settings = {"max.poll.records": "10000", "client.id": "aiokafka-lite-spark",
                    "allow.auto.create.topics": "false"}
        settings.update(dict(self.consumer_properties))
        settings.update({
            "bootstrap.servers": self.bootstrap_servers,
            "enable.auto.commit": "false",
            # A start offset below the log start means retention deleted records we were asked for.
            "auto.offset.reset": "none" if self.fail_on_data_loss else "earliest",
        })
        return settings


def parse_options(options: Mapping[str, str], streaming: bool | None) -> SourceOptions:
    """Check ``options`` (Spark's strings) for a batch (False), streaming (True) or either (None) read."""
    lowered = {str(k).lower(): str(v) for k, v in options.items()}
    _reject_unknown(lowered)
    for key in ("fetchoffset.numretries", "fetchoffset.retryintervalms"):  # no effect, but as Spark checks them
        if key in lowered and not lowered[key].strip().isdigit():
            raise ConfigError(f"option {NO_EFFECT_OPTIONS[key]} must be a non-negative integer, got {lowered[key]!r}")
    bootstrap = lowered.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise ConfigError("option kafka.bootstrap.servers is required (e.g. '127.0.0.1:9092')")
    return SourceOptions(
        bootstrap_servers=bootstrap,
        subscription=_subscription(lowered),
        starting=_starting(lowered, streaming),
        ending=_ending(lowered, streaming),
        consumer_properties=_consumer_properties(lowered),
        max_offsets_per_trigger=_positive_int(lowered, "maxoffsetspertrigger"),
        min_offsets_per_trigger=_positive_int(lowered, "minoffsetspertrigger"),
        max_trigger_delay=_duration(lowered, "maxtriggerdelay", DEFAULT_MAX_TRIGGER_DELAY),
        min_partitions=_positive_int(lowered, "minpartitions"),
        max_records_per_partition=_positive_int(lowered, "maxrecordsperpartition"),
        fail_on_data_loss=_boolean(lowered, "failondataloss", True),
        include_headers=_boolean(lowered, "includeheaders", True),
        poll_timeout=(_positive_int(lowered, "kafkaconsumer.polltimeoutms") or 120000) / 1000,
        value_format=parse_value_format(lowered),
    )


def _reject_unknown(lowered: Mapping[str, str]) -> None:
    for key in lowered:
        if key.startswith(KAFKA_PREFIX) or key in KNOWN_OPTIONS or key in NO_EFFECT_OPTIONS or key == "path":
            continue
        close = difflib.get_close_matches(key, list(KNOWN_OPTIONS), n=1)
        hint = f" (did you mean {KNOWN_OPTIONS[close[0]]}?)" if close else ""
        known = ", ".join(sorted(KNOWN_OPTIONS.values()))
        raise ConfigError(f"unknown option {key!r}{hint}; known: kafka.*, {known}")


def _subscription(lowered: Mapping[str, str]) -> Subscription:
    given = [name for name in SUBSCRIPTION_OPTIONS if name.lower() in lowered]
    if len(given) != 1:
        raise ConfigError(f"exactly one of the options subscribe, subscribePattern, assign is required, "
                          f"got {given or 'none'}")
    value = lowered[given[0].lower()].strip()
    if given[0] == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise ConfigError(f"option subscribe needs a comma-separated list of topics, got {value!r}")
        return Subscription(topics=topics)
    if given[0] == "subscribePattern":
        try:
            re.compile(value)
        except re.error as exc:
            raise ConfigError(f"option subscribePattern is not a valid regular expression: {value!r} ({exc})"
                              ) from exc
        return Subscription(pattern=value)
    partitions = _json_partitions(value)
    if not partitions:
        raise ConfigError('option assign names no partition; expected JSON like {"topic": [0, 1]}')
    return Subscription(partitions=partitions)


def _json_partitions(value: str) -> tuple[TopicPartition, ...]:
    parsed = _json_object("assign", value, '{"topic": [0, 1]}')
    tps: list[TopicPartition] = []
    for topic, parts in parsed.items():
        if not isinstance(parts, list) or not all(_is_int(p) and p >= 0 for p in parts):
            raise ConfigError(f"option assign: topic {topic!r} must map to a list of partition numbers, "
                              f"got {parts!r}")
        tps.extend(TopicPartition(topic, p) for p in parts)
    return tuple(sorted(set(tps)))


def _starting(lowered: Mapping[str, str], streaming: bool | None) -> OffsetSpec:
    # As in Spark: startingTimestamp, then startingOffsetsByTimestamp, then startingOffsets.
    strategy = lowered.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ConfigError("option startingOffsetsByTimestampStrategy must be 'error' or 'latest', got "
                          f"{lowered['startingoffsetsbytimestampstrategy']!r}")
    by_time = _timestamp_spec(lowered, "startingtimestamp", "startingoffsetsbytimestamp", strategy)
    if by_time is not None:
        return by_time
    spec = _offset_spec("startingOffsets", lowered.get("startingoffsets"), EARLIEST if not streaming else LATEST)
    if streaming is False and LATEST in _sentinels(spec):
        raise ConfigError("option startingOffsets cannot be 'latest' (or -1) for a batch read: "
                          "nothing would be read")
    return spec


def _ending(lowered: Mapping[str, str], streaming: bool | None) -> OffsetSpec:
    given = [KNOWN_OPTIONS[key] for key in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")
             if key in lowered]
    if given and streaming:
        raise ConfigError(f"option {given[0]} is for batch reads only; a streaming query has no end")
    # As in Spark: endingTimestamp, then endingOffsetsByTimestamp, then endingOffsets; a timestamp
    # past the last record ends at the latest offset.
    by_time = _timestamp_spec(lowered, "endingtimestamp", "endingoffsetsbytimestamp", "latest")
    if by_time is not None:
        return by_time
    spec = _offset_spec("endingOffsets", lowered.get("endingoffsets"), LATEST)
    if EARLIEST in _sentinels(spec):
        raise ConfigError("option endingOffsets cannot be 'earliest' (or -2): nothing would be read")
    return spec


def _sentinels(spec: OffsetSpec) -> set[int]:
    values = {spec.default} if spec.default is not None else set(spec.per_partition.values())
    return values & {EARLIEST, LATEST}


def _offset_spec(option: str, value: str | None, default: int) -> OffsetSpec:
    if value is None:
        return OffsetSpec(option, default=default)
    word = value.strip().lower()
    if word in ("earliest", "latest"):
        return OffsetSpec(option, default=EARLIEST if word == "earliest" else LATEST)
    parsed = _json_object(option, value, '"earliest", "latest" or {"topic": {"0": 23, "1": -2}}')
    offsets = _per_partition(option, parsed, EARLIEST, "an offset >= -2 (-2 earliest, -1 latest)")
    return OffsetSpec(option, per_partition=offsets)


def _timestamp_spec(lowered: Mapping[str, str], one_key: str, json_key: str, on_no_match: str) -> OffsetSpec | None:
    """The timestamp option that applies (one for every partition, else one per partition), if any."""
    if one_key in lowered:
        option, raw = KNOWN_OPTIONS[one_key], lowered[one_key]
        try:
            timestamp = int(raw.strip())
        except ValueError:
            timestamp = -1
        if timestamp < 0:
            raise ConfigError(f"option {option} must be a timestamp in ms since the epoch, got {raw!r}")
        return OffsetSpec(option, default=timestamp, by_timestamp=True, on_no_match=on_no_match)
    if json_key in lowered:
        option = KNOWN_OPTIONS[json_key]
        parsed = _json_object(option, lowered[json_key], '{"topic": {"0": 1700000000000}}')
        timestamps = _per_partition(option, parsed, 0, "a timestamp in ms since the epoch")
        return OffsetSpec(option, per_partition=timestamps, by_timestamp=True, on_no_match=on_no_match)
    return None


def _per_partition(option: str, parsed: Mapping[str, Any], minimum: int, what: str) -> dict[TopicPartition, int]:
    """``{"topic": {"partition": number}}`` checked: partition numbers, and numbers >= ``minimum``."""
    values: dict[TopicPartition, int] = {}
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise ConfigError(f"option {option}: topic {topic!r} must map to {{partition: number}}, got {parts!r}")
        for partition, value in parts.items():
            if not str(partition).isdigit() or not _is_int(value) or value < minimum:
                raise ConfigError(f"option {option}: {topic!r} partition {partition!r} -> {value!r} is not a "
                                  f"partition number and {what}")
            values[TopicPartition(topic, int(partition))] = value
    return values


def _json_object(option: str, value: str, expected: str) -> dict[str, Any]:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"option {option} is not valid JSON: {value!r}; expected {expected}") from exc
    if not isinstance(parsed, dict):
        raise ConfigError(f"option {option} must be {expected}, got {value!r}")
    return parsed


def _consumer_properties(lowered: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    properties = []
    for key, value in sorted(lowered.items()):
        if not key.startswith(KAFKA_PREFIX) or key == "kafka.bootstrap.servers":
            continue
        name = key[len(KAFKA_PREFIX):]
        if name in RESERVED_KAFKA_SETTINGS:
            raise ConfigError(f"option {key} is not allowed: the source manages it (offsets are kept in "
                              "Spark's checkpoint, records are handed out as bytes)")
        properties.append((name, value))
    _check_consumer_properties(properties)
    return tuple(properties)


def _check_consumer_properties(properties: list[tuple[str, str]]) -> None:
    """Build a config once so a bad ``kafka.*`` option fails on the driver, not in every task."""
    from ..config import ConsumerConfig
    try:
        ConsumerConfig.from_properties({"bootstrap.servers": "127.0.0.1:9092", **dict(properties)})
    except ConfigError as exc:
        raise ConfigError(f"a kafka.* option is invalid: {exc}") from exc


def _positive_int(lowered: Mapping[str, str], key: str) -> int | None:
    raw = lowered.get(key)
    if raw is None:
        return None
    try:
        number = int(raw)
    except ValueError:
        number = 0
    if number <= 0:
        raise ConfigError(f"option {KNOWN_OPTIONS[key]} must be a positive integer, got {raw!r}")
    return number


# Spark's time strings (JavaUtils.timeStringAsMs): a number and a unit, milliseconds without one.
_TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_TIME_STRING = re.compile(r"(\d+)\s*([a-z]*)")


def _duration(lowered: Mapping[str, str], key: str, default: float) -> float:
    """Seconds, from a time string such as ``"15m"``, ``"30s"`` or ``"500"`` (ms)."""
    raw = lowered.get(key)
    if raw is None:
        return default
    match = _TIME_STRING.fullmatch(raw.strip().lower())
    if match is None or (match.group(2) or "ms") not in _TIME_UNITS:
        raise ConfigError(f"option {KNOWN_OPTIONS[key]} must be a duration such as '15m', '30s' or '500ms', "
                          f"got {raw!r}")
    return int(match.group(1)) * _TIME_UNITS[match.group(2) or "ms"]


def _boolean(lowered: Mapping[str, str], key: str, default: bool) -> bool:
    raw = lowered.get(key)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise ConfigError(f"option {KNOWN_OPTIONS[key]} must be 'true' or 'false', got {raw!r}")
    return raw.strip().lower() == "true"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
