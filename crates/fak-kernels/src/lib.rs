//! Block formats and scalar reference kernels for fak.
//!
//! A tensor row of a ggml type is a run of fixed-size blocks (see
//! [`fak_gguf::GgmlType`] for the geometry, [`blocks`] for the byte
//! layouts). This crate converts rows between `f32` and those formats and
//! takes dot products of weight rows with quantized activation rows:
//!
//! ```text
//!            quantize_row                 vec_dot(ty, n, w, a)
//!   f32 row ─────────────► a: vec_dot_type(ty) ──┐
//!                                                ├─► f32
//!   weights (file, any type ty) ──── w ──────────┘
//!            ▲
//!            └─ dequantize_row ─► f32 row (embeddings, norms)
//! ```
//!
//! * [`dequantize_row`] and [`quantize_row`] are bit-identical to ggml's
//!   `dequantize_row_*` and reference quantizers (`quantize_row_*_ref`, i.e.
//!   `ggml_quantize_chunk` without an importance matrix); this is checked
//!   against a fixture generated with llama.cpp's own library
//!   (`bench/peers/gen_quant_fixture.py`).
//! * [`vec_dot`] and the per-type `vec_dot_*` functions run on the kernels
//!   of the process-wide [`isa()`] (detected once; `FAK_ISA=scalar|avx2|avx512`
//!   forces a path). The scalar references in [`scalar`] follow ggml's
//!   generic kernels: exact integer sums per block, then float scaling in
//!   ggml's operation order. The SIMD twins (`simd`: AVX2+FMA+F16C for
//!   every weight type with a dot product) compute the same integer sums
//!   and differ only in the order of the float accumulation. A result
//!   depends only on the inputs and the ISA.
//! * The activation quantizers for Q8_0, Q8_1 and Q8_K have SIMD twins that
//!   are bit-identical to the scalar code.
//!
//! Nothing here panics on input: every slice length is checked against the
//! type's geometry first, and a mismatch is a [`KernelError`].

pub mod attn;
pub mod blocks;
mod dequant;
mod dispatch;
mod dot;
mod dot_k;
mod dot_rows;
mod error;
pub mod expf;
mod grid;

pub mod fp;
pub mod gemm;
pub mod isa;
pub mod ops;
pub mod packed;
pub mod peak;
pub mod pool;
mod quant;
mod quant_iq;
mod quant_k;
mod quant_tq;
mod simd;

/// The scalar reference dot products (ggml's generic kernel order), which
/// the SIMD kernels are tested against; same signatures as the dispatched
/// functions at the crate root.
pub mod scalar {
    pub use crate::dot::{
        vec_dot, vec_dot_bf16, vec_dot_f16, vec_dot_f32, vec_dot_iq4_nl_q8_0, vec_dot_mxfp4_q8_0,
        vec_dot_nvfp4_q8_0, vec_dot_q1_0_q8_0, vec_dot_q4_0_q8_0, vec_dot_q4_1_q8_1,
        vec_dot_q5_0_q8_0, vec_dot_q5_1_q8_1, vec_dot_q8_0_q8_0,
    };
    pub use crate::dot_k::{
        vec_dot_iq4_xs_q8_k, vec_dot_q2_k_q8_k, vec_dot_q3_k_q8_k, vec_dot_q4_k_q8_k,
        vec_dot_q5_k_q8_k, vec_dot_q6_k_q8_k, vec_dot_q8_k_q8_k,
    };
    pub use crate::grid::vec_dot_grid_q8_k;
}

pub use dequant::{can_dequantize, dequantize_row, dequantize_row_to_vec};
pub use dispatch::{
    vec_dot, vec_dot_bf16, vec_dot_f16, vec_dot_f32, vec_dot_iq4_nl_q8_0, vec_dot_iq4_xs_q8_k,
    vec_dot_mxfp4_q8_0, vec_dot_nvfp4_q8_0, vec_dot_q1_0_q8_0, vec_dot_q2_k_q8_k,
    vec_dot_q3_k_q8_k, vec_dot_q4_0_q8_0, vec_dot_q4_1_q8_1, vec_dot_q4_k_q8_k, vec_dot_q5_0_q8_0,
    vec_dot_q5_1_q8_1, vec_dot_q5_k_q8_k, vec_dot_q6_k_q8_k, vec_dot_q8_0_q8_0, vec_dot_q8_k_q8_k,
    vec_dot_with_isa,
};
pub use dot_rows::{can_vec_dot, vec_dot_type};
pub use error::{KernelError, Op, Operand};
pub use isa::{detected_isa_features, isa, parse_isa, Isa};
pub use quant::{
    can_quantize, quantize_acts, quantize_acts_with_isa, quantize_row, quantize_row_to_vec,
    quantize_row_with_isa,
};
