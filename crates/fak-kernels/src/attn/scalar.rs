//! The scalar twins of the attention kernels (same signatures as the
//! dispatchers in [`crate::attn`]): plain loops in the forward pass's
//! original operation order, one `f32` running sum per score in index
//! order (a fused multiply-add per term, `f32::mul_add`), and per value
//! element a multiply, then an add, rows in order.
//! Every SIMD twin is bit-identical to these; the tests check it.
//!
//! * f16 rows: [`dot_f32_f16`], [`axpy_f16`] (one row), [`dot_f32_f16_rows`],
//!   [`axpy_f16_rows`] (many rows), and their grouped-query forms.
//! * f16 keys stored dims-major: [`dot_f32_f16_cols_group`], the same
//!   scores as [`dot_f32_f16_rows_group`] on the row-major copy.
//! * Q8_0 rows: [`dot_f32_q8_0_rows_group`], [`axpy_q8_0_rows_group`]; a
//!   stored value is `d · q`, exact in f32.

use super::types::{cols_call_bounds, KvCols, KvRows, KvRowsQ8, QueryGroup};
use crate::blocks::BlockQ8_0;
use crate::fp::f16_to_f32;

/// `Σ q[i] · f16(k[i])` over `min(q.len(), k.len())` elements, one `f32`
/// running sum in index order, `acc = fma(q[i], f16(k[i]), acc)`.
///
/// * `q`: `[n]` f32 (one query head); `k`: `[n]` f16 bit patterns (one
///   key head).
pub fn dot_f32_f16(q: &[f32], k: &[u16]) -> f32 {
    let mut acc = 0.0f32;
    for (a, &b) in q.iter().zip(k) {
        acc = a.mul_add(f16_to_f32(b), acc);
    }
    acc
}

/// `out[i] += a · f16(v[i])` over `min(v.len(), out.len())` elements
/// (multiply, then add).
///
/// * `v`: `[n]` f16 bit patterns (one value head); `out`: `[n]` f32.
pub fn axpy_f16(a: f32, v: &[u16], out: &mut [f32]) {
    for (o, &b) in out.iter_mut().zip(v) {
        *o += a * f16_to_f32(b);
    }
}

/// Attention scores of `n_rows` key rows at once: `out[r] =
/// dot_f32_f16(q, k[r * stride .. r * stride + q.len()])`.
///
/// * `q`: `[n]` f32 (one query head); `k`: `n_rows` rows of f16 bit
///   patterns, row `r` starting at `r * stride` (e.g. one head's slice
///   of consecutive KV-cache rows); `out`: `[n_rows]`.
///
/// Rows that do not fit in `k`, or past `out`, are skipped.
pub fn dot_f32_f16_rows(q: &[f32], k: &[u16], stride: usize, n_rows: usize, out: &mut [f32]) {
    for (r, o) in out.iter_mut().enumerate().take(n_rows) {
        let Some(row) = k.get(r * stride..r * stride + q.len()) else {
            return;
        };
        *o = dot_f32_f16(q, row);
    }
}

/// Attention scores of a group of query heads that share one key head:
/// [`dot_f32_f16_rows`] for each query `g` of `qs` into
/// `out[g * out_stride ..]`.
///
/// * `qs`: `[G, n]` queries; `k`: `n_rows` rows of f16 bit patterns at
///   `stride`; `out`: `[G, out_stride]`, the first `n_rows` values of
///   each row written.
///
/// Rows that do not fit in `k` or in a query's output row are skipped.
pub fn dot_f32_f16_rows_group(
    qs: QueryGroup<'_>,
    k: &[u16],
    stride: usize,
    n_rows: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    for (g, q) in qs.queries().enumerate() {
        let Some(o) = out.get_mut(g * out_stride..) else {
            return;
        };
        let len = out_stride.min(o.len());
        dot_f32_f16_rows(q, k, stride, n_rows, &mut o[..len]);
    }
}

/// Attention scores of a group of query heads against dims-major keys:
/// `out[g * out_stride + r] = Σ_d q_g[d] · f16(k.data[d * k.dstride + r])`
/// over dims `d < min(qs.n, k.width)`, one `f32` running sum from `0.0` in
/// dim order (fused multiply-adds): bit for bit [`dot_f32_f16_rows_group`]
/// on the row-major copy of the same keys.
///
/// * `qs`: `[G, n]` queries; `k`: `[width, dstride]` keys; `out`:
///   `[G, out_stride]`, the first `k.n_rows` values of each row written.
///
/// Rows whose dims do not all fit in `k.data`, rows past `k.dstride` (with
/// more than one dim) and rows past a query's output row are skipped.
pub fn dot_f32_f16_cols_group(
    qs: QueryGroup<'_>,
    k: KvCols<'_>,
    out: &mut [f32],
    out_stride: usize,
) {
    let (dims, rows) = cols_call_bounds(&qs, &k, out.len(), out_stride);
    if rows == 0 {
        // (Also keeps the offsets below from overflowing: with a row, every
        // `g * out_stride` and `d * dstride` lies inside a buffer.)
        return;
    }
    for (g, q) in qs.queries().enumerate() {
        let Some(o) = out.get_mut(g * out_stride..g * out_stride + rows) else {
            return;
        };
        o.fill(0.0);
        for (d, &x) in q.iter().enumerate().take(dims) {
            let col = k.data.get(d * k.dstride..).unwrap_or_default();
            for (s, &b) in o.iter_mut().zip(col) {
                *s = x.mul_add(f16_to_f32(b), *s);
            }
        }
    }
}

/// Attention value sum over several rows: for each row `r` in order,
/// [`axpy_f16`]`(w[r], v[r * stride ..], out)`.
///
/// * `w`: `[n_rows]` weights; `v`: rows of `out.len()` f16 bit
///   patterns at `stride`; `out`: `[n]`.
///
/// Rows that do not fit in `v` or `w` are skipped.
pub fn axpy_f16_rows(w: &[f32], v: &[u16], stride: usize, n_rows: usize, out: &mut [f32]) {
    let n = out.len();
    for (r, &wr) in w.iter().enumerate().take(n_rows) {
        let Some(row) = v.get(r * stride..r * stride + n) else {
            return;
        };
        axpy_f16(wr, row, out);
    }
}

/// Value sums of `G` queries over the same rows: for each query `g`,
/// [`axpy_f16_rows`]`(&w[g * w_stride ..], rows, out[g * width ..])`.
///
/// * `w`: `[G, w_stride]` weights (row `r` of query `g` at
///   `g * w_stride + r`); `out`: `[G, width]`, `G = out.len() / width`.
///
/// Rows that do not fit in `rows.data` or a query's weights are skipped.
pub fn axpy_f16_rows_group(w: &[f32], w_stride: usize, rows: KvRows<'_>, out: &mut [f32]) {
    let n = rows.width;
    if n == 0 {
        return;
    }
    for (g, o) in out.chunks_exact_mut(n).enumerate() {
        let wg = w.get(g * w_stride..).unwrap_or_default();
        axpy_f16_rows(wg, rows.data, rows.stride, rows.n_rows, o);
    }
}

/// One score: `Σ_i q[i] · (d · q8)[i]` over `blocks`, one f32 running
/// sum in index order, fused multiply-adds (`q`: `[32 · blocks.len()]`).
#[inline]
pub(crate) fn dot_row(q: &[f32], blocks: &[BlockQ8_0]) -> f32 {
    let mut acc = 0.0f32;
    for (qb, b) in q.chunks_exact(32).zip(blocks) {
        let d = f16_to_f32(b.d);
        for (&a, &x) in qb.iter().zip(&b.qs) {
            acc = a.mul_add(d * f32::from(x), acc);
        }
    }
    acc
}

/// `out[i] += a · (d · q8)[i]` over `blocks` (multiply, then add;
/// `out`: `[32 · blocks.len()]`).
#[inline]
pub(crate) fn axpy_row(a: f32, blocks: &[BlockQ8_0], out: &mut [f32]) {
    for (ob, b) in out.chunks_exact_mut(32).zip(blocks) {
        let d = f16_to_f32(b.d);
        for (o, &x) in ob.iter_mut().zip(&b.qs) {
            *o += a * (d * f32::from(x));
        }
    }
}

/// Scores of each query `g` of `qs` against each row:
/// `out[g * out_stride + r] = Σ_i q_g[i] · (d · q8)[r, i]` over
/// `min(qs.n, rows.width) / 32` blocks per row.
///
/// * `qs`: `[G, n]` queries; `out`: `[G, out_stride]`, the first
///   `rows.n_rows` values of each row written.
///
/// Rows that do not fit in `rows.data` or a query's output row are
/// skipped.
pub fn dot_f32_q8_0_rows_group(
    qs: QueryGroup<'_>,
    rows: KvRowsQ8<'_>,
    out: &mut [f32],
    out_stride: usize,
) {
    let nb = qs.n.min(rows.width) / 32;
    for (g, q) in qs.queries().enumerate() {
        let q = &q[..nb * 32];
        for r in 0..rows.n_rows {
            let Some(row) = rows.data.get(r * rows.stride..r * rows.stride + nb) else {
                break;
            };
            if qs.len() > 1 && r >= out_stride {
                break;
            }
            let Some(o) = out.get_mut(g * out_stride + r) else {
                break;
            };
            *o = dot_row(q, row);
        }
    }
}

/// Value sums of `G` queries over the same rows: for each row `r` in
/// order, `out[g * width + i] += w[g * w_stride + r] · (d · q8)[r, i]`.
///
/// * `w`: `[G, w_stride]` weights; `out`: `[G, width]`
///   (`G = out.len() / width`, `width = rows.width / 32 * 32`).
///
/// Rows that do not fit in `rows.data` or a query's weights are
/// skipped.
pub fn axpy_q8_0_rows_group(w: &[f32], w_stride: usize, rows: KvRowsQ8<'_>, out: &mut [f32]) {
    let nb = rows.width / 32;
    if nb == 0 {
        return;
    }
    let n_queries = out.len() / (nb * 32);
    for (g, o) in out.chunks_exact_mut(nb * 32).enumerate() {
        for r in 0..rows.n_rows {
            let Some(row) = rows.data.get(r * rows.stride..r * rows.stride + nb) else {
                break;
            };
            if n_queries > 1 && r >= w_stride {
                break;
            }
            let Some(&a) = w.get(g * w_stride + r) else {
                break;
            };
            axpy_row(a, row, o);
        }
    }
}
