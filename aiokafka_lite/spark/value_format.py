"""``valueFormat``: the value column as bytes (``binary``, Spark's Kafka source's column) or as the
decoded data of an Avro reader schema (``avro``, values framed by a schema registry; issue 42).

With ``avro``, ``valueAvroSchema`` is the reader schema: Spark needs the column's type before any
record is read, and each writer schema's values are resolved into it by fastavro, so one column
type holds them all. Its Arrow type is ``avro_arrow``'s; its Spark type pyspark's ``from_arrow_type``.
The schema registry package (httpx) is imported only inside the functions that use it, so a
binary read needs neither httpx nor fastavro (the import contract httpx-optional lists this module).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError, InvalidArgumentError

BINARY = "binary"
AVRO = "avro"
FORMATS = (BINARY, AVRO)
# Spark's DecimalType holds at most 38 digits; Avro decimals may have more (Arrow's decimal256).
SPARK_MAX_DECIMAL_PRECISION = 38


@dataclass(frozen=True)
class ValueFormat:
    """How the value column is given: ``binary``, or ``avro`` with the registry and reader schema."""

    name: str = BINARY
    registry_url: str | None = None
    reader_schema: str | None = None  # Avro schema as JSON text, checked

    def arrow_type(self) -> Any:
        """The pyarrow type of the value column with ``avro``; None for bytes."""
        if self.reader_schema is None:
            return None
        import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]

        from ..schema_registry.avro_arrow import arrow_type
        return arrow_type(pa, json.loads(self.reader_schema))


def parse_value_format(lowered: Mapping[str, str]) -> ValueFormat:
    """``valueFormat``, ``schemaRegistryUrl`` and ``valueAvroSchema`` (lower-cased keys), checked."""
    name = lowered.get("valueformat", BINARY).strip().lower()
    if name not in FORMATS:
        raise ConfigError(f"option valueFormat must be 'binary' or 'avro', got {lowered['valueformat']!r}")
    url = lowered.get("schemaregistryurl")
    schema = lowered.get("valueavroschema")
    if name == BINARY:
        given = [option for option, value in (("schemaRegistryUrl", url), ("valueAvroSchema", schema))
                 if value is not None]
        if given:
            raise ConfigError(f"option {given[0]} is for valueFormat=avro only; with valueFormat=binary (the "
                              "default) values are bytes: set valueFormat=avro to decode them")
        return ValueFormat()
    if url is None or not url.strip():
        raise ConfigError("option schemaRegistryUrl is required with valueFormat=avro: the registry's "
                          "Confluent-compatible API base URL (e.g. 'http://127.0.0.1:8081')")
    if schema is None or not schema.strip():
        raise ConfigError("option valueAvroSchema is required with valueFormat=avro: the reader schema as JSON "
                          "text (Spark needs the value column's type before any record is read)")
    checked = ValueFormat(AVRO, _checked_url(url.strip()), _checked_schema(schema))
    value_spark_type(checked)  # a type Spark cannot hold fails at load, not in every task
    return checked


def _checked_url(url: str) -> str:
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as exc:
        raise ConfigError(f"option schemaRegistryUrl {url!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ConfigError(f"option schemaRegistryUrl must be an http:// or https:// base URL with a host and "
                          f"no query, got {url!r}")
    return url


def _checked_schema(text: str) -> str:
    """``text`` if it is an Avro schema (fastavro parses it) with an Arrow column type."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"option valueAvroSchema is not valid JSON ({exc}): expected an Avro schema such as "
                          '{"type": "record", "name": "Order", "fields": [...]}') from exc
    from ..schema_registry.avro import import_fastavro
    try:
        import_fastavro().parse_schema(parsed)
    except ImportError as exc:
        raise ConfigError(f"option valueFormat=avro: {exc}") from exc
    except Exception as exc:  # fastavro raises SchemaParseError, KeyError, TypeError... for a bad schema
        raise ConfigError(f"option valueAvroSchema is not a valid Avro schema: {type(exc).__name__}: {exc}"
                          ) from exc
    try:
        ValueFormat(AVRO, reader_schema=text).arrow_type()
    except InvalidArgumentError as exc:
        raise ConfigError(f"option valueAvroSchema has no column type: {exc}") from exc
    return text


def value_spark_type(value_format: ValueFormat) -> Any:
    """The Spark type of the value column: BinaryType, or the reader schema's as pyspark converts
    its Arrow type (a record a StructType, its non-null fields non-nullable)."""
    from pyspark.sql.types import BinaryType, DataType, DecimalType

    arrow = value_format.arrow_type()
    if arrow is None:
        return BinaryType()
    from pyspark.sql.pandas.types import from_arrow_type
    try:
        spark_type: DataType = from_arrow_type(arrow)
    except Exception as exc:  # pyspark's PySparkTypeError for e.g. time32 (Avro's time-millis)
        raise ConfigError(f"option valueAvroSchema: its Arrow type {arrow} has no Spark type: {exc}") from exc
    too_wide = [t for t in _nested(spark_type)
                if isinstance(t, DecimalType) and t.precision > SPARK_MAX_DECIMAL_PRECISION]
    if too_wide:
        raise ConfigError(f"option valueAvroSchema: a decimal of precision {too_wide[0].precision} has no Spark "
                          f"type (Spark's decimals hold at most {SPARK_MAX_DECIMAL_PRECISION} digits)")
    return spark_type


def _nested(spark_type: Any) -> list[Any]:
    """``spark_type`` and every type within it."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(spark_type, StructType):
        return [spark_type, *(t for field in spark_type.fields for t in _nested(field.dataType))]
    if isinstance(spark_type, ArrayType):
        return [spark_type, *_nested(spark_type.elementType)]
    if isinstance(spark_type, MapType):
        return [spark_type, *_nested(spark_type.keyType), *_nested(spark_type.valueType)]
    return [spark_type]


async def open_avro_deserializer(value_format: ValueFormat) -> tuple[Any, Any]:
    """A ``SchemaRegistryClient`` for the registry and an ``AvroDeserializer`` with the reader schema,
    made in the running loop (the client's requests are tasks of it); the caller closes the client
    with ``await client.aclose()``."""
    from ..schema_registry import AvroDeserializer, SchemaRegistryClient

    assert value_format.registry_url is not None  # parse_value_format() requires both with avro
    assert value_format.reader_schema is not None
    client = SchemaRegistryClient(value_format.registry_url)
    try:
        return client, AvroDeserializer(client, reader_schema=value_format.reader_schema)
    except BaseException:
        await client.aclose()
        raise
