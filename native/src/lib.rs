//! aiokafka-lite's native fast path, loaded as `aiokafka_lite._native`.
//!
//! The pure-Python modules stay the reference: every function here has a Python twin with the
//! same results and the same error types, and the tests run both.

use pyo3::prelude::*;

mod arrow;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    arrow::register(m)?;
    Ok(())
}
