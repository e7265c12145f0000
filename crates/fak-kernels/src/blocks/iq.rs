//! The non-linear 4-bit formats: IQ4_NL (32 elements per block) and IQ4_XS
//! (256 per super-block). A 4-bit index picks one of 16 fixed levels
//! ([`IQ4_LEVELS`], ggml's `kvalues_iq4nl`), spaced more finely near zero
//! than a uniform grid:
//!
//! ```text
//!   IQ4_NL   x = d · L[q]                          q: low nibble of qs[j] for
//!   IQ4_XS   x = d · (ls − 32) · L[q]                 element j, high nibble for
//!                                                     j + 16 (per 32 elements)
//!   IQ4_XS's 6-bit ls of 32-element sub-block b: low 4 bits in nibble b % 2
//!   of scales_l[b / 2], high 2 bits in bits 2b..2b+2 of scales_h
//! ```

use super::{put, take, u16_at};

/// The 16 levels a 4-bit index selects (ggml's `kvalues_iq4nl`).
pub const IQ4_LEVELS: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// The levels of 32 elements from their 16 bytes of index pairs: element
/// `j` from the low nibble of `qs[j]`, element `j + 16` from its high one.
#[inline]
fn levels32(qs: &[u8; 16]) -> [i8; 32] {
    let mut out = [0i8; 32];
    for (j, &b) in qs.iter().enumerate() {
        out[j] = IQ4_LEVELS[usize::from(b & 0x0F)];
        out[j + 16] = IQ4_LEVELS[usize::from(b >> 4)];
    }
    out
}

/// IQ4_NL: 32 elements in 18 bytes, `x = d * IQ4_LEVELS[q]`.
///
/// Bytes: `d` (f16) at 0, `qs` (16 bytes of index pairs) at 2.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockIQ4_NL {
    /// Scale, f16 bits.
    pub d: u16,
    /// Indices: element `j` low nibble, element `j + 16` high.
    pub qs: [u8; 16],
}
const _: () = assert!(size_of::<BlockIQ4_NL>() == BlockIQ4_NL::BYTES);

impl BlockIQ4_NL {
    /// Encoded size in bytes.
    pub const BYTES: usize = 18;
    /// Elements per block.
    pub const ELEMS: usize = 32;

    /// Decodes a block from its 18 on-disk bytes.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        BlockIQ4_NL {
            d: u16_at::<0, 18>(b),
            qs: take::<2, 16, 18>(b),
        }
    }

    /// Encodes the block into its 18 on-disk bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        put::<0, 2, 18>(&mut b, &self.d.to_le_bytes());
        put::<2, 16, 18>(&mut b, &self.qs);
        b
    }

    /// The levels (in `-127..=113`), one per element, in element order.
    #[inline]
    pub fn quants(&self) -> [i8; 32] {
        levels32(&self.qs)
    }
}

/// IQ4_XS: 256 elements in 136 bytes, 8 sub-blocks of 32 with 6-bit scales.
///
/// Bytes: `d` (f16) at 0, `scales_h` (u16) at 2, `scales_l` (4) at 4, `qs`
/// (128) at 8.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockIQ4_XS {
    /// Super-block scale, f16 bits.
    pub d: u16,
    /// High 2 bits of each sub-block's scale.
    pub scales_h: u16,
    /// Low 4 bits of each sub-block's scale, two to a byte.
    pub scales_l: [u8; 4],
    /// Indices, 16 bytes per sub-block (as IQ4_NL's).
    pub qs: [u8; 128],
}
const _: () = assert!(size_of::<BlockIQ4_XS>() == BlockIQ4_XS::BYTES);

impl BlockIQ4_XS {
    /// Encoded size in bytes.
    pub const BYTES: usize = 136;
    /// Elements per block.
    pub const ELEMS: usize = 256;

    /// Decodes a block from its 136 on-disk bytes.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        BlockIQ4_XS {
            d: u16_at::<0, 136>(b),
            scales_h: u16_at::<2, 136>(b),
            scales_l: take::<4, 4, 136>(b),
            qs: take::<8, 128, 136>(b),
        }
    }

    /// Encodes the block into its 136 on-disk bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        put::<0, 2, 136>(&mut b, &self.d.to_le_bytes());
        put::<2, 2, 136>(&mut b, &self.scales_h.to_le_bytes());
        put::<4, 4, 136>(&mut b, &self.scales_l);
        put::<8, 128, 136>(&mut b, &self.qs);
        b
    }

    /// The 8 sub-block scales minus 32 (in `-32..32`).
    #[inline]
    pub fn signed_scales(&self) -> [i8; 8] {
        std::array::from_fn(|b| {
            let low = (self.scales_l[b / 2] >> (4 * (b % 2))) & 0x0F;
            let high = ((self.scales_h >> (2 * b)) & 3) as u8;
            (low | (high << 4)) as i8 - 32
        })
    }

    /// The levels, one per element, in element order.
    #[inline]
    pub fn quants(&self) -> [i8; 256] {
        let mut out = [0i8; 256];
        for (dst, src) in out
            .as_chunks_mut::<32>()
            .0
            .iter_mut()
            .zip(self.qs.as_chunks::<16>().0)
        {
            *dst = levels32(src);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip() {
        let a: [u8; 18] = std::array::from_fn(|i| (i * 31 + 7) as u8);
        assert_eq!(BlockIQ4_NL::from_bytes(&a).to_bytes(), a);
        let b: [u8; 136] = std::array::from_fn(|i| (i * 59 + 1) as u8);
        assert_eq!(BlockIQ4_XS::from_bytes(&b).to_bytes(), b);
    }

    #[test]
    fn indices_pick_levels_low_nibble_first() {
        let mut x = BlockIQ4_NL::from_bytes(&[0u8; 18]);
        x.qs[0] = 0xF8;
        let q = x.quants();
        assert_eq!((q[0], q[16], q[1]), (1, 113, -127));
    }

    #[test]
    fn iq4_xs_scales_follow_ggmls_pairwise_reading() {
        // ggml reads two scales at a time: ls1 = (l & 0xf) | ((h << 4) & 0x30),
        // ls2 = (l >> 4) | ((h << 2) & 0x30), then h >>= 4.
        let b: [u8; 136] = std::array::from_fn(|i| (i * 71 + 9) as u8);
        let x = BlockIQ4_XS::from_bytes(&b);
        let mut h = x.scales_h;
        let mut want = Vec::new();
        for ib in (0..8).step_by(2) {
            let l = x.scales_l[ib / 2];
            want.push(((l & 0xf) | (((h << 4) & 0x30) as u8)) as i8 - 32);
            want.push(((l >> 4) | (((h << 2) & 0x30) as u8)) as i8 - 32);
            h >>= 4;
        }
        assert_eq!(x.signed_scales().to_vec(), want);
    }
}
