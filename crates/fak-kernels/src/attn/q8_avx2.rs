//! AVX2 + F16C twins of the Q8_0 attention kernels in [`crate::attn`] (`q8`).
//!
//! ```text
//!   scores:  8 rows × 32·nb values ─► widen i8→i16, transpose 8×8 per
//!            8 values, widen to f32, × the 8 rows' scales
//!            ─► tile[i] = value i of the 8 rows (one lane per row)
//!            each query: acc = acc + q[i] · tile[i], i in order
//!   values:  8 rows dequantized into a row-major tile; each output
//!            vector of a query adds w[r] · tile[r] for the 8 rows in order
//! ```
//!
//! Dequantized values `d · q` are exact in f32, and every sum keeps the
//! scalar twin's operation order, so results are bit-identical to it.

use std::arch::x86_64::*;

use super::avx2::transpose8x8_epi16;
use super::scalar;
use super::types::KvRowsQ8;
use crate::blocks::BlockQ8_0;
use crate::fp::f16_to_f32;

/// Most blocks per row the tiles hold (head dims up to 256); wider rows
/// run the scalar twin.
pub(crate) const MAX_BLOCKS: usize = 8;

/// Eight signed bytes at `p`, widened to f32.
///
/// # Safety
///
/// `p..p + 8` must be readable; the CPU must support AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load8_i8(p: *const i8) -> __m256 {
    // SAFETY: the caller guarantees 8 readable bytes.
    let raw = unsafe { _mm_loadl_epi64(p.cast()) };
    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(raw))
}

/// Block `b` of row `r` (no bounds check).
///
/// # Safety
///
/// `r * stride + b < data.len()`.
#[inline]
unsafe fn block(data: &[BlockQ8_0], stride: usize, r: usize, b: usize) -> &BlockQ8_0 {
    // SAFETY: the caller guarantees the index is in bounds.
    unsafe { data.get_unchecked(r * stride + b) }
}

/// Fills `tile[i]` (i < 32 · nb) with value `i` of rows `r..r + 8`, one
/// lane per row, dequantized.
///
/// # Safety
///
/// Rows `r..r + 8` of `nb <= MAX_BLOCKS` blocks at `rows.stride` must lie
/// inside `rows.data`; the CPU must support AVX2 and F16C.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn key_tile(rows: &KvRowsQ8<'_>, r: usize, nb: usize, tile: &mut [__m256; 32 * MAX_BLOCKS]) {
    let (data, stride) = (rows.data, rows.stride);
    for b in 0..nb {
        // Plain loops: `array::from_fn` closures are left un-inlined in
        // `target_feature` code.
        let mut ds = [0u16; 8];
        for (j, d) in ds.iter_mut().enumerate() {
            // SAFETY: rows r..r + 8, blocks < nb, are inside `data` (caller).
            *d = unsafe { block(data, stride, r + j, b).d };
        }
        // SAFETY: `ds` is 8 u16 = 16 readable bytes, the unaligned load's size.
        let dv = _mm256_cvtph_ps(unsafe { _mm_loadu_si128(ds.as_ptr().cast()) });
        for c in 0..4 {
            let mut raw = [_mm_setzero_si128(); 8];
            for (j, x) in raw.iter_mut().enumerate() {
                // SAFETY: the block is in bounds (as above), and `c * 8 + 8
                // <= 32` bytes of its `qs` are read.
                *x = unsafe {
                    let qs = block(data, stride, r + j, b).qs.as_ptr().add(c * 8);
                    _mm_cvtepi8_epi16(_mm_loadl_epi64(qs.cast()))
                };
            }
            let cols = transpose8x8_epi16(raw);
            for (k, col) in cols.iter().enumerate() {
                let f = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(*col));
                tile[b * 32 + c * 8 + k] = _mm256_mul_ps(f, dv);
            }
        }
    }
}

/// Scores of `G` queries (pointers to `[width]` each) against a key tile.
///
/// # Safety
///
/// Each `q[j]` points at `width <= 32 · MAX_BLOCKS` readable f32; the CPU
/// must support AVX2.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile_scores<const G: usize>(
    q: [*const f32; G],
    tile: &[__m256; 32 * MAX_BLOCKS],
    width: usize,
) -> [__m256; G] {
    let mut acc = [_mm256_setzero_ps(); G];
    for (i, t) in tile.iter().enumerate().take(width) {
        for j in 0..G {
            // SAFETY: i < width values behind each query (caller).
            let a = _mm256_set1_ps(unsafe { *q[j].add(i) });
            acc[j] = _mm256_fmadd_ps(a, *t, acc[j]);
        }
    }
    acc
}

/// AVX2 twin of [`scalar::dot_f32_q8_0_rows_group`].
///
/// # Safety
///
/// `rows.width = 32 · nb` with `1 <= nb <= MAX_BLOCKS`; `rows.n_rows` rows
/// of `nb` blocks at `rows.stride` lie inside `rows.data`; `q` holds
/// `G = q.len() / n` queries of `n >= rows.width` values; for every query
/// `g`, `out[g * out_stride .. g * out_stride + n_rows]` is in bounds (and
/// with `G > 1`, `n_rows <= out_stride`); the CPU must support AVX2 and
/// F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_rows_group(
    q: &[f32],
    n: usize,
    rows: KvRowsQ8<'_>,
    out: &mut [f32],
    out_stride: usize,
) {
    let width = rows.width;
    let nb = width / 32;
    let g = q.len() / n;
    let full = rows.n_rows / 8 * 8;
    let mut tile = [_mm256_setzero_ps(); 32 * MAX_BLOCKS];
    let qp = |j: usize| q[j * n..].as_ptr();
    let mut r = 0;
    while r < full {
        // SAFETY: rows r..r + 8 are inside `rows.data` (r + 8 <= n_rows).
        unsafe { key_tile(&rows, r, nb, &mut tile) };
        let mut j = 0;
        while j < g {
            let left = g - j;
            // SAFETY: every query has `n >= width` values (caller).
            let (accs, used): (&[__m256], usize) = unsafe {
                match left {
                    1 => (&tile_scores::<1>([qp(j)], &tile, width)[..], 1),
                    2 => (&tile_scores::<2>([qp(j), qp(j + 1)], &tile, width)[..], 2),
                    3 => (
                        &tile_scores::<3>([qp(j), qp(j + 1), qp(j + 2)], &tile, width)[..],
                        3,
                    ),
                    _ => (
                        &tile_scores::<4>([qp(j), qp(j + 1), qp(j + 2), qp(j + 3)], &tile, width)[..],
                        4,
                    ),
                }
            };
            for (k, acc) in accs.iter().enumerate() {
                let o = (j + k) * out_stride + r;
                let mut lanes = [0.0f32; 8];
                // SAFETY: `lanes` holds 8 f32.
                unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), *acc) };
                out[o..o + 8].copy_from_slice(&lanes);
            }
            j += used;
        }
        r += 8;
    }
    for r in full..rows.n_rows {
        let row = &rows.data[r * rows.stride..r * rows.stride + nb];
        for j in 0..g {
            out[j * out_stride + r] = scalar::dot_row(&q[j * n..j * n + width], row);
        }
    }
}

/// AVX2 twin of [`scalar::axpy_q8_0_rows_group`].
///
/// # Safety
///
/// `rows.width = 32 · nb` with `1 <= nb <= MAX_BLOCKS`; `rows.n_rows` rows
/// of `nb` blocks at `rows.stride` lie inside `rows.data`; `out` is `[G,
/// width]`; every query `g < G` has `w[g * w_stride + r]` in bounds for
/// `r < n_rows`; the CPU must support AVX2 and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn axpy_rows_group(
    w: &[f32],
    w_stride: usize,
    rows: KvRowsQ8<'_>,
    out: &mut [f32],
) {
    let width = rows.width;
    let nb = width / 32;
    let nv = width / 8;
    let full = rows.n_rows / 8 * 8;
    let mut tile = [_mm256_setzero_ps(); 32 * MAX_BLOCKS];
    let mut r = 0;
    while r < full {
        for j in 0..8 {
            for b in 0..nb {
                let blk = &rows.data[(r + j) * rows.stride + b];
                let dv = _mm256_set1_ps(f16_to_f32(blk.d));
                for c in 0..4 {
                    // SAFETY: 8 of the block's 32 quants.
                    let x = unsafe { load8_i8(blk.qs.as_ptr().add(c * 8)) };
                    tile[j * nv + b * 4 + c] = _mm256_mul_ps(x, dv);
                }
            }
        }
        for (k, o) in out.chunks_exact_mut(width).enumerate() {
            let ws = &w[k * w_stride + r..k * w_stride + r + 8];
            let mut wv = [_mm256_setzero_ps(); 8];
            for (v, &x) in wv.iter_mut().zip(ws) {
                *v = _mm256_set1_ps(x);
            }
            for (v, o8) in o.chunks_exact_mut(8).enumerate() {
                // SAFETY: `o8` holds 8 f32.
                let mut acc = unsafe { _mm256_loadu_ps(o8.as_ptr()) };
                for (j, wj) in wv.iter().enumerate() {
                    acc = _mm256_add_ps(acc, _mm256_mul_ps(*wj, tile[j * nv + v]));
                }
                // SAFETY: as above.
                unsafe { _mm256_storeu_ps(o8.as_mut_ptr(), acc) };
            }
        }
        r += 8;
    }
    for r in full..rows.n_rows {
        let row = &rows.data[r * rows.stride..r * rows.stride + nb];
        for (k, o) in out.chunks_exact_mut(width).enumerate() {
            scalar::axpy_row(w[k * w_stride + r], row, o);
        }
    }
}
