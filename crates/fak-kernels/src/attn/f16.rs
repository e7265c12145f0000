//! Attention over f16 K/V rows (the default KV cache): scores of one or
//! many queries against key rows, and value sums, dispatched on an
//! [`Isa`]. Each `name` runs on the process-wide [`isa()`]; `name_with_isa`
//! takes the ISA; [`super::scalar`] holds the scalar twins.
//!
//! The kernels the forward pass uses ([`dot_f32_f16_rows_group`],
//! [`axpy_f16_rows_group`], their one-query forms and [`axpy_f16`]) are
//! bit-identical on every ISA; only the one-row dot [`dot_f32_f16`]
//! reorders its sum on AVX2 (4 × 8 fused lanes).

use super::scalar;
use super::types::{per_query_capacity, rows_that_fit, KvRows, QueryGroup};
#[cfg(target_arch = "x86_64")]
use super::{avx2, avx512};
use crate::isa::{isa, Isa};

/// Whether the AVX2 twins may run for `isa` on this CPU.
#[cfg(target_arch = "x86_64")]
#[inline]
fn avx2_ok(isa: Isa) -> bool {
    isa != Isa::Scalar && Isa::Avx2.is_available()
}

/// Whether the AVX-512 twins may run for `isa` on this CPU.
#[cfg(target_arch = "x86_64")]
fn avx512_ok(isa: Isa) -> bool {
    isa == Isa::Avx512 && Isa::Avx512.is_available()
}

/// Smallest query group that the 16-lane AVX-512 score kernel takes
/// (smaller groups would leave most of a pass's lanes empty).
#[cfg(target_arch = "x86_64")]
const LANES512_FROM: usize = 12;

/// `Σ q[i] · f16(k[i])` (one attention score before scaling) on the kernels
/// of [`isa()`]; see [`dot_f32_f16_with_isa`].
#[inline]
pub fn dot_f32_f16(q: &[f32], k: &[u16]) -> f32 {
    dot_f32_f16_with_isa(isa(), q, k)
}

/// `Σ q[i] · f16(k[i])` over `min(q.len(), k.len())` elements on the
/// kernels of `isa`.
///
/// * `q`: `[n]` f32 (one query head); `k`: `[n]` f16 bit patterns (one key
///   head, e.g. a slice of a KV-cache row).
///
/// The AVX2 twin keeps 4 × 8 fused `f32` lanes; it differs from the scalar
/// running sum by rounding only (well within `1e-5 · Σ|q[i]·k[i]|`).
pub fn dot_f32_f16_with_isa(isa: Isa, q: &[f32], k: &[u16]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2, FMA and F16C.
        return unsafe { avx2::dot_f32_f16(q, k) };
    }
    let _ = isa;
    scalar::dot_f32_f16(q, k)
}

/// Attention scores of several key rows on the kernels of [`isa()`]; see
/// [`dot_f32_f16_rows_with_isa`].
#[inline]
pub fn dot_f32_f16_rows(q: &[f32], k: &[u16], stride: usize, n_rows: usize, out: &mut [f32]) {
    dot_f32_f16_rows_with_isa(isa(), q, k, stride, n_rows, out)
}

/// `out[r] = Σ_i q[i] · f16(k[r * stride + i])` for `r < n_rows`, each a
/// running sum in index order: **bit-identical on every ISA** (the AVX2
/// twin puts 8 rows side by side in the lanes instead of reordering a
/// row's sum), so attention scores never depend on the ISA.
///
/// * `q`: `[n]` f32; `k`: `n_rows` rows of `n` f16 bit patterns, row `r`
///   at `r * stride`; `out`: `[n_rows]`.
///
/// Rows that do not fit in `k` or `out` are skipped (not computed).
pub fn dot_f32_f16_rows_with_isa(
    isa: Isa,
    q: &[f32],
    k: &[u16],
    stride: usize,
    n_rows: usize,
    out: &mut [f32],
) {
    let rows = n_rows
        .min(rows_that_fit(k.len(), q.len(), stride, n_rows))
        .min(out.len());
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked the CPU; `rows` rows of `q.len()` values
        // at `stride` fit in `k` and `out` holds `rows` values (see above).
        return unsafe { avx2::dot_f32_f16_rows(q, k, stride, rows, out) };
    }
    let _ = isa;
    scalar::dot_f32_f16_rows(q, k, stride, rows, out)
}

/// Grouped-query attention scores on the kernels of [`isa()`]; see
/// [`dot_f32_f16_rows_group_with_isa`].
#[inline]
pub fn dot_f32_f16_rows_group(
    qs: QueryGroup<'_>,
    k: &[u16],
    stride: usize,
    n_rows: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    dot_f32_f16_rows_group_with_isa(isa(), qs, k, stride, n_rows, out, out_stride)
}

/// [`dot_f32_f16_rows_with_isa`] for each query `g` of a group that shares
/// one key head: `out[g * out_stride + r] = Σ_i q_g[i] · f16(k[r * stride +
/// i])`, **bit-identical on every ISA and to one `dot_f32_f16_rows` call
/// per query**. The AVX2 twin loads and transposes each 8 × 8 tile of keys
/// once for up to 4 queries instead of once per query.
///
/// * `qs`: `[G, n]` queries; `k`: `n_rows` rows of `n` f16 bit patterns,
///   row `r` at `r * stride`; `out`: `[G, out_stride]` (row `g` at
///   `g * out_stride`), the first `n_rows` values of each row written.
///
/// Rows that do not fit in `k`, or in every query's output row, are
/// skipped (not computed).
pub fn dot_f32_f16_rows_group_with_isa(
    isa: Isa,
    qs: QueryGroup<'_>,
    k: &[u16],
    stride: usize,
    n_rows: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    let g = qs.len();
    let n = qs.n;
    if g == 0 {
        return;
    }
    let rows = n_rows
        .min(rows_that_fit(k.len(), n, stride, n_rows))
        .min(per_query_capacity(out.len(), g, out_stride));
    #[cfg(target_arch = "x86_64")]
    if avx512_ok(isa) && g >= LANES512_FROM && n > 0 && n <= avx512::LANE_DIMS {
        // Whole 16-query passes here; a remainder of 8 or fewer queries
        // takes the 8-lane kernel rather than a half-empty pass.
        let g16 = if g % 16 > 8 { g } else { g / 16 * 16 };
        // SAFETY: `avx512_ok` checked the CPU; `0 < n <= LANE_DIMS`; the
        // first `g16` queries' rows and outputs lie inside the bounds
        // checked above.
        unsafe { avx512::rows_group_lanes(&qs.q[..g16 * n], n, k, stride, rows, out, out_stride) };
        if g16 < g {
            let rest = QueryGroup {
                q: &qs.q[g16 * n..],
                n,
            };
            let out = &mut out[g16 * out_stride..];
            return dot_f32_f16_rows_group_with_isa(
                Isa::Avx2,
                rest,
                k,
                stride,
                rows,
                out,
                out_stride,
            );
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) && n > 0 {
        // SAFETY: `avx2_ok` checked the CPU; `rows` rows of `n` values at
        // `stride` fit in `k`, and each query's `rows` outputs fit in `out`
        // at `out_stride` without overlapping (see above).
        return unsafe { avx2::dot_f32_f16_rows_group(qs.q, n, k, stride, rows, out, out_stride) };
    }
    let _ = isa;
    scalar::dot_f32_f16_rows_group(qs, k, stride, rows, out, out_stride)
}

/// Attention value sums over several rows on the kernels of [`isa()`]; see
/// [`axpy_f16_rows_with_isa`].
#[inline]
pub fn axpy_f16_rows(w: &[f32], v: &[u16], stride: usize, n_rows: usize, out: &mut [f32]) {
    axpy_f16_rows_with_isa(isa(), w, v, stride, n_rows, out)
}

/// For each row `r < n_rows` in order:
/// `out[i] += w[r] · f16(v[r · stride + i])`. **Bit-identical on every ISA** (per element the same multiply,
/// then add, in row order; the AVX2 twin keeps a 64-wide `out` in
/// registers across the rows).
///
/// * `w`: `[n_rows]`; `v`: rows of `out.len()` f16 bit patterns at
///   `stride`; `out`: `[n]`.
///
/// Rows that do not fit in `v` or `w` are skipped.
pub fn axpy_f16_rows_with_isa(
    isa: Isa,
    w: &[f32],
    v: &[u16],
    stride: usize,
    n_rows: usize,
    out: &mut [f32],
) {
    let rows = n_rows
        .min(rows_that_fit(v.len(), out.len(), stride, n_rows))
        .min(w.len());
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked the CPU; `rows` rows of `out.len()`
        // values at `stride` fit in `v`, and `w` holds `rows` weights.
        return unsafe { avx2::axpy_f16_rows(w, v, stride, rows, out) };
    }
    let _ = isa;
    scalar::axpy_f16_rows(w, v, stride, rows, out)
}

/// Grouped value sums on the kernels of [`isa()`]; see
/// [`axpy_f16_rows_group_with_isa`].
#[inline]
pub fn axpy_f16_rows_group(w: &[f32], w_stride: usize, rows: KvRows<'_>, out: &mut [f32]) {
    axpy_f16_rows_group_with_isa(isa(), w, w_stride, rows, out)
}

/// [`axpy_f16_rows_with_isa`] for each of `G` queries over the same rows:
/// for each row `r < rows.n_rows` in order, `out[g * width + i] += w[g *
/// w_stride + r] · f16(rows.data[r * stride + i])`. **Bit-identical on every
/// ISA and to one `axpy_f16_rows` per query**; the AVX2 twin converts each
/// 8-row tile of values once for all the queries.
///
/// * `w`: `[G, w_stride]`; `rows`: the value rows; `out`: `[G, width]`
///   (`G = out.len() / width`).
///
/// Rows that do not fit in `rows.data`, or in every query's weights
/// (`w_stride`, and the last query's slice of `w`), are skipped.
pub fn axpy_f16_rows_group_with_isa(
    isa: Isa,
    w: &[f32],
    w_stride: usize,
    rows: KvRows<'_>,
    out: &mut [f32],
) {
    let n = rows.width;
    if n == 0 {
        return;
    }
    let g = out.len() / n;
    if g == 0 {
        return;
    }
    let n_rows = rows
        .n_rows
        .min(rows_that_fit(rows.data.len(), n, rows.stride, rows.n_rows))
        .min(per_query_capacity(w.len(), g, w_stride));
    let rows = KvRows { n_rows, ..rows };
    #[cfg(target_arch = "x86_64")]
    if avx512_ok(isa) {
        // SAFETY: `avx512_ok` checked the CPU; the bounds as below.
        return unsafe { avx512::axpy_f16_rows_group(w, w_stride, rows, &mut out[..g * n]) };
    }
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked the CPU; `n_rows` rows of `n` values at
        // `stride` fit in `rows.data`, and every query's `n_rows` weights
        // fit in `w` at `w_stride` (see above).
        return unsafe { avx2::axpy_f16_rows_group(w, w_stride, rows, &mut out[..g * n]) };
    }
    let _ = isa;
    scalar::axpy_f16_rows_group(w, w_stride, rows, out)
}

/// `out[i] += a · f16(v[i])` on the kernels of [`isa()`]; see
/// [`axpy_f16_with_isa`].
#[inline]
pub fn axpy_f16(a: f32, v: &[u16], out: &mut [f32]) {
    axpy_f16_with_isa(isa(), a, v, out)
}

/// `out[i] += a · f16(v[i])` over `min(v.len(), out.len())` elements on
/// the kernels of `isa` (one attention weight times one value head).
///
/// * `v`: `[n]` f16 bit patterns; `out`: `[n]` f32.
///
/// Bit-identical on every ISA: the AVX2 twin multiplies, then adds, per
/// lane, exactly like the scalar twin.
pub fn axpy_f16_with_isa(isa: Isa, a: f32, v: &[u16], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2, FMA and F16C.
        return unsafe { avx2::axpy_f16(a, v, out) };
    }
    let _ = isa;
    scalar::axpy_f16(a, v, out)
}
