//! The 256-element super-block formats ("k-quants"): Q4_K, Q5_K, Q6_K and
//! the activation format Q8_K.
//!
//! Q4_K and Q5_K split a super-block into 8 sub-blocks of 32 elements, each
//! with a 6-bit scale and a 6-bit min, packed into 12 bytes:
//!
//! ```text
//!   byte    0..4             4..8             8..12
//!   j < 4   sc[j]   (bits 0-5)  m[j]     (bits 0-5)
//!   j >= 4  sc[j]>>4 (bits 6-7 of byte j-4)
//!                            m[j]>>4 (bits 6-7 of byte j)
//!                                             sc[j]&15 | (m[j]&15)<<4  (byte j+4)
//! ```
//!
//! and `x = d * sc[s] * q - dmin * m[s]` for sub-block `s = e / 32`.
//! The 4-bit quants of 64 consecutive elements share 32 bytes: element
//! `64c + l` is the low nibble of `qs[32c + l]`, element `64c + 32 + l` the
//! high nibble. Q5_K adds bit 4 of element `64c + l` as bit `2c` of
//! `qh[l]` and of element `64c + 32 + l` as bit `2c + 1`.
//!
//! Q6_K has 16 sub-blocks of 16 with signed 8-bit scales, `x = d * sc[e/16]
//! * (q - 32)`; in each 128-element half `h` (`ql' = ql[64h..]`,
//! `qh' = qh[32h..]`), for `l` in `0..32`:
//!
//! ```text
//!   element  low 4 bits          high 2 bits
//!   l        ql'[l]      & 15    qh'[l]      & 3
//!   l + 32   ql'[l + 32] & 15    qh'[l] >> 2 & 3
//!   l + 64   ql'[l]      >> 4    qh'[l] >> 4 & 3
//!   l + 96   ql'[l + 32] >> 4    qh'[l] >> 6
//! ```
//!
//! Q8_K (`x = d * q`) keeps `d` as a full `f32` and the sums of each group
//! of 16 quants (`bsums`) for the min term of the Q4_K/Q5_K dot products.

use super::{from_i8, put, take, to_i8, u16_at};

/// Unpacks the 8 six-bit scales and 8 six-bit mins of a Q4_K/Q5_K
/// super-block (`scales`: the 12 packed bytes) into `(scales, mins)`, one
/// per 32-element sub-block.
#[inline]
pub fn get_scale_min_k4(scales: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    for j in 0..4 {
        sc[j] = scales[j] & 63;
        m[j] = scales[j + 4] & 63;
        sc[j + 4] = (scales[j + 8] & 0x0F) | ((scales[j] >> 6) << 4);
        m[j + 4] = (scales[j + 8] >> 4) | ((scales[j + 4] >> 6) << 4);
    }
    (sc, m)
}

/// Packs 8 scales and 8 mins (each in `0..64`; higher bits are dropped)
/// into the 12-byte Q4_K/Q5_K form; the inverse of [`get_scale_min_k4`].
#[inline]
pub(crate) fn pack_scale_min_k4(sc: &[u8; 8], m: &[u8; 8]) -> [u8; 12] {
    let mut out = [0u8; 12];
    for j in 0..4 {
        let (lo_s, hi_s) = (sc[j] & 63, sc[j + 4] & 63);
        let (lo_m, hi_m) = (m[j] & 63, m[j + 4] & 63);
        out[j] = lo_s | ((hi_s >> 4) << 6);
        out[j + 4] = lo_m | ((hi_m >> 4) << 6);
        out[j + 8] = (hi_s & 0x0F) | ((hi_m & 0x0F) << 4);
    }
    out
}

/// Splits 128 nibble-pair bytes into 256 four-bit values in element order
/// (`qs[32c + l]`: low → `64c + l`, high → `64c + 32 + l`).
#[inline]
fn unpack_k_nibbles(qs: &[u8; 128]) -> [u8; 256] {
    let mut out = [0u8; 256];
    for (dst, src) in out
        .as_chunks_mut::<64>()
        .0
        .iter_mut()
        .zip(qs.as_chunks::<32>().0)
    {
        for l in 0..32 {
            dst[l] = src[l] & 0x0F;
            dst[l + 32] = src[l] >> 4;
        }
    }
    out
}

/// Q4_K: 256 elements in 144 bytes.
///
/// Bytes: `d` (f16) at 0, `dmin` (f16) at 2, `scales` (12) at 4, `qs` (128) at 16.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockQ4_K {
    /// Super-block scale for the sub-block scales, f16 bits.
    pub d: u16,
    /// Super-block scale for the sub-block mins, f16 bits.
    pub dmin: u16,
    /// 8 six-bit scales and 8 six-bit mins, packed (see module docs).
    pub scales: [u8; 12],
    /// 4-bit quants, nibble pairs (see module docs).
    pub qs: [u8; 128],
}
const _: () = assert!(size_of::<BlockQ4_K>() == BlockQ4_K::BYTES);

impl BlockQ4_K {
    /// Encoded size in bytes.
    pub const BYTES: usize = 144;
    /// Elements per block.
    pub const ELEMS: usize = 256;

    /// Decodes a block from its 144 on-disk bytes.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        BlockQ4_K {
            d: u16_at::<0, 144>(b),
            dmin: u16_at::<2, 144>(b),
            scales: take::<4, 12, 144>(b),
            qs: take::<16, 128, 144>(b),
        }
    }

    /// Encodes the block into its 144 on-disk bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        put::<0, 2, 144>(&mut b, &self.d.to_le_bytes());
        put::<2, 2, 144>(&mut b, &self.dmin.to_le_bytes());
        put::<4, 12, 144>(&mut b, &self.scales);
        put::<16, 128, 144>(&mut b, &self.qs);
        b
    }

    /// Quants (in `0..16`), one per element, in element order.
    #[inline]
    pub fn quants(&self) -> [u8; 256] {
        unpack_k_nibbles(&self.qs)
    }
}

/// Q5_K: 256 elements in 176 bytes.
///
/// Bytes: `d` at 0, `dmin` at 2, `scales` (12) at 4, `qh` (32) at 16, `qs` (128) at 48.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockQ5_K {
    /// Super-block scale for the sub-block scales, f16 bits.
    pub d: u16,
    /// Super-block scale for the sub-block mins, f16 bits.
    pub dmin: u16,
    /// 8 six-bit scales and 8 six-bit mins, packed (see module docs).
    pub scales: [u8; 12],
    /// Bit 4 of the quants (see module docs).
    pub qh: [u8; 32],
    /// Low 4 bits of the quants, nibble pairs as in Q4_K.
    pub qs: [u8; 128],
}
const _: () = assert!(size_of::<BlockQ5_K>() == BlockQ5_K::BYTES);

impl BlockQ5_K {
    /// Encoded size in bytes.
    pub const BYTES: usize = 176;
    /// Elements per block.
    pub const ELEMS: usize = 256;

    /// Decodes a block from its 176 on-disk bytes.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        BlockQ5_K {
            d: u16_at::<0, 176>(b),
            dmin: u16_at::<2, 176>(b),
            scales: take::<4, 12, 176>(b),
            qh: take::<16, 32, 176>(b),
            qs: take::<48, 128, 176>(b),
        }
    }

    /// Encodes the block into its 176 on-disk bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        put::<0, 2, 176>(&mut b, &self.d.to_le_bytes());
        put::<2, 2, 176>(&mut b, &self.dmin.to_le_bytes());
        put::<4, 12, 176>(&mut b, &self.scales);
        put::<16, 32, 176>(&mut b, &self.qh);
        put::<48, 128, 176>(&mut b, &self.qs);
        b
    }

    /// Quants (in `0..32`), one per element, in element order.
    #[inline]
    pub fn quants(&self) -> [u8; 256] {
        let mut out = unpack_k_nibbles(&self.qs);
        for (c, dst) in out.as_chunks_mut::<64>().0.iter_mut().enumerate() {
            for l in 0..32 {
                dst[l] |= ((self.qh[l] >> (2 * c)) & 1) << 4;
                dst[l + 32] |= ((self.qh[l] >> (2 * c + 1)) & 1) << 4;
            }
        }
        out
    }
}

/// Q6_K: 256 elements in 210 bytes.
///
/// Bytes: `ql` (128) at 0, `qh` (64) at 128, `scales` (16 × i8) at 192, `d` at 208.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockQ6_K {
    /// Low 4 bits of the quants (see module docs).
    pub ql: [u8; 128],
    /// High 2 bits of the quants (see module docs).
    pub qh: [u8; 64],
    /// Signed scale of each 16-element sub-block.
    pub scales: [i8; 16],
    /// Super-block scale, f16 bits.
    pub d: u16,
}
const _: () = assert!(size_of::<BlockQ6_K>() == BlockQ6_K::BYTES);

impl BlockQ6_K {
    /// Encoded size in bytes.
    pub const BYTES: usize = 210;
    /// Elements per block.
    pub const ELEMS: usize = 256;

    /// Decodes a block from its 210 on-disk bytes.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        BlockQ6_K {
            ql: take::<0, 128, 210>(b),
            qh: take::<128, 64, 210>(b),
            scales: to_i8(take::<192, 16, 210>(b)),
            d: u16_at::<208, 210>(b),
        }
    }

    /// Encodes the block into its 210 on-disk bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        put::<0, 128, 210>(&mut b, &self.ql);
        put::<128, 64, 210>(&mut b, &self.qh);
        put::<192, 16, 210>(&mut b, &from_i8(&self.scales));
        put::<208, 2, 210>(&mut b, &self.d.to_le_bytes());
        b
    }

    /// Signed quants `q - 32` (in `-32..32`), one per element, in element order.
    #[inline]
    pub fn quants(&self) -> [i8; 256] {
        let mut out = [0i8; 256];
        let halves = out.as_chunks_mut::<128>().0.iter_mut();
        let src = self
            .ql
            .as_chunks::<64>()
            .0
            .iter()
            .zip(self.qh.as_chunks::<32>().0);
        for (dst, (ql, qh)) in halves.zip(src) {
            for l in 0..32 {
                let h = qh[l];
                dst[l] = ((ql[l] & 0x0F) | ((h & 3) << 4)) as i8 - 32;
                dst[l + 32] = ((ql[l + 32] & 0x0F) | (((h >> 2) & 3) << 4)) as i8 - 32;
                dst[l + 64] = ((ql[l] >> 4) | (((h >> 4) & 3) << 4)) as i8 - 32;
                dst[l + 96] = ((ql[l + 32] >> 4) | ((h >> 6) << 4)) as i8 - 32;
            }
        }
        out
    }
}

/// Q8_K: 256 elements in 292 bytes, `x = d * q`.
///
/// Bytes: `d` (f32) at 0, `qs` (256 × i8) at 4, `bsums` (16 × i16) at 260.
/// The in-memory struct is 4-aligned; the on-disk form has no alignment.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockQ8_K {
    /// Scale (a full `f32`, unlike the other formats).
    pub d: f32,
    /// One signed quant per element.
    pub qs: [i8; 256],
    /// `bsums[g]` = sum of `qs[16g..16g + 16]`.
    pub bsums: [i16; 16],
}
const _: () = assert!(size_of::<BlockQ8_K>() == BlockQ8_K::BYTES);

impl BlockQ8_K {
    /// Encoded size in bytes.
    pub const BYTES: usize = 292;
    /// Elements per block.
    pub const ELEMS: usize = 256;

    /// Decodes a block from its 292 on-disk bytes.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        let raw = take::<260, 32, 292>(b);
        let mut bsums = [0i16; 16];
        for (s, pair) in bsums.iter_mut().zip(raw.chunks_exact(2)) {
            if let [lo, hi] = *pair {
                *s = i16::from_le_bytes([lo, hi]);
            }
        }
        BlockQ8_K {
            d: f32::from_le_bytes(take::<0, 4, 292>(b)),
            qs: to_i8(take::<4, 256, 292>(b)),
            bsums,
        }
    }

    /// Encodes the block into its 292 on-disk bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        let mut raw = [0u8; 32];
        for (pair, s) in raw.chunks_exact_mut(2).zip(self.bsums) {
            pair.copy_from_slice(&s.to_le_bytes());
        }
        put::<0, 4, 292>(&mut b, &self.d.to_le_bytes());
        put::<4, 256, 292>(&mut b, &from_i8(&self.qs));
        put::<260, 32, 292>(&mut b, &raw);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_min_pack_round_trips() {
        let sc: [u8; 8] = [0, 63, 17, 32, 48, 5, 63, 1];
        let m: [u8; 8] = [63, 0, 31, 16, 2, 60, 33, 47];
        let packed = pack_scale_min_k4(&sc, &m);
        assert_eq!(get_scale_min_k4(&packed), (sc, m));
    }

    #[test]
    fn q6_k_element_order() {
        let mut b = BlockQ6_K {
            ql: [0; 128],
            qh: [0; 64],
            scales: [0; 16],
            d: 0,
        };
        // Second half, l = 1: ql'[1] = 0x21, ql'[33] = 0x43, qh'[1] = 0b11_10_01_00.
        b.ql[64 + 1] = 0x21;
        b.ql[64 + 33] = 0x43;
        b.qh[32 + 1] = 0b1110_0100;
        let q = b.quants();
        assert_eq!(q[128 + 1], 0x01 - 32);
        assert_eq!(q[128 + 33], (0x03 | 1 << 4) - 32);
        assert_eq!(q[128 + 65], (0x02 | 2 << 4) - 32);
        assert_eq!(q[128 + 97], (0x04 | 3 << 4) - 32);
        assert_eq!(q[0], -32);
        assert_eq!(BlockQ6_K::from_bytes(&b.to_bytes()), b);
    }

    #[test]
    fn q5_k_high_bits() {
        let mut b = BlockQ5_K {
            d: 0,
            dmin: 0,
            scales: [0; 12],
            qh: [0; 32],
            qs: [0; 128],
        };
        b.qh[3] = 0b0000_0110; // bit 1: element 32 + 3; bit 2: element 64 + 3
        b.qs[32 + 3] = 0x5A; // element 64 + 3 low nibble A, element 96 + 3 = 5
        let q = b.quants();
        assert_eq!(q[3], 0);
        assert_eq!(q[35], 16);
        assert_eq!(q[67], 16 + 0xA);
        assert_eq!(q[99], 5);
        assert_eq!(BlockQ5_K::from_bytes(&b.to_bytes()), b);
    }

    #[test]
    fn q8_k_bytes_round_trip() {
        let mut raw = [0u8; 292];
        for (i, v) in raw.iter_mut().enumerate() {
            *v = (i * 37 % 251) as u8;
        }
        raw[0..4].copy_from_slice(&0.5f32.to_le_bytes());
        let b = BlockQ8_K::from_bytes(&raw);
        assert_eq!(b.d, 0.5);
        assert_eq!(b.bsums[0], i16::from_le_bytes([raw[260], raw[261]]));
        assert_eq!(b.to_bytes(), raw);
    }
}
