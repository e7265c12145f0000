//! The codebook ("grid") formats: IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
//! IQ3_XXS and IQ3_S. Every one stores 256 weights per super-block as
//! indices into a codebook of magnitudes (8 or 4 values per entry), one sign
//! bit per value (IQ2, IQ3) or a ±1/8 shift per group (IQ1), and odd
//! sub-block scales `2s + 1`.
//!
//! Decoding a super-block gives the same integers for every format: 8
//! [`Sub32`]s of 32 values, each value a magnitude and a sign byte (8 to a
//! `u64`, as the codebook and sign tables hold them), two scale codes per
//! sub-block and, for IQ1, a shift sign per 8 values:
//!
//! ```text
//!   q        = mag · sign                         (IQ2 ±8..43, IQ3 ±1..62, IQ1 -1..1)
//!   weight   = d · (2s + 1) · FACTOR · (q + shift / 8)
//!     FACTOR: IQ2 1/8, IQ3_XXS 1/4, IQ3_S and IQ1 1;  shift: IQ1 ±1, else 0
//! ```
//!
//! Layouts (bytes; `d` is an f16 super-block scale):
//!
//! ```text
//!   IQ2_XXS  66: d, then per 32 values two u32: 4 index bytes; 4×7 sign bits | s << 28
//!   IQ2_XS   74: d, 32 u16 (9-bit index | 7 sign bits << 9), 8 scale bytes (s, s' per 32)
//!   IQ2_S    82: d, 32 index bytes, 32 sign bytes, 8 high-index bytes (2 bits each), 8 scale bytes
//!   IQ3_XXS  98: d, 64 index bytes (two 4-value entries per 8), 8 u32 (4×7 sign bits | s << 28)
//!   IQ3_S   110: d, 64 index bytes, 8 high-index bytes (1 bit each), 32 sign bytes, 4 scale bytes
//!   IQ1_S    50: d, 32 index bytes, 8 u16 (4×3 high index bits | s << 12 | shift sign << 15)
//!   IQ1_M    56: 32 index bytes, 16 bytes (3 high index bits and a shift sign per 8 values),
//!                8 scale bytes (3-bit codes; their top nibbles hold d)
//! ```
//!
//! An IQ2/IQ3 sign byte from 7 bits sets its eighth bit to make the number
//! of minus signs even ([`sign_byte`]). The codebooks are ggml's
//! (`iq_grids`, read back through ggml's dequantizers), expanded at compile
//! time into `u64` entries (IQ3's 4-value entries in the low 4 bytes, two
//! per group of 8).

use super::iq_grids::{
    IQ1S_CODES, IQ1S_LEVELS, IQ2S_CODES, IQ2S_LEVELS, IQ2XS_CODES, IQ2XS_LEVELS, IQ2XXS_CODES,
    IQ2XXS_LEVELS, IQ3S_CODES, IQ3S_LEVELS, IQ3XXS_CODES, IQ3XXS_LEVELS,
};
use super::ternary::{tq1_0, tq1_0_d, tq2_0, tq2_0_d};

/// Expands level codes (`BITS` bits per value, `PER` values) into entries
/// whose value `j` is byte `j` of a `u64` (`PER` 4: the low 4 bytes).
const fn expand<const N: usize, const L: usize>(
    codes: &[u16; N],
    levels: [u8; L],
    bits: u32,
    per: usize,
) -> [u64; N] {
    let mut out = [0u64; N];
    let mut i = 0;
    while i < N {
        let mut j = 0;
        while j < per {
            let code = ((codes[i] >> (bits as usize * j)) & ((1 << bits) - 1)) as usize;
            out[i] |= (levels[code] as u64) << (8 * j);
            j += 1;
        }
        i += 1;
    }
    out
}

/// IQ1's ternary entries split into magnitudes (0 or 1 per byte) and sign
/// bytes (`0xFF` where the value is -1, else `0x01`).
const fn expand_ternary<const N: usize>(codes: &[u16; N]) -> ([u64; N], [u64; N]) {
    let (mut mag, mut sign) = ([0u64; N], [0u64; N]);
    let mut i = 0;
    while i < N {
        let mut j = 0;
        while j < 8 {
            let v = IQ1S_LEVELS[((codes[i] >> (2 * j)) & 3) as usize];
            let (m, s): (u64, u64) = if v < 0 { (1, 0xFF) } else { (v as u64, 0x01) };
            mag[i] |= m << (8 * j);
            sign[i] |= s << (8 * j);
            j += 1;
        }
        i += 1;
    }
    (mag, sign)
}

/// Sign bytes of a sign byte `b`: byte `j` is `0xFF` where bit `j` is set,
/// else `0x01`.
const fn sign_table() -> [u64; 256] {
    let mut out = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        let mut j = 0;
        while j < 8 {
            let s: u64 = if (b >> j) & 1 == 1 { 0xFF } else { 0x01 };
            out[b] |= s << (8 * j);
            j += 1;
        }
        b += 1;
    }
    out
}

static IQ2XXS_GRID: [u64; 256] = expand(&IQ2XXS_CODES, IQ2XXS_LEVELS, 2, 8);
static IQ2XS_GRID: [u64; 512] = expand(&IQ2XS_CODES, IQ2XS_LEVELS, 2, 8);
static IQ2S_GRID: [u64; 1024] = expand(&IQ2S_CODES, IQ2S_LEVELS, 2, 8);
static IQ3XXS_GRID: [u64; 256] = expand(&IQ3XXS_CODES, IQ3XXS_LEVELS, 3, 4);
static IQ3S_GRID: [u64; 512] = expand(&IQ3S_CODES, IQ3S_LEVELS, 3, 4);
static IQ1S_GRID: ([u64; 2048], [u64; 2048]) = expand_ternary(&IQ1S_CODES);
static SIGNS: [u64; 256] = sign_table();
static SIGNS7: [u64; 128] = seven_bit_signs();

/// [`SIGNS`] of [`sign_byte`]`(i)` for each 7-bit `i`.
const fn seven_bit_signs() -> [u64; 128] {
    let all = sign_table();
    let mut out = [0u64; 128];
    let mut i = 0;
    while i < 128 {
        out[i] = all[sign_byte(i as u8) as usize];
        i += 1;
    }
    out
}

/// The sign bytes of 7 stored sign bits (the eighth from [`sign_byte`]).
#[inline(always)]
fn signs7(seven: u32) -> u64 {
    SIGNS7[(seven & 0x7F) as usize]
}

/// The sign bytes of a whole stored sign byte.
#[inline]
fn signs8(b: u8) -> u64 {
    SIGNS[usize::from(b)]
}

/// The sign byte of 7 stored sign bits: bit 7 makes the count of set bits
/// even.
#[inline]
pub const fn sign_byte(seven: u8) -> u8 {
    let s = seven & 0x7F;
    s | (((s.count_ones() & 1) as u8) << 7)
}

/// A codebook format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum GridFormat {
    /// 2.06 bits per weight: 8-value entries of a 256-entry codebook.
    IQ2_XXS,
    /// 2.31 bits per weight: a 512-entry codebook, a scale per 16 values.
    IQ2_XS,
    /// 2.56 bits per weight: a 1024-entry codebook, a scale per 16 values.
    IQ2_S,
    /// 3.06 bits per weight: 4-value entries of a 256-entry codebook.
    IQ3_XXS,
    /// 3.44 bits per weight: a 512-entry 4-value codebook.
    IQ3_S,
    /// 1.56 bits per weight: a 2048-entry ternary codebook, ±1/8 shifts.
    IQ1_S,
    /// 1.75 bits per weight: IQ1_S's codebook, a scale per 16 values and a
    /// shift per 8.
    IQ1_M,
    /// 1.69 bits per weight: ternary, five trits per byte (`ternary`).
    TQ1_0,
    /// 2.06 bits per weight: ternary, four 2-bit codes per byte (`ternary`).
    TQ2_0,
}

/// How a format's integers become a float: ggml's order for each.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GridStep {
    /// `sum += (d_w · d_a) · Σ s·q·a`, then the row's sum times `factor`.
    Scaled {
        /// 1/8 (IQ2), 1/4 (IQ3_XXS) or 1 (IQ3_S).
        factor: f32,
    },
    /// IQ1: `sum += d_w · d_a · (Σ s·q·a + Σ s·shift·a / 8)`.
    Shifted,
}

/// One 32-value sub-block: 4 groups of 8 values, each value `mag · sign`
/// (IQ1: plus `shift / 8`), under two scales.
///
/// ```text
///   mag[k]   byte j: |value| of value 8k + j        (IQ2 8..43, IQ3 1..62, IQ1 0 or 1)
///   sign[k]  byte j: 0x01 (+) or 0xFF (-)           (a value of 0 takes 0x01)
///   scales   codes s of values 0..16 and 16..32    (the scale is 2s + 1)
///   shift[k] IQ1: +1 or -1 for group k; 0 for the other formats
/// ```
///
/// Magnitudes and signs stay apart because that is what the SIMD product
/// wants (`maddubs(mag, sign(a, sign))`); [`Sub32::values`] joins them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sub32 {
    /// Magnitudes, 8 per `u64`, value `j` of group `k` in byte `j` of `mag[k]`.
    pub mag: [u64; 4],
    /// Sign bytes, same layout: `0x01` or `0xFF`.
    pub sign: [u64; 4],
    /// Scale codes of the two 16-value halves.
    pub scales: [u8; 2],
    /// IQ1's shift sign per group of 8 (±1); zeros otherwise.
    pub shift: [i8; 4],
}

impl Sub32 {
    /// The scale of half `h` (values `16h..16h + 16`): `2s + 1`.
    #[inline]
    pub fn scale(&self, h: usize) -> i32 {
        2 * i32::from(self.scales[h]) + 1
    }

    /// The 32 signed values (IQ1 without its shift).
    #[inline]
    pub fn values(&self) -> [i8; 32] {
        std::array::from_fn(|e| {
            let (k, j) = (e / 8, 8 * (e % 8));
            let m = ((self.mag[k] >> j) & 0xFF) as i8;
            if (self.sign[k] >> j) & 0xFF == 0xFF {
                -m
            } else {
                m
            }
        })
    }
}

/// A decoded super-block: its f16 scale and 8 sub-blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GridBlock {
    /// Super-block scale, f16 bits.
    pub d: u16,
    /// The 8 sub-blocks, in element order.
    pub subs: [Sub32; 8],
}

#[inline(always)]
fn u16_at<const N: usize>(b: &[u8; N], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

#[inline(always)]
fn u32_at<const N: usize>(b: &[u8; N], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

/// The super-block scale of every format but IQ1_M: bytes 0..2.
#[inline(always)]
pub(crate) fn d0<const N: usize>(b: &[u8; N]) -> u16 {
    u16_at(b, 0)
}

/// Fills `out` from one `B`-byte block: `d` reads the super-block scale,
/// `sub` decodes sub-block `ib`. A short `b` leaves `out` as it was
/// (callers pass whole blocks).
#[inline(always)]
fn fill<const B: usize>(
    b: &[u8],
    out: &mut GridBlock,
    d: impl Fn(&[u8; B]) -> u16,
    sub: impl Fn(&[u8; B], usize) -> Sub32,
) {
    let Some(b) = b.first_chunk::<B>() else {
        return;
    };
    out.d = d(b);
    for (ib, s) in out.subs.iter_mut().enumerate() {
        *s = sub(b, ib);
    }
}

impl GridFormat {
    /// Every format decoded to these integers: the codebooks and the
    /// ternary formats.
    pub const ALL: [GridFormat; 9] = [
        GridFormat::IQ2_XXS,
        GridFormat::IQ2_XS,
        GridFormat::IQ2_S,
        GridFormat::IQ3_XXS,
        GridFormat::IQ3_S,
        GridFormat::IQ1_S,
        GridFormat::IQ1_M,
        GridFormat::TQ1_0,
        GridFormat::TQ2_0,
    ];

    /// The codebook formats (importance-matrix quants) alone.
    pub const CODEBOOK: [GridFormat; 7] = [
        GridFormat::IQ2_XXS,
        GridFormat::IQ2_XS,
        GridFormat::IQ2_S,
        GridFormat::IQ3_XXS,
        GridFormat::IQ3_S,
        GridFormat::IQ1_S,
        GridFormat::IQ1_M,
    ];

    /// The format of a ggml type, if it is a codebook format.
    pub fn of(ty: fak_gguf::GgmlType) -> Option<GridFormat> {
        use fak_gguf::GgmlType as T;
        Some(match ty {
            T::IQ2_XXS => GridFormat::IQ2_XXS,
            T::IQ2_XS => GridFormat::IQ2_XS,
            T::IQ2_S => GridFormat::IQ2_S,
            T::IQ3_XXS => GridFormat::IQ3_XXS,
            T::IQ3_S => GridFormat::IQ3_S,
            T::IQ1_S => GridFormat::IQ1_S,
            T::IQ1_M => GridFormat::IQ1_M,
            T::TQ1_0 => GridFormat::TQ1_0,
            T::TQ2_0 => GridFormat::TQ2_0,
            _ => return None,
        })
    }

    /// The ggml type.
    pub fn ty(self) -> fak_gguf::GgmlType {
        use fak_gguf::GgmlType as T;
        match self {
            GridFormat::IQ2_XXS => T::IQ2_XXS,
            GridFormat::IQ2_XS => T::IQ2_XS,
            GridFormat::IQ2_S => T::IQ2_S,
            GridFormat::IQ3_XXS => T::IQ3_XXS,
            GridFormat::IQ3_S => T::IQ3_S,
            GridFormat::IQ1_S => T::IQ1_S,
            GridFormat::IQ1_M => T::IQ1_M,
            GridFormat::TQ1_0 => T::TQ1_0,
            GridFormat::TQ2_0 => T::TQ2_0,
        }
    }

    /// Bytes per 256-value super-block.
    pub fn bytes(self) -> usize {
        self.ty().type_size()
    }

    /// The float step of the format's dot product.
    pub fn step(self) -> GridStep {
        match self {
            GridFormat::IQ2_XXS | GridFormat::IQ2_XS | GridFormat::IQ2_S => {
                GridStep::Scaled { factor: 0.125 }
            }
            GridFormat::IQ3_XXS => GridStep::Scaled { factor: 0.25 },
            GridFormat::IQ3_S | GridFormat::TQ1_0 | GridFormat::TQ2_0 => {
                GridStep::Scaled { factor: 1.0 }
            }
            GridFormat::IQ1_S | GridFormat::IQ1_M => GridStep::Shifted,
        }
    }

    /// Decodes one super-block.
    ///
    /// * `b`: exactly [`GridFormat::bytes`] bytes, as stored in the file.
    ///
    /// # Panics
    ///
    /// If `b` is shorter than one block (callers pass whole blocks).
    #[inline]
    pub fn decode(self, b: &[u8]) -> GridBlock {
        let mut g = GridBlock::default();
        self.decode_into(b, &mut g);
        g
    }

    /// [`GridFormat::decode`] into an existing block (no copy of the
    /// decoded block; the hot loops reuse one buffer per row).
    #[inline]
    pub fn decode_into(self, b: &[u8], out: &mut GridBlock) {
        match self {
            GridFormat::IQ2_XXS => fill::<66>(b, out, d0, iq2_xxs),
            GridFormat::IQ2_XS => fill::<74>(b, out, d0, iq2_xs),
            GridFormat::IQ2_S => fill::<82>(b, out, d0, iq2_s),
            GridFormat::IQ3_XXS => fill::<98>(b, out, d0, iq3_xxs),
            GridFormat::IQ3_S => fill::<110>(b, out, d0, iq3_s),
            GridFormat::IQ1_S => fill::<50>(b, out, d0, iq1_s),
            GridFormat::IQ1_M => fill::<56>(b, out, iq1_m_scale, iq1_m),
            GridFormat::TQ1_0 => fill::<54>(b, out, tq1_0_d, tq1_0),
            GridFormat::TQ2_0 => fill::<66>(b, out, tq2_0_d, tq2_0),
        }
    }
}

#[inline]
pub(crate) fn iq2_xxs(b: &[u8; 66], ib: usize) -> Sub32 {
    let base = 2 + 8 * ib;
    let aux = u32_at(b, base + 4);
    let s = (aux >> 28) as u8;
    Sub32 {
        mag: std::array::from_fn(|l| IQ2XXS_GRID[usize::from(b[base + l])]),
        sign: std::array::from_fn(|l| signs7(aux >> (7 * l))),
        scales: [s, s],
        shift: [0; 4],
    }
}

#[inline]
pub(crate) fn iq2_xs(b: &[u8; 74], ib: usize) -> Sub32 {
    let sc = b[66 + ib];
    let v: [u16; 4] = std::array::from_fn(|l| u16_at(b, 2 + 2 * (4 * ib + l)));
    Sub32 {
        mag: v.map(|v| IQ2XS_GRID[usize::from(v & 511)]),
        sign: v.map(|v| signs7(u32::from(v >> 9))),
        scales: [sc & 0x0F, sc >> 4],
        shift: [0; 4],
    }
}

#[inline]
pub(crate) fn iq2_s(b: &[u8; 82], ib: usize) -> Sub32 {
    let sc = b[74 + ib];
    let qh = usize::from(b[66 + ib]);
    Sub32 {
        mag: std::array::from_fn(|l| {
            IQ2S_GRID[usize::from(b[2 + 4 * ib + l]) | ((qh << (8 - 2 * l)) & 0x300)]
        }),
        sign: std::array::from_fn(|l| signs8(b[34 + 4 * ib + l])),
        scales: [sc & 0x0F, sc >> 4],
        shift: [0; 4],
    }
}

#[inline]
pub(crate) fn iq3_xxs(b: &[u8; 98], ib: usize) -> Sub32 {
    let aux = u32_at(b, 66 + 4 * ib);
    let s = (aux >> 28) as u8;
    let q = &b[2 + 8 * ib..2 + 8 * ib + 8];
    Sub32 {
        mag: std::array::from_fn(|l| {
            IQ3XXS_GRID[usize::from(q[2 * l])] | (IQ3XXS_GRID[usize::from(q[2 * l + 1])] << 32)
        }),
        sign: std::array::from_fn(|l| signs7(aux >> (7 * l))),
        scales: [s, s],
        shift: [0; 4],
    }
}

#[inline]
pub(crate) fn iq3_s(b: &[u8; 110], ib: usize) -> Sub32 {
    let sc = b[106 + ib / 2];
    let s = if ib.is_multiple_of(2) {
        sc & 0x0F
    } else {
        sc >> 4
    };
    let qh = usize::from(b[66 + ib]);
    let q = &b[2 + 8 * ib..2 + 8 * ib + 8];
    Sub32 {
        mag: std::array::from_fn(|l| {
            let i1 = usize::from(q[2 * l]) | ((qh << (8 - 2 * l)) & 256);
            let i2 = usize::from(q[2 * l + 1]) | ((qh << (7 - 2 * l)) & 256);
            IQ3S_GRID[i1] | (IQ3S_GRID[i2] << 32)
        }),
        sign: std::array::from_fn(|l| signs8(b[74 + 4 * ib + l])),
        scales: [s, s],
        shift: [0; 4],
    }
}

#[inline]
pub(crate) fn iq1_s(b: &[u8; 50], ib: usize) -> Sub32 {
    let qh = u16_at(b, 34 + 2 * ib);
    let s = ((qh >> 12) & 7) as u8;
    let shift = if qh & 0x8000 != 0 { -1 } else { 1 };
    let idx: [usize; 4] = std::array::from_fn(|l| {
        usize::from(b[2 + 4 * ib + l]) | (usize::from((qh >> (3 * l)) & 7) << 8)
    });
    Sub32 {
        mag: idx.map(|i| IQ1S_GRID.0[i]),
        sign: idx.map(|i| IQ1S_GRID.1[i]),
        scales: [s, s],
        shift: [shift; 4],
    }
}

/// IQ1_M's f16 super-block scale: the top nibbles of its four scale words.
#[inline]
pub(crate) fn iq1_m_scale(b: &[u8; 56]) -> u16 {
    let sc: [u16; 4] = std::array::from_fn(|k| u16_at(b, 48 + 2 * k));
    (sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000)
}

#[inline]
pub(crate) fn iq1_m(b: &[u8; 56], ib: usize) -> Sub32 {
    let word = u16_at(b, 48 + 2 * (ib / 2)) >> (6 * (ib % 2));
    let qh = [usize::from(b[32 + 2 * ib]), usize::from(b[32 + 2 * ib + 1])];
    let idx: [usize; 4] = std::array::from_fn(|l| {
        usize::from(b[4 * ib + l]) | ((qh[l / 2] << (8 - 4 * (l % 2))) & 0x700)
    });
    Sub32 {
        mag: idx.map(|i| IQ1S_GRID.0[i]),
        sign: idx.map(|i| IQ1S_GRID.1[i]),
        scales: [(word & 7) as u8, ((word >> 3) & 7) as u8],
        shift: std::array::from_fn(|l| {
            let bit = if l % 2 == 0 { 0x08 } else { 0x80 };
            if qh[l / 2] & bit != 0 {
                -1
            } else {
                1
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_bytes_have_even_parity() {
        for s in 0..128u8 {
            let b = sign_byte(s);
            assert_eq!(b & 0x7F, s);
            assert_eq!(b.count_ones() % 2, 0, "{s}");
        }
        assert_eq!(sign_byte(1), 129);
        assert_eq!(sign_byte(3), 3);
        assert_eq!(signs8(0b1000_0001), 0xFF01_0101_0101_01FF);
    }

    #[test]
    fn codebooks_have_their_levels_and_no_repeats() {
        let bytes = |e: u64| e.to_le_bytes();
        assert_eq!(IQ2XXS_LEVELS, [8, 25, 43]);
        assert!(IQ2XXS_GRID
            .iter()
            .all(|&e| bytes(e).iter().all(|v| IQ2XXS_LEVELS.contains(v))));
        assert!(IQ3XXS_GRID.iter().all(|&e| e >> 32 == 0));
        assert!(IQ1S_GRID
            .0
            .iter()
            .all(|&e| bytes(e).iter().all(|&v| v <= 1)));
        assert!(IQ1S_GRID
            .1
            .iter()
            .all(|&e| bytes(e).iter().all(|&v| v == 1 || v == 0xFF)));
        let distinct = |g: &[u64]| {
            let mut v = g.to_vec();
            v.sort_unstable();
            v.dedup();
            v.len()
        };
        assert_eq!(distinct(&IQ2XXS_GRID), 256);
        assert_eq!(distinct(&IQ2XS_GRID), 512);
        assert_eq!(distinct(&IQ2S_GRID), 1024);
        assert_eq!(distinct(&IQ3XXS_GRID), 256);
        assert_eq!(distinct(&IQ3S_GRID), 512);
        let mut ternary: Vec<(u64, u64)> = IQ1S_GRID.0.into_iter().zip(IQ1S_GRID.1).collect();
        ternary.sort_unstable();
        ternary.dedup();
        assert_eq!(ternary.len(), 2048);
    }

    #[test]
    fn every_format_decodes_its_size() {
        for f in GridFormat::ALL {
            let b = vec![0x5Au8; f.bytes()];
            let g = f.decode(&b);
            assert!(
                g.subs.iter().all(|s| s.scales.iter().all(|&c| c < 16)),
                "{f:?}"
            );
            assert_eq!(GridFormat::of(f.ty()), Some(f));
        }
    }
}
