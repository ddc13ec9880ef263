"""Every ```bash / ```sh / ```python block of README.md, docs/*.md and examples/**/README.md runs
here, so a documented command that stops working fails the suite. The test id is the block's file
and the line of its opening fence (``test_doc_block[README.md:45]``). ```text, ```console and bare
fences are output and are not run.

How a block runs
    A shell block is cut into commands (``\\`` continuations joined, comment lines dropped); each runs
    in ``bash -o pipefail -c`` from the repository root with this venv's ``bin`` first on PATH (so
    ``aiokafka-lite``, ``python``, ``uvicorn`` are the project's) and must exit 0 within its timeout
    (60 s). A bare ``cd DIR`` changes the directory for the commands after it. ``pip install ...``
    lines are checked, not run (the extras they name must exist in pyproject.toml): the suite runs
    in the installed project and must not change it. A Python block runs as ``python block.py``.

Marks: HTML comments on their own lines just above the fence (a reader does not see them), e.g.
``<!-- doc-test: broker=kafka topic=orders records=10 -->``; values with spaces in double quotes.

    skip reason="..."       do not run it (recursion, a cloud service, minutes of benchmark); the
                            reason is required and shows in the skip report (pytest -ra)
    broker=tansu|kafka      start that broker (Tansu, or Apache Kafka 4.3.1 where Tansu deviates,
                            e.g. a group's first join takes half of session.timeout.ms there) and
                            put its address wherever the block says 127.0.0.1:9092
    topic=NAME              create that topic first (partitions=N, default 1) with records=N
                            records (key kN, value vN); NAME is replaced in the block by a name no
                            other block uses
    group=NAME              likewise a fresh consumer group id for NAME
    registry[=apicurio]     start the session's schema registry (Apicurio Registry, the
                            `schema_registry` fixture: skipped as it says without Java 21+) and
                            put its Confluent API's URL wherever the block says
                            http://localhost:8081
    avro-records=N          with broker=, topic= and registry: N Avro records of AVRO_ORDER below
                            (key kI, value {"id": I, "note": "note I"}) written by produce_avro;
                            poison=I makes the one at offset I name a schema id the registry lacks
    prelude=NAME            run a Python fragment inside a context (PRELUDES below: "consumer",
                            "dead-letter", "pytest", and "spark": `spark` is given, and every
                            Spark block runs in one shared Spark process to spare a JVM start
                            each); better, make the block complete
    setup="CMD"             a shell command run before the block (repeatable)
    replace="OLD=>NEW"      textual replacement in the block; {tmp} is a fresh directory
    stop-after=SECONDS      a command still running after this long is stopped with `signal`
    stop-when="TEXT"        ... or once its output contains TEXT (for `consume` without --max,
                            `uvicorn`, an endless loop)
    signal=SIGINT|SIGTERM   how it is stopped (default SIGINT, i.e. Ctrl-C)
    exit=N|signal           a stopped command must exit N (default 0; `aiokafka-lite` exits 130
                            after SIGINT, 143 after SIGTERM), or `signal`: 0 or dead of that
                            signal (a Python script's KeyboardInterrupt, uvicorn)
    background=PREFIX       commands starting with PREFIX (after VAR=value assignments) run in the
                            background while the next ones run (a server and its `curl`), and are
                            stopped with `signal` at the end; ready="TEXT" waits for TEXT first
    expect="TEXT"           the block's output must contain TEXT (repeatable; names replaced)
    refuse="TEXT"           ... must not contain TEXT (repeatable), e.g. refuse=Warning. A Python
                            traceback is always refused, except from a command stopped with
                            exit=signal (Ctrl-C in a script prints one)
    timeout=SECONDS         each command's limit (default 60)
    synopsis                a usage line, not a command: every option and every a|b choice in it
                            must appear in the command's --help
    run-by=TEST_FILE        a block that needs what the collector does not start (a TLS or SASL
                            cluster, the reader's own keystore) and that TEST_FILE runs as written,
                            reading it from this Markdown file: checked here to name a test file
                            that reads this file, not counted as a skip

Skips stay few: today `./dev` (it runs this suite, and sets up its own .venv with pip), the
property test's long runs, the Spark benchmark and a sketch with an elided body.
"""

from __future__ import annotations

import re
import signal
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.schema_registry.wire import frame
from aiokafka_lite.testing.helpers import create_topic, produce, produce_avro

from ._doc_blocks import (
    DOC_ADDRESS,
    DOC_REGISTRY,
    ROOT,
    SHELL,
    Block,
    blocks_of,
    doc_files,
    is_pip_install,
    pip_install_problems,
    program_of,
    runnable_blocks,
    shell_commands,
    stray_marks,
    substitute,
    synopses,
)
from ._doc_runner import COMMAND_TIMEOUT, SPARK_WORKER, DocRun, SparkWorker, Stop, block_env

BROKER_FIXTURES = {"tansu": "tansu_broker", "kafka": "apache_kafka_broker"}
REGISTRY_FIXTURES = {"": "schema_registry", "apicurio": "schema_registry"}
# The writer's schema of avro-records= (docs/schema-registry.md shows it to the reader).
AVRO_ORDER = {"type": "record", "name": "Order", "namespace": "shop",
              "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": "string"}]}
UNKNOWN_SCHEMA_ID = 987654321

# name -> (code before the block, indentation of the block, code after it)
PRELUDES: dict[str, tuple[str, str, str]] = {
    # A consumer of every partition of "orders" from the earliest offset, no group: `consumer`.
    "consumer": ('''\
import asyncio

import pyarrow

from aiokafka_lite import Consumer, TopicPartition


async def main() -> None:
    async with Consumer(bootstrap_servers="127.0.0.1:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("orders", 0)])
''', " " * 8, '''
asyncio.run(main())
'''),
    # The dead-letter recipe's context: a consumer in group "billing" whose value deserializer
    # refuses the value b"v3", a logger `log` and a queue `dead_letters`.
    "dead-letter": ('''\
import asyncio
import logging

from aiokafka_lite import Consumer

logging.basicConfig(format="%(levelname)s %(message)s")
log = logging.getLogger("doc")


def refuse_v3(data: bytes | None) -> bytes | None:
    if data == b"v3":
        raise ValueError("v3 is refused here")
    return data


async def main() -> None:
    dead_letters: asyncio.Queue[object] = asyncio.Queue()
    async with Consumer("orders", bootstrap_servers="127.0.0.1:9092", group_id="billing",
                        auto_offset_reset="earliest", value_deserializer=refuse_v3) as consumer:
''', " " * 8, '''
asyncio.run(main())
'''),
    # Run in the module's one Spark worker (SPARK_WORKER: a JVM start per block would cost 10-20 s
    # each), with `spark`, a local SparkSession with the source registered (as the page's first
    # block does); afterwards a streaming `query` is awaited and a `df`'s columns are printed, so
    # that a lazy fragment is seen to work. Complete Spark blocks are marked with it too.
    "spark": ("", "", '''
if "query" in globals():
    query.awaitTermination(120)
    print("doc-test: query finished, error:", query.exception())
if "df" in globals():
    print("doc-test: columns", df.columns)
'''),
    # A test module in a project of its own: the block, after the imports it needs, run by pytest
    # with the installed plugin (--kafka-broker from the broker mark).
    "pytest": ('''\
import asyncio

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.schema_registry.wire import frame
from aiokafka_lite.testing.helpers import create_topic, produce, produce_avro

''', "", ""),
}


@pytest.fixture(scope="module")
def spark_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkWorker]:
    pytest.importorskip("pyspark", reason="pyspark is not installed: pip install 'aiokafka-lite[spark]'")
    script = tmp_path_factory.mktemp("spark") / "spark_worker.py"
    script.write_text(SPARK_WORKER)
    worker = SparkWorker(script)
    try:
        yield worker
    finally:
        worker.close()


def _param(block: Block) -> Any:
    if block.mark("skip") is not None:
        reason = block.mark("reason")
        marks = [pytest.mark.skip(reason=f"{block.id}: {reason}")] if reason else []
        return pytest.param(block, id=block.id, marks=marks)  # without a reason: fails below
    return pytest.param(block, id=block.id)


@pytest.mark.parametrize("block", [_param(b) for b in runnable_blocks()])
def test_doc_block(block: Block, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    run_doc_block(block, request, tmp_path)


def run_doc_block(block: Block, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if block.mark_error:
        pytest.fail(block.mark_error, pytrace=False)
    if block.mark("skip") is not None:
        pytest.fail(f"{block.id}: a skip needs reason=\"...\"", pytrace=False)
    timeout = float(block.mark("timeout") or COMMAND_TIMEOUT)
    doc = DocRun(block, request, ROOT, block_env(), timeout,
                 Stop(_float(block.mark("stop-after")), block.mark("stop-when"),
                      signal.Signals[block.mark("signal", "SIGINT") or "SIGINT"], block.mark("exit", "0") or "0"))
    run_by = block.mark("run-by")
    if run_by is not None:
        check_run_by(block, run_by)
        return
    try:
        if block.mark("synopsis") is not None:
            check_synopsis(doc)
            return
        text = prepare(doc, tmp_path)
        output = run_block(doc, text, tmp_path)
        doc.stop_background()
        output += "".join(doc.transcript)
        for expected in block.all("expect"):
            expected = substitute(expected, doc.names)
            if expected not in output:
                doc.fail(f"the output does not contain {expected!r}")
        for refused in block.all("refuse"):
            if substitute(refused, doc.names) in output:
                doc.fail(f"the output contains {refused!r}")
    finally:
        doc.close()


def _float(text: str | None) -> float | None:
    return float(text) if text else None


def _int(text: str | None) -> int | None:
    return int(text) if text else None


def produce_avro_records(doc: DocRun, broker: Any, topic: str, count: int, poison: int | None) -> None:
    """``count`` Avro records of AVRO_ORDER, the one at offset ``poison`` framed with a schema id the
    registry does not have (sent in order: the poison record between two produce_avro calls)."""
    registry_url = doc.names[DOC_REGISTRY]

    def write(offsets: range) -> None:
        if offsets:
            produce_avro(broker, topic, registry_url, AVRO_ORDER, [{"id": i, "note": f"note {i}"} for i in offsets],
                         keys=[f"k{i}" for i in offsets], enable_idempotence=True)

    if poison is None or not 0 <= poison < count:
        if poison is not None:
            doc.fail(f"poison={poison} is not an offset of the {count} avro-records")
        write(range(count))
        return
    write(range(poison))
    produce(broker, topic, [(f"k{poison}", frame(UNKNOWN_SCHEMA_ID, b"\x02\x0cpoison"))], enable_idempotence=True)
    write(range(poison + 1, count))


def prepare(doc: DocRun, tmp_path: Path) -> str:
    """Start the broker, create the data, run the setup; the block's text with names replaced."""
    block = doc.block
    text = block.text
    if block.mark("prelude"):
        if block.mark("prelude") not in PRELUDES:
            doc.fail(f"prelude={block.mark('prelude')}: the preludes are {', '.join(PRELUDES)}")
        head, indent, tail = PRELUDES[block.mark("prelude") or ""]
        text = head + textwrap.indent(text, indent) + tail
    for replacement in block.all("replace"):
        old, _, new = replacement.partition("=>")
        text = text.replace(old, new.replace("{tmp}", str(tmp_path)))
    broker_name = block.mark("broker")
    if broker_name is not None and broker_name not in BROKER_FIXTURES:
        doc.fail(f"broker={broker_name}: the choices are {', '.join(BROKER_FIXTURES)}")
    registry_name = block.mark("registry")
    if registry_name is not None and registry_name not in REGISTRY_FIXTURES:
        doc.fail(f"registry={registry_name}: the choice is registry or registry=apicurio")
    if block.mark("avro-records") and None in (registry_name, broker_name, block.mark("topic")):
        doc.fail("avro-records= needs the marks registry, broker= and topic=")
    if block.mark("prelude") == "pytest":
        return text  # its own fixtures start the broker (--kafka-broker) and pick the names
    if registry_name is not None:
        doc.names[DOC_REGISTRY] = doc.request.getfixturevalue(REGISTRY_FIXTURES[registry_name]).url
    elif DOC_REGISTRY in text:
        doc.fail(f"the block uses {DOC_REGISTRY}: mark it with registry")
    if broker_name is not None:
        broker = doc.request.getfixturevalue(BROKER_FIXTURES[broker_name])
        doc.names[DOC_ADDRESS] = broker.bootstrap_servers
        suffix = uuid.uuid4().hex[:8]
        if topic := block.mark("topic"):
            doc.names[topic] = f"{topic}-{suffix}"
            create_topic(broker, doc.names[topic], partitions=int(block.mark("partitions", "1") or 1))
            records = int(block.mark("records", "0") or 0)
            if records:
                produce(broker, doc.names[topic], [(f"k{i}", f"v{i}") for i in range(records)],
                        enable_idempotence=True)
            if avro := block.mark("avro-records"):
                produce_avro_records(doc, broker, doc.names[topic], int(avro), _int(block.mark("poison")))
        if group := block.mark("group"):
            doc.names[group] = f"{group}-{suffix}"
    elif DOC_ADDRESS in text:
        doc.fail(f"the block uses {DOC_ADDRESS}: mark it with broker=tansu or broker=kafka")
    for setup in block.all("setup"):
        doc.run(substitute(setup, doc.names), stop=Stop(None, None, signal.SIGINT, "0"))
    if doc.stop.when:
        doc.stop.when = substitute(doc.stop.when, doc.names)
    return substitute(text, doc.names)


def run_block(doc: DocRun, text: str, tmp_path: Path) -> str:
    block = doc.block
    if block.mark("prelude") == "pytest":
        project = tmp_path / "project"
        project.mkdir()
        (project / "test_doc_example.py").write_text(text)
        doc.cwd = project
        broker = block.mark("broker", "tansu")
        return doc.run(f"pytest test_doc_example.py --kafka-broker={broker}",
                       [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_doc_example.py",
                        f"--kafka-broker={broker}"])
    if block.lang not in SHELL:
        script = tmp_path / "block.py"
        script.write_text(text)
        if block.mark("prelude") == "spark":
            worker: SparkWorker = doc.request.getfixturevalue("spark_worker")
            output, status = worker.run(script, doc.timeout)
            doc.transcript.append(f"$ (Spark worker) {script.name}\n{output}")
            if status != "ok":
                doc.fail(f"the block failed in the Spark worker: {status}")
            return output
        return doc.run(f"python {script.name}", [sys.executable, str(script)])
    output = []
    for command in shell_commands(text):
        if is_pip_install(command):
            problems = pip_install_problems(command)
            if problems:
                doc.fail("; ".join(problems))
            doc.transcript.append(f"$ {command}\n[checked, not run]\n")
            continue
        if found := re.fullmatch(r"cd\s+(\S+)", command):
            doc.cwd = (doc.cwd / found[1]).resolve()
            if not doc.cwd.is_dir():
                doc.fail(f"{command!r}: no such directory")
            continue
        background = block.mark("background")
        if background and program_of(command).startswith(background):
            doc.start_background(command, substitute(block.mark("ready") or "", doc.names) or None)
            continue
        output.append(doc.run(command))
    return "".join(output)


def check_synopsis(doc: DocRun) -> None:
    for synopsis in synopses(doc.block.text):
        shown = " ".join(synopsis.command)
        help_text = doc.run(f"{shown} --help", [*synopsis.command, "--help"])
        for word in synopsis.options + synopsis.choices:
            if not re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", help_text):
                doc.fail(f"the synopsis of {shown!r} shows {word!r}, which its --help does not")


# --- the collector itself: a block that does not work fails ---

def _block(text: str, lang: str = "bash", **marks: str) -> Block:
    return Block("doc.md", 1, lang, text, {key: [value] for key, value in marks.items()})


@pytest.mark.parametrize(("block", "says"), [
    (_block("true\nfalse\n"), "'false' exited with 1"),
    (_block("sleep 30\n", timeout="1"), "'sleep 30' still runs after 1 s"),
    (_block("trap 'exit 3' INT; echo up; while true; do sleep 0.1; done\n", **{"stop-when": "up"}),
     "exited with 3 after SIGINT"),
    (_block("import sys\nsys.exit('no')\n", lang="python"), "'python block.py' exited with 1"),
    (_block("echo hello\n", expect="goodbye"), "the output does not contain 'goodbye'"),
    (_block("echo hello warning\n", refuse="warning"), "the output contains 'warning'"),
    (_block("print('Traceback (most recent call last)')\n", lang="python"), "printed a traceback"),
    (_block("pip install 'aiokafka-lite[nosuch]'\n"), "names the extra [nosuch]"),
    (_block("pip install -e '.[cli,nosuch]'\n"), "names the extra [nosuch]"),
    (_block("cd nowhere-at-all\n"), "no such directory"),
    (_block("aiokafka-lite consume orders -b 127.0.0.1:9092 --max 1\n"), "mark it with broker=tansu"),
    (_block("curl http://localhost:8081/subjects\n"), "mark it with registry"),
    (_block("true\n", registry="confluent"), "registry=confluent: the choice is"),
    (_block("true\n", **{"avro-records": "3", "topic": "orders"}), "avro-records= needs the marks registry"),
    (_block("aiokafka-lite consume TOPIC [--nosuch-option]\n", synopsis=""),
     "shows '--nosuch-option', which its --help does not"),
], ids=["exit-status", "timeout", "stopped-exit-status", "python", "expect", "refuse", "traceback", "pip-extra",
        "pip-extra-clone", "cd", "address", "registry-address", "registry-choice", "avro-records-alone",
        "synopsis"])
def test_a_block_that_does_not_work_fails(block: Block, says: str, request: pytest.FixtureRequest,
                                          tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception, match=re.escape(says)):
        run_doc_block(block, request, tmp_path)


def test_a_stopped_command_passes_when_it_exits_as_told(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    run_doc_block(_block("echo up; sleep 30\n", expect="up", **{"stop-when": "up", "exit": "signal"}), request,
                  tmp_path)


def test_marks_are_read_from_the_comments_above_a_block(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(textwrap.dedent('''\
        Text.

        <!-- doc-test: broker=kafka topic=orders -->
        <!-- doc-test: expect="a b" expect=c -->
        ```bash
        aiokafka-lite consume orders \\
            --max 1   # a comment
        # a comment line
        ```

        ```text
        output
        ```
        <!-- doc-test: nosuch=1 -->
        ```python
        print(1)
        ```
        '''))
    first, output, bad = blocks_of(page, root=tmp_path)
    assert (first.id, first.lang) == ("page.md:5", "bash")
    assert first.marks == {"broker": ["kafka"], "topic": ["orders"], "expect": ["a b", "c"]}
    assert shell_commands(first.text) == ["aiokafka-lite consume orders      --max 1   # a comment"]
    assert output.lang == "text"
    assert not output.marks
    assert bad.mark_error is not None
    assert "unknown doc-test mark 'nosuch'" in bad.mark_error


def test_names_are_replaced_as_whole_words_once() -> None:
    names = {"orders": "orders-1a", "127.0.0.1:9092": "127.0.0.1:4242", "billing": "billing-1a"}
    text = "consume orders -b 127.0.0.1:9092 --group billing > /tmp/orders-out; echo demo-orders reorders"
    assert substitute(text, names) == ("consume orders-1a -b 127.0.0.1:4242 --group billing-1a > /tmp/orders-1a-out; "
                                       "echo demo-orders reorders")


def test_every_mark_sits_on_a_block() -> None:
    stray = [f"{path.relative_to(ROOT)}:{line}" for path in doc_files() for line in stray_marks(path)]
    assert not stray, f"doc-test marks must be on the lines just above a fence: {stray}"


def check_run_by(block: Block, test_file: str) -> None:
    """A run-by mark names a test module that exists and reads the block's own Markdown file."""
    module = ROOT / test_file
    if not module.is_file():
        pytest.fail(f"{block.id}: run-by={test_file}: no such file", pytrace=False)
    if Path(block.path).name not in module.read_text():
        pytest.fail(f"{block.id}: run-by={test_file} does not read {block.path}", pytrace=False)


def test_skips_are_few_and_say_why() -> None:
    skipped = [block for block in runnable_blocks() if block.mark("skip") is not None]
    assert all(block.mark("reason") for block in skipped), [b.id for b in skipped if not b.mark("reason")]
    assert len(skipped) <= len(runnable_blocks()) // 4, [b.id for b in skipped]
