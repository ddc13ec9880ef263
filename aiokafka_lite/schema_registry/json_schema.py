"""``JsonSchemaDeserializer``: JSON values framed in Confluent's wire format.

The payload is UTF-8 JSON (``json.loads``). With ``validate=True`` it is also checked against the
registered JSON Schema with the ``jsonschema`` package (imported when such a deserializer is made),
the validator built once per schema id; a value that fails names the id and the first error's path.
A schema with references is refused for validation (they are not resolved here).
"""

from __future__ import annotations

import importlib
import json
from typing import Any

from aiokafka_lite.schema_registry.answers import RegisteredSchema, SchemaType
from aiokafka_lite.schema_registry.client import SchemaRegistryClient
from aiokafka_lite.schema_registry.deserializers import Deadline, SchemaDeserializer, failed
from aiokafka_lite.schema_registry.errors import SchemaDeserializationError


def import_jsonschema() -> Any:
    """jsonschema, imported only when a validating deserializer is made."""
    try:
        # import_module: no stubs needed for mypy (types-jsonschema is not a dependency)
        jsonschema = importlib.import_module("jsonschema")
    except ImportError as exc:
        raise ImportError("JsonSchemaDeserializer(validate=True) needs the jsonschema package: "
                          "pip install jsonschema") from exc
    return jsonschema


class JsonSchemaDeserializer(SchemaDeserializer[Any]):
    """JSON values as Python objects; ``validate=True`` checks each against its registered schema."""

    schema_type: SchemaType = "JSON"

    def __init__(self, client: SchemaRegistryClient, *, validate: bool = False, cache_capacity: int = 1000) -> None:
        super().__init__(client, cache_capacity=cache_capacity)
        self.validate = validate
        self._jsonschema = import_jsonschema() if validate else None

    async def _compile(self, registered: RegisteredSchema, deadline: Deadline) -> Any:
        """The schema's validator (None when not validating: nothing to compile)."""
        if self._jsonschema is None:
            return None
        schema_id = registered.schema_id
        if registered.references:
            names = ", ".join(reference.name for reference in registered.references)
            raise SchemaDeserializationError(f"schema id {schema_id}: validating a JSON Schema with references "
                                             f"({names}) is not supported", schema_id=schema_id)
        try:
            schema = json.loads(registered.schema)
            validator_class = self._jsonschema.validators.validator_for(schema)
            validator_class.check_schema(schema)
            return validator_class(schema)
        except Exception as exc:
            raise failed(schema_id, "cannot use the registered schema as a JSON Schema", exc) from exc

    def _decode(self, compiled: Any, schema_id: int, payload: memoryview) -> Any:
        try:
            value = json.loads(bytes(payload))
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError both are
            raise failed(schema_id, "the payload is not JSON", exc) from exc
        if compiled is not None:
            error = next(iter(compiled.iter_errors(value)), None)
            if error is not None:
                path = "$" + "".join(f"[{part!r}]" for part in error.absolute_path)
                raise SchemaDeserializationError(f"schema id {schema_id}: the value does not match the schema "
                                                 f"at {path}: {error.message}", schema_id=schema_id) from error
        return value
