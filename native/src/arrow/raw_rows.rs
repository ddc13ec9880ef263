//! A chunk given as a `RawRecords` range: its spans and integers copied straight into the Arrow
//! buffers, no Python object per record.

use std::iter::repeat_n;

use pyo3::exceptions::{PyOverflowError, PyValueError};
use pyo3::prelude::*;

use super::columns::{list_offset, VarBuilder};
use crate::raw::RawRecords;

/// Records `start..stop` of one decoded batch.
pub struct RawRows<'py> {
    records: Bound<'py, RawRecords>,
    start: usize,
    stop: usize,
}

fn too_wide(what: &str) -> PyErr {
    PyOverflowError::new_err(format!("a record {what} does not fit in int64"))
}

impl<'py> RawRows<'py> {
    pub fn new(records: Bound<'py, RawRecords>, start: usize, stop: usize) -> PyResult<Self> {
        let len = records.get().len();
        if start > stop || stop > len {
            return Err(PyValueError::new_err(format!(
                "records {start}..{stop} out of range for a batch of {len}"
            )));
        }
        Ok(RawRows {
            records,
            start,
            stop,
        })
    }

    pub fn len(&self) -> usize {
        self.stop - self.start
    }

    pub fn timestamp_type(&self) -> i32 {
        self.records.get().timestamp_type()
    }

    pub fn extend_offsets(&self, out: &mut Vec<i64>) -> PyResult<()> {
        let found = self.records.get().offsets(self.start, self.stop);
        out.extend_from_slice(found.ok_or_else(|| too_wide("offset"))?);
        Ok(())
    }

    pub fn extend_timestamps(&self, out: &mut Vec<i64>) -> PyResult<()> {
        if self
            .records
            .get()
            .extend_timestamps(out, self.start, self.stop)
        {
            Ok(())
        } else {
            Err(too_wide("timestamp"))
        }
    }

    fn fields(&self, keys: bool) -> &[crate::decode::Span] {
        let records = self.records.get();
        let all = if keys {
            records.keys()
        } else {
            records.values()
        };
        &all[self.start..self.stop]
    }

    /// The bytes of the keys (`keys` true) or values.
    pub fn field_bytes(&self, keys: bool) -> usize {
        self.fields(keys).iter().map(|span| span.len()).sum()
    }

    pub fn push_fields(&self, builder: &mut VarBuilder, keys: bool) {
        let body = self.records.get().body(self.records.py());
        for span in self.fields(keys) {
            builder.push(span.range().map(|range| &body[range]));
        }
    }

    /// Appends the header entries and list offsets of the records.
    pub fn push_headers(
        &self,
        list_offsets: &mut Vec<i32>,
        keys: &mut VarBuilder,
        values: &mut VarBuilder,
    ) -> PyResult<()> {
        let records = self.records.get();
        let Some(headers) = records.headers() else {
            list_offsets.extend(repeat_n(list_offset(keys.len())?, self.len()));
            return Ok(());
        };
        let body = records.body(self.records.py());
        for index in self.start..self.stop {
            for (name, value) in headers.of(index) {
                keys.push(Some(name.range().map_or(&[][..], |range| &body[range])));
                values.push(value.range().map(|range| &body[range]));
            }
            list_offsets.push(list_offset(keys.len())?);
        }
        Ok(())
    }
}
