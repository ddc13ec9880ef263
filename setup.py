"""Builds the optional Rust extension (aiokafka_lite._native) when a Rust toolchain is present.

Everything else is declared in pyproject.toml. Without cargo the build skips the extension and the
package runs its pure-Python decoder (aiokafka_lite.protocol.native says which one runs).
"""

import os

from setuptools import setup
from setuptools_rust import Binding, RustExtension

# debug=False: editable installs (./dev) would otherwise get a debug build, several times slower.
native = RustExtension("aiokafka_lite._native", path="native/Cargo.toml", binding=Binding.PyO3,
                       optional=True, py_limited_api="auto", debug=False)
# ./dev installs the dependencies first and builds the extension as a step of its own, to say which runs.
setup(rust_extensions=[] if os.environ.get("AIOKAFKA_LITE_BUILD_NATIVE") == "0" else [native])
