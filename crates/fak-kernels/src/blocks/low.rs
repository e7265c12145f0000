//! The 2- and 3-bit k-quants: Q2_K and Q3_K (256 elements per super-block,
//! 16 sub-blocks of 16).
//!
//! Both keep each element's low 2 bits in `qs`, four elements to a byte:
//!
//! ```text
//!   element e = 128·n + 32·j + l      (n in 0..2, j in 0..4, l in 0..32)
//!   low bits  = (qs[32·n + l] >> 2·j) & 3
//!   sub-block = e / 16                (its scale: scales[e / 16])
//! ```
//!
//! Q2_K: `x = d·(sc & 15)·q − dmin·(sc >> 4)`, `q` in `0..4`; each scale byte
//! holds a 4-bit scale (low) and a 4-bit min (high).
//!
//! Q3_K: `x = d·(s − 32)·q`, `q = low bits − 4·(1 − hbit)` in `-4..4`, where
//! `hbit` is bit `e / 32` of `hmask[e % 32]`; the 16 six-bit scales `s` are
//! packed in 12 bytes: the low 4 bits of scales 0-7 are the low nibbles of
//! bytes 0-7 and of scales 8-15 the high nibbles; the top 2 bits of scale
//! `k` are bits `2·(k / 4)` of byte `8 + k % 4`.

use super::{put, take, u16_at};

/// Q2_K: 256 elements in 84 bytes.
///
/// Bytes: `scales` (16) at 0, `qs` (64) at 16, `d` at 80, `dmin` at 82.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockQ2_K {
    /// Per sub-block: 4-bit scale (low nibble), 4-bit min (high nibble).
    pub scales: [u8; 16],
    /// 2-bit quants, four to a byte (see the module docs).
    pub qs: [u8; 64],
    /// Super-block scale of the scales, f16 bits.
    pub d: u16,
    /// Super-block scale of the mins, f16 bits.
    pub dmin: u16,
}
const _: () = assert!(size_of::<BlockQ2_K>() == BlockQ2_K::BYTES);

impl BlockQ2_K {
    /// Encoded size in bytes.
    pub const BYTES: usize = 84;
    /// Elements per block.
    pub const ELEMS: usize = 256;

    /// Decodes a block from its 84 on-disk bytes.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        BlockQ2_K {
            scales: take::<0, 16, 84>(b),
            qs: take::<16, 64, 84>(b),
            d: u16_at::<80, 84>(b),
            dmin: u16_at::<82, 84>(b),
        }
    }

    /// Encodes the block into its 84 on-disk bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        put::<0, 16, 84>(&mut b, &self.scales);
        put::<16, 64, 84>(&mut b, &self.qs);
        put::<80, 2, 84>(&mut b, &self.d.to_le_bytes());
        put::<82, 2, 84>(&mut b, &self.dmin.to_le_bytes());
        b
    }

    /// Unsigned quants (in `0..4`), one per element, in element order.
    #[inline]
    pub fn quants(&self) -> [i8; 256] {
        low_bits(&self.qs)
    }
}

/// The low 2 bits of every element, in element order.
#[inline]
fn low_bits(qs: &[u8; 64]) -> [i8; 256] {
    let mut out = [0i8; 256];
    for (e, v) in out.iter_mut().enumerate() {
        let (n, j, l) = (e / 128, (e / 32) % 4, e % 32);
        *v = ((qs[32 * n + l] >> (2 * j)) & 3) as i8;
    }
    out
}

/// Q3_K: 256 elements in 110 bytes.
///
/// Bytes: `hmask` (32) at 0, `qs` (64) at 32, `scales` (12) at 96, `d` at 108.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockQ3_K {
    /// High bit of each quant: element `e` in bit `e / 32` of byte `e % 32`.
    pub hmask: [u8; 32],
    /// Low 2 bits of the quants, four to a byte.
    pub qs: [u8; 64],
    /// 16 six-bit scales, packed (see the module docs).
    pub scales: [u8; 12],
    /// Super-block scale, f16 bits.
    pub d: u16,
}
const _: () = assert!(size_of::<BlockQ3_K>() == BlockQ3_K::BYTES);

impl BlockQ3_K {
    /// Encoded size in bytes.
    pub const BYTES: usize = 110;
    /// Elements per block.
    pub const ELEMS: usize = 256;

    /// Decodes a block from its 110 on-disk bytes.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        BlockQ3_K {
            hmask: take::<0, 32, 110>(b),
            qs: take::<32, 64, 110>(b),
            scales: take::<96, 12, 110>(b),
            d: u16_at::<108, 110>(b),
        }
    }

    /// Encodes the block into its 110 on-disk bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        put::<0, 32, 110>(&mut b, &self.hmask);
        put::<32, 64, 110>(&mut b, &self.qs);
        put::<96, 12, 110>(&mut b, &self.scales);
        put::<108, 2, 110>(&mut b, &self.d.to_le_bytes());
        b
    }

    /// Signed quants (in `-4..4`), one per element, in element order.
    #[inline]
    pub fn quants(&self) -> [i8; 256] {
        let mut out = low_bits(&self.qs);
        for (e, v) in out.iter_mut().enumerate() {
            if self.hmask[e % 32] & (1 << (e / 32)) == 0 {
                *v -= 4;
            }
        }
        out
    }

    /// The 16 sub-block scales minus 32 (in `-32..32`).
    #[inline]
    pub fn signed_scales(&self) -> [i8; 16] {
        let s = &self.scales;
        let mut out = [0i8; 16];
        for (k, v) in out.iter_mut().enumerate() {
            let low = if k < 8 { s[k] & 0x0F } else { s[k - 8] >> 4 };
            let high = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
            *v = (low | (high << 4)) as i8 - 32;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip() {
        let b2: [u8; 84] = std::array::from_fn(|i| (i * 37 + 5) as u8);
        assert_eq!(BlockQ2_K::from_bytes(&b2).to_bytes(), b2);
        let b3: [u8; 110] = std::array::from_fn(|i| (i * 53 + 11) as u8);
        assert_eq!(BlockQ3_K::from_bytes(&b3).to_bytes(), b3);
    }

    #[test]
    fn q3_k_scales_follow_ggmls_unpacking() {
        // ggml unpacks the 12 bytes as four u32 words (kmask1 0x03030303,
        // kmask2 0x0f0f0f0f); the per-scale reading above must agree.
        let b: [u8; 110] = std::array::from_fn(|i| (i * 97 + 3) as u8);
        let x = BlockQ3_K::from_bytes(&b);
        let w = |k: usize| u32::from_le_bytes(x.scales[4 * k..4 * k + 4].try_into().unwrap());
        let (a0, a1, tmp) = (w(0), w(1), w(2));
        let (m1, m2) = (0x0303_0303u32, 0x0f0f_0f0fu32);
        let words = [
            (a0 & m2) | (((tmp) & m1) << 4),
            (a1 & m2) | (((tmp >> 2) & m1) << 4),
            ((a0 >> 4) & m2) | (((tmp >> 4) & m1) << 4),
            ((a1 >> 4) & m2) | (((tmp >> 6) & m1) << 4),
        ];
        let want: Vec<i8> = words
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .map(|v| v as i8 - 32)
            .collect();
        assert_eq!(x.signed_scales().to_vec(), want);
    }

    #[test]
    fn q3_k_high_bit_clear_subtracts_four() {
        let mut x = BlockQ3_K::from_bytes(&[0u8; 110]);
        x.qs[0] = 0b11_10_01_11; // elements 0, 32, 64, 96: 3, 1, 2, 3
        x.hmask[0] = 0b0000_0101; // elements 0 and 64 keep their high bit
        let q = x.quants();
        assert_eq!([q[0], q[32], q[64], q[96], q[1]], [3, 1 - 4, 2, 3 - 4, -4]);
    }
}
