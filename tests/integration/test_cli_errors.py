"""The `aiokafka-lite` command's failures as a user meets them: each is one line on stderr, said at
once, with the documented exit code (docs/cli.md: 1 for a Kafka error, 2 for a usage error).

A subprocess, as tests/integration/test_cli.py runs it. The Apache Kafka fixture keeps the broker's
default auto.create.topics.enable=true: the command must not create a topic by looking it up.
"""

from __future__ import annotations

import asyncio
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.testing.helpers import produce

CLI = [sys.executable, "-m", "aiokafka_lite"]
ENV = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}
# Generous: the old code said nothing for 30-75 s (missing topic with a group) or 60 s (a usage
# error only found when connecting); the new code answers in under 2 s on a quiet machine.
FIRST_LINE_WITHIN = 10.0
BROKERS = ["tansu_broker", "apache_kafka_broker"]


@dataclass
class Outcome:
    code: int
    stderr_lines: list[str]
    stdout: str
    first_line_after: float  # seconds from start to the first line on stderr


def run_failing(*args: str, within: float = FIRST_LINE_WITHIN) -> Outcome:
    """Run the command; fail the test (killing it) when nothing reaches stderr within ``within`` s."""
    started = time.monotonic()
    proc = subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    assert proc.stderr is not None
    ready, _, _ = select.select([proc.stderr], [], [], within)
    if not ready:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"nothing on stderr within {within} s: {args}")
    first_line_after = time.monotonic() - started
    try:
        out, err = proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"no exit within {within} s after the first line; stderr: {err!r}") from None
    return Outcome(proc.returncode, err.splitlines(), out, first_line_after)


def assert_one_line(outcome: Outcome, code: int, line: str) -> None:
    assert outcome.stderr_lines == [line], outcome.stderr_lines
    assert outcome.code == code
    assert outcome.first_line_after < FIRST_LINE_WITHIN


# ---------------------------------------------------------------------------- missing topic

@pytest.mark.parametrize("broker", BROKERS)
@pytest.mark.parametrize("group", [None, "with-group"])
def test_a_missing_topic_is_said_at_once_with_or_without_a_group(request, broker, group, unique_topic, unique_group):
    bootstrap = request.getfixturevalue(broker).bootstrap_servers
    grouped = ["--group", unique_group] if group else []
    # --from latest on Tansu also prints a note; it comes after the topic is found, so not here.
    outcome = run_failing("consume", unique_topic, "-b", bootstrap, *grouped, "--max", "1")
    assert_one_line(outcome, 1, f"aiokafka-lite: topic {unique_topic!r} does not exist")
    # Looking it up did not create it, though this Kafka broker auto-creates topics when asked.
    again = run_failing("consume", unique_topic, "-b", bootstrap, "--max", "1")
    assert_one_line(again, 1, f"aiokafka-lite: topic {unique_topic!r} does not exist")


async def _exists(bootstrap: str, topic: str) -> bool:
    async with Consumer(bootstrap_servers=bootstrap, allow_auto_create_topics=False) as consumer:
        return topic in await consumer.list_topics()


def test_a_topic_the_broker_auto_creates_is_consumed_when_auto_creation_is_asked_for(apache_kafka_broker,
                                                                                    unique_topic, unique_group):
    bootstrap = apache_kafka_broker.bootstrap_servers
    proc = subprocess.Popen([*CLI, "consume", unique_topic, "-b", bootstrap, "--group", unique_group,
                             "--from", "earliest", "--max", "1", "-X", "allow.auto.create.topics=true"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        # Produce only once the command's lookup had the broker create the topic (a producer could
        # create it too).
        deadline = time.monotonic() + 30
        while not asyncio.run(_exists(bootstrap, unique_topic)):
            assert time.monotonic() < deadline, "the broker did not create the topic"
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.5)
        produce(bootstrap, unique_topic, [("k", "v")])
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert out.splitlines() == [f'{unique_topic}[0]@0 key="k" value="v"']
    assert err == ""


# ---------------------------------------------------------------------------- missing group

@pytest.mark.parametrize("broker", BROKERS)
@pytest.mark.parametrize("output_format", ["text", "json"])
def test_a_missing_group_is_said_at_once(request, broker, output_format, unique_group):
    bootstrap = request.getfixturevalue(broker).bootstrap_servers
    outcome = run_failing("groups", "describe", unique_group, "-b", bootstrap, "--format", output_format)
    assert_one_line(outcome, 1, f"aiokafka-lite: group {unique_group!r} does not exist")
    assert outcome.stdout == ""


# ---------------------------------------------------------------------------- usage errors

NOWHERE = "127.0.0.1:1"  # nothing listens: a usage error must be found before connecting

USAGE_ERRORS = {
    "unknown-setting": (["consume", "t", "-b", NOWHERE, "-X", "session.timeout.mss=1"],
                        "aiokafka-lite: unknown property 'session.timeout.mss'"),
    "bad-value": (["consume", "t", "-b", NOWHERE, "-X", "session.timeout.ms=abc"],
                  "aiokafka-lite: invalid session.timeout.ms='abc'"),
    "missing-equals": (["consume", "t", "-b", NOWHERE, "-X", "session.timeout.ms"],
                       "aiokafka-lite: -X expects NAME=VALUE, got 'session.timeout.ms'"),
    "setting-of-an-option": (["consume", "t", "-b", NOWHERE, "-X", "group.id=g"],
                             "aiokafka-lite: -X group.id: give it as --group"),
    "empty-group": (["consume", "t", "-b", NOWHERE, "--group", ""], "aiokafka-lite: --group must not be empty"),
    "max-0": (["consume", "t", "-b", NOWHERE, "--max", "0"], "aiokafka-lite: --max must be at least 1"),
    "max-not-a-number": (["consume", "t", "-b", NOWHERE, "--max", "x"],
                         "aiokafka-lite consume: argument --max: invalid int value: 'x'"),
    "bad-choice": (["consume", "t", "-b", NOWHERE, "--from", "start"],
                   "aiokafka-lite consume: argument --from: invalid choice: 'start'"),
    "no-topic": (["consume"], "aiokafka-lite consume: the following arguments are required: topic"),
    "empty-bootstrap": (["consume", "t", "-b", ""], "aiokafka-lite: invalid bootstrap.servers=['']"),
    "describe-empty-group": (["groups", "describe", "", "-b", NOWHERE], "aiokafka-lite: GROUP must not be empty"),
    "describe-empty-bootstrap": (["groups", "describe", "g", "-b", ""],
                                 "aiokafka-lite: invalid bootstrap.servers=['']"),
}


@pytest.mark.parametrize(("args", "starts"), list(USAGE_ERRORS.values()), ids=list(USAGE_ERRORS))
def test_a_usage_error_exits_2_with_one_line(args, starts):
    outcome = run_failing(*args)
    assert len(outcome.stderr_lines) == 1, outcome.stderr_lines
    assert outcome.stderr_lines[0].startswith(starts), outcome.stderr_lines
    assert outcome.code == 2
    assert outcome.first_line_after < FIRST_LINE_WITHIN
