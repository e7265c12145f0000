//! SIMD twins of the scalar dot products, and the switch that runs the one
//! belonging to an [`Isa`].
//!
//! ```text
//!   dispatch::vec_dot ──► check lengths ──► run(isa, kernel, w, a)
//!                                              ├─ Scalar           → None (caller uses scalar)
//!                                              ├─ Avx2             → avx2::dot_*
//!                                              └─ Avx512           → avx2::dot_* (no 512-bit twins yet)
//!   (non-x86_64 builds: always None)
//! ```
//!
//! The activation quantizers have AVX2 twins too (`quant_8bit`,
//! `absmax_256`, `quant_q8_k_quants`); unlike the dot products they are
//! bit-identical to the scalar code, so which one runs never shows.
//!
//! Which code runs depends only on the [`Isa`] and the [`Kernel`], never on
//! the data, so a result is a function of (inputs, ISA) alone.

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2_blocks;
#[cfg(target_arch = "x86_64")]
pub(crate) mod gemm_avx2;
#[cfg(target_arch = "x86_64")]
mod gemm_bf16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod gemm_half;
#[cfg(target_arch = "x86_64")]
pub(crate) mod grid_avx2;

#[cfg(target_arch = "x86_64")]
pub(crate) mod ops_avx2;
#[cfg(target_arch = "x86_64")]
pub(crate) mod ops_avx512;
#[cfg(target_arch = "x86_64")]
mod quant_avx2;
#[cfg(target_arch = "x86_64")]
mod sub_avx2;

use fak_gguf::GgmlType;

use crate::blocks::GridFormat;
use crate::isa::Isa;

#[cfg(test)]
mod tests;

/// The dot products that have SIMD twins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// Q8_0 · Q8_0.
    Q8_0,
    /// Q4_0 · Q8_0.
    Q4_0,
    /// Q4_1 · Q8_1.
    Q4_1,
    /// Q5_0 · Q8_0.
    Q5_0,
    /// IQ4_NL · Q8_0.
    IQ4NL,
    /// IQ4_XS · Q8_K.
    IQ4XS,
    /// MXFP4 · Q8_0.
    MXFP4,
    /// NVFP4 · Q8_0 (per-element dots, `sub_avx2`).
    NVFP4,
    /// Q1_0 · Q8_0 (per-element dots, `sub_avx2`).
    Q1_0,
    /// Q2_K · Q8_K.
    Q2K,
    /// Q3_K · Q8_K.
    Q3K,
    /// Q4_K · Q8_K.
    Q4K,
    /// Q5_K · Q8_K.
    Q5K,
    /// Q6_K · Q8_K.
    Q6K,
    /// Q5_1 · Q8_1.
    Q5_1,
    /// Q8_K · Q8_K.
    Q8K,
    /// F16 · F16.
    F16,
    /// F32 · F32.
    F32,
    /// BF16 · BF16.
    BF16,
    /// A codebook format (IQ1_*, IQ2_*, IQ3_*) · Q8_K.
    Grid(GridFormat),
}

impl Kernel {
    /// The SIMD kernel for weights of type `ty`, if there is one.
    pub(crate) fn for_type(ty: GgmlType) -> Option<Kernel> {
        Some(match ty {
            GgmlType::Q8_0 => Kernel::Q8_0,
            GgmlType::Q4_0 => Kernel::Q4_0,
            GgmlType::Q4_1 => Kernel::Q4_1,
            GgmlType::Q5_0 => Kernel::Q5_0,
            GgmlType::IQ4_NL => Kernel::IQ4NL,
            GgmlType::IQ4_XS => Kernel::IQ4XS,
            GgmlType::MXFP4 => Kernel::MXFP4,
            GgmlType::NVFP4 => Kernel::NVFP4,
            GgmlType::Q1_0 => Kernel::Q1_0,
            GgmlType::Q2_K => Kernel::Q2K,
            GgmlType::Q3_K => Kernel::Q3K,
            GgmlType::Q4_K => Kernel::Q4K,
            GgmlType::Q5_K => Kernel::Q5K,
            GgmlType::Q6_K => Kernel::Q6K,
            GgmlType::F16 => Kernel::F16,
            GgmlType::Q5_1 => Kernel::Q5_1,
            GgmlType::Q8_K => Kernel::Q8K,
            GgmlType::F32 => Kernel::F32,
            GgmlType::BF16 => Kernel::BF16,
            ty => Kernel::Grid(GridFormat::of(ty)?),
        })
    }

    /// `log2` of the elements per block (32 → 5, 256 → 8, F16: 1 → 0).
    fn block_shift(self) -> u32 {
        match self {
            Kernel::Q8_0
            | Kernel::Q4_0
            | Kernel::Q4_1
            | Kernel::Q5_0
            | Kernel::Q5_1
            | Kernel::IQ4NL
            | Kernel::MXFP4 => 5,
            Kernel::NVFP4 => 6,
            Kernel::Q1_0 => 7,
            Kernel::Q4K
            | Kernel::Q5K
            | Kernel::Q6K
            | Kernel::Q8K
            | Kernel::IQ4XS
            | Kernel::Q2K
            | Kernel::Q3K
            | Kernel::Grid(_) => 8,
            Kernel::F16 | Kernel::F32 | Kernel::BF16 => 0,
        }
    }

    /// Bytes per block of the weight and of the activation format.
    fn block_bytes(self) -> (usize, usize) {
        match self {
            Kernel::Q8_0 => (34, 34),
            Kernel::Q4_0 | Kernel::IQ4NL => (18, 34),
            Kernel::MXFP4 => (17, 34),
            Kernel::NVFP4 => (36, 68),
            Kernel::Q1_0 => (18, 136),
            Kernel::Q4_1 => (20, 36),
            Kernel::Q5_0 => (22, 34),
            Kernel::Q4K => (144, 292),
            Kernel::IQ4XS => (136, 292),
            Kernel::Q2K => (84, 292),
            Kernel::Q3K => (110, 292),
            Kernel::Q5K => (176, 292),
            Kernel::Q6K => (210, 292),
            Kernel::Q5_1 => (24, 36),
            Kernel::Q8K => (292, 292),
            Kernel::F16 | Kernel::BF16 => (2, 2),
            Kernel::F32 => (4, 4),
            Kernel::Grid(fmt) => (fmt.bytes(), 292),
        }
    }

    /// Whether `w` and `a` are exactly one row of `n` elements each: the
    /// same test as `check_dot`, with shifts instead of divisions (it runs
    /// once per dot product). On `false`, run `check_dot` for the error.
    pub(crate) fn rows_fit(self, n: usize, w: &[u8], a: &[u8]) -> bool {
        let shift = self.block_shift();
        let blocks = n >> shift;
        let (wb, ab) = self.block_bytes();
        blocks << shift == n
            && blocks.checked_mul(wb) == Some(w.len())
            && blocks.checked_mul(ab) == Some(a.len())
    }
}

/// Runs `kernel` on rows already validated by `check_dot` (whole blocks,
/// equal counts), using the SIMD twin for `isa`.
///
/// * `w`: the weight row's bytes; `a`: the activation row's bytes.
///
/// Returns `None` when `isa` has no SIMD twins (Scalar, or a non-x86_64
/// build) or is not available on this CPU; the caller then runs the scalar
/// reference.
pub(crate) fn run(isa: Isa, kernel: Kernel, w: &[u8], a: &[u8]) -> Option<f32> {
    match isa {
        Isa::Scalar => None,
        Isa::Avx2 | Isa::Avx512 => run_avx2(kernel, w, a),
    }
}

#[cfg(target_arch = "x86_64")]
fn run_avx2(kernel: Kernel, w: &[u8], a: &[u8]) -> Option<f32> {
    if !Isa::Avx2.is_available() {
        return None;
    }
    // SAFETY: `Isa::Avx2.is_available()` means the CPU has AVX2, FMA and
    // F16C, which is all the avx2 kernels need.
    Some(unsafe {
        match kernel {
            Kernel::Q8_0 => avx2::dot_q8_0_q8_0(w, a),
            Kernel::Q4_0 => avx2::dot_q4_0_q8_0(w, a),
            Kernel::IQ4NL => avx2::dot_iq4_nl_q8_0(w, a),
            Kernel::MXFP4 => avx2::dot_mxfp4_q8_0(w, a),
            Kernel::NVFP4 => sub_avx2::dot_nvfp4_q8_0(w, a),
            Kernel::Q1_0 => sub_avx2::dot_q1_0_q8_0(w, a),
            Kernel::IQ4XS => avx2::dot_iq4_xs_q8_k(w, a),
            Kernel::Q2K => avx2::dot_q2_k_q8_k(w, a),
            Kernel::Q3K => avx2::dot_q3_k_q8_k(w, a),
            Kernel::Q4_1 => avx2::dot_q4_1_q8_1(w, a),
            Kernel::Q5_0 => avx2::dot_q5_0_q8_0(w, a),
            Kernel::Q4K => avx2::dot_q4_k_q8_k(w, a),
            Kernel::Q5K => avx2::dot_q5_k_q8_k(w, a),
            Kernel::Q6K => avx2::dot_q6_k_q8_k(w, a),
            Kernel::Q5_1 => avx2::dot_q5_1_q8_1(w, a),
            Kernel::Q8K => avx2::dot_q8_k_q8_k(w, a),
            Kernel::F16 => avx2::dot_f16(w, a),
            Kernel::F32 => avx2::dot_f32(w, a),
            Kernel::BF16 => avx2::dot_bf16(w, a),
            Kernel::Grid(fmt) => crate::grid::dot_avx2(fmt, w, a),
        }
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn run_avx2(_kernel: Kernel, _w: &[u8], _a: &[u8]) -> Option<f32> {
    None
}

/// Whether the AVX2 twins may run for `isa` on this CPU.
#[cfg(target_arch = "x86_64")]
fn avx2_ok(isa: Isa) -> bool {
    isa != Isa::Scalar && Isa::Avx2.is_available()
}

/// SIMD Q8_0/Q8_1 block body: `(d, quants)` of the 32 values `x`, or `None`
/// when `isa` has no twin or the block holds a NaN (then run the scalar
/// code; the result is the same bits either way).
pub(crate) fn quant_8bit(isa: Isa, x: &[f32; 32]) -> Option<(f32, [i8; 32])> {
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2.
        return unsafe { quant_avx2::quant_8bit(x) };
    }
    let _ = (isa, x);
    None
}

/// SIMD body of the runtime activation quantizer (Q8_0/Q8_1): `(d,
/// quants)` of the 32 values `x`, or `None` when `isa` has no twin or the
/// block holds a NaN (the scalar code gives the same bits).
pub(crate) fn quant_8bit_acts(isa: Isa, x: &[f32; 32]) -> Option<(f32, [i8; 32])> {
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2.
        return unsafe { quant_avx2::quant_8bit_acts(x) };
    }
    let _ = (isa, x);
    None
}

/// SIMD F16 or BF16 encoding of a row of values (`dst`: 2 bytes per value
/// of `src`), bit-for-bit the scalar `fp::f32_to_f16` / `fp::f32_to_bf16`;
/// `false` when `isa` has no twin (then run the scalar code).
pub(crate) fn half_row(isa: Isa, bf16: bool, src: &[f32], dst: &mut [u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2 and F16C.
        unsafe {
            if bf16 {
                quant_avx2::bf16_row(src, dst);
            } else {
                quant_avx2::f16_row(src, dst);
            }
        }
        return true;
    }
    let _ = (isa, bf16, src, dst);
    false
}

/// SIMD largest `|x|` of a Q8_K block (`x`: 256 values), or `None` when
/// `isa` has no twin or the block holds a NaN.
pub(crate) fn absmax_256(isa: Isa, x: &[f32; 256]) -> Option<f32> {
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2.
        return unsafe { quant_avx2::absmax_256(x) };
    }
    let _ = (isa, x);
    None
}

/// SIMD Q8_K quants `min(127, nearest_int(iscale · x)) as i8` of the 256
/// values `x`, or `None` when `isa` has no twin.
pub(crate) fn quant_q8_k_quants(isa: Isa, x: &[f32; 256], iscale: f32) -> Option<[i8; 256]> {
    #[cfg(target_arch = "x86_64")]
    if avx2_ok(isa) {
        // SAFETY: `avx2_ok` checked that the CPU has AVX2.
        return Some(unsafe { quant_avx2::quant_q8_k_quants(x, iscale) });
    }
    let _ = (isa, x, iscale);
    None
}
