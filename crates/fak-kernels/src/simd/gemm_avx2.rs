//! AVX2 register tiles for [`crate::gemm::gemm`], and the one canonical
//! per-element arithmetic that the AVX2 dot products share with them.
//!
//! Every covered type is a [`BlockDot`]: a block's exact integer lane
//! sums `sumi` come from `STEPS` steps over 32-value slices (`w_step`,
//! `a_step`, `step`), and its float scale `d` (plus, for types with mins,
//! a scalar `f32` term) from per-block info (`w_info`, `a_info`, `scale`).
//! [`tile`] runs `R` weight rows × `T` activation rows at once; every
//! element `(r, t)` keeps its own accumulator and sees exactly the same
//! float operations in the same order as a `1 × 1` tile, which is what
//! `vec_dot` runs. So an element's bits do not depend on the tile shape,
//! its position in the tile, or the batch:
//!
//! ```text
//!   for each block b (in order):
//!     for s in 0..STEPS:  ws[r] = w_step(W[r][b], s), as[t] = a_step(A[t][b], s)
//!                         sumi[r][t] += step(ws[r], as[t])           (exact i32)
//!     per element (r, t): d = scale(W[r][b], A[t][b], &mut extra[r][t])
//!                         acc[r][t] = fmadd(d, cvt(sumi[r][t]), acc[r][t])   (8 lanes)
//!   end: y[r][t] = hsum(acc[r][t]) + extra[r][t]
//!
//!   This is llama.cpp's AVX2 arithmetic too (ggml_vec_dot_* and the
//!   llamafile tiles), so equal inputs give llama.cpp's bits per element.
//!
//!   rows   ┌──── T tokens ────┐
//!   R ×    │ acc acc acc ...  │  each weight block is loaded once per tile
//!          │ acc acc acc ...  │  and reused across the T tokens; each
//!          └──────────────────┘  activation block across the R rows
//! ```
//!
//! The integer work may be arranged differently per type (prepared once
//! per row or token), but the lane sums are exact integers, so only the
//! float steps above matter, and they are shared.

use std::arch::x86_64::*;

use super::avx2_blocks::{
    bits_to_bytes, dot_u8_i8, f32_at, hsum_epi32, hsum_ps, load16, load32, nibbles_16, u16_at,
};
use super::Kernel;
use crate::blocks::{
    get_scale_min_k4, BlockIQ4_NL, BlockIQ4_XS, BlockMXFP4, BlockQ2_K, BlockQ3_K, BlockQ4_0,
    BlockQ4_1, BlockQ4_K, BlockQ5_0, BlockQ5_1, BlockQ5_K, BlockQ6_K, BlockQ8_0, BlockQ8_1,
    BlockQ8_K, IQ4_LEVELS, MXFP4_LEVELS,
};

/// How an element's per-block float terms are accumulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Accumulators {
    /// One 8-lane accumulator, blocks in order: `acc = fmadd(d, cvt(sumi),
    /// acc)`, then `hsum`. Every format uses it; it is the arithmetic of
    /// llama.cpp's AVX2 `ggml_vec_dot_*` and llamafile tiles, so with the
    /// same inputs each product element has llama.cpp's bits. (An even/odd
    /// two-accumulator scheme was used before; it is faster per element
    /// for decode but blocks the 4 × 2 tiles.)
    One,
}

/// Register tile shapes (`R` weight rows × `T` tokens) for many tokens;
/// which one fits the 16 AVX2 registers depends on the format's step state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// 4 rows × 2 tokens.
    R4T2,
    /// 1 row × 4 tokens.
    R1T4,
    /// 2 rows × 4 tokens.
    R2T4,
}

/// One block format's dot-product arithmetic over `WB`-byte weight blocks
/// and `AB`-byte activation blocks (see the module doc).
///
/// # Safety
///
/// Every method needs a CPU with AVX2, FMA and F16C. Implementors promise
/// that `WI`, `AI`, `WS` and `AS` are plain data (vectors, numbers, arrays
/// and structs of them) for which all-zero bytes are a valid value: the
/// tiles zero-initialise arrays of them.
pub(crate) unsafe trait BlockDot<const WB: usize, const AB: usize> {
    /// Integer steps per block.
    const STEPS: usize;
    /// The float accumulation scheme.
    const ACC: Accumulators;
    /// The register tile for many tokens.
    const SHAPE: Shape = Shape::R4T2;
    /// Per-block weight info (scales, mins).
    type WI: Copy;
    /// Per-block activation info (scale, sums).
    type AI: Copy;
    /// One step's weight operand.
    type WS: Copy;
    /// One step's activation operand.
    type AS: Copy;

    /// Weight block info.
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2, FMA and F16C.
    unsafe fn w_info(b: &[u8; WB]) -> Self::WI;

    /// Activation block info.
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2, FMA and F16C.
    unsafe fn a_info(b: &[u8; AB]) -> Self::AI;

    /// Weight operand of step `s` (`s < STEPS`).
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2, FMA and F16C.
    unsafe fn w_step(b: &[u8; WB], info: &Self::WI, s: usize) -> Self::WS;

    /// Activation operand of step `s` (`s < STEPS`).
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2, FMA and F16C.
    unsafe fn a_step(b: &[u8; AB], s: usize) -> Self::AS;

    /// Exact `i32` lane sums of one step.
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2, FMA and F16C.
    unsafe fn step(w: &Self::WS, a: &Self::AS) -> __m256i;

    /// The block's float scale; types with a min/offset term add it to
    /// `extra` (scalar `f32`, block order).
    ///
    /// # Safety
    ///
    /// The CPU must support AVX2, FMA and F16C.
    unsafe fn scale(w: &Self::WI, a: &Self::AI, extra: &mut f32) -> f32;
}

/// `f16` bits to `f32` with F16C (exact).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn f16c(bits: u16) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
}

/// `R × T` dot products: `out[r][t] = w[r] · a[t]`.
///
/// * `w`: `R` weight rows, each exactly `nb` blocks.
/// * `a`: `T` activation rows, each exactly `nb` blocks.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile<K, const WB: usize, const AB: usize, const R: usize, const T: usize>(
    w: [&[[u8; WB]]; R],
    a: [&[[u8; AB]]; T],
    nb: usize,
) -> [[f32; T]; R]
where
    K: BlockDot<WB, AB>,
{
    // Plain loops, not `array::map` / iterator closures: those were left
    // un-inlined here (about 5% of a prefill in `perf`), see `block`.
    let (mut w, mut a) = (w, a);
    let mut nb = nb;
    for row in &w {
        nb = nb.min(row.len());
    }
    for row in &a {
        nb = nb.min(row.len());
    }
    for row in &mut w {
        *row = &row[..nb];
    }
    for row in &mut a {
        *row = &row[..nb];
    }
    let mut acc = [[_mm256_setzero_ps(); T]; R];
    let mut extra = [[0.0f32; T]; R];
    // One block per iteration lets `block` inline into many-token tiles
    // (two calls per iteration did not, and ran those 1.3-1.8× slower);
    // the `1 × 1` tile of the decode GEMV keeps two per iteration.
    let mut b = 0;
    if R * T == 1 {
        while b + 1 < nb {
            match K::ACC {
                Accumulators::One => {
                    block::<K, WB, AB, R, T>(&w, &a, b, &mut acc, &mut extra);
                    block::<K, WB, AB, R, T>(&w, &a, b + 1, &mut acc, &mut extra);
                }
            }
            b += 2;
        }
    }
    while b < nb {
        match K::ACC {
            Accumulators::One => block::<K, WB, AB, R, T>(&w, &a, b, &mut acc, &mut extra),
        }
        b += 1;
    }
    let mut y = [[0.0f32; T]; R];
    for r in 0..R {
        for t in 0..T {
            y[r][t] = hsum_ps(acc[r][t]) + extra[r][t];
        }
    }
    y
}

/// One block (`b`) of an `R × T` tile: integer steps into `sumi`, then
/// `acc = fmadd(d, cvt(sumi), acc)` and the `extra` terms per element.
///
/// * `w`: `R` weight rows, `a`: `T` activation rows, each more than `b`
///   blocks long.
///
/// Plain loops over zero-initialised arrays rather than `array::map` /
/// `from_fn`: closures handed to those generic std functions were left
/// un-inlined inside this `target_feature` code (several times slower).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn block<K, const WB: usize, const AB: usize, const R: usize, const T: usize>(
    w: &[&[[u8; WB]]; R],
    a: &[&[[u8; AB]]; T],
    b: usize,
    acc: &mut [[__m256; T]; R],
    extra: &mut [[f32; T]; R],
) where
    K: BlockDot<WB, AB>,
{
    // SAFETY: `BlockDot`'s contract: its associated types are plain vector
    // and number data, valid when all-zero.
    let (mut wi, mut ai): ([K::WI; R], [K::AI; T]) = unsafe { std::mem::zeroed() };
    for r in 0..R {
        // SAFETY: this function runs with AVX2, FMA and F16C enabled.
        wi[r] = unsafe { K::w_info(&w[r][b]) };
    }
    for t in 0..T {
        // SAFETY: as above.
        ai[t] = unsafe { K::a_info(&a[t][b]) };
    }
    let mut sumi = [[_mm256_setzero_si256(); T]; R];
    for s in 0..K::STEPS {
        // SAFETY: as for `wi` above.
        let (mut ws, mut xs): ([K::WS; R], [K::AS; T]) = unsafe { std::mem::zeroed() };
        for r in 0..R {
            // SAFETY: as above.
            ws[r] = unsafe { K::w_step(&w[r][b], &wi[r], s) };
        }
        for t in 0..T {
            // SAFETY: as above.
            xs[t] = unsafe { K::a_step(&a[t][b], s) };
        }
        for r in 0..R {
            for t in 0..T {
                // SAFETY: as above.
                let p = unsafe { K::step(&ws[r], &xs[t]) };
                sumi[r][t] = _mm256_add_epi32(sumi[r][t], p);
            }
        }
    }
    for r in 0..R {
        for t in 0..T {
            // SAFETY: as above.
            let d = unsafe { K::scale(&wi[r], &ai[t], &mut extra[r][t]) };
            let s = _mm256_cvtepi32_ps(sumi[r][t]);
            acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d), s, acc[r][t]);
        }
    }
}

/// One dot product (a `1 × 1` tile): the AVX2 `vec_dot` of `K`'s type.
///
/// * `w`, `a`: one weight and one activation row of the same number of
///   whole blocks (extra bytes are ignored).
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot<K, const WB: usize, const AB: usize>(w: &[u8], a: &[u8]) -> f32
where
    K: BlockDot<WB, AB>,
{
    let (wb, ab) = (w.as_chunks::<WB>().0, a.as_chunks::<AB>().0);
    tile::<K, WB, AB, 1, 1>([wb], [ab], wb.len().min(ab.len()))[0][0]
}

/// A validated matrix product for the tile kernels.
pub(crate) struct GemmArgs<'a> {
    /// Blocks per row.
    pub(crate) nb: usize,
    /// `n_rows` weight rows, `nb` blocks each, contiguous.
    pub(crate) w: &'a [u8],
    /// Weight rows.
    pub(crate) n_rows: usize,
    /// `n_tok` activation rows, `nb` blocks each, contiguous.
    pub(crate) a: &'a [u8],
    /// Activation rows.
    pub(crate) n_tok: usize,
    /// `out[t * out_stride + j]` receives row `j` · token `t`.
    pub(crate) out_stride: usize,
}

/// Runs the tiles of `K` over the whole product: `R × T` tiles of
/// `K::SHAPE` (the remainder rows and tokens as `1`-row / `1`-token
/// tiles); one token (decode) runs [`gemv`]: multi-row GEMV tiles measured
/// slower on large matrices (the 49152-row output head). Every shape gives
/// the same bits.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn gemm_k<K, const WB: usize, const AB: usize>(g: &GemmArgs<'_>, out: &mut [f32])
where
    K: BlockDot<WB, AB>,
{
    // Row views without allocating (a decode step runs hundreds of these).
    let (wrows, arows) = (
        Rows::new(g.w.as_chunks::<WB>().0, g.nb, g.n_rows),
        Rows::new(g.a.as_chunks::<AB>().0, g.nb, g.n_tok),
    );
    let p = Placement {
        nb: g.nb,
        stride: g.out_stride,
    };
    match (K::ACC, arows.len()) {
        (_, 1) => gemv::<K, WB, AB>(wrows, arows.get(0), out),
        (Accumulators::One, _) => match K::SHAPE {
            Shape::R4T2 => tiles::<K, WB, AB, 4, 2>(wrows, arows, p, out),
            Shape::R1T4 => tiles::<K, WB, AB, 1, 4>(wrows, arows, p, out),
            Shape::R2T4 => tiles::<K, WB, AB, 2, 4>(wrows, arows, p, out),
        },
    }
}

/// One token: `out[j] = w[j] · a` for every weight row, one `1 × 1` tile
/// per row (the same arithmetic as `vec_dot`, so the same bits).
///
/// Each row is a call to the out-of-line [`dot1`]: with the tile inlined
/// into this loop, decode GEMVs ran 1.4–3× slower (`gemm_speed`, Q8_0
/// 1536 × 576: 0.175 → 0.056 ms; the 49152-row head: 6.05 → 3.36 ms).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn gemv<K, const WB: usize, const AB: usize>(wrows: Rows<'_, WB>, a: &[[u8; AB]], out: &mut [f32])
where
    K: BlockDot<WB, AB>,
{
    for (j, o) in out.iter_mut().take(wrows.len()).enumerate() {
        *o = dot1::<K, WB, AB>(wrows.get(j), a);
    }
}

/// `w · a` as a `1 × 1` tile, kept out of line (see [`gemv`]).
///
/// * `w`, `a`: one weight and one activation row of `nb` blocks each.
#[inline(never)]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot1<K, const WB: usize, const AB: usize>(w: &[[u8; WB]], a: &[[u8; AB]]) -> f32
where
    K: BlockDot<WB, AB>,
{
    tile::<K, WB, AB, 1, 1>([w], [a], w.len().min(a.len()))[0][0]
}

/// `n` rows of `nb` blocks each, viewed in a contiguous block slice.
#[derive(Clone, Copy)]
struct Rows<'a, const B: usize> {
    blocks: &'a [[u8; B]],
    nb: usize,
    n: usize,
}

impl<'a, const B: usize> Rows<'a, B> {
    /// The first `n` whole rows of `nb` blocks that `blocks` holds.
    fn new(blocks: &'a [[u8; B]], nb: usize, n: usize) -> Rows<'a, B> {
        let whole = blocks.len().checked_div(nb).unwrap_or(0);
        Rows {
            blocks,
            nb,
            n: n.min(whole),
        }
    }

    fn len(&self) -> usize {
        self.n
    }

    /// Row `i` (`i < len()`; an empty row otherwise).
    #[inline(always)]
    fn get(&self, i: usize) -> &'a [[u8; B]] {
        self.blocks
            .get(i * self.nb..(i + 1) * self.nb)
            .unwrap_or(&[])
    }
}

/// Blocks per row and the output row stride of a product.
#[derive(Clone, Copy)]
struct Placement {
    nb: usize,
    stride: usize,
}

/// Covers `wrows × arows` with `R × T` tiles, the leftover rows with
/// `1 × T` tiles and the leftover tokens with `R × 1` / `1 × 1` tiles;
/// `out[t * stride + j]` receives row `j` · token `t`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tiles<K, const WB: usize, const AB: usize, const R: usize, const T: usize>(
    wrows: Rows<'_, WB>,
    arows: Rows<'_, AB>,
    p: Placement,
    out: &mut [f32],
) where
    K: BlockDot<WB, AB>,
{
    let (wfull, afull) = (wrows.len() / R * R, arows.len() / T * T);
    for r0 in (0..wfull).step_by(R) {
        let mut w: [&[[u8; WB]]; R] = [&[]; R];
        for (r, row) in w.iter_mut().enumerate() {
            *row = wrows.get(r0 + r);
        }
        for t0 in (0..afull).step_by(T) {
            let y = tile::<K, WB, AB, R, T>(w, rows_at(arows, t0), p.nb);
            store(out, p.stride, (r0, t0), &y);
        }
        for t0 in afull..arows.len() {
            let y = tile::<K, WB, AB, R, 1>(w, [arows.get(t0)], p.nb);
            store(out, p.stride, (r0, t0), &y);
        }
    }
    for r0 in wfull..wrows.len() {
        let wrow = wrows.get(r0);
        for t0 in (0..afull).step_by(T) {
            let y = tile::<K, WB, AB, 1, T>([wrow], rows_at(arows, t0), p.nb);
            store(out, p.stride, (r0, t0), &y);
        }
        for t0 in afull..arows.len() {
            let y = tile::<K, WB, AB, 1, 1>([wrow], [arows.get(t0)], p.nb);
            store(out, p.stride, (r0, t0), &y);
        }
    }
}

/// Rows `i0..i0 + N` of `rows` (empty past the end).
#[inline(always)]
fn rows_at<const B: usize, const N: usize>(rows: Rows<'_, B>, i0: usize) -> [&[[u8; B]]; N] {
    let mut v: [&[[u8; B]]; N] = [&[]; N];
    for (i, row) in v.iter_mut().enumerate() {
        *row = rows.get(i0 + i);
    }
    v
}

/// Writes an `R × T` tile's results: row `r0 + r` · token `t0 + t` to
/// `out[(t0 + t) * stride + r0 + r]` (writes past `out` are skipped).
#[inline(always)]
fn store<const R: usize, const T: usize>(
    out: &mut [f32],
    stride: usize,
    (r0, t0): (usize, usize),
    y: &[[f32; T]; R],
) {
    for (r, yr) in y.iter().enumerate() {
        for (t, &v) in yr.iter().enumerate() {
            if let Some(o) = out.get_mut((t0 + t) * stride + r0 + r) {
                *o = v;
            }
        }
    }
}

/// Runs the AVX2 tiles of `kernel` over `g` into `out`; `false` if
/// `kernel` has no tile (the caller then takes one `vec_dot` per element).
///
/// * `out`: at least `(n_tok - 1) * out_stride + n_rows` values (checked by
///   the caller; writes outside `out` are skipped, never performed).
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn gemm(kernel: Kernel, g: &GemmArgs<'_>, out: &mut [f32]) -> bool {
    const Q8_0: usize = BlockQ8_0::BYTES;
    const Q8_1: usize = BlockQ8_1::BYTES;
    const Q8_K: usize = BlockQ8_K::BYTES;
    match kernel {
        Kernel::Q8_0 => gemm_k::<Q8_0Dot, Q8_0, Q8_0>(g, out),
        Kernel::Q4_0 => gemm_k::<Q4_0Dot, { BlockQ4_0::BYTES }, Q8_0>(g, out),
        Kernel::IQ4NL => gemm_k::<IQ4NLDot, { BlockIQ4_NL::BYTES }, Q8_0>(g, out),
        Kernel::MXFP4 => gemm_k::<MXFP4Dot, { BlockMXFP4::BYTES }, Q8_0>(g, out),
        Kernel::IQ4XS => gemm_k::<IQ4XSDot, { BlockIQ4_XS::BYTES }, Q8_K>(g, out),
        Kernel::Q2K => gemm_k::<Q2KDot, { BlockQ2_K::BYTES }, Q8_K>(g, out),
        Kernel::Q3K => gemm_k::<Q3KDot, { BlockQ3_K::BYTES }, Q8_K>(g, out),
        Kernel::Q5_0 => gemm_k::<Q5_0Dot, { BlockQ5_0::BYTES }, Q8_0>(g, out),
        Kernel::Q4_1 => gemm_k::<Q4_1Dot, { BlockQ4_1::BYTES }, Q8_1>(g, out),
        Kernel::Q5_1 => gemm_k::<Q5_1Dot, { BlockQ5_1::BYTES }, Q8_1>(g, out),
        Kernel::Q4K => gemm_k::<Q4KDot, { BlockQ4_K::BYTES }, Q8_K>(g, out),
        Kernel::Q5K => gemm_k::<Q5KDot, { BlockQ5_K::BYTES }, Q8_K>(g, out),
        Kernel::Q6K => gemm_k::<Q6KDot, { BlockQ6_K::BYTES }, Q8_K>(g, out),
        Kernel::Q8K
        | Kernel::F16
        | Kernel::F32
        | Kernel::BF16
        | Kernel::Grid(_)
        | Kernel::NVFP4
        | Kernel::Q1_0 => return false,
    }
    true
}

// ---------------------------------------------------------------------------
// 32-element formats: one step per block.

/// Scale (and min) of a 32-element block, as `f32`.
#[derive(Clone, Copy)]
pub(crate) struct Scales {
    d: f32,
    m: f32,
}

/// A signed weight slice: values `x` and `|x|`.
#[derive(Clone, Copy)]
pub(crate) struct SignedW {
    x: __m256i,
    ax: __m256i,
}

/// Signed weights: `Σ x·y` as `|x| · (y · sign(x))`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn signed_w(x: __m256i) -> SignedW {
    SignedW {
        x,
        ax: _mm256_sign_epi8(x, x),
    }
}

/// The IQ4 levels of 32 index bytes (each in `0..16`): one byte shuffle
/// against the 16 levels, held in both 128-bit lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn iq4_levels(idx: __m256i) -> __m256i {
    let l = IQ4_LEVELS;
    let levels = _mm256_broadcastsi128_si256(_mm_setr_epi8(
        l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7], l[8], l[9], l[10], l[11], l[12], l[13],
        l[14], l[15],
    ));
    _mm256_shuffle_epi8(levels, idx)
}

/// Q8_0 weights · Q8_0 activations.
pub(crate) struct Q8_0Dot;
/// Q4_0 weights · Q8_0 activations.
pub(crate) struct Q4_0Dot;
/// Q5_0 weights · Q8_0 activations.
pub(crate) struct Q5_0Dot;
/// IQ4_NL weights · Q8_0 activations.
pub(crate) struct IQ4NLDot;
/// MXFP4 weights · Q8_0 activations.
pub(crate) struct MXFP4Dot;
/// Q4_1 weights · Q8_1 activations.
pub(crate) struct Q4_1Dot;
/// Q5_1 weights · Q8_1 activations.
pub(crate) struct Q5_1Dot;

/// The shared parts of the signed formats with Q8_0 activations
/// (`d` f16 at byte 0 of both blocks, activation quants at 2; a format
/// with another weight scale names how it reads it, `b => expr`); the
/// caller adds `w_step`, which builds the 32 signed weight values.
///
/// # Safety
///
/// It expands to [`BlockDot`] methods: each `unsafe fn` it makes has the
/// trait method's contract (the CPU must support AVX2, FMA and F16C, which
/// its `target_feature` list enables) and reads only inside its fixed-size
/// block arguments.
macro_rules! signed_q8_0 {
    ($wb:literal) => {
        signed_q8_0!($wb, b => f16c(u16_at::<0, $wb>(b)));
    };
    ($wb:literal, $b:ident => $d:expr) => {
        const STEPS: usize = 1;
        const ACC: Accumulators = Accumulators::One;
        type WI = Scales;
        type AI = Scales;
        type WS = SignedW;
        type AS = __m256i;
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn w_info($b: &[u8; $wb]) -> Scales {
            Scales { d: $d, m: 0.0 }
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn a_info(b: &[u8; 34]) -> Scales {
            Scales {
                d: f16c(u16_at::<0, 34>(b)),
                m: 0.0,
            }
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn a_step(b: &[u8; 34], _s: usize) -> __m256i {
            load32::<2, 34>(b)
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn step(w: &SignedW, y: &__m256i) -> __m256i {
            dot_u8_i8(w.ax, _mm256_sign_epi8(*y, w.x))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn scale(w: &Scales, a: &Scales, _extra: &mut f32) -> f32 {
            w.d * a.d
        }
    };
}

// SAFETY: the associated types are vectors, `f32`s and byte arrays.
unsafe impl BlockDot<34, 34> for Q8_0Dot {
    signed_q8_0!(34);
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn w_step(b: &[u8; 34], _info: &Scales, _s: usize) -> SignedW {
        signed_w(load32::<2, 34>(b))
    }
}

// SAFETY: the associated types are vectors, `f32`s and byte arrays.
unsafe impl BlockDot<18, 34> for Q4_0Dot {
    signed_q8_0!(18);
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn w_step(b: &[u8; 18], _info: &Scales, _s: usize) -> SignedW {
        signed_w(_mm256_sub_epi8(
            nibbles_16(load16::<2, 18>(b)),
            _mm256_set1_epi8(8),
        ))
    }
}

// SAFETY: the associated types are vectors, `f32`s and byte arrays.
unsafe impl BlockDot<18, 34> for IQ4NLDot {
    signed_q8_0!(18);
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn w_step(b: &[u8; 18], _info: &Scales, _s: usize) -> SignedW {
        signed_w(iq4_levels(nibbles_16(load16::<2, 18>(b))))
    }
}

// SAFETY: the associated types are vectors, `f32`s and byte arrays.
unsafe impl BlockDot<17, 34> for MXFP4Dot {
    // The E8M0 exponent byte's `2^(e − 128)`; `w.d · a.d` is ggml's
    // `d_a · d_w` (one rounding either way).
    signed_q8_0!(17, b => crate::fp::e8m0_to_f32_half(b[0]));
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn w_step(b: &[u8; 17], _info: &Scales, _s: usize) -> SignedW {
        let l = MXFP4_LEVELS;
        let levels = _mm256_broadcastsi128_si256(_mm_setr_epi8(
            l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7], l[8], l[9], l[10], l[11], l[12], l[13],
            l[14], l[15],
        ));
        signed_w(_mm256_shuffle_epi8(levels, nibbles_16(load16::<1, 17>(b))))
    }
}

// SAFETY: the associated types are vectors, `f32`s and byte arrays.
unsafe impl BlockDot<22, 34> for Q5_0Dot {
    signed_q8_0!(22);
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn w_step(b: &[u8; 22], _info: &Scales, _s: usize) -> SignedW {
        let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
        let high = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10));
        let q5 = _mm256_or_si256(nibbles_16(load16::<6, 22>(b)), high);
        signed_w(_mm256_sub_epi8(q5, _mm256_set1_epi8(16)))
    }
}

/// The shared parts of the unsigned formats with mins and Q8_1
/// activations (`d`, `m` f16 at bytes 0 and 2 of the weight block; `d`,
/// `s` f16 at 0 and 2 of the activation block, quants at 4). The min term
/// `m · s` goes into `extra`.
///
/// # Safety
///
/// It expands to [`BlockDot`] methods: each `unsafe fn` it makes has the
/// trait method's contract (the CPU must support AVX2, FMA and F16C, which
/// its `target_feature` list enables) and reads only inside its fixed-size
/// block arguments.
macro_rules! unsigned_q8_1 {
    ($wb:literal) => {
        const STEPS: usize = 1;
        const ACC: Accumulators = Accumulators::One;
        type WI = Scales;
        type AI = Scales;
        type WS = __m256i;
        type AS = __m256i;
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn w_info(b: &[u8; $wb]) -> Scales {
            Scales {
                d: f16c(u16_at::<0, $wb>(b)),
                m: f16c(u16_at::<2, $wb>(b)),
            }
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn a_info(b: &[u8; 36]) -> Scales {
            Scales {
                d: f16c(u16_at::<0, 36>(b)),
                m: f16c(u16_at::<2, 36>(b)),
            }
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn a_step(b: &[u8; 36], _s: usize) -> __m256i {
            load32::<4, 36>(b)
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn step(x: &__m256i, y: &__m256i) -> __m256i {
            dot_u8_i8(*x, *y)
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn scale(w: &Scales, a: &Scales, extra: &mut f32) -> f32 {
            *extra += w.m * a.m;
            w.d * a.d
        }
    };
}

// SAFETY: the associated types are vectors, `f32`s and byte arrays.
unsafe impl BlockDot<20, 36> for Q4_1Dot {
    unsigned_q8_1!(20);
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn w_step(b: &[u8; 20], _info: &Scales, _s: usize) -> __m256i {
        nibbles_16(load16::<4, 20>(b))
    }
}

// SAFETY: the associated types are vectors, `f32`s and byte arrays.
unsafe impl BlockDot<24, 36> for Q5_1Dot {
    unsigned_q8_1!(24);
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn w_step(b: &[u8; 24], _info: &Scales, _s: usize) -> __m256i {
        let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        let high = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10));
        _mm256_or_si256(nibbles_16(load16::<8, 24>(b)), high)
    }
}

// ---------------------------------------------------------------------------
// k-quants: 256-element super-blocks, Q8_K activations, 8 steps of 32.

/// Q8_K activation block info: scale (f32 at byte 0) and the 16 `i16`
/// group sums `bsums` (at byte 260).
#[derive(Clone, Copy)]
pub(crate) struct Q8KInfo {
    d: f32,
    bsums: __m256i,
}

/// Q8_K block info.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn q8_k_info(b: &[u8; 292]) -> Q8KInfo {
    Q8KInfo {
        d: f32_at::<0, 292>(b),
        bsums: load32::<260, 292>(b),
    }
}

/// The 32 activation quants of step `s` (bytes `4 + 32s..`).
#[inline]
#[target_feature(enable = "avx2")]
fn q8_k_quants(b: &[u8; 292], s: usize) -> __m256i {
    match s {
        0 => load32::<4, 292>(b),
        1 => load32::<36, 292>(b),
        2 => load32::<68, 292>(b),
        3 => load32::<100, 292>(b),
        4 => load32::<132, 292>(b),
        5 => load32::<164, 292>(b),
        6 => load32::<196, 292>(b),
        _ => load32::<228, 292>(b),
    }
}

/// The 32 bytes at `OFF + 32 · (s % 4)` of a block (`s < 8` selects one of
/// four 32-byte chunks; steps `s` and `s + 4` share a chunk).
#[inline]
#[target_feature(enable = "avx2")]
fn chunk4<const OFF: usize, const N: usize>(b: &[u8; N], s: usize) -> __m256i {
    const { assert!(OFF + 128 <= N) };
    // SAFETY: `OFF + 128 <= N` (checked at compile time above), and the
    // offset `32 · (s % 4)` is at most 96, so the 32 bytes are inside `b`.
    unsafe { _mm256_loadu_si256(b.as_ptr().add(OFF + 32 * (s % 4)).cast()) }
}

/// Q4_K/Q5_K weight block info: `d`, `dmin` (f16 at 0 and 2), the eight
/// 6-bit sub-block scales and the mins paired like `bsums` (`m[g / 2]` at
/// `i16` lane `g`).
#[derive(Clone, Copy)]
pub(crate) struct KMinsInfo {
    d: f32,
    dmin: f32,
    sc: [u8; 8],
    m: __m256i,
}

/// Q4_K/Q5_K block info from an `N`-byte block (packed scales at 4).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn k_mins_info<const N: usize>(b: &[u8; N]) -> KMinsInfo {
    let mut packed = [0u8; 12];
    packed.copy_from_slice(&b[4..16]);
    let (sc, m) = get_scale_min_k4(&packed);
    let mut m16 = [0i16; 16];
    for (g, v) in m16.iter_mut().enumerate() {
        *v = i16::from(m[g / 2]);
    }
    KMinsInfo {
        d: f16c(u16_at::<0, N>(b)),
        dmin: f16c(u16_at::<2, N>(b)),
        sc,
        // SAFETY: `m16` is 32 bytes; `loadu` has no alignment requirement.
        m: unsafe { _mm256_loadu_si256(m16.as_ptr().cast()) },
    }
}

/// A k-quant step's weight operand: 32 unsigned values and their `i16`
/// scale(s).
#[derive(Clone, Copy)]
pub(crate) struct KStepW {
    q: __m256i,
    sc: __m256i,
}

/// Q4_K/Q5_K `d` and min term:
/// `extra -= (dmin_w · d_a) · Σ_g bsums[g] · m[g / 2]`, `d = d_w · d_a`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn k_mins_scale(w: &KMinsInfo, a: &Q8KInfo, extra: &mut f32) -> f32 {
    let min_sum = hsum_epi32(_mm256_madd_epi16(a.bsums, w.m));
    *extra -= (w.dmin * a.d) * min_sum as f32;
    w.d * a.d
}

/// Q4_K/Q5_K step `s`: sub-block `s` is the low (even `s`) or high (odd
/// `s`) nibbles of `qs[32(s/2)..]`, i.e. chunk `s / 2`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn k_nibbles<const N: usize>(b: &[u8; N], s: usize) -> __m256i {
    let c = s / 2;
    // SAFETY: `qs` is the last 128 bytes; chunk `c < 4` lies inside it.
    let q4 = unsafe { _mm256_loadu_si256(b.as_ptr().add(N - 128 + 32 * c).cast()) };
    let v = if s.is_multiple_of(2) {
        q4
    } else {
        _mm256_srli_epi16::<4>(q4)
    };
    _mm256_and_si256(v, _mm256_set1_epi8(0x0F))
}

/// Q4_K weights · Q8_K activations.
pub(crate) struct Q4KDot;
/// Q5_K weights · Q8_K activations.
pub(crate) struct Q5KDot;
/// Q6_K weights · Q8_K activations.
pub(crate) struct Q6KDot;

/// The shared parts of Q4_K/Q5_K (`sumi += sc[s] · (q_s · y_s)`).
///
/// # Safety
///
/// It expands to [`BlockDot`] methods: each `unsafe fn` it makes has the
/// trait method's contract (the CPU must support AVX2, FMA and F16C, which
/// its `target_feature` list enables) and reads only inside its fixed-size
/// block arguments.
macro_rules! k_mins {
    ($wb:literal) => {
        const STEPS: usize = 8;
        const ACC: Accumulators = Accumulators::One;
        // Measured best for the 8-step K blocks (`gemm_speed`).
        const SHAPE: Shape = Shape::R1T4;
        type WI = KMinsInfo;
        type AI = Q8KInfo;
        type WS = KStepW;
        type AS = __m256i;
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn w_info(b: &[u8; $wb]) -> KMinsInfo {
            k_mins_info(b)
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn a_info(b: &[u8; 292]) -> Q8KInfo {
            q8_k_info(b)
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn a_step(b: &[u8; 292], s: usize) -> __m256i {
            q8_k_quants(b, s)
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn step(w: &KStepW, y: &__m256i) -> __m256i {
            _mm256_madd_epi16(_mm256_maddubs_epi16(w.q, *y), w.sc)
        }
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn scale(w: &KMinsInfo, a: &Q8KInfo, extra: &mut f32) -> f32 {
            k_mins_scale(w, a, extra)
        }
    };
}

/// IQ4_XS weights · Q8_K activations.
pub(crate) struct IQ4XSDot;

/// IQ4_XS block info: `d_w` and the 8 sub-block scales `ls - 32`.
#[derive(Clone, Copy)]
pub(crate) struct XsInfo {
    d: f32,
    sc: [i8; 8],
}

/// One IQ4_XS step: 32 signed levels and their sub-block's scale.
#[derive(Clone, Copy)]
pub(crate) struct XsStep {
    w: SignedW,
    sc: __m256i,
}

// SAFETY: the associated types are vectors, `f32`s and byte arrays.
unsafe impl BlockDot<136, 292> for IQ4XSDot {
    const STEPS: usize = 8;
    const ACC: Accumulators = Accumulators::One;
    const SHAPE: Shape = Shape::R1T4;
    type WI = XsInfo;
    type AI = Q8KInfo;
    type WS = XsStep;
    type AS = __m256i;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn w_info(b: &[u8; 136]) -> XsInfo {
        let h = u16_at::<2, 136>(b);
        XsInfo {
            d: f16c(u16_at::<0, 136>(b)),
            sc: std::array::from_fn(|k| {
                let low = (b[4 + k / 2] >> (4 * (k % 2))) & 0x0F;
                let high = ((h >> (2 * k)) & 3) as u8;
                (low | (high << 4)) as i8 - 32
            }),
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn a_info(b: &[u8; 292]) -> Q8KInfo {
        q8_k_info(b)
    }

    /// Step `s` covers elements `32s..32s + 32`: index bytes `8 + 16s..`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn w_step(b: &[u8; 136], info: &XsInfo, s: usize) -> XsStep {
        let idx = match s {
            0 => load16::<8, 136>(b),
            1 => load16::<24, 136>(b),
            2 => load16::<40, 136>(b),
            3 => load16::<56, 136>(b),
            4 => load16::<72, 136>(b),
            5 => load16::<88, 136>(b),
            6 => load16::<104, 136>(b),
            _ => load16::<120, 136>(b),
        };
        XsStep {
            w: signed_w(iq4_levels(nibbles_16(idx))),
            sc: _mm256_set1_epi16(i16::from(info.sc[s % 8])),
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn a_step(b: &[u8; 292], s: usize) -> __m256i {
        q8_k_quants(b, s)
    }

    /// `Σ sc · w · y` as `|w| · (y · sign(w))` pairs, weighted by the
    /// sub-block scale (pairs of at most 2 · 127 · 127: no saturation).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn step(w: &XsStep, y: &__m256i) -> __m256i {
        let pairs = _mm256_maddubs_epi16(w.w.ax, _mm256_sign_epi8(*y, w.w.x));
        _mm256_madd_epi16(pairs, w.sc)
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn scale(w: &XsInfo, a: &Q8KInfo, _extra: &mut f32) -> f32 {
        w.d * a.d
    }
}

/// Q2_K weights · Q8_K activations.
pub(crate) struct Q2KDot;
/// Q3_K weights · Q8_K activations.
pub(crate) struct Q3KDot;

/// The low 2 bits of step `s`'s 32 elements: `(qs[32(s/4) + l] >> 2(s%4)) & 3`,
/// `qs` at byte `QS` of an `N`-byte block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn low2<const QS: usize, const N: usize>(b: &[u8; N], s: usize) -> __m256i {
    let c = (s / 4) % 2;
    // SAFETY: `QS + 64 <= N` for both formats (Q2_K: 16 + 64 <= 84; Q3_K:
    // 32 + 64 <= 110) and `c < 2`, so the 32 bytes lie inside `b`.
    let q = unsafe { _mm256_loadu_si256(b.as_ptr().add(QS + 32 * c).cast()) };
    let v = match s % 4 {
        0 => q,
        1 => _mm256_srli_epi16::<2>(q),
        2 => _mm256_srli_epi16::<4>(q),
        _ => _mm256_srli_epi16::<6>(q),
    };
    _mm256_and_si256(v, _mm256_set1_epi8(3))
}

/// The `i16` scales of a step's two 16-element sub-blocks: `a` for the
/// first 8 pair sums, `b` for the last 8.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn two_scales(a: i16, b: i16) -> __m256i {
    _mm256_set_m128i(_mm_set1_epi16(b), _mm_set1_epi16(a))
}

/// Q2_K block info: scales, and the mins as 16 `i16`s for the min term.
#[derive(Clone, Copy)]
pub(crate) struct Q2KInfo {
    d: f32,
    dmin: f32,
    sc: [u8; 16],
    m: __m256i,
}

// SAFETY: the associated types are vectors, `f32`s and byte arrays.
unsafe impl BlockDot<84, 292> for Q2KDot {
    const STEPS: usize = 8;
    const ACC: Accumulators = Accumulators::One;
    const SHAPE: Shape = Shape::R1T4;
    type WI = Q2KInfo;
    type AI = Q8KInfo;
    type WS = KStepW;
    type AS = __m256i;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn w_info(b: &[u8; 84]) -> Q2KInfo {
        let mut sc = [0u8; 16];
        sc.copy_from_slice(&b[..16]);
        let m16: [i16; 16] = std::array::from_fn(|g| i16::from(sc[g] >> 4));
        Q2KInfo {
            d: f16c(u16_at::<80, 84>(b)),
            dmin: f16c(u16_at::<82, 84>(b)),
            sc,
            // SAFETY: `m16` is 32 bytes; `loadu` has no alignment requirement.
            m: unsafe { _mm256_loadu_si256(m16.as_ptr().cast()) },
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn a_info(b: &[u8; 292]) -> Q8KInfo {
        q8_k_info(b)
    }

    /// Step `s` covers sub-blocks `2s` and `2s + 1`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn w_step(b: &[u8; 84], info: &Q2KInfo, s: usize) -> KStepW {
        let (a, c) = (info.sc[(2 * s) % 16], info.sc[(2 * s + 1) % 16]);
        KStepW {
            q: low2::<16, 84>(b, s),
            sc: two_scales(i16::from(a & 0x0F), i16::from(c & 0x0F)),
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn a_step(b: &[u8; 292], s: usize) -> __m256i {
        q8_k_quants(b, s)
    }

    /// Unsigned 2-bit weights times signed activations, weighted by scale.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn step(w: &KStepW, y: &__m256i) -> __m256i {
        _mm256_madd_epi16(_mm256_maddubs_epi16(w.q, *y), w.sc)
    }

    /// `extra -= (dmin_w · d_a) · Σ_g bsums[g] · min[g]`; `d = d_w · d_a`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn scale(w: &Q2KInfo, a: &Q8KInfo, extra: &mut f32) -> f32 {
        let min_sum = hsum_epi32(_mm256_madd_epi16(a.bsums, w.m));
        *extra -= (w.dmin * a.d) * min_sum as f32;
        w.d * a.d
    }
}

/// Q3_K block info: `d_w` and the 16 scales `s - 32`.
#[derive(Clone, Copy)]
pub(crate) struct Q3KInfo {
    d: f32,
    sc: [i8; 16],
}

/// One Q3_K step: 32 signed values and their two sub-blocks' scales.
#[derive(Clone, Copy)]
pub(crate) struct Q3KStep {
    w: SignedW,
    sc: __m256i,
}

// SAFETY: the associated types are vectors, `f32`s and byte arrays.
unsafe impl BlockDot<110, 292> for Q3KDot {
    const STEPS: usize = 8;
    const ACC: Accumulators = Accumulators::One;
    const SHAPE: Shape = Shape::R1T4;
    type WI = Q3KInfo;
    type AI = Q8KInfo;
    type WS = Q3KStep;
    type AS = __m256i;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn w_info(b: &[u8; 110]) -> Q3KInfo {
        let s = &b[96..108];
        Q3KInfo {
            d: f16c(u16_at::<108, 110>(b)),
            sc: std::array::from_fn(|k| {
                let low = if k < 8 { s[k] & 0x0F } else { s[k - 8] >> 4 };
                let high = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
                (low | (high << 4)) as i8 - 32
            }),
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn a_info(b: &[u8; 292]) -> Q8KInfo {
        q8_k_info(b)
    }

    /// Step `s`: low bits as Q2_K's, minus 4 where bit `s` of `hmask[l]`
    /// (32 bytes at 0) is clear.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn w_step(b: &[u8; 110], info: &Q3KInfo, s: usize) -> Q3KStep {
        let hm = load32::<0, 110>(b);
        let bit = _mm256_set1_epi8((1u8 << (s % 8)) as i8);
        let set = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit);
        let with_high = _mm256_or_si256(
            low2::<32, 110>(b, s),
            _mm256_and_si256(set, _mm256_set1_epi8(4)),
        );
        let (a, c) = (info.sc[(2 * s) % 16], info.sc[(2 * s + 1) % 16]);
        Q3KStep {
            w: signed_w(_mm256_sub_epi8(with_high, _mm256_set1_epi8(4))),
            sc: two_scales(i16::from(a), i16::from(c)),
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn a_step(b: &[u8; 292], s: usize) -> __m256i {
        q8_k_quants(b, s)
    }

    /// Signed weights as `|w| · (y · sign(w))`, weighted by scale.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn step(w: &Q3KStep, y: &__m256i) -> __m256i {
        let pairs = _mm256_maddubs_epi16(w.w.ax, _mm256_sign_epi8(*y, w.w.x));
        _mm256_madd_epi16(pairs, w.sc)
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn scale(w: &Q3KInfo, a: &Q8KInfo, _extra: &mut f32) -> f32 {
        w.d * a.d
    }
}

// SAFETY: the associated types are vectors, `f32`s and byte arrays.
unsafe impl BlockDot<144, 292> for Q4KDot {
    k_mins!(144);
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn w_step(b: &[u8; 144], info: &KMinsInfo, s: usize) -> KStepW {
        KStepW {
            q: k_nibbles(b, s),
            sc: _mm256_set1_epi16(i16::from(info.sc[s % 8])),
        }
    }
}

// SAFETY: the associated types are vectors, `f32`s and byte arrays.
unsafe impl BlockDot<176, 292> for Q5KDot {
    k_mins!(176);
    /// Q5_K adds bit `s` of `qh[l]` (32 bytes at 16) as bit 4.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn w_step(b: &[u8; 176], info: &KMinsInfo, s: usize) -> KStepW {
        let qh = load32::<16, 176>(b);
        let bit = _mm256_set1_epi8((1u8 << (s % 8)) as i8);
        let h = _mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit);
        let high = _mm256_and_si256(h, _mm256_set1_epi8(0x10));
        KStepW {
            q: _mm256_or_si256(k_nibbles(b, s), high),
            sc: _mm256_set1_epi16(i16::from(info.sc[s % 8])),
        }
    }
}

/// Q6_K activation step: quants and their `32 · y` pair sums.
#[derive(Clone, Copy)]
pub(crate) struct Q6A {
    y: __m256i,
    bias: __m256i,
}

// SAFETY: the associated types are vectors, `f32`s and byte arrays.
unsafe impl BlockDot<210, 292> for Q6KDot {
    const STEPS: usize = 8;
    const ACC: Accumulators = Accumulators::One;
    // Measured best for Q6_K's 8-step blocks (`gemm_speed`: 4 × 2 spills).
    const SHAPE: Shape = Shape::R2T4;
    type WI = f32;
    type AI = Q8KInfo;
    type WS = KStepW;
    type AS = Q6A;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn w_info(b: &[u8; 210]) -> f32 {
        f16c(u16_at::<208, 210>(b))
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn a_info(b: &[u8; 292]) -> Q8KInfo {
        q8_k_info(b)
    }

    /// Step `s = 4h + i` covers elements `128h + 32i..`; half `h` reads
    /// `ql[64h..64h+64]` and `qh[32h..32h+32]`:
    ///
    /// ```text
    ///   i = 0: ql[l]    & 15 | (qh[l]      & 3) << 4
    ///   i = 1: ql[32+l] & 15 | (qh[l] >> 2 & 3) << 4
    ///   i = 2: ql[l]    >> 4 | (qh[l] >> 4 & 3) << 4
    ///   i = 3: ql[32+l] >> 4 | (qh[l] >> 6    ) << 4
    /// ```
    ///
    /// Bytes `0..16` take scale `2s`, bytes `16..32` scale `2s + 1`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn w_step(b: &[u8; 210], _info: &f32, s: usize) -> KStepW {
        let (h, i) = ((s / 4) % 2, s % 4);
        // ql chunk 2h + (i % 2): bytes 64h + 32(i % 2).
        let ql = chunk4::<0, 210>(b, 2 * h + i % 2);
        // SAFETY: `128 + 32h + 32 <= 192 <= 210`.
        let qh = unsafe { _mm256_loadu_si256(b.as_ptr().add(128 + 32 * h).cast()) };
        let m4 = _mm256_set1_epi8(0x0F);
        let lo = if i < 2 {
            _mm256_and_si256(ql, m4)
        } else {
            _mm256_and_si256(_mm256_srli_epi16::<4>(ql), m4)
        };
        let hi = match i {
            0 => _mm256_slli_epi16::<4>(_mm256_and_si256(qh, _mm256_set1_epi8(0x03))),
            1 => _mm256_slli_epi16::<2>(_mm256_and_si256(qh, _mm256_set1_epi8(0x0C))),
            2 => _mm256_and_si256(qh, _mm256_set1_epi8(0x30)),
            _ => _mm256_srli_epi16::<2>(_mm256_and_si256(qh, _mm256_set1_epi8(0xC0u8 as i8))),
        };
        let k = 192 + 2 * (s % 8);
        let (s0, s1) = (b[k] as i8, b[k + 1] as i8);
        KStepW {
            q: _mm256_or_si256(lo, hi),
            sc: _mm256_set_m128i(_mm_set1_epi16(i16::from(s1)), _mm_set1_epi16(i16::from(s0))),
        }
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn a_step(b: &[u8; 292], s: usize) -> Q6A {
        let y = q8_k_quants(b, s);
        Q6A {
            y,
            bias: _mm256_maddubs_epi16(_mm256_set1_epi8(32), y),
        }
    }

    /// `sc · (q · y − 32 · y)` per 16 values, exact (`q < 64`).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn step(w: &KStepW, a: &Q6A) -> __m256i {
        let prod = _mm256_sub_epi16(_mm256_maddubs_epi16(w.q, a.y), a.bias);
        _mm256_madd_epi16(prod, w.sc)
    }

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn scale(w: &f32, a: &Q8KInfo, _extra: &mut f32) -> f32 {
        w * a.d
    }
}
