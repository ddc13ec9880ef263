//! One magic-v2 record batch into columns: the twin of `records_v2._record_loop`.
//!
//! Checks the CRC and decompresses with the GIL released, then walks the records once, creating
//! the key/value bytes and timestamp ints as it goes. Errors and their order match the Python
//! loop: record structure first, then bytes left over, then offset deltas.

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyString, PyTuple, PyType};

use crate::compression::decompress;
use crate::errors::{corrupt, Result};
use crate::objects::{repeated, ObjectVec};
use crate::varint::Reader;

pub const HEADER_SIZE: usize = 61;
const CRC_START: usize = 21;
const CODEC_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 0x08;
/// Smallest record: length, attributes, timestamp, offset delta, key, value, header count.
const MIN_RECORD_SIZE: usize = 7;
/// Batches smaller than this are checked without releasing the GIL (not worth the switch).
const RELEASE_GIL_FROM: usize = 16 * 1024;

static RANGE: GILOnceCell<Py<PyType>> = GILOnceCell::new();

/// The header fields the record loop needs.
pub struct Header {
    base_offset: i64,
    crc: u32,
    attributes: i16,
    base_timestamp: i64,
    max_timestamp: i64,
    records_count: i32,
}

fn be_bytes<const N: usize>(batch: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&batch[at..at + N]);
    out
}

impl Header {
    /// `batch` is at least HEADER_SIZE bytes (checked by the caller).
    pub fn parse(batch: &[u8]) -> Header {
        Header {
            base_offset: i64::from_be_bytes(be_bytes(batch, 0)),
            crc: u32::from_be_bytes(be_bytes(batch, 17)),
            attributes: i16::from_be_bytes(be_bytes(batch, 21)),
            base_timestamp: i64::from_be_bytes(be_bytes(batch, 27)),
            max_timestamp: i64::from_be_bytes(be_bytes(batch, 35)),
            records_count: i32::from_be_bytes(be_bytes(batch, 57)),
        }
    }
}

/// CRC check and decompression (no Python objects: runs without the GIL). None: not compressed.
pub fn prepare(
    batch: &[u8],
    header: &Header,
    check_crcs: bool,
    max_decompressed: usize,
) -> Result<Option<Vec<u8>>> {
    if check_crcs {
        let actual = crc32c::crc32c(&batch[CRC_START..]);
        if actual != header.crc {
            return Err(corrupt(format!(
                "CRC32C mismatch: stored {:#010x}, computed {actual:#010x}",
                header.crc
            )));
        }
    }
    let codec = (header.attributes & CODEC_MASK) as u8;
    if codec == 0 {
        return Ok(None);
    }
    decompress(codec, &batch[HEADER_SIZE..], max_decompressed).map(Some)
}

/// `(offsets, timestamps, timestamp_type, keys, values, headers)` of the batch in `batch`.
/// `rest` is the buffer from the batch's start on; the batch is its first `end` bytes.
pub fn decode_batch<'py>(
    py: Python<'py>,
    rest: &[u8],
    end: usize,
    check_crcs: bool,
    max_decompressed: usize,
) -> Result<Bound<'py, PyTuple>> {
    let batch = &rest[..end.min(rest.len())];
    if batch.len() < HEADER_SIZE {
        return Err(corrupt(format!(
            "v2 batch of {} bytes is shorter than its header",
            batch.len()
        )));
    }
    let header = Header::parse(batch);
    let compressed = header.attributes & CODEC_MASK != 0;
    let plain = if compressed || (check_crcs && batch.len() >= RELEASE_GIL_FROM) {
        py.allow_threads(|| prepare(batch, &header, check_crcs, max_decompressed))?
    } else {
        prepare(batch, &header, check_crcs, max_decompressed)?
    };
    match plain {
        Some(body) => record_columns(py, &body, body.len(), &header),
        // Like the Python loop, reads may run past the batch into the rest of the buffer (the
        // record-end and left-over checks then fail), so errors match message for message.
        None => record_columns(py, &rest[HEADER_SIZE..], batch.len() - HEADER_SIZE, &header),
    }
}

/// Per-record columns collected by the loop.
struct Columns {
    timestamps: ObjectVec,
    keys: ObjectVec,
    values: ObjectVec,
    headers: Option<ObjectVec>,
    deltas: Option<Vec<i128>>,
}

/// The records in `body[..end]` (reads may run past `end`, as on the Python path).
fn record_columns<'py>(
    py: Python<'py>,
    body: &[u8],
    end: usize,
    header: &Header,
) -> Result<Bound<'py, PyTuple>> {
    let count = usize::try_from(header.records_count).unwrap_or(0);
    let capacity = count.min(end / MIN_RECORD_SIZE + 1);
    let log_append = header.attributes & TIMESTAMP_TYPE_BIT != 0;
    let mut columns = Columns {
        timestamps: ObjectVec::with_capacity(if log_append { 0 } else { capacity }),
        keys: ObjectVec::with_capacity(capacity),
        values: ObjectVec::with_capacity(capacity),
        headers: None,
        deltas: None,
    };
    let mut reader = Reader::new(body);
    for index in 0..count {
        read_record(py, &mut reader, header, log_append, index, &mut columns)?;
    }
    if reader.pos != end {
        let left = end as i128 - reader.pos as i128;
        return Err(corrupt(format!(
            "{left} bytes left over after the batch's last record"
        )));
    }
    let offsets = offsets(py, header, count, columns.deltas.as_deref())?;
    let timestamps = if log_append {
        repeated(
            py,
            &header.max_timestamp.into_pyobject(py)?.into_any(),
            count,
        )?
    } else {
        columns.timestamps.into_list(py)?
    };
    let headers = match columns.headers {
        None => py.None().into_bound(py),
        Some(found) => found.into_list(py)?.into_any(),
    };
    let items: [Bound<'py, PyAny>; 6] = [
        offsets,
        timestamps.into_any(),
        i32::from(log_append).into_pyobject(py)?.into_any(),
        columns.keys.into_list(py)?.into_any(),
        columns.values.into_list(py)?.into_any(),
        headers,
    ];
    Ok(PyTuple::new(py, items)?)
}

#[inline(always)]
fn read_record(
    py: Python<'_>,
    reader: &mut Reader<'_>,
    header: &Header,
    log_append: bool,
    index: usize,
    columns: &mut Columns,
) -> Result<()> {
    let length = reader.varint_wide()?;
    let record_end = reader.pos as i128 + length;
    reader.skip(1); // attributes: unused
    let timestamp_delta = reader.varint_wide()?;
    if !log_append {
        columns
            .timestamps
            .push_int(py, i128::from(header.base_timestamp) + timestamp_delta)?;
    }
    let offset_delta = reader.varint_wide()?;
    if offset_delta != index as i128 || columns.deltas.is_some() {
        columns
            .deltas
            .get_or_insert_with(|| (0..index as i128).collect())
            .push(offset_delta);
    }
    if reader.peek()? == 1 {
        // key length -1: no key (the common case on unkeyed topics)
        reader.skip(1);
        columns.keys.push_borrowed(py.None().as_ptr());
    } else {
        push_nullable(py, reader, &mut columns.keys, "key")?;
    }
    push_nullable(py, reader, &mut columns.values, "value")?;
    if reader.peek()? == 0 {
        reader.skip(1);
        if let Some(found) = columns.headers.as_mut() {
            found.push_borrowed(PyTuple::empty(py).as_ptr());
        }
    } else {
        let record_headers = read_headers(py, reader)?;
        let found = columns.headers.get_or_insert_with(|| {
            let mut found = ObjectVec::with_capacity(index + 1);
            for _ in 0..index {
                found.push_borrowed(PyTuple::empty(py).as_ptr());
            }
            found
        });
        found.push_borrowed(record_headers.as_ptr());
    }
    if reader.pos as i128 != record_end {
        return Err(corrupt(format!(
            "record {index} of the batch does not end where its length says"
        )));
    }
    Ok(())
}

/// A length-prefixed bytes field, or None for length -1.
#[inline(always)]
fn push_nullable(
    py: Python<'_>,
    reader: &mut Reader<'_>,
    column: &mut ObjectVec,
    what: &str,
) -> Result<()> {
    let size = reader.varint()?;
    if size >= 0 {
        let data = reader.take(size as usize);
        column.push_bytes(py, data)?;
    } else if size == -1 {
        column.push_borrowed(py.None().as_ptr());
    } else {
        return Err(corrupt(format!("negative {what} length {size}")));
    }
    Ok(())
}

fn read_headers<'py>(py: Python<'py>, reader: &mut Reader<'_>) -> Result<Bound<'py, PyTuple>> {
    let count = reader.varint()?;
    if count < 0 {
        return Err(corrupt(format!("negative header count {count}")));
    }
    let mut pairs: Vec<Bound<'py, PyTuple>> = Vec::new();
    // Each header takes at least two bytes, so a huge count runs out of data quickly.
    for _ in 0..count {
        let size = reader.varint()?;
        if size < 0 {
            return Err(corrupt(format!("header key length {size}")));
        }
        let raw = reader.take(size as usize);
        let name = std::str::from_utf8(raw).map_err(|err| {
            corrupt(format!(
                "record data is truncated or malformed (header key: {err})"
            ))
        })?;
        let name = PyString::new(py, name).into_any();
        let size = reader.varint()?;
        let value = if size >= 0 {
            let data = reader.take(size as usize);
            pyo3::types::PyBytes::new(py, data).into_any()
        } else if size == -1 {
            py.None().into_bound(py)
        } else {
            return Err(corrupt(format!("negative header value length {size}")));
        };
        pairs.push(PyTuple::new(py, [name, value])?);
    }
    Ok(PyTuple::new(py, pairs)?)
}

/// `range(base, base + count)` without gaps, else the listed offsets (which must ascend).
fn offsets<'py>(
    py: Python<'py>,
    header: &Header,
    count: usize,
    deltas: Option<&[i128]>,
) -> Result<Bound<'py, PyAny>> {
    let base = i128::from(header.base_offset);
    let Some(deltas) = deltas else {
        let range = RANGE.import(py, "builtins", "range")?;
        let stop = base + i128::from(header.records_count);
        return Ok(range.call1((base, stop))?);
    };
    if deltas.windows(2).any(|pair| pair[1] <= pair[0]) {
        return Err(corrupt("offset deltas do not ascend"));
    }
    let mut out = ObjectVec::with_capacity(count);
    for delta in deltas {
        out.push_int(py, base + delta)?;
    }
    Ok(out.into_list(py)?.into_any())
}
