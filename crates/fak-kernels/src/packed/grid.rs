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
//!     (j: 32-value sub-blocks where the format scales per 32 values,
//!      IQ2_XXS, IQ3_XXS, IQ3_S, IQ1_S; 16-value ones for IQ2_XS, IQ2_S,
//!      IQ1_M: one scale multiply per sub-block and token)
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
use crate::blocks::{GridFormat, GridStep, Sub32};

/// Fewest tokens that take the decoded tiles: below it a product decodes
/// each block into registers per token ([`crate::grid`]). A `[1536 ×
/// 1536]` product on one Zen 5 core, two tokens (`GEMM_SPEED_ONLY=iq3_xxs
/// GEMM_SPEED_SHAPE=1536,1536,2 cargo run --release -p fak-kernels
/// --example gemm_speed`, the machine otherwise idle), tiles against
/// registers: IQ3_XXS 0.246 against 0.364 ms, IQ2_XXS 0.191 against
/// 0.236, IQ1_S 0.299 against 0.570 (AVX2 tiles, `FAK_ISA=avx2`: 0.262,
/// 0.208, 0.301). One token decodes each block once either way, and the
/// registers skip the scratch block.
pub(crate) const MIN_TOKENS: usize = 2;

/// The 32 offset bytes of sub-block `sub` (see the module diagram).
#[inline]
#[target_feature(enable = "avx2")]
fn offset_bytes(sub: &Sub32, bias: u8, eighths: bool) -> __m256i {
    let q64 = |v: [u64; 4]| _mm256_set_epi64x(v[3] as i64, v[2] as i64, v[1] as i64, v[0] as i64);
    let mag = q64(sub.mag);
    // IQ1's magnitudes are 0 or 1 per byte: times 8 without a carry.
    let mag = if eighths {
        _mm256_slli_epi64::<3>(mag)
    } else {
        mag
    };
    let bias = if eighths {
        let b = |k: usize| {
            (u64::from(bias.wrapping_add(sub.shift[k] as u8)) * 0x0101_0101_0101_0101) as i64
        };
        _mm256_set_epi64x(b(3), b(2), b(1), b(0))
    } else {
        _mm256_set1_epi8(bias as i8)
    };
    _mm256_add_epi8(_mm256_sign_epi8(mag, q64(sub.sign)), bias)
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
    // Pairs of rows interleaved by dword, then by qword: `u{m}{h}` holds
    // rows 4h..4h+4 of dwords m (low lane) and m + 4 (high lane).
    let (t0, t1) = (
        _mm256_unpacklo_epi32(v[0], v[1]),
        _mm256_unpackhi_epi32(v[0], v[1]),
    );
    let (t2, t3) = (
        _mm256_unpacklo_epi32(v[2], v[3]),
        _mm256_unpackhi_epi32(v[2], v[3]),
    );
    let (t4, t5) = (
        _mm256_unpacklo_epi32(v[4], v[5]),
        _mm256_unpackhi_epi32(v[4], v[5]),
    );
    let (t6, t7) = (
        _mm256_unpacklo_epi32(v[6], v[7]),
        _mm256_unpackhi_epi32(v[6], v[7]),
    );
    let (u00, u10) = (_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2));
    let (u20, u30) = (_mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3));
    let (u01, u11) = (_mm256_unpacklo_epi64(t4, t6), _mm256_unpackhi_epi64(t4, t6));
    let (u21, u31) = (_mm256_unpacklo_epi64(t5, t7), _mm256_unpackhi_epi64(t5, t7));
    [
        _mm256_permute2x128_si256::<0x20>(u00, u01),
        _mm256_permute2x128_si256::<0x20>(u10, u11),
        _mm256_permute2x128_si256::<0x20>(u20, u21),
        _mm256_permute2x128_si256::<0x20>(u30, u31),
        _mm256_permute2x128_si256::<0x31>(u00, u01),
        _mm256_permute2x128_si256::<0x31>(u10, u11),
        _mm256_permute2x128_si256::<0x31>(u20, u21),
        _mm256_permute2x128_si256::<0x31>(u30, u31),
    ]
}

/// Decodes the 8 rows `rows` (each `nb` blocks of `B` bytes, contiguous)
/// into `dst` (`nb` group blocks): `d` reads a block's scale, `sub`
/// decodes its sub-block `ib` (the one-token path's decoders, so the
/// words stay in registers on their way to the transpose).
#[inline(always)]
fn encode_rows<const B: usize>(
    (rows, nb): (&[u8], usize),
    dst: &mut [[u8; gk::BYTES]],
    d: impl Fn(&[u8; B]) -> u16,
    sub: impl Fn(&[u8; B], usize) -> Sub32,
    (bias, eighths): (u8, bool),
) {
    let zero = [0u8; B];
    let (blocks, _) = rows.as_chunks::<B>();
    for (b, out) in dst.iter_mut().enumerate().take(nb) {
        // The caller passes 8 whole rows; a missing block reads as zeros.
        // Plain loops, not `array::from_fn`: its closures stayed out of
        // line here (a call per sub-block and row).
        let mut blk: [&[u8; B]; GROUP_ROWS] = [&zero; GROUP_ROWS];
        for (r, x) in blk.iter_mut().enumerate() {
            if let Some(y) = blocks.get(r * nb + b) {
                *x = y;
            }
            out[gk::D + 2 * r..gk::D + 2 * r + 2].copy_from_slice(&d(x).to_le_bytes());
        }
        for ib in 0..8 {
            // SAFETY: an all-zero bit pattern is a valid `__m256i`.
            let mut rows_u = [unsafe { std::mem::zeroed::<__m256i>() }; GROUP_ROWS];
            for (r, u) in rows_u.iter_mut().enumerate() {
                let s = sub(blk[r], ib);
                for h in 0..2 {
                    out[gk::SC + 8 * (2 * ib + h) + r] = s.scale(h) as i8 as u8;
                }
                // SAFETY: the caller runs with AVX2.
                *u = unsafe { offset_bytes(&s, bias, eighths) };
            }
            // SAFETY: the caller runs with AVX2.
            let steps = unsafe { transpose8(rows_u) };
            for (kk, s) in steps.into_iter().enumerate() {
                let at = gk::U + 32 * (8 * ib + kk);
                if let Some(o) = out.get_mut(at..at + 32) {
                    // SAFETY: `o` is 32 writable bytes; `storeu` needs no
                    // alignment; AVX2 as above.
                    unsafe { _mm256_storeu_si256(o.as_mut_ptr().cast(), s) };
                }
            }
        }
    }
}

/// Decodes the 8 rows `rows` (each `nb` blocks of `fmt`, contiguous) into
/// `dst` (`nb` group blocks), the values offset by `bias`, IQ1's scaled
/// by 8 with their shifts (`eighths`).
#[inline]
#[target_feature(enable = "avx2")]
fn encode_group(
    fmt: GridFormat,
    rows: &[u8],
    nb: usize,
    dst: &mut [[u8; gk::BYTES]],
    bias: (u8, bool),
) {
    use crate::blocks as bl;
    let rows = (rows, nb);
    match fmt {
        GridFormat::IQ2_XXS => encode_rows::<66>(rows, dst, bl::d0, bl::iq2_xxs, bias),
        GridFormat::IQ2_XS => encode_rows::<74>(rows, dst, bl::d0, bl::iq2_xs, bias),
        GridFormat::IQ2_S => encode_rows::<82>(rows, dst, bl::d0, bl::iq2_s, bias),
        GridFormat::IQ3_XXS => encode_rows::<98>(rows, dst, bl::d0, bl::iq3_xxs, bias),
        GridFormat::IQ3_S => encode_rows::<110>(rows, dst, bl::d0, bl::iq3_s, bias),
        GridFormat::IQ1_S => encode_rows::<50>(rows, dst, bl::d0, bl::iq1_s, bias),
        GridFormat::IQ1_M => encode_rows::<56>(rows, dst, bl::iq1_m_scale, bl::iq1_m, bias),
        GridFormat::TQ1_0 => encode_rows::<54>(rows, dst, bl::tq1_0_d, bl::tq1_0, bias),
        GridFormat::TQ2_0 => encode_rows::<66>(rows, dst, bl::tq2_0_d, bl::tq2_0, bias),
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
    // The tile of each format (see `Grid`): offset 64, one step per `i16`
    // run, where values reach 62 (IQ2, IQ3_XXS); 16 and four steps where
    // they stay below 16 (IQ3_S, IQ1's eighths); sub-blocks of 8 steps
    // where the scales cover 32 values, 4 where they cover 16.
    let ops = Operands {
        fmt,
        n,
        w,
        n_rows,
        a,
        n_tok,
        out_stride,
        vnni,
    };
    // SAFETY: the caller's guarantees, passed on (every arm).
    let done = unsafe {
        match fmt {
            GridFormat::IQ2_XXS | GridFormat::IQ3_XXS => groups::<6, 1, false, 8>(&ops, out),
            GridFormat::IQ2_XS | GridFormat::IQ2_S => groups::<6, 1, false, 4>(&ops, out),
            GridFormat::IQ3_S | GridFormat::TQ1_0 | GridFormat::TQ2_0 => {
                groups::<4, 4, false, 8>(&ops, out)
            }
            GridFormat::IQ1_S => groups::<4, 4, true, 8>(&ops, out),
            GridFormat::IQ1_M => groups::<4, 4, true, 4>(&ops, out),
        }
    };
    // The row end of `crate::grid`: each sum times the format's factor,
    // one token row at a time (a pass per pair of groups, 16 values per
    // row, took a sixth of this function's samples).
    if let GridStep::Scaled { factor } = fmt.step() {
        for t in 0..n_tok {
            if let Some(y) = out.get_mut(t * out_stride..t * out_stride + done) {
                y.iter_mut().for_each(|v| *v *= factor);
            }
        }
    }
    done
}

/// One product's operands, as [`gemm`] takes them.
struct Operands<'a> {
    fmt: GridFormat,
    n: usize,
    w: &'a [u8],
    n_rows: usize,
    a: &'a [u8],
    n_tok: usize,
    out_stride: usize,
    vnni: bool,
}

/// [`gemm`]'s groups on the tile `Grid<SHIFT, I16, EIGHTHS, SUB>` (see
/// `Grid`): each pair of groups decoded, then every token over it.
/// Returns the rows written.
///
/// # Safety
///
/// As [`gemm`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn groups<const SHIFT: i32, const I16: usize, const EIGHTHS: bool, const SUB: usize>(
    ops: &Operands<'_>,
    out: &mut [f32],
) -> usize {
    let Operands {
        fmt,
        n,
        w,
        n_rows,
        a,
        n_tok,
        out_stride,
        vnni,
    } = *ops;
    const PAIR: usize = 2 * GROUP_ROWS;
    let nb = n / 256;
    let row_bytes = nb * fmt.bytes();
    let pair_bytes = PAIR * row_bytes;
    let mut block = vec![[0u8; gk::BYTES]; 2 * nb];
    let done = n_rows / GROUP_ROWS * GROUP_ROWS;
    let all = w.get(..done * row_bytes).unwrap_or_default();
    for (pi, rows) in all.chunks(pair_bytes).enumerate() {
        let groups = rows.len() / (GROUP_ROWS * row_bytes);
        for (gi, dst) in block.chunks_exact_mut(nb.max(1)).take(groups).enumerate() {
            let at = gi * GROUP_ROWS * row_bytes;
            let bias = (1 << SHIFT, EIGHTHS);
            encode_group(fmt, &rows[at..at + GROUP_ROWS * row_bytes], nb, dst, bias);
        }
        // The next pair's rows come from DRAM while these tiles run (the
        // decode above stalled on them otherwise: 16 rows read side by
        // side outrun the hardware prefetcher).
        if let Some(next) = all.get((pi + 1) * pair_bytes..) {
            for line in next[..next.len().min(pair_bytes)].chunks(64) {
                _mm_prefetch::<_MM_HINT_T1>(line.as_ptr().cast());
            }
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
        if vnni {
            // SAFETY: `vnni`: the caller guarantees AVX-512 VNNI.
            unsafe { k_vnni::gemm_k::<Grid<SHIFT, I16, EIGHTHS, SUB>, { gk::BYTES }>(&args, o) }
        } else {
            gemm_k::<Grid<SHIFT, I16, EIGHTHS, SUB>, { gk::BYTES }>(&args, o);
        }
    }
    done
}
