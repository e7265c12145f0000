//! Single-thread timing of `gemm` against one `vec_dot` per element.
//!
//! `cargo run --release -p fak-kernels --example gemm_speed`
//!
//! Per type: a `[rows x n]` weight matrix times `toks` quantized activation
//! rows (prefill), and times one row (decode); median of 9 runs each.
//! `GEMM_SPEED_ONLY=q6_k` (a type name) runs one type;
//! `GEMM_SPEED_SHAPE=1536,576,512` (rows, n, tokens) runs that shape
//! instead of the built-in list (several: `1536,576,8;576,1536,8`).

use std::time::Instant;

use fak_gguf::GgmlType;
use fak_kernels::fp::f32_to_f16;
use fak_kernels::gemm::gemm;
use fak_kernels::packed::{packed_gemm, PackedFormat, PackedMatrix};
use fak_kernels::{quantize_row_to_vec, vec_dot, vec_dot_type};

/// Deterministic values in roughly [-1, 1).
fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1664525).wrapping_add(1013904223);
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// Random-looking weight bytes with sane f16 scales for `ty`.
fn weights(ty: GgmlType, rows: usize, n: usize) -> Vec<u8> {
    if matches!(ty, GgmlType::Q8_0 | GgmlType::F16 | GgmlType::BF16) {
        return quantize_row_to_vec(ty, &values(rows * n, 3)).expect("q8_0, f16, bf16 weights");
    }
    let bytes = ty.row_bytes((rows * n) as u64).expect("whole blocks") as usize;
    let mut w: Vec<u8> = values(bytes, 5)
        .iter()
        .map(|v| (v * 127.0) as i8 as u8)
        .collect();
    let (ts, fields): (usize, &[usize]) = match ty {
        GgmlType::Q4_K => (144, &[0, 2]),
        GgmlType::Q5_K => (176, &[0, 2]),
        GgmlType::Q6_K => (210, &[208]),
        GgmlType::Q2_K => (84, &[80, 82]),
        GgmlType::Q3_K => (110, &[108]),
        GgmlType::Q4_1 => (20, &[0, 2]),
        GgmlType::Q5_1 => (24, &[0, 2]),
        _ => (ty.type_size(), &[0]),
    };
    let scale = f32_to_f16(0.01).to_le_bytes();
    for block in w.chunks_exact_mut(ts) {
        for &off in fields {
            block[off..off + 2].copy_from_slice(&scale);
        }
    }
    w
}

/// Median of 9 timings of `f`, in milliseconds per call. Each timing
/// repeats `f` for about 5 ms (a small product takes well under 0.1 ms,
/// too short for one call to time steadily on a shared VM).
fn median_ms(mut f: impl FnMut()) -> f64 {
    let s = Instant::now();
    f();
    let once = s.elapsed().as_secs_f64();
    let reps = (5e-3 / once.max(1e-7)).ceil().clamp(1.0, 10_000.0) as usize;
    let mut t: Vec<f64> = (0..9)
        .map(|_| {
            let s = Instant::now();
            for _ in 0..reps {
                f();
            }
            s.elapsed().as_secs_f64() * 1e3 / reps as f64
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[4]
}

fn bench(ty: GgmlType, rows: usize, n: usize, toks: usize) {
    // `GEMM_SPEED_ONLY=q6_k` runs one type.
    if let Ok(only) = std::env::var("GEMM_SPEED_ONLY") {
        if only != format!("{ty}") {
            return;
        }
    }
    let w = weights(ty, rows, n);
    let aty = vec_dot_type(ty);
    let a: Vec<u8> = (0..toks)
        .flat_map(|t| quantize_row_to_vec(aty, &values(n, 11 + t as u32)).expect("acts"))
        .collect();
    let (wrb, arb) = (w.len() / rows, a.len() / toks);
    for nt in [toks, 1] {
        let mut out = vec![0.0f32; nt * rows];
        let old = median_ms(|| {
            for t in 0..nt {
                for j in 0..rows {
                    out[t * rows + j] = vec_dot(
                        ty,
                        n,
                        &w[j * wrb..(j + 1) * wrb],
                        &a[t * arb..(t + 1) * arb],
                    )
                    .expect("vec_dot");
                }
            }
        });
        let want = out.clone();
        let new = median_ms(|| {
            gemm(ty, n, &w, rows, &a[..nt * arb], nt, &mut out, rows).expect("gemm");
        });
        let same = out
            .iter()
            .zip(&want)
            .all(|(x, y)| x.to_bits() == y.to_bits());
        println!(
            "{ty:>5} [{rows} x {n}] x {nt:>3} tok: vec_dot loop {old:8.3} ms, gemm {new:8.3} ms, \
             speedup {:5.2}x, bit-identical: {same}",
            old / new
        );
        if let Some(format) = PackedFormat::of(ty) {
            let p = PackedMatrix::pack(format, &w, rows, n).expect("pack");
            let packed = median_ms(|| {
                packed_gemm(&p, 0..rows, (&a[..nt * arb], nt), &mut out, rows).expect("packed");
            });
            let macs = (rows * n * nt) as f64;
            println!(
                "{ty:>5} [{rows} x {n}] x {nt:>3} tok: packed    {packed:8.3} ms \
                 ({:.1} GMAC/s; gemm {:.1}), {:5.2}x gemm",
                macs / packed / 1e6,
                macs / new / 1e6,
                new / packed
            );
        }
    }
}

fn main() {
    println!("isa: {:?}", fak_kernels::isa());
    if let Ok(shapes) = std::env::var("GEMM_SPEED_SHAPE") {
        for shape in shapes.split(';') {
            let v: Vec<usize> = shape
                .split(',')
                .filter_map(|x| x.trim().parse().ok())
                .collect();
            let [rows, n, toks] = v[..] else {
                eprintln!("GEMM_SPEED_SHAPE must be rows,n,tokens[;rows,n,tokens...]");
                std::process::exit(2);
            };
            for ty in [
                GgmlType::Q8_0,
                GgmlType::Q4_K,
                GgmlType::Q5_K,
                GgmlType::Q6_K,
                GgmlType::Q2_K,
                GgmlType::Q3_K,
                GgmlType::Q5_0,
                GgmlType::Q4_0,
                GgmlType::Q4_1,
                GgmlType::Q5_1,
                GgmlType::IQ3_XXS,
                GgmlType::IQ2_XXS,
                GgmlType::IQ1_S,
                GgmlType::F16,
                GgmlType::BF16,
            ] {
                bench(ty, rows, n, toks);
            }
        }
        return;
    }
    bench(GgmlType::Q8_0, 1536, 576, 256);
    bench(GgmlType::Q8_0, 576, 1536, 128);
    bench(GgmlType::Q8_0, 49152, 576, 1);
    bench(GgmlType::Q4_K, 4864, 1024, 64);
    bench(GgmlType::Q5_K, 4864, 1024, 64);
    bench(GgmlType::Q6_K, 896, 4864, 64);
    bench(GgmlType::Q5_0, 896, 896, 64);
    bench(GgmlType::Q4_0, 1536, 576, 256);
    bench(GgmlType::Q4_1, 1536, 576, 256);
}
