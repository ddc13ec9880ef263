"""setup.py's build step when the optional Rust extension fails although cargo is here: the reason
found in cargo's output, said on stderr and kept in the package; a stale reason cleared.

setup.py runs against a stand-in for setuptools-rust that does what its build_rust does around
run_for_extension (an optional extension's failure is printed and let go): a real build takes
minutes and needs the network (the report of issue #24 lists the builds tried by hand).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import setuptools

from aiokafka_lite.protocol.native import BUILD_FAILURE_FILE

ROOT = Path(__file__).resolve().parents[2]

# What cargo printed, from the builds tried by hand (abridged where marked).
COMPILE_ERROR = """\
   Compiling aiokafka-lite-native v0.1.0 (/tmp/build-X/native)
error: this file contains an unclosed delimiter
  --> src/lib.rs:65:14
   |
65 | fn broken( {
   |          - -^
   |          | unclosed delimiter

error: could not compile `aiokafka-lite-native` (lib) due to 1 previous error
"""
CORRUPT_CRATE = """\
error: failed to download `snap v1.1.2`

Caused by:
  unable to get packages from source

Caused by:
  failed to unpack package `snap v1.1.2`

Caused by:
  failed to unpack entry at `snap-1.1.2/.github/workflows/release.yml`

Caused by:
  failed to unpack `snap-1.1.2/.github/workflows/release.yml` into `...`

Caused by:
  unexpected end of file
"""
OFFLINE = """\
error: no matching package named `flate2` found
location searched: crates.io index
required by package `aiokafka-lite-native v0.1.0 (/tmp/build-X/native)`
"""


class FakeBuildExt:
    def __init__(self, package_dir: Path) -> None:
        self.package_dir = package_dir
        self.inplace = False

    def get_ext_fullpath(self, name: str) -> str:
        return str(self.package_dir / (name.rsplit(".", 1)[-1] + ".abi3.so"))


class FakeBuildRust:
    """setuptools_rust.build_rust as far as setup.py's subclass sees it."""

    cargo_output = ""  # what the build prints on stderr; "" builds

    def __init__(self, package_dir: Path, extensions: list[Any]) -> None:
        self.inplace = True
        self.extensions = extensions
        self._build_ext = FakeBuildExt(package_dir)
        self.initialize_options()
        self.extensions = extensions

    def initialize_options(self) -> None:
        self.extensions = []

    def get_finalized_command(self, name: str) -> FakeBuildExt:
        assert name == "build_ext"
        return self._build_ext

    def run(self) -> None:
        for ext in self.extensions:
            try:
                self.run_for_extension(ext)
            except Exception as exc:
                if not ext.optional:
                    raise
                print(f"build_rust: optional Rust extension {ext.name} failed\n{exc}")

    def run_for_extension(self, ext: Any) -> None:
        assert ext.quiet, "cargo's output must be captured to find the reason in it"
        if self.cargo_output:
            raise RuntimeError(f"`cargo rustc --lib` failed with code 101\n-- Output captured from stderr:\n"
                               f"{self.cargo_output}")


class FakeRustExtension:
    def __init__(self, name: str, **options: Any) -> None:
        self.name = name
        self.optional = options["optional"]
        self.quiet = False


@pytest.fixture
def setup_py(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """setup.py, loaded with the stand-in; setup() records its arguments."""
    fake = types.ModuleType("setuptools_rust")
    fake.Binding = types.SimpleNamespace(PyO3="PyO3")  # type: ignore[attr-defined]
    fake.RustExtension = FakeRustExtension  # type: ignore[attr-defined]
    fake.build_rust = FakeBuildRust  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "setuptools_rust", fake)
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(setuptools, "setup", lambda **kw: calls.append(kw))
    monkeypatch.delenv("AIOKAFKA_LITE_BUILD_NATIVE", raising=False)
    spec = importlib.util.spec_from_file_location("aiokafka_lite_setup_py", ROOT / "setup.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.setup_calls = calls  # type: ignore[attr-defined]
    return module


def _build(setup_py: types.ModuleType, package_dir: Path, cargo_output: str) -> Any:
    step = setup_py.BuildRustSayingWhy(package_dir, [setup_py.native])
    step.cargo_output = cargo_output
    step.run()
    return step


def test_setup_builds_the_extension_with_the_step_that_says_why(setup_py: types.ModuleType) -> None:
    [call] = setup_py.setup_calls  # type: ignore[attr-defined]
    assert call["cmdclass"] == {"build_rust": setup_py.BuildRustSayingWhy}
    assert call["rust_extensions"] == [setup_py.native]
    assert setup_py.BUILD_FAILURE_FILE == BUILD_FAILURE_FILE  # the name native.py reads


@pytest.mark.parametrize(("output", "expected"), [
    (COMPILE_ERROR, ["error: this file contains an unclosed delimiter", "--> src/lib.rs:65:14",
                     "error: could not compile `aiokafka-lite-native` (lib) due to 1 previous error"]),
    (CORRUPT_CRATE, ["error: failed to download `snap v1.1.2`", "failed to unpack package `snap v1.1.2`",
                     "failed to unpack entry at `snap-1.1.2/.github/workflows/release.yml`",
                     "failed to unpack `snap-1.1.2/.github/workflows/release.yml` into `...`",
                     "unexpected end of file"]),
    (OFFLINE, ["error: no matching package named `flate2` found"]),
    ("\x1b[31merror\x1b[0m: linker `cc` not found\n", ["error: linker `cc` not found"]),
    ("can't find manifest for Rust extension\n\n", ["can't find manifest for Rust extension"]),
])
def test_the_reason_is_what_cargo_said_went_wrong(setup_py: types.ModuleType, output: str,
                                                  expected: list[str]) -> None:
    assert setup_py.reason(output) == expected


def test_a_failed_build_is_said_on_stderr_and_kept_in_the_package(
        setup_py: types.ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _build(setup_py, tmp_path, COMPILE_ERROR)
    kept = (tmp_path / BUILD_FAILURE_FILE).read_text(encoding="utf-8").splitlines()
    assert kept == setup_py.reason(COMPILE_ERROR)
    err = capsys.readouterr().err.splitlines()
    assert err[1:5] == [
        "WARNING: aiokafka-lite's native record decoder (Rust) did not build, although cargo is here.",
        "The package installs and works, but runs its pure-Python decoder, at less than half the speed.",
        "What cargo said last:",
        "    error: this file contains an unclosed delimiter"]
    assert err[0] == err[-1] == "*" * 100


def test_a_build_that_works_clears_the_reason_an_earlier_one_left(
        setup_py: types.ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _build(setup_py, tmp_path, OFFLINE)
    assert (tmp_path / BUILD_FAILURE_FILE).exists()
    _build(setup_py, tmp_path, "")
    assert not (tmp_path / BUILD_FAILURE_FILE).exists()
    capsys.readouterr()


def test_a_build_without_the_extension_leaves_the_reason_alone(setup_py: types.ModuleType, tmp_path: Path) -> None:
    # ./dev's first step (AIOKAFKA_LITE_BUILD_NATIVE=0) must not hide why the last build failed.
    (tmp_path / BUILD_FAILURE_FILE).write_text("error: kept\n", encoding="utf-8")
    step = setup_py.BuildRustSayingWhy(tmp_path, [])
    step.run()
    assert (tmp_path / BUILD_FAILURE_FILE).read_text(encoding="utf-8") == "error: kept\n"
