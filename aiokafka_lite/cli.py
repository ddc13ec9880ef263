"""The `aiokafka-lite` command (also `python -m aiokafka_lite`).

    aiokafka-lite consume TOPIC [--bootstrap-server H:P] [--group G] [--from earliest|latest]
                                [--format text|json] [--max N] [-X name=value ...]
    aiokafka-lite groups describe GROUP [--bootstrap-server H:P] [--format text|json]
    aiokafka-lite demo [--broker tansu|kafka] [--view auto|live|plain]
    aiokafka-lite --version     (also says which record decoder runs: native or python)

Each command exits 0 on success and on Ctrl-C (after closing what it opened), 1 on a Kafka error
(with a one-line message on stderr, no traceback) and 2 on a usage error.
"""

from __future__ import annotations

import argparse
import sys

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aiokafka-lite", description="asyncio Kafka consumer tools",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # --version: one line
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", required=True)

    consume = commands.add_parser("consume", help="print records of a topic")
    consume.add_argument("topic")
    consume.add_argument("--bootstrap-server", "-b", default=DEFAULT_BOOTSTRAP,
                         help=f"host:port[,host:port...] (default {DEFAULT_BOOTSTRAP})")
    consume.add_argument("--group", "-g", default=None,
                         help="consumer group (commits offsets); without it every partition is read, nothing committed")
    consume.add_argument("--from", dest="start", choices=("earliest", "latest"), default="latest",
                         help="where to start when there is no committed offset (default latest)")
    consume.add_argument("--format", choices=("text", "json"), default="text",
                         help="text (one readable line per record) or json (one JSON object per line)")
    consume.add_argument("--max", type=int, default=None, metavar="N", help="stop after N records")
    consume.add_argument("-X", "--property", action="append", default=[], metavar="NAME=VALUE",
                         help="any consumer setting by its Kafka name, e.g. -X session.timeout.ms=10000")

    groups = commands.add_parser("groups", help="inspect consumer groups")
    group_commands = groups.add_subparsers(dest="group_command", required=True)
    describe = group_commands.add_parser("describe", help="members, their assignment, committed offsets and lag")
    describe.add_argument("group")
    describe.add_argument("--bootstrap-server", "-b", default=DEFAULT_BOOTSTRAP)
    describe.add_argument("--format", choices=("text", "json"), default="text")

    demo = commands.add_parser("demo", help="KIP-62 liveness live, on an embedded broker")
    demo.add_argument("--broker", choices=("tansu", "kafka"), default="tansu",
                      help="tansu (default, no Java needed) or kafka (Apache Kafka 4.3.1, needs Java 17)")
    demo.add_argument("--view", choices=("auto", "live", "plain"), default="auto",
                      help="live table (needs rich), plain lines, or auto: live on a terminal")
    return parser


def _properties(pairs: list[str]) -> dict[str, str] | None:
    """``["a.b=1", ...]`` as a dict; None (after saying why on stderr) when one has no ``=``."""
    properties: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            print(f"aiokafka-lite: -X expects NAME=VALUE, got {pair!r}", file=sys.stderr)
            return None
        properties[name.strip()] = value.strip()
    return properties


def _version() -> str:
    from . import __version__
    from .protocol import native

    if native.decoder() == "native":
        return f"aiokafka-lite {__version__} (record decoder: native)"
    return f"aiokafka-lite {__version__} (record decoder: python; {native.why_python()})"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "consume":
        if args.max is not None and args.max < 1:
            print("aiokafka-lite: --max must be at least 1", file=sys.stderr)
            return 2
        properties = _properties(args.property)
        if properties is None:
            return 2
        from .cli_consume import run_consume
        return run_consume(args.topic, args.bootstrap_server, group=args.group, start=args.start,
                           output_format=args.format, max_records=args.max, properties=properties)
    if args.command == "groups":
        from .cli_groups import run_describe
        return run_describe(args.group, args.bootstrap_server, output_format=args.format)
    if args.command == "demo":
        from .demo import main as run_demo
        return run_demo(args.broker, view=args.view)
    return 2


if __name__ == "__main__":
    sys.exit(main())
