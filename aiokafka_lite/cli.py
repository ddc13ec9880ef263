"""The `aiokafka-lite` command."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="aiokafka-lite", description="asyncio Kafka consumer tools")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="KIP-62 liveness live, on an embedded broker")
    demo.add_argument("--broker", choices=("tansu", "kafka"), default="tansu",
                      help="tansu (default, no Java needed) or kafka (Apache Kafka 4.3.1, needs Java 17)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import main as run_demo
        return run_demo(args.broker)
    return 2


if __name__ == "__main__":
    sys.exit(main())
