"""`aiokafka-lite consume TOPIC`: print records, one per line, until Ctrl-C or --max.

With ``--group`` the consumer joins that group and commits what it printed when it stops; without
it every partition of the topic is assigned and nothing is committed. ``--from latest`` on Tansu,
whose latest offsets are below the log end, prints a note on stderr: older records may come first.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from typing import TextIO

from . import Consumer
from ._net.broker_identity import config_is_tansu
from .cli_format import record_json, record_text
from .cli_run import EXIT_KAFKA_ERROR, EXIT_OK, first_of, run_command
from .testing.tansu import DEVIATIONS

# poll() returns at least this often, so Ctrl-C is noticed within about this long.
POLL_SECONDS = 0.5


async def _assign_all(consumer: Consumer, topic: str) -> bool:
    partitions = await consumer.partitions_for(topic)
    if not partitions:
        print(f"aiokafka-lite: topic {topic!r} does not exist", file=sys.stderr)
        return False
    consumer.assign(partitions)
    return True


def tansu_latest_note() -> str:
    deviation = DEVIATIONS["list_offsets_latest"]
    return (f"aiokafka-lite: note: the broker is Tansu, so --from latest may start before the end of a "
            f"partition and print older records first: its {deviation.differs} "
            f"(aiokafka_lite.testing.tansu.DEVIATIONS[{deviation.name!r}])")


async def consume(topic: str, bootstrap: str, *, group: str | None, start: str, output_format: str,
                  max_records: int | None, stop: asyncio.Event, out: TextIO,
                  properties: Mapping[str, str] | None = None) -> int:
    """Print records of ``topic`` to ``out`` until ``stop`` is set or ``max_records`` were printed.

    ``properties`` are extra settings by their Kafka names (``session.timeout.ms``); the options
    given by name win over them.
    """
    render = record_json if output_format == "json" else record_text
    # Looking a topic up must not create it: a mistyped name is an error here, not a new topic.
    settings = {"client.id": "aiokafka-lite-cli", "allow.auto.create.topics": "false", **(properties or {}),
                "bootstrap.servers": bootstrap,
                "group.id": group, "auto.offset.reset": start}
    consumer = Consumer.from_properties(settings)
    try:
        if not await first_of(consumer.start(), stop):
            return EXIT_OK
        if start == "latest" and await config_is_tansu(consumer.config):
            print(tansu_latest_note(), file=sys.stderr)
        if group is not None:
            consumer.subscribe([topic])
        elif not await _assign_all(consumer, topic):
            return EXIT_KAFKA_ERROR
        printed = 0
        while not stop.is_set() and (max_records is None or printed < max_records):
            room = None if max_records is None else max_records - printed
            batch = await consumer.poll(timeout=POLL_SECONDS, max_records=room)
            for record in batch:
                out.write(render(record) + "\n")
            printed += len(batch)
            out.flush()
        return EXIT_OK
    finally:
        # Commits what was printed (auto-commit with a group) and leaves the group.
        await consumer.close()


def run_consume(topic: str, bootstrap: str, *, group: str | None, start: str, output_format: str,
                max_records: int | None, properties: Mapping[str, str] | None = None) -> int:
    async def command(stop: asyncio.Event) -> int:
        return await consume(topic, bootstrap, group=group, start=start, output_format=output_format,
                             max_records=max_records, stop=stop, out=sys.stdout, properties=properties)

    try:
        return run_command(command)
    except BrokenPipeError:  # e.g. `| head`: the reader went away, which is not an error
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
