"""What the registry's JSON answers mean: Confluent's REST shapes checked and turned into types.

Pure functions over decoded JSON (no HTTP here). A field missing or of the wrong type raises
``InvalidSchemaError`` naming the field, what was asked and the registry's URL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from aiokafka_lite.schema_registry.errors import InvalidSchemaError

SchemaType = Literal["AVRO", "PROTOBUF", "JSON"]
SCHEMA_TYPES: tuple[SchemaType, ...] = ("AVRO", "PROTOBUF", "JSON")


@dataclass(frozen=True)
class SchemaReference:
    """A schema another one imports: its ``name`` there, found under ``subject`` at ``version``."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry holds it. ``subject`` and ``version`` are set when it was looked
    up by subject (``get_version``), None when looked up by id."""

    schema_id: int
    schema_type: SchemaType
    schema: str
    references: list[SchemaReference] = field(default_factory=list)
    subject: str | None = None
    version: int | None = None


class Answer:
    """One decoded answer body, with what was asked and where, for the errors it raises."""

    def __init__(self, body: Any, what: str, url: str) -> None:
        self.body, self.what, self.url = body, what, url

    def invalid(self, problem: str) -> InvalidSchemaError:
        return InvalidSchemaError(f"{self.what}: {self.url} answered {problem}: {_excerpt(self.body)}", url=self.url)

    def mapping(self) -> dict[str, Any]:
        if not isinstance(self.body, dict):
            raise self.invalid(f"a JSON {type(self.body).__name__} where an object was expected")
        return self.body

    def string(self, fields: dict[str, Any], name: str) -> str:
        value = fields.get(name)
        if not isinstance(value, str):
            raise self.invalid(f"no string field {name!r}")
        return value

    def integer(self, fields: dict[str, Any], name: str) -> int:
        value = fields.get(name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.invalid(f"no integer field {name!r}")
        return value

    def strings(self) -> list[str]:
        if not isinstance(self.body, list) or not all(isinstance(item, str) for item in self.body):
            raise self.invalid("something other than a list of strings")
        return list(self.body)

    def integers(self) -> list[int]:
        if not isinstance(self.body, list) or not all(
                isinstance(item, int) and not isinstance(item, bool) for item in self.body):
            raise self.invalid("something other than a list of integers")
        return list(self.body)


def schema_by_id(answer: Answer, schema_id: int) -> RegisteredSchema:
    """``GET /schemas/ids/{id}``: ``{"schema": ..., "schemaType"?: ..., "references"?: [...]}``."""
    fields = answer.mapping()
    return RegisteredSchema(schema_id=schema_id, schema_type=_schema_type(answer, fields),
                            schema=answer.string(fields, "schema"), references=_references(answer, fields))


def schema_version(answer: Answer) -> RegisteredSchema:
    """``GET /subjects/{subject}/versions/{version}``: the schema with its subject, version and id."""
    fields = answer.mapping()
    return RegisteredSchema(schema_id=answer.integer(fields, "id"), schema_type=_schema_type(answer, fields),
                            schema=answer.string(fields, "schema"), references=_references(answer, fields),
                            subject=answer.string(fields, "subject"), version=answer.integer(fields, "version"))


def registered_id(answer: Answer) -> int:
    """``POST /subjects/{subject}/versions``: ``{"id": ...}``."""
    return answer.integer(answer.mapping(), "id")


def reference_json(reference: SchemaReference | tuple[str, str, int]) -> dict[str, Any]:
    name, subject, version = (reference if isinstance(reference, tuple)
                              else (reference.name, reference.subject, reference.version))
    return {"name": name, "subject": subject, "version": version}


def _schema_type(answer: Answer, fields: dict[str, Any]) -> SchemaType:
    value = fields.get("schemaType", "AVRO")  # Confluent leaves it out for Avro
    for known in SCHEMA_TYPES:
        if value == known:
            return known
    raise answer.invalid(f"an unknown schemaType {value!r} (known: {', '.join(SCHEMA_TYPES)})")


def _references(answer: Answer, fields: dict[str, Any]) -> list[SchemaReference]:
    items = fields.get("references") or []
    if not isinstance(items, list):
        raise answer.invalid("a 'references' field that is not a list")
    references = []
    for item in items:
        if not isinstance(item, dict):
            raise answer.invalid("a reference that is not an object")
        references.append(SchemaReference(answer.string(item, "name"), answer.string(item, "subject"),
                                          answer.integer(item, "version")))
    return references


def _excerpt(body: Any, limit: int = 200) -> str:
    text = repr(body)
    return text if len(text) <= limit else text[:limit] + "..."
