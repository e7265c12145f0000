//! Tensor descriptors: decoding, shape geometry and data-section layout.
//!
//! ```text
//! tensor_info := name:string  n_dims:u32  dims:u64[n_dims]  type:u32  offset:u64
//!
//! file:  | header | kv ... | tensor_info ... | pad | data section ............ |
//!                                                  ^ data_offset (aligned)
//! data:  | t0 bytes | pad | t1 bytes | pad | ...      each offset % alignment == 0
//! ```
//!
//! Shapes use ggml order: `dims[0]` is the contiguous row length, the
//! remaining dimensions count rows. A tensor's byte size is
//! `row_bytes(dims[0]) * dims[1] * dims[2] * dims[3]`.

use crate::cursor::Cursor;
use crate::error::GgufError;
use crate::types::GgmlType;

/// Most dimensions a ggml tensor can have.
pub const MAX_DIMS: usize = 4;

/// Longest tensor name ggml accepts, in bytes (its name buffer is 64 bytes
/// including the terminating NUL).
pub const MAX_TENSOR_NAME_LEN: usize = 63;

/// Smallest encoded tensor descriptor: empty-name length, n_dims, one
/// dimension, type, offset.
pub(crate) const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 8 + 4 + 8;

/// One tensor's descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Tensor name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Shape in ggml order: `dims[0]` is the contiguous row length.
    pub dims: Vec<u64>,
    /// Element type.
    pub ty: GgmlType,
    /// Byte offset of the data, relative to the data section.
    pub offset: u64,
    /// Exact size of the data in bytes.
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Total number of elements (product of `dims`).
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().fold(1u64, |acc, &d| acc.saturating_mul(d))
    }

    /// Elements per row (`dims[0]`).
    pub fn row_len(&self) -> u64 {
        self.dims.first().copied().unwrap_or(0)
    }

    /// Number of rows (product of `dims[1..]`, 1 for a vector).
    pub fn n_rows(&self) -> u64 {
        self.dims
            .iter()
            .skip(1)
            .fold(1u64, |acc, &d| acc.saturating_mul(d))
    }

    /// Bytes of one row in the tensor's block format.
    pub fn row_bytes(&self) -> u64 {
        self.ty.row_bytes(self.row_len()).unwrap_or(0)
    }
}

/// Checks a tensor name: non-empty and at most [`MAX_TENSOR_NAME_LEN`] bytes.
pub(crate) fn validate_tensor_name(index: u64, name: &str) -> Result<(), GgufError> {
    let reason = if name.is_empty() {
        "it is empty"
    } else if name.len() > MAX_TENSOR_NAME_LEN {
        "it is longer than 63 bytes"
    } else {
        return Ok(());
    };
    Err(GgufError::InvalidTensorName {
        index,
        name: name.chars().take(80).collect(),
        reason,
    })
}

/// Validates a shape for `ty` and returns the tensor's byte size.
///
/// `dims` is in ggml order (`dims[0]` = row length). Checks: 1..=4
/// dimensions, none zero, element count and byte size within `i64`, and a
/// row length that is a whole number of `ty` blocks.
pub fn tensor_n_bytes(name: &str, dims: &[u64], ty: GgmlType) -> Result<u64, GgufError> {
    if dims.is_empty() || dims.len() > MAX_DIMS {
        return Err(GgufError::BadDimCount {
            name: name.to_string(),
            n_dims: dims.len() as u64,
        });
    }
    if let Some(index) = dims.iter().position(|&d| d == 0) {
        return Err(GgufError::ZeroDim {
            name: name.to_string(),
            index,
            dims: dims.to_vec(),
        });
    }
    let overflow = || GgufError::ElementCountOverflow {
        name: name.to_string(),
        dims: dims.to_vec(),
    };
    let limit = i64::MAX as u64;
    let n_elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= limit)
        .ok_or_else(overflow)?;
    let row_len = dims.first().copied().unwrap_or(0);
    let block_size = ty.block_size() as u64;
    if row_len % block_size != 0 {
        return Err(GgufError::RowNotBlockMultiple {
            name: name.to_string(),
            row_len,
            ty,
            block_size,
        });
    }
    let n_rows = n_elements / row_len;
    ty.row_bytes(row_len)
        .and_then(|rb| rb.checked_mul(n_rows))
        .filter(|&n| n <= limit)
        .ok_or_else(overflow)
}

/// Reads tensor descriptor number `index` and validates its shape and type.
pub(crate) fn read_tensor_info(cur: &mut Cursor<'_>, index: u64) -> Result<TensorInfo, GgufError> {
    let name = cur.string(&|| format!("tensor #{index} name"))?;
    validate_tensor_name(index, &name)?;
    let n_dims = cur.u32(&|| format!("tensor '{name}': n_dims"))?;
    if n_dims == 0 || n_dims as usize > MAX_DIMS {
        return Err(GgufError::BadDimCount {
            name,
            n_dims: n_dims.into(),
        });
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for i in 0..n_dims {
        dims.push(cur.u64(&|| format!("tensor '{name}': dimension {i}"))?);
    }
    let type_id = cur.u32(&|| format!("tensor '{name}': type"))?;
    let offset = cur.u64(&|| format!("tensor '{name}': data offset"))?;
    let ty = GgmlType::from_id(type_id).ok_or_else(|| GgufError::UnknownTensorType {
        name: name.clone(),
        type_id,
    })?;
    let n_bytes = tensor_n_bytes(&name, &dims, ty)?;
    Ok(TensorInfo {
        name,
        dims,
        ty,
        offset,
        n_bytes,
    })
}

/// Checks that every tensor's data is aligned, inside the `data_len`-byte
/// data section, and disjoint from every other tensor's data.
pub(crate) fn check_layout(
    tensors: &[TensorInfo],
    alignment: u64,
    data_len: u64,
) -> Result<(), GgufError> {
    for t in tensors {
        if alignment == 0 || t.offset % alignment != 0 {
            return Err(GgufError::Misaligned {
                name: t.name.clone(),
                offset: t.offset,
                alignment,
            });
        }
        if !matches!(t.offset.checked_add(t.n_bytes), Some(end) if end <= data_len) {
            return Err(GgufError::TensorOutOfFile {
                name: t.name.clone(),
                offset: t.offset,
                n_bytes: t.n_bytes,
                data_len,
            });
        }
    }
    // Sorted by start, each tensor must end at or before the next begins.
    let mut by_offset: Vec<&TensorInfo> = tensors.iter().collect();
    by_offset.sort_by_key(|t| t.offset);
    for pair in by_offset.windows(2) {
        if let [a, b] = pair {
            let a_end = a.offset.saturating_add(a.n_bytes);
            if a_end > b.offset {
                return Err(GgufError::TensorOverlap {
                    first: a.name.clone(),
                    first_end: a_end,
                    second: b.name.clone(),
                    second_start: b.offset,
                });
            }
        }
    }
    Ok(())
}

/// Rounds `x` up to a multiple of `alignment` (a power of two), `None` on
/// overflow.
pub(crate) fn align_up(x: u64, alignment: u64) -> Option<u64> {
    match x.checked_rem(alignment)? {
        0 => Some(x),
        r => x.checked_add(alignment - r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n_bytes_matches_block_geometry() {
        // 64 x 3 rows of Q4_K: 64 is not a block multiple.
        assert!(tensor_n_bytes("t", &[64, 3], GgmlType::Q4_K).is_err());
        // 512 x 3 rows of Q4_K: 2 blocks of 144 bytes per row.
        assert_eq!(
            tensor_n_bytes("t", &[512, 3], GgmlType::Q4_K).ok(),
            Some(2 * 144 * 3)
        );
        assert_eq!(tensor_n_bytes("t", &[7], GgmlType::F16).ok(), Some(14));
        assert!(tensor_n_bytes("t", &[1 << 62, 4], GgmlType::F32).is_err());
        assert!(tensor_n_bytes("t", &[1 << 61], GgmlType::F64).is_err());
    }

    #[test]
    fn align_up_rounds() {
        assert_eq!(align_up(0, 32), Some(0));
        assert_eq!(align_up(1, 32), Some(32));
        assert_eq!(align_up(64, 32), Some(64));
        assert_eq!(align_up(u64::MAX, 32), None);
    }
}
