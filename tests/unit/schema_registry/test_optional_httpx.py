"""httpx is an extra (schema-registry): the package imports without it, and the client says which extra."""

from __future__ import annotations

import subprocess
import sys


def test_without_httpx_the_package_imports_and_the_client_names_the_extra() -> None:
    script = ("import sys; sys.modules['httpx'] = None\n"
              "import aiokafka_lite.schema_registry as sr\n"
              "try:\n"
              "    sr.SchemaRegistryClient('http://127.0.0.1:1')\n"
              "except ImportError as exc:\n"
              "    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert "aiokafka-lite[schema-registry]" in done.stdout
