//! Micro-benchmark: one-token packed k-quant products (decode's matrix
//! products) at Qwen2.5-1.5B's shapes, as weight bytes read per second, for
//! every ISA this CPU has, on one thread.
//!
//! Run with `cargo bench -p fak-kernels --bench packed_k`. Each case is
//! timed over enough calls to take ~0.3 s, best of 3. The matrices are
//! larger than any cache, so the rate is the kernel's streaming rate:
//! compare it with `fak bench bandwidth --threads 1`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use fak_gguf::GgmlType;
use fak_kernels::packed::{packed_gemm_with_isa, PackedFormat, PackedMatrix};
use fak_kernels::{quantize_row_to_vec, Isa};

/// A deterministic pseudo-random f32 row in `-1..1` (xorshift).
fn row(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn main() -> Result<(), fak_kernels::KernelError> {
    // (name, format, rows, n): rows as long as the 1.5B's (1536 values:
    // attention, FFN up/gate, the output head; 8960: FFN down), with enough
    // of them (80-190 MB) that no cache holds the matrix. The last is the
    // 1.5B's whole Q6_K output head.
    let cases = [
        ("q4_k [131072 x 1536]", PackedFormat::Q4K, 131072, 1536),
        ("q4_k [16384 x 8960]", PackedFormat::Q4K, 16384, 8960),
        ("q6_k [16384 x 8960]", PackedFormat::Q6K, 16384, 8960),
        (
            "q6_k output [151936 x 1536]",
            PackedFormat::Q6K,
            151936,
            1536,
        ),
    ];
    for (name, format, rows, n) in cases {
        let ty = match format {
            PackedFormat::Q4K => GgmlType::Q4_K,
            _ => GgmlType::Q6_K,
        };
        // 64 distinct rows, repeated: the bytes stream from DRAM all the same.
        let distinct: Vec<Vec<u8>> = (0..64)
            .map(|r| quantize_row_to_vec(ty, &row(n, r as u64 + 1)))
            .collect::<Result<_, _>>()?;
        let mut w = Vec::with_capacity(rows * distinct[0].len());
        for r in 0..rows {
            w.extend_from_slice(&distinct[r % 64]);
        }
        let m = PackedMatrix::pack(format, &w, rows, n)?;
        drop(w);
        let a = quantize_row_to_vec(GgmlType::Q8_K, &row(n, 99))?;
        let mut out = vec![0f32; rows];
        for isa in Isa::ALL.iter().copied().filter(|i| i.is_available()) {
            let mut best = Duration::MAX;
            for _ in 0..3 {
                let mut calls = 0u32;
                let t0 = Instant::now();
                while t0.elapsed() < Duration::from_millis(300) {
                    packed_gemm_with_isa(isa, &m, 0..rows, (&a, 1), &mut out, rows)?;
                    black_box(&out);
                    calls += 1;
                }
                best = best.min(t0.elapsed() / calls);
            }
            let gbs = m.bytes() as f64 / best.as_secs_f64() / 1e9;
            println!(
                "{name:32} {isa:>7}: {:8.1} us  {gbs:6.2} GB/s",
                best.as_secs_f64() * 1e6
            );
        }
    }
    // A fleet's decode step: 8 tokens against a matrix larger than any
    // cache, as weight bytes read per second.
    for (name, format, rows, n) in [
        (
            "q8_0 [65536 x 1536] x 8 tok",
            PackedFormat::Q8_0,
            65536,
            1536,
        ),
        (
            "q4_k [131072 x 1536] x 8 tok",
            PackedFormat::Q4K,
            131072,
            1536,
        ),
    ] {
        let (ty, aty) = match format {
            PackedFormat::Q8_0 => (GgmlType::Q8_0, GgmlType::Q8_0),
            _ => (GgmlType::Q4_K, GgmlType::Q8_K),
        };
        let distinct: Vec<Vec<u8>> = (0..64)
            .map(|r| quantize_row_to_vec(ty, &row(n, r as u64 + 1)))
            .collect::<Result<_, _>>()?;
        let mut w = Vec::with_capacity(rows * distinct[0].len());
        for r in 0..rows {
            w.extend_from_slice(&distinct[r % 64]);
        }
        let m = PackedMatrix::pack(format, &w, rows, n)?;
        drop(w);
        let mut a = Vec::new();
        for t in 0..8 {
            a.extend(quantize_row_to_vec(aty, &row(n, 500 + t as u64))?);
        }
        let mut out = vec![0f32; rows * 8];
        for isa in Isa::ALL
            .iter()
            .copied()
            .filter(|i| *i != Isa::Scalar && i.is_available())
        {
            let mut best = Duration::MAX;
            for _ in 0..3 {
                let mut calls = 0u32;
                let t0 = Instant::now();
                while t0.elapsed() < Duration::from_millis(300) {
                    packed_gemm_with_isa(isa, &m, 0..rows, (&a, 8), &mut out, rows)?;
                    black_box(&out);
                    calls += 1;
                }
                best = best.min(t0.elapsed() / calls);
            }
            let gbs = m.bytes() as f64 / best.as_secs_f64() / 1e9;
            println!(
                "{name:32} {isa:>7}: {:8.1} us  {gbs:6.2} GB/s",
                best.as_secs_f64() * 1e6
            );
        }
    }
    // Prefill: 64 tokens against a matrix that fits in L3 (the first rows
    // of a 1.5B-shaped one), as multiply-adds per second; compare with
    // `fak bench peak --threads 1`.
    const T: usize = 64;
    for (name, format, rows, n) in [
        ("q4_k [2048 x 1536] x 64 tok", PackedFormat::Q4K, 2048, 1536),
        ("q6_k [2048 x 1536] x 64 tok", PackedFormat::Q6K, 2048, 1536),
        ("q4_k [512 x 8960] x 64 tok", PackedFormat::Q4K, 512, 8960),
    ] {
        let ty = match format {
            PackedFormat::Q4K => GgmlType::Q4_K,
            _ => GgmlType::Q6_K,
        };
        let mut w = Vec::new();
        for r in 0..rows {
            w.extend(quantize_row_to_vec(ty, &row(n, r as u64 + 1))?);
        }
        let m = PackedMatrix::pack(format, &w, rows, n)?;
        let mut a = Vec::new();
        for t in 0..T {
            a.extend(quantize_row_to_vec(
                GgmlType::Q8_K,
                &row(n, 1000 + t as u64),
            )?);
        }
        let mut out = vec![0f32; rows * T];
        for isa in Isa::ALL
            .iter()
            .copied()
            .filter(|i| *i != Isa::Scalar && i.is_available())
        {
            let mut best = Duration::MAX;
            for _ in 0..3 {
                let mut calls = 0u32;
                let t0 = Instant::now();
                while t0.elapsed() < Duration::from_millis(300) {
                    packed_gemm_with_isa(isa, &m, 0..rows, (&a, T), &mut out, rows)?;
                    black_box(&out);
                    calls += 1;
                }
                best = best.min(t0.elapsed() / calls);
            }
            let gmacs = (rows * n * T) as f64 / best.as_secs_f64() / 1e9;
            println!(
                "{name:32} {isa:>7}: {:8.1} us  {gmacs:6.1} GMAC/s",
                best.as_secs_f64() * 1e6
            );
        }
    }
    Ok(())
}
