"""``ProtobufDeserializer``: Protobuf values framed in Confluent's wire format, parsed into the
application's generated message class.

The framing's message indexes say which message of the registered ``.proto`` file the value is
(``[0]`` the first top-level message, ``[1, 2]`` the third message nested in the second). The
registry's schema text is not compiled: the indexes are checked against the class's own place in
its file (``message_type.DESCRIPTOR`` within ``DESCRIPTOR.file``), which is the same file when
the class was generated from the registered schema; another place is ``MessageTypeMismatchError``.
"""

from __future__ import annotations

import importlib
from typing import Any

from aiokafka_lite.schema_registry import wire
from aiokafka_lite.schema_registry.answers import RegisteredSchema, SchemaType
from aiokafka_lite.schema_registry.client import SchemaRegistryClient
from aiokafka_lite.schema_registry.deserializers import Deadline, SchemaDeserializer, failed
from aiokafka_lite.schema_registry.errors import MessageTypeMismatchError


def import_descriptor_pb2() -> Any:
    try:
        # import_module: no stubs needed for mypy (types-protobuf is not a dependency)
        descriptor_pb2 = importlib.import_module("google.protobuf.descriptor_pb2")
    except ImportError as exc:
        raise ImportError("the Protobuf deserializer needs the protobuf package: pip install protobuf") from exc
    return descriptor_pb2


class ProtobufDeserializer(SchemaDeserializer[None]):
    """Values as instances of ``message_type``, a generated Protobuf message class."""

    schema_type: SchemaType = "PROTOBUF"

    def __init__(self, client: SchemaRegistryClient, message_type: type[Any], *, cache_capacity: int = 1000) -> None:
        super().__init__(client, cache_capacity=cache_capacity)
        descriptor = getattr(message_type, "DESCRIPTOR", None)
        if descriptor is None or not hasattr(descriptor, "full_name") or not hasattr(descriptor, "file"):
            raise TypeError(f"message_type must be a generated Protobuf message class, not {message_type!r}")
        self.message_type = message_type
        self.full_name: str = descriptor.full_name
        self._file_messages = _file_proto(descriptor.file).message_type
        self.message_indexes = _indexes_in_file(descriptor, self._file_messages)

    def _unframe(self, data: bytes | bytearray | memoryview) -> tuple[int, Any]:
        schema_id, indexes, payload = wire.parse_protobuf(data)  # the indexes too must be well formed
        return schema_id, (indexes, payload)

    async def _compile(self, registered: RegisteredSchema, deadline: Deadline) -> None:
        """Nothing to compile: the class is the compiled form (the schema's type is checked by prepare)."""

    def _decode(self, compiled: None, schema_id: int, framed: tuple[list[int], memoryview]) -> Any:
        indexes, payload = framed
        if indexes != self.message_indexes:
            raise MessageTypeMismatchError(
                f"schema id {schema_id}: the value's message indexes {indexes} are {self._named(indexes)}, "
                f"not {self.full_name} (indexes {self.message_indexes} in {self.message_type.DESCRIPTOR.file.name})",
                schema_id=schema_id)
        message = self.message_type()
        try:
            message.ParseFromString(bytes(payload))
        except Exception as exc:  # google.protobuf.message.DecodeError, and what the C parser raises
            raise failed(schema_id, f"the payload is not a {self.full_name}", exc) from exc
        return message

    def _named(self, indexes: list[int]) -> str:
        """What ``indexes`` point at in the class's own file, when they point at anything there."""
        messages, names = self._file_messages, []
        for index in indexes:
            if index >= len(messages):
                return "no message of the class's file"
            names.append(messages[index].name)
            messages = messages[index].nested_type
        return "message " + ".".join(names) + " of the class's file"


def _file_proto(file_descriptor: Any) -> Any:
    """The file as a FileDescriptorProto: its messages in declaration order, which the indexes count."""
    proto = import_descriptor_pb2().FileDescriptorProto()
    file_descriptor.CopyToProto(proto)
    return proto


def _indexes_in_file(descriptor: Any, file_messages: Any) -> list[int]:
    """The message-index path of ``descriptor`` in its file: [top-level index, nested index, ...]."""
    names = []
    current = descriptor
    while current is not None:
        names.append(current.name)
        current = current.containing_type
    indexes, messages = [], file_messages
    for name in reversed(names):
        index = next(position for position, message in enumerate(messages) if message.name == name)
        indexes.append(index)
        messages = messages[index].nested_type
    return indexes
