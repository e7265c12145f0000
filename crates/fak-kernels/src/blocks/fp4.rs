//! The 4-bit float formats, each element a 4-bit E2M1 code:
//!
//! * MXFP4, the OCP microscaling format: 32 elements per block under one
//!   shared power-of-two scale (E8M0);
//! * NVFP4: 64 elements per block, four sub-blocks of 16, each under its
//!   own UE4M3 scale (an 8-bit float).
//!
//! ```text
//!   MXFP4 (17 B):  e (E8M0 exponent byte) | qs[16]
//!     element j    low nibble of qs[j],  element j + 16: high nibble
//!     x = MXFP4_LEVELS[code] · 2^(e − 128)
//!   NVFP4 (36 B):  d[4] (UE4M3) | qs[32]
//!     element 16s + j      low nibble of qs[8s + j]   (s < 4, j < 8)
//!     element 16s + 8 + j  high nibble of qs[8s + j]
//!     x = MXFP4_LEVELS[code] · ue4m3(d[s]) / 2
//! ```
//!
//! The levels are twice the E2M1 values (0, ±0.5 … ±6 become 0, ±1 … ±12,
//! ggml's `kvalues_mxfp4`), so integer sums against 8-bit activations stay
//! exact; the halving moves into the scale ([`crate::fp::e8m0_to_f32_half`]).

use super::{put, take};

/// The 16 levels a 4-bit E2M1 code selects, doubled (ggml's
/// `kvalues_mxfp4`; code 8 is −0).
pub const MXFP4_LEVELS: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// MXFP4: 32 elements in 17 bytes, `x = MXFP4_LEVELS[q] · 2^(e − 128)`.
///
/// Bytes: `e` at 0, `qs` (16 bytes of code pairs) at 1.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockMXFP4 {
    /// Shared scale, an E8M0 exponent byte (`2^(e − 127)`; halved with the
    /// doubled levels).
    pub e: u8,
    /// Codes: element `j` low nibble, element `j + 16` high.
    pub qs: [u8; 16],
}
const _: () = assert!(size_of::<BlockMXFP4>() == BlockMXFP4::BYTES);

impl BlockMXFP4 {
    /// Encoded size in bytes.
    pub const BYTES: usize = 17;
    /// Elements per block.
    pub const ELEMS: usize = 32;

    /// Decodes a block from its 17 on-disk bytes.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        BlockMXFP4 {
            e: b[0],
            qs: take::<1, 16, 17>(b),
        }
    }

    /// Encodes the block into its 17 on-disk bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        b[0] = self.e;
        put::<1, 16, 17>(&mut b, &self.qs);
        b
    }

    /// The doubled levels (in `-12..=12`), one per element, in element order.
    #[inline]
    pub fn quants(&self) -> [i8; 32] {
        let mut out = [0i8; 32];
        for (j, &b) in self.qs.iter().enumerate() {
            out[j] = MXFP4_LEVELS[usize::from(b & 0x0F)];
            out[j + 16] = MXFP4_LEVELS[usize::from(b >> 4)];
        }
        out
    }
}

/// NVFP4: 64 elements in 36 bytes, four 16-element sub-blocks with UE4M3
/// scales.
///
/// Bytes: `d` (4 UE4M3 bytes) at 0, `qs` (32 bytes of code pairs) at 4.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockNVFP4 {
    /// Sub-block scales, UE4M3 bytes ([`crate::fp::ue4m3_to_f32_half`]).
    pub d: [u8; 4],
    /// Codes: sub-block `s` in bytes `8s..8s + 8`, its element `j` low
    /// nibble, `j + 8` high.
    pub qs: [u8; 32],
}
const _: () = assert!(size_of::<BlockNVFP4>() == BlockNVFP4::BYTES);

impl BlockNVFP4 {
    /// Encoded size in bytes.
    pub const BYTES: usize = 36;
    /// Elements per block.
    pub const ELEMS: usize = 64;

    /// Decodes a block from its 36 on-disk bytes.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        BlockNVFP4 {
            d: take::<0, 4, 36>(b),
            qs: take::<4, 32, 36>(b),
        }
    }

    /// Encodes the block into its 36 on-disk bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        put::<0, 4, 36>(&mut b, &self.d);
        put::<4, 32, 36>(&mut b, &self.qs);
        b
    }

    /// The doubled levels (in `-12..=12`), one per element, in element order.
    #[inline]
    pub fn quants(&self) -> [i8; 64] {
        let mut out = [0i8; 64];
        for (dst, src) in out
            .as_chunks_mut::<16>()
            .0
            .iter_mut()
            .zip(self.qs.as_chunks::<8>().0)
        {
            for (j, &b) in src.iter().enumerate() {
                dst[j] = MXFP4_LEVELS[usize::from(b & 0x0F)];
                dst[j + 8] = MXFP4_LEVELS[usize::from(b >> 4)];
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_and_codes_pick_levels_low_nibble_first() {
        let a: [u8; 17] = std::array::from_fn(|i| (i * 37 + 5) as u8);
        assert_eq!(BlockMXFP4::from_bytes(&a).to_bytes(), a);
        let mut x = BlockMXFP4::from_bytes(&[0u8; 17]);
        x.qs[0] = 0xF7;
        let q = x.quants();
        assert_eq!((q[0], q[16], q[1]), (12, -12, 0));
    }

    #[test]
    fn nvfp4_sub_blocks_hold_low_then_high_nibbles() {
        let a: [u8; 36] = std::array::from_fn(|i| (i * 41 + 3) as u8);
        assert_eq!(BlockNVFP4::from_bytes(&a).to_bytes(), a);
        let mut x = BlockNVFP4::from_bytes(&[0u8; 36]);
        x.qs[8] = 0x71;
        let q = x.quants();
        assert_eq!((q[16], q[24], q[17]), (1, 12, 0));
    }
}
