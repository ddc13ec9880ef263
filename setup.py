"""Builds the optional Rust extension (aiokafka_lite._native) when a Rust toolchain is present.

Everything else is declared in pyproject.toml. Without cargo the build skips the extension and the
package runs its pure-Python decoder (aiokafka_lite.protocol.native says which one runs). With cargo
but a failed build, pip would say nothing (the extension is optional, so the install succeeds): the
build step below says so on stderr and leaves the reason in the package, in _native_build_failure.txt,
which aiokafka_lite.protocol.native reads to name the failure (and warn once when a consumer starts).
"""

import os
import re
import sys
from pathlib import Path

from setuptools import setup
from setuptools_rust import Binding, RustExtension, build_rust

# Read by aiokafka_lite.protocol.native (BUILD_FAILURE_FILE there): keep the two names the same.
BUILD_FAILURE_FILE = "_native_build_failure.txt"
REASON_LINES = 5
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ERROR = re.compile(r"error(\[\w+\])?:")


def reason(output: str) -> list[str]:
    """The lines of cargo's output that say what went wrong (its error lines, where in the source, and
    each "Caused by"): the first and the last few; or else the output's last line."""
    lines = [_ANSI.sub("", line).strip() for line in output.splitlines()]
    meaningful = [line[:200] for before, line in zip(["", *lines], lines, strict=False)
                  if _ERROR.match(line) or line.startswith("-->")
                  or (before == "Caused by:" and not line.startswith("process didn't exit"))]
    if len(meaningful) > REASON_LINES:  # the first error says what failed, the last lines why
        meaningful = [meaningful[0], *meaningful[1 - REASON_LINES:]]
    return meaningful or [line for line in lines if line][-1:]


class BuildRustSayingWhy(build_rust):
    """build_rust that, when the optional extension fails although cargo is here, says so where pip
    cannot hide it (stderr) and in the package (BUILD_FAILURE_FILE), and clears a stale reason."""

    command_name = "build_rust"  # what build_rust's own messages call it

    def initialize_options(self) -> None:
        super().initialize_options()
        self.failure: list[str] = []  # the reason's lines, when the optional extension failed

    def run(self) -> None:
        if self.extensions:  # the extension is attempted: an earlier failure's reason is stale
            self._failure_file().unlink(missing_ok=True)
        super().run()
        if self.failure:  # said last, after cargo's whole output
            self._say_failure(self.failure)

    def run_for_extension(self, ext: RustExtension) -> None:
        ext.quiet = True  # cargo's output is captured into the error, where its last lines are found
        try:
            super().run_for_extension(ext)
        except Exception as exc:
            if ext.optional:
                self.failure = reason(str(exc))
            raise  # build_rust prints the whole error, and lets an optional extension go

    def _failure_file(self) -> Path:
        # Next to the extension: in the source tree for an editable install, else in the wheel.
        build_ext = self.get_finalized_command("build_ext")
        build_ext.inplace = self.inplace
        return Path(build_ext.get_ext_fullpath(native.name)).parent / BUILD_FAILURE_FILE

    def _say_failure(self, lines: list[str]) -> None:
        path = self._failure_file()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            kept = f"kept in the package as aiokafka_lite/{BUILD_FAILURE_FILE}: `aiokafka-lite --version` says it"
        except OSError as exc:
            kept = f"not kept: {exc}"
        rule = "*" * 100
        print("\n".join([
            rule,
            "WARNING: aiokafka-lite's native record decoder (Rust) did not build, although cargo is here.",
            "The package installs and works, but runs its pure-Python decoder, at less than half the speed.",
            "What cargo said last:",
            *(f"    {line}" for line in lines),
            f"({kept}. Fix the cause, then install again.)",
            rule,
        ]), file=sys.stderr, flush=True)


# debug=False: editable installs (./dev) would otherwise get a debug build, several times slower.
native = RustExtension("aiokafka_lite._native", path="native/Cargo.toml", binding=Binding.PyO3,
                       optional=True, py_limited_api="auto", debug=False)
# ./dev installs the dependencies first and builds the extension as a step of its own, to say which runs.
setup(rust_extensions=[] if os.environ.get("AIOKAFKA_LITE_BUILD_NATIVE") == "0" else [native],
      cmdclass={"build_rust": BuildRustSayingWhy},
      # One wheel for every CPython >= 3.11: the extension uses the stable ABI (pyo3's abi3-py311).
      options={"bdist_wheel": {"py_limited_api": "cp311"}})
