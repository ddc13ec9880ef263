//! The batch as a one-batch `ArrowArrayStream` (Arrow C stream interface), in a PyCapsule
//! "arrow_array_stream" (Arrow PyCapsule interface), for consumers that take streams only.
//!
//! `get_next` hands out the batch once, then the end of the stream (an array whose `release` is
//! NULL) on every later call. The stream shares the batch's buffers (an `Arc`); the first `get_next`
//! moves that share into the exported array, so the stream holds no buffers after it. Callbacks may
//! run on any thread, never panic across the C boundary, and report a failure as `EIO` with a
//! message from `get_last_error`.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{null, null_mut};
use std::sync::Arc;

use pyo3::ffi as pyffi;
use pyo3::prelude::*;

use super::ffi::{export_array, export_schema, ArrowArray, ArrowSchema, Column, Field};
use crate::errors::panic_message;

const STREAM_CAPSULE: &CStr = c"arrow_array_stream";
const EIO: c_int = 5;

/// `struct ArrowArrayStream` of the C stream interface.
#[repr(C)]
pub struct ArrowArrayStream {
    get_schema: Option<unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowSchema) -> c_int>,
    get_next: Option<unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowArray) -> c_int>,
    get_last_error: Option<unsafe extern "C" fn(*mut ArrowArrayStream) -> *const c_char>,
    release: Option<unsafe extern "C" fn(*mut ArrowArrayStream)>,
    private_data: *mut c_void,
}

struct StreamPrivate {
    schema: Arc<Field>,
    /// The batch until `get_next` hands it out.
    data: Option<Arc<Column>>,
    last_error: Option<CString>,
}

fn new_stream(schema: &Arc<Field>, data: &Arc<Column>) -> ArrowArrayStream {
    let private = Box::new(StreamPrivate {
        schema: Arc::clone(schema),
        data: Some(Arc::clone(data)),
        last_error: None,
    });
    ArrowArrayStream {
        get_schema: Some(get_schema),
        get_next: Some(get_next),
        get_last_error: Some(get_last_error),
        release: Some(release_stream),
        private_data: Box::into_raw(private).cast(),
    }
}

/// Runs `body` on the stream's private data: 0, or `EIO` with the panic kept for `get_last_error`.
///
/// # Safety
/// `stream` is a live stream made by `new_stream` and not released.
unsafe fn call(
    stream: *mut ArrowArrayStream,
    name: &str,
    body: impl FnOnce(&mut StreamPrivate),
) -> c_int {
    let private = &mut *(*stream).private_data.cast::<StreamPrivate>();
    match catch_unwind(AssertUnwindSafe(|| body(private))) {
        Ok(()) => 0,
        Err(payload) => {
            let message = format!(
                "aiokafka_lite._native stream {name} failed: {}",
                panic_message(payload.as_ref())
            );
            private.last_error = CString::new(message.replace('\0', " ")).ok();
            EIO
        }
    }
}

unsafe extern "C" fn get_schema(stream: *mut ArrowArrayStream, out: *mut ArrowSchema) -> c_int {
    call(stream, "get_schema", |private| {
        out.write(export_schema(&private.schema))
    })
}

unsafe extern "C" fn get_next(stream: *mut ArrowArrayStream, out: *mut ArrowArray) -> c_int {
    call(stream, "get_next", |private| match private.data.take() {
        Some(data) => out.write(export_array(&data, &data)),
        None => out.write(ArrowArray::end_of_stream()),
    })
}

unsafe extern "C" fn get_last_error(stream: *mut ArrowArrayStream) -> *const c_char {
    let private = &*(*stream).private_data.cast::<StreamPrivate>();
    private.last_error.as_ref().map_or(null(), |m| m.as_ptr())
}

unsafe extern "C" fn release_stream(stream: *mut ArrowArrayStream) {
    let Some(stream) = stream.as_mut() else {
        return;
    };
    if stream.release.is_none() {
        return;
    }
    drop(Box::from_raw(stream.private_data.cast::<StreamPrivate>()));
    stream.private_data = null_mut();
    stream.release = None;
}

/// Capsule destructor: releases the stream unless a consumer moved it out, then frees its memory.
unsafe extern "C" fn drop_stream_capsule(capsule: *mut pyffi::PyObject) {
    let stream =
        pyffi::PyCapsule_GetPointer(capsule, STREAM_CAPSULE.as_ptr()).cast::<ArrowArrayStream>();
    if stream.is_null() {
        pyffi::PyErr_Clear();
        return;
    }
    release_stream(stream);
    drop(Box::from_raw(stream));
}

/// A PyCapsule "arrow_array_stream" of a stream holding the one batch `data` of schema `schema`.
pub fn stream_capsule<'py>(
    py: Python<'py>,
    schema: &Arc<Field>,
    data: &Arc<Column>,
) -> PyResult<Bound<'py, PyAny>> {
    let stream = Box::into_raw(Box::new(new_stream(schema, data)));
    // SAFETY: the capsule takes ownership of `stream`; on failure it is released and freed here.
    unsafe {
        let capsule = pyffi::PyCapsule_New(
            stream.cast(),
            STREAM_CAPSULE.as_ptr(),
            Some(drop_stream_capsule),
        );
        if capsule.is_null() {
            release_stream(stream);
            drop(Box::from_raw(stream));
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, capsule))
    }
}
