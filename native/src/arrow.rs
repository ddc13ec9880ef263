//! `records_to_arrow`: decoded record columns as one Arrow record batch in the columns of Spark's
//! Kafka source, exported through the Arrow PyCapsule interface (no pyarrow needed to build it).
//!
//! The twin of `aiokafka_lite/arrow.py` `_build_with_pyarrow`: same schema, same values. Binary and
//! utf8 columns get 32-bit offsets ("z"/"u") unless their data exceeds 2**31-1 bytes, then 64-bit
//! ones ("Z"/"U", i.e. large_binary/large_utf8), decided per column.

pub(crate) mod columns;
pub(crate) mod ffi;
mod raw_rows;
mod stream;

use std::iter::repeat_n;
use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use columns::{
    as_list, bytes_or_none, extend_i64, header_key, list_bytes, list_offset, push_list, vec_for,
    VarBuilder,
};
use ffi::{Buffer, Column, Field};
use raw_rows::RawRows;

use crate::errors::guarded;

/// One Arrow record batch (a struct array) held in Rust memory.
#[pyclass(frozen, module = "aiokafka_lite._native")]
pub struct ArrowRecords {
    schema: Arc<Field>,
    data: Arc<Column>,
}

impl ArrowRecords {
    pub(crate) fn new(schema: Arc<Field>, data: Arc<Column>) -> ArrowRecords {
        ArrowRecords { schema, data }
    }
}

#[pymethods]
impl ArrowRecords {
    #[getter]
    fn num_rows(&self) -> usize {
        self.data.length
    }

    fn __len__(&self) -> usize {
        self.data.length
    }

    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        guarded(py, "__arrow_c_schema__", || {
            ffi::schema_capsule(py, &self.schema)
        })
    }

    /// The schema and array capsules; `requested_schema` is not honoured (the batch has one schema).
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let _ = requested_schema;
        guarded(py, "__arrow_c_array__", || -> PyResult<_> {
            Ok((
                ffi::schema_capsule(py, &self.schema)?,
                ffi::array_capsule(py, &self.data)?,
            ))
        })
    }

    /// A one-batch stream capsule; `requested_schema` is not honoured, as in `__arrow_c_array__`.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = requested_schema;
        guarded(py, "__arrow_c_stream__", || {
            stream::stream_capsule(py, &self.schema, &self.data)
        })
    }

    fn __repr__(&self) -> String {
        format!("ArrowRecords({} rows)", self.data.length)
    }
}

/// One chunk of records: a `(topic, partition, offsets, timestamps, timestamp_type, keys, values,
/// headers)` tuple of Python columns, or `(topic, partition, raw_records, start, stop)`.
struct Chunk<'py> {
    topic: Bound<'py, PyString>,
    partition: i32,
    timestamp_type: i32,
    rows: Rows<'py>,
}

enum Rows<'py> {
    Objects {
        offsets: Bound<'py, PyAny>,
        timestamps: Bound<'py, PyAny>,
        keys: Bound<'py, PyList>,
        values: Bound<'py, PyList>,
        headers: Option<Bound<'py, PyList>>,
    },
    Raw(RawRows<'py>),
}

impl Chunk<'_> {
    fn len(&self) -> usize {
        match &self.rows {
            Rows::Objects { values, .. } => values.len(),
            Rows::Raw(raw) => raw.len(),
        }
    }
}

type ChunkTuple<'py> = (
    Bound<'py, PyString>,
    i32,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    i32,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Option<Bound<'py, PyAny>>,
);

fn read_chunk<'py>(index: usize, item: &Bound<'py, PyAny>) -> PyResult<Chunk<'py>> {
    if item.len()? == 5 {
        let (topic, partition, records, start, stop) = item.extract()?;
        let rows = RawRows::new(records, start, stop)?;
        let timestamp_type = rows.timestamp_type();
        return Ok(Chunk {
            topic,
            partition,
            timestamp_type,
            rows: Rows::Raw(rows),
        });
    }
    let (topic, partition, offsets, timestamps, timestamp_type, keys, values, headers): ChunkTuple<
        'py,
    > = item.extract()?;
    let (keys, values) = (as_list(&keys)?, as_list(&values)?);
    let headers = headers.as_ref().map(as_list).transpose()?;
    let rows = values.len();
    let headers_len = headers.as_ref().map_or(rows, |h| h.len());
    if [keys.len(), offsets.len()?, timestamps.len()?, headers_len]
        .iter()
        .any(|&n| n != rows)
    {
        return Err(PyValueError::new_err(format!(
            "chunk {index} (topic {topic}): keys, values, offsets, timestamps and headers differ in length"
        )));
    }
    Ok(Chunk {
        topic,
        partition,
        timestamp_type,
        rows: Rows::Objects {
            offsets,
            timestamps,
            keys,
            values,
            headers,
        },
    })
}

fn repeated_i32(chunks: &[Chunk<'_>], rows: usize, value: impl Fn(&Chunk<'_>) -> i32) -> Column {
    let mut out = vec_for(rows);
    for chunk in chunks {
        out.extend(repeat_n(value(chunk), chunk.len()));
    }
    Column::fixed(Buffer::I32(out), rows)
}

fn offset_column(chunks: &[Chunk<'_>], rows: usize) -> PyResult<Column> {
    let mut out = vec_for(rows);
    for chunk in chunks {
        match &chunk.rows {
            Rows::Objects { offsets, .. } => extend_i64(&mut out, offsets)?,
            Rows::Raw(raw) => raw.extend_offsets(&mut out)?,
        }
    }
    Ok(Column::fixed(Buffer::I64(out), rows))
}

fn timestamp_column(chunks: &[Chunk<'_>], rows: usize) -> PyResult<Column> {
    let mut out = vec_for(rows);
    for chunk in chunks {
        match &chunk.rows {
            Rows::Objects { timestamps, .. } => extend_i64(&mut out, timestamps)?,
            Rows::Raw(raw) => raw.extend_timestamps(&mut out)?,
        }
    }
    Ok(Column::fixed(Buffer::I64(out), rows))
}

/// The keys (`keys` true) or values of every chunk as one binary column.
fn binary_column(chunks: &[Chunk<'_>], keys: bool) -> PyResult<(Column, bool)> {
    let what = if keys { "keys" } else { "values" };
    let (mut rows, mut bytes) = (0_usize, 0_usize);
    for chunk in chunks {
        rows += chunk.len();
        bytes += match &chunk.rows {
            Rows::Objects {
                keys: k, values, ..
            } => list_bytes(if keys { k } else { values }, what)?,
            Rows::Raw(raw) => raw.field_bytes(keys),
        };
    }
    let mut builder = VarBuilder::new(rows, bytes); // the exact size: no reallocation while copying
    for chunk in chunks {
        match &chunk.rows {
            Rows::Objects {
                keys: k, values, ..
            } => push_list(&mut builder, if keys { k } else { values }, what)?,
            Rows::Raw(raw) => raw.push_fields(&mut builder, keys),
        }
    }
    Ok(builder.finish())
}

fn topic_column(chunks: &[Chunk<'_>], rows: usize) -> PyResult<(Column, bool)> {
    let mut names = Vec::with_capacity(chunks.len());
    let mut bytes = 0_usize;
    for chunk in chunks {
        let name = chunk.topic.to_str()?.as_bytes();
        bytes = bytes.saturating_add(name.len().saturating_mul(chunk.len()));
        names.push(name);
    }
    let mut builder = VarBuilder::new(rows, bytes);
    for (chunk, name) in chunks.iter().zip(names) {
        for _ in 0..chunk.len() {
            builder.push(Some(name));
        }
    }
    Ok(builder.finish())
}

/// `list<struct<key: utf8, value: binary>>`: an empty list for a record without headers.
fn headers_column(chunks: &[Chunk<'_>], rows: usize) -> PyResult<(Column, Field)> {
    let mut list_offsets = vec_for(rows + 1);
    list_offsets.push(0_i32);
    let (mut keys, mut values) = (VarBuilder::new(0, 0), VarBuilder::new(0, 0));
    for chunk in chunks {
        let headers = match &chunk.rows {
            Rows::Raw(raw) => {
                raw.push_headers(&mut list_offsets, &mut keys, &mut values)?;
                continue;
            }
            Rows::Objects { headers, .. } => headers,
        };
        let Some(headers) = headers else {
            list_offsets.extend(repeat_n(list_offset(keys.len())?, chunk.len()));
            continue;
        };
        for record in headers.iter() {
            for pair in record.try_iter()? {
                let (key, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = pair?.extract()?;
                keys.push(Some(header_key(&key)?));
                values.push(bytes_or_none(&value, "header values")?);
            }
            list_offsets.push(list_offset(keys.len())?);
        }
    }
    let entries = keys.len();
    let ((keys, keys_large), (values, values_large)) = (keys.finish(), values.finish());
    let entry = Column {
        length: entries,
        null_count: 0,
        buffers: vec![None],
        children: vec![keys, values],
    };
    let column = Column {
        length: rows,
        null_count: 0,
        buffers: vec![None, Some(Buffer::I32(list_offsets))],
        children: vec![entry],
    };
    let entry_field = Field {
        name: c"item".into(),
        format: c"+s".into(),
        nullable: false,
        children: vec![
            Field::new(c"key", if keys_large { c"U" } else { c"u" }, false),
            Field::new(c"value", if values_large { c"Z" } else { c"z" }, true),
        ],
    };
    let field = Field {
        name: c"headers".into(),
        format: c"+l".into(),
        nullable: false,
        children: vec![entry_field],
    };
    Ok((column, field))
}

fn binary_format(large: bool) -> &'static std::ffi::CStr {
    if large {
        c"Z"
    } else {
        c"z"
    }
}

/// A column of `rows` nulls of Arrow's null type (no buffers): the place of a value column that
/// the caller replaces with decoded values, so the raw bytes are not copied for nothing.
fn null_column(rows: usize) -> Column {
    Column {
        length: rows,
        null_count: rows,
        buffers: Vec::new(),
        children: Vec::new(),
    }
}

fn build(chunks: &Bound<'_, PyAny>, with_values: bool) -> PyResult<ArrowRecords> {
    let chunks = chunks
        .try_iter()?
        .enumerate()
        .map(|(index, item)| read_chunk(index, &item?))
        .collect::<PyResult<Vec<_>>>()?;
    let rows = chunks.iter().map(Chunk::len).sum();
    let (keys, keys_large) = binary_column(&chunks, true)?;
    let (values, value_format) = if with_values {
        let (column, large) = binary_column(&chunks, false)?;
        (column, binary_format(large))
    } else {
        (null_column(rows), c"n")
    };
    let (topic, topic_large) = topic_column(&chunks, rows)?;
    let (headers, headers_field) = headers_column(&chunks, rows)?;
    let columns = vec![
        keys,
        values,
        topic,
        repeated_i32(&chunks, rows, |c| c.partition),
        offset_column(&chunks, rows)?,
        timestamp_column(&chunks, rows)?,
        repeated_i32(&chunks, rows, |c| c.timestamp_type),
        headers,
    ];
    let fields = vec![
        Field::new(c"key", binary_format(keys_large), true),
        Field::new(c"value", value_format, true),
        Field::new(c"topic", if topic_large { c"U" } else { c"u" }, false),
        Field::new(c"partition", c"i", false),
        Field::new(c"offset", c"l", false),
        Field::new(c"timestamp", c"tsm:UTC", false),
        Field::new(c"timestampType", c"i", false),
        headers_field,
    ];
    let data = Column {
        length: rows,
        null_count: 0,
        buffers: vec![None],
        children: columns,
    };
    let schema = Field {
        name: c"".into(),
        format: c"+s".into(),
        nullable: false,
        children: fields,
    };
    Ok(ArrowRecords {
        schema: Arc::new(schema),
        data: Arc::new(data),
    })
}

/// Chunks of record columns as one Arrow record batch (see the module documentation); with
/// `values=False` the value column is Arrow's null type, for a caller that puts decoded values there.
#[pyfunction]
#[pyo3(signature = (chunks, values=true))]
fn records_to_arrow(chunks: &Bound<'_, PyAny>, values: bool) -> PyResult<ArrowRecords> {
    guarded(chunks.py(), "records_to_arrow", || build(chunks, values))
}

/// Panics inside the exporter's guard, to prove a panic surfaces as NativeError (tests only).
#[pyfunction]
fn _arrow_panic_probe(py: Python<'_>) -> PyResult<()> {
    guarded(py, "_arrow_panic_probe", || -> PyResult<()> {
        panic!("probe")
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ArrowRecords>()?;
    m.add_function(wrap_pyfunction!(records_to_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(_arrow_panic_probe, m)?)?;
    Ok(())
}
