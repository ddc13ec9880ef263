//! A cursor over record data: bounds-checked bytes and zigzag varints.
//!
//! Varints decode exactly like the Python twin (`records_v2.read_varint_slow`): up to ten bytes,
//! so up to 70 bits, which is why the wide form returns `i128`.

use crate::errors::{corrupt, DecodeError, Result};

#[cold]
pub fn truncated() -> DecodeError {
    corrupt("record data is truncated or malformed (index out of range)")
}

pub struct Reader<'a> {
    buf: &'a [u8],
    pub pos: usize,
}

#[inline(always)]
fn zigzag(raw: u128) -> i128 {
    let value = raw as i128;
    (value >> 1) ^ -(value & 1)
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    #[inline(always)]
    pub fn peek(&self) -> Result<u8> {
        self.buf.get(self.pos).copied().ok_or_else(truncated)
    }

    /// Move past `count` bytes without reading them (the position may pass the end; the next
    /// read then fails).
    #[inline(always)]
    pub fn skip(&mut self, count: usize) {
        self.pos = self.pos.saturating_add(count);
    }

    /// The range of the next `size` bytes, cut at the end of the data like a Python slice; the
    /// position moves by `size` regardless (so a cut field fails a later read or the record-end
    /// check).
    #[inline(always)]
    pub fn take_span(&mut self, size: usize) -> (usize, usize) {
        let stop = self.pos.saturating_add(size);
        let low = self.pos.min(self.buf.len());
        let high = stop.min(self.buf.len());
        self.pos = stop;
        (low, high)
    }

    /// Bytes located with `take_span`.
    pub fn slice(&self, range: std::ops::Range<usize>) -> &'a [u8] {
        &self.buf[range]
    }

    /// A zigzag varint of up to ten bytes, at full width.
    #[inline(always)]
    pub fn varint_wide(&mut self) -> Result<i128> {
        let first = self.peek()?;
        if first < 0x80 {
            self.pos += 1;
            return Ok(zigzag(u128::from(first)));
        }
        self.varint_slow()
    }

    /// A zigzag varint clamped into i64 (for lengths and counts: a clamped value is as wrong as
    /// the real one, and fails the same checks).
    #[inline(always)]
    pub fn varint(&mut self) -> Result<i64> {
        let value = self.varint_wide()?;
        Ok(value.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
    }

    #[inline(never)]
    fn varint_slow(&mut self) -> Result<i128> {
        let mut raw: u128 = 0;
        let mut shift = 0u32;
        loop {
            let byte = self.peek()?;
            self.pos += 1;
            raw |= u128::from(byte & 0x7F) << shift;
            if byte < 0x80 {
                return Ok(zigzag(raw));
            }
            shift += 7;
            if shift > 63 {
                return Err(corrupt("varint longer than 10 bytes"));
            }
        }
    }
}
