//! Batch decompression with a hard output bound: the twin of `aiokafka_lite/protocol/compression.py`.
//!
//! Every codec writes into a buffer that grows only up to `max + 1` bytes, so a bomb is reported
//! as corrupt instead of being allocated. The libraries are the ones cramjam (the Python path's
//! decompressor) wraps, so damaged input fails the same way with either decoder.

use std::io::Read;

use flate2::{Decompress, FlushDecompress, Status};

use crate::errors::{corrupt, DecodeError, Result};

const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_SIZE: usize = 16;
const MIN_GUESS: usize = 64 * 1024;
const LZ4_MAGIC: u32 = 0x184D_2204;

fn too_big(max: usize) -> DecodeError {
    corrupt(format!("decompressed batch exceeds {max} bytes"))
}

fn codec_name(codec: u8) -> String {
    match codec {
        0 => "none".to_owned(),
        1 => "gzip".to_owned(),
        2 => "snappy".to_owned(),
        3 => "lz4".to_owned(),
        4 => "zstd".to_owned(),
        other => format!("unknown codec {other}"),
    }
}

/// Decompress one batch body (codec from attributes & 7, not 0).
pub fn decompress(codec: u8, data: &[u8], max: usize) -> Result<Vec<u8>> {
    match codec {
        1 => gunzip(data, max),
        2 if data.starts_with(XERIAL_MAGIC) => xerial(data, max),
        2 => snappy_raw(data, max),
        3 => lz4_frames(data, max),
        4 => zstd_frames(data, max),
        other => Err(DecodeError::Unsupported(format!(
            "record batch uses {}, which this client cannot decode",
            codec_name(other)
        ))),
    }
}

/// The first buffer size to try: the declared size when known, else a guess; never above the bound.
fn first_capacity(hint: Option<usize>, input: usize, bound: usize) -> usize {
    hint.unwrap_or_else(|| MIN_GUESS.max(input.saturating_mul(4)))
        .min(bound)
}

/// The next buffer size after `current` filled up, never above `bound`.
fn grown(current: usize, bound: usize) -> usize {
    current.saturating_mul(2).max(MIN_GUESS).min(bound)
}

/// Read `reader` to its end, appending to `out`, failing once `out` would exceed `max` bytes.
fn read_bounded(
    reader: &mut impl Read,
    out: &mut Vec<u8>,
    max: usize,
    hint: Option<usize>,
    input: usize,
    name: &str,
) -> Result<()> {
    let bound = max.saturating_add(1);
    let mut filled = out.len();
    if filled >= bound {
        return Err(too_big(max));
    }
    let target = filled
        .saturating_add(first_capacity(hint, input, bound))
        .clamp(filled + 1, bound);
    out.resize(target, 0);
    loop {
        if filled == out.len() {
            if filled >= bound {
                return Err(too_big(max));
            }
            out.resize(grown(filled, bound), 0);
        }
        match reader.read(&mut out[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) => return Err(corrupt(format!("{name} data is corrupt: {err}"))),
        }
    }
    out.truncate(filled);
    Ok(())
}

fn gunzip(data: &[u8], max: usize) -> Result<Vec<u8>> {
    // Members follow each other; each starts with a gzip or a zlib header (Python's wbits=47).
    let mut out = Vec::new();
    let mut rest = data;
    loop {
        let gzip = rest.len() >= 2 && rest[0] == 0x1F && rest[1] == 0x8B;
        let mut inflater = if gzip {
            Decompress::new_gzip(15)
        } else {
            Decompress::new(true)
        };
        let ended = inflate_member(&mut inflater, rest, &mut out, max)?;
        if out.len() > max {
            return Err(too_big(max));
        }
        if !ended {
            return Err(corrupt("gzip stream is truncated"));
        }
        let used = usize::try_from(inflater.total_in())
            .unwrap_or(rest.len())
            .min(rest.len());
        rest = &rest[used..];
        if rest.is_empty() {
            return Ok(out);
        }
    }
}

/// Inflate one member into `out`, stopping once `out` holds more than `max` bytes;
/// true when the member's end was reached.
fn inflate_member(
    inflater: &mut Decompress,
    input: &[u8],
    out: &mut Vec<u8>,
    max: usize,
) -> Result<bool> {
    let bound = max.saturating_add(1);
    loop {
        let consumed = usize::try_from(inflater.total_in())
            .unwrap_or(input.len())
            .min(input.len());
        if out.len() == out.capacity() {
            if out.len() >= bound {
                return Ok(false);
            }
            let room = grown(out.capacity().max(input.len().saturating_mul(4)), bound) - out.len();
            out.reserve_exact(room.max(1));
        }
        let before = (inflater.total_in(), inflater.total_out());
        // decompress_vec writes at most into the spare capacity, which stays within `bound`.
        let status = inflater
            .decompress_vec(&input[consumed..], out, FlushDecompress::None)
            .map_err(|err| corrupt(format!("gzip data is corrupt: {err}")))?;
        if status == Status::StreamEnd {
            return Ok(true);
        }
        let stalled = before == (inflater.total_in(), inflater.total_out());
        if stalled && out.len() < out.capacity() {
            return Ok(false); // needs input that is not there
        }
    }
}

fn snappy_raw(data: &[u8], max: usize) -> Result<Vec<u8>> {
    let fail = |err: snap::Error| corrupt(format!("snappy data is corrupt: {err}"));
    // Raw snappy states its uncompressed length up front: check it before allocating.
    let size = snap::raw::decompress_len(data).map_err(fail)?;
    if size > max {
        return Err(too_big(max));
    }
    let mut out = vec![0; size];
    let written = snap::raw::Decoder::new()
        .decompress(data, &mut out)
        .map_err(fail)?;
    out.truncate(written);
    Ok(out)
}

fn xerial(data: &[u8], max: usize) -> Result<Vec<u8>> {
    if data.len() < XERIAL_HEADER_SIZE {
        return Err(corrupt("xerial snappy header is truncated"));
    }
    let mut pos = XERIAL_HEADER_SIZE;
    let mut out = Vec::new();
    while pos < data.len() {
        let Some(raw) = data.get(pos..pos + 4) else {
            return Err(corrupt("xerial snappy chunk length is truncated"));
        };
        let length = i32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]);
        pos += 4;
        let chunk = usize::try_from(length)
            .ok()
            .and_then(|n| data.get(pos..pos.checked_add(n)?));
        let Some(chunk) = chunk else {
            return Err(corrupt(format!(
                "xerial snappy chunk of {length} bytes overruns the data"
            )));
        };
        out.extend_from_slice(&snappy_raw(chunk, max - out.len())?);
        pos += chunk.len();
    }
    Ok(out)
}

fn lz4_content_size(data: &[u8]) -> Option<usize> {
    let magic = u32::from_le_bytes(data.get(..4)?.try_into().ok()?);
    if data.len() < 14 || magic != LZ4_MAGIC || data[4] & 0x08 == 0 {
        return None;
    }
    let size = u64::from_le_bytes(data.get(6..14)?.try_into().ok()?);
    usize::try_from(size).ok()?.checked_add(1)
}

fn lz4_frames(data: &[u8], max: usize) -> Result<Vec<u8>> {
    if data.is_empty() {
        return Err(corrupt("lz4 data is corrupt: empty input"));
    }
    let fail = |err: std::io::Error| corrupt(format!("lz4 data is corrupt: {err}"));
    let mut out = Vec::new();
    let mut rest = data;
    // One decoder reads one frame (or skippable frame); more may follow.
    while !rest.is_empty() {
        let mut decoder = lz4::Decoder::new(rest).map_err(fail)?;
        let hint = lz4_content_size(rest);
        read_bounded(&mut decoder, &mut out, max, hint, rest.len(), "lz4")?;
        let (remaining, finished) = decoder.finish();
        if finished.is_err() {
            return Err(corrupt("lz4 data is corrupt: truncated frame"));
        }
        rest = remaining;
    }
    Ok(out)
}

fn zstd_frames(data: &[u8], max: usize) -> Result<Vec<u8>> {
    let fail = |err: std::io::Error| corrupt(format!("zstd data is corrupt: {err}"));
    // The streaming decoder reads frame after frame; its window is limited by zstd's default
    // (2^27 bytes), as on the Python path.
    let mut decoder = zstd::stream::read::Decoder::with_buffer(data).map_err(fail)?;
    let mut out = Vec::new();
    read_bounded(
        &mut decoder,
        &mut out,
        max,
        zstd_content_size(data),
        data.len(),
        "zstd",
    )?;
    Ok(out)
}

/// The first frame's declared content size (+1, so an exact fit needs no second buffer).
fn zstd_content_size(data: &[u8]) -> Option<usize> {
    let size = zstd::zstd_safe::get_frame_content_size(data).ok()??;
    usize::try_from(size).ok()?.checked_add(1)
}
