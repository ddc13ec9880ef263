"""The `aiokafka-lite` command (also `python -m aiokafka_lite`).

    aiokafka-lite consume TOPIC [--bootstrap-server H:P] [--group G] [--from earliest|latest]
                                [--format text|json] [--max N] [-X name=value ...]
    aiokafka-lite groups describe GROUP [--bootstrap-server H:P] [--format text|json]
    aiokafka-lite groups list [--state S[,S...]] [--format text|json]
    aiokafka-lite groups lag GROUP [--format text|json]
    aiokafka-lite groups reset-offsets GROUP --topic T[:P,P...] (--to-earliest | --to-latest |
                  --to-datetime ISO | --shift-by N | --to-offset N) [--execute] [--format text|json]
    aiokafka-lite groups delete-offsets GROUP --topic T[:P,P...] [--format text|json]
    aiokafka-lite demo [--broker tansu|kafka] [--view auto|live|plain]
    aiokafka-lite --version     (also says which record decoder runs: native or python)

Each command exits 0 on success, 1 on a Kafka error (with a one-line message on stderr, no traceback)
and 2 on a usage error (one line on stderr too): a bad option, or a bad -X setting or -b address (any
ConfigError), found before connecting. Stopped by Ctrl-C (SIGINT) or SIGTERM, also while connecting,
it closes what it opened and exits 130 or 143 (128 + the signal's number, as a shell reports it),
without a traceback.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import TYPE_CHECKING, NoReturn

from .value_formats import FORMATS, usage_problem

if TYPE_CHECKING:
    from .reset_plan import ResetMode

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
EXIT_USAGE = 2
EXIT_SIGINT = 128 + signal.SIGINT  # as run.signal_status says it (this module imports little up front)


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error said in one line (with where to read the usage) rather than the
    usage block and the error."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _usage_error(message: str) -> int:
    print(f"aiokafka-lite: {message}", file=sys.stderr)
    return EXIT_USAGE


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="aiokafka-lite", description="asyncio Kafka consumer tools",
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
    for side in ("key", "value"):
        consume.add_argument(f"--{side}-format", choices=FORMATS, default="bytes",
                             help=f"bytes (default), or {side}s in Confluent's wire format decoded with the "
                                  "schema registry at --registry: avro or json-schema")
    consume.add_argument("--registry", default=None, metavar="URL",
                         help="the schema registry's Confluent API, e.g. http://localhost:8081 "
                              "(Apicurio: http://host:port/apis/ccompat/v7)")
    consume.add_argument("-X", "--property", action="append", default=[], metavar="NAME=VALUE",
                         help="any consumer setting by its Kafka name, e.g. -X session.timeout.ms=10000")

    groups = commands.add_parser("groups", help="inspect consumer groups")
    group_commands = groups.add_subparsers(dest="group_command", required=True)
    describe = group_commands.add_parser("describe", help="members, their assignment, committed offsets and lag")
    describe.add_argument("group")
    describe.add_argument("--bootstrap-server", "-b", default=DEFAULT_BOOTSTRAP)
    describe.add_argument("--format", choices=("text", "json"), default="text")
    _group_tool_parsers(group_commands)

    demo = commands.add_parser("demo", help="KIP-62 liveness live, on an embedded broker")
    demo.add_argument("--broker", choices=("tansu", "kafka"), default="tansu",
                      help="tansu (default, no Java needed) or kafka (Apache Kafka 4.4.0, needs Java 17)")
    demo.add_argument("--view", choices=("auto", "live", "plain"), default="auto",
                      help="live table (needs rich), plain lines, or auto: live on a terminal")
    return parser


def _group_tool_parsers(group_commands: argparse._SubParsersAction[_Parser]) -> None:
    """``groups list | lag | reset-offsets | delete-offsets`` (docs/groups.md: each beside Kafka's tools)."""
    listing = group_commands.add_parser("list", help="every group (classic, consumer, share, streams): type, state, "
                                        "members")
    listing.add_argument("--state", default=None, metavar="S[,S...]", help="only groups in these states")
    lag = group_commands.add_parser("lag", help="committed offset, log-end offset and lag per partition, and the total")
    lag.add_argument("group")
    reset = group_commands.add_parser("reset-offsets", help="plan (default) or --execute a reset of an inactive group")
    reset.add_argument("group")
    reset.add_argument("--topic", action="append", required=True, metavar="T[:P,P...]",
                       help="a topic, or some of its partitions (orders:0,2); may be repeated")
    modes = reset.add_mutually_exclusive_group(required=True)
    modes.add_argument("--to-earliest", action="store_true", help="the log start offset")
    modes.add_argument("--to-latest", action="store_true", help="the log end offset")
    modes.add_argument("--to-datetime", metavar="ISO", help="the first offset at or after this time (no zone: UTC)")
    modes.add_argument("--shift-by", type=int, metavar="N", help="the committed offset + N (N may be negative)")
    modes.add_argument("--to-offset", type=int, metavar="N", help="offset N")
    apply = reset.add_mutually_exclusive_group()
    apply.add_argument("--execute", action="store_true", help="commit the plan (default: only print it)")
    apply.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    delete = group_commands.add_parser("delete-offsets", help="delete a group's offsets of some topics, at once "
                                       "(no dry run, as in Kafka's tools)")
    delete.add_argument("group")
    delete.add_argument("--topic", action="append", required=True, metavar="T[:P,P...]",
                        help="a topic, or some of its partitions (not for a share group); may be repeated")
    # Kafka's tools take these and delete anyway; here they are refused (see _run_delete).
    delete.add_argument("--dry-run", "--execute", dest="preview_option", action="append_const", const=True,
                        help=argparse.SUPPRESS)
    for sub in (listing, lag, reset, delete):
        sub.add_argument("--bootstrap-server", "-b", default=DEFAULT_BOOTSTRAP)
        sub.add_argument("--format", choices=("text", "json"), default="text")


def _reset_mode(args: argparse.Namespace) -> ResetMode:
    """The ResetMode the options ask for, or what is wrong with them."""
    from .reset_plan import ResetMode, parse_datetime

    if args.to_earliest:
        return ResetMode("to-earliest")
    if args.to_latest:
        return ResetMode("to-latest")
    if args.to_datetime is not None:
        return ResetMode("to-datetime", parse_datetime(args.to_datetime))
    if args.shift_by is not None:
        return ResetMode("shift-by", args.shift_by)
    return ResetMode("to-offset", args.to_offset)


def _run_groups(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from .group_admin import admin_config

    if getattr(args, "group", None) == "":
        return _usage_error("GROUP must not be empty")
    try:
        admin_config(args.bootstrap_server)
    except ConfigError as exc:
        return _usage_error(str(exc))
    if args.group_command == "describe":
        from .groups import run_describe
        return run_describe(args.group, args.bootstrap_server, output_format=args.format)
    if args.group_command == "lag":
        from .groups_lag import run_lag
        return run_lag(args.group, args.bootstrap_server, output_format=args.format)
    if args.group_command == "list":
        from .groups_list import parse_states, run_list
        try:
            states = parse_states(args.state) if args.state else set()
        except ValueError as exc:
            return _usage_error(str(exc))
        return run_list(args.bootstrap_server, states=states, output_format=args.format)
    if args.group_command == "delete-offsets":
        return _run_delete(args)
    from .reset_offsets import run_reset
    from .reset_plan import parse_topic
    try:
        mode = _reset_mode(args)
        topics = [parse_topic(t) for t in args.topic]
    except ValueError as exc:
        return _usage_error(str(exc))
    return run_reset(args.group, args.bootstrap_server, topics, mode, execute=args.execute,
                     output_format=args.format)


def _run_delete(args: argparse.Namespace) -> int:
    from .delete_offsets import run_delete
    from .reset_plan import parse_topic

    if args.preview_option:
        return _usage_error("groups delete-offsets deletes at once and has no --dry-run or --execute (Kafka's "
                            "--delete-offsets takes --dry-run and deletes anyway); 'groups lag GROUP' shows the "
                            "offsets first")
    try:
        topics = [parse_topic(t) for t in args.topic]
    except ValueError as exc:
        return _usage_error(str(exc))
    return run_delete(args.group, args.bootstrap_server, topics, output_format=args.format)


def _properties(pairs: list[str]) -> dict[str, str] | str:
    """``["a.b=1", ...]`` as a dict, or what is wrong with one of them."""
    from .consume import OPTION_FOR_SETTING

    properties: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            return f"-X expects NAME=VALUE, got {pair!r}"
        option = OPTION_FOR_SETTING.get(name.replace("_", "."))
        if option is not None:
            return f"-X {name}: give it as {option}"
        if name in properties:
            return f"-X {name} given twice"
        properties[name] = value.strip()
    return properties


def _checked_properties(args: argparse.Namespace) -> str | dict[str, str]:
    """The -X settings, or what makes the command line unusable (checked before connecting)."""
    from ..config import ConsumerConfig
    from ..errors import ConfigError
    from .consume import consumer_settings

    if args.max is not None and args.max < 1:
        return "--max must be at least 1"
    if args.group == "":
        return "--group must not be empty (leave it out to read without a group)"
    properties = _properties(args.property)
    if isinstance(properties, str):
        return properties
    # Only checked here: the consumer built from the same settings says what they leave unused.
    config_log = logging.getLogger("aiokafka_lite.config")
    config_log.disabled = True
    try:
        ConsumerConfig.from_properties(consumer_settings(args.bootstrap_server, group=args.group,
                                                         start=args.start, properties=properties))
    except ConfigError as exc:
        return str(exc)
    finally:
        config_log.disabled = False
    return properties


def _version() -> str:
    from .. import __version__
    from ..protocol import native

    if native.decoder() == "native":
        return f"aiokafka-lite {__version__} (record decoder: native)"
    return f"aiokafka-lite {__version__} (record decoder: python; {native.why_python()})"


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C before a command's signal handlers were in place
        return EXIT_SIGINT


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "consume":
        properties = _checked_properties(args)
        if isinstance(properties, str):
            return _usage_error(properties)
        formats_problem = usage_problem(args.key_format, args.value_format, args.registry)
        if formats_problem is not None:
            return _usage_error(formats_problem)
        from .consume import run_consume
        return run_consume(args.topic, args.bootstrap_server, group=args.group, start=args.start,
                           output_format=args.format, max_records=args.max, properties=properties,
                           key_format=args.key_format, value_format=args.value_format, registry=args.registry)
    if args.command == "groups":
        return _run_groups(args)
    if args.command == "demo":
        from .demo import main as run_demo
        return run_demo(args.broker, view=args.view)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
