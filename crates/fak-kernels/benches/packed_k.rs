//! Micro-benchmark: packed k-quant (and Q8_0, Q4_0, Q4_1, Q5_1, IQ4_NL, IQ4_XS) products at Qwen2.5-1.5B's
//! row lengths, for every SIMD ISA this CPU has, on one thread:
//!
//! * one token against matrices larger than any cache (decode), as weight
//!   bytes read per second: compare with `fak bench bandwidth --threads 1`;
//! * 8 tokens against such matrices (a fleet's decode step), the same way;
//! * 64 tokens against a matrix that fits in L3 (prefill), as multiply-adds
//!   per second: compare with `fak bench peak --threads 1`.
//!
//! The `rows` cases run the same products on the GGUF rows as they are,
//! through [`fak_kernels::gemm::gemm_with_isa`] (the path of a weight type
//! without a packed layout), their rate counted in GGUF bytes.
//!
//! Run with `cargo bench -p fak-kernels --bench packed_k`. Each case is
//! timed over enough calls to take ~0.3 s, best of 3.
//!
//! `cargo bench -p fak-kernels --bench packed_k -- q6_k` runs only the
//! cases whose name contains `q6_k`. `-- widths` (`-- widths q5_k`: one
//! matrix) instead sweeps
//! 1–9, 12 and 16 tokens against the DRAM-sized Q4_K, Q5_K, Q6_K, Q4_0,
//! IQ4_XS, Q2_K and Q3_K matrices:
//! the products of a pass verifying a draft, whose cost against one token
//! bounds speculative decoding (`fak bench verify` times whole passes).

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use common::row;
use fak_gguf::GgmlType;
use fak_kernels::gemm::gemm_with_isa;
use fak_kernels::packed::{packed_gemm_with_isa, PackedFormat, PackedMatrix};
use fak_kernels::{quantize_row_to_vec, Isa, KernelError};

/// How a case reports its rate.
#[derive(Clone, Copy)]
enum Rate {
    /// Weight bytes read per second.
    Bytes,
    /// Multiply-adds per second.
    Macs,
}

/// The weight and activation types of `format`.
fn types(format: PackedFormat) -> (GgmlType, GgmlType) {
    match format {
        PackedFormat::Q8_0 => (GgmlType::Q8_0, GgmlType::Q8_0),
        PackedFormat::Q4K => (GgmlType::Q4_K, GgmlType::Q8_K),
        PackedFormat::Q5K => (GgmlType::Q5_K, GgmlType::Q8_K),
        PackedFormat::Q4_0 => (GgmlType::Q4_0, GgmlType::Q8_0),
        PackedFormat::Q4_1 => (GgmlType::Q4_1, GgmlType::Q8_1),
        PackedFormat::Q5_1 => (GgmlType::Q5_1, GgmlType::Q8_1),
        PackedFormat::IQ4NL => (GgmlType::IQ4_NL, GgmlType::Q8_0),
        PackedFormat::IQ4XS => (GgmlType::IQ4_XS, GgmlType::Q8_K),
        PackedFormat::Q2K => (GgmlType::Q2_K, GgmlType::Q8_K),
        PackedFormat::Q3K => (GgmlType::Q3_K, GgmlType::Q8_K),
        _ => (GgmlType::Q6_K, GgmlType::Q8_K),
    }
}

/// A benchmarked weight matrix: packed, or its GGUF rows as they are.
enum Matrix {
    /// The packed layout.
    Packed(PackedMatrix),
    /// GGUF rows of `format`'s weight type, `[rows, n]`.
    Rows {
        format: PackedFormat,
        w: Vec<u8>,
        rows: usize,
        n: usize,
    },
}

impl Matrix {
    fn format(&self) -> PackedFormat {
        match self {
            Matrix::Packed(m) => m.format(),
            Matrix::Rows { format, .. } => *format,
        }
    }

    fn shape(&self) -> (usize, usize) {
        match self {
            Matrix::Packed(m) => (m.rows(), m.n()),
            Matrix::Rows { rows, n, .. } => (*rows, *n),
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Matrix::Packed(m) => m.bytes(),
            Matrix::Rows { w, .. } => w.len(),
        }
    }

    /// `n_tok` tokens `a` against every row, into `out` (`[n_tok, rows]`).
    fn product(
        &self,
        isa: Isa,
        (a, n_tok): (&[u8], usize),
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        match self {
            Matrix::Packed(m) => {
                packed_gemm_with_isa(isa, m, 0..m.rows(), (a, n_tok), out, m.rows())
            }
            Matrix::Rows { format, w, rows, n } => {
                gemm_with_isa(isa, format.ty(), *n, w, *rows, a, n_tok, out, *rows)
            }
        }
    }
}

/// A packed `[rows, n]` matrix of `distinct` different rows, repeated (the
/// bytes stream from DRAM all the same).
fn matrix(
    format: PackedFormat,
    rows: usize,
    n: usize,
    distinct: usize,
) -> Result<PackedMatrix, KernelError> {
    PackedMatrix::pack(format, &gguf_rows(format, rows, n, distinct)?, rows, n)
}

/// The GGUF rows of [`matrix`].
fn gguf_rows(
    format: PackedFormat,
    rows: usize,
    n: usize,
    distinct: usize,
) -> Result<Vec<u8>, KernelError> {
    let ty = types(format).0;
    let cycle: Vec<Vec<u8>> = (0..distinct.min(rows))
        .map(|r| quantize_row_to_vec(ty, &row(n, r as u64 + 1)))
        .collect::<Result<_, _>>()?;
    let mut w = Vec::with_capacity(rows * cycle[0].len());
    for r in 0..rows {
        w.extend_from_slice(&cycle[r % cycle.len()]);
    }
    Ok(w)
}

/// Times `n_tok` tokens against `m` on every SIMD ISA and prints the rate.
fn run(name: &str, m: &Matrix, n_tok: usize, rate: Rate) -> Result<(), KernelError> {
    let (rows, n) = m.shape();
    let mut a = Vec::new();
    for t in 0..n_tok {
        a.extend(quantize_row_to_vec(
            types(m.format()).1,
            &row(n, 1000 + t as u64),
        )?);
    }
    let mut out = vec![0f32; rows * n_tok];
    for isa in Isa::ALL
        .into_iter()
        .filter(|i| *i != Isa::Scalar && i.is_available())
    {
        let mut best = Duration::MAX;
        for _ in 0..3 {
            let mut calls = 0u32;
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_millis(300) {
                m.product(isa, (&a, n_tok), &mut out)?;
                black_box(&out);
                calls += 1;
            }
            best = best.min(t0.elapsed() / calls);
        }
        let s = best.as_secs_f64();
        let (value, unit) = match rate {
            Rate::Bytes => (m.bytes() as f64 / s / 1e9, "GB/s"),
            Rate::Macs => ((rows * n * n_tok) as f64 / s / 1e9, "GMAC/s"),
        };
        println!("{name:32} {isa:>7}: {:8.1} us  {value:6.2} {unit}", s * 1e6);
    }
    Ok(())
}

/// The `widths` sweep (see the module docs), of the matrices whose name
/// contains one of `filter` (all if it is empty).
fn widths(filter: &[String]) -> Result<(), KernelError> {
    for (name, format, rows, n) in [
        ("q4_k [131072 x 1536]", PackedFormat::Q4K, 131072, 1536),
        ("q5_k [131072 x 1536]", PackedFormat::Q5K, 131072, 1536),
        ("q6_k [65536 x 1536]", PackedFormat::Q6K, 65536, 1536),
        ("q4_0 [131072 x 1536]", PackedFormat::Q4_0, 131072, 1536),
        ("iq4_xs [131072 x 1536]", PackedFormat::IQ4XS, 131072, 1536),
        ("q2_k [131072 x 1536]", PackedFormat::Q2K, 131072, 1536),
        ("q3_k [131072 x 1536]", PackedFormat::Q3K, 131072, 1536),
    ] {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let m = Matrix::Packed(matrix(format, rows, n, 64)?);
        for n_tok in [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16] {
            run(&format!("{name} x {n_tok} tok"), &m, n_tok, Rate::Bytes)?;
        }
    }
    Ok(())
}

fn main() -> Result<(), KernelError> {
    use PackedFormat::{IQ4NL, IQ4XS, Q2K, Q3K, Q4K, Q4_0, Q4_1, Q5K, Q5_1, Q6K, Q8_0};
    // Any other argument (not a cargo flag) keeps only the cases whose name
    // contains it.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-') && a != "widths")
        .collect();
    if std::env::args().any(|a| a == "widths") {
        return widths(&filter);
    }
    // (name, format, rows, n, tokens, rate). Rows as long as the 1.5B's
    // (1536 values: attention, FFN up/gate, the output head; 8960: FFN
    // down); the DRAM cases have 80-190 MB, the last of them the 1.5B's
    // whole Q6_K output head; the prefill cases fit in L3. Names with
    // `rows` run unpacked (module docs).
    let cases = [
        ("q4_k [131072 x 1536]", Q4K, 131072, 1536, 1, Rate::Bytes),
        ("q4_k [16384 x 8960]", Q4K, 16384, 8960, 1, Rate::Bytes),
        ("q5_k [131072 x 1536]", Q5K, 131072, 1536, 1, Rate::Bytes),
        (
            "q5_k rows [131072 x 1536]",
            Q5K,
            131072,
            1536,
            1,
            Rate::Bytes,
        ),
        ("q5_k [16384 x 8960]", Q5K, 16384, 8960, 1, Rate::Bytes),
        ("q6_k [16384 x 8960]", Q6K, 16384, 8960, 1, Rate::Bytes),
        (
            "q6_k output [151936 x 1536]",
            Q6K,
            151936,
            1536,
            1,
            Rate::Bytes,
        ),
        (
            "q8_0 [65536 x 1536] x 8 tok",
            Q8_0,
            65536,
            1536,
            8,
            Rate::Bytes,
        ),
        (
            "q4_k [131072 x 1536] x 8 tok",
            Q4K,
            131072,
            1536,
            8,
            Rate::Bytes,
        ),
        (
            "q5_k [131072 x 1536] x 8 tok",
            Q5K,
            131072,
            1536,
            8,
            Rate::Bytes,
        ),
        (
            "q5_k rows [131072 x 1536] x 8 tok",
            Q5K,
            131072,
            1536,
            8,
            Rate::Bytes,
        ),
        (
            "q4_k [2048 x 1536] x 64 tok",
            Q4K,
            2048,
            1536,
            64,
            Rate::Macs,
        ),
        (
            "q5_k [2048 x 1536] x 64 tok",
            Q5K,
            2048,
            1536,
            64,
            Rate::Macs,
        ),
        (
            "q5_k rows [2048 x 1536] x 64 tok",
            Q5K,
            2048,
            1536,
            64,
            Rate::Macs,
        ),
        (
            "q6_k [2048 x 1536] x 64 tok",
            Q6K,
            2048,
            1536,
            64,
            Rate::Macs,
        ),
        ("q4_k [512 x 8960] x 64 tok", Q4K, 512, 8960, 64, Rate::Macs),
        (
            "q4_0 [2048 x 1536] x 64 tok",
            Q4_0,
            2048,
            1536,
            64,
            Rate::Macs,
        ),
        (
            "q4_1 [2048 x 1536] x 64 tok",
            Q4_1,
            2048,
            1536,
            64,
            Rate::Macs,
        ),
        (
            "q5_1 [2048 x 1536] x 64 tok",
            Q5_1,
            2048,
            1536,
            64,
            Rate::Macs,
        ),
        (
            "q5_1 rows [2048 x 1536] x 64 tok",
            Q5_1,
            2048,
            1536,
            64,
            Rate::Macs,
        ),
        (
            "iq4_nl [2048 x 1536] x 64 tok",
            IQ4NL,
            2048,
            1536,
            64,
            Rate::Macs,
        ),
        (
            "iq4_xs [2048 x 1536] x 64 tok",
            IQ4XS,
            2048,
            1536,
            64,
            Rate::Macs,
        ),
        (
            "iq4_xs [512 x 8960] x 64 tok",
            IQ4XS,
            512,
            8960,
            64,
            Rate::Macs,
        ),
        (
            "q2_k [2048 x 1536] x 64 tok",
            Q2K,
            2048,
            1536,
            64,
            Rate::Macs,
        ),
        (
            "q2_k rows [2048 x 1536] x 64 tok",
            Q2K,
            2048,
            1536,
            64,
            Rate::Macs,
        ),
        ("q2_k [131072 x 1536]", Q2K, 131072, 1536, 1, Rate::Bytes),
        (
            "q2_k rows [131072 x 1536]",
            Q2K,
            131072,
            1536,
            1,
            Rate::Bytes,
        ),
        (
            "q3_k [2048 x 1536] x 64 tok",
            Q3K,
            2048,
            1536,
            64,
            Rate::Macs,
        ),
        (
            "q3_k rows [2048 x 1536] x 64 tok",
            Q3K,
            2048,
            1536,
            64,
            Rate::Macs,
        ),
        ("q3_k [131072 x 1536]", Q3K, 131072, 1536, 1, Rate::Bytes),
        (
            "q3_k rows [131072 x 1536]",
            Q3K,
            131072,
            1536,
            1,
            Rate::Bytes,
        ),
    ];
    for (name, format, rows, n, n_tok, rate) in cases {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        // 64 distinct rows for the DRAM cases; every row distinct in cache.
        let distinct = match rate {
            Rate::Bytes => 64,
            Rate::Macs => rows,
        };
        let m = if name.contains(" rows ") {
            Matrix::Rows {
                format,
                w: gguf_rows(format, rows, n, distinct)?,
                rows,
                n,
            }
        } else {
            Matrix::Packed(matrix(format, rows, n, distinct)?)
        };
        run(name, &m, n_tok, rate)?;
    }
    Ok(())
}
