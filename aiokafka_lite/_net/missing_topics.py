"""Say once that a subscribed topic does not exist.

A consumer subscribed to a topic the cluster does not have waits for it, as Java's does, and
reads nothing meanwhile: without a word, a mistyped name looks like an idle topic. The first
metadata that calls it unknown is a WARNING; later ones are DEBUG with a count (FailureLog), and
the topic appearing is one INFO line, which says who may have created it: with
``allow_auto_create_topics`` (the default, as in Java) a broker that creates topics on demand
(Apache Kafka's ``auto.create.topics.enable=true``, its default) makes a misspelt name a new, empty
topic, and this line is the only word of it. (A broker that creates the topic on the very first
request, as Tansu does, never calls it unknown: nothing is said then.)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from .failure_log import FailureLog

UNKNOWN_TOPIC_OR_PARTITION = 3


class MissingTopics:
    def __init__(self, logger: logging.Logger, *, auto_create: bool = False) -> None:
        self._logger = logger
        self._auto_create = auto_create  # the consumer lets brokers create topics it asks about
        self._streaks: dict[str, FailureLog] = {}

    def checked(self, errors: Mapping[str, int | None]) -> set[str]:
        """``errors``: subscribed topics' error codes in the latest metadata (None: not in it).
        Returns the topics it calls unknown."""
        missing = set()
        for topic, code in errors.items():
            streak = self._streaks.get(topic)
            if code == UNKNOWN_TOPIC_OR_PARTITION:
                if streak is None:
                    streak = self._streaks[topic] = FailureLog(self._logger, f"topic {topic!r}")
                streak.failed("does not exist; the consumer waits for it to be created and reads "
                              "nothing from it until then")
                missing.add(topic)
            elif code is not None and streak is not None:
                self._appeared(topic, streak)
                del self._streaks[topic]
        return missing

    def _appeared(self, topic: str, streak: FailureLog) -> None:
        if self._auto_create:
            who = ("created by someone, or on demand by the broker: Apache Kafka with "
                   "auto.create.topics.enable=true, its default, creates the topics a consumer with "
                   "allow_auto_create_topics=True, the default, asks about; if the name is a typo, set "
                   "allow_auto_create_topics=False")
        else:
            who = "created since"
        self._logger.info("topic %r: it exists now, %.1f s after the first metadata that said it does not "
                          "(%s)", topic, streak.failing_for(), who)
