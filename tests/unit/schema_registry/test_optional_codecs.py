"""fastavro and jsonschema are optional: the package imports without them, and the deserializer
that needs one says which package (and extra) to install when it is made."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(("module", "make", "named"), [
    ("fastavro", "sr.AvroDeserializer(None)", "aiokafka-lite[schema-registry]"),
    ("jsonschema", "sr.JsonSchemaDeserializer(None, validate=True)", "pip install jsonschema"),
])
def test_without_the_codec_the_package_imports_and_the_deserializer_names_it(module: str, make: str,
                                                                            named: str) -> None:
    script = (f"import sys; sys.modules[{module!r}] = None\n"
              "import aiokafka_lite.schema_registry as sr\n"
              "sr.JsonSchemaDeserializer(None)\n"  # not validating: jsonschema is not needed
              "try:\n"
              f"    {make}\n"
              "except ImportError as exc:\n"
              "    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert named in done.stdout
