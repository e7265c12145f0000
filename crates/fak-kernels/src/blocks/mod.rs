//! `#[repr(C)]` images of ggml's quantization blocks, with byte-exact
//! decoding from and encoding to the on-disk (little-endian) layout.
//!
//! Each block type documents its layout; the structs mirror ggml's
//! `block_*` structs field for field (f16 fields are kept as raw `u16`
//! bits), and a compile-time assert pins each size to ggml's. Rows are
//! never reinterpreted in place: kernels split a byte row into
//! `&[[u8; BYTES]]` chunks and decode each block with `from_bytes`, so
//! unaligned (e.g. memory-mapped) data is fine and no `unsafe` is needed.
//! (`BlockQ8_K` holds an `f32` and `i16`s, so its in-memory alignment is 4,
//! but it is likewise only ever decoded from bytes.)
//!
//! The `quants` helpers unpack a block's packed integers into one value per
//! element, in element order, which is what both dequantization and the dot
//! products consume.

#![allow(non_camel_case_types)]

mod fp4;
mod iq;
mod iq_grid;
mod iq_grids;
mod k;
mod legacy;
mod low;
mod ternary;

pub use fp4::{BlockMXFP4, BlockNVFP4, MXFP4_LEVELS};
pub use iq::{BlockIQ4_NL, BlockIQ4_XS, IQ4_LEVELS};
pub(crate) use iq_grid::{d0, iq1_m, iq1_m_scale, iq1_s, iq2_s, iq2_xs, iq2_xxs, iq3_s, iq3_xxs};
pub use iq_grid::{sign_byte, GridBlock, GridFormat, GridStep, Sub32};
pub use k::{get_scale_min_k4, BlockQ4_K, BlockQ5_K, BlockQ6_K, BlockQ8_K};
pub use legacy::{BlockQ1_0, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};
pub use low::{BlockQ2_K, BlockQ3_K};
pub(crate) use ternary::{tq1_0, tq1_0_d, tq2_0, tq2_0_d};

pub(crate) use k::pack_scale_min_k4;
pub(crate) use legacy::pack_5bit;

/// Copies `LEN` bytes starting at byte `OFF` out of an `N`-byte block image.
/// The range is checked at compile time.
#[inline(always)]
fn take<const OFF: usize, const LEN: usize, const N: usize>(b: &[u8; N]) -> [u8; LEN] {
    const { assert!(OFF + LEN <= N) };
    let mut out = [0u8; LEN];
    out.copy_from_slice(&b[OFF..OFF + LEN]);
    out
}

/// Writes `v` at byte `OFF` of an `N`-byte block image. The range is checked
/// at compile time.
#[inline(always)]
fn put<const OFF: usize, const LEN: usize, const N: usize>(b: &mut [u8; N], v: &[u8; LEN]) {
    const { assert!(OFF + LEN <= N) };
    b[OFF..OFF + LEN].copy_from_slice(v);
}

/// Reads a little-endian `u16` at byte `OFF`.
#[inline(always)]
fn u16_at<const OFF: usize, const N: usize>(b: &[u8; N]) -> u16 {
    u16::from_le_bytes(take::<OFF, 2, N>(b))
}

/// Reinterprets bytes as two's-complement `i8`s.
#[inline(always)]
fn to_i8<const L: usize>(a: [u8; L]) -> [i8; L] {
    a.map(|v| v as i8)
}

/// Reinterprets two's-complement `i8`s as bytes.
#[inline(always)]
fn from_i8<const L: usize>(a: &[i8; L]) -> [u8; L] {
    a.map(|v| v as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fak_gguf::GgmlType;

    #[test]
    fn sizes_match_ggml_geometry() {
        let table: [(GgmlType, usize, usize); 14] = [
            (GgmlType::Q4_0, BlockQ4_0::BYTES, BlockQ4_0::ELEMS),
            (GgmlType::Q4_1, BlockQ4_1::BYTES, BlockQ4_1::ELEMS),
            (GgmlType::Q5_0, BlockQ5_0::BYTES, BlockQ5_0::ELEMS),
            (GgmlType::Q5_1, BlockQ5_1::BYTES, BlockQ5_1::ELEMS),
            (GgmlType::Q8_0, BlockQ8_0::BYTES, BlockQ8_0::ELEMS),
            (GgmlType::Q8_1, BlockQ8_1::BYTES, BlockQ8_1::ELEMS),
            (GgmlType::Q4_K, BlockQ4_K::BYTES, BlockQ4_K::ELEMS),
            (GgmlType::Q5_K, BlockQ5_K::BYTES, BlockQ5_K::ELEMS),
            (GgmlType::Q6_K, BlockQ6_K::BYTES, BlockQ6_K::ELEMS),
            (GgmlType::Q8_K, BlockQ8_K::BYTES, BlockQ8_K::ELEMS),
            (GgmlType::Q2_K, BlockQ2_K::BYTES, BlockQ2_K::ELEMS),
            (GgmlType::Q3_K, BlockQ3_K::BYTES, BlockQ3_K::ELEMS),
            (GgmlType::IQ4_NL, BlockIQ4_NL::BYTES, BlockIQ4_NL::ELEMS),
            (GgmlType::IQ4_XS, BlockIQ4_XS::BYTES, BlockIQ4_XS::ELEMS),
        ];
        for (ty, bytes, elems) in table {
            assert_eq!(ty.type_size(), bytes, "{ty} bytes");
            assert_eq!(ty.block_size(), elems, "{ty} elements");
        }
    }

    #[test]
    fn take_and_put_round_trip() {
        let mut b = [0u8; 6];
        put::<2, 3, 6>(&mut b, &[7, 8, 9]);
        assert_eq!(b, [0, 0, 7, 8, 9, 0]);
        assert_eq!(take::<1, 3, 6>(&b), [0, 7, 8]);
        assert_eq!(u16_at::<3, 6>(&b), 0x0908);
        assert_eq!(to_i8([0xFF, 0x80, 0x7F]), [-1, -128, 127]);
        assert_eq!(from_i8(&[-1i8, -128, 127]), [0xFF, 0x80, 0x7F]);
    }
}
