"""What the connections of one cluster client learn about their brokers, said once per kind.

Three kinds of trouble, each with its own streak (see FailureLog):

* a connect attempt failing: normal during a restart, so INFO the first time, DEBUG while it
  lasts, INFO when a connection opens again; never WARNING (an idle connection closed: DEBUG);
* a broker dropping the connection every time it gets one particular request: a broker that
  advertises a version it cannot parse, or a proxy that chokes on it. One drop is a restart;
  the same API dropped ``DROPS_BEFORE_WARNING`` times running, with no answer to it between, is
  the broker refusing it, and the WARNING names the API and version (the clue a user needs);
* a half-open connection (nothing received while requests timed out): WARNING the first time.

The monitor outlives the connections (a dropped connection is replaced by a new one), so it is
owned by the Cluster and handed to each Connection it opens.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable

from ..protocol.api import Api
from .failure_log import FailureLog

log = logging.getLogger("aiokafka_lite.net")

DROPS_BEFORE_WARNING = 3

Address = tuple[str, int]


class ConnectionMonitor:
    def __init__(self, logger: logging.Logger = log, clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.clock = clock
        self._logs: dict[Hashable, FailureLog] = {}
        self._dropping: dict[Address, set[int]] = {}  # API keys with a drop streak, per address
        self.sasl_reauthentications = 0  # KIP-368, over every connection (the heartbeat thread's too)

    def _log(self, key: Hashable, subject: str, warn_after_failures: int | None) -> FailureLog:
        found = self._logs.get(key)
        if found is None:
            found = self._logs[key] = FailureLog(self.logger, subject, clock=self.clock,
                                                 warn_after_failures=warn_after_failures)
        return found

    # ------------------------------------------------------------------ failures

    def closed(self, broker: str, address: Address, error: object,
               in_flight: tuple[Api, int, tuple[int, int] | None] | None) -> None:
        """The broker closed the connection (or reading failed). ``in_flight``: the oldest request
        still waiting for its answer, its version and the version range the broker advertises."""
        if in_flight is None:  # an idle connection: brokers close those (connections.max.idle.ms)
            self.logger.debug("%s: idle connection closed: %s", broker, error)
            return
        api, version, advertised = in_flight
        self._dropping.setdefault(address, set()).add(api.key)
        offered = "" if advertised is None else f" (it advertises v{advertised[0]}-v{advertised[1]})"
        self._log(("dropped", address, api.key), f"{broker}: {api.name}", DROPS_BEFORE_WARNING).failed(
            f"connection lost in answer to {api.name} v{version}{offered}: {error}")

    def connect_failed(self, broker: str, address: Address, error: object) -> None:
        self._log(("connect", address), broker, None).failed(f"connection failed: {error}")

    def half_open(self, broker: str, address: Address, detail: str) -> None:
        self._log(("half-open", address), broker, 1).failed(detail)

    # ------------------------------------------------------------------ recoveries

    def connected(self, address: Address) -> None:
        for kind in ("connect", "half-open"):
            found = self._logs.get((kind, address))
            if found is not None:
                found.recovered(detail="connected again")

    def watching(self, address: Address) -> bool:
        """Whether answers from ``address`` must be reported (cheap: checked per response)."""
        return address in self._dropping

    def answered(self, address: Address, api: Api, version: int) -> None:
        keys = self._dropping.get(address)
        if keys is None or api.key not in keys:
            return
        keys.discard(api.key)
        if not keys:
            del self._dropping[address]
        self._logs[("dropped", address, api.key)].recovered(detail=f"{api.name} v{version} answered")

    def reauthenticated(self) -> None:
        """A connection signed in again before its SASL session lapsed (KIP-368). Any thread: an
        int increment under the GIL, read by metrics() only."""
        self.sasl_reauthentications += 1

    # ------------------------------------------------------------------ metrics

    def failing(self) -> dict[str, str]:
        """Subject -> last error, for every kind failing right now."""
        return {f.subject: f.last_error or "" for f in self._logs.values() if f.failing}
