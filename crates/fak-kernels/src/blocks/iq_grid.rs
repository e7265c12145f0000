//! The codebook ("grid") formats: IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
//! IQ3_XXS and IQ3_S. Every one stores 256 weights per super-block as
//! indices into a codebook of magnitudes (8 or 4 values per entry), one sign
//! bit per value (IQ2, IQ3) or a ±1/8 shift per group (IQ1), and odd
//! sub-block scales `2s + 1`.
//!
//! Decoding a super-block gives the same integers for every format:
//!
//! ```text
//!   element j:  q[j]     the entry's value with its sign  (IQ2 ±8..43, IQ3 ±1..62, IQ1 -1..1)
//!   16 elements g:  s[g] the scale code; the scale is 2·s[g] + 1
//!   8 elements k:   shift[k]  IQ1 only: +1 or -1 (the value is q + shift/8); 0 otherwise
//!
//!   weight = d · (2s + 1) · FACTOR · (q + shift / 8)
//!     FACTOR: IQ2 1/8, IQ3_XXS 1/4, IQ3_S and IQ1 1
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
//! (`iq_grids`, read back through ggml's dequantizers).

use super::iq_grids::{
    IQ1S_CODES, IQ1S_LEVELS, IQ2S_CODES, IQ2S_LEVELS, IQ2XS_CODES, IQ2XS_LEVELS, IQ2XXS_CODES,
    IQ2XXS_LEVELS, IQ3S_CODES, IQ3S_LEVELS, IQ3XXS_CODES, IQ3XXS_LEVELS,
};

/// Expands level codes (2 bits per value) into 8-byte entries.
const fn expand8<const N: usize, const L: usize>(
    codes: &[u16; N],
    levels: [u8; L],
) -> [[u8; 8]; N] {
    let mut out = [[0u8; 8]; N];
    let mut i = 0;
    while i < N {
        let mut j = 0;
        while j < 8 {
            out[i][j] = levels[((codes[i] >> (2 * j)) & 3) as usize];
            j += 1;
        }
        i += 1;
    }
    out
}

/// Expands level codes (3 bits per value) into 4-byte entries.
const fn expand4<const N: usize, const L: usize>(
    codes: &[u16; N],
    levels: [u8; L],
) -> [[u8; 4]; N] {
    let mut out = [[0u8; 4]; N];
    let mut i = 0;
    while i < N {
        let mut j = 0;
        while j < 4 {
            out[i][j] = levels[((codes[i] >> (3 * j)) & 7) as usize];
            j += 1;
        }
        i += 1;
    }
    out
}

/// Expands IQ1's level codes (2 bits per value) into signed 8-value entries.
const fn expand_signed8<const N: usize, const L: usize>(
    codes: &[u16; N],
    levels: [i8; L],
) -> [[i8; 8]; N] {
    let mut out = [[0i8; 8]; N];
    let mut i = 0;
    while i < N {
        let mut j = 0;
        while j < 8 {
            out[i][j] = levels[((codes[i] >> (2 * j)) & 3) as usize];
            j += 1;
        }
        i += 1;
    }
    out
}

static IQ2XXS_GRID: [[u8; 8]; 256] = expand8(&IQ2XXS_CODES, IQ2XXS_LEVELS);
static IQ2XS_GRID: [[u8; 8]; 512] = expand8(&IQ2XS_CODES, IQ2XS_LEVELS);
static IQ2S_GRID: [[u8; 8]; 1024] = expand8(&IQ2S_CODES, IQ2S_LEVELS);
static IQ3XXS_GRID: [[u8; 4]; 256] = expand4(&IQ3XXS_CODES, IQ3XXS_LEVELS);
static IQ3S_GRID: [[u8; 4]; 512] = expand4(&IQ3S_CODES, IQ3S_LEVELS);
static IQ1S_GRID: [[i8; 8]; 2048] = expand_signed8(&IQ1S_CODES, IQ1S_LEVELS);

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

/// One decoded super-block (see the module overview).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GridBlock {
    /// Super-block scale, f16 bits.
    pub d: u16,
    /// Scale codes `s`, one per 16 values (the scale is `2s + 1`).
    pub scales: [u8; 16],
    /// Signed codebook values, one per element.
    pub q: [i8; 256],
    /// IQ1: the shift signs (±1), one per 8 values; zeros otherwise.
    pub shift: [i8; 32],
}

impl GridBlock {
    fn new(d: u16) -> Self {
        GridBlock {
            d,
            scales: [0; 16],
            q: [0; 256],
            shift: [0; 32],
        }
    }

    /// Writes 8 values of an unsigned entry under a sign byte.
    #[inline]
    fn signed8(&mut self, at: usize, entry: &[u8], signs: u8) {
        for (j, &g) in entry.iter().enumerate() {
            let v = g as i8;
            self.q[at + j] = if signs >> j & 1 == 1 { -v } else { v };
        }
    }

    /// The scale of the 16 values from element `16 * g`: `2s + 1`.
    #[inline]
    pub fn scale(&self, g: usize) -> i32 {
        2 * i32::from(self.scales[g]) + 1
    }
}

#[inline]
fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

#[inline]
fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

impl GridFormat {
    /// Every codebook format.
    pub const ALL: [GridFormat; 7] = [
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
            GridFormat::IQ3_S => GridStep::Scaled { factor: 1.0 },
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
    pub fn decode(self, b: &[u8]) -> GridBlock {
        match self {
            GridFormat::IQ2_XXS => decode_iq2_xxs(b),
            GridFormat::IQ2_XS => decode_iq2_xs(b),
            GridFormat::IQ2_S => decode_iq2_s(b),
            GridFormat::IQ3_XXS => decode_iq3_xxs(b),
            GridFormat::IQ3_S => decode_iq3_s(b),
            GridFormat::IQ1_S => decode_iq1_s(b),
            GridFormat::IQ1_M => decode_iq1_m(b),
        }
    }
}

fn decode_iq2_xxs(b: &[u8]) -> GridBlock {
    let mut out = GridBlock::new(u16_at(b, 0));
    for ib in 0..8 {
        let base = 2 + 8 * ib;
        let aux = u32_at(b, base + 4);
        let s = (aux >> 28) as u8;
        out.scales[2 * ib] = s;
        out.scales[2 * ib + 1] = s;
        for l in 0..4 {
            let signs = sign_byte((aux >> (7 * l)) as u8);
            out.signed8(
                32 * ib + 8 * l,
                &IQ2XXS_GRID[usize::from(b[base + l])],
                signs,
            );
        }
    }
    out
}

fn decode_iq2_xs(b: &[u8]) -> GridBlock {
    let mut out = GridBlock::new(u16_at(b, 0));
    for ib in 0..8 {
        let sc = b[66 + ib];
        out.scales[2 * ib] = sc & 0x0F;
        out.scales[2 * ib + 1] = sc >> 4;
        for l in 0..4 {
            let v = u16_at(b, 2 + 2 * (4 * ib + l));
            let signs = sign_byte((v >> 9) as u8);
            out.signed8(32 * ib + 8 * l, &IQ2XS_GRID[usize::from(v & 511)], signs);
        }
    }
    out
}

fn decode_iq2_s(b: &[u8]) -> GridBlock {
    let mut out = GridBlock::new(u16_at(b, 0));
    for ib in 0..8 {
        let sc = b[74 + ib];
        out.scales[2 * ib] = sc & 0x0F;
        out.scales[2 * ib + 1] = sc >> 4;
        let qh = usize::from(b[66 + ib]);
        for l in 0..4 {
            let idx = usize::from(b[2 + 4 * ib + l]) | ((qh << (8 - 2 * l)) & 0x300);
            let signs = b[2 + 32 + 4 * ib + l];
            out.signed8(32 * ib + 8 * l, &IQ2S_GRID[idx], signs);
        }
    }
    out
}

fn decode_iq3_xxs(b: &[u8]) -> GridBlock {
    let mut out = GridBlock::new(u16_at(b, 0));
    for ib in 0..8 {
        let aux = u32_at(b, 2 + 64 + 4 * ib);
        let s = (aux >> 28) as u8;
        out.scales[2 * ib] = s;
        out.scales[2 * ib + 1] = s;
        for l in 0..4 {
            let signs = sign_byte((aux >> (7 * l)) as u8);
            let g1 = IQ3XXS_GRID[usize::from(b[2 + 8 * ib + 2 * l])];
            let g2 = IQ3XXS_GRID[usize::from(b[2 + 8 * ib + 2 * l + 1])];
            let entry = [g1[0], g1[1], g1[2], g1[3], g2[0], g2[1], g2[2], g2[3]];
            out.signed8(32 * ib + 8 * l, &entry, signs);
        }
    }
    out
}

fn decode_iq3_s(b: &[u8]) -> GridBlock {
    let mut out = GridBlock::new(u16_at(b, 0));
    for sb in 0..8 {
        let sc = b[106 + sb / 2];
        let s = if sb % 2 == 0 { sc & 0x0F } else { sc >> 4 };
        out.scales[2 * sb] = s;
        out.scales[2 * sb + 1] = s;
        let qh = usize::from(b[66 + sb]);
        for l in 0..4 {
            let i1 = usize::from(b[2 + 8 * sb + 2 * l]) | ((qh << (8 - 2 * l)) & 256);
            let i2 = usize::from(b[2 + 8 * sb + 2 * l + 1]) | ((qh << (7 - 2 * l)) & 256);
            let (g1, g2) = (IQ3S_GRID[i1], IQ3S_GRID[i2]);
            let entry = [g1[0], g1[1], g1[2], g1[3], g2[0], g2[1], g2[2], g2[3]];
            out.signed8(32 * sb + 8 * l, &entry, b[74 + 4 * sb + l]);
        }
    }
    out
}

fn decode_iq1_s(b: &[u8]) -> GridBlock {
    let mut out = GridBlock::new(u16_at(b, 0));
    for ib in 0..8 {
        let qh = u16_at(b, 34 + 2 * ib);
        let s = ((qh >> 12) & 7) as u8;
        out.scales[2 * ib] = s;
        out.scales[2 * ib + 1] = s;
        let shift = if qh & 0x8000 != 0 { -1 } else { 1 };
        for l in 0..4 {
            let idx = usize::from(b[2 + 4 * ib + l]) | (usize::from((qh >> (3 * l)) & 7) << 8);
            out.q[32 * ib + 8 * l..32 * ib + 8 * l + 8].copy_from_slice(&IQ1S_GRID[idx]);
            out.shift[4 * ib + l] = shift;
        }
    }
    out
}

fn decode_iq1_m(b: &[u8]) -> GridBlock {
    let sc: [u16; 4] = std::array::from_fn(|k| u16_at(b, 48 + 2 * k));
    let d = (sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000);
    let mut out = GridBlock::new(d);
    for ib in 0..8 {
        let word = sc[ib / 2] >> (6 * (ib % 2));
        out.scales[2 * ib] = (word & 7) as u8;
        out.scales[2 * ib + 1] = ((word >> 3) & 7) as u8;
        let qh = [usize::from(b[32 + 2 * ib]), usize::from(b[32 + 2 * ib + 1])];
        for l in 0..4 {
            let h = qh[l / 2];
            let idx = usize::from(b[4 * ib + l]) | ((h << (8 - 4 * (l % 2))) & 0x700);
            out.q[32 * ib + 8 * l..32 * ib + 8 * l + 8].copy_from_slice(&IQ1S_GRID[idx]);
            let shift_bit = if l % 2 == 0 { 0x08 } else { 0x80 };
            out.shift[4 * ib + l] = if h & shift_bit != 0 { -1 } else { 1 };
        }
    }
    out
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
    }

    #[test]
    fn codebooks_have_their_sizes_and_levels() {
        assert_eq!(IQ2XXS_LEVELS, [8, 25, 43]);
        assert!(IQ2XXS_GRID
            .iter()
            .all(|e| e.iter().all(|v| [8, 25, 43].contains(v))));
        assert!(IQ1S_GRID
            .iter()
            .all(|e| e.iter().all(|v| (-1..=1).contains(v))));
        // Entries are distinct: a codebook never repeats a point.
        let mut seen: Vec<[u8; 8]> = IQ2S_GRID.to_vec();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 1024);
    }

    #[test]
    fn every_format_decodes_its_size() {
        for f in GridFormat::ALL {
            let b = vec![0x5Au8; f.bytes()];
            let g = f.decode(&b);
            assert!(g.scales.iter().all(|&s| s < 16), "{f:?}");
            assert_eq!(GridFormat::of(f.ty()), Some(f));
        }
    }
}
