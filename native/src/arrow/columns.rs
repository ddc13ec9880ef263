//! Column builders: variable-size binary/utf8 (with 32- or 64-bit offsets) and Python sequences read
//! without creating a Python object per record.

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::ffi as pyffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};
use pyo3::Borrowed;

use super::ffi::{Buffer, Column};

/// An empty Vec with room for `capacity` items. A large one asks the kernel (Linux) for transparent
/// huge pages before its memory is first touched: filling a fresh ~100 MB buffer otherwise takes a
/// page fault per 4 KiB, which cost as much as the rest of the build. Only advice: where huge pages
/// are off, nothing changes; the memory is still freed with the Vec.
pub fn vec_for<T>(capacity: usize) -> Vec<T> {
    let vec = Vec::with_capacity(capacity);
    advise_huge_pages(
        vec.as_ptr() as usize,
        capacity.saturating_mul(size_of::<T>()),
    );
    vec
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(start: usize, len: usize) {
    const HUGE_PAGE: usize = 2 << 20;
    const MADV_HUGEPAGE: std::ffi::c_int = 14;
    extern "C" {
        fn madvise(
            addr: *mut std::ffi::c_void,
            len: usize,
            advice: std::ffi::c_int,
        ) -> std::ffi::c_int;
    }
    if len < 2 * HUGE_PAGE {
        return;
    }
    // Only the whole huge pages inside the allocation: the advice never reaches memory not ours.
    let (begin, end) = (
        start.next_multiple_of(HUGE_PAGE),
        (start + len) / HUGE_PAGE * HUGE_PAGE,
    );
    if end > begin {
        // SAFETY: the range lies inside this process's live allocation; MADV_HUGEPAGE changes no
        // contents, and a failure (e.g. THP not built into the kernel) only leaves the advice unused.
        unsafe { madvise(begin as *mut std::ffi::c_void, end - begin, MADV_HUGEPAGE) };
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_start: usize, _len: usize) {}

/// Offsets of a variable-size column: 32-bit ("z"/"u") while the data fits, else 64-bit ("Z"/"U").
enum Offsets {
    Small(Vec<i32>),
    Large(Vec<i64>),
}

/// Builds a binary or utf8 column; the validity bitmap exists only once a null was pushed.
pub struct VarBuilder {
    offsets: Offsets,
    data: Vec<u8>,
    validity: Option<Vec<u8>>,
    len: usize,
    nulls: usize,
}

impl VarBuilder {
    /// A builder for `rows` values of `bytes` bytes in all (only a capacity hint, except that it
    /// picks 64-bit offsets when more than `i32::MAX`).
    pub fn new(rows: usize, bytes: usize) -> VarBuilder {
        let mut offsets = if bytes > i32::MAX as usize {
            Offsets::Large(vec_for(rows + 1))
        } else {
            Offsets::Small(vec_for(rows + 1))
        };
        match &mut offsets {
            Offsets::Small(v) => v.push(0),
            Offsets::Large(v) => v.push(0),
        }
        VarBuilder {
            offsets,
            data: vec_for(bytes),
            validity: None,
            len: 0,
            nulls: 0,
        }
    }

    pub fn push(&mut self, value: Option<&[u8]>) {
        if let Some(bytes) = value {
            self.data.extend_from_slice(bytes);
        } else {
            self.nulls += 1;
        }
        self.push_validity(value.is_some());
        self.push_offset();
        self.len += 1;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    fn push_offset(&mut self) {
        let end = self.data.len();
        if let Offsets::Small(small) = &mut self.offsets {
            match i32::try_from(end) {
                Ok(end) => return small.push(end),
                Err(_) => {
                    self.offsets = Offsets::Large(small.iter().map(|&o| i64::from(o)).collect())
                }
            }
        }
        if let Offsets::Large(large) = &mut self.offsets {
            large.push(end as i64);
        }
    }

    fn push_validity(&mut self, valid: bool) {
        let i = self.len;
        match (&mut self.validity, valid) {
            (None, true) => {}
            (None, false) => {
                // Every value before this one was valid: bits 0..i set, bit i clear.
                let mut bits = vec![0xFF_u8; i / 8];
                bits.push((1_u8 << (i % 8)) - 1);
                self.validity = Some(bits);
            }
            (Some(bits), valid) => {
                if i.is_multiple_of(8) {
                    bits.push(0);
                }
                if valid {
                    bits[i / 8] |= 1 << (i % 8);
                }
            }
        }
    }

    /// The column and whether it has 64-bit offsets.
    pub fn finish(self) -> (Column, bool) {
        let (offsets, large) = match self.offsets {
            Offsets::Small(v) => (Buffer::I32(v), false),
            Offsets::Large(v) => (Buffer::I64(v), true),
        };
        let column = Column {
            length: self.len,
            null_count: self.nulls,
            buffers: vec![
                self.validity.map(Buffer::Bytes),
                Some(offsets),
                Some(Buffer::Bytes(self.data)),
            ],
            children: Vec::new(),
        };
        (column, large)
    }
}

/// `seq` as a list (itself when it is one), for the loops below.
pub fn as_list<'py>(seq: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
    match seq.downcast::<PyList>() {
        Ok(list) => Ok(list.clone()),
        Err(_) => PyList::new(seq.py(), seq.try_iter()?.collect::<PyResult<Vec<_>>>()?),
    }
}

fn range_start_step(seq: &Bound<'_, PyAny>) -> PyResult<Option<(i64, i64)>> {
    // SAFETY: PyRange_Type is a static type object; only its address is read.
    let is_range = unsafe { pyffi::PyRange_Check(seq.as_ptr()) } != 0;
    if !is_range {
        return Ok(None);
    }
    let len = seq.len()?;
    if len > 0 {
        seq.get_item(len - 1)?.extract::<i64>()?; // the last value must fit too
    }
    Ok(Some((
        seq.getattr("start")?.extract()?,
        seq.getattr("step")?.extract()?,
    )))
}

/// Appends the integers of `seq` (a range is expanded without touching its items).
pub fn extend_i64(out: &mut Vec<i64>, seq: &Bound<'_, PyAny>) -> PyResult<()> {
    if let Some((start, step)) = range_start_step(seq)? {
        let len = seq.len()? as i64;
        out.extend((0..len).map(|i| start + i * step));
        return Ok(());
    }
    let list = as_list(seq)?;
    out.reserve(list.len());
    // `[t] * n` repeats one object: its value is read once.
    let mut last: (*mut pyffi::PyObject, i64) = (std::ptr::null_mut(), 0);
    for_each_borrowed(&list, |item| {
        if item.as_ptr() != last.0 {
            // SAFETY: only reads the type of a live object.
            if unsafe { pyffi::PyLong_CheckExact(item.as_ptr()) } != 0 {
                last = (item.as_ptr(), item.extract::<i64>()?);
            } else {
                // `__index__` may run Python code: hold a reference, and cache nothing.
                last = (std::ptr::null_mut(), item.to_owned().extract::<i64>()?);
            }
        }
        out.push(last.1);
        Ok(())
    })
}

/// Calls `f` with each item of `list`, borrowed: no reference counting per item. `f` must not run
/// Python code while it uses the item (bytes and exact-int reads do not).
fn for_each_borrowed<'py>(
    list: &Bound<'py, PyList>,
    mut f: impl FnMut(Borrowed<'_, 'py, PyAny>) -> PyResult<()>,
) -> PyResult<()> {
    for index in 0..list.len() {
        // SAFETY: PyList_GetItem checks the index and returns a borrowed reference or NULL with an
        // IndexError set; the list outlives this loop.
        let item = unsafe {
            Borrowed::from_ptr_or_err(
                list.py(),
                pyffi::PyList_GetItem(list.as_ptr(), index as pyffi::Py_ssize_t),
            )?
        };
        f(item)?;
    }
    Ok(())
}

fn overflow(what: &str) -> PyErr {
    PyOverflowError::new_err(format!(
        "{what}: more than 2**31-1 entries in one Arrow batch"
    ))
}

/// `n` as an i32 list offset.
pub fn list_offset(n: usize) -> PyResult<i32> {
    i32::try_from(n).map_err(|_| overflow("headers"))
}

/// A `bytes | None` item as a byte slice; anything else is a TypeError naming the column.
pub fn bytes_or_none<'a>(item: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Option<&'a [u8]>> {
    if item.is_none() {
        return Ok(None);
    }
    match item.downcast::<PyBytes>() {
        Ok(bytes) => Ok(Some(bytes.as_bytes())),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{what} must be bytes or None, not {}",
            item.get_type().name()?
        ))),
    }
}

/// A header key as UTF-8 bytes; anything but a str (None included) is a TypeError.
pub fn header_key<'a>(item: &'a Bound<'_, PyAny>) -> PyResult<&'a [u8]> {
    match item.downcast::<PyString>() {
        Ok(key) => Ok(key.to_str()?.as_bytes()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "header keys must be str, not {}",
            item.get_type().name()?
        ))),
    }
}

/// The bytes in the `bytes | None` items of `list`.
pub fn list_bytes(list: &Bound<'_, PyList>, what: &str) -> PyResult<usize> {
    let mut bytes = 0_usize;
    for_each_borrowed(list, |item| {
        bytes += bytes_or_none(&item, what)?.map_or(0, <[u8]>::len);
        Ok(())
    })?;
    Ok(bytes)
}

/// Appends the `bytes | None` items of `list`.
pub fn push_list(builder: &mut VarBuilder, list: &Bound<'_, PyList>, what: &str) -> PyResult<()> {
    for_each_borrowed(list, |item| {
        builder.push(bytes_or_none(&item, what)?);
        Ok(())
    })
}
