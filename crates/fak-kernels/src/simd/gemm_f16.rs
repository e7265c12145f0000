//! F16 matrix products as register tiles, bit-identical per element to
//! the AVX2 F16 dot product (`avx2::dot_f16`), which both SIMD ISAs run.
//!
//! `dot_f16` keeps four 8-lane `f32` accumulators: lane `l` of `acc[c]`
//! sums the products of elements `32·i + 8·c + l` (fused multiply-adds,
//! chunks `i` in order); at the end `((acc0 + acc1) + (acc2 + acc3))` is
//! summed across its lanes in a fixed order, widened to `f64`, and the
//! elements past the last whole chunk are added in `f64`. A tile runs the
//! same lanes for several rows and tokens at once, so each weight is
//! widened from f16 once per tile instead of once per element of the
//! output, and each activation once per call:
//!
//! ```text
//!   AVX-512: a zmm holds acc0|acc1 (elements 32i..32i+16) or acc2|acc3
//!            (32i+16..32i+32): 4 rows × 3 tokens × 2 = 24 accumulators
//!   AVX2:    4 ymm per (row, token): 1 row × 3 tokens = 12 accumulators
//!   per chunk half:  w[r] = cvtph2ps(16 f16 of row r)   (once per tile)
//!                    acc[t][r] = fma(w[r], x[t], acc[t][r])
//!   end: lanes = (lo(A) + hi(A)) + (lo(B) + hi(B)) ─► dot_f16's hsum
//! ```
//!
//! Every lane sees the same operands in the same order as in `dot_f16`
//! (the activations are f16 widened to `f32`, exactly, before the tiles
//! run), so an output element depends only on its weight row and token
//! row, never on the tile it lands in.

use std::arch::x86_64::*;

use super::avx2_blocks::hsum_ps;
use super::gemm_avx2::GemmArgs;
use crate::fp::f16_to_f32;

/// Elements per accumulation chunk of `dot_f16`.
const CHUNK: usize = 32;

/// Rows and tokens of the AVX-512 tile.
const R512: usize = 4;
const T512: usize = 3;

/// Tokens of the AVX2 tile (one row).
const T256: usize = 3;

thread_local! {
    /// Each thread's widened activations (`T` tokens × `n`), reused.
    static ACTS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The f16 value at element `i` of a little-endian f16 row (0.0 past the
/// end, which the callers' checked lengths rule out).
#[inline(always)]
fn f16_at(row: &[u8], i: usize) -> f32 {
    match row.get(2 * i..2 * i + 2) {
        Some(b) => f16_to_f32(u16::from_le_bytes([b[0], b[1]])),
        None => 0.0,
    }
}

/// `dot_f16`'s end for one element: the lanes' fixed-order sum, then the
/// elements from `from` on (`w`, `x`: the whole rows), in `f64`.
#[inline]
#[target_feature(enable = "avx2")]
fn finish(lanes: __m256, w: &[u8], x: &[f32], from: usize) -> f32 {
    let mut sum = f64::from(hsum_ps(lanes));
    for (i, &xv) in x.iter().enumerate().skip(from) {
        sum += f64::from(f16_at(w, i) * xv);
    }
    sum as f32
}

/// 16 f16 values at byte `at` of `row`, widened (zeros if out of range,
/// which the callers' checked lengths rule out).
#[inline]
#[target_feature(enable = "avx2,f16c,avx512f")]
fn load_w512(row: &[u8], at: usize) -> __m512 {
    match row.get(at..at + 32) {
        // SAFETY: 32 readable bytes; `loadu` needs no alignment.
        Some(b) => _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(b.as_ptr().cast()) }),
        None => _mm512_setzero_ps(),
    }
}

/// 16 `f32`s at element `at` of `x` (zeros if out of range).
#[inline]
#[target_feature(enable = "avx512f")]
fn load_x512(x: &[f32], at: usize) -> __m512 {
    match x.get(at..at + 16) {
        // SAFETY: 16 readable f32s; `loadu` needs no alignment.
        Some(v) => unsafe { _mm512_loadu_ps(v.as_ptr()) },
        None => _mm512_setzero_ps(),
    }
}

/// `R` weight rows × `T` widened token rows over `chunks` whole chunks:
/// each pair's `(acc0 + acc1) + (acc2 + acc3)`, as `[token][row]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
fn tile512<const R: usize, const T: usize>(
    w: [&[u8]; R],
    x: [&[f32]; T],
    chunks: usize,
) -> [[__m256; R]; T] {
    let mut lo = [[_mm512_setzero_ps(); R]; T];
    let mut hi = [[_mm512_setzero_ps(); R]; T];
    for i in 0..chunks {
        let wl: [__m512; R] = std::array::from_fn(|r| load_w512(w[r], 2 * CHUNK * i));
        for t in 0..T {
            let xv = load_x512(x[t], CHUNK * i);
            for r in 0..R {
                lo[t][r] = _mm512_fmadd_ps(wl[r], xv, lo[t][r]);
            }
        }
        let wh: [__m512; R] = std::array::from_fn(|r| load_w512(w[r], 2 * CHUNK * i + 32));
        for t in 0..T {
            let xv = load_x512(x[t], CHUNK * i + 16);
            for r in 0..R {
                hi[t][r] = _mm512_fmadd_ps(wh[r], xv, hi[t][r]);
            }
        }
    }
    let mut lanes = [[_mm256_setzero_ps(); R]; T];
    for t in 0..T {
        for r in 0..R {
            let (a0, a1) = (
                _mm512_castps512_ps256(lo[t][r]),
                _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(lo[t][r]))),
            );
            let (a2, a3) = (
                _mm512_castps512_ps256(hi[t][r]),
                _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(hi[t][r]))),
            );
            lanes[t][r] = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
        }
    }
    lanes
}

/// 8 f16 values at byte `at` of `row`, widened (zeros if out of range).
#[inline]
#[target_feature(enable = "avx2,f16c")]
fn load_w256(row: &[u8], at: usize) -> __m256 {
    match row.get(at..at + 16) {
        // SAFETY: 16 readable bytes; `loadu` needs no alignment.
        Some(b) => _mm256_cvtph_ps(unsafe { _mm_loadu_si128(b.as_ptr().cast()) }),
        None => _mm256_setzero_ps(),
    }
}

/// 8 `f32`s at element `at` of `x` (zeros if out of range).
#[inline]
#[target_feature(enable = "avx2")]
fn load_x256(x: &[f32], at: usize) -> __m256 {
    match x.get(at..at + 8) {
        // SAFETY: 8 readable f32s; `loadu` needs no alignment.
        Some(v) => unsafe { _mm256_loadu_ps(v.as_ptr()) },
        None => _mm256_setzero_ps(),
    }
}

/// One weight row × `T` widened token rows over `chunks` whole chunks:
/// each token's `(acc0 + acc1) + (acc2 + acc3)`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn tile256<const T: usize>(w: &[u8], x: [&[f32]; T], chunks: usize) -> [__m256; T] {
    let mut acc = [[_mm256_setzero_ps(); 4]; T];
    for i in 0..chunks {
        let wv: [__m256; 4] = std::array::from_fn(|c| load_w256(w, 2 * (CHUNK * i + 8 * c)));
        for (a, xt) in acc.iter_mut().zip(x) {
            for (c, (s, wc)) in a.iter_mut().zip(wv).enumerate() {
                *s = _mm256_fmadd_ps(wc, load_x256(xt, CHUNK * i + 8 * c), *s);
            }
        }
    }
    std::array::from_fn(|t| {
        let a = acc[t];
        _mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3]))
    })
}

/// Which tile shape a product runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum F16Tiles {
    /// 4 rows × 3 tokens of 512-bit accumulators.
    Avx512,
    /// 1 row × 3 tokens of 256-bit accumulators.
    Avx2,
}

/// The F16 product `out[t * out_stride + j] = dot_f16(w_row(j), a_row(t))`
/// (`g.nb`: the row length `n`, F16's blocks being single values; `w`:
/// `[n_rows, n]` f16, `a`: `[n_tok, n]` f16, both little-endian).
///
/// # Safety
///
/// The CPU must support AVX2, FMA and F16C, and AVX-512F for
/// [`F16Tiles::Avx512`]; the lengths must have been validated (`w` and
/// `a` whole rows, `out` long enough for `out_stride`).
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn gemm(tiles: F16Tiles, g: &GemmArgs<'_>, out: &mut [f32]) {
    let n = g.nb;
    let row = 2 * n;
    let chunks = n / CHUNK;
    let whole = chunks * CHUNK;
    let wrow = |j: usize| g.w.get(j * row..(j + 1) * row).unwrap_or(&[]);
    let tile_tokens = match tiles {
        F16Tiles::Avx512 => T512,
        F16Tiles::Avx2 => T256,
    };
    ACTS.with_borrow_mut(|xs| {
        xs.resize(tile_tokens * n, 0.0);
        for t0 in (0..g.n_tok).step_by(tile_tokens) {
            let tt = (g.n_tok - t0).min(tile_tokens);
            for t in 0..tt {
                let a = g.a.get((t0 + t) * row..(t0 + t + 1) * row).unwrap_or(&[]);
                for (i, v) in xs[t * n..(t + 1) * n].iter_mut().enumerate() {
                    *v = f16_at(a, i);
                }
            }
            let x = |t: usize| xs.get(t * n..(t + 1) * n).unwrap_or(&[]);
            let mut put = |t: usize, j: usize, lanes: __m256| {
                let y = finish(lanes, wrow(j), x(t), whole);
                if let Some(o) = out.get_mut((t0 + t) * g.out_stride + j) {
                    *o = y;
                }
            };
            match tiles {
                // SAFETY: the caller's CPU guarantee for this tile shape.
                F16Tiles::Avx512 => unsafe { rows512(g.n_rows, tt, &wrow, &x, chunks, &mut put) },
                F16Tiles::Avx2 => rows256(g.n_rows, tt, &wrow, &x, chunks, &mut put),
            }
        }
    });
}

/// Every row group of [`R512`] against the `tt` tokens in `x`.
#[target_feature(enable = "avx2,fma,f16c,avx512f")]
fn rows512<'w, 'x>(
    n_rows: usize,
    tt: usize,
    wrow: &impl Fn(usize) -> &'w [u8],
    x: &impl Fn(usize) -> &'x [f32],
    chunks: usize,
    put: &mut impl FnMut(usize, usize, __m256),
) {
    #[target_feature(enable = "avx2,fma,f16c,avx512f")]
    fn run<'w, 'x, const R: usize, const T: usize>(
        j0: usize,
        wrow: &impl Fn(usize) -> &'w [u8],
        x: &impl Fn(usize) -> &'x [f32],
        chunks: usize,
        put: &mut impl FnMut(usize, usize, __m256),
    ) {
        let w: [&[u8]; R] = std::array::from_fn(|r| wrow(j0 + r));
        let xs: [&[f32]; T] = std::array::from_fn(x);
        let y = tile512::<R, T>(w, xs, chunks);
        for (t, row) in y.iter().enumerate() {
            for (r, &v) in row.iter().enumerate() {
                put(t, j0 + r, v);
            }
        }
    }
    for j0 in (0..n_rows).step_by(R512) {
        let rr = (n_rows - j0).min(R512);
        match (rr, tt) {
            (4, 3) => run::<4, 3>(j0, wrow, x, chunks, put),
            (4, 2) => run::<4, 2>(j0, wrow, x, chunks, put),
            (4, _) => run::<4, 1>(j0, wrow, x, chunks, put),
            (3, 3) => run::<3, 3>(j0, wrow, x, chunks, put),
            (3, 2) => run::<3, 2>(j0, wrow, x, chunks, put),
            (3, _) => run::<3, 1>(j0, wrow, x, chunks, put),
            (2, 3) => run::<2, 3>(j0, wrow, x, chunks, put),
            (2, 2) => run::<2, 2>(j0, wrow, x, chunks, put),
            (2, _) => run::<2, 1>(j0, wrow, x, chunks, put),
            (_, 3) => run::<1, 3>(j0, wrow, x, chunks, put),
            (_, 2) => run::<1, 2>(j0, wrow, x, chunks, put),
            (_, _) => run::<1, 1>(j0, wrow, x, chunks, put),
        }
    }
}

/// Every row against the `tt` tokens in `x`, one row at a time.
#[target_feature(enable = "avx2,fma,f16c")]
fn rows256<'w, 'x>(
    n_rows: usize,
    tt: usize,
    wrow: &impl Fn(usize) -> &'w [u8],
    x: &impl Fn(usize) -> &'x [f32],
    chunks: usize,
    put: &mut impl FnMut(usize, usize, __m256),
) {
    for j in 0..n_rows {
        let w = wrow(j);
        match tt {
            3 => {
                for (t, v) in tile256::<3>(w, [x(0), x(1), x(2)], chunks)
                    .into_iter()
                    .enumerate()
                {
                    put(t, j, v);
                }
            }
            2 => {
                for (t, v) in tile256::<2>(w, [x(0), x(1)], chunks)
                    .into_iter()
                    .enumerate()
                {
                    put(t, j, v);
                }
            }
            _ => {
                let [v] = tile256::<1>(w, [x(0)], chunks);
                put(0, j, v);
            }
        }
    }
}
