"""``consume --key-format/--value-format avro|json-schema --registry URL``: the schema registry
deserializers the command gives its consumer (values framed in Confluent's wire format). Protobuf
needs the application's generated class, so the command has no Protobuf format."""

from __future__ import annotations

from typing import Any

# main.py imports this module up front, so it imports nothing of the package at its top.
FORMATS = ("bytes", "avro", "json-schema")


def usage_problem(key_format: str, value_format: str, registry: str | None) -> str | None:
    """What is wrong with the formats and ``--registry`` together (None: nothing)."""
    decoded = [f"--{side}-format {fmt}" for side, fmt in (("key", key_format), ("value", value_format))
               if fmt != "bytes"]
    if decoded and registry is None:
        return f"{' and '.join(decoded)} needs --registry URL (the schema registry's Confluent API)"
    if not decoded and registry is not None:
        return "--registry is used only with --key-format or --value-format avro or json-schema"
    return None


def registry_deserializers(registry: str, key_format: str, value_format: str) -> tuple[Any, dict[str, Any]]:
    """The registry client (the caller closes it) and the consumer settings that use it."""
    from .run import CommandFailed

    try:
        from ..schema_registry import AvroDeserializer, JsonSchemaDeserializer, SchemaRegistryClient

        client = SchemaRegistryClient(registry)
        made = {"avro": AvroDeserializer, "json-schema": JsonSchemaDeserializer}
        settings = {f"{side}_deserializer": made[fmt](client)
                    for side, fmt in (("key", key_format), ("value", value_format)) if fmt != "bytes"}
    except ImportError as exc:  # the extra is not installed: say what to install, in one line
        raise CommandFailed(str(exc)) from None
    return client, settings
