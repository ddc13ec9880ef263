//! Runs a decoding program (`Op`) over one Avro binary value, appending to the builders of the
//! reader's layout. Errors are one-line messages (the row's status 2); nothing here panics on any
//! input, and no allocation grows with a count the input claims before its bytes are seen.

use super::builders::{offset, Builder, Data};
use super::spec::{Op, Step};

pub type Outcome<T> = Result<T, String>;

/// A cursor over one value; positions in messages count from the start of the framed value.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8], pos: usize) -> Reader<'a> {
        Reader { buf, pos }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    fn take(&mut self, len: usize, what: &str) -> Outcome<&'a [u8]> {
        if len > self.remaining() {
            return Err(format!("{what} at byte {} runs past the end", self.pos));
        }
        let bytes = &self.buf[self.pos..self.pos + len];
        self.pos += len;
        Ok(bytes)
    }

    #[inline]
    fn varint(&mut self) -> Outcome<u64> {
        let mut value = 0_u64;
        for index in 0..10 {
            let Some(&byte) = self.buf.get(self.pos + index) else {
                return Err(format!("varint at byte {} runs past the end", self.pos));
            };
            value |= u64::from(byte & 0x7F) << (7 * index);
            if byte & 0x80 == 0 {
                self.pos += index + 1;
                return Ok(value);
            }
        }
        Err(format!(
            "varint at byte {} is longer than 10 bytes",
            self.pos
        ))
    }

    /// A zigzag-encoded Avro int or long.
    #[inline]
    fn long(&mut self) -> Outcome<i64> {
        let raw = self.varint()?;
        Ok((raw >> 1) as i64 ^ -((raw & 1) as i64))
    }

    /// A length-prefixed byte string (Avro bytes and string).
    fn bytes(&mut self, what: &str) -> Outcome<&'a [u8]> {
        let at = self.pos;
        let len = self.long()?;
        let len =
            usize::try_from(len).map_err(|_| format!("{what} at byte {at} has length {len}"))?;
        self.take(len, what)
    }

    fn string(&mut self) -> Outcome<&'a [u8]> {
        let at = self.pos;
        let bytes = self.bytes("string")?;
        match std::str::from_utf8(bytes) {
            Ok(_) => Ok(bytes),
            Err(_) => Err(format!("string at byte {at} is not UTF-8")),
        }
    }

    /// An enum symbol's or union branch's index, below `count`.
    fn index(&mut self, what: &str, count: usize, unit: &str) -> Outcome<usize> {
        let index = self.long()?;
        match usize::try_from(index) {
            Ok(index) if index < count => Ok(index),
            _ => Err(format!("{what} {index} out of range ({count} {unit})")),
        }
    }
}

/// What one value may still append of items that take no bytes of its own (nulls in an array):
/// the only items whose count the input's length does not bound.
pub struct Budget {
    pub items_left: u64,
    pub payload_len: usize,
}

impl Budget {
    pub fn for_payload(payload_len: usize) -> Budget {
        Budget {
            items_left: 64 * payload_len as u64 + 1024,
            payload_len,
        }
    }
}

/// The item count of the next block of an array or map (0 at the end), bounded by the bytes left.
fn block_count(
    reader: &mut Reader<'_>,
    item_min_bytes: usize,
    budget: &mut Budget,
) -> Outcome<u64> {
    let at = reader.pos;
    let count = reader.long()?;
    if count < 0 {
        let size = reader.long()?;
        if size < 0 {
            return Err(format!("block at byte {at} has byte size {size}"));
        }
    }
    let count = count.unsigned_abs();
    if let Some(room) = reader.remaining().checked_div(item_min_bytes) {
        if count > room as u64 {
            return Err(format!(
                "block of {count} items at byte {at} does not fit the {} bytes left",
                reader.remaining()
            ));
        }
    } else if count > budget.items_left {
        return Err(format!(
            "too many items for the value's {} bytes",
            budget.payload_len
        ));
    } else {
        budget.items_left -= count;
    }
    Ok(count)
}

fn mismatch() -> String {
    // AvroPlan's check makes this unreachable; an error rather than a panic all the same.
    "internal error: the op does not fit its column".to_owned()
}

/// Sign-extends big-endian two's complement `bytes` into `halves` little-endian i128s.
fn push_decimal(bytes: &[u8], halves: usize, precision: u32, out: &mut Vec<i128>) -> Outcome<()> {
    let width = halves * 16;
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let fill = if negative { 0xFF } else { 0x00 };
    let (extra, kept) = bytes.split_at(bytes.len().saturating_sub(width));
    let kept_sign = kept.first().is_some_and(|b| b & 0x80 != 0);
    if extra.iter().any(|&b| b != fill) || (!extra.is_empty() && kept_sign != negative) {
        return Err(format!(
            "decimal of {} bytes does not fit {width} bytes",
            bytes.len()
        ));
    }
    let mut le = [fill; 32];
    for (i, &b) in kept.iter().rev().enumerate() {
        le[i] = b;
    }
    let low = i128::from_le_bytes(le[..16].try_into().unwrap_or_default());
    if halves == 1 {
        let limit = 10_i128.checked_pow(precision).unwrap_or(i128::MAX);
        if low.unsigned_abs() >= limit.unsigned_abs() {
            return Err(format!("decimal {low} exceeds precision {precision}"));
        }
        out.push(low);
    } else {
        out.push(low);
        out.push(i128::from_le_bytes(le[16..].try_into().unwrap_or_default()));
    }
    Ok(())
}

/// Decodes one value of `op` from `reader` into `target`.
pub fn decode(
    op: &Op,
    reader: &mut Reader<'_>,
    target: &mut Builder,
    budget: &mut Budget,
) -> Outcome<()> {
    match (op, &mut target.data) {
        (Op::Null, _) => return target.push_null(),
        (Op::Bool, Data::Bool(bits)) => {
            let set = reader.take(1, "boolean")?[0] != 0;
            if target.len.is_multiple_of(8) {
                bits.push(0);
            }
            if set {
                bits[target.len / 8] |= 1 << (target.len % 8);
            }
        }
        (Op::Int | Op::Long, data) => {
            let value = reader.long()?;
            match data {
                Data::I32(v) => {
                    v.push(i32::try_from(value).map_err(|_| format!("int {value} out of range"))?)
                }
                Data::I64(v) => v.push(value),
                Data::F32(v) => v.push(value as f32),
                Data::F64(v) => v.push(value as f64),
                _ => return Err(mismatch()),
            }
        }
        (Op::Float, data) => {
            let raw = reader.take(4, "float")?;
            let value = f32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]);
            match data {
                Data::F32(v) => v.push(value),
                Data::F64(v) => v.push(f64::from(value)),
                _ => return Err(mismatch()),
            }
        }
        (Op::Double, Data::F64(v)) => {
            let raw = reader.take(8, "double")?;
            let mut le = [0_u8; 8];
            le.copy_from_slice(raw);
            v.push(f64::from_le_bytes(le));
        }
        (Op::Bytes, Data::Var(var)) => {
            let bytes = if var.utf8 {
                reader.string()?
            } else {
                reader.bytes("bytes")?
            };
            var.push(bytes)?;
        }
        (Op::String, Data::Var(var)) => var.push(reader.string()?)?,
        (Op::Fixed(size), Data::Fixed { bytes, .. }) => {
            bytes.extend_from_slice(reader.take(*size, "fixed")?)
        }
        (
            Op::DecimalBytes | Op::DecimalFixed(_),
            Data::Decimal {
                halves,
                precision,
                values,
            },
        ) => {
            let raw = match op {
                Op::DecimalFixed(size) => reader.take(*size, "decimal")?,
                _ => reader.bytes("decimal")?,
            };
            push_decimal(raw, *halves, *precision, values)?;
        }
        (Op::Enum { symbols, names }, Data::Var(var)) => {
            let index = reader.index("enum index", names.len(), "symbols")?;
            match &symbols[index] {
                Some(symbol) => var.push(symbol)?,
                None => {
                    return Err(format!(
                        "writer symbol '{}' is not in the reader's enum",
                        names[index]
                    ))
                }
            }
        }
        (Op::Record(steps), Data::Struct(children)) => {
            for step in steps {
                match step {
                    Step::Field(index, op) => {
                        let child = children.get_mut(*index).ok_or_else(mismatch)?;
                        decode(op, reader, child, budget)?;
                    }
                    Step::Skip(op) => skip(op, reader, budget)?,
                    Step::Default(index, payload, op) => {
                        let child = children.get_mut(*index).ok_or_else(mismatch)?;
                        decode(op, &mut Reader::new(payload, 0), child, budget)
                            .map_err(|e| format!("in a reader field's default: {e}"))?;
                    }
                }
            }
        }
        (
            Op::Array {
                item: item_op,
                item_min_bytes,
            },
            Data::List { offsets, item },
        ) => {
            loop {
                let count = block_count(reader, *item_min_bytes, budget)?;
                if count == 0 {
                    break;
                }
                for _ in 0..count {
                    decode(item_op, reader, item, budget)?;
                }
            }
            offsets.push(offset(item.len)?);
        }
        (
            Op::Map(value_op),
            Data::Map {
                offsets,
                keys,
                values,
            },
        ) => {
            loop {
                let count = block_count(reader, 1, budget)?;
                if count == 0 {
                    break;
                }
                for _ in 0..count {
                    keys.push(reader.string()?)?;
                    decode(value_op, reader, values, budget)?;
                }
            }
            offsets.push(offset(keys.len())?);
        }
        (Op::Union(branches), _) => {
            let index = reader.index("union branch", branches.len(), "branches")?;
            return decode(&branches[index], reader, target, budget);
        }
        (Op::Fail(message), _) => return Err(message.clone()),
        _ => return Err(mismatch()),
    }
    target.mark_valid();
    Ok(())
}

/// Consumes one value of `op` without keeping it (a writer field the reader does not have).
pub fn skip(op: &Op, reader: &mut Reader<'_>, budget: &mut Budget) -> Outcome<()> {
    match op {
        Op::Null => {}
        Op::Bool => {
            reader.take(1, "boolean")?;
        }
        Op::Int | Op::Long => {
            reader.long()?;
        }
        Op::Float => {
            reader.take(4, "float")?;
        }
        Op::Double => {
            reader.take(8, "double")?;
        }
        Op::Bytes | Op::DecimalBytes => {
            reader.bytes("bytes")?;
        }
        Op::String => {
            reader.string()?;
        }
        Op::Fixed(size) | Op::DecimalFixed(size) => {
            reader.take(*size, "fixed")?;
        }
        Op::Enum { names, .. } => {
            reader.index("enum index", names.len(), "symbols")?;
        }
        Op::Record(steps) => {
            for step in steps {
                match step {
                    Step::Field(_, op) | Step::Skip(op) => skip(op, reader, budget)?,
                    Step::Default(..) => {}
                }
            }
        }
        Op::Array {
            item,
            item_min_bytes,
        } => loop {
            let count = block_count(reader, *item_min_bytes, budget)?;
            if count == 0 {
                break;
            }
            for _ in 0..count {
                skip(item, reader, budget)?;
            }
        },
        Op::Map(value) => loop {
            let count = block_count(reader, 1, budget)?;
            if count == 0 {
                break;
            }
            for _ in 0..count {
                reader.string()?;
                skip(value, reader, budget)?;
            }
        },
        Op::Union(branches) => {
            let index = reader.index("union branch", branches.len(), "branches")?;
            skip(&branches[index], reader, budget)?;
        }
        Op::Fail(message) => return Err(message.clone()),
    }
    Ok(())
}
