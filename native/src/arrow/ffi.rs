//! Arrays held in Rust memory and handed out through the Arrow C data interface.
//!
//! The structs below are the fixed ABI of <https://arrow.apache.org/docs/format/CDataInterface.html>;
//! the capsules follow the Arrow PyCapsule interface (names "arrow_schema" and "arrow_array"; the
//! one-batch stream "arrow_array_stream" is in `stream.rs`).
//!
//! Ownership: a `Column` tree is built once and never changed; exporting it gives every exported
//! `ArrowArray` node (the root and each child, which a consumer may move out and release on its own)
//! a clone of the `Arc` owning the tree, so the buffers are freed exactly once, when the last of the
//! Python object and the exported arrays lets go of them. Release callbacks never panic.

use std::borrow::Cow;
use std::ffi::{c_char, c_void, CStr};
use std::ptr::{null, null_mut};
use std::sync::Arc;

use pyo3::ffi as pyffi;
use pyo3::prelude::*;

const FLAG_NULLABLE: i64 = 2;
const SCHEMA_CAPSULE: &CStr = c"arrow_schema";
const ARRAY_CAPSULE: &CStr = c"arrow_array";

/// `struct ArrowSchema` of the C data interface.
#[repr(C)]
pub struct ArrowSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut ArrowSchema,
    dictionary: *mut ArrowSchema,
    release: Option<unsafe extern "C" fn(*mut ArrowSchema)>,
    private_data: *mut c_void,
}

/// `struct ArrowArray` of the C data interface.
#[repr(C)]
pub struct ArrowArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut ArrowArray,
    dictionary: *mut ArrowArray,
    release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
    private_data: *mut c_void,
}

impl ArrowArray {
    /// A released array: what `get_next` of a stream hands out at the end of the stream.
    pub(super) fn end_of_stream() -> ArrowArray {
        ArrowArray {
            length: 0,
            null_count: 0,
            offset: 0,
            n_buffers: 0,
            n_children: 0,
            buffers: null_mut(),
            children: null_mut(),
            dictionary: null_mut(),
            release: None,
            private_data: null_mut(),
        }
    }
}

/// One buffer, typed so that its memory is aligned for its elements.
pub enum Buffer {
    Bytes(Vec<u8>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    /// Decimal128 values, or decimal256 ones as two little-endian halves each.
    I128(Vec<i128>),
}

impl Buffer {
    fn as_ptr(&self) -> *const c_void {
        match self {
            Buffer::Bytes(v) => v.as_ptr().cast(),
            Buffer::I32(v) => v.as_ptr().cast(),
            Buffer::I64(v) => v.as_ptr().cast(),
            Buffer::F32(v) => v.as_ptr().cast(),
            Buffer::F64(v) => v.as_ptr().cast(),
            Buffer::I128(v) => v.as_ptr().cast(),
        }
    }
}

/// An array's data: its buffers in the layout's order (`None` for an absent validity bitmap).
pub struct Column {
    pub length: usize,
    pub null_count: usize,
    pub buffers: Vec<Option<Buffer>>,
    pub children: Vec<Column>,
}

impl Column {
    /// A fixed-width column without nulls.
    pub fn fixed(values: Buffer, length: usize) -> Column {
        Column {
            length,
            null_count: 0,
            buffers: vec![None, Some(values)],
            children: Vec::new(),
        }
    }
}

/// A field of the schema: names and formats are static C strings, or owned ones for schemas read at
/// run time (Avro field names).
pub struct Field {
    pub name: Cow<'static, CStr>,
    pub format: Cow<'static, CStr>,
    pub nullable: bool,
    pub children: Vec<Field>,
}

impl Field {
    pub fn new(
        name: impl Into<Cow<'static, CStr>>,
        format: impl Into<Cow<'static, CStr>>,
        nullable: bool,
    ) -> Field {
        Field {
            name: name.into(),
            format: format.into(),
            nullable,
            children: Vec::new(),
        }
    }
}

fn boxed_children<T>(items: Vec<T>) -> Box<[*mut T]> {
    items
        .into_iter()
        .map(|item| Box::into_raw(Box::new(item)))
        .collect()
}

fn children_ptr<T>(children: &mut [*mut T]) -> *mut *mut T {
    if children.is_empty() {
        null_mut()
    } else {
        children.as_mut_ptr()
    }
}

/// Owns the exported node's children and its strings: a consumer may keep the schema after the
/// `Field` it came from is gone.
struct SchemaPrivate {
    children: Box<[*mut ArrowSchema]>,
    name: Cow<'static, CStr>,
    format: Cow<'static, CStr>,
}

pub(super) fn export_schema(field: &Field) -> ArrowSchema {
    let children = boxed_children(field.children.iter().map(export_schema).collect());
    let mut private = Box::new(SchemaPrivate {
        children,
        name: field.name.clone(),
        format: field.format.clone(),
    });
    ArrowSchema {
        format: private.format.as_ptr(),
        name: private.name.as_ptr(),
        metadata: null(),
        flags: if field.nullable { FLAG_NULLABLE } else { 0 },
        n_children: private.children.len() as i64,
        children: children_ptr(&mut private.children),
        dictionary: null_mut(),
        release: Some(release_schema),
        private_data: Box::into_raw(private).cast(),
    }
}

unsafe extern "C" fn release_schema(schema: *mut ArrowSchema) {
    let Some(schema) = schema.as_mut() else {
        return;
    };
    if schema.release.is_none() {
        return;
    }
    let private = Box::from_raw(schema.private_data.cast::<SchemaPrivate>());
    for &child in private.children.iter() {
        if let Some(release) = (*child).release {
            release(child);
        }
        drop(Box::from_raw(child));
    }
    schema.private_data = null_mut();
    schema.release = None;
}

struct ArrayPrivate {
    _owner: Arc<Column>,
    buffers: Box<[*const c_void]>,
    children: Box<[*mut ArrowArray]>,
}

pub(super) fn export_array(owner: &Arc<Column>, column: &Column) -> ArrowArray {
    let buffers = column
        .buffers
        .iter()
        .map(|b| b.as_ref().map_or(null(), Buffer::as_ptr))
        .collect();
    let children = boxed_children(
        column
            .children
            .iter()
            .map(|c| export_array(owner, c))
            .collect(),
    );
    let mut private = Box::new(ArrayPrivate {
        _owner: Arc::clone(owner),
        buffers,
        children,
    });
    ArrowArray {
        length: column.length as i64,
        null_count: column.null_count as i64,
        offset: 0,
        n_buffers: private.buffers.len() as i64,
        n_children: private.children.len() as i64,
        buffers: private.buffers.as_mut_ptr(),
        children: children_ptr(&mut private.children),
        dictionary: null_mut(),
        release: Some(release_array),
        private_data: Box::into_raw(private).cast(),
    }
}

unsafe extern "C" fn release_array(array: *mut ArrowArray) {
    let Some(array) = array.as_mut() else { return };
    if array.release.is_none() {
        return;
    }
    let private = Box::from_raw(array.private_data.cast::<ArrayPrivate>());
    for &child in private.children.iter() {
        if let Some(release) = (*child).release {
            release(child);
        }
        drop(Box::from_raw(child));
    }
    drop(private); // drops this node's share of the buffers
    array.private_data = null_mut();
    array.release = None;
}

/// Capsule destructors: release the struct unless a consumer moved it out, then free its memory.
unsafe extern "C" fn drop_schema_capsule(capsule: *mut pyffi::PyObject) {
    let schema =
        pyffi::PyCapsule_GetPointer(capsule, SCHEMA_CAPSULE.as_ptr()).cast::<ArrowSchema>();
    if schema.is_null() {
        pyffi::PyErr_Clear();
        return;
    }
    release_schema(schema);
    drop(Box::from_raw(schema));
}

unsafe extern "C" fn drop_array_capsule(capsule: *mut pyffi::PyObject) {
    let array = pyffi::PyCapsule_GetPointer(capsule, ARRAY_CAPSULE.as_ptr()).cast::<ArrowArray>();
    if array.is_null() {
        pyffi::PyErr_Clear();
        return;
    }
    release_array(array);
    drop(Box::from_raw(array));
}

/// A PyCapsule "arrow_schema" holding `field` exported.
pub fn schema_capsule<'py>(py: Python<'py>, field: &Field) -> PyResult<Bound<'py, PyAny>> {
    let schema = Box::into_raw(Box::new(export_schema(field)));
    // SAFETY: the capsule takes ownership of `schema`; on failure it is released and freed here.
    unsafe {
        let capsule = pyffi::PyCapsule_New(
            schema.cast(),
            SCHEMA_CAPSULE.as_ptr(),
            Some(drop_schema_capsule),
        );
        if capsule.is_null() {
            release_schema(schema);
            drop(Box::from_raw(schema));
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, capsule))
    }
}

/// A PyCapsule "arrow_array" holding `data` exported (sharing its buffers, not copying them).
pub fn array_capsule<'py>(py: Python<'py>, data: &Arc<Column>) -> PyResult<Bound<'py, PyAny>> {
    let array = Box::into_raw(Box::new(export_array(data, data)));
    // SAFETY: as in `schema_capsule`.
    unsafe {
        let capsule = pyffi::PyCapsule_New(
            array.cast(),
            ARRAY_CAPSULE.as_ptr(),
            Some(drop_array_capsule),
        );
        if capsule.is_null() {
            release_array(array);
            drop(Box::from_raw(array));
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, capsule))
    }
}
