//! One magic-v2 record batch into columns: the twin of `records_v2._record_loop`.
//!
//! Checks the CRC and decompresses with the GIL released, then walks the records once (`walk`),
//! handing each field to a `Sink`: here the one creating the key/value bytes and timestamp ints as
//! it goes (`decode_v2_batch`), in `raw.rs` the one keeping spans (`decode_v2_raw`). Errors and
//! their order match the Python loop: record structure first, then bytes left over, then offset
//! deltas.

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyString, PyTuple, PyType};

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
    pub base_offset: i64,
    crc: u32,
    attributes: i16,
    base_timestamp: i64,
    pub max_timestamp: i64,
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

/// Check that the batch `start..end` lies inside `data`.
pub fn within(data: &[u8], start: usize, end: usize) -> Result<()> {
    if start > end || end > data.len() {
        let size = data.len();
        return Err(corrupt(format!(
            "batch {start}..{end} lies outside the {size}-byte buffer"
        )));
    }
    Ok(())
}

/// A header-checked batch, its record data decompressed if needed.
pub struct Prepared<'a> {
    pub header: Header,
    /// The records: `data[..end]` (for an uncompressed batch, `data` runs on past the batch).
    pub data: Data<'a>,
    pub end: usize,
}

pub enum Data<'a> {
    /// The rest of the caller's buffer from the batch's record data on.
    Borrowed(&'a [u8]),
    Decompressed(Vec<u8>),
}

impl Prepared<'_> {
    pub fn body(&self) -> &[u8] {
        match &self.data {
            Data::Borrowed(rest) => rest,
            Data::Decompressed(plain) => plain,
        }
    }
}

/// Header, CRC and decompression of the batch that is the first `end` bytes of `rest` (`rest` is
/// the buffer from the batch's start on).
pub fn prepare_batch<'a>(
    py: Python<'_>,
    rest: &'a [u8],
    end: usize,
    check_crcs: bool,
    max_decompressed: usize,
) -> Result<Prepared<'a>> {
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
    Ok(match plain {
        Some(body) => Prepared {
            header,
            end: body.len(),
            data: Data::Decompressed(body),
        },
        // Like the Python loop, reads may run past the batch into the rest of the buffer (the
        // record-end and left-over checks then fail), so errors match message for message.
        None => Prepared {
            header,
            end: batch.len() - HEADER_SIZE,
            data: Data::Borrowed(&rest[HEADER_SIZE..]),
        },
    })
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
    let prepared = prepare_batch(py, rest, end, check_crcs, max_decompressed)?;
    record_columns(py, prepared.body(), prepared.end, &prepared.header)
}

/// A bytes field as a range of the record data (`low..high`, cut at its end), or null.
#[derive(Clone, Copy)]
pub struct Span {
    low: usize,
    high: usize,
}

impl Span {
    pub const NULL: Span = Span {
        low: usize::MAX,
        high: 0,
    };

    pub fn range(self) -> Option<std::ops::Range<usize>> {
        (self.low != usize::MAX).then_some(self.low..self.high)
    }

    pub fn len(self) -> usize {
        self.range().map_or(0, |r| r.len())
    }
}

/// What the record walk produces, per record: Python objects or spans.
pub trait Sink {
    fn timestamp(&mut self, value: i128) -> Result<()>;
    fn key(&mut self, field: Span) -> Result<()>;
    fn value(&mut self, field: Span) -> Result<()>;
    /// A record without headers (header count 0 in one byte).
    fn no_headers(&mut self);
    /// The `(name, value)` header spans of record `index` (names are valid UTF-8).
    fn headers(&mut self, index: usize, pairs: &[(Span, Span)]) -> Result<()>;
}

/// What the walk found beside the per-record fields.
pub struct Walked {
    pub count: usize,
    /// Offset deltas, when they are not exactly `0..count` (they ascend).
    pub deltas: Option<Vec<i128>>,
}

/// How many records to reserve room for.
pub fn capacity(header: &Header, end: usize) -> usize {
    record_count(header).min(end / MIN_RECORD_SIZE + 1)
}

fn record_count(header: &Header) -> usize {
    usize::try_from(header.records_count).unwrap_or(0)
}

pub fn log_append(header: &Header) -> bool {
    header.attributes & TIMESTAMP_TYPE_BIT != 0
}

/// Walk the records in `body[..end]` (reads may run past `end`, as on the Python path), with every
/// check of the Python loop, in its order.
pub fn walk(body: &[u8], end: usize, header: &Header, sink: &mut impl Sink) -> Result<Walked> {
    let count = record_count(header);
    let log_append = log_append(header);
    let mut reader = Reader::new(body);
    let mut deltas = None;
    let mut pairs = Vec::new();
    for index in 0..count {
        let mut record = Record {
            reader: &mut reader,
            header,
            log_append,
            index,
        };
        record.read(&mut deltas, &mut pairs, sink)?;
    }
    if reader.pos != end {
        let left = end as i128 - reader.pos as i128;
        return Err(corrupt(format!(
            "{left} bytes left over after the batch's last record"
        )));
    }
    if let Some(found) = &deltas {
        if found.windows(2).any(|pair: &[i128]| pair[1] <= pair[0]) {
            return Err(corrupt("offset deltas do not ascend"));
        }
    }
    Ok(Walked { count, deltas })
}

struct Record<'r, 'a> {
    reader: &'r mut Reader<'a>,
    header: &'r Header,
    log_append: bool,
    index: usize,
}

impl Record<'_, '_> {
    #[inline(always)]
    fn read(
        &mut self,
        deltas: &mut Option<Vec<i128>>,
        pairs: &mut Vec<(Span, Span)>,
        sink: &mut impl Sink,
    ) -> Result<()> {
        let (reader, index) = (&mut *self.reader, self.index);
        let length = reader.varint_wide()?;
        let record_end = reader.pos as i128 + length;
        reader.skip(1); // attributes: unused
        let timestamp_delta = reader.varint_wide()?;
        if !self.log_append {
            sink.timestamp(i128::from(self.header.base_timestamp) + timestamp_delta)?;
        }
        let offset_delta = reader.varint_wide()?;
        if offset_delta != index as i128 || deltas.is_some() {
            deltas
                .get_or_insert_with(|| (0..index as i128).collect())
                .push(offset_delta);
        }
        if reader.peek()? == 1 {
            // key length -1: no key (the common case on unkeyed topics)
            reader.skip(1);
            sink.key(Span::NULL)?;
        } else {
            sink.key(nullable(reader, "key")?)?;
        }
        sink.value(nullable(reader, "value")?)?;
        if reader.peek()? == 0 {
            reader.skip(1);
            sink.no_headers();
        } else {
            read_headers(reader, pairs)?;
            sink.headers(index, pairs)?;
        }
        if reader.pos as i128 != record_end {
            return Err(corrupt(format!(
                "record {index} of the batch does not end where its length says"
            )));
        }
        Ok(())
    }
}

/// A length-prefixed bytes field, or null for length -1.
#[inline(always)]
fn nullable(reader: &mut Reader<'_>, what: &str) -> Result<Span> {
    let size = reader.varint()?;
    if size >= 0 {
        let (low, high) = reader.take_span(size as usize);
        Ok(Span { low, high })
    } else if size == -1 {
        Ok(Span::NULL)
    } else {
        Err(corrupt(format!("negative {what} length {size}")))
    }
}

fn read_headers(reader: &mut Reader<'_>, pairs: &mut Vec<(Span, Span)>) -> Result<()> {
    pairs.clear();
    let count = reader.varint()?;
    if count < 0 {
        return Err(corrupt(format!("negative header count {count}")));
    }
    // Each header takes at least two bytes, so a huge count runs out of data quickly.
    for _ in 0..count {
        let size = reader.varint()?;
        if size < 0 {
            return Err(corrupt(format!("header key length {size}")));
        }
        let (low, high) = reader.take_span(size as usize);
        std::str::from_utf8(reader.slice(low..high)).map_err(|err| {
            corrupt(format!(
                "record data is truncated or malformed (header key: {err})"
            ))
        })?;
        let name = Span { low, high };
        let size = reader.varint()?;
        let value = if size >= 0 {
            let (low, high) = reader.take_span(size as usize);
            Span { low, high }
        } else if size == -1 {
            Span::NULL
        } else {
            return Err(corrupt(format!("negative header value length {size}")));
        };
        pairs.push((name, value));
    }
    Ok(())
}

/// The walk's output as Python objects: what `decode_v2_batch` returns.
struct ObjectSink<'py, 'a> {
    py: Python<'py>,
    body: &'a [u8],
    timestamps: ObjectVec,
    keys: ObjectVec,
    values: ObjectVec,
    headers: Option<ObjectVec>,
}

#[inline(always)]
pub fn push_field(py: Python<'_>, body: &[u8], column: &mut ObjectVec, field: Span) -> Result<()> {
    match field.range() {
        Some(range) => column.push_bytes(py, &body[range])?,
        None => column.push_borrowed(py.None().as_ptr()),
    }
    Ok(())
}

impl Sink for ObjectSink<'_, '_> {
    #[inline(always)]
    fn timestamp(&mut self, value: i128) -> Result<()> {
        Ok(self.timestamps.push_int(self.py, value)?)
    }

    #[inline(always)]
    fn key(&mut self, field: Span) -> Result<()> {
        push_field(self.py, self.body, &mut self.keys, field)
    }

    #[inline(always)]
    fn value(&mut self, field: Span) -> Result<()> {
        push_field(self.py, self.body, &mut self.values, field)
    }

    #[inline(always)]
    fn no_headers(&mut self) {
        if let Some(found) = self.headers.as_mut() {
            found.push_borrowed(PyTuple::empty(self.py).as_ptr());
        }
    }

    fn headers(&mut self, index: usize, pairs: &[(Span, Span)]) -> Result<()> {
        let record_headers = header_tuple(self.py, self.body, pairs)?;
        let py = self.py;
        let found = self.headers.get_or_insert_with(|| {
            let mut found = ObjectVec::with_capacity(index + 1);
            for _ in 0..index {
                found.push_borrowed(PyTuple::empty(py).as_ptr());
            }
            found
        });
        found.push_borrowed(record_headers.as_ptr());
        Ok(())
    }
}

/// One record's headers as `((name, value), ...)`.
pub fn header_tuple<'py>(
    py: Python<'py>,
    body: &[u8],
    pairs: &[(Span, Span)],
) -> Result<Bound<'py, PyTuple>> {
    let mut out: Vec<Bound<'py, PyTuple>> = Vec::with_capacity(pairs.len());
    for (name, value) in pairs {
        let name = name.range().map_or(&[][..], |r| &body[r]);
        let name =
            std::str::from_utf8(name).map_err(|err| corrupt(format!("header key: {err}")))?;
        let value = match value.range() {
            Some(range) => PyBytes::new(py, &body[range]).into_any(),
            None => py.None().into_bound(py),
        };
        out.push(PyTuple::new(
            py,
            [PyString::new(py, name).into_any(), value],
        )?);
    }
    Ok(PyTuple::new(py, out)?)
}

/// The records in `body[..end]` as Python columns.
fn record_columns<'py>(
    py: Python<'py>,
    body: &[u8],
    end: usize,
    header: &Header,
) -> Result<Bound<'py, PyTuple>> {
    let capacity = capacity(header, end);
    let log_append = log_append(header);
    let mut sink = ObjectSink {
        py,
        body,
        timestamps: ObjectVec::with_capacity(if log_append { 0 } else { capacity }),
        keys: ObjectVec::with_capacity(capacity),
        values: ObjectVec::with_capacity(capacity),
        headers: None,
    };
    let walked = walk(body, end, header, &mut sink)?;
    let count = walked.count;
    let offsets = offsets(py, header, count, walked.deltas.as_deref())?;
    let timestamps = if log_append {
        repeated(
            py,
            &header.max_timestamp.into_pyobject(py)?.into_any(),
            count,
        )?
    } else {
        sink.timestamps.into_list(py)?
    };
    let headers = match sink.headers {
        None => py.None().into_bound(py),
        Some(found) => found.into_list(py)?.into_any(),
    };
    let items: [Bound<'py, PyAny>; 6] = [
        offsets,
        timestamps.into_any(),
        i32::from(log_append).into_pyobject(py)?.into_any(),
        sink.keys.into_list(py)?.into_any(),
        sink.values.into_list(py)?.into_any(),
        headers,
    ];
    Ok(PyTuple::new(py, items)?)
}

/// `range(base, base + count)` without gaps, else the listed offsets (checked to ascend by `walk`).
pub fn offsets<'py>(
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
    let mut out = ObjectVec::with_capacity(count);
    for delta in deltas {
        out.push_int(py, base + delta)?;
    }
    Ok(out.into_list(py)?.into_any())
}
