//! ConsumerRecord tuples built one at a time from a RecordColumns' columns: the twin of
//! `RecordColumns.__iter__` (`map(partial(tuple.__new__, ConsumerRecord), zip(...))`).
//!
//! Each `__next__` allocates the record (a tuple subclass) and stores its nine fields directly,
//! skipping the Python path's intermediate tuple, `partial` call and copy. Offsets given as a
//! range are computed per record. Like `zip`, iteration stops at the shortest column, and at
//! `len(values)` as it was when iteration started.

use std::os::raw::c_void;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyList, PyTuple, PyType};

use crate::errors::guarded;
use crate::errors::Result;

const FIELDS: ffi::Py_ssize_t = 9;

static RANGE: GILOnceCell<Py<PyType>> = GILOnceCell::new();

/// The offset column: a range computed per record (checked not to overflow), or a list.
enum Offsets {
    Range { start: i64, step: i64, len: usize },
    List(Py<PyList>),
}

/// The iterator `iter_records()` returns.
#[pyclass(module = "aiokafka_lite._native")]
pub struct RecordIter {
    record_type: Py<PyType>,
    topic: PyObject,
    partition: PyObject,
    offsets: Offsets,
    timestamps: Py<PyList>,
    timestamp_type: PyObject,
    keys: Py<PyList>,
    values: Py<PyList>,
    /// None: no record has headers (each record gets the shared `()`).
    headers: Option<Py<PyList>>,
    no_headers: Py<PyTuple>,
    leader_epoch: PyObject,
    index: usize,
    limit: usize,
}

/// The column as an exact list: itself when it is one, else `list(column)` (as `zip` would read it).
fn as_list(column: &Bound<'_, PyAny>) -> PyResult<Py<PyList>> {
    if column.is_exact_instance_of::<PyList>() {
        return Ok(column.downcast::<PyList>()?.clone().unbind());
    }
    let list = column.py().get_type::<PyList>().call1((column,))?;
    Ok(list.downcast_into::<PyList>()?.unbind())
}

/// `(start, step, len)` of a range whose every item fits an i64, else None.
fn range_parts(range: &Bound<'_, PyAny>) -> Option<(i64, i64, usize)> {
    let start: i64 = range.getattr("start").ok()?.extract().ok()?;
    let step: i64 = range.getattr("step").ok()?.extract().ok()?;
    let len = range.len().ok()?;
    if len > 0 {
        let last = i64::try_from(len - 1).ok()?.checked_mul(step)?;
        start.checked_add(last)?;
    }
    Some((start, step, len))
}

fn offset_column(offsets: &Bound<'_, PyAny>) -> PyResult<Offsets> {
    let range = RANGE.import(offsets.py(), "builtins", "range")?;
    if offsets.is_exact_instance(range) {
        if let Some((start, step, len)) = range_parts(offsets) {
            return Ok(Offsets::Range { start, step, len });
        }
    }
    Ok(Offsets::List(as_list(offsets)?))
}

/// The record type must be a tuple subclass allocated by PyType_GenericAlloc (so that the
/// fresh instance is a tuple with nine empty slots, as `tuple.__new__` would make it).
fn check_record_type(record_type: &Bound<'_, PyType>) -> PyResult<()> {
    if !record_type.is_subclass_of::<PyTuple>()? {
        return Err(PyTypeError::new_err("record_type must be a tuple subclass"));
    }
    // SAFETY: a live type object; Py_tp_alloc is a valid slot id (any type, Python >= 3.10).
    let alloc = unsafe { ffi::PyType_GetSlot(record_type.as_type_ptr(), ffi::Py_tp_alloc) };
    if alloc != ffi::PyType_GenericAlloc as *mut c_void {
        return Err(PyTypeError::new_err(
            "record_type must allocate with PyType_GenericAlloc",
        ));
    }
    Ok(())
}

/// A borrowed reference to `list[index]`, or None past its end.
#[inline(always)]
fn item(list: &Py<PyList>, index: usize) -> Option<*mut ffi::PyObject> {
    // SAFETY: `list` is a live list; the GIL is held (we are called from __next__).
    let found = unsafe { ffi::PyList_GetItem(list.as_ptr(), index as ffi::Py_ssize_t) };
    if found.is_null() {
        // Only an IndexError (the list shrank since iteration began): stop, as zip would.
        // SAFETY: the GIL is held.
        unsafe { ffi::PyErr_Clear() };
        return None;
    }
    Some(found)
}

/// Store `object` (a new reference, stolen) in slot `at` of the fresh tuple `record`.
#[inline(always)]
fn put(
    py: Python<'_>,
    record: &Bound<'_, PyAny>,
    at: ffi::Py_ssize_t,
    object: *mut ffi::PyObject,
) -> PyResult<()> {
    // SAFETY: `record` is a tuple (subclass) we just allocated and only we reference; the slot
    // is in range and empty; PyTuple_SetItem steals `object` even when it fails.
    if unsafe { ffi::PyTuple_SetItem(record.as_ptr(), at, object) } != 0 {
        return Err(PyErr::fetch(py));
    }
    Ok(())
}

/// Store a borrowed object (taking a new reference to it).
#[inline(always)]
fn put_borrowed(
    py: Python<'_>,
    record: &Bound<'_, PyAny>,
    at: ffi::Py_ssize_t,
    object: *mut ffi::PyObject,
) -> PyResult<()> {
    // SAFETY: `object` is live (a column item or a field this iterator holds); the GIL is held.
    unsafe { ffi::Py_IncRef(object) };
    put(py, record, at, object)
}

impl RecordIter {
    fn offset(&self, py: Python<'_>, index: usize) -> PyResult<Option<*mut ffi::PyObject>> {
        match &self.offsets {
            Offsets::Range { start, step, len } => {
                if index >= *len {
                    return Ok(None);
                }
                // No overflow: range_parts checked the last item fits.
                let value = start + index as i64 * step;
                // SAFETY: the GIL is held.
                let object = unsafe { ffi::PyLong_FromLongLong(value) };
                if object.is_null() {
                    return Err(PyErr::fetch(py));
                }
                Ok(Some(object))
            }
            // SAFETY (incref): a live borrowed item; the GIL is held.
            Offsets::List(list) => {
                Ok(item(list, index).inspect(|&found| unsafe { ffi::Py_IncRef(found) }))
            }
        }
    }

    /// The next record, or None at the end of the shortest column.
    fn next_record(&mut self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        let index = self.index;
        if index >= self.limit {
            return Ok(None);
        }
        // Allocate first: allocation may run the garbage collector (and so arbitrary code), which
        // must not happen between borrowing a column item and storing a reference to it.
        // SAFETY: check_record_type made sure the type is a tuple subclass allocated this way.
        let raw =
            unsafe { ffi::PyType_GenericAlloc(self.record_type.bind(py).as_type_ptr(), FIELDS) };
        if raw.is_null() {
            return Err(PyErr::fetch(py));
        }
        // SAFETY: `raw` is a new reference; from here on dropping `record` frees it (and what it holds).
        let record = unsafe { Bound::from_owned_ptr(py, raw) };
        let Some(offset) = self.offset(py, index)? else {
            self.limit = index;
            return Ok(None);
        };
        put(py, &record, 2, offset)?;
        // No Python code runs from here to the end: borrowed items stay alive until stored.
        let headers = match &self.headers {
            None => Some(self.no_headers.as_ptr()),
            Some(list) => item(list, index),
        };
        let (Some(timestamp), Some(key), Some(value), Some(headers)) = (
            item(&self.timestamps, index),
            item(&self.keys, index),
            item(&self.values, index),
            headers,
        ) else {
            self.limit = index;
            return Ok(None);
        };
        put_borrowed(py, &record, 0, self.topic.as_ptr())?;
        put_borrowed(py, &record, 1, self.partition.as_ptr())?;
        put_borrowed(py, &record, 3, timestamp)?;
        put_borrowed(py, &record, 4, self.timestamp_type.as_ptr())?;
        put_borrowed(py, &record, 5, key)?;
        put_borrowed(py, &record, 6, value)?;
        put_borrowed(py, &record, 7, headers)?;
        put_borrowed(py, &record, 8, self.leader_epoch.as_ptr())?;
        self.index = index + 1;
        Ok(Some(record.unbind()))
    }
}

#[pymethods]
impl RecordIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        guarded(py, "RecordIter.__next__", || -> Result<Option<PyObject>> {
            Ok(self.next_record(py)?)
        })
    }

    fn __length_hint__(&self) -> usize {
        self.limit.saturating_sub(self.index)
    }
}

/// An iterator of `record_type` tuples over the columns (the twin of `RecordColumns.__iter__`).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn iter_records(
    record_type: &Bound<'_, PyType>,
    topic: &Bound<'_, PyAny>,
    partition: &Bound<'_, PyAny>,
    offsets: &Bound<'_, PyAny>,
    timestamps: &Bound<'_, PyAny>,
    timestamp_type: &Bound<'_, PyAny>,
    keys: &Bound<'_, PyAny>,
    values: &Bound<'_, PyAny>,
    headers: &Bound<'_, PyAny>,
    leader_epoch: &Bound<'_, PyAny>,
) -> PyResult<RecordIter> {
    check_record_type(record_type)?;
    let py = record_type.py();
    let limit = values.len()?;
    Ok(RecordIter {
        record_type: record_type.clone().unbind(),
        topic: topic.clone().unbind(),
        partition: partition.clone().unbind(),
        offsets: offset_column(offsets)?,
        timestamps: as_list(timestamps)?,
        timestamp_type: timestamp_type.clone().unbind(),
        keys: as_list(keys)?,
        values: as_list(values)?,
        headers: if headers.is_none() {
            None
        } else {
            Some(as_list(headers)?)
        },
        no_headers: PyTuple::empty(py).unbind(),
        leader_epoch: leader_epoch.clone().unbind(),
        index: 0,
        limit,
    })
}
