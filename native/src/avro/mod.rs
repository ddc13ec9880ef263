//! Avro values in Confluent's wire format decoded straight into one Arrow column, with no Python
//! object per value.
//!
//! Python resolves the writer's schema against the reader's and hands over two descriptions as
//! nested tuples: `AvroShape`, the reader-side Arrow layout (`spec::Shape`), and one `AvroPlan` per
//! writer schema id, the program that decodes that writer's bytes into the layout (`spec::Op`),
//! checked against the shape once when it is built. `AvroArrowBuilder.decode` only runs programs:
//! a value that fails leaves nothing behind (its row is rolled back), and the caller learns which
//! value stopped the call and why from the status it returns.

mod builders;
mod decode;
mod spec;

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::arrow::ffi::Field;
use crate::arrow::ArrowRecords;
use crate::errors::guarded;
use builders::Builder;
use decode::{Budget, Reader};
use spec::{Op, Shape};

/// `decode`'s statuses.
const ALL_DONE: u8 = 0;
const UNKNOWN_SCHEMA_ID: u8 = 1;
const UNDECODABLE: u8 = 2;

/// Confluent's framing: magic byte 0, then a 4-byte big-endian schema id.
const HEADER_LEN: usize = 5;

/// The reader-side Arrow layout, parsed from `(kind, format, ...)` tuples.
#[pyclass(frozen, module = "aiokafka_lite._native")]
pub struct AvroShape {
    shape: Arc<Shape>,
}

#[pymethods]
impl AvroShape {
    #[new]
    fn new(shape: &Bound<'_, PyAny>) -> PyResult<AvroShape> {
        guarded(shape.py(), "AvroShape", || {
            Ok::<_, PyErr>(AvroShape {
                shape: Arc::new(spec::parse_shape(shape)?),
            })
        })
    }
}

/// One writer schema's decoding program, checked against the shape it writes into.
#[pyclass(frozen, module = "aiokafka_lite._native")]
pub struct AvroPlan {
    op: Arc<Op>,
    shape: Arc<Shape>,
}

#[pymethods]
impl AvroPlan {
    #[new]
    fn new(op: &Bound<'_, PyAny>, shape: PyRef<'_, AvroShape>) -> PyResult<AvroPlan> {
        guarded(op.py(), "AvroPlan", || {
            let parsed = spec::parse_op(op)?;
            spec::check(&parsed, &shape.shape, true, "value")?;
            Ok::<_, PyErr>(AvroPlan {
                op: Arc::new(parsed),
                shape: Arc::clone(&shape.shape),
            })
        })
    }
}

/// Appends decoded values to one nullable column named "value" of its shape.
#[pyclass(module = "aiokafka_lite._native")]
pub struct AvroArrowBuilder {
    shape: Arc<Shape>,
    field: Arc<Field>,
    root: Builder,
}

/// The schema id of a framed value, or why it is not one.
fn schema_id(value: &[u8]) -> Result<u32, String> {
    if value.len() < HEADER_LEN {
        return Err(format!("value too short: {} bytes", value.len()));
    }
    if value[0] != 0 {
        return Err(format!("unknown magic byte {}", value[0]));
    }
    Ok(u32::from_be_bytes([value[1], value[2], value[3], value[4]]))
}

impl AvroArrowBuilder {
    fn plan_for(&self, plans: &Bound<'_, PyDict>, id: u32) -> PyResult<Option<Arc<Op>>> {
        let Some(plan) = plans.get_item(id)? else {
            return Ok(None);
        };
        let plan = plan.downcast::<AvroPlan>()?.get();
        if !Arc::ptr_eq(&plan.shape, &self.shape) && *plan.shape != *self.shape {
            return Err(PyValueError::new_err(format!(
                "the plan for schema id {id} was built for another shape"
            )));
        }
        Ok(Some(Arc::clone(&plan.op)))
    }

    /// Appends one framed value's row.
    fn append(&mut self, value: &[u8], op: &Op) -> Result<(), String> {
        let mut reader = Reader::new(value, HEADER_LEN);
        let mut budget = Budget::for_payload(value.len() - HEADER_LEN);
        decode::decode(op, &mut reader, &mut self.root, &mut budget)?;
        match reader.remaining() {
            0 => Ok(()),
            left => Err(format!("{left} bytes left over after the value")),
        }
    }

    fn decode_range(
        &mut self,
        values: &Bound<'_, PyList>,
        start: usize,
        stop: usize,
        plans: &Bound<'_, PyDict>,
    ) -> PyResult<(usize, u8, String)> {
        let mut last_plan: Option<(u32, Arc<Op>)> = None;
        for index in start..stop {
            let (done, rows) = (index - start, self.root.len);
            let item = values.get_item(index)?;
            let result = if item.is_none() {
                self.root.push_null()
            } else {
                let value = item.downcast::<PyBytes>().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "values must be bytes or None, not {}",
                        item.get_type()
                    ))
                })?;
                let value = value.as_bytes();
                let id = match schema_id(value) {
                    Ok(id) => id,
                    Err(message) => return Ok((done, UNDECODABLE, message)),
                };
                let op = match &last_plan {
                    Some((last_id, op)) if *last_id == id => Arc::clone(op),
                    _ => match self.plan_for(plans, id)? {
                        Some(op) => {
                            last_plan = Some((id, Arc::clone(&op)));
                            op
                        }
                        None => return Ok((done, UNKNOWN_SCHEMA_ID, id.to_string())),
                    },
                };
                self.append(value, &op)
            };
            if let Err(message) = result {
                // Nothing of a failed row stays behind, whatever it had appended below the root.
                self.root.truncate(rows);
                return Ok((done, UNDECODABLE, message));
            }
        }
        Ok((stop - start, ALL_DONE, String::new()))
    }
}

#[pymethods]
impl AvroArrowBuilder {
    #[new]
    fn new(shape: PyRef<'_, AvroShape>) -> PyResult<AvroArrowBuilder> {
        guarded(shape.py(), "AvroArrowBuilder", || {
            Ok::<_, PyErr>(AvroArrowBuilder {
                shape: Arc::clone(&shape.shape),
                field: Arc::new(builders::field(&shape.shape, c"value", true)),
                root: Builder::new(&shape.shape, true),
            })
        })
    }

    /// Decodes `values[start:stop]` (each `bytes` or None) into `(done, status, message)`: status 0
    /// when all were appended; 1 when `values[start + done]` has a schema id not in `plans` (the
    /// message is the id); 2 when it could not be decoded (the message says why). The values before
    /// it were appended, and it was not. An item neither bytes nor None raises TypeError (the
    /// values before it stay appended).
    fn decode(
        &mut self,
        values: &Bound<'_, PyList>,
        start: isize,
        stop: isize,
        plans: &Bound<'_, PyDict>,
    ) -> PyResult<(usize, u8, String)> {
        guarded(values.py(), "AvroArrowBuilder.decode", || {
            let len = values.len();
            let (Ok(start), Ok(stop)) = (usize::try_from(start), usize::try_from(stop)) else {
                return Err(PyValueError::new_err("start and stop must not be negative"));
            };
            if start > stop || stop > len {
                return Err(PyValueError::new_err(format!(
                    "start {start} and stop {stop} are not a range of the {len} values"
                )));
            }
            self.decode_range(values, start, stop, plans)
        })
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        guarded(py, "AvroArrowBuilder.__len__", || {
            Ok::<_, PyErr>(self.root.len)
        })
    }

    /// The rows so far as one column; the builder is left empty, ready for more.
    fn finish(&mut self, py: Python<'_>) -> PyResult<ArrowRecords> {
        guarded(py, "AvroArrowBuilder.finish", || {
            Ok::<_, PyErr>(ArrowRecords::new(
                Arc::clone(&self.field),
                Arc::new(self.root.take()),
            ))
        })
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<AvroShape>()?;
    m.add_class::<AvroPlan>()?;
    m.add_class::<AvroArrowBuilder>()?;
    Ok(())
}
