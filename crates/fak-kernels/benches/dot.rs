//! Micro-benchmark: nanoseconds per dot-product call, scalar vs every SIMD
//! ISA this CPU has, for model-shaped rows (Qwen2.5-0.5B: 896-wide hidden
//! rows, 4864-wide FFN rows).
//!
//! Run with `cargo bench -p fak-kernels --bench dot`. No external harness:
//! each case is timed over enough calls to take ~0.2 s, best of 3.

mod common;

use std::hint::black_box;

use common::{row, time_per_call};
use fak_gguf::GgmlType;
use fak_kernels::{quantize_row_to_vec, vec_dot_type, vec_dot_with_isa, Isa};

fn main() -> Result<(), fak_kernels::KernelError> {
    let cases = [
        (GgmlType::Q8_0, 896),
        (GgmlType::Q8_0, 4864),
        (GgmlType::Q8_0, 32),
        (GgmlType::Q4_0, 896),
        (GgmlType::Q4_1, 576),
        (GgmlType::Q5_0, 896),
        (GgmlType::Q4_K, 4864),
        (GgmlType::Q5_K, 4864),
        (GgmlType::Q6_K, 4864),
        (GgmlType::F16, 896),
    ];
    println!("{:<6} {:>6} {:>8} {:>12}", "type", "n", "isa", "ns/call");
    for (ty, n) in cases {
        let w = quantize_row_to_vec(ty, &row(n, 1))?;
        let a = quantize_row_to_vec(vec_dot_type(ty), &row(n, 2))?;
        for isa in Isa::available() {
            let dt = time_per_call(|| {
                vec_dot_with_isa(isa, ty, n, black_box(&w), black_box(&a)).unwrap_or(f32::NAN)
            });
            println!("{ty:<6} {n:>6} {isa:>8} {:>12.1}", dt.as_secs_f64() * 1e9);
        }
    }
    Ok(())
}
