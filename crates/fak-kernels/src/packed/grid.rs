//! The codebook formats (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
//! IQ3_S) over several tokens, on the packed k-quant tiles of
//! [`super::k_avx2`].
//!
//! A codebook row cannot be read by a register tile as it is stored: each
//! 8 values are an index into a table. So a product decodes each 8-row
//! group of its weights once ([`crate::grid`]'s decoded form) into a
//! scratch group block of plain bytes, and every token tile then reads
//! that block like a packed Q6_K one. Nothing is kept between products:
//! the model holds only the file's rows, and one token (decode) keeps
//! reading them straight ([`crate::grid`]).
//!
//! ```text
//!   group block (8 rows, one super-block; gk in layout.rs), 2192 B:
//!     d 8 × f16 | sc[j][row] 16 × 8 i8 (2s + 1 per 16 values)
//!     | step k (32 B): byte 4·row + i = v[4k + i] + 2^SHIFT
//!   v: the signed codebook value (IQ2 |v| ≤ 43, IQ3_XXS ≤ 62: SHIFT 6;
//!      IQ3_S ≤ 15: SHIFT 4); IQ1: 8·v + shift (|.| ≤ 9, SHIFT 4), so
//!      its ±1/8 shift is an integer too
//!
//!   per row, token (Q8_K: d_x, quants x, bsums), super-block:
//!     sumi − summ = Σ_j sc[j] · Σ (u − 2^SHIFT) · x              exact i32
//!                 = isum               (IQ1: 8 · isum + ssum)
//!     acc = acc + (d · d_x) · f32(isum)
//!           IQ1: (d · d_x) · (f32(8 · isum + ssum) · 0.125)
//!   then acc · factor (IQ2 1/8, IQ3_XXS 1/4; none for IQ3_S, IQ1)
//! ```
//!
//! These are [`crate::grid`]'s float steps in its order. For IQ1, `isum +
//! 0.125 · ssum` there and `f32(8 · isum + ssum) · 0.125` here are the
//! same float: both integers stay below 2^22 (16 scales of at most 15,
//! values and shifts of at most 1 against 16 quants of at most 128), so
//! every step is exact. Every output is therefore
//! [`crate::vec_dot_grid_q8_k`]'s bits: a prefill and the one-token steps
//! after it agree, and a sequence's logits do not depend on the batch.

use std::arch::x86_64::*;

use super::k_avx2::{gemm_k, Grid};
use super::k_vnni;
use super::layout::{gk, PackedArgs, PackedFormat, GROUP_ROWS};
use crate::blocks::{GridBlock, GridFormat, GridStep, Sub32};

/// Fewest tokens that take the decoded tiles: below it a product decodes
/// each block into registers per token ([`crate::grid`]). A `[1536 ×
/// 1536]` product on one Zen 5 core (`GEMM_SPEED_ONLY=iq3_xxs
/// GEMM_SPEED_SHAPE=1536,1536,3 cargo run --release -p fak-kernels
/// --example gemm_speed`), tiles against registers: 3 tokens IQ3_XXS
/// 0.46 against 0.58 ms, IQ2_XXS 0.42 against 0.39, IQ1_S 0.47 against
/// 0.94; 2 tokens 0.44 against 0.40, 0.39 against 0.27, 0.47 against
/// 0.63.
pub(crate) const MIN_TOKENS: usize = 3;

/// The offset exponent of `fmt`'s values (see the module diagram).
fn shift(fmt: GridFormat) -> i32 {
    match fmt {
        GridFormat::IQ3_S | GridFormat::IQ1_S | GridFormat::IQ1_M => 4,
        GridFormat::IQ2_XXS | GridFormat::IQ2_XS | GridFormat::IQ2_S | GridFormat::IQ3_XXS => 6,
    }
}

/// The 32 offset bytes of sub-block `sub` (see the module diagram).
#[inline]
#[target_feature(enable = "avx2")]
fn offset_bytes(sub: &Sub32, bias: u8, eighths: bool) -> __m256i {
    let q64 = |v: [u64; 4]| _mm256_set_epi64x(v[3] as i64, v[2] as i64, v[1] as i64, v[0] as i64);
    // IQ1's magnitudes are 0 or 1 per byte: times 8 without a carry.
    let mag = if eighths {
        sub.mag.map(|m| m << 3)
    } else {
        sub.mag
    };
    let bias = sub
        .shift
        .map(|s| u64::from(bias.wrapping_add(s as u8)) * 0x0101_0101_0101_0101);
    _mm256_add_epi8(_mm256_sign_epi8(q64(mag), q64(sub.sign)), q64(bias))
}

/// Transposes 8 rows of 8 dwords: lane `kk` of result `r` ... becomes
/// dword `r` of result `kk` (each row's four values of a step meet the
/// other rows' in one step register).
///
/// ```text
///   in:  v[r] = [ r.0 r.1 .. r.7 ]        (r.kk: row r's values 4kk..4kk+4)
///   out: s[kk] = [ 0.kk 1.kk .. 7.kk ]    (step kk of the sub-block)
/// ```
#[inline]
#[target_feature(enable = "avx2")]
fn transpose8(v: [__m256i; 8]) -> [__m256i; 8] {
    let t: [__m256i; 8] = std::array::from_fn(|i| {
        let (a, b) = (v[2 * (i / 2)], v[2 * (i / 2) + 1]);
        if i % 2 == 0 {
            _mm256_unpacklo_epi32(a, b)
        } else {
            _mm256_unpackhi_epi32(a, b)
        }
    });
    // u[4h + m]: rows 4h..4h+4, dwords m and m + 4 (low, high lane).
    let u: [__m256i; 8] = std::array::from_fn(|i| {
        let (h, m) = (i / 4, i % 4);
        let (a, b) = (t[4 * h + m / 2], t[4 * h + m / 2 + 2]);
        if m % 2 == 0 {
            _mm256_unpacklo_epi64(a, b)
        } else {
            _mm256_unpackhi_epi64(a, b)
        }
    });
    std::array::from_fn(|kk| {
        let (lo, hi) = (u[kk % 4], u[4 + kk % 4]);
        if kk < 4 {
            _mm256_permute2x128_si256::<0x20>(lo, hi)
        } else {
            _mm256_permute2x128_si256::<0x31>(lo, hi)
        }
    })
}

/// Decodes the 8 rows `rows` (each `nb` blocks of `fmt`, contiguous) into
/// `dst` (`nb` group blocks).
#[inline]
#[target_feature(enable = "avx2")]
fn encode_group(fmt: GridFormat, rows: &[u8], nb: usize, dst: &mut [[u8; gk::BYTES]]) {
    let (bytes, bias) = (fmt.bytes(), 1u8 << shift(fmt));
    let eighths = matches!(fmt, GridFormat::IQ1_S | GridFormat::IQ1_M);
    let mut g = [GridBlock::default(); GROUP_ROWS];
    for (b, d) in dst.iter_mut().enumerate().take(nb) {
        for (r, gr) in g.iter_mut().enumerate() {
            let at = (r * nb + b) * bytes;
            // The caller passes 8 whole rows; a short slice stays zeros.
            if let Some(blk) = rows.get(at..at + bytes) {
                fmt.decode_into(blk, gr);
            }
            d[gk::D + 2 * r..gk::D + 2 * r + 2].copy_from_slice(&gr.d.to_le_bytes());
            for (ib, sub) in gr.subs.iter().enumerate() {
                for h in 0..2 {
                    d[gk::SC + 8 * (2 * ib + h) + r] = sub.scale(h) as i8 as u8;
                }
            }
        }
        for ib in 0..8 {
            let steps = transpose8(std::array::from_fn(|r| {
                offset_bytes(&g[r].subs[ib], bias, eighths)
            }));
            for (kk, s) in steps.into_iter().enumerate() {
                let at = gk::U + 32 * (8 * ib + kk);
                if let Some(o) = d.get_mut(at..at + 32) {
                    // SAFETY: `o` is 32 writable bytes; `storeu` needs no
                    // alignment.
                    unsafe { _mm256_storeu_si256(o.as_mut_ptr().cast(), s) };
                }
            }
        }
    }
}

/// `out[t · out_stride + j] = W[j] · a[t]` for the first `n_rows / 8 · 8`
/// rows, each 8-row group decoded once for every token; returns how many
/// rows it wrote (the rest is the caller's). Groups go in pairs, which the
/// VNNI tiles (`vnni`) take side by side in 512-bit registers; the AVX2
/// tiles take them one after the other. Both give the same bits.
///
/// * `(w, n_rows)`: `[n_rows, n]` weights of `fmt`, rows of `n / 256`
///   blocks; `(a, n_tok)`: `[n_tok, n]` Q8_K rows; `out`: `[n_tok,
///   out_stride]`. The caller has checked every length.
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C, and with `vnni` AVX-512 F,
/// BW, VL and VNNI.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn gemm(
    fmt: GridFormat,
    n: usize,
    (w, n_rows): (&[u8], usize),
    (a, n_tok): (&[u8], usize),
    out: &mut [f32],
    out_stride: usize,
    vnni: bool,
) -> usize {
    const PAIR: usize = 2 * GROUP_ROWS;
    let nb = n / 256;
    let row_bytes = nb * fmt.bytes();
    let mut block = vec![[0u8; gk::BYTES]; 2 * nb];
    let done = n_rows / GROUP_ROWS * GROUP_ROWS;
    for (pi, rows) in w
        .get(..done * row_bytes)
        .unwrap_or_default()
        .chunks(PAIR * row_bytes)
        .enumerate()
    {
        let groups = rows.len() / (GROUP_ROWS * row_bytes);
        for (gi, dst) in block.chunks_exact_mut(nb.max(1)).take(groups).enumerate() {
            let at = gi * GROUP_ROWS * row_bytes;
            encode_group(fmt, &rows[at..at + GROUP_ROWS * row_bytes], nb, dst);
        }
        let args = PackedArgs {
            // Read by no tile: the tiles take their steps from `Grid`.
            format: PackedFormat::Q6K,
            nb,
            w: block[..groups * nb].as_flattened(),
            a,
            n_tok,
            out_stride,
        };
        let Some(o) = out.get_mut(pi * PAIR..) else {
            return 0;
        };
        match (fmt, vnni) {
            (GridFormat::IQ3_S, true) => {
                // SAFETY: `vnni`: the caller guarantees AVX-512 VNNI.
                unsafe { k_vnni::gemm_k::<Grid<4, 4, false>, { gk::BYTES }>(&args, o) }
            }
            (GridFormat::IQ1_S | GridFormat::IQ1_M, true) => {
                // SAFETY: as above.
                unsafe { k_vnni::gemm_k::<Grid<4, 4, true>, { gk::BYTES }>(&args, o) }
            }
            (_, true) => {
                // SAFETY: as above.
                unsafe { k_vnni::gemm_k::<Grid<6, 1, false>, { gk::BYTES }>(&args, o) }
            }
            (GridFormat::IQ3_S, false) => gemm_k::<Grid<4, 4, false>, { gk::BYTES }>(&args, o),
            (GridFormat::IQ1_S | GridFormat::IQ1_M, false) => {
                gemm_k::<Grid<4, 4, true>, { gk::BYTES }>(&args, o)
            }
            (_, false) => gemm_k::<Grid<6, 1, false>, { gk::BYTES }>(&args, o),
        }
        // The row end of `crate::grid`: the sum times the format's factor.
        if let GridStep::Scaled { factor } = fmt.step() {
            let cols = groups * GROUP_ROWS;
            for t in 0..n_tok {
                if let Some(y) = o.get_mut(t * out_stride..t * out_stride + cols) {
                    y.iter_mut().for_each(|v| *v *= factor);
                }
            }
        }
    }
    done
}
