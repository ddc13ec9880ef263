//! Column builders for one `Shape` tree: append a value, a null or an empty slot, truncate back to
//! a row count (a failed value leaves nothing behind), and hand the columns over as Arrow.
//!
//! A node's children hold exactly what its rows point at (struct children one slot per row, list
//! and map children up to the last offset), so truncating a node truncates its children from its
//! own state alone, whatever a failed value had appended below it.

use std::ffi::CStr;

use super::spec::{Kind, Shape};
use crate::arrow::ffi::{Buffer, Column, Field};

/// Appends bit `index` (the next one) to a bitmap.
fn push_bit(bits: &mut Vec<u8>, index: usize, set: bool) {
    if index.is_multiple_of(8) {
        bits.push(0);
    }
    if set {
        bits[index / 8] |= 1 << (index % 8);
    }
}

/// Keeps the first `len` bits, clearing the rest of the last byte (later appends only set bits).
fn truncate_bits(bits: &mut Vec<u8>, len: usize) {
    bits.truncate(len.div_ceil(8));
    if !len.is_multiple_of(8) {
        if let Some(last) = bits.last_mut() {
            *last &= (1_u8 << (len % 8)) - 1;
        }
    }
}

fn set_bits(bits: &[u8]) -> usize {
    bits.iter().map(|b| b.count_ones() as usize).sum()
}

pub const TOO_LARGE: &str = "column too large";

/// An i32 offset, or the row fails: the 32-bit layouts end at 2**31-1.
pub fn offset(len: usize) -> Result<i32, String> {
    i32::try_from(len).map_err(|_| TOO_LARGE.to_owned())
}

/// Binary or utf8 values (the decoder validates what goes into a utf8 one).
pub struct VarData {
    pub offsets: Vec<i32>,
    pub bytes: Vec<u8>,
    pub utf8: bool,
}

impl VarData {
    fn new(utf8: bool) -> VarData {
        VarData {
            offsets: vec![0],
            bytes: Vec::new(),
            utf8,
        }
    }

    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn push(&mut self, value: &[u8]) -> Result<(), String> {
        let end = offset(self.bytes.len() + value.len())?;
        self.bytes.extend_from_slice(value);
        self.offsets.push(end);
        Ok(())
    }

    fn push_empty(&mut self) {
        self.offsets.push(self.offsets[self.offsets.len() - 1]);
    }

    fn truncate(&mut self, len: usize) {
        let len = len.min(self.len());
        self.offsets.truncate(len + 1);
        self.bytes.truncate(self.offsets[len] as usize);
    }

    fn take(&mut self) -> (Buffer, Buffer) {
        let taken = std::mem::replace(self, VarData::new(self.utf8));
        (Buffer::I32(taken.offsets), Buffer::Bytes(taken.bytes))
    }
}

pub enum Data {
    /// Arrow's null type: only a length.
    Null,
    Bool(Vec<u8>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Var(VarData),
    Fixed {
        size: usize,
        bytes: Vec<u8>,
    },
    /// `halves`: 1 for decimal128, 2 for decimal256 (low half first); `precision` bounds decimal128.
    Decimal {
        halves: usize,
        precision: u32,
        values: Vec<i128>,
    },
    Struct(Vec<Builder>),
    List {
        offsets: Vec<i32>,
        item: Box<Builder>,
    },
    Map {
        offsets: Vec<i32>,
        keys: VarData,
        values: Box<Builder>,
    },
}

pub struct Builder {
    pub nullable: bool,
    pub len: usize,
    /// One bit per row, kept only when the node is nullable.
    validity: Vec<u8>,
    pub data: Data,
}

impl Builder {
    pub fn new(shape: &Shape, nullable: bool) -> Builder {
        let data = match &shape.kind {
            Kind::Null => Data::Null,
            Kind::Bool => Data::Bool(Vec::new()),
            Kind::I32 => Data::I32(Vec::new()),
            Kind::I64 => Data::I64(Vec::new()),
            Kind::F32 => Data::F32(Vec::new()),
            Kind::F64 => Data::F64(Vec::new()),
            Kind::Var { utf8 } => Data::Var(VarData::new(*utf8)),
            Kind::Fixed(size) => Data::Fixed {
                size: *size,
                bytes: Vec::new(),
            },
            Kind::Decimal { wide, precision } => Data::Decimal {
                halves: if *wide { 2 } else { 1 },
                precision: *precision,
                values: Vec::new(),
            },
            Kind::Struct(children) => Data::Struct(
                children
                    .iter()
                    .map(|c| Builder::new(&c.shape, c.nullable))
                    .collect(),
            ),
            Kind::List(child) => Data::List {
                offsets: vec![0],
                item: Box::new(Builder::new(&child.shape, child.nullable)),
            },
            Kind::Map(child) => Data::Map {
                offsets: vec![0],
                keys: VarData::new(true),
                values: Box::new(Builder::new(&child.shape, child.nullable)),
            },
        };
        Builder {
            nullable,
            len: 0,
            validity: Vec::new(),
            data,
        }
    }

    /// Ends a row whose value the caller has appended to `data`.
    #[inline]
    pub fn mark_valid(&mut self) {
        if self.nullable {
            push_bit(&mut self.validity, self.len, true);
        }
        self.len += 1;
    }

    /// A null row (the plan's check guarantees the node is nullable, or of the null type).
    pub fn push_null(&mut self) -> Result<(), String> {
        self.push_zero_value()?;
        if self.nullable {
            push_bit(&mut self.validity, self.len, false);
        }
        self.len += 1;
        Ok(())
    }

    /// A row under a null parent: null where allowed, else a zero or empty valid value.
    fn push_empty(&mut self) -> Result<(), String> {
        if self.nullable {
            return self.push_null();
        }
        self.push_zero_value()?;
        self.len += 1;
        Ok(())
    }

    fn push_zero_value(&mut self) -> Result<(), String> {
        match &mut self.data {
            Data::Null => {}
            Data::Bool(bits) => push_bit(bits, self.len, false),
            Data::I32(v) => v.push(0),
            Data::I64(v) => v.push(0),
            Data::F32(v) => v.push(0.0),
            Data::F64(v) => v.push(0.0),
            Data::Var(var) => var.push_empty(),
            Data::Fixed { size, bytes } => bytes.resize(bytes.len() + *size, 0),
            Data::Decimal { halves, values, .. } => values.resize(values.len() + *halves, 0),
            Data::Struct(children) => {
                for child in children {
                    child.push_empty()?;
                }
            }
            Data::List { offsets, item } => offsets.push(offset(item.len)?),
            Data::Map { offsets, keys, .. } => offsets.push(offset(keys.len())?),
        }
        Ok(())
    }

    /// Drops every row from `len` on, here and below, and whatever a row that failed part-way had
    /// appended (a struct's children, a list's items past its last offset).
    pub fn truncate(&mut self, len: usize) {
        let len = len.min(self.len);
        self.len = len;
        truncate_bits(&mut self.validity, len);
        match &mut self.data {
            Data::Null => {}
            Data::Bool(bits) => truncate_bits(bits, len),
            Data::I32(v) => v.truncate(len),
            Data::I64(v) => v.truncate(len),
            Data::F32(v) => v.truncate(len),
            Data::F64(v) => v.truncate(len),
            Data::Var(var) => var.truncate(len),
            Data::Fixed { size, bytes } => bytes.truncate(len * *size),
            Data::Decimal { halves, values, .. } => values.truncate(len * *halves),
            Data::Struct(children) => children.iter_mut().for_each(|c| c.truncate(len)),
            Data::List { offsets, item } => {
                offsets.truncate(len + 1);
                item.truncate(offsets[len] as usize);
            }
            Data::Map {
                offsets,
                keys,
                values,
            } => {
                offsets.truncate(len + 1);
                keys.truncate(offsets[len] as usize);
                values.truncate(offsets[len] as usize);
            }
        }
    }

    /// The rows as an Arrow column; the builder is left empty.
    pub fn take(&mut self) -> Column {
        let len = std::mem::take(&mut self.len);
        let validity = std::mem::take(&mut self.validity);
        let nulls = if self.nullable {
            len - set_bits(&validity)
        } else {
            0
        };
        let validity = (nulls > 0).then_some(Buffer::Bytes(validity));
        let mut children = Vec::new();
        let buffers = match &mut self.data {
            Data::Null => {
                return Column {
                    length: len,
                    null_count: len,
                    buffers: Vec::new(),
                    children,
                }
            }
            Data::Bool(bits) => vec![validity, Some(Buffer::Bytes(std::mem::take(bits)))],
            Data::I32(v) => vec![validity, Some(Buffer::I32(std::mem::take(v)))],
            Data::I64(v) => vec![validity, Some(Buffer::I64(std::mem::take(v)))],
            Data::F32(v) => vec![validity, Some(Buffer::F32(std::mem::take(v)))],
            Data::F64(v) => vec![validity, Some(Buffer::F64(std::mem::take(v)))],
            Data::Var(var) => {
                let (offsets, bytes) = var.take();
                vec![validity, Some(offsets), Some(bytes)]
            }
            Data::Fixed { bytes, .. } => vec![validity, Some(Buffer::Bytes(std::mem::take(bytes)))],
            Data::Decimal { values, .. } => {
                vec![validity, Some(Buffer::I128(std::mem::take(values)))]
            }
            Data::Struct(builders) => {
                children = builders.iter_mut().map(Builder::take).collect();
                vec![validity]
            }
            Data::List { offsets, item } => {
                children.push(item.take());
                vec![
                    validity,
                    Some(Buffer::I32(std::mem::replace(offsets, vec![0]))),
                ]
            }
            Data::Map {
                offsets,
                keys,
                values,
            } => {
                let entries = keys.len();
                let (key_offsets, key_bytes) = keys.take();
                let keys = Column {
                    length: entries,
                    null_count: 0,
                    buffers: vec![None, Some(key_offsets), Some(key_bytes)],
                    children: Vec::new(),
                };
                children.push(Column {
                    length: entries,
                    null_count: 0,
                    buffers: vec![None],
                    children: vec![keys, values.take()],
                });
                vec![
                    validity,
                    Some(Buffer::I32(std::mem::replace(offsets, vec![0]))),
                ]
            }
        };
        Column {
            length: len,
            null_count: nulls,
            buffers,
            children,
        }
    }
}

/// The Arrow field of `shape` named `name`.
pub fn field(shape: &Shape, name: &CStr, nullable: bool) -> Field {
    let mut field = Field::new(name.to_owned(), shape.format.clone(), nullable);
    field.children = match &shape.kind {
        Kind::Struct(children) => children
            .iter()
            .map(|c| self::field(&c.shape, &c.name, c.nullable))
            .collect(),
        Kind::List(child) => vec![self::field(&child.shape, &child.name, child.nullable)],
        Kind::Map(child) => {
            let mut entries = Field::new(c"entries", c"+s", false);
            entries.children = vec![
                Field::new(c"key", c"u", false),
                self::field(&child.shape, &child.name, child.nullable),
            ];
            vec![entries]
        }
        _ => Vec::new(),
    };
    field
}
