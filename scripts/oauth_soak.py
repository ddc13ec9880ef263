"""Soak: a group member signing in with OAUTHBEARER tokens that expire every 60 s consumes for 5 minutes
through re-authentication (KIP-368) while records are produced, on Apache Kafka 4.3.1.

    python scripts/oauth_soak.py [--minutes 5] [--token-lifetime 60] [--heartbeat-mode task|thread]

The broker's listener takes the unsecured validator and connections.max.reauth.ms of an hour, so each
session lasts as long as its token has left. Passes (exit 0) when every record produced was consumed
exactly once, nothing was logged at WARNING or above, and connections re-authenticated; prints the
figures as one JSON line. Not run in CI (minutes long).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import threading
import time
from typing import Any

from aiokafka_lite import Consumer, OAuthBearerToken
from aiokafka_lite.testing.apache_kafka import ApacheKafkaBroker
from aiokafka_lite.testing.helpers import create_topic, produce
from aiokafka_lite.testing.oauth import oauthbearer_listener_properties, unsecured_jws


class Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.name}: {record.getMessage()}")


def produce_steadily(bootstrap: str, topic: str, stop: threading.Event, sent: list[int]) -> None:
    while not stop.is_set():
        start = sent[0]
        sent[0] += produce(bootstrap, topic, [(None, str(start + i).encode()) for i in range(50)],
                           enable_idempotence=True)
        stop.wait(0.2)


async def soak(kafka: ApacheKafkaBroker, args: argparse.Namespace) -> dict[str, Any]:
    topic = f"oauth-soak-{int(time.time())}"
    create_topic(kafka.bootstrap_servers, topic, partitions=4)
    tokens: list[float] = []

    async def provider() -> OAuthBearerToken:
        tokens.append(time.monotonic())
        return OAuthBearerToken.with_lifetime(unsecured_jws("soak", args.token_lifetime), args.token_lifetime)

    stop, sent, got = threading.Event(), [0], []
    producer = threading.Thread(target=produce_steadily, args=(kafka.bootstrap_servers, topic, stop, sent))
    began = time.monotonic()
    async with Consumer(topic, bootstrap_servers=f"127.0.0.1:{kafka.listener_port('OAUTH')}", group_id=topic,
                        auto_offset_reset="earliest", heartbeat_mode=args.heartbeat_mode,
                        security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                        sasl_oauth_token_provider=provider) as consumer:
        producer.start()
        try:
            ends = began + args.minutes * 60
            while time.monotonic() < ends:
                got.extend(r.value for r in await consumer.poll(timeout=0.5))
        finally:
            stop.set()
            await asyncio.to_thread(producer.join, 60)
        drain_until = time.monotonic() + 60
        while len(got) < sent[0] and time.monotonic() < drain_until:
            got.extend(r.value for r in await consumer.poll(timeout=0.5))
        metrics = consumer.metrics()
    values = sorted(int(v) for v in got)
    return {"minutes": args.minutes, "token_lifetime_s": args.token_lifetime, "heartbeat_mode": args.heartbeat_mode,
            "produced": sent[0], "consumed": len(got), "distinct": len(set(values)),
            "exactly_once": values == list(range(sent[0])), "tokens_fetched": len(tokens),
            "sasl_reauthentications": metrics["sasl_reauthentications"], "rebalances": metrics.get("rebalances"),
            "seconds": round(time.monotonic() - began, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--token-lifetime", type=float, default=60.0)
    parser.add_argument("--heartbeat-mode", choices=("task", "thread"), default="task")
    args = parser.parse_args()
    warnings = Warnings()
    logging.getLogger("aiokafka_lite").addHandler(warnings)
    logging.getLogger("aiokafka_lite").setLevel(logging.INFO)
    properties = oauthbearer_listener_properties("OAUTH", max_reauth_ms=3_600_000)
    with ApacheKafkaBroker(extra_listeners={"OAUTH": "SASL_PLAINTEXT"}, extra_properties=properties) as kafka:
        figures = asyncio.run(soak(kafka, args))
    figures["warnings"] = warnings.messages
    print(json.dumps(figures))
    ok = figures["exactly_once"] and not warnings.messages and figures["sasl_reauthentications"] > 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
