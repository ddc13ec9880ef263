"""Say once that a subscribed topic does not exist.

A consumer subscribed to a topic the cluster does not have waits for it, as Java's does, and
reads nothing meanwhile: without a word, a mistyped name looks like an idle topic. The first
metadata that calls it unknown is a WARNING; later ones are DEBUG with a count (FailureLog), and
the topic appearing is one INFO line.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from .failure_log import FailureLog

UNKNOWN_TOPIC_OR_PARTITION = 3


class MissingTopics:
    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
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
                streak.recovered(detail="it exists now")
                del self._streaks[topic]
        return missing
