//! The decoder's one error type, turned into the package's own exception classes at the boundary.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::PyType;

/// Why a batch could not be decoded; messages carry no topic/partition (Python adds the location).
#[derive(Debug)]
pub enum DecodeError {
    /// `aiokafka_lite.errors.CorruptRecordError`
    Corrupt(String),
    /// `aiokafka_lite.errors.UnsupportedCodecError`
    Unsupported(String),
    /// An error Python raised while the decoder built objects (e.g. MemoryError).
    Python(PyErr),
}

pub type Result<T> = std::result::Result<T, DecodeError>;

pub fn corrupt(message: impl Into<String>) -> DecodeError {
    DecodeError::Corrupt(message.into())
}

impl From<std::convert::Infallible> for DecodeError {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

impl From<PyErr> for DecodeError {
    fn from(err: PyErr) -> Self {
        DecodeError::Python(err)
    }
}

static CORRUPT: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static UNSUPPORTED: GILOnceCell<Py<PyType>> = GILOnceCell::new();
static NATIVE: GILOnceCell<Py<PyType>> = GILOnceCell::new();

fn error_class<'py>(
    py: Python<'py>,
    cell: &'static GILOnceCell<Py<PyType>>,
    name: &str,
) -> PyResult<Bound<'py, PyType>> {
    Ok(cell.import(py, "aiokafka_lite.errors", name)?.clone())
}

impl DecodeError {
    pub fn into_pyerr(self, py: Python<'_>) -> PyErr {
        let (cell, name, message) = match self {
            DecodeError::Python(err) => return err,
            DecodeError::Corrupt(m) => (&CORRUPT, "CorruptRecordError", m),
            DecodeError::Unsupported(m) => (&UNSUPPORTED, "UnsupportedCodecError", m),
        };
        match error_class(py, cell, name) {
            Ok(class) => PyErr::from_type(class, (message,)),
            Err(err) => err,
        }
    }
}

/// `aiokafka_lite.errors.NativeError(message)`: the extension failed (a bug, e.g. a caught panic).
pub fn native_error(py: Python<'_>, message: String) -> PyErr {
    match error_class(py, &NATIVE, "NativeError") {
        Ok(class) => PyErr::from_type(class, (message,)),
        Err(err) => err,
    }
}

/// The message of a caught panic's payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "panic".to_owned()
    }
}

/// An error that becomes a Python exception where the call returns to Python.
pub trait IntoPyException {
    fn into_exception(self, py: Python<'_>) -> PyErr;
}

impl IntoPyException for DecodeError {
    fn into_exception(self, py: Python<'_>) -> PyErr {
        self.into_pyerr(py)
    }
}

impl IntoPyException for PyErr {
    fn into_exception(self, _py: Python<'_>) -> PyErr {
        self
    }
}

/// Run `body` (the exported function `name`), turning its error into the package's exception and
/// any panic into `NativeError`: a panic never unwinds into Python.
pub fn guarded<T, E: IntoPyException>(
    py: Python<'_>,
    name: &str,
    body: impl FnOnce() -> std::result::Result<T, E>,
) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(err.into_exception(py)),
        Err(payload) => {
            let message = format!(
                "the native extension failed in {name}: {} (a bug in aiokafka-lite; \
                 AIOKAFKA_LITE_NO_NATIVE=1 selects the pure-Python path)",
                panic_message(payload.as_ref())
            );
            Err(native_error(py, message))
        }
    }
}
