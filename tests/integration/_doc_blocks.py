"""The Markdown side of test_doc_blocks.py: the fenced blocks of the documentation, the
``<!-- doc-test: ... -->`` marks above them, and a shell block cut into commands. No I/O beyond
reading the files; the runner is in test_doc_blocks.py (the mark language is described there)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL = frozenset({"bash", "sh", "shell"})
PYTHON = frozenset({"python", "py"})
RUN = SHELL | PYTHON  # other fences (text, console, none) show output and are not run
DOC_ADDRESS = "127.0.0.1:9092"  # the broker address the docs use; a marked block gets the real one
DOC_REGISTRY = "http://localhost:8081"  # likewise the schema registry's (Confluent's default port)

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<lang>[\w+-]*)")
_MARK = re.compile(r"^\s*<!--\s*doc-test:(?P<body>.*?)-->\s*$")
_KEYS = {"skip", "reason", "broker", "topic", "partitions", "records", "group", "prelude", "setup",
         "stop-after", "stop-when", "signal", "exit", "background", "ready", "expect", "refuse", "timeout",
         "replace", "synopsis", "run-by", "registry", "avro-records", "poison"}
_REPEATABLE = {"expect", "refuse", "replace", "setup"}


class MarkError(ValueError):
    """A doc-test mark that the collector cannot read."""


@dataclass
class Block:
    path: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    marks: dict[str, list[str]] = field(default_factory=dict)
    mark_error: str | None = None
    mark_lines: list[int] = field(default_factory=list)  # 1-based

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    def mark(self, key: str, default: str | None = None) -> str | None:
        values = self.marks.get(key)
        return values[-1] if values else default

    def all(self, key: str) -> list[str]:
        return self.marks.get(key, [])


def doc_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "examples").glob("**/README.md"))]
    return [f for f in files if f.is_file()]


def parse_marks(body: str) -> dict[str, list[str]]:
    """``broker=kafka expect="a b" skip`` -> {"broker": ["kafka"], "expect": ["a b"], "skip": [""]}."""
    marks: dict[str, list[str]] = {}
    try:
        words = shlex.split(body)
    except ValueError as exc:
        raise MarkError(f"unreadable doc-test mark {body.strip()!r}: {exc}") from exc
    for word in words:
        key, _, value = word.partition("=")
        if key not in _KEYS:
            raise MarkError(f"unknown doc-test mark {key!r} (known: {', '.join(sorted(_KEYS))})")
        if key in marks and key not in _REPEATABLE:
            raise MarkError(f"doc-test mark {key!r} given twice")
        marks.setdefault(key, []).append(value)
    return marks


def blocks_of(path: Path, root: Path = ROOT) -> list[Block]:
    """Every fenced block of a Markdown file with the marks on the lines just above it."""
    lines = path.read_text().splitlines()
    rel = str(path.relative_to(root))
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, lang = opening["fence"], opening["lang"].lower()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        block = Block(rel, i + 1, lang, "\n".join(lines[i + 1:end]) + "\n")
        above = i - 1
        while above >= 0 and (found := _MARK.match(lines[above])):
            block.mark_lines.append(above + 1)
            try:
                for key, values in parse_marks(found["body"]).items():
                    block.marks.setdefault(key, []).extend(values)
            except MarkError as exc:
                block.mark_error = f"{rel}:{above + 1}: {exc}"
            above -= 1
        blocks.append(block)
        i = end + 1
    return blocks


def blocks_run_by(doc: str, module: str) -> list[str]:
    """The Python blocks of ``doc`` (a path from the repository root) marked ``run-by=module``:
    blocks a test module runs itself, against a broker of its own."""
    return [block.text for block in blocks_of(ROOT / doc)
            if block.lang in PYTHON and module in block.marks.get("run-by", [])]


def stray_marks(path: Path) -> list[int]:
    """Lines of ``doc-test`` marks that sit on no block (a blank line between mark and fence)."""
    attached = {line for block in blocks_of(path) for line in block.mark_lines}
    return [number for number, line in enumerate(path.read_text().splitlines(), 1)
            if "doc-test:" in line and line.lstrip().startswith("<!--") and number not in attached]


def runnable_blocks() -> list[Block]:
    return [b for path in doc_files() for b in blocks_of(path) if b.lang in RUN]


def shell_commands(text: str) -> list[str]:
    """A shell block's commands: continuation lines joined, blank and comment lines dropped."""
    commands: list[str] = []
    pending = ""
    for line in text.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        command = (pending + line).strip()
        pending = ""
        if command and not command.startswith("#"):
            commands.append(command)
    if pending.strip():
        commands.append(pending.strip())
    return commands


_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def program_of(command: str) -> str:
    """The command with its leading ``NAME=value`` environment assignments dropped."""
    words = shlex.split(command, comments=True)
    while words and _ASSIGNMENT.match(words[0]):
        words.pop(0)
    return " ".join(words)


def substitute(text: str, names: dict[str, str]) -> str:
    """Replace whole words (topic, group, address) in one pass, so a replacement is never replaced."""
    if not names:
        return text
    pattern = re.compile("|".join(rf"(?<![\w.-]){re.escape(old)}(?![\w])" for old in sorted(names, key=len,
                                                                                                   reverse=True)))
    return pattern.sub(lambda found: names[found.group(0)], text)


# --- pip install lines: checked, not run (the suite must not change the environment it runs in) ---

_PIP_INSTALL = re.compile(r"^(?:python3? -m )?pip install\b")
_EXTRAS = re.compile(r"(?:aiokafka-lite|aiokafka_lite[^\s\[]*|\.)\[([\w,\s-]+)\]")  # the package, a wheel, a clone


def is_pip_install(command: str) -> bool:
    return bool(_PIP_INSTALL.match(program_of(command)))


def project_extras() -> set[str]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return set(project.get("optional-dependencies", {}))


def pip_install_problems(command: str) -> list[str]:
    """What is wrong with a documented ``pip install``: extras the project does not have."""
    known = project_extras()
    problems = []
    for extras in _EXTRAS.findall(command):
        for extra in (e.strip() for e in extras.split(",")):
            if extra not in known:
                problems.append(f"{command!r} names the extra [{extra}], which pyproject.toml does not define "
                                f"(it has {', '.join(sorted(known))})")
    return problems


# --- usage synopses (`aiokafka-lite consume TOPIC [-b HOST:PORT] ...`) ---

_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
_CHOICES = re.compile(r"\b([a-z]\w*(?:\|[a-z]\w*)+)\b")


@dataclass(frozen=True)
class Synopsis:
    command: list[str]  # the program and its subcommands: what `--help` is asked of
    options: list[str]
    choices: list[str]  # each alternative of an `a|b` choice


def synopses(text: str) -> list[Synopsis]:
    found = []
    for line in shell_commands(text):
        words = line.split()
        command = []
        for word in words:
            if word.startswith(("[", "-")) or not re.fullmatch(r"[a-z][\w.-]*", word):
                break
            command.append(word)
        rest = line[len(" ".join(command)):]
        choices = [alt for group in _CHOICES.findall(rest) for alt in group.split("|")]
        found.append(Synopsis(command, _OPTION.findall(rest), choices))
    return found
