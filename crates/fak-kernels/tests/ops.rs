//! The row operations of `fak_kernels::ops` and the f16 attention kernels
//! of `fak_kernels::attn`: their scalar twins and every
//! ISA this CPU can run agree with naive f64 references written from each
//! operation's definition (tolerances: [`reference_tol`]'s doc), and the
//! SIMD kernels agree with the scalar twins.
//!
//! Inputs are fresh random rows (three fixed seeds plus one new seed per
//! run, printed on failure) of the lengths in [`LENGTHS`]. Tolerances of
//! SIMD against the scalar twins, per element unless stated:
//!
//! ```text
//!   dot_f32_f16   |simd - scalar| ≤ 1e-5 · Σ|q_i·k_i|            (whole dot)
//!   axpy_f16      bit-identical
//!   dot_f32_f16_rows  bit-identical (per row: the scalar dot_f32_f16)
//!   rms_norm      |simd - scalar| ≤ 1e-6 · |scalar|
//!   softmax       |simd - scalar| ≤ 1e-6 · |scalar| + 1e-38; masked → exactly 0
//!   swiglu        |simd - scalar| ≤ 1e-6 · |scalar| + 1e-38; same inf/NaN
//!   add_assign    bit-identical
//!   exp           |got - e^x| ≤ 1e-7 · e^x for normal results,
//!                 + 2^-149 absolute for subnormal ones (reference in f64)
//! ```

use fak_kernels::attn::{self, KvRows, QueryGroup};
use fak_kernels::fp::{f16_to_f32, f32_to_f16};
use fak_kernels::ops::{self, scalar};
use fak_kernels::{isa, Isa};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Row lengths: empty, below/at/above one vector, the head dim (64), the
/// model widths (576 hidden, 1536 FFN).
const LENGTHS: [usize; 10] = [0, 1, 7, 8, 63, 64, 65, 128, 576, 1536];

/// Bound on the relative error of the vector `exp` (normal results).
const EXP_REL: f64 = 1e-7;

/// Three fixed seeds and one fresh one.
fn seeds() -> [u64; 4] {
    [1, 2, 3, rand::random()]
}

fn f32s(rng: &mut StdRng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| rng.gen_range(lo..hi)).collect()
}

fn f16s(rng: &mut StdRng, n: usize, lo: f32, hi: f32) -> Vec<u16> {
    (0..n).map(|_| f32_to_f16(rng.gen_range(lo..hi))).collect()
}

/// Naive f64 references, written from each operation's definition (not
/// from the kernels): every input is widened to f64 first, so the only
/// differences from the true result are f64 roundings (~1e-16 relative),
/// far below the f32 tolerances in [`reference_tol`].
mod reference {
    use super::f16_to_f32;

    pub fn dot(q: &[f32], k: &[u16]) -> f64 {
        q.iter()
            .zip(k)
            .map(|(&a, &b)| f64::from(a) * f64::from(f16_to_f32(b)))
            .sum()
    }

    /// `out + Σ_r w[r] · v_r` (one row `v_r` of `n` values every `stride`).
    pub fn axpy_rows(w: &[f32], v: &[u16], stride: usize, out: &[f32]) -> Vec<f64> {
        (0..out.len())
            .map(|i| {
                let sum: f64 = w
                    .iter()
                    .enumerate()
                    .map(|(r, &wr)| f64::from(wr) * f64::from(f16_to_f32(v[r * stride + i])))
                    .sum();
                f64::from(out[i]) + sum
            })
            .collect()
    }

    pub fn rms_norm(x: &[f32], w: &[f32], eps: f32) -> Vec<f64> {
        let mean = x.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / x.len() as f64;
        let scale = 1.0 / (mean + f64::from(eps)).sqrt();
        x.iter()
            .zip(w)
            .map(|(&v, &g)| f64::from(v) * scale * f64::from(g))
            .collect()
    }

    pub fn softmax(x: &[f32]) -> Vec<f64> {
        let max = x
            .iter()
            .map(|&v| f64::from(v))
            .fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = x.iter().map(|&v| (f64::from(v) - max).exp()).collect();
        let sum: f64 = e.iter().sum();
        e.iter().map(|v| v / sum).collect()
    }

    /// `silu(g) · u = g / (1 + e^-g) · u`.
    pub fn swiglu(gate: &[f32], up: &[f32]) -> Vec<f64> {
        gate.iter()
            .zip(up)
            .map(|(&g, &u)| {
                let g = f64::from(g);
                g / (1.0 + (-g).exp()) * f64::from(u)
            })
            .collect()
    }

    pub fn add(x: &[f32], y: &[f32]) -> Vec<f64> {
        x.iter()
            .zip(y)
            .map(|(&a, &b)| f64::from(a) + f64::from(b))
            .collect()
    }
}

/// The f32 unit roundoff, 2^-24.
const U: f64 = 1.0 / 16_777_216.0;

/// The tolerances against [`reference`], per element, from the rounding
/// steps each f32 implementation takes (`u` = 2^-24; `γ(m) = m·u / (1 -
/// m·u)`, the bound on an m-term f32 sum in any order):
///
/// ```text
///   dot_f32_f16     γ(n + 1) · Σ|q_i·k_i|                   (whole dot)
///   axpy_f16(_rows) γ(2·(rows + 1)) · (|out| + Σ_r |w_r·v_r|)
///   rms_norm        8u · |ref|           (sum of squares in f64, then
///                                        ≤ 6 f32 roundings)
///   softmax         (|x_i - max| + 64)·u · |ref| + 2e-7·|ref| + 1e-38
///                   (x_i - max rounded in f32 is amplified by exp; exp
///                   ≤ 1e-7, the sum and scale a few u); masked → exactly 0
///   swiglu          (1e-7 + 4u) · |ref| + 1e-38
///   add_assign      exact: the f64 sum rounded to f32
/// ```
fn reference_tol(m: usize) -> f64 {
    let mu = m as f64 * U;
    mu / (1.0 - mu)
}

/// `|got - want| ≤ tol[i]` for every element, with the worst `err / tol`
/// returned; `want` and `tol` are f64.
fn near(got: &[f32], want: &[f64], tol: impl Fn(usize) -> f64, what: &str) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst = 0.0f64;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let (err, t) = ((f64::from(g) - w).abs(), tol(i));
        assert!(
            err <= t,
            "{what}[{i}]: got {g}, want {w}, err {err:e} > {t:e}"
        );
        if t > 0.0 {
            worst = worst.max(err / t);
        }
    }
    worst
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// The scalar twins and every ISA's kernels against the f64 references,
/// within [`reference_tol`]'s bounds, on random rows of every length in
/// [`LENGTHS`]. Prints the worst `error / tolerance` per operation.
#[test]
fn every_path_matches_the_f64_reference() {
    // Path 0 is the scalar twins; then every ISA through its dispatcher.
    let paths: Vec<Option<Isa>> = std::iter::once(None)
        .chain(Isa::available().into_iter().map(Some))
        .collect();
    let mut worst = [0.0f64; 6];
    for &path in &paths {
        let name = path.map_or("scalar twin".to_string(), |i| i.to_string());
        for seed in seeds() {
            let mut rng = StdRng::seed_from_u64(seed);
            for n in LENGTHS {
                let what = |op: &str| format!("{name} {op} n={n} seed={seed}");

                let q = f32s(&mut rng, n, -2.0, 2.0);
                let k = f16s(&mut rng, n, -2.0, 2.0);
                let got = match path {
                    None => attn::scalar::dot_f32_f16(&q, &k),
                    Some(isa) => attn::dot_f32_f16_with_isa(isa, &q, &k),
                };
                let mag: f64 = q
                    .iter()
                    .zip(&k)
                    .map(|(&a, &b)| (f64::from(a) * f64::from(f16_to_f32(b))).abs())
                    .sum();
                let tol = reference_tol(n + 1) * mag;
                worst[0] = worst[0].max(near(
                    &[got],
                    &[reference::dot(&q, &k)],
                    |_| tol,
                    &what("dot"),
                ));

                // axpy_f16: one row; axpy_f16_rows: 5 rows at a stride.
                let a = rng.gen_range(-1.0f32..1.0);
                let out0 = f32s(&mut rng, n, -3.0, 3.0);
                let mut got = out0.clone();
                match path {
                    None => attn::scalar::axpy_f16(a, &k, &mut got),
                    Some(isa) => attn::axpy_f16_with_isa(isa, a, &k, &mut got),
                }
                let want = reference::axpy_rows(&[a], &k, n, &out0);
                let tol = |i: usize| {
                    let t = f64::from(a) * f64::from(f16_to_f32(k[i]));
                    reference_tol(4) * (f64::from(out0[i]).abs() + t.abs())
                };
                worst[1] = worst[1].max(near(&got, &want, tol, &what("axpy_f16")));

                let (rows, stride) = (5usize, n + 3);
                let w = f32s(&mut rng, rows, -1.0, 1.0);
                let v = f16s(&mut rng, rows * stride, -3.0, 3.0);
                let mut got = out0.clone();
                match path {
                    None => attn::scalar::axpy_f16_rows(&w, &v, stride, rows, &mut got),
                    Some(isa) => attn::axpy_f16_rows_with_isa(isa, &w, &v, stride, rows, &mut got),
                }
                let want = reference::axpy_rows(&w, &v, stride, &out0);
                let tol = |i: usize| {
                    let terms: f64 = (0..rows)
                        .map(|r| (f64::from(w[r]) * f64::from(f16_to_f32(v[r * stride + i]))).abs())
                        .sum();
                    reference_tol(2 * (rows + 1)) * (f64::from(out0[i]).abs() + terms)
                };
                worst[1] = worst[1].max(near(&got, &want, tol, &what("axpy_f16_rows")));

                let x = f32s(&mut rng, n, -3.0, 3.0);
                let g = f32s(&mut rng, n, -2.0, 2.0);
                let mut got = vec![0.0; n];
                match path {
                    None => scalar::rms_norm(&x, &g, 1e-6, &mut got),
                    Some(isa) => ops::rms_norm_with_isa(isa, &x, &g, 1e-6, &mut got),
                }
                let want = reference::rms_norm(&x, &g, 1e-6);
                let tol = |i: usize| 8.0 * U * want[i].abs();
                worst[2] = worst[2].max(near(&got, &want, tol, &what("rms_norm")));

                let x = scores(&mut rng, n);
                let mut got = x.clone();
                match path {
                    None => scalar::softmax(&mut got),
                    Some(isa) => ops::softmax_with_isa(isa, &mut got),
                }
                let want = reference::softmax(&x);
                let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let tol = |i: usize| {
                    let spread = f64::from(x[i]) - f64::from(max);
                    if spread == f64::NEG_INFINITY {
                        0.0 // masked: exactly 0
                    } else {
                        ((spread.abs() + 64.0) * U + 2e-7) * want[i].abs() + 1e-38
                    }
                };
                worst[3] = worst[3].max(near(&got, &want, tol, &what("softmax")));

                let up = f32s(&mut rng, n, -3.0, 3.0);
                let gate = f32s(&mut rng, n, -25.0, 25.0);
                let mut got = gate.clone();
                match path {
                    None => scalar::swiglu(&mut got, &up),
                    Some(isa) => ops::swiglu_with_isa(isa, &mut got, &up),
                }
                let want = reference::swiglu(&gate, &up);
                let tol = |i: usize| (1e-7 + 4.0 * U) * want[i].abs() + 1e-38;
                worst[4] = worst[4].max(near(&got, &want, tol, &what("swiglu")));

                let y = f32s(&mut rng, n, -1e3, 1e3);
                let x0 = f32s(&mut rng, n, -1e3, 1e3);
                let mut got = x0.clone();
                match path {
                    None => scalar::add_assign(&mut got, &y),
                    Some(isa) => ops::add_assign_with_isa(isa, &mut got, &y),
                }
                let want: Vec<f32> = reference::add(&x0, &y).iter().map(|&v| v as f32).collect();
                assert_eq!(bits(&got), bits(&want), "{}", what("add_assign"));
            }
        }
    }
    let names = [
        "dot_f32_f16",
        "axpy_f16(_rows)",
        "rms_norm",
        "softmax",
        "swiglu",
    ];
    for (op, w) in names.iter().zip(worst) {
        println!("{op}: worst |got - f64 reference| / tolerance = {w:.3}");
    }
}

#[test]
fn dot_f32_f16_matches_scalar() {
    let mut worst = 0.0f64;
    for isa in Isa::available() {
        for seed in seeds() {
            let mut rng = StdRng::seed_from_u64(seed);
            for n in LENGTHS {
                let q = f32s(&mut rng, n, -2.0, 2.0);
                let k = f16s(&mut rng, n, -2.0, 2.0);
                let want = attn::scalar::dot_f32_f16(&q, &k);
                let got = attn::dot_f32_f16_with_isa(isa, &q, &k);
                let mag: f64 = q
                    .iter()
                    .zip(&k)
                    .map(|(&a, &b)| (f64::from(a) * f64::from(f16_to_f32(b))).abs())
                    .sum();
                let err = (f64::from(got) - f64::from(want)).abs();
                assert!(
                    err <= 1e-5 * mag,
                    "{isa} n={n} seed={seed}: got {got}, want {want}, err {err:e}, Σ|qk| {mag}"
                );
                if mag > 0.0 {
                    worst = worst.max(err / mag);
                }
            }
        }
    }
    println!("dot_f32_f16: worst |simd - scalar| / Σ|q·k| = {worst:e}");
}

#[test]
fn axpy_f16_matches_scalar() {
    for isa in Isa::available() {
        for seed in seeds() {
            let mut rng = StdRng::seed_from_u64(seed);
            for n in LENGTHS {
                let a = rng.gen_range(-1.0f32..1.0);
                let v = f16s(&mut rng, n, -4.0, 4.0);
                let out0 = f32s(&mut rng, n, -3.0, 3.0);
                let mut want = out0.clone();
                let mut got = out0.clone();
                attn::scalar::axpy_f16(a, &v, &mut want);
                attn::axpy_f16_with_isa(isa, a, &v, &mut got);
                assert_eq!(bits(&got), bits(&want), "{isa} n={n} seed={seed}");
            }
        }
    }
}

/// Multi-row attention scores equal the scalar single-row dot of every
/// row, bit for bit, for any row count (16-, 8-row and leftover paths),
/// head width, stride and offset into a KV-style row buffer.
#[test]
fn dot_f32_f16_rows_is_bit_identical_to_scalar_rows() {
    for isa in Isa::available() {
        for seed in seeds() {
            let mut rng = StdRng::seed_from_u64(seed);
            for (n, stride, off) in [
                (64, 192, 64),
                (64, 64, 0),
                (13, 20, 3),
                (8, 8, 0),
                (0, 4, 0),
            ] {
                for n_rows in [0usize, 1, 7, 8, 9, 15, 16, 17, 33] {
                    let q = f32s(&mut rng, n, -2.0, 2.0);
                    let len = off + n_rows.saturating_sub(1) * stride + n;
                    let k = f16s(&mut rng, len.max(1), -3.0, 3.0);
                    let mut got = vec![f32::NAN; n_rows];
                    attn::dot_f32_f16_rows_with_isa(isa, &q, &k[off..], stride, n_rows, &mut got);
                    let want: Vec<f32> = (0..n_rows)
                        .map(|r| {
                            attn::scalar::dot_f32_f16(
                                &q,
                                &k[off + r * stride..off + r * stride + n],
                            )
                        })
                        .collect();
                    assert_eq!(
                        bits(&got),
                        bits(&want),
                        "{isa} n={n} stride={stride} rows={n_rows} seed={seed}"
                    );
                }
            }
            // Rows that do not fit are skipped, never read out of bounds.
            let q = f32s(&mut rng, 64, -1.0, 1.0);
            let k = f16s(&mut rng, 64 * 3 + 10, -1.0, 1.0);
            let mut got = vec![7.0f32; 5];
            attn::dot_f32_f16_rows_with_isa(isa, &q, &k, 64, 5, &mut got);
            assert_eq!(&got[3..], &[7.0, 7.0]);
        }
    }
}

/// Grouped-query scores equal one scalar single-row dot per (query, row),
/// bit for bit, for group sizes 1–19 (every kernel: passes of 4, 3, 2, 1
/// queries, and lane-per-query passes of 8), more than one stack-full of
/// lane passes (65 and 70 queries of 256 dims), any row count, and output
/// rows at a stride; outputs past `n_rows` in each query's row stay
/// untouched.
#[test]
fn dot_f32_f16_rows_group_is_bit_identical_to_scalar_rows() {
    for isa in Isa::available() {
        for seed in seeds() {
            let mut rng = StdRng::seed_from_u64(seed);
            let shapes = [
                (64, 192, 64),
                (64, 64, 0),
                (13, 20, 3),
                (264, 270, 1),
                (256, 260, 2),
            ];
            for (n, stride, off) in shapes {
                let groups: Vec<usize> = match n {
                    256 => vec![8, 64, 65, 70],
                    _ => (1..=19).collect(),
                };
                for g in groups {
                    for n_rows in [0usize, 1, 7, 8, 9, 17, 33] {
                        let q = f32s(&mut rng, g * n, -2.0, 2.0);
                        let len = off + n_rows.saturating_sub(1) * stride + n;
                        let k = f16s(&mut rng, len.max(1), -3.0, 3.0);
                        let out_stride = n_rows + 5;
                        let mut got = vec![f32::NAN; g * out_stride];
                        attn::dot_f32_f16_rows_group_with_isa(
                            isa,
                            QueryGroup { q: &q, n },
                            &k[off..],
                            stride,
                            n_rows,
                            &mut got,
                            out_stride,
                        );
                        for gi in 0..g {
                            let qg = &q[gi * n..(gi + 1) * n];
                            let want: Vec<f32> = (0..n_rows)
                                .map(|r| {
                                    let row = &k[off + r * stride..off + r * stride + n];
                                    attn::scalar::dot_f32_f16(qg, row)
                                })
                                .collect();
                            let row = &got[gi * out_stride..(gi + 1) * out_stride];
                            assert_eq!(
                                bits(&row[..n_rows]),
                                bits(&want),
                                "{isa} n={n} g={g} rows={n_rows} seed={seed}"
                            );
                            assert!(row[n_rows..].iter().all(|v| v.is_nan()));
                        }
                    }
                }
            }
            // Rows that do not fit in `k` or in an output row are skipped.
            let q = f32s(&mut rng, 3 * 64, -1.0, 1.0);
            let k = f16s(&mut rng, 64 * 3 + 10, -1.0, 1.0);
            let mut got = vec![7.0f32; 3 * 5];
            let qs = QueryGroup { q: &q, n: 64 };
            attn::dot_f32_f16_rows_group_with_isa(isa, qs, &k, 64, 5, &mut got, 5);
            for gi in 0..3 {
                assert_eq!(&got[gi * 5 + 3..gi * 5 + 5], &[7.0, 7.0]);
            }
            let mut short = vec![7.0f32; 2 * 4 + 2];
            let k = f16s(&mut rng, 64 * 8, -1.0, 1.0);
            attn::dot_f32_f16_rows_group_with_isa(isa, qs, &k, 64, 8, &mut short, 4);
            // The last query's row holds only 2 values: rows 2.. are skipped.
            assert_eq!(&short[2..4], &[7.0, 7.0], "{isa}");
            assert_eq!(&short[6..8], &[7.0, 7.0], "{isa}");
            assert!(short[8..].iter().all(|&v| v != 7.0), "{isa}");
        }
    }
}

/// Grouped value sums equal one scalar `axpy_f16_rows` per query, bit for
/// bit, for group sizes 1–10, head widths that are multiples of 64 (the
/// tiled paths: 64, 128, 256, and 320, past the widest AVX-512 tile) and
/// 13, any row count (whole and partial 8- and 16-row tiles) and weights
/// at a stride.
#[test]
fn axpy_f16_rows_group_is_bit_identical_to_scalar_rows() {
    for isa in Isa::available() {
        for seed in seeds() {
            let mut rng = StdRng::seed_from_u64(seed);
            let shapes = [
                (64, 192, 64),
                (64, 64, 0),
                (128, 256, 128),
                (128, 128, 0),
                (256, 256, 0),
                (320, 320, 0),
                (13, 20, 3),
            ];
            for (n, stride, off) in shapes {
                for g in 1..=10usize {
                    for n_rows in [0usize, 1, 7, 8, 9, 15, 16, 17, 33] {
                        let w_stride = n_rows + 3;
                        let w = f32s(&mut rng, g * w_stride, -1.0, 1.0);
                        let len = off + n_rows.saturating_sub(1) * stride + n;
                        let v = f16s(&mut rng, len.max(1), -3.0, 3.0);
                        let init = f32s(&mut rng, g * n, -2.0, 2.0);
                        let mut got = init.clone();
                        let rows = KvRows {
                            data: &v[off..],
                            stride,
                            n_rows,
                            width: n,
                        };
                        attn::axpy_f16_rows_group_with_isa(isa, &w, w_stride, rows, &mut got);
                        let mut want = init.clone();
                        for (gi, o) in want.chunks_exact_mut(n).enumerate() {
                            let wg = &w[gi * w_stride..];
                            attn::scalar::axpy_f16_rows(wg, &v[off..], stride, n_rows, o);
                        }
                        assert_eq!(
                            bits(&got),
                            bits(&want),
                            "{isa} n={n} g={g} rows={n_rows} seed={seed}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn rms_norm_matches_scalar() {
    for isa in Isa::available() {
        for seed in seeds() {
            let mut rng = StdRng::seed_from_u64(seed);
            for n in LENGTHS {
                let x = f32s(&mut rng, n, -3.0, 3.0);
                let w = f32s(&mut rng, n, -2.0, 2.0);
                let mut want = vec![0.0; n];
                let mut got = vec![0.0; n];
                scalar::rms_norm(&x, &w, 1e-6, &mut want);
                ops::rms_norm_with_isa(isa, &x, &w, 1e-6, &mut got);
                assert_eq!(bits(&got), bits(&want), "{isa} rms_norm n={n} seed={seed}");
            }
        }
    }
}

/// Attention-like scores: finite values in ±30, about a quarter masked to
/// `-inf` (never the last one, like a causal mask's own position).
fn scores(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            if i + 1 < n && rng.gen_range(0..4) == 0 {
                f32::NEG_INFINITY
            } else {
                rng.gen_range(-30.0f32..30.0)
            }
        })
        .collect()
}

#[test]
fn softmax_matches_scalar() {
    for isa in Isa::available() {
        for seed in seeds() {
            let mut rng = StdRng::seed_from_u64(seed);
            for n in LENGTHS.into_iter().chain([256, 1000]) {
                let x = scores(&mut rng, n);
                let mut want = x.clone();
                let mut got = x.clone();
                scalar::softmax(&mut want);
                ops::softmax_with_isa(isa, &mut got);
                let what = format!("{isa} softmax n={n} seed={seed}");
                assert_eq!(bits(&got), bits(&want), "{what}");
                for (i, &v) in x.iter().enumerate() {
                    if v == f32::NEG_INFINITY {
                        assert_eq!(got[i].to_bits(), 0, "{what}: masked [{i}] = {}", got[i]);
                    }
                }
                if n > 0 {
                    let sum: f64 = got.iter().map(|&v| f64::from(v)).sum();
                    assert!((sum - 1.0).abs() <= 1e-5, "{what}: Σ = {sum}");
                }
            }
        }
    }
}

#[test]
fn softmax_edge_rows_match_scalar() {
    let rows: [&[f32]; 6] = [
        &[],
        &[5.0],
        &[f32::NEG_INFINITY; 9],
        &[f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY],
        &[1.0, 2.0, 3.0, -100.0, 1e30, -1e30, 0.0, -0.0, 7.5],
        &[-1000.0, -1000.0, -1001.0],
    ];
    for isa in Isa::available() {
        for row in rows {
            let mut want = row.to_vec();
            let mut got = row.to_vec();
            scalar::softmax(&mut want);
            ops::softmax_with_isa(isa, &mut got);
            assert_eq!(bits(&got), bits(&want), "{isa} softmax {row:?}");
        }
    }
}

#[test]
fn swiglu_matches_scalar() {
    for isa in Isa::available() {
        for seed in seeds() {
            let mut rng = StdRng::seed_from_u64(seed);
            for n in LENGTHS {
                let up = f32s(&mut rng, n, -3.0, 3.0);
                let g = f32s(&mut rng, n, -25.0, 25.0);
                let mut want = g.clone();
                let mut got = g.clone();
                scalar::swiglu(&mut want, &up);
                ops::swiglu_with_isa(isa, &mut got, &up);
                assert_eq!(bits(&got), bits(&want), "{isa} swiglu n={n} seed={seed}");
            }
        }
        let g = [
            -200.0,
            -100.0,
            -89.0,
            -87.0,
            -1e-30,
            0.0,
            -0.0,
            1e-30,
            88.0,
            100.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ];
        let up = [1.5f32; 13];
        let mut want = g;
        let mut got = g;
        scalar::swiglu(&mut want, &up);
        ops::swiglu_with_isa(isa, &mut got, &up);
        assert_eq!(bits(&got), bits(&want), "{isa} swiglu specials");
    }
}

#[test]
fn add_assign_is_bit_identical() {
    for isa in Isa::available() {
        for seed in seeds() {
            let mut rng = StdRng::seed_from_u64(seed);
            for n in LENGTHS {
                let x = f32s(&mut rng, n, -1e3, 1e3);
                let y = f32s(&mut rng, n, -1e3, 1e3);
                let mut want = x.clone();
                let mut got = x;
                scalar::add_assign(&mut want, &y);
                ops::add_assign_with_isa(isa, &mut got, &y);
                assert_eq!(bits(&got), bits(&want), "{isa} n={n} seed={seed}");
            }
        }
    }
}

/// `|got - e^x|` against the f64 reference, in units of the allowed error.
fn exp_excess(x: f32, got: f32) -> f64 {
    let want = f64::from(x).exp();
    let err = (f64::from(got) - want).abs();
    let tol = if want >= f64::from(f32::MIN_POSITIVE) {
        EXP_REL * want
    } else {
        EXP_REL * want + 2f64.powi(-149)
    };
    err / tol
}

#[test]
fn exp_accuracy_sweep() {
    const STEPS: usize = 1 << 21;
    let xs: Vec<f32> = (0..=STEPS)
        .map(|i| -88.0 + 176.0 * (i as f32 / STEPS as f32))
        .chain((0..=4096).map(|i| -104.0 + 16.7 * (i as f32 / 4096.0)))
        .collect();
    for isa in Isa::available() {
        let mut got = xs.clone();
        ops::exp_in_place_with_isa(isa, &mut got);
        let mut worst_rel = 0.0f64;
        for (&x, &g) in xs.iter().zip(&got) {
            let excess = exp_excess(x, g);
            assert!(
                excess <= 1.0,
                "{isa}: exp({x}) = {g}, want {}",
                f64::from(x).exp()
            );
            let want = f64::from(x).exp();
            if want >= f64::from(f32::MIN_POSITIVE) {
                worst_rel = worst_rel.max((f64::from(g) - want).abs() / want);
            }
        }
        println!("{isa}: exp worst relative error (normal results) {worst_rel:e}");
    }
}

/// The SIMD `exp` gives the scalar twin's bits ([`fak_kernels::expf::expf`])
/// on a dense sweep of the whole finite range, both overflow and underflow
/// edges, and the special values; the teacher-forced goldens showed that
/// a 1-ulp difference here moves logits by ~1% of their range.
#[test]
fn exp_is_bit_identical_to_scalar() {
    let edge = |b: u32| (b - 300..b + 300).map(f32::from_bits);
    let xs: Vec<f32> = (0..=(1 << 20))
        .map(|i| -110.0 + 200.0 * (i as f32 / (1 << 20) as f32))
        .chain(edge(88.72f32.to_bits()))
        .chain(edge((-103.97f32).to_bits()))
        .chain(edge((-87.33f32).to_bits()))
        .chain([
            0.0,
            -0.0,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::MAX,
            f32::MIN,
        ])
        .collect();
    let want: Vec<f32> = xs.iter().map(|&x| fak_kernels::expf::expf(x)).collect();
    for isa in Isa::available() {
        let mut got = xs.clone();
        ops::exp_in_place_with_isa(isa, &mut got);
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{isa}: exp({}) = {g:e}, scalar {w:e}",
                xs[i]
            );
        }
    }
}

#[test]
fn exp_special_values() {
    let cases: [(f32, f32); 9] = [
        (f32::NEG_INFINITY, 0.0),
        (-1000.0, 0.0),
        (-110.0, 0.0),
        (-104.0, 0.0),
        (0.0, 1.0),
        (-0.0, 1.0),
        (88.8, f32::INFINITY),
        (1000.0, f32::INFINITY),
        (f32::INFINITY, f32::INFINITY),
    ];
    for isa in Isa::available() {
        let mut x: Vec<f32> = cases.iter().map(|c| c.0).collect();
        x.push(f32::NAN);
        x.push(88.72);
        ops::exp_in_place_with_isa(isa, &mut x);
        for (&(input, want), &got) in cases.iter().zip(&x) {
            assert_eq!(got, want, "{isa}: exp({input})");
        }
        assert!(x[9].is_nan(), "{isa}: exp(NaN) = {}", x[9]);
        assert!(
            x[10].is_finite() && exp_excess(88.72, x[10]) <= 1.0,
            "{isa}: exp(88.72)"
        );
    }
}

/// Runs every operation on copies of `src` starting `off` floats into a
/// fresh buffer; returns all outputs' bits.
fn run_at_offset(isa: Isa, off: usize, x: &[f32], y: &[f32], h: &[u16]) -> Vec<u32> {
    let n = x.len();
    let place = |v: &[f32]| {
        let mut b = vec![0.0f32; off + n];
        b[off..].copy_from_slice(v);
        b
    };
    let mut hb = vec![0u16; off + n];
    hb[off..].copy_from_slice(h);
    let (xb, yb) = (place(x), place(y));
    let (xs, ys, hs) = (&xb[off..], &yb[off..], &hb[off..]);
    let mut out = vec![attn::dot_f32_f16_with_isa(isa, xs, hs).to_bits()];
    let mut o = place(y);
    attn::axpy_f16_with_isa(isa, 0.3, hs, &mut o[off..]);
    out.extend(bits(&o[off..]));
    ops::rms_norm_with_isa(isa, xs, ys, 1e-5, &mut o[off..]);
    out.extend(bits(&o[off..]));
    let mut o = place(x);
    ops::softmax_with_isa(isa, &mut o[off..]);
    out.extend(bits(&o[off..]));
    let mut o = place(x);
    ops::swiglu_with_isa(isa, &mut o[off..], ys);
    out.extend(bits(&o[off..]));
    let mut o = place(x);
    ops::exp_in_place_with_isa(isa, &mut o[off..]);
    out.extend(bits(&o[off..]));
    out
}

#[test]
fn results_do_not_depend_on_alignment() {
    let mut rng = StdRng::seed_from_u64(7);
    for isa in Isa::available() {
        for n in [7, 64, 65, 577] {
            let x = f32s(&mut rng, n, -10.0, 10.0);
            let y = f32s(&mut rng, n, -2.0, 2.0);
            let h = f16s(&mut rng, n, -2.0, 2.0);
            let base = run_at_offset(isa, 0, &x, &y, &h);
            for off in 1..9 {
                assert_eq!(
                    run_at_offset(isa, off, &x, &y, &h),
                    base,
                    "{isa} n={n} off={off}"
                );
            }
        }
    }
}

#[test]
fn dispatched_functions_use_the_process_isa() {
    let mut rng = StdRng::seed_from_u64(11);
    let n = 100;
    let x = f32s(&mut rng, n, -10.0, 10.0);
    let y = f32s(&mut rng, n, -2.0, 2.0);
    let h = f16s(&mut rng, n, -2.0, 2.0);
    let want = run_at_offset(isa(), 0, &x, &y, &h);
    let mut got = vec![attn::dot_f32_f16(&x, &h).to_bits()];
    let mut o = y.clone();
    attn::axpy_f16(0.3, &h, &mut o);
    got.extend(bits(&o));
    ops::rms_norm(&x, &y, 1e-5, &mut o);
    got.extend(bits(&o));
    let mut o = x.clone();
    ops::softmax(&mut o);
    got.extend(bits(&o));
    let mut o = x.clone();
    ops::swiglu(&mut o, &y);
    got.extend(bits(&o));
    let mut o = x.clone();
    ops::exp_in_place(&mut o);
    got.extend(bits(&o));
    assert_eq!(got, want);
    let mut a = x.clone();
    let mut b = x.clone();
    ops::add_assign(&mut a, &y);
    scalar::add_assign(&mut b, &y);
    assert_eq!(bits(&a), bits(&b));
}

#[test]
fn mismatched_lengths_cover_the_shortest() {
    let mut rng = StdRng::seed_from_u64(13);
    let long = f32s(&mut rng, 70, -2.0, 2.0);
    let h = f16s(&mut rng, 70, -2.0, 2.0);
    for isa in Isa::available() {
        for (a, b) in [(70, 37), (37, 70), (9, 0), (0, 9)] {
            let want = attn::dot_f32_f16_with_isa(isa, &long[..a.min(b)], &h[..a.min(b)]);
            let got = attn::dot_f32_f16_with_isa(isa, &long[..a], &h[..b]);
            assert_eq!(got.to_bits(), want.to_bits(), "{isa} dot {a}/{b}");

            let mut o = long[..b].to_vec();
            attn::axpy_f16_with_isa(isa, 0.5, &h[..a], &mut o);
            let mut w = long[..b].to_vec();
            let m = a.min(b);
            attn::axpy_f16_with_isa(isa, 0.5, &h[..m], &mut w[..m]);
            assert_eq!(bits(&o), bits(&w), "{isa} axpy {a}/{b}");

            let mut g = long[..a].to_vec();
            ops::swiglu_with_isa(isa, &mut g, &long[..b]);
            let mut w = long[..a].to_vec();
            ops::swiglu_with_isa(isa, &mut w[..m], &long[..m]);
            assert_eq!(bits(&g), bits(&w), "{isa} swiglu {a}/{b}");

            let mut g = long[..a].to_vec();
            ops::add_assign_with_isa(isa, &mut g, &long[..b]);
            let mut w = long[..a].to_vec();
            ops::add_assign_with_isa(isa, &mut w[..m], &long[..m]);
            assert_eq!(bits(&g), bits(&w), "{isa} add_assign {a}/{b}");

            let mut o = vec![0.0; b];
            ops::rms_norm_with_isa(isa, &long[..a], &long[..a], 1e-5, &mut o);
            assert!(
                o.iter().all(|v| !v.is_nan()) || a == 0,
                "{isa} rms_norm {a}/{b}"
            );
        }
    }
}

/// Every `f32` whose `e^x` is a normal float (about 2.2e9 inputs), against
/// the f64 reference and against libm `expf`. Slow in debug builds: run
/// with `cargo test --release -p fak-kernels --test ops -- --ignored`.
#[test]
#[ignore]
fn exp_exhaustive_normal_range() {
    let lo = f32::MIN_POSITIVE.ln();
    let hi = f32::MAX.ln();
    for isa in Isa::available() {
        let (mut worst, mut worst_x, mut worst_libm) = (0.0f64, 0.0f32, 0.0f64);
        let mut buf = Vec::with_capacity(1 << 16);
        // Positive inputs up to `hi`, then negative ones down to `lo`.
        for (start, end) in [(0u32, hi.to_bits()), (0x8000_0000, lo.to_bits())] {
            let mut b = start;
            while b <= end {
                buf.clear();
                buf.extend((b..=end.min(b + 0xFFFF)).map(f32::from_bits));
                b = b.saturating_add(0x1_0000);
                let xs = buf.clone();
                ops::exp_in_place_with_isa(isa, &mut buf);
                for (&x, &g) in xs.iter().zip(&buf) {
                    let want = f64::from(x).exp();
                    if !(f64::from(f32::MIN_POSITIVE)..=f64::from(f32::MAX)).contains(&want) {
                        continue; // the rounded ends of the range
                    }
                    let rel = (f64::from(g) - want).abs() / want;
                    if rel > worst {
                        (worst, worst_x) = (rel, x);
                    }
                    let libm = f64::from(x.exp());
                    worst_libm = worst_libm.max((f64::from(g) - libm).abs() / libm);
                    let twin = fak_kernels::expf::expf(x);
                    assert_eq!(
                        g.to_bits(),
                        twin.to_bits(),
                        "{isa}: exp({x}) vs scalar twin"
                    );
                }
            }
        }
        println!(
            "{isa}: worst relative error {worst:e} at x = {worst_x}; vs libm expf {worst_libm:e}"
        );
        assert!(worst <= EXP_REL, "{isa}: {worst:e} at {worst_x}");
    }
}

/// Multi-row value sums equal the single-row twin applied row by row, bit
/// for bit, for the register path (64 wide) and the fallback widths.
#[test]
fn axpy_f16_rows_is_bit_identical_to_scalar_rows() {
    for isa in Isa::available() {
        for seed in seeds() {
            let mut rng = StdRng::seed_from_u64(seed);
            for (n, stride, off) in [(64, 192, 64), (64, 64, 0), (13, 20, 3), (0, 4, 0)] {
                for n_rows in [0usize, 1, 7, 16, 33] {
                    let w = f32s(&mut rng, n_rows, -1.0, 1.0);
                    let len = off + n_rows.saturating_sub(1) * stride + n;
                    let v = f16s(&mut rng, len.max(1), -3.0, 3.0);
                    let out0 = f32s(&mut rng, n, -2.0, 2.0);
                    let mut got = out0.clone();
                    attn::axpy_f16_rows_with_isa(isa, &w, &v[off..], stride, n_rows, &mut got);
                    let mut want = out0.clone();
                    for (r, &wr) in w.iter().enumerate() {
                        let s = off + r * stride;
                        attn::scalar::axpy_f16(wr, &v[s..s + n], &mut want);
                    }
                    assert_eq!(
                        bits(&got),
                        bits(&want),
                        "{isa} n={n} rows={n_rows} seed={seed}"
                    );
                }
            }
        }
    }
}
