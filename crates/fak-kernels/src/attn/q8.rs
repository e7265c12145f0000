//! Attention over Q8_0 K/V rows: the kernels behind the optional Q8_0 KV
//! cache (`--kv-type q8_0`), which holds each 32 values of a cache row as
//! one [`BlockQ8_0`] (34 bytes instead of 64 as f16).
//!
//! A stored value is `x = d · q` (`d` the block's f16 scale widened to
//! f32, `q` a signed byte). That product is exact in f32 (11 + 7
//! significant bits), so these kernels compute exactly what the f16
//! kernels of [`crate::attn`] compute over the dequantized rows:
//!
//! ```text
//!   scores   out[g, r]  = Σ_i q_g[i] · (d · q)[r, i]     one f32 running sum
//!                                                         per (g, r), i in order,
//!                                                         fused multiply-adds
//!   values   out[g, i] += w[g, r] · (d · q)[r, i]         rows r in order,
//!                                                         multiply then add
//! ```
//!
//! Both are **bit-identical on every ISA**: the AVX2 twins put 8 rows in
//! the lanes (scores) or 8 values of a row (value sums) and keep each sum's
//! order. Rows are written with [`quantize_q8_0_blocks`], llama.cpp's
//! run-time Q8_0 quantizer (the one its CPU backend uses when it copies
//! K/V into a `q8_0` cache).
//!
//! Each row covers `width / 32` blocks (a partial trailing block is
//! ignored); callers pass head dims that are multiples of 32. Nothing
//! panics on short slices: rows that do not fit are skipped, as in the
//! f16 kernels.

#[cfg(target_arch = "x86_64")]
use super::q8_avx2;
use super::scalar;
use super::types::{per_query_capacity, rows_that_fit, KvRowsQ8, QueryGroup};
use crate::blocks::BlockQ8_0;
use crate::isa::{isa, Isa};

/// Orthonormal Walsh–Hadamard rotation, in place, of each consecutive
/// `n`-value chunk of `x` (`n` a power of two; a trailing partial chunk, or
/// any other `n`, leaves `x` as it is): `chunk ← H_n · chunk / √n` with
/// Sylvester's `H_n = [[H, H], [H, −H]]`. The rotation is symmetric and
/// its own inverse, and keeps dot products: `(Hq) · (Hk) = q · k`.
///
/// A Q8_0 KV cache stores rotated rows: a few large channels (Qwen2's key
/// bias, for one) otherwise set every block's scale and round the other
/// channels away; the rotation spreads them over the chunk (llama.cpp
/// rotates its quantized K/V caches the same way). One fixed butterfly
/// order, so the result depends on nothing but `x`.
///
/// * `x`: `[m · n]` f32, e.g. a row of heads whose size `n` divides.
pub fn hadamard_rotate(x: &mut [f32], n: usize) {
    if n < 2 || !n.is_power_of_two() {
        return;
    }
    let scale = 1.0 / (n as f32).sqrt();
    for c in x.chunks_exact_mut(n) {
        let mut h = 1;
        while h < n {
            for i in (0..n).step_by(2 * h) {
                for j in i..i + h {
                    let (a, b) = (c[j], c[j + h]);
                    c[j] = a + b;
                    c[j + h] = a - b;
                }
            }
            h *= 2;
        }
        for v in c.iter_mut() {
            *v *= scale;
        }
    }
}

/// Quantizes `src` (`[32 · dst.len()]` f32, a trailing partial block
/// ignored) into `dst` with llama.cpp's run-time Q8_0 quantizer
/// (`d = amax / 127`, `q = rint(x · 127 / amax)`), bit-identical on every
/// ISA.
pub fn quantize_q8_0_blocks(src: &[f32], dst: &mut [BlockQ8_0]) {
    crate::quant::quantize_q8_0_blocks(isa(), src, dst)
}

/// Whether the AVX2 twins may run for `isa` on this CPU.
#[cfg(target_arch = "x86_64")]
#[inline]
fn avx2_ok(isa: Isa) -> bool {
    isa != Isa::Scalar && Isa::Avx2.is_available()
}

/// Q8_0 attention scores on the kernels of [`isa()`]; see
/// [`dot_f32_q8_0_rows_group_with_isa`].
#[inline]
pub fn dot_f32_q8_0_rows_group(
    qs: QueryGroup<'_>,
    rows: KvRowsQ8<'_>,
    out: &mut [f32],
    out_stride: usize,
) {
    dot_f32_q8_0_rows_group_with_isa(isa(), qs, rows, out, out_stride)
}

/// Scores of a group of queries against Q8_0 key rows:
/// `out[g * out_stride + r] = Σ_i q_g[i] · (d · q8)[r, i]`, one running sum
/// in index order per score, **bit-identical on every ISA**.
///
/// * `qs`: `[G, n]` queries; `rows`: the key rows (`min(n, width) / 32`
///   blocks of each are used); `out`: `[G, out_stride]`, the first
///   `rows.n_rows` values of each row written.
///
/// Rows that do not fit in `rows.data`, or in every query's output row,
/// are skipped (not computed).
pub fn dot_f32_q8_0_rows_group_with_isa(
    isa: Isa,
    qs: QueryGroup<'_>,
    rows: KvRowsQ8<'_>,
    out: &mut [f32],
    out_stride: usize,
) {
    let g = qs.len();
    let nb = qs.n.min(rows.width) / 32;
    if g == 0 || nb == 0 {
        return;
    }
    let n_rows = rows
        .n_rows
        .min(rows_that_fit(rows.data.len(), nb, rows.stride, rows.n_rows))
        .min(per_query_capacity(out.len(), g, out_stride));
    let rows = KvRowsQ8 {
        n_rows,
        width: nb * 32,
        ..rows
    };
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) && nb <= q8_avx2::MAX_BLOCKS {
        // SAFETY: `avx2_ok` checked the CPU; `n_rows` rows of `nb` blocks
        // at `stride` fit in `rows.data`, each query has `n >= 32 · nb`
        // values, and each query's `n_rows` outputs fit in `out` at
        // `out_stride` (see above).
        return unsafe { q8_avx2::dot_rows_group(qs.q, qs.n, rows, out, out_stride) };
    }
    let _ = isa;
    scalar::dot_f32_q8_0_rows_group(qs, rows, out, out_stride)
}

/// Q8_0 value sums on the kernels of [`isa()`]; see
/// [`axpy_q8_0_rows_group_with_isa`].
#[inline]
pub fn axpy_q8_0_rows_group(w: &[f32], w_stride: usize, rows: KvRowsQ8<'_>, out: &mut [f32]) {
    axpy_q8_0_rows_group_with_isa(isa(), w, w_stride, rows, out)
}

/// Value sums of `G` queries over the same Q8_0 rows: for each row `r` in
/// order, `out[g * width + i] += w[g * w_stride + r] · (d · q8)[r, i]`,
/// **bit-identical on every ISA**.
///
/// * `w`: `[G, w_stride]`; `rows`: the value rows (`width / 32` blocks of
///   each); `out`: `[G, width]` (`G = out.len() / width`).
///
/// Rows that do not fit in `rows.data`, or in every query's weights
/// (`w_stride`, and the last query's slice of `w`), are skipped.
pub fn axpy_q8_0_rows_group_with_isa(
    isa: Isa,
    w: &[f32],
    w_stride: usize,
    rows: KvRowsQ8<'_>,
    out: &mut [f32],
) {
    let nb = rows.width / 32;
    if nb == 0 {
        return;
    }
    let g = out.len() / (nb * 32);
    if g == 0 {
        return;
    }
    let n_rows = rows
        .n_rows
        .min(rows_that_fit(rows.data.len(), nb, rows.stride, rows.n_rows))
        .min(per_query_capacity(w.len(), g, w_stride));
    let rows = KvRowsQ8 {
        n_rows,
        width: nb * 32,
        ..rows
    };
    let out = &mut out[..g * nb * 32];
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) && nb <= q8_avx2::MAX_BLOCKS {
        // SAFETY: `avx2_ok` checked the CPU; `n_rows` rows of `nb` blocks
        // fit in `rows.data`, every query's `n_rows` weights fit in `w` at
        // `w_stride`, and `out` is `[g, 32 · nb]` (see above).
        return unsafe { q8_avx2::axpy_rows_group(w, w_stride, rows, out) };
    }
    let _ = isa;
    scalar::axpy_q8_0_rows_group(w, w_stride, rows, out)
}
