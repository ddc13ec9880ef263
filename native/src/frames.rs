//! `FrameBuffer(size)`: a fresh `bytes` object of `size` bytes that a socket receives a response
//! frame straight into, through the buffer protocol (`memoryview(buffer)` is writable), so the
//! decoders read the very bytes the kernel wrote: no intermediate buffer, no resize, no copy.
//!
//! The C API allows filling a new bytes object before anyone else sees it. `take()` hands it out
//! once, when full; after that the buffer refuses new views. A view taken before (the transport's,
//! until its read callback returns) keeps the FrameBuffer and so the bytes alive, and is not
//! written through again.

use std::os::raw::c_int;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::reader::Frame;

#[pyclass(module = "aiokafka_lite._native")]
pub struct FrameBuffer {
    bytes: Py<PyBytes>,
    len: ffi::Py_ssize_t,
    taken: bool,
}

#[pymethods]
impl FrameBuffer {
    #[new]
    fn new(py: Python<'_>, size: usize) -> PyResult<Self> {
        let len = ffi::Py_ssize_t::try_from(size)
            .map_err(|_| PyValueError::new_err(format!("a {size}-byte frame is too large")))?;
        // SAFETY: a NULL source asks for an uninitialised bytes object of `len` bytes, which is
        // filled through the buffer protocol before `take()` shares it.
        let bytes = unsafe {
            Bound::from_owned_ptr_or_err(py, ffi::PyBytes_FromStringAndSize(std::ptr::null(), len))?
        };
        Ok(FrameBuffer {
            bytes: bytes.downcast_into::<PyBytes>()?.unbind(),
            len,
            taken: false,
        })
    }

    fn __len__(&self) -> usize {
        self.len as usize
    }

    /// The filled bytes object, once.
    fn take(&mut self, py: Python<'_>) -> PyResult<Py<PyBytes>> {
        if self.taken {
            return Err(PyBufferError::new_err("the frame was taken already"));
        }
        self.taken = true;
        Ok(self.bytes.clone_ref(py))
    }

    unsafe fn __getbuffer__(
        slf: PyRefMut<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if slf.taken {
            return Err(PyBufferError::new_err("the frame was taken already"));
        }
        let data = ffi::PyBytes_AsString(slf.bytes.as_ptr());
        if data.is_null() {
            return Err(PyErr::fetch(slf.py()));
        }
        let owner = slf.as_ptr();
        // SAFETY: `data` stays valid while this FrameBuffer lives, and the view holds a reference
        // to it (PyBuffer_FillInfo increments `owner`); readonly = 0: the view is writable.
        if ffi::PyBuffer_FillInfo(view, owner, data.cast(), slf.len, 0, flags) != 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }
}

/// `(frame, start)` when `view` is a contiguous byte view into a frame (`bytes` or a reader
/// `Frame`; `view == frame[start:start + len(view)]`), else None: lets a fetch response's records
/// be decoded in place, from the frame and an offset, instead of copied out of the view.
#[pyfunction]
pub fn view_in_bytes<'py>(
    py: Python<'py>,
    view: &Bound<'py, PyAny>,
) -> PyResult<Option<(Bound<'py, PyAny>, usize)>> {
    let Ok(base) = view.getattr("obj") else {
        return Ok(None);
    };
    let Some(frame) = FrameRef::of(&base) else {
        return Ok(None);
    };
    let buffer = PyBuffer::<u8>::get(view)?;
    if !buffer.is_c_contiguous() {
        return Ok(None);
    }
    let whole = frame.bytes(py);
    let start = (buffer.buf_ptr() as usize).wrapping_sub(whole.as_ptr() as usize);
    let fits = start <= whole.len() && buffer.len_bytes() <= whole.len() - start;
    buffer.release(py);
    Ok(fits.then_some((base, start)))
}

/// A response frame the decoders read in place: a `bytes` object (received through `FrameBuffer`)
/// or a `Frame` the reader thread filled.
pub enum FrameRef {
    Bytes(Py<PyBytes>),
    Received(Py<Frame>),
}

impl FrameRef {
    /// `buf` as a frame, or None for any other type.
    pub fn of(buf: &Bound<'_, PyAny>) -> Option<FrameRef> {
        if let Ok(bytes) = buf.downcast::<PyBytes>() {
            return Some(FrameRef::Bytes(bytes.clone().unbind()));
        }
        buf.downcast::<Frame>()
            .ok()
            .map(|frame| FrameRef::Received(frame.clone().unbind()))
    }

    pub fn clone_ref(&self, py: Python<'_>) -> FrameRef {
        match self {
            FrameRef::Bytes(bytes) => FrameRef::Bytes(bytes.clone_ref(py)),
            FrameRef::Received(frame) => FrameRef::Received(frame.clone_ref(py)),
        }
    }

    pub fn bytes<'a>(&'a self, py: Python<'_>) -> &'a [u8] {
        match self {
            FrameRef::Bytes(bytes) => bytes.as_bytes(py),
            FrameRef::Received(frame) => frame.get().data(),
        }
    }
}
