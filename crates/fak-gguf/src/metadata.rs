//! Decoding of the metadata key/value section.
//!
//! ```text
//! kv      := key:string  type:u32  value
//! value   := scalar | string | array
//! string  := len:u64  bytes[len]            (UTF-8)
//! array   := elem_type:u32  count:u64  elem[count]
//!            (elem_type = ARRAY: each elem is again `elem_type count elem*`)
//! ```
//!
//! Every count is checked against the bytes left in the file before any
//! allocation; array nesting is bounded by [`MAX_ARRAY_DEPTH`].

use crate::cursor::Cursor;
use crate::error::GgufError;
use crate::value::{MetaArray, MetaValue, ValueType, MAX_ARRAY_DEPTH};

/// Longest key the GGUF specification allows, in bytes.
pub const MAX_KEY_LEN: usize = 65535;

/// The key that sets the data alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// Alignment used when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// Largest alignment fak accepts (1 MiB).
pub const MAX_ALIGNMENT: u64 = 1 << 20;

/// Smallest encoded key/value pair: empty-key length, type, one-byte value.
pub(crate) const MIN_KV_BYTES: u64 = 8 + 4 + 1;

/// Checks a key's length rules (non-empty, at most [`MAX_KEY_LEN`] bytes).
pub(crate) fn validate_key(key: &str) -> Result<(), GgufError> {
    let reason = if key.is_empty() {
        "it is empty"
    } else if key.len() > MAX_KEY_LEN {
        "it is longer than 65535 bytes"
    } else {
        return Ok(());
    };
    Err(GgufError::InvalidKey {
        key: key.chars().take(80).collect(),
        reason,
    })
}

/// Interprets the (optional) `general.alignment` value.
///
/// It must be a `u32` that is a non-zero power of two and at most
/// [`MAX_ALIGNMENT`]; absent means [`DEFAULT_ALIGNMENT`].
pub(crate) fn alignment_from(value: Option<&MetaValue>) -> Result<u64, GgufError> {
    let a = match value {
        None => return Ok(DEFAULT_ALIGNMENT),
        Some(MetaValue::U32(a)) => u64::from(*a),
        Some(other) => {
            return Err(GgufError::BadAlignment {
                reason: format!("must be a u32, found {}", other.type_name()),
            })
        }
    };
    if a == 0 || !a.is_power_of_two() {
        return Err(GgufError::BadAlignment {
            reason: format!("{a} is not a non-zero power of two"),
        });
    }
    if a > MAX_ALIGNMENT {
        return Err(GgufError::BadAlignment {
            reason: format!("{a} exceeds the maximum of {MAX_ALIGNMENT}"),
        });
    }
    Ok(a)
}

/// Reads key/value pair number `index`.
pub(crate) fn read_kv(cur: &mut Cursor<'_>, index: u64) -> Result<(String, MetaValue), GgufError> {
    let key = cur.string(&|| format!("metadata key #{index}"))?;
    validate_key(&key)?;
    let type_id = cur.u32(&|| format!("key '{key}': value type"))?;
    let value = read_value(cur, &key, type_id)?;
    Ok((key, value))
}

fn value_type(key: &str, type_id: u32) -> Result<ValueType, GgufError> {
    ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
        key: key.to_string(),
        type_id,
    })
}

fn to_bool(key: &str, byte: u8) -> Result<bool, GgufError> {
    match byte {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(GgufError::InvalidBool {
            key: key.to_string(),
            byte,
        }),
    }
}

fn read_value(cur: &mut Cursor<'_>, key: &str, type_id: u32) -> Result<MetaValue, GgufError> {
    let ty = value_type(key, type_id)?;
    let what = || format!("key '{key}': {ty} value");
    Ok(match ty {
        ValueType::U8 => MetaValue::U8(u8::from_le_bytes(cur.array(&what)?)),
        ValueType::I8 => MetaValue::I8(i8::from_le_bytes(cur.array(&what)?)),
        ValueType::U16 => MetaValue::U16(u16::from_le_bytes(cur.array(&what)?)),
        ValueType::I16 => MetaValue::I16(i16::from_le_bytes(cur.array(&what)?)),
        ValueType::U32 => MetaValue::U32(u32::from_le_bytes(cur.array(&what)?)),
        ValueType::I32 => MetaValue::I32(i32::from_le_bytes(cur.array(&what)?)),
        ValueType::F32 => MetaValue::F32(f32::from_le_bytes(cur.array(&what)?)),
        ValueType::U64 => MetaValue::U64(u64::from_le_bytes(cur.array(&what)?)),
        ValueType::I64 => MetaValue::I64(i64::from_le_bytes(cur.array(&what)?)),
        ValueType::F64 => MetaValue::F64(f64::from_le_bytes(cur.array(&what)?)),
        ValueType::Bool => {
            let [b] = cur.array::<1>(&what)?;
            MetaValue::Bool(to_bool(key, b)?)
        }
        ValueType::Str => MetaValue::Str(cur.string(&what)?),
        ValueType::Array => MetaValue::Array(read_array(cur, key, 1)?),
    })
}

/// Reads `n` fixed-size elements of `N` bytes each, converting each with
/// `conv`. The caller has already checked that `n * N` bytes remain.
fn fixed<const N: usize, T>(
    cur: &mut Cursor<'_>,
    key: &str,
    n: usize,
    conv: fn([u8; N]) -> T,
) -> Result<Vec<T>, GgufError> {
    let what = || format!("key '{key}': array payload");
    let total = (n as u64)
        .checked_mul(N as u64)
        .ok_or_else(|| GgufError::Truncated {
            what: what(),
            offset: cur.pos() as u64,
            need: u64::MAX,
            available: cur.remaining() as u64,
        })?;
    let bytes = cur.take(total, &what)?;
    Ok(bytes
        .chunks_exact(N)
        .map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            conv(a)
        })
        .collect())
}

/// Reads an array header and payload at nesting level `depth` (1 = outermost).
fn read_array(cur: &mut Cursor<'_>, key: &str, depth: usize) -> Result<MetaArray, GgufError> {
    if depth > MAX_ARRAY_DEPTH {
        return Err(GgufError::ArrayTooDeep {
            key: key.to_string(),
            max: MAX_ARRAY_DEPTH,
        });
    }
    let type_id = cur.u32(&|| format!("key '{key}': array element type"))?;
    let ty = value_type(key, type_id)?;
    let count = cur.u64(&|| format!("key '{key}': array length"))?;
    let n = cur.check_count(count, ty.min_size(), &|| {
        format!("key '{key}': array length")
    })?;
    Ok(match ty {
        ValueType::U8 => MetaArray::U8(fixed(cur, key, n, u8::from_le_bytes)?),
        ValueType::I8 => MetaArray::I8(fixed(cur, key, n, i8::from_le_bytes)?),
        ValueType::U16 => MetaArray::U16(fixed(cur, key, n, u16::from_le_bytes)?),
        ValueType::I16 => MetaArray::I16(fixed(cur, key, n, i16::from_le_bytes)?),
        ValueType::U32 => MetaArray::U32(fixed(cur, key, n, u32::from_le_bytes)?),
        ValueType::I32 => MetaArray::I32(fixed(cur, key, n, i32::from_le_bytes)?),
        ValueType::F32 => MetaArray::F32(fixed(cur, key, n, f32::from_le_bytes)?),
        ValueType::U64 => MetaArray::U64(fixed(cur, key, n, u64::from_le_bytes)?),
        ValueType::I64 => MetaArray::I64(fixed(cur, key, n, i64::from_le_bytes)?),
        ValueType::F64 => MetaArray::F64(fixed(cur, key, n, f64::from_le_bytes)?),
        ValueType::Bool => {
            let raw = fixed(cur, key, n, |[b]: [u8; 1]| b)?;
            MetaArray::Bool(
                raw.into_iter()
                    .map(|b| to_bool(key, b))
                    .collect::<Result<_, _>>()?,
            )
        }
        ValueType::Str => {
            let mut v = Vec::with_capacity(n);
            for i in 0..n {
                v.push(cur.string(&|| format!("key '{key}': string element {i}"))?);
            }
            MetaArray::Str(v)
        }
        ValueType::Array => {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(read_array(cur, key, depth + 1)?);
            }
            MetaArray::Array(v)
        }
    })
}

/// Checks a value the writer is about to emit under `key`: nesting depth and,
/// for `general.alignment`, the alignment rules.
pub(crate) fn validate_value(key: &str, value: &MetaValue) -> Result<(), GgufError> {
    if let MetaValue::Array(a) = value {
        if a.depth() > MAX_ARRAY_DEPTH {
            return Err(GgufError::ArrayTooDeep {
                key: key.to_string(),
                max: MAX_ARRAY_DEPTH,
            });
        }
    }
    if key == ALIGNMENT_KEY {
        alignment_from(Some(value))?;
    }
    Ok(())
}
