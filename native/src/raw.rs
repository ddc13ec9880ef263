//! `decode_v2_raw`: one magic-v2 batch walked once into plain vectors (spans into its record data,
//! integers), with no Python object per record. The same walk and checks as `decode_v2_batch`, so
//! the same errors at decode time.
//!
//! A `RawRecords` gives the Python columns `decode_v2_batch` returns on demand (`columns()`, for
//! poll()), and `records_to_arrow` copies its spans straight into Arrow buffers (for poll_arrow()).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::decode::{
    capacity, header_tuple, log_append, offsets, prepare_batch, push_field, walk, within, Data,
    Header, Sink, Span, HEADER_SIZE,
};
use crate::errors::guarded;
use crate::errors::Result;
use crate::frames::FrameRef;
use crate::objects::{repeated, ObjectVec};

/// Where the record data lives: in the caller's buffer (uncompressed) or decompressed here.
enum Body {
    Shared { buf: FrameRef, start: usize },
    Owned(Vec<u8>),
}

/// Integers kept as i64 until one does not fit (then exactly, for the Python columns).
pub enum Ints {
    Narrow(Vec<i64>),
    Wide(Vec<i128>),
}

impl Ints {
    fn with_capacity(capacity: usize) -> Ints {
        Ints::Narrow(Vec::with_capacity(capacity))
    }

    #[inline(always)]
    fn push(&mut self, value: i128) {
        match self {
            Ints::Narrow(narrow) => match i64::try_from(value) {
                Ok(small) => narrow.push(small),
                Err(_) => {
                    let mut wide: Vec<i128> = narrow.iter().map(|&n| i128::from(n)).collect();
                    wide.push(value);
                    *self = Ints::Wide(wide);
                }
            },
            Ints::Wide(wide) => wide.push(value),
        }
    }

    fn get(&self, index: usize) -> i128 {
        match self {
            Ints::Narrow(narrow) => i128::from(narrow[index]),
            Ints::Wide(wide) => wide[index],
        }
    }

    /// The values when they all fit i64.
    pub fn narrow(&self) -> Option<&[i64]> {
        match self {
            Ints::Narrow(narrow) => Some(narrow),
            Ints::Wide(_) => None,
        }
    }
}

/// Header spans of every record: record `i`'s are `pairs[ends[i - 1]..ends[i]]`.
pub struct RawHeaders {
    ends: Vec<usize>,
    pairs: Vec<(Span, Span)>,
}

impl RawHeaders {
    pub fn of(&self, index: usize) -> &[(Span, Span)] {
        let low = if index == 0 { 0 } else { self.ends[index - 1] };
        &self.pairs[low..self.ends[index]]
    }
}

/// One decoded batch as spans and integers (see the module documentation).
#[pyclass(frozen, module = "aiokafka_lite._native")]
pub struct RawRecords {
    body: Body,
    log_append: bool,
    max_timestamp: i64,
    offsets: Ints,
    /// Empty under LogAppendTime (every record has `max_timestamp`).
    timestamps: Ints,
    keys: Vec<Span>,
    values: Vec<Span>,
    /// None: no record has headers.
    headers: Option<RawHeaders>,
}

impl RawRecords {
    pub fn body<'a>(&'a self, py: Python<'_>) -> &'a [u8] {
        match &self.body {
            Body::Shared { buf, start } => &buf.bytes(py)[*start..],
            Body::Owned(plain) => plain,
        }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn keys(&self) -> &[Span] {
        &self.keys
    }

    pub fn values(&self) -> &[Span] {
        &self.values
    }

    pub fn headers(&self) -> Option<&RawHeaders> {
        self.headers.as_ref()
    }

    pub fn timestamp_type(&self) -> i32 {
        i32::from(self.log_append)
    }

    /// Offsets of records `start..stop` (None: one does not fit i64).
    pub fn offsets(&self, start: usize, stop: usize) -> Option<&[i64]> {
        self.offsets.narrow().map(|all| &all[start..stop])
    }

    /// Appends the timestamps of records `start..stop`; false (nothing appended) if one does not
    /// fit i64.
    pub fn extend_timestamps(&self, out: &mut Vec<i64>, start: usize, stop: usize) -> bool {
        if self.log_append {
            out.extend(std::iter::repeat_n(self.max_timestamp, stop - start));
            return true;
        }
        match self.timestamps.narrow() {
            Some(all) => {
                out.extend_from_slice(&all[start..stop]);
                true
            }
            None => false,
        }
    }

    fn check_range(&self, start: usize, stop: usize) -> PyResult<()> {
        if start > stop || stop > self.len() {
            return Err(PyValueError::new_err(format!(
                "records {start}..{stop} out of range for a batch of {}",
                self.len()
            )));
        }
        Ok(())
    }

    fn timestamp_list<'py>(
        &self,
        py: Python<'py>,
        start: usize,
        stop: usize,
    ) -> Result<Bound<'py, PyList>> {
        if self.log_append {
            let stamp = self.max_timestamp.into_pyobject(py)?.into_any();
            return Ok(repeated(py, &stamp, stop - start)?);
        }
        let mut out = ObjectVec::with_capacity(stop - start);
        for index in start..stop {
            out.push_int(py, self.timestamps.get(index))?;
        }
        Ok(out.into_list(py)?)
    }

    fn span_list<'py>(py: Python<'py>, body: &[u8], spans: &[Span]) -> Result<Bound<'py, PyList>> {
        let mut out = ObjectVec::with_capacity(spans.len());
        for &span in spans {
            push_field(py, body, &mut out, span)?;
        }
        Ok(out.into_list(py)?)
    }

    fn header_list<'py>(
        &self,
        py: Python<'py>,
        body: &[u8],
        start: usize,
        stop: usize,
    ) -> Result<Option<Bound<'py, PyList>>> {
        let Some(headers) = &self.headers else {
            return Ok(None);
        };
        let mut out = ObjectVec::with_capacity(stop - start);
        for index in start..stop {
            let pairs = headers.of(index);
            if pairs.is_empty() {
                out.push_borrowed(PyTuple::empty(py).as_ptr());
            } else {
                out.push_borrowed(header_tuple(py, body, pairs)?.as_ptr());
            }
        }
        Ok(Some(out.into_list(py)?))
    }
}

type PyColumns<'py> = (
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    Bound<'py, PyList>,
    Option<Bound<'py, PyList>>,
);

#[pymethods]
impl RawRecords {
    fn __len__(&self) -> usize {
        self.len()
    }

    /// True when every offset and timestamp fits an int64 (else Arrow cannot take them raw).
    #[getter]
    fn narrow(&self) -> bool {
        self.offsets.narrow().is_some() && self.timestamps.narrow().is_some()
    }

    /// `(timestamps, keys, values, headers)` of records `start..stop`, as `decode_v2_batch` makes
    /// them (headers None when no record of the batch has any).
    fn columns<'py>(&self, py: Python<'py>, start: usize, stop: usize) -> PyResult<PyColumns<'py>> {
        self.check_range(start, stop)?;
        guarded(py, "RawRecords.columns", || -> Result<_> {
            let body = self.body(py);
            Ok((
                self.timestamp_list(py, start, stop)?,
                Self::span_list(py, body, &self.keys[start..stop])?,
                Self::span_list(py, body, &self.values[start..stop])?,
                self.header_list(py, body, start, stop)?,
            ))
        })
    }

    fn __repr__(&self) -> String {
        format!("RawRecords({} records)", self.len())
    }
}

/// The walk's output as spans and integers.
struct RawSink {
    timestamps: Ints,
    keys: Vec<Span>,
    values: Vec<Span>,
    headers: Option<RawHeaders>,
}

impl Sink for RawSink {
    #[inline(always)]
    fn timestamp(&mut self, value: i128) -> Result<()> {
        self.timestamps.push(value);
        Ok(())
    }

    #[inline(always)]
    fn key(&mut self, field: Span) -> Result<()> {
        self.keys.push(field);
        Ok(())
    }

    #[inline(always)]
    fn value(&mut self, field: Span) -> Result<()> {
        self.values.push(field);
        Ok(())
    }

    #[inline(always)]
    fn no_headers(&mut self) {
        if let Some(found) = self.headers.as_mut() {
            found.ends.push(found.pairs.len());
        }
    }

    fn headers(&mut self, index: usize, pairs: &[(Span, Span)]) -> Result<()> {
        let found = self.headers.get_or_insert_with(|| RawHeaders {
            ends: vec![0; index],
            pairs: Vec::new(),
        });
        found.pairs.extend_from_slice(pairs);
        found.ends.push(found.pairs.len());
        Ok(())
    }
}

fn raw_offsets(header: &Header, count: usize, deltas: Option<&[i128]>) -> Ints {
    let base = i128::from(header.base_offset);
    let mut out = Ints::with_capacity(count);
    match deltas {
        Some(deltas) => deltas.iter().for_each(|delta| out.push(base + delta)),
        None => (0..count).for_each(|index| out.push(base + index as i128)),
    }
    out
}

type RawResult<'py> = (Bound<'py, PyAny>, i32, Bound<'py, RawRecords>);

/// Decode one magic-v2, non-control batch occupying `buf[start:end]` into
/// `(offsets, timestamp_type, RawRecords)`: the checks and errors of `decode_v2_batch`.
#[pyfunction]
pub fn decode_v2_raw<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    start: usize,
    end: usize,
    check_crcs: bool,
    max_decompressed: usize,
) -> PyResult<RawResult<'py>> {
    let frame = FrameRef::of(buf)
        .ok_or_else(|| PyTypeError::new_err("decode_v2_raw reads bytes or a received Frame"))?;
    let data = frame.bytes(py);
    let (offsets, log_append, raw) = guarded(py, "decode_v2_raw", || -> Result<_> {
        within(data, start, end)?;
        let prepared = prepare_batch(
            py,
            &data[start..],
            end - start,
            check_crcs,
            max_decompressed,
        )?;
        let header = &prepared.header;
        let capacity = capacity(header, prepared.end);
        let log_append = log_append(header);
        let mut sink = RawSink {
            timestamps: Ints::with_capacity(if log_append { 0 } else { capacity }),
            keys: Vec::with_capacity(capacity),
            values: Vec::with_capacity(capacity),
            headers: None,
        };
        let walked = walk(prepared.body(), prepared.end, header, &mut sink)?;
        let deltas = walked.deltas.as_deref();
        let python_offsets = offsets(py, header, walked.count, deltas)?;
        let raw = RawRecords {
            log_append,
            max_timestamp: header.max_timestamp,
            offsets: raw_offsets(header, walked.count, deltas),
            timestamps: sink.timestamps,
            keys: sink.keys,
            values: sink.values,
            headers: sink.headers,
            body: match prepared.data {
                Data::Borrowed(_) => Body::Shared {
                    buf: frame.clone_ref(py),
                    start: start + HEADER_SIZE,
                },
                Data::Decompressed(mut plain) => {
                    // Kept until the columns are made: give back the decompressor's spare room.
                    plain.shrink_to_fit();
                    Body::Owned(plain)
                }
            },
        };
        Ok((python_offsets, log_append, raw))
    })?;
    Ok((offsets, i32::from(log_append), Bound::new(py, raw)?))
}
