"""A scripted registry holding given schemas (by id, and by subject and version), and a Protobuf
message class built at test time (no protoc): what the deserializer tests decode with."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.unit.schema_registry.scripted_registry import Reply, SeenRequest


def registry_of(by_id: dict[int, dict[str, Any]],
                by_version: dict[tuple[str, int], dict[str, Any]] | None = None) -> Callable[[SeenRequest], Reply]:
    """Answers ``/schemas/ids/{id}`` from ``by_id`` and ``/subjects/{s}/versions/{v}`` from
    ``by_version`` (each a Confluent answer body); 404 with code 40403/40402 for anything else."""
    versions = by_version or {}

    def answer(request: SeenRequest) -> Reply:
        path = request.path.removeprefix("/apis/ccompat/v7/")
        if path.startswith("schemas/ids/"):
            found = by_id.get(int(path.rsplit("/", 1)[-1]))
            return (200, found) if found is not None else (404, {"error_code": 40403, "message": "not found"})
        _, subject, _, version = path.split("/")
        body = versions.get((subject, int(version)))
        if body is None:
            return 404, {"error_code": 40402, "message": "version not found"}
        return 200, {"subject": subject, "version": int(version), **body}
    return answer


def schema_body(schema: Any, schema_type: str = "AVRO", references: list[dict[str, Any]] | None = None,
                ) -> dict[str, Any]:
    text = schema if isinstance(schema, str) else json.dumps(schema)
    return {"schema": text, "schemaType": schema_type, "references": references or []}


def protobuf_classes() -> dict[str, Any]:
    """shop.Order (first), shop.Customer (second) with a nested shop.Customer.Address, as classes."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    file = descriptor_pb2.FileDescriptorProto(name="shop_test.proto", package="shop", syntax="proto3")
    order = file.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    order.field.add(name="note", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    customer = file.message_type.add(name="Customer")
    customer.field.add(name="name", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                       label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    address = customer.nested_type.add(name="Address")
    address.field.add(name="city", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"shop.{name}"))
            for name in ("Order", "Customer", "Customer.Address")}


PROTO_TEXT = """syntax = "proto3";
package shop;
message Order { int64 id = 1; string note = 2; }
message Customer { string name = 1; message Address { string city = 1; } }
"""
