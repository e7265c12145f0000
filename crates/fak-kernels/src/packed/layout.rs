//! The packed layouts' geometry, shared by the packed products
//! ([`crate::packed`]), the k-quant encoders (`k`) and their SIMD
//! kernels (the ISA files beside it): group and block sizes, the byte offsets of
//! the Q4_0, IQ4_NL, Q4_1, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K and IQ4_XS group blocks, [`PackedFormat`] and the
//! validated arguments of one product ([`PackedArgs`]).
//!
//! A leaf: it imports only the GGUF block types, so the front files and
//! the SIMD kernels can all import it without forming a loop (the module
//! diagrams of [`crate::packed`], `q4` and `k` describe the
//! layouts).

use fak_gguf::GgmlType;

use crate::blocks::{
    BlockIQ4_NL, BlockIQ4_XS, BlockQ2_K, BlockQ3_K, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1,
    BlockQ5_K, BlockQ6_K, BlockQ8_0,
};

/// Weight rows per packed group (the lanes of one AVX2 register).
pub const GROUP_ROWS: usize = 8;

/// Values per block.
pub(crate) const QK: usize = 32;

/// Values per step (one `i32` lane of `maddubs` + `madd`).
pub(crate) const STEP: usize = 4;

/// Steps per block.
pub(crate) const STEPS: usize = QK / STEP;

/// Bytes of a group block's scales (8 × f16).
pub(crate) const SCALE_BYTES: usize = GROUP_ROWS * 2;

/// Bytes of one group block of Q8_0 (see the module diagram).
pub(crate) const Q8_0_BYTES: usize = SCALE_BYTES + GROUP_ROWS * QK;

/// Bytes of one group block of Q5_0 (see the module diagram).
pub(crate) const Q5_0_BYTES: usize = SCALE_BYTES + GROUP_ROWS * QK / 2 + GROUP_ROWS * STEP;

const _: () = assert!(Q8_0_BYTES == GROUP_ROWS * BlockQ8_0::BYTES);
const _: () = assert!(Q5_0_BYTES == GROUP_ROWS * BlockQ5_0::BYTES);

/// Byte offsets of the packed Q4_0, IQ4_NL, Q4_1 and Q5_1 group blocks
/// (see `q4`): scales, Q4_1's and Q5_1's mins, then four 32-byte nibble
/// chunks, then Q5_1's high bits.
pub(crate) mod q4 {
    use super::SCALE_BYTES;

    /// `d`, 8 × f16 (every format).
    pub(crate) const D: usize = 0;
    /// Q4_0's (and IQ4_NL's) nibble chunks: chunk `c` at `NIB_0 + 32c`.
    pub(crate) const NIB_0: usize = SCALE_BYTES;
    /// Q4_0's (and IQ4_NL's) bytes.
    pub(crate) const BYTES_0: usize = NIB_0 + 4 * 32;
    /// Q4_1's `m`, 8 × f16.
    pub(crate) const M: usize = SCALE_BYTES;
    /// Q4_1's nibble chunks: chunk `c` at `NIB_1 + 32c`.
    pub(crate) const NIB_1: usize = M + SCALE_BYTES;
    /// Q4_1's bytes.
    pub(crate) const BYTES_1: usize = NIB_1 + 4 * 32;
    /// Q5_1's high bits (Q4_1's fields first): byte `p`, bit `k` =
    /// `u[k][p] >> 4`.
    pub(crate) const HIGH_5: usize = BYTES_1;
    /// Q5_1's bytes.
    pub(crate) const BYTES_5: usize = HIGH_5 + 32;
}

const _: () = assert!(q4::BYTES_0 == GROUP_ROWS * BlockQ4_0::BYTES);
const _: () = assert!(q4::BYTES_0 == GROUP_ROWS * BlockIQ4_NL::BYTES);
const _: () = assert!(q4::BYTES_1 == GROUP_ROWS * BlockQ4_1::BYTES);
const _: () = assert!(q4::BYTES_5 == GROUP_ROWS * BlockQ5_1::BYTES);
const _: () = assert!(q2k::BYTES == GROUP_ROWS * BlockQ2_K::BYTES);
const _: () = assert!(q3k::BYTES == GROUP_ROWS * BlockQ3_K::BYTES + 32);

/// A weight format that has a packed layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackedFormat {
    /// 8-bit quants, stored as they are.
    Q8_0,
    /// 5-bit quants: nibble planes plus a high-bit plane.
    Q5_0,
    /// 4-bit quants with an offset of 8: nibble planes (see `q4`).
    Q4_0,
    /// 4-bit quants with a per-block min: the mins, then nibble planes
    /// (see `q4`); against Q8_1 activations.
    Q4_1,
    /// 5-bit quants with a per-block min: Q4_1's layout plus a high-bit
    /// plane (see `q4`); against Q8_1 activations.
    Q5_1,
    /// 4-bit indices of IQ4_NL's 16 levels, in Q4_0's layout (see `q4`).
    IQ4NL,
    /// Q1_0's sign bits, 8 rows per 128-value block (see `q1`); against
    /// the four Q8_0 blocks under each.
    Q1_0,
    /// NVFP4's codes in nibble chunks and its sub-block scales as f16s, 8
    /// rows per 64-value block (see `nv`); against the two Q8_0 blocks
    /// under each.
    NVFP4,
    /// MXFP4's 4-bit codes of the doubled E2M1 levels, in IQ4_NL's layout
    /// with each block's power-of-two scale as an f16 (exact where every
    /// exponent of the matrix fits, see `q4::mxfp4_packs`).
    MXFP4,
    /// IQ4_XS super-blocks: IQ4_NL's level indices in 32-value
    /// sub-blocks with their own 6-bit scales (see `k`); against Q8_K.
    IQ4XS,
    /// Q4_K super-blocks (see `k`).
    Q4K,
    /// Q5_K super-blocks: Q4_K's, plus a high-bit plane (see `k`).
    Q5K,
    /// Q6_K super-blocks (see `k`).
    Q6K,
    /// Q2_K super-blocks: 2-bit quants in 16-value sub-blocks with 4-bit
    /// scales and mins (see `k`).
    Q2K,
    /// Q3_K super-blocks: 3-bit quants (a 2-bit plane and a high-bit
    /// plane) in 16-value sub-blocks with signed 6-bit scales (see `k`).
    Q3K,
}

impl PackedFormat {
    /// The packed format of weight type `ty`, if it has one.
    pub fn of(ty: GgmlType) -> Option<PackedFormat> {
        match ty {
            GgmlType::Q8_0 => Some(PackedFormat::Q8_0),
            GgmlType::Q5_0 => Some(PackedFormat::Q5_0),
            GgmlType::Q4_0 => Some(PackedFormat::Q4_0),
            GgmlType::Q4_1 => Some(PackedFormat::Q4_1),
            GgmlType::Q5_1 => Some(PackedFormat::Q5_1),
            GgmlType::IQ4_NL => Some(PackedFormat::IQ4NL),
            GgmlType::MXFP4 => Some(PackedFormat::MXFP4),
            GgmlType::Q1_0 => Some(PackedFormat::Q1_0),
            GgmlType::NVFP4 => Some(PackedFormat::NVFP4),
            GgmlType::IQ4_XS => Some(PackedFormat::IQ4XS),
            GgmlType::Q4_K => Some(PackedFormat::Q4K),
            GgmlType::Q5_K => Some(PackedFormat::Q5K),
            GgmlType::Q6_K => Some(PackedFormat::Q6K),
            GgmlType::Q2_K => Some(PackedFormat::Q2K),
            GgmlType::Q3_K => Some(PackedFormat::Q3K),
            _ => None,
        }
    }

    /// The GGUF weight type.
    pub fn ty(self) -> GgmlType {
        match self {
            PackedFormat::Q8_0 => GgmlType::Q8_0,
            PackedFormat::Q5_0 => GgmlType::Q5_0,
            PackedFormat::Q4_0 => GgmlType::Q4_0,
            PackedFormat::Q4_1 => GgmlType::Q4_1,
            PackedFormat::Q5_1 => GgmlType::Q5_1,
            PackedFormat::IQ4NL => GgmlType::IQ4_NL,
            PackedFormat::MXFP4 => GgmlType::MXFP4,
            PackedFormat::Q1_0 => GgmlType::Q1_0,
            PackedFormat::NVFP4 => GgmlType::NVFP4,
            PackedFormat::IQ4XS => GgmlType::IQ4_XS,
            PackedFormat::Q4K => GgmlType::Q4_K,
            PackedFormat::Q5K => GgmlType::Q5_K,
            PackedFormat::Q6K => GgmlType::Q6_K,
            PackedFormat::Q2K => GgmlType::Q2_K,
            PackedFormat::Q3K => GgmlType::Q3_K,
        }
    }

    /// Whether a matrix's GGUF rows `data` can take this layout: always,
    /// except MXFP4 with a block scale that an f16 does not hold exactly
    /// (such a matrix stays on the row kernels).
    pub fn packs(self, data: &[u8]) -> bool {
        self != PackedFormat::MXFP4 || super::q4::mxfp4_packs(data)
    }

    /// The activation format of the products: Q8_0, Q8_1 for Q4_1, or
    /// Q8_K for the k-quants (as [`crate::vec_dot_type`]).
    pub fn act_ty(self) -> GgmlType {
        crate::vec_dot_type(self.ty())
    }

    /// Bytes of one group's block.
    pub fn group_block_bytes(self) -> usize {
        match self {
            PackedFormat::Q8_0 => Q8_0_BYTES,
            PackedFormat::Q5_0 => Q5_0_BYTES,
            PackedFormat::Q4_0 | PackedFormat::IQ4NL | PackedFormat::MXFP4 => q4::BYTES_0,
            PackedFormat::Q1_0 => q1::BYTES,
            PackedFormat::NVFP4 => nv::BYTES,
            PackedFormat::Q4_1 => q4::BYTES_1,
            PackedFormat::Q5_1 => q4::BYTES_5,
            PackedFormat::Q4K => q4k::BYTES,
            PackedFormat::IQ4XS => iq4xs::BYTES,
            PackedFormat::Q5K => q5k::BYTES,
            PackedFormat::Q6K => q6k::BYTES,
            PackedFormat::Q2K => q2k::BYTES,
            PackedFormat::Q3K => q3k::BYTES,
        }
    }
}

/// Validated arguments of one packed product.
pub(crate) struct PackedArgs<'a> {
    /// The weight format.
    pub(crate) format: PackedFormat,
    /// Blocks per row.
    pub(crate) nb: usize,
    /// The selected groups' block bytes (`nb` blocks per group,
    /// group-major).
    pub(crate) w: &'a [u8],
    /// `n_tok` activation rows of `nb` blocks of `format.act_ty()` each,
    /// contiguous.
    pub(crate) a: &'a [u8],
    /// Activation rows.
    pub(crate) n_tok: usize,
    /// Output row stride.
    pub(crate) out_stride: usize,
}

/// Values per super-block.
pub(crate) const QK_K: usize = 256;

/// Byte offsets of a packed NVFP4 group block (see `nv`).
pub(crate) mod nv {
    /// Sub-block scales: sub-block `s`, row `r` as an f16 at `D + 16s + 2r`.
    pub(crate) const D: usize = 0;
    /// Nibble chunks: chunk `c` at `NIB + 32c`.
    pub(crate) const NIB: usize = 64;
    /// Group block size (the GGUF blocks' 288 bytes, scales widened).
    pub(crate) const BYTES: usize = 320;
}

/// Byte offsets of a packed Q1_0 group block (see `q1`).
pub(crate) mod q1 {
    /// `d`, 8 × f16.
    pub(crate) const D: usize = 0;
    /// Sign bits: sub-block `k`, step `j` as a `u32` at `BITS + 4·(8k + j)`.
    pub(crate) const BITS: usize = 16;
    /// Group block size: the 8 rows' GGUF blocks.
    pub(crate) const BYTES: usize = 144;
}

/// Steps per super-block.
pub(crate) const K_STEPS: usize = QK_K / STEP;

/// Byte offsets of a packed Q4_K group block.
pub(crate) mod q4k {
    /// `d`, 8 × f16.
    pub(crate) const D: usize = 0;
    /// `dmin`, 8 × f16.
    pub(crate) const DMIN: usize = 16;
    /// Scales: sub-block `j`, row `r` at `SC + 8j + r`.
    pub(crate) const SC: usize = 32;
    /// Mins, like the scales.
    pub(crate) const M: usize = 96;
    /// Nibble chunks: chunk `c` at `NIB + 32c`.
    pub(crate) const NIB: usize = 160;
    /// Bytes.
    pub(crate) const BYTES: usize = NIB + 32 * 32;
}

/// Byte offsets of a packed Q5_K group block: a Q4_K group block (the
/// first [`q4k::BYTES`] bytes: `d`, `dmin`, scales, mins and the nibbles
/// of the low 4 bits, at [`q4k`]'s offsets), then the high-bit plane.
pub(crate) mod q5k {
    /// Nibble chunks (the low 4 bits): chunk `c` at `NIB + 32c`.
    pub(crate) use super::q4k::NIB;

    /// High-bit chunks: chunk `c` at `HIGH + 32c`.
    pub(crate) const HIGH: usize = super::q4k::BYTES;
    /// Bytes.
    pub(crate) const BYTES: usize = HIGH + 8 * 32;
}

/// Byte offsets of a packed Q2_K group block.
pub(crate) mod q2k {
    /// `d`, 8 × f16.
    pub(crate) const D: usize = 0;
    /// `dmin`, 8 × f16.
    pub(crate) const DMIN: usize = 16;
    /// Scales and mins as GGUF stores them (the scale in the low nibble,
    /// the min in the high one): sub-block `j`, row `r` at `SM + 8j + r`.
    pub(crate) const SM: usize = 32;
    /// 2-bit chunks: chunk `c` at `Q + 32c`.
    pub(crate) const Q: usize = 160;
    /// Bytes.
    pub(crate) const BYTES: usize = Q + 16 * 32;
}

/// Byte offsets of a packed Q3_K group block.
pub(crate) mod q3k {
    /// `d`, 8 × f16.
    pub(crate) const D: usize = 0;
    /// Sub-block scales minus 32 (i8): sub-block `j`, row `r` at `SC + 8j
    /// + r`.
    pub(crate) const SC: usize = 16;
    /// 2-bit chunks (the low bits): chunk `c` at `Q + 32c`.
    pub(crate) const Q: usize = 144;
    /// High-bit chunks: chunk `c` at `HIGH + 32c`.
    pub(crate) const HIGH: usize = Q + 16 * 32;
    /// Bytes.
    pub(crate) const BYTES: usize = HIGH + 8 * 32;
}

/// Byte offsets of a packed IQ4_XS group block.
pub(crate) mod iq4xs {
    /// `d`, 8 × f16.
    pub(crate) const D: usize = 0;
    /// Sub-block scales `ls − 32` (i8): sub-block `j`, row `r` at
    /// `LS + 8j + r`.
    pub(crate) const LS: usize = 16;
    /// Nibble chunks (level indices): chunk `c` at `NIB + 32c`.
    pub(crate) const NIB: usize = 80;
    /// Bytes.
    pub(crate) const BYTES: usize = NIB + 32 * 32;
}

/// Byte offsets of a packed Q6_K group block.
pub(crate) mod q6k {
    /// `d`, 8 × f16.
    pub(crate) const D: usize = 0;
    /// Scales (i8): sub-block `j`, row `r` at `SC + 8j + r`.
    pub(crate) const SC: usize = 16;
    /// Nibble chunks: chunk `c` at `NIB + 32c`.
    pub(crate) const NIB: usize = 144;
    /// High-bit chunks: chunk `c` at `HIGH + 32c`.
    pub(crate) const HIGH: usize = NIB + 32 * 32;
    /// Bytes.
    pub(crate) const BYTES: usize = HIGH + 16 * 32;
}

/// Byte offsets of a decoded codebook group block (`super::grid`): the
/// codebook formats' values as offset bytes, built per product, never
/// stored.
pub(crate) mod gk {
    /// `d`, 8 × f16.
    pub(crate) const D: usize = 0;
    /// Scales (i8, `2s + 1`): 16-value sub-block `j`, row `r` at `SC + 8j + r`.
    pub(crate) const SC: usize = 16;
    /// Offset quants: step `k` at `U + 32k`, byte `4r + i` = row `r`'s
    /// value `4k + i`.
    pub(crate) const U: usize = SC + 16 * 8;
    /// Bytes.
    pub(crate) const BYTES: usize = U + 8 * super::QK_K;
}

const _: () = assert!(q4k::BYTES == 1184);
const _: () = assert!(q5k::BYTES == 1440);
const _: () = assert!(q5k::BYTES == GROUP_ROWS * BlockQ5_K::BYTES + 32);
const _: () = assert!(q6k::BYTES == GROUP_ROWS * BlockQ6_K::BYTES);
const _: () = assert!(iq4xs::BYTES == GROUP_ROWS * BlockIQ4_XS::BYTES + 16);
