//! aiokafka-lite's native fast path, loaded as `aiokafka_lite._native`.
//!
//! The pure-Python modules stay the reference: every decoding function here has a Python twin
//! with the same results and the same error types, and the tests run both. `reader.rs` receives
//! frames on one process-wide I/O thread; without it the asyncio reader does that job. No panic
//! crosses into Python: each exported function turns one into `NativeError` (`errors::guarded`),
//! and a panic while the I/O thread serves a reader is recorded as the reason that reader ended.

mod arrow;
mod avro;
mod compression;
mod decode;
mod errors;
mod frames;
mod iter;
mod objects;
mod raw;
mod reader;
mod varint;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::errors::{guarded, Result};

/// Decode one magic-v2, non-control batch occupying `buf[start:end]` into
/// `(offsets, timestamps, timestamp_type, keys, values, headers)`.
#[pyfunction]
fn decode_v2_batch<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyBytes>,
    start: usize,
    end: usize,
    check_crcs: bool,
    max_decompressed: usize,
) -> PyResult<Bound<'py, PyTuple>> {
    let data = buf.as_bytes();
    guarded(py, "decode_v2_batch", || {
        decode::within(data, start, end)?;
        decode::decode_batch(
            py,
            &data[start..],
            end - start,
            check_crcs,
            max_decompressed,
        )
    })
}

/// Panics inside the guard, to prove a panic surfaces as NativeError (tests only).
#[pyfunction]
fn _panic_probe(py: Python<'_>) -> PyResult<()> {
    guarded(py, "_panic_probe", || -> Result<()> { panic!("probe") })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    // A debug build decodes several times slower: the tests refuse one.
    m.add("DEBUG_BUILD", cfg!(debug_assertions))?;
    m.add_function(wrap_pyfunction!(decode_v2_batch, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_probe, m)?)?;
    m.add_function(wrap_pyfunction!(iter::iter_records, m)?)?;
    m.add_class::<iter::RecordIter>()?;
    arrow::register(m)?;
    avro::register(m)?;
    m.add_class::<raw::RawRecords>()?;
    m.add_class::<frames::FrameBuffer>()?;
    m.add_function(wrap_pyfunction!(frames::view_in_bytes, m)?)?;
    m.add_class::<reader::FrameReader>()?;
    m.add_class::<reader::Frame>()?;
    m.add_function(wrap_pyfunction!(raw::decode_v2_raw, m)?)?;
    Ok(())
}
