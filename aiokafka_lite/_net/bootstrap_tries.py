"""The bootstrap servers' failures: the last cause and the number of tries of each, for whoever
times out waiting for the cluster, and the first round's failure said at once.

A client that has never reached its cluster is most likely misconfigured (a wrong address, port or
security protocol): the first round in which no server answered ends in a WARNING, naming a cause
and how long the client keeps trying (a server down while the next one answers is not said);
repeats go to DEBUG with a count (FailureLog). Once the cluster has answered, a failing rebootstrap
is brokers restarting, and the cluster's quieter metadata log says it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from .failure_log import FailureLog


@dataclass
class ServerTries:
    last_cause: str
    tries: int


class BootstrapTries:
    def __init__(self, logger: logging.Logger, servers: Sequence[tuple[str, int]],
                 retry_limit: str | None = None) -> None:
        self.servers = [f"{host}:{port}" for host, port in servers]
        # How long the callers keep trying, for the WARNING ("60 s (default_api_timeout_ms)").
        self.retry_limit = retry_limit
        self.reached = False  # a bootstrap server has answered Metadata at least once
        self._tries: dict[str, ServerTries] = {}
        self._first_contact = FailureLog(logger, "cannot reach the cluster yet", warn_after_failures=1)

    def failed(self, server: str, cause: object) -> None:
        """``server`` ("host:port") failed with ``cause``, whose text names the server: counted here,
        said by ``say`` (the caller says a round's failures once the round found no server)."""
        tries = self._tries.setdefault(server, ServerTries("", 0))
        tries.last_cause = str(cause)
        tries.tries += 1

    def say(self, cause: object, retry_limit: str | None = None) -> None:
        """Log a failure: WARNING the first time while the cluster was never reached, then DEBUG."""
        if not self.reached:
            limit = retry_limit or self.retry_limit
            self._first_contact.failed(cause, then=f"still trying for {limit}" if limit else "still trying")

    def waiting(self, cause: object, retry_limit: str | None = None) -> None:
        """A server has not answered yet and that is already news (a server that accepted the
        connection and is silent): said as ``say`` would, while its attempt still waits; not counted."""
        if not self.reached:
            limit = retry_limit or self.retry_limit
            self._first_contact.pending(cause, then=f"still trying for {limit}" if limit else "still trying")

    def succeeded(self, server: str) -> None:
        self._first_contact.recovered(detail=f"{server} answered")
        self.reached = True
        self._tries.clear()

    def failures(self) -> str | None:
        """Each failing server's last cause and number of tries, or None when none failed."""
        if not self._tries:
            return None
        return "; ".join(_said(server, tries) for server, tries in self._tries.items())

    def all_failed(self) -> bool:
        """Whether every bootstrap server has failed at least once since the last success."""
        return all(server in self._tries for server in self.servers)


def _said(server: str, tries: ServerTries) -> str:
    counted = f"({tries.tries} {'try' if tries.tries == 1 else 'tries'})"
    # The causes from Connection.open begin with the address; others (a Metadata error) do not.
    return f"{tries.last_cause} {counted}" if server in tries.last_cause else \
        f"{server}: {tries.last_cause} {counted}"
