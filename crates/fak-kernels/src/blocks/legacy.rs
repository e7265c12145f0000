//! The 32-element block formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1.
//!
//! The 4- and 5-bit formats split a block into two halves that share bytes:
//!
//! ```text
//!   qs[j] = (q[j + 16] << 4) | q[j]          j in 0..16
//!   qh    = little-endian u32, bit i = bit 4 of q[i]  (Q5_* only, i in 0..32)
//! ```
//!
//! so element `j` lives in the low nibble and element `j + 16` in the high
//! nibble of the same byte. Dequantized values are `d * (q - offset)`
//! (Q4_0: offset 8, Q5_0: 16) or `d * q + m` (Q4_1, Q5_1); Q8_0/Q8_1 store
//! signed bytes, Q8_1 also `s = d * sum(q)` for the dot products' min term.

use super::{from_i8, put, take, to_i8, u16_at};

/// Q4_0: 32 elements in 18 bytes, `x = d * (q - 8)`, `q` in `0..16`.
///
/// Bytes: `d` (f16) at 0, `qs` (16 bytes of nibble pairs) at 2.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockQ4_0 {
    /// Scale, f16 bits.
    pub d: u16,
    /// Nibbles: element `j` low, element `j + 16` high.
    pub qs: [u8; 16],
}
const _: () = assert!(size_of::<BlockQ4_0>() == BlockQ4_0::BYTES);

impl BlockQ4_0 {
    /// Encoded size in bytes.
    pub const BYTES: usize = 18;
    /// Elements per block.
    pub const ELEMS: usize = 32;

    /// Decodes a block from its 18 on-disk bytes.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        BlockQ4_0 {
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

    /// Signed quants `q - 8` (in `-8..8`), one per element, in element order.
    #[inline]
    pub fn quants(&self) -> [i8; 32] {
        unpack_nibbles(&self.qs).map(|q| q as i8 - 8)
    }
}

/// Q1_0: 128 elements in 18 bytes, one sign bit each: `x = d` where bit
/// `j` is set, else `x = −d`.
///
/// Bytes: `d` (f16) at 0, `qs` (16 bytes; element `j` is bit `j % 8` of
/// byte `j / 8`) at 2.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockQ1_0 {
    /// Scale, f16 bits.
    pub d: u16,
    /// Sign bits, element `j` at bit `j % 8` of byte `j / 8`.
    pub qs: [u8; 16],
}
const _: () = assert!(size_of::<BlockQ1_0>() == BlockQ1_0::BYTES);

impl BlockQ1_0 {
    /// Encoded size in bytes.
    pub const BYTES: usize = 18;
    /// Elements per block.
    pub const ELEMS: usize = 128;

    /// Decodes a block from its 18 on-disk bytes.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        BlockQ1_0 {
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

    /// The signs (`1` or `-1`), one per element, in element order.
    #[inline]
    pub fn quants(&self) -> [i8; 128] {
        std::array::from_fn(|j| {
            if (self.qs[j / 8] >> (j % 8)) & 1 == 1 {
                1
            } else {
                -1
            }
        })
    }
}

/// Q4_1: 32 elements in 20 bytes, `x = d * q + m`, `q` in `0..16`.
///
/// Bytes: `d` (f16) at 0, `m` (f16) at 2, `qs` at 4.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockQ4_1 {
    /// Scale, f16 bits.
    pub d: u16,
    /// Minimum (offset), f16 bits.
    pub m: u16,
    /// Nibbles: element `j` low, element `j + 16` high.
    pub qs: [u8; 16],
}
const _: () = assert!(size_of::<BlockQ4_1>() == BlockQ4_1::BYTES);

impl BlockQ4_1 {
    /// Encoded size in bytes.
    pub const BYTES: usize = 20;
    /// Elements per block.
    pub const ELEMS: usize = 32;

    /// Decodes a block from its 20 on-disk bytes.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        BlockQ4_1 {
            d: u16_at::<0, 20>(b),
            m: u16_at::<2, 20>(b),
            qs: take::<4, 16, 20>(b),
        }
    }

    /// Encodes the block into its 20 on-disk bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        put::<0, 2, 20>(&mut b, &self.d.to_le_bytes());
        put::<2, 2, 20>(&mut b, &self.m.to_le_bytes());
        put::<4, 16, 20>(&mut b, &self.qs);
        b
    }

    /// Unsigned quants (in `0..16`), one per element, in element order.
    #[inline]
    pub fn quants(&self) -> [u8; 32] {
        unpack_nibbles(&self.qs)
    }
}

/// Q5_0: 32 elements in 22 bytes, `x = d * (q - 16)`, `q` in `0..32`.
///
/// Bytes: `d` (f16) at 0, `qh` (bit 4 of each quant, LE u32) at 2, `qs` at 6.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockQ5_0 {
    /// Scale, f16 bits.
    pub d: u16,
    /// High bits: bit `i` of the little-endian u32 is bit 4 of element `i`.
    pub qh: [u8; 4],
    /// Low nibbles: element `j` low, element `j + 16` high.
    pub qs: [u8; 16],
}
const _: () = assert!(size_of::<BlockQ5_0>() == BlockQ5_0::BYTES);

impl BlockQ5_0 {
    /// Encoded size in bytes.
    pub const BYTES: usize = 22;
    /// Elements per block.
    pub const ELEMS: usize = 32;

    /// Decodes a block from its 22 on-disk bytes.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        BlockQ5_0 {
            d: u16_at::<0, 22>(b),
            qh: take::<2, 4, 22>(b),
            qs: take::<6, 16, 22>(b),
        }
    }

    /// Encodes the block into its 22 on-disk bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        put::<0, 2, 22>(&mut b, &self.d.to_le_bytes());
        put::<2, 4, 22>(&mut b, &self.qh);
        put::<6, 16, 22>(&mut b, &self.qs);
        b
    }

    /// Signed quants `q - 16` (in `-16..16`), one per element, in element order.
    #[inline]
    pub fn quants(&self) -> [i8; 32] {
        unpack_5bit(&self.qs, self.qh).map(|q| q as i8 - 16)
    }
}

/// Q5_1: 32 elements in 24 bytes, `x = d * q + m`, `q` in `0..32`.
///
/// Bytes: `d` (f16) at 0, `m` (f16) at 2, `qh` at 4, `qs` at 8.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockQ5_1 {
    /// Scale, f16 bits.
    pub d: u16,
    /// Minimum (offset), f16 bits.
    pub m: u16,
    /// High bits: bit `i` of the little-endian u32 is bit 4 of element `i`.
    pub qh: [u8; 4],
    /// Low nibbles: element `j` low, element `j + 16` high.
    pub qs: [u8; 16],
}
const _: () = assert!(size_of::<BlockQ5_1>() == BlockQ5_1::BYTES);

impl BlockQ5_1 {
    /// Encoded size in bytes.
    pub const BYTES: usize = 24;
    /// Elements per block.
    pub const ELEMS: usize = 32;

    /// Decodes a block from its 24 on-disk bytes.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        BlockQ5_1 {
            d: u16_at::<0, 24>(b),
            m: u16_at::<2, 24>(b),
            qh: take::<4, 4, 24>(b),
            qs: take::<8, 16, 24>(b),
        }
    }

    /// Encodes the block into its 24 on-disk bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        put::<0, 2, 24>(&mut b, &self.d.to_le_bytes());
        put::<2, 2, 24>(&mut b, &self.m.to_le_bytes());
        put::<4, 4, 24>(&mut b, &self.qh);
        put::<8, 16, 24>(&mut b, &self.qs);
        b
    }

    /// Unsigned quants (in `0..32`), one per element, in element order.
    #[inline]
    pub fn quants(&self) -> [u8; 32] {
        unpack_5bit(&self.qs, self.qh)
    }
}

/// Q8_0: 32 elements in 34 bytes, `x = d * q`, `q` a signed byte.
///
/// Bytes: `d` (f16) at 0, `qs` (32 × i8) at 2.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockQ8_0 {
    /// Scale, f16 bits.
    pub d: u16,
    /// One signed quant per element.
    pub qs: [i8; 32],
}
const _: () = assert!(size_of::<BlockQ8_0>() == BlockQ8_0::BYTES);

impl BlockQ8_0 {
    /// Encoded size in bytes.
    pub const BYTES: usize = 34;
    /// Elements per block.
    pub const ELEMS: usize = 32;

    /// Decodes a block from its 34 on-disk bytes.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        BlockQ8_0 {
            d: u16_at::<0, 34>(b),
            qs: to_i8(take::<2, 32, 34>(b)),
        }
    }

    /// Encodes the block into its 34 on-disk bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        put::<0, 2, 34>(&mut b, &self.d.to_le_bytes());
        put::<2, 32, 34>(&mut b, &from_i8(&self.qs));
        b
    }

    /// `n` zero blocks (`d = +0.0`, every quant 0), from the allocator's
    /// zeroed pages: nothing is written, so a large buffer (a KV pool)
    /// takes physical memory only as its pages are first written, as
    /// `vec![0u16; n]` does. (`vec![block; n]` writes every block, which
    /// makes a whole pool resident at once.)
    ///
    /// Returns `None` if `n` blocks overflow `isize` or the allocator
    /// refuses them.
    pub fn zeroed_vec(n: usize) -> Option<Vec<BlockQ8_0>> {
        let layout = std::alloc::Layout::array::<BlockQ8_0>(n).ok()?;
        if layout.size() == 0 {
            return Some(Vec::new());
        }
        // SAFETY: `layout` has a non-zero size (checked above).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<BlockQ8_0>();
        if ptr.is_null() {
            return None;
        }
        // SAFETY: `ptr` was allocated by the global allocator with
        // `Layout::array::<BlockQ8_0>(n)`, the layout `Vec<BlockQ8_0>` uses
        // for capacity `n` (so its drop frees it with the same layout); all
        // `n` elements are initialized, since all-zero bytes are a valid
        // `BlockQ8_0` (a `u16` and `i8`s, no padding: size 34 = 2 + 32).
        Some(unsafe { Vec::from_raw_parts(ptr, n, n) })
    }
}

/// Q8_1: 32 elements in 36 bytes, `x = d * q`; `s = d * sum(q)` is stored
/// for the min term of the Q4_1/Q5_1 dot products.
///
/// Bytes: `d` (f16) at 0, `s` (f16) at 2, `qs` (32 × i8) at 4.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockQ8_1 {
    /// Scale, f16 bits.
    pub d: u16,
    /// `d * sum(qs)`, f16 bits.
    pub s: u16,
    /// One signed quant per element.
    pub qs: [i8; 32],
}
const _: () = assert!(size_of::<BlockQ8_1>() == BlockQ8_1::BYTES);

impl BlockQ8_1 {
    /// Encoded size in bytes.
    pub const BYTES: usize = 36;
    /// Elements per block.
    pub const ELEMS: usize = 32;

    /// Decodes a block from its 36 on-disk bytes.
    #[inline]
    pub fn from_bytes(b: &[u8; Self::BYTES]) -> Self {
        BlockQ8_1 {
            d: u16_at::<0, 36>(b),
            s: u16_at::<2, 36>(b),
            qs: to_i8(take::<4, 32, 36>(b)),
        }
    }

    /// Encodes the block into its 36 on-disk bytes.
    #[inline]
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        put::<0, 2, 36>(&mut b, &self.d.to_le_bytes());
        put::<2, 2, 36>(&mut b, &self.s.to_le_bytes());
        put::<4, 32, 36>(&mut b, &from_i8(&self.qs));
        b
    }
}

/// Splits 16 nibble-pair bytes into 32 values: `qs[j]` low → `j`, high → `j + 16`.
#[inline]
fn unpack_nibbles(qs: &[u8; 16]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for l in 0..16 {
        out[l] = qs[l] & 0x0F;
        out[l + 16] = qs[l] >> 4;
    }
    out
}

/// Combines low nibbles and the `qh` bit plane into 32 five-bit values.
#[inline]
fn unpack_5bit(qs: &[u8; 16], qh: [u8; 4]) -> [u8; 32] {
    let qh = u32::from_le_bytes(qh);
    let mut out = unpack_nibbles(qs);
    for (e, q) in out.iter_mut().enumerate() {
        *q |= (((qh >> e) & 1) << 4) as u8;
    }
    out
}

/// Packs 32 five-bit values into low nibbles and the `qh` bit plane (the
/// inverse of `unpack_5bit`; bits above 4 are ignored).
#[inline]
pub(crate) fn pack_5bit(q: &[u8; 32]) -> ([u8; 16], [u8; 4]) {
    let qs = pack_nibbles(q);
    let mut qh = 0u32;
    for (i, v) in q.iter().enumerate() {
        qh |= u32::from((v >> 4) & 1) << i;
    }
    (qs, qh.to_le_bytes())
}

/// Packs 32 values' low nibbles into 16 bytes (`j` low, `j + 16` high).
#[inline]
fn pack_nibbles(q: &[u8; 32]) -> [u8; 16] {
    let mut qs = [0u8; 16];
    let (lo, hi) = q.split_at(16);
    for ((b, l), h) in qs.iter_mut().zip(lo).zip(hi) {
        *b = (l & 0x0F) | ((h & 0x0F) << 4);
    }
    qs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q5_unpack_inverts_pack() {
        let q: [u8; 32] = std::array::from_fn(|i| (i as u8 * 7 + 3) % 32);
        let (qs, qh) = pack_5bit(&q);
        assert_eq!(unpack_5bit(&qs, qh), q);
        let b = BlockQ5_1 {
            d: 0x3C00,
            m: 0xBC00,
            qh,
            qs,
        };
        assert_eq!(BlockQ5_1::from_bytes(&b.to_bytes()), b);
        assert_eq!(b.quants(), q);
    }

    #[test]
    fn q4_0_nibble_order() {
        let mut qs = [0u8; 16];
        qs[0] = 0xF1; // element 0 = 1, element 16 = 15
        let b = BlockQ4_0 { d: 0, qs };
        let q = b.quants();
        assert_eq!(q[0], 1 - 8);
        assert_eq!(q[16], 15 - 8);
        assert_eq!(q[1], -8);
        let bytes = b.to_bytes();
        assert_eq!(bytes[2], 0xF1);
        assert_eq!(BlockQ4_0::from_bytes(&bytes), b);
    }

    #[test]
    fn q8_1_field_order() {
        let mut raw = [0u8; 36];
        raw[0] = 0x01;
        raw[1] = 0x3C;
        raw[2] = 0x02;
        raw[3] = 0xC0;
        raw[4] = 0xFF;
        let b = BlockQ8_1::from_bytes(&raw);
        assert_eq!(b.d, 0x3C01);
        assert_eq!(b.s, 0xC002);
        assert_eq!(b.qs[0], -1);
        assert_eq!(b.to_bytes(), raw);
    }
}
