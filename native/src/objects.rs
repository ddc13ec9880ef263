//! Building Python objects straight from slices (the hot path: one bytes object per key/value).

use std::os::raw::c_char;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// Owned object pointers collected while decoding; decref'd if dropped before `into_list`.
/// Only used with the GIL held.
pub struct ObjectVec {
    items: Vec<*mut ffi::PyObject>,
}

impl ObjectVec {
    pub fn with_capacity(capacity: usize) -> Self {
        ObjectVec {
            items: Vec::with_capacity(capacity),
        }
    }

    /// Take ownership of a new reference (NULL means Python raised).
    #[inline(always)]
    pub fn push_owned(&mut self, py: Python<'_>, object: *mut ffi::PyObject) -> PyResult<()> {
        if object.is_null() {
            return Err(PyErr::fetch(py));
        }
        self.items.push(object);
        Ok(())
    }

    /// Push a borrowed object (taking a new reference to it).
    #[inline(always)]
    pub fn push_borrowed(&mut self, object: *mut ffi::PyObject) {
        // SAFETY: `object` is a live object and the GIL is held.
        unsafe { ffi::Py_IncRef(object) };
        self.items.push(object);
    }

    #[inline(always)]
    pub fn push_bytes(&mut self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        // SAFETY: the pointer and length describe a live slice; the GIL is held.
        let object = unsafe {
            ffi::PyBytes_FromStringAndSize(
                data.as_ptr().cast::<c_char>(),
                data.len() as ffi::Py_ssize_t,
            )
        };
        self.push_owned(py, object)
    }

    #[inline(always)]
    pub fn push_int(&mut self, py: Python<'_>, value: i128) -> PyResult<()> {
        match i64::try_from(value) {
            // SAFETY: the GIL is held.
            Ok(small) => self.push_owned(py, unsafe { ffi::PyLong_FromLongLong(small) }),
            Err(_) => self.push_owned(py, value.into_pyobject(py)?.into_ptr()),
        }
    }

    /// A list of the collected objects (their references move into it).
    pub fn into_list(mut self, py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
        let items = std::mem::take(&mut self.items);
        // SAFETY: the GIL is held; PyList_SetItem steals each reference, and every slot is set.
        unsafe {
            let list = ffi::PyList_New(items.len() as ffi::Py_ssize_t);
            if list.is_null() {
                self.items = items;
                return Err(PyErr::fetch(py));
            }
            for (index, item) in items.into_iter().enumerate() {
                ffi::PyList_SetItem(list, index as ffi::Py_ssize_t, item);
            }
            Ok(Bound::from_owned_ptr(py, list).downcast_into_unchecked())
        }
    }
}

impl Drop for ObjectVec {
    fn drop(&mut self) {
        for item in self.items.drain(..) {
            // SAFETY: each item is an owned reference; ObjectVec only lives while the GIL is held.
            unsafe { ffi::Py_DecRef(item) };
        }
    }
}

/// A list holding the same object `count` times (Python's `[x] * count`).
pub fn repeated<'py>(
    py: Python<'py>,
    object: &Bound<'py, PyAny>,
    count: usize,
) -> PyResult<Bound<'py, PyList>> {
    let mut items = ObjectVec::with_capacity(count);
    for _ in 0..count {
        items.push_borrowed(object.as_ptr());
    }
    items.into_list(py)
}
