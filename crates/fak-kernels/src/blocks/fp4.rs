//! MXFP4, the OCP microscaling 4-bit float format: 32 elements per block,
//! each a 4-bit E2M1 code, under one shared power-of-two scale (E8M0).
//!
//! ```text
//!   block (17 B):  e (E8M0 exponent byte) | qs[16]
//!   element j      low nibble of qs[j],  element j + 16: high nibble
//!   x = MXFP4_LEVELS[code] · 2^(e − 128)
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
}
