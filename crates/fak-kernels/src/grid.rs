//! Scalar dequantization and dot products of the codebook formats (IQ1_S,
//! IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S), following ggml's generic
//! code step for step.
//!
//! Every format decodes to the same integers ([`GridBlock`]): signed
//! codebook values `q`, scale codes `s` per 16 values, and IQ1's shift
//! signs per 8. The products of one super-block are exact integers; one
//! float step per super-block follows, in ggml's order:
//!
//! ```text
//!   isum = Σ_g (2·s[g] + 1) · Σ_{j in g} q[j] · a[j]                   (i32, exact)
//!   IQ2, IQ3:  sumf += (d_w · d_a) · isum as f32;  at the end  sumf · factor
//!              (factor: IQ2 1/8, IQ3_XXS 1/4, IQ3_S 1)
//!   IQ1:       ssum  = Σ_g (2·s[g] + 1) · Σ_{8-groups k in g} shift[k] · Σ a
//!              sumf += d_w · d_a · (isum as f32 + 0.125 · ssum as f32)
//! ```
//!
//! The integer sums have an AVX2 twin (`simd::grid_avx2`: `maddubs` of the
//! magnitudes with the signed activations); being exact integers, they are
//! the same on every ISA, and so is every result. Products of two tokens
//! or more decode each 8-row group once into the packed k-quant tiles
//! (`packed::grid`), which keep these float steps too.
//!
//! Dequantization, per ggml's `dequantize_row_*` (`s` the scale code):
//!
//! ```text
//!   IQ2_*    x = (d · (0.5 + s) · 0.25) · q          IQ3_XXS  x = (d · (0.5 + s) · 0.5) · q
//!   IQ3_S    x = (d · (1 + 2s) as f32) · q           IQ1_*    x = (d · (2s + 1) as f32) · (q ± 0.125)
//! ```

use crate::blocks::{BlockQ8_K, GridBlock, GridFormat, GridStep, Sub32};
use crate::dot_rows::check_dot;
use crate::error::KernelError;
use crate::fp::f16_to_f32;
use crate::isa::Isa;

/// Dequantizes one super-block of `fmt`.
///
/// * `b`: [`GridFormat::bytes`] encoded bytes; `y`: `[256]` values out.
pub(crate) fn dequant_block(fmt: GridFormat, b: &[u8], y: &mut [f32; 256]) {
    let g = fmt.decode(b);
    let d = f16_to_f32(g.d);
    for (sub, y32) in g.subs.iter().zip(y.as_chunks_mut::<32>().0) {
        let q = sub.values();
        for (k, (y8, q8)) in y32
            .as_chunks_mut::<8>()
            .0
            .iter_mut()
            .zip(q.as_chunks::<8>().0)
            .enumerate()
        {
            let s = sub.scales[k / 2];
            match fmt {
                GridFormat::IQ2_XXS | GridFormat::IQ2_XS | GridFormat::IQ2_S => {
                    scale8(y8, d * (0.5 + f32::from(s)) * 0.25, q8);
                }
                GridFormat::IQ3_XXS => scale8(y8, d * (0.5 + f32::from(s)) * 0.5, q8),
                GridFormat::IQ3_S => scale8(y8, d * (1 + 2 * i32::from(s)) as f32, q8),
                // ggml: `(float)(q - 1) * d`, the same product.
                GridFormat::TQ1_0 | GridFormat::TQ2_0 => scale8(y8, d, q8),
                GridFormat::IQ1_S | GridFormat::IQ1_M => {
                    let dl = d * (2 * i32::from(s) + 1) as f32;
                    let delta = 0.125 * f32::from(sub.shift[k]);
                    for (y, &q) in y8.iter_mut().zip(q8) {
                        *y = dl * (f32::from(q) + delta);
                    }
                }
            }
        }
    }
}

#[inline]
fn scale8(y: &mut [f32; 8], db: f32, q: &[i8; 8]) {
    for (y, &q) in y.iter_mut().zip(q) {
        *y = db * f32::from(q);
    }
}

/// The exact integer sums of one super-block against one Q8_K block:
/// `(isum, ssum)` of the module overview (`ssum` is 0 without shifts).
///
/// * `g`: the decoded weights; `a`: `[256]` activation quants.
#[inline]
pub(crate) fn block_sums(g: &GridBlock, a: &[i8; 256]) -> (i32, i32) {
    let (mut isum, mut ssum) = (0i32, 0i32);
    for (sub, x) in g.subs.iter().zip(a.as_chunks::<32>().0) {
        let q = sub.values();
        for h in 0..2 {
            let ls = sub.scale(h);
            let half = 16 * h..16 * h + 16;
            let dot: i32 = q[half.clone()]
                .iter()
                .zip(&x[half])
                .map(|(&w, &v)| i32::from(w) * i32::from(v))
                .sum();
            isum += ls * dot;
            for k in 2 * h..2 * h + 2 {
                let shift = i32::from(sub.shift[k]);
                if shift != 0 {
                    let sum: i32 = x[8 * k..8 * k + 8].iter().map(|&v| i32::from(v)).sum();
                    ssum += ls * shift * sum;
                }
            }
        }
    }
    (isum, ssum)
}

/// The integer sums of one block on `isa`: the AVX2 twin
/// (`simd::grid_avx2`) where the ISA allows it, else [`block_sums`]. Both
/// give the same integers.
#[inline]
fn sums_on(isa: Isa, g: &GridBlock, a: &[i8; 256]) -> (i32, i32) {
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Scalar && Isa::Avx2.is_available() {
        // SAFETY: AVX2 is available (checked just above).
        return unsafe { crate::simd::grid_avx2::block_sums(g, a) };
    }
    let _ = isa;
    block_sums(g, a)
}

/// The float step of one super-block: what it adds to the row's sum.
#[inline]
fn block_value(step: GridStep, dw: u16, y: &BlockQ8_K, (isum, ssum): (i32, i32)) -> f32 {
    let dw = f16_to_f32(dw);
    match step {
        GridStep::Scaled { .. } => (dw * y.d) * isum as f32,
        GridStep::Shifted => dw * y.d * (isum as f32 + 0.125 * ssum as f32),
    }
}

/// The row's sum after the last super-block.
#[inline]
fn row_end(step: GridStep, sumf: f32) -> f32 {
    match step {
        GridStep::Scaled { factor } => factor * sumf,
        GridStep::Shifted => sumf,
    }
}

/// One weight row against one token on AVX2, each block decoded into
/// registers ([`crate::simd::grid_avx2::block_sums_fused`]); the same float
/// steps, so the same bits as [`dot_on`]. (Two rows side by side, two
/// independent float chains, measured no faster.)
///
/// * `row`: one row of `fmt` blocks; `ys`: the token's Q8_K blocks.
///
/// # Safety
///
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn fused_row(fmt: GridFormat, row: &[u8], ys: &[BlockQ8_K]) -> f32 {
    use crate::blocks as bl;
    /// The row loop for one format: `B` bytes per block.
    #[inline(always)]
    fn run<const B: usize>(
        step: GridStep,
        row: &[u8],
        ys: &[BlockQ8_K],
        d: impl Fn(&[u8; B]) -> u16,
        sub: impl Fn(&[u8; B], usize) -> Sub32 + Copy,
        shifted: bool,
    ) -> f32 {
        let mut sumf = 0.0f32;
        for (b, y) in row.as_chunks::<B>().0.iter().zip(ys) {
            // SAFETY: the caller runs on a CPU with AVX2.
            let sums = unsafe { crate::simd::grid_avx2::block_sums_fused(b, &y.qs, sub, shifted) };
            sumf += block_value(step, d(b), y, sums);
        }
        row_end(step, sumf)
    }
    let step = fmt.step();
    match fmt {
        GridFormat::IQ2_XXS => run::<66>(step, row, ys, bl::d0, bl::iq2_xxs, false),
        GridFormat::IQ2_XS => run::<74>(step, row, ys, bl::d0, bl::iq2_xs, false),
        GridFormat::IQ2_S => run::<82>(step, row, ys, bl::d0, bl::iq2_s, false),
        GridFormat::IQ3_XXS => run::<98>(step, row, ys, bl::d0, bl::iq3_xxs, false),
        GridFormat::IQ3_S => run::<110>(step, row, ys, bl::d0, bl::iq3_s, false),
        GridFormat::IQ1_S => run::<50>(step, row, ys, bl::d0, bl::iq1_s, true),
        GridFormat::IQ1_M => run::<56>(step, row, ys, bl::iq1_m_scale, bl::iq1_m, true),
        // The ternary formats' codes go to the products straight from
        // their bits (`grid_avx2::tq*_sum`), not through a decoded block:
        // the one-token rows were bound by that decoding.
        GridFormat::TQ1_0 => {
            let mut sumf = 0.0f32;
            for (b, y) in row.as_chunks::<54>().0.iter().zip(ys) {
                let isum = crate::simd::grid_avx2::tq1_0_sum(b, &y.qs);
                sumf += block_value(step, bl::tq1_0_d(b), y, (isum, 0));
            }
            row_end(step, sumf)
        }
        GridFormat::TQ2_0 => {
            let mut sumf = 0.0f32;
            for (b, y) in row.as_chunks::<66>().0.iter().zip(ys) {
                let isum = crate::simd::grid_avx2::tq2_0_sum(b, &y.qs);
                sumf += block_value(step, bl::tq2_0_d(b), y, (isum, 0));
            }
            row_end(step, sumf)
        }
    }
}

/// One checked row pair on `isa`.
fn dot_on(isa: Isa, fmt: GridFormat, w: &[u8], a: &[u8]) -> f32 {
    let step = fmt.step();
    let mut sumf = 0.0f32;
    for (bw, ba) in w
        .chunks_exact(fmt.bytes())
        .zip(a.as_chunks::<{ BlockQ8_K::BYTES }>().0)
    {
        let (g, y) = (fmt.decode(bw), BlockQ8_K::from_bytes(ba));
        sumf += block_value(step, g.d, &y, sums_on(isa, &g, &y.qs));
    }
    row_end(step, sumf)
}

/// Codebook-format weights · Q8_K activations, as ggml's generic kernels
/// (module overview); the scalar reference.
///
/// * `w`: `n` weights of `fmt` (`n / 256` blocks of [`GridFormat::bytes`]);
///   `a`: `n` Q8_K elements (`n / 256 * 292` bytes).
///
/// # Errors
///
/// As [`crate::vec_dot`].
pub fn vec_dot_grid_q8_k(
    fmt: GridFormat,
    n: usize,
    w: &[u8],
    a: &[u8],
) -> Result<f32, KernelError> {
    check_dot(fmt.ty(), n, w, a)?;
    Ok(dot_on(Isa::Scalar, fmt, w, a))
}

/// The AVX2 twin of [`vec_dot_grid_q8_k`] on rows already checked (the
/// same bits).
#[cfg(target_arch = "x86_64")]
pub(crate) fn dot_avx2(fmt: GridFormat, w: &[u8], a: &[u8]) -> f32 {
    dot_on(Isa::Avx2, fmt, w, a)
}

/// [`crate::gemm::gemm`] for a codebook format: each weight row is decoded
/// once and dotted with every token, in [`vec_dot_grid_q8_k`]'s order, so
/// every output is that function's bits (on every ISA: the integer sums are
/// exact).
///
/// * `(w, n_rows)`: `[n_rows, n]` weights, rows of `n / 256` blocks;
///   `(a, n_tok)`: `[n_tok, n]` Q8_K rows; `out`: `[n_tok, out_stride]`,
///   the first `n_rows` of each token row written. The caller has checked
///   every length.
pub(crate) fn gemm(
    isa: Isa,
    fmt: GridFormat,
    n: usize,
    (w, n_rows): (&[u8], usize),
    (a, n_tok): (&[u8], usize),
    out: &mut [f32],
    out_stride: usize,
) {
    // Enough tokens on AVX2: each 8-row group decoded once into the packed
    // k-quant tiles (the same float steps); the rows past the last whole
    // group, or all of them, go on below.
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Scalar && Isa::Avx2.is_available() && n_tok >= crate::packed::grid::MIN_TOKENS {
        let vnni = isa == Isa::Avx512 && Isa::Avx512.is_available();
        // SAFETY: AVX2, FMA and F16C are available (checked just above);
        // with `vnni`, AVX-512 F, BW, VL and VNNI too.
        done = unsafe {
            crate::packed::grid::gemm(fmt, n, (w, n_rows), (a, n_tok), out, out_stride, vnni)
        };
    }
    if done < n_rows {
        let wrb = n / 256 * fmt.bytes();
        if let (Some(w), Some(out)) = (w.get(done * wrb..), out.get_mut(done..)) {
            rows_after_groups(isa, fmt, n, (w, n_rows - done), (a, n_tok), out, out_stride);
        }
    }
}

/// The rows of [`gemm`] that the decoded tiles do not take: all of them
/// below [`crate::packed::grid::MIN_TOKENS`] tokens (or without AVX2), the
/// last `n_rows % 8` otherwise. Same arguments as [`gemm`].
fn rows_after_groups(
    isa: Isa,
    fmt: GridFormat,
    n: usize,
    (w, n_rows): (&[u8], usize),
    (a, n_tok): (&[u8], usize),
    out: &mut [f32],
    out_stride: usize,
) {
    let (nb, step) = (n / 256, fmt.step());
    let wrb = nb * fmt.bytes();
    let acts: Vec<BlockQ8_K> = a
        .as_chunks::<{ BlockQ8_K::BYTES }>()
        .0
        .iter()
        .take(n_tok * nb)
        .map(BlockQ8_K::from_bytes)
        .collect();
    #[cfg(target_arch = "x86_64")]
    let avx2 = isa != Isa::Scalar && Isa::Avx2.is_available();
    #[cfg(not(target_arch = "x86_64"))]
    let avx2 = false;
    // Fewer than four tokens on AVX2 (the tiles' threshold, or the rows
    // past their groups): each block decoded straight into registers.
    #[cfg(target_arch = "x86_64")]
    if avx2 && n_tok < 4 {
        for (t, ys) in acts.chunks_exact(nb).enumerate() {
            for j in 0..n_rows {
                let row = w.get(j * wrb..(j + 1) * wrb).unwrap_or_default();
                // SAFETY: AVX2 is available (`avx2`).
                let v = unsafe { fused_row(fmt, row, ys) };
                if let Some(o) = out.get_mut(t * out_stride + j) {
                    *o = v;
                }
            }
        }
        return;
    }
    // Tokens in fours on AVX2 (one decoded sub-block for four tokens).
    let quads = if avx2 { n_tok / 4 } else { 0 };
    let mut blocks = vec![GridBlock::default(); nb];
    for j in 0..n_rows {
        let Some(row) = w.get(j * wrb..(j + 1) * wrb) else {
            return;
        };
        for (g, b) in blocks.iter_mut().zip(row.chunks_exact(fmt.bytes())) {
            fmt.decode_into(b, g);
        }
        let mut put = |t: usize, sumf: f32| {
            if let Some(o) = out.get_mut(t * out_stride + j) {
                *o = row_end(step, sumf);
            }
        };
        #[cfg(target_arch = "x86_64")]
        for q in 0..quads {
            let ys: [&[BlockQ8_K]; 4] =
                std::array::from_fn(|k| &acts[(4 * q + k) * nb..(4 * q + k + 1) * nb]);
            let mut sumf = [0.0f32; 4];
            for (b, g) in blocks.iter().enumerate() {
                // SAFETY: `quads` is non-zero only where AVX2 is available.
                let sums = unsafe {
                    crate::simd::grid_avx2::block_sums_n::<4>(
                        g,
                        std::array::from_fn(|k| &ys[k][b].qs),
                    )
                };
                for k in 0..4 {
                    sumf[k] += block_value(step, g.d, &ys[k][b], sums[k]);
                }
            }
            for (k, &v) in sumf.iter().enumerate() {
                put(4 * q + k, v);
            }
        }
        for (t, ys) in acts.chunks_exact(nb).enumerate().skip(4 * quads) {
            let sumf = blocks.iter().zip(ys).fold(0.0f32, |s, (g, y)| {
                s + block_value(step, g.d, y, sums_on(isa, g, &y.qs))
            });
            put(t, sumf);
        }
    }
}
