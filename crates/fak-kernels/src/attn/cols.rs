//! Attention scores over f16 keys stored **dims-major** ([`KvCols`]: dim
//! `d` of row `r` at `d * dstride + r`), dispatched on an [`Isa`]:
//! [`dot_f32_f16_cols_group`] runs on the process-wide [`isa()`],
//! [`dot_f32_f16_cols_group_with_isa`] takes the ISA, and
//! [`super::scalar::dot_f32_f16_cols_group`] is the scalar twin.
//!
//! The scores are those of [`super::dot_f32_f16_rows_group`] on the
//! row-major copy of the same keys, bit for bit, on every ISA: one lane
//! per row, as in the row-major kernels, but a lane's 8 or 16 rows of one
//! dim are one contiguous load, so no key tile is transposed.
//!
//! ```text
//!   row-major [row][dim]            dims-major [dim][dstride]
//!   r0: k00 k01 .. k0n              d0: k00 k10 k20 .. ─► one load, 16 rows
//!   r1: k10 k11 .. k1n     ──►      d1: k01 k11 k21 ..
//!   ...  (8×8 transposes)           ...  acc[g] += q_g[d] · load(d)
//! ```

use super::scalar;
use super::types::{cols_call_bounds, KvCols, QueryGroup};
#[cfg(target_arch = "x86_64")]
use super::{cols_avx2, cols_avx512};
use crate::isa::{isa, Isa};

/// Dims-major grouped-query scores on the kernels of [`isa()`]; see
/// [`dot_f32_f16_cols_group_with_isa`].
#[inline]
pub fn dot_f32_f16_cols_group(
    qs: QueryGroup<'_>,
    k: KvCols<'_>,
    out: &mut [f32],
    out_stride: usize,
) {
    dot_f32_f16_cols_group_with_isa(isa(), qs, k, out, out_stride)
}

/// Scores of each query `g` of a group that shares one key head against
/// dims-major keys: `out[g * out_stride + r] = Σ_d q_g[d] · f16(k.data[d *
/// k.dstride + r])` for `r < k.n_rows`, over dims `d < min(qs.n, k.width)`,
/// each a running sum from `0.0` in dim order (one fused multiply-add
/// per dim).
/// **Bit-identical on every ISA and to
/// [`dot_f32_f16_rows_group`](super::dot_f32_f16_rows_group) on the
/// row-major copy of the keys.** The AVX2 twin keeps 8 rows per register,
/// the AVX-512 twin 16, each for up to 4 queries per pass.
///
/// * `qs`: `[G, n]` queries; `k`: `[width, dstride]` keys; `out`:
///   `[G, out_stride]` (row `g` at `g * out_stride`), the first `k.n_rows`
///   values of each row written.
///
/// Rows whose dims do not all fit in `k.data`, rows past `k.dstride` (with
/// more than one dim) and rows past any query's output row are skipped
/// (not computed).
pub fn dot_f32_f16_cols_group_with_isa(
    isa: Isa,
    qs: QueryGroup<'_>,
    k: KvCols<'_>,
    out: &mut [f32],
    out_stride: usize,
) {
    let (dims, rows) = cols_call_bounds(&qs, &k, out.len(), out_stride);
    if qs.is_empty() || rows == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let c = cols_avx2::Cols {
            q: &qs.q[..qs.len() * qs.n],
            n: qs.n,
            dims,
            k: k.data,
            dstride: k.dstride,
        };
        if isa == Isa::Avx512 && Isa::Avx512.is_available() {
            // SAFETY: the CPU has AVX-512 F, BW, VL (and AVX2, F16C);
            // `qs` is not empty so `n > 0`, `dims <= n`; `rows` rows of
            // `dims` dims fit in `k.data` and every query's `rows` outputs
            // fit in `out` at `out_stride` (`cols_call_bounds`).
            return unsafe { cols_avx512::dot_f32_f16_cols_group(&c, rows, out, out_stride) };
        }
        if isa != Isa::Scalar && Isa::Avx2.is_available() {
            // SAFETY: the CPU has AVX2, FMA and F16C; the bounds as above.
            return unsafe { cols_avx2::dot_f32_f16_cols_group(&c, rows, out, out_stride) };
        }
    }
    let _ = (isa, dims);
    scalar::dot_f32_f16_cols_group(qs, k, out, out_stride)
}
