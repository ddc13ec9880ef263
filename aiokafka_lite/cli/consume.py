"""`aiokafka-lite consume TOPIC`: print records, one per line, until Ctrl-C or --max.

Stopped by Ctrl-C or SIGTERM (even while connecting) it exits 130 or 143, after closing the consumer;
with its ``--max`` records printed, 0.

With ``--group`` the consumer joins that group and commits what it printed when it stops; without
it every partition of the topic is assigned and nothing is committed. ``--from latest`` on Tansu,
whose latest offsets are below the log end, prints a note on stderr: older records may come first.

A topic that does not exist is an error at once, with or without ``--group``: subscribed to a
missing topic, a group member (here as in Java) gets no partitions and polls nothing, waiting in
silence for the topic to appear. The command does not ask the broker to create topics unless
``-X allow.auto.create.topics=true`` says so; then a broker that auto-creates topics creates it.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from .. import Consumer, ConsumerRecord, TopicPartition
from .._net.broker_identity import config_is_tansu
from ..testing.tansu import DEVIATIONS
from .format import record_json, record_text
from .run import EXIT_KAFKA_ERROR, EXIT_OK, STOPPED, first_of, run_command
from .value_formats import registry_deserializers

# poll() returns at least this often, so Ctrl-C is noticed within about this long.
POLL_SECONDS = 0.5
# With auto-creation asked for, how long a topic the broker is creating may take to appear.
AUTO_CREATE_WAIT_SECONDS = 5.0
# Settings the command's own options set; -X must not set them behind the options' backs.
OPTION_FOR_SETTING = {"bootstrap.servers": "--bootstrap-server", "group.id": "--group",
                      "auto.offset.reset": "--from"}


def consumer_settings(bootstrap: str, *, group: str | None, start: str,
                      properties: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """The consumer's settings by their Kafka names: the command's defaults, then ``properties``
    (``-X``), then the options given by name."""
    # Looking a topic up must not create it: a mistyped name is an error here, not a new topic.
    return {"client.id": "aiokafka-lite-cli", "allow.auto.create.topics": "false", **(properties or {}),
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": start}


async def _partitions(consumer: Consumer, topic: str, auto_create: bool,
                      stop: asyncio.Event) -> list[TopicPartition]:
    """The topic's partitions; none (after saying so on stderr) when it does not exist."""
    partitions = await consumer.partitions_for(topic)
    waited = 0.0
    # A broker that creates the topic on this lookup answers before its partitions have leaders.
    while auto_create and not partitions and waited < AUTO_CREATE_WAIT_SECONDS and not stop.is_set():
        await asyncio.sleep(POLL_SECONDS)
        waited += POLL_SECONDS
        partitions = await consumer.partitions_for(topic)
    if not partitions and not stop.is_set():
        created = (f", and the broker did not create it within {AUTO_CREATE_WAIT_SECONDS:g} s "
                   "(its auto.create.topics.enable is false?)") if auto_create else ""
        print(f"aiokafka-lite: topic {topic!r} does not exist{created}", file=sys.stderr)
    return partitions


def tansu_latest_note() -> str:
    deviation = DEVIATIONS["list_offsets_latest"]
    return (f"aiokafka-lite: note: the broker is Tansu, so --from latest may start before the end of a "
            f"partition and print older records first: its {deviation.differs} "
            f"(aiokafka_lite.testing.tansu.DEVIATIONS[{deviation.name!r}])")


async def consume(topic: str, bootstrap: str, *, group: str | None, start: str, output_format: str,
                  max_records: int | None, stop: asyncio.Event, out: TextIO,
                  properties: Mapping[str, str] | None = None, key_format: str = "bytes",
                  value_format: str = "bytes", registry: str | None = None) -> int:
    """Print records of ``topic`` to ``out`` until ``stop`` is set (then return STOPPED) or
    ``max_records`` were printed (EXIT_OK).

    ``properties`` are extra settings by their Kafka names (``session.timeout.ms``); the options
    given by name win over them. ``key_format``/``value_format`` other than "bytes" decode with the
    schema registry at ``registry``.
    """
    render = record_json if output_format == "json" else record_text
    settings: dict[str, Any] = consumer_settings(bootstrap, group=group, start=start, properties=properties)
    registry_client, deserializers = (None, {}) if registry is None else registry_deserializers(
        registry, key_format, value_format)
    try:
        return await _print_records(Consumer.from_properties({**settings, **deserializers}), topic, group, start,
                                    render, max_records, stop, out)
    finally:
        if registry_client is not None:
            await registry_client.aclose()


async def _print_records(consumer: Consumer, topic: str, group: str | None, start: str,
                         render: Callable[[ConsumerRecord], str], max_records: int | None, stop: asyncio.Event,
                         out: TextIO) -> int:
    try:
        if not await first_of(consumer.start(), stop):
            return STOPPED
        partitions = await _partitions(consumer, topic, consumer.config.allow_auto_create_topics, stop)
        if not partitions:
            return STOPPED if stop.is_set() else EXIT_KAFKA_ERROR
        if start == "latest" and await config_is_tansu(consumer.config):
            print(tansu_latest_note(), file=sys.stderr)
        if group is not None:
            consumer.subscribe([topic])
        else:
            consumer.assign(partitions)
        printed = 0
        while not stop.is_set() and (max_records is None or printed < max_records):
            room = None if max_records is None else max_records - printed
            batch = await consumer.poll(timeout=POLL_SECONDS, max_records=room)
            for record in batch:
                out.write(render(record) + "\n")
            printed += len(batch)
            out.flush()
        # All --max records printed is a complete run, even if a signal came meanwhile.
        return EXIT_OK if max_records is not None and printed >= max_records else STOPPED
    finally:
        # Commits what was printed (auto-commit with a group) and leaves the group.
        await consumer.close()


def run_consume(topic: str, bootstrap: str, *, group: str | None, start: str, output_format: str,
                max_records: int | None, properties: Mapping[str, str] | None = None, key_format: str = "bytes",
                value_format: str = "bytes", registry: str | None = None) -> int:
    async def command(stop: asyncio.Event) -> int:
        return await consume(topic, bootstrap, group=group, start=start, output_format=output_format,
                             max_records=max_records, stop=stop, out=sys.stdout, properties=properties,
                             key_format=key_format, value_format=value_format, registry=registry)

    try:
        return run_command(command)
    except BrokenPipeError:  # e.g. `| head`: the reader went away, which is not an error
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
