"""The protocol package is sans-IO: it must not import asyncio, sockets, selectors or TLS.

Two independent proofs: a fresh interpreter imports every module under aiokafka_lite/protocol and
then inspects sys.modules; and a scan of the package's source for import statements.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import aiokafka_lite.protocol

FORBIDDEN = frozenset({"asyncio", "socket", "selectors", "ssl", "anyio", "uvloop", "trio"})
PACKAGE_DIR = Path(aiokafka_lite.protocol.__file__).parent
ROOT_DIR = PACKAGE_DIR.parent.parent

# The root package's __init__ rightly imports the asyncio consumer, so the child registers a bare
# `aiokafka_lite` package first: what gets imported is then only what protocol itself pulls in
# (including its own imports of aiokafka_lite.errors and aiokafka_lite.structs).
# Third-party libraries protocol uses are imported before the baseline is taken: crc32c 2.9, for
# one, loads `socket` through importlib.metadata -> email.utils at import time, which is not I/O
# by our code. They may still not bring in asyncio or ssl.
_CHILD = """
import importlib, json, pkgutil, sys, types
forbidden, third_party = set(json.loads(sys.argv[1])), json.loads(sys.argv[3])
already = sorted(forbidden & set(sys.modules))
for name in third_party:
    importlib.import_module(name)
after_third_party = set(sys.modules)
root = types.ModuleType("aiokafka_lite")
root.__path__ = [sys.argv[2]]
sys.modules["aiokafka_lite"] = root
protocol = importlib.import_module("aiokafka_lite.protocol")
names = ["aiokafka_lite.protocol"] + [
    m.name for m in pkgutil.walk_packages(protocol.__path__, "aiokafka_lite.protocol.")]
for name in names:
    importlib.import_module(name)
print(json.dumps({"already": already, "imported": names,
                  "by_third_party": sorted(forbidden & after_third_party),
                  "by_protocol": sorted(forbidden & (set(sys.modules) - after_third_party))}))
"""


def _third_party_imports() -> list[str]:
    names = {name.split(".")[0] for path in PACKAGE_DIR.rglob("*.py") for name in _imported_modules(path)}
    ours = ("aiokafka_lite", "__future__")
    return sorted(n for n in names if n not in sys.stdlib_module_names and n not in ours)


def test_importing_every_protocol_module_loads_no_io_modules() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(sorted(FORBIDDEN)), str(ROOT_DIR / "aiokafka_lite"),
         json.dumps(_third_party_imports())],
        capture_output=True, text=True, timeout=60, cwd=ROOT_DIR, check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["already"] == [], "the interpreter preloads I/O modules: the check would be vacuous"
    expected = {".".join(("aiokafka_lite", "protocol", *p.relative_to(PACKAGE_DIR).with_suffix("").parts))
                for p in PACKAGE_DIR.rglob("*.py") if p.stem != "__init__"}
    assert expected <= set(report["imported"])
    assert report["by_protocol"] == []
    assert not {"asyncio", "ssl", "anyio", "uvloop", "trio"} & set(report["by_third_party"])


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "__import__":
            names.update(arg.value for arg in node.args if isinstance(arg, ast.Constant)
                         and isinstance(arg.value, str))
    return names


def test_protocol_source_has_no_io_imports() -> None:
    sources = sorted(PACKAGE_DIR.rglob("*.py"))
    assert len(sources) >= 18  # the engine, the records modules and one module per API key
    offenders = {
        str(path.relative_to(PACKAGE_DIR)): sorted(
            name for name in _imported_modules(path) if name.split(".")[0] in FORBIDDEN)
        for path in sources
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_the_source_scan_would_notice_an_io_import(tmp_path: Path) -> None:
    sample = tmp_path / "bad.py"
    sample.write_text("import os\nfrom asyncio import sleep\nimport ssl as tls\n", encoding="utf-8")
    assert _imported_modules(sample) >= {"asyncio", "ssl"}


def test_the_net_exchanges_are_sans_io_and_import_no_connection() -> None:
    """SASL and ApiVersions negotiation are driven by both the asyncio and the blocking connection,
    so they import neither (which is what keeps _net free of import circles) nor any I/O module."""
    net_dir = ROOT_DIR / "aiokafka_lite" / "_net"
    for name in ("sasl.py", "negotiation.py"):
        tree = ast.parse((net_dir / name).read_text(encoding="utf-8"))
        relative = {node.module for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.level == 1}
        assert relative <= {"options"}, (name, relative)
        assert not {n.split(".")[0] for n in _imported_modules(net_dir / name)} & FORBIDDEN, name
