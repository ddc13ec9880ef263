"""Builds the optional Rust extension (aiokafka_lite._native) when a Rust toolchain is present.

Everything else is declared in pyproject.toml. Without cargo the build skips the extension and the
package runs its pure-Python decoder (aiokafka_lite.protocol.native says which one runs).
"""

from setuptools import setup
from setuptools_rust import Binding, RustExtension

# debug=False: editable installs (./dev) would otherwise get a debug build, several times slower.
setup(rust_extensions=[RustExtension("aiokafka_lite._native", path="native/Cargo.toml", binding=Binding.PyO3,
                                     optional=True, py_limited_api="auto", debug=False)])
