//! Vectorized row operations of the forward pass: attention dot products
//! and accumulations over f16 K/V rows, RMSNorm, softmax, SwiGLU, residual
//! adds, and a vector `exp`.
//!
//! Every function runs on the kernels of the process-wide [`isa()`]; the
//! `*_with_isa` variants take the [`Isa`] explicitly (for tests and
//! benchmarks), and [`scalar`] holds the scalar twins with the same
//! signatures:
//!
//! ```text
//!   softmax(x) ─► softmax_with_isa(isa(), x) ─► Avx2/Avx512 and available? ─yes─► simd::ops_avx2
//!                                                  │ no (Scalar, other CPU/arch)
//!                                                  ▼
//!                                               scalar::softmax
//! ```
//!
//! The scalar twins repeat the arithmetic of the forward pass's original
//! scalar code (sums of squares and softmax sums in `f64`, `f32` running
//! sums in index order for the attention dots), with fak's own `exp`
//! ([`crate::expf`]: glibc's `expf` algorithm, bit-identical to it on
//! x86-64 glibc 2.36) instead of the platform's libm. Every kernel the
//! forward pass uses is bit-identical on every ISA: the attention dots and
//! value sums, RMSNorm (its `f64` sum in the AVX2 lane order), softmax and
//! SwiGLU (the same `exp` and sum order), residual adds. Only the
//! single-row [`dot_f32_f16`] (not on the forward path) differs, by float
//! rounding, with its tolerance in its docs. `FAK_ISA` therefore never
//! changes a logit through these kernels: a teacher-forced golden once
//! showed a 1-ulp `exp` difference growing into ~1% of the logit range
//! (docs/GOLDENS.md).
//! The `Avx512` ISA runs AVX-512 twins of the grouped score and value-sum
//! kernels (16 lanes, the same per-lane arithmetic) and the AVX2 twins of
//! the rest.
//!
//! Results depend only on the inputs and the ISA: never on slice alignment,
//! thread or batch, so logits stay batch-invariant.
//!
//! Length convention: arguments that pair up element by element should have
//! equal lengths (callers pass equal lengths). On a mismatch nothing panics:
//! the operation covers the shortest of them, as a `zip` would. These run
//! once per attention position, so no `Result` is built per call.

use crate::isa::{isa, Isa};
#[cfg(target_arch = "x86_64")]
use crate::simd::{attn_avx2, attn_avx512, ops_avx2};

/// `G` query heads that share one key head (grouped-query attention):
/// `q` holds them one after another, `[G, n]` row-major f32, with
/// `G = q.len() / n` (a trailing partial query is ignored).
#[derive(Debug, Clone, Copy)]
pub struct QueryGroup<'a> {
    /// `[G, n]` queries.
    pub q: &'a [f32],
    /// Head dim.
    pub n: usize,
}

impl<'a> QueryGroup<'a> {
    /// Number of whole queries.
    pub fn len(&self) -> usize {
        self.q.len().checked_div(self.n).unwrap_or(0)
    }

    /// Whether the group holds no whole query.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The queries, `[n]` each.
    pub fn queries(&self) -> impl Iterator<Item = &'a [f32]> {
        let (q, n) = (self.q, self.n.max(1));
        q.chunks_exact(n).take(self.len())
    }
}

/// `n_rows` f16 rows of `width` values, row `r` at `data[r * stride ..]`
/// (one KV head's slice of consecutive cache rows).
#[derive(Debug, Clone, Copy)]
pub struct KvRows<'a> {
    /// The rows' f16 bit patterns.
    pub data: &'a [u16],
    /// Distance between rows, in values.
    pub stride: usize,
    /// Number of rows.
    pub n_rows: usize,
    /// Values per row (the head dim).
    pub width: usize,
}

/// The scalar twins of the dispatched operations (same signatures), equal
/// bit for bit to the forward pass's original scalar code.
pub mod scalar {
    use super::{KvRows, QueryGroup};
    use crate::expf::expf;
    use crate::fp::f16_to_f32;

    /// `Σ q[i] · f16(k[i])` over `min(q.len(), k.len())` elements, one `f32`
    /// running sum in index order.
    ///
    /// * `q`: `[n]` f32 (one query head); `k`: `[n]` f16 bit patterns (one
    ///   key head).
    pub fn dot_f32_f16(q: &[f32], k: &[u16]) -> f32 {
        let mut acc = 0.0f32;
        for (a, &b) in q.iter().zip(k) {
            acc += a * f16_to_f32(b);
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

    /// The order in which the AVX2 twins add up their `f64` lanes (`L` is
    /// 8 or 16: two or four `__m256d`, added as a tree, then the four lanes
    /// of the result): `v[j] = Σ_k lanes[4k + j]` (pairwise), then
    /// `(v0 + v2) + (v1 + v3)`.
    fn lane_sum<const L: usize>(lanes: &[f64; L]) -> f64 {
        let mut v = [0.0f64; 4];
        for (j, vj) in v.iter_mut().enumerate() {
            let l = |k: usize| lanes[4 * k + j];
            *vj = if L == 16 {
                (l(0) + l(1)) + (l(2) + l(3))
            } else {
                l(0) + l(1)
            };
        }
        (v[0] + v[2]) + (v[1] + v[3])
    }

    /// RMSNorm: `out[i] = (x[i] · scale) · w[i]` with
    /// `scale = 1 / sqrt(mean(x²) + eps)`, the (exact) squares summed in
    /// `f64` in 16 interleaved lanes (element `i` into lane `i % 16`),
    /// combined in the AVX2 twin's order, so both give the same bits.
    ///
    /// * `x`: `[n]` f32 (the mean is over all of it); `w`: `[n]` f32 norm
    ///   weights; `out`: `[n]` f32, written over the shortest length.
    pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
        let mut lanes = [0.0f64; 16];
        for (i, &v) in x.iter().enumerate() {
            lanes[i % 16] += (v as f64) * (v as f64);
        }
        let sum = lane_sum(&lanes);
        let mean = (sum / x.len() as f64) as f32;
        let scale = 1.0f32 / (mean + eps).sqrt();
        for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
            *o = (v * scale) * g;
        }
    }

    /// In-place softmax of `x` (`[n]` f32): `exp(x[i] - max)` with
    /// [`expf`], summed in `f64` in 8 interleaved lanes (combined as the
    /// AVX2 twin does), then multiplied by `(1 / sum) as f32`.
    /// `-inf` entries get weight 0; a row of only `-inf` becomes NaN.
    pub fn softmax(x: &mut [f32]) {
        let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut lanes = [0.0f64; 8];
        for (i, v) in x.iter_mut().enumerate() {
            *v = expf(*v - max);
            lanes[i % 8] += *v as f64;
        }
        let sum = lane_sum(&lanes);
        let inv = (1.0 / sum) as f32;
        for v in x.iter_mut() {
            *v *= inv;
        }
    }

    /// SwiGLU: `gate[i] = (g / (1 + exp(-g))) · up[i]` with `g = gate[i]`,
    /// over `min(gate.len(), up.len())` elements.
    ///
    /// * `gate`, `up`: `[n]` f32.
    pub fn swiglu(gate: &mut [f32], up: &[f32]) {
        for (g, &u) in gate.iter_mut().zip(up) {
            let s = *g / (1.0 + expf(-*g));
            *g = s * u;
        }
    }

    /// `x[i] += y[i]` over `min(x.len(), y.len())` elements.
    ///
    /// * `x`, `y`: `[n]` f32.
    pub fn add_assign(x: &mut [f32], y: &[f32]) {
        for (a, &b) in x.iter_mut().zip(y) {
            *a += b;
        }
    }

    /// `x[i] = exp(x[i])` with [`expf`] (`x`: `[n]` f32).
    pub fn exp_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = expf(*v);
        }
    }
}

/// How many of `n_rows` rows of `width` values, row `r` starting at
/// `r * stride`, lie entirely inside a buffer of `len` values (any
/// element unit: f16 values, Q8_0 blocks).
pub(crate) fn rows_that_fit(len: usize, width: usize, stride: usize, n_rows: usize) -> usize {
    match len.checked_sub(width) {
        None => 0,
        Some(spare) => spare
            .checked_div(stride)
            .map_or(n_rows, |r| r + 1)
            .min(n_rows),
    }
}

/// Values each of `g` queries can use in a `[g, stride]` buffer of `len`
/// values: the last query's row may be short; with one query, all of it.
pub(crate) fn per_query_capacity(len: usize, g: usize, stride: usize) -> usize {
    if g <= 1 {
        len
    } else {
        let last = (g - 1).saturating_mul(stride);
        len.saturating_sub(last).min(stride)
    }
}

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
        return unsafe { ops_avx2::dot_f32_f16(q, k) };
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
        return unsafe { attn_avx2::dot_f32_f16_rows(q, k, stride, rows, out) };
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
    if avx512_ok(isa) && g >= LANES512_FROM && n > 0 && n <= attn_avx512::LANE_DIMS {
        // Whole 16-query passes here; a remainder of 8 or fewer queries
        // takes the 8-lane kernel rather than a half-empty pass.
        let g16 = if g % 16 > 8 { g } else { g / 16 * 16 };
        // SAFETY: `avx512_ok` checked the CPU; `0 < n <= LANE_DIMS`; the
        // first `g16` queries' rows and outputs lie inside the bounds
        // checked above.
        unsafe {
            attn_avx512::rows_group_lanes(&qs.q[..g16 * n], n, k, stride, rows, out, out_stride)
        };
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
        return unsafe {
            attn_avx2::dot_f32_f16_rows_group(qs.q, n, k, stride, rows, out, out_stride)
        };
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
        return unsafe { attn_avx2::axpy_f16_rows(w, v, stride, rows, out) };
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
        return unsafe { attn_avx512::axpy_f16_rows_group(w, w_stride, rows, &mut out[..g * n]) };
    }
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked the CPU; `n_rows` rows of `n` values at
        // `stride` fit in `rows.data`, and every query's `n_rows` weights
        // fit in `w` at `w_stride` (see above).
        return unsafe { attn_avx2::axpy_f16_rows_group(w, w_stride, rows, &mut out[..g * n]) };
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
        return unsafe { ops_avx2::axpy_f16(a, v, out) };
    }
    let _ = isa;
    scalar::axpy_f16(a, v, out)
}

/// RMSNorm on the kernels of [`isa()`]; see [`rms_norm_with_isa`].
#[inline]
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    rms_norm_with_isa(isa(), x, w, eps, out)
}

/// RMSNorm on the kernels of `isa`:
/// `out[i] = (x[i] · scale) · w[i]`, `scale = 1 / sqrt(mean(x²) + eps)`.
///
/// * `x`: `[n]` f32 (the mean is over all of it); `w`: `[n]` f32 norm
///   weights; `out`: `[n]` f32, written over the shortest of the three.
///
/// The sum of squares is accumulated in `f64` on every ISA (each square is
/// exact there) in the same 16 lanes and order: **bit-identical on every
/// ISA**.
pub fn rms_norm_with_isa(isa: Isa, x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2, FMA and F16C.
        return unsafe { ops_avx2::rms_norm(x, w, eps, out) };
    }
    let _ = isa;
    scalar::rms_norm(x, w, eps, out)
}

/// In-place softmax on the kernels of [`isa()`]; see [`softmax_with_isa`].
#[inline]
pub fn softmax(x: &mut [f32]) {
    softmax_with_isa(isa(), x)
}

/// In-place softmax of `x` (`[n]` f32) on the kernels of `isa`:
/// `x[i] = exp(x[i] - max) · (1 / Σ exp(x[j] - max))`, the sum in `f64`.
///
/// `-inf` entries (masked scores) get weight exactly 0 as long as one entry
/// is finite; a row of only `-inf` or NaN becomes NaN on every ISA.
/// **Bit-identical on every ISA**: the same `exp` ([`crate::expf`]) and
/// the same `f64` lane order for the sum.
pub fn softmax_with_isa(isa: Isa, x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2, FMA and F16C.
        return unsafe { ops_avx2::softmax(x) };
    }
    let _ = isa;
    scalar::softmax(x)
}

/// SwiGLU on the kernels of [`isa()`]; see [`swiglu_with_isa`].
#[inline]
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    swiglu_with_isa(isa(), gate, up)
}

/// SwiGLU on the kernels of `isa`: `gate[i] = silu(gate[i]) · up[i]` with
/// `silu(g) = g / (1 + exp(-g))`, over `min(gate.len(), up.len())` elements.
///
/// * `gate`, `up`: `[n]` f32 (the FFN gate and up projections).
///
/// **Bit-identical on every ISA** (the same `exp`, [`crate::expf`], then
/// the same division and product; `g < -88.72` gives `-0·u`).
pub fn swiglu_with_isa(isa: Isa, gate: &mut [f32], up: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2, FMA and F16C.
        return unsafe { ops_avx2::swiglu(gate, up) };
    }
    let _ = isa;
    scalar::swiglu(gate, up)
}

/// `x[i] += y[i]` on the kernels of [`isa()`]; see [`add_assign_with_isa`].
#[inline]
pub fn add_assign(x: &mut [f32], y: &[f32]) {
    add_assign_with_isa(isa(), x, y)
}

/// `x[i] += y[i]` over `min(x.len(), y.len())` elements on the kernels of
/// `isa`; bit-identical on every ISA.
///
/// * `x`, `y`: `[n]` f32.
pub fn add_assign_with_isa(isa: Isa, x: &mut [f32], y: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2, FMA and F16C.
        return unsafe { ops_avx2::add_assign(x, y) };
    }
    let _ = isa;
    scalar::add_assign(x, y)
}

/// `x[i] = e^x[i]` in place on the kernels of [`isa()`]; see
/// [`exp_in_place_with_isa`].
#[inline]
pub fn exp_in_place(x: &mut [f32]) {
    exp_in_place_with_isa(isa(), x)
}

/// `x[i] = e^x[i]` in place (`x`: `[n]` f32) on the kernels of `isa`: the
/// `exp` that [`softmax_with_isa`] and [`swiglu_with_isa`] use.
///
/// [`crate::expf::expf`] on every ISA, **bit-identical** (the AVX2 twin
/// runs its `f64` algorithm on 2 × 4 lanes): below 0.502 ulp from the
/// exact `e^x`; `x > 88.72 → +inf`, `x < -103.97 → +0`, `-inf → +0`,
/// NaN → NaN.
pub fn exp_in_place_with_isa(isa: Isa, x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2, FMA and F16C.
        return unsafe { ops_avx2::exp_in_place(x) };
    }
    let _ = isa;
    scalar::exp_in_place(x)
}
