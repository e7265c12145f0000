//! Throughput probes: the denominators of the roofline's compute terms.
//!
//! **int8** (the weight matrices: `int8 multiply-adds per token ÷ peak`).
//! [`int8_mac_loop`] runs `rounds` rounds of the ISA's int8 dot-product
//! instruction sequence on register-resident data, 8 independent 32-byte
//! accumulator lanes per round, so it is bound by the int8 execution
//! units, not by memory or by one add chain:
//!
//! ```text
//!   round:  v += 1 (bytewise, wrapping)                     the changing operand
//!           for j in 0..8:  acc[j] += pairsum32(pairsum16(u[j] · v))
//!                           AVX2: vpmaddubsw, vpmaddwd (· 1), vpaddd
//!                           AVX-512 VNNI: one 512-bit vpdpbusd per two j
//!   = 8 × 32 = 256 int8 multiply-adds per round
//! ```
//!
//! `u` bytes are in `0..16` and `v` bytes are any `i8`, so the 16-bit pair
//! sums never saturate and the result is an exact wrapping integer
//! checksum: the scalar twin computes the same value, which the tests
//! compare (and which keeps the loop from being optimised away).
//!
//! **f32** (the attention arithmetic: scores and value sums over f32
//! rows). [`f32_fma_loop`] runs `rounds` rounds of one fused multiply-add
//! on each of 192 independent register-resident chains:
//!
//! ```text
//!   round:  for c in 0..192:  x[c] = x[c] · 0.5 + 0.375     (one FMA each)
//!           AVX2:    2 blocks of 12 ymm accumulators, each block every round
//!           AVX-512: 1 block of 12 zmm accumulators
//!           scalar:  x · 0.5 then + 0.375 (the product by 0.5 is exact)
//!   = 192 f32 FMAs = 384 flops per round
//! ```
//!
//! Twelve independent accumulators per block cover the FMA latency on two
//! ports. Each kernel counts the FMAs it ran ([`FmaRun::fmas`]) and sums its
//! chains in chain order; both are the same on every ISA, which the tests
//! compare.

//!
//! Files, each importing only the ones below it:
//!
//! ```text
//!   mod.rs     this overview; the dispatchers ──► avx2.rs, scalar.rs
//!   avx2.rs    AVX2 and AVX-512 loops ──────────► scalar.rs
//!   scalar.rs  the scalar twins, the chain constants and FmaRun (a leaf)
//! ```

#[cfg(target_arch = "x86_64")]
mod avx2;
mod scalar;

pub use scalar::{FmaRun, F32_CHAINS, F32_FMAS_PER_ROUND};

use crate::isa::Isa;

/// Int8 multiply-adds per round of [`int8_mac_loop`].
pub const MACS_PER_ROUND: u64 = 256;

/// The 8 fixed unsigned operands (`u[j][b] = (7·j + 3·b) mod 16`).
fn unsigned_operands() -> [[u8; 32]; 8] {
    std::array::from_fn(|j| std::array::from_fn(|b| ((7 * j + 3 * b) % 16) as u8))
}

/// Runs the probe loop for `rounds` rounds from the signed operand
/// `v0` on the kernels of `isa` (the scalar twin for `Isa::Scalar` or where
/// AVX2 is unavailable) and returns the wrapping sum of every accumulator
/// lane: the same value on every ISA.
pub fn int8_mac_loop(isa: Isa, rounds: u64, v0: [i8; 32]) -> i32 {
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 && Isa::Avx512.is_available() {
        // SAFETY: `Isa::Avx512` is available: AVX-512 F, BW and VNNI.
        return unsafe { avx2::int8_mac_loop_vnni(rounds, unsigned_operands(), v0) };
    }
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Scalar && Isa::Avx2.is_available() {
        // SAFETY: AVX2 (with FMA and F16C) is available (checked above).
        return unsafe { avx2::int8_mac_loop(rounds, unsigned_operands(), v0) };
    }
    let _ = isa;
    scalar::int8_mac_loop(rounds, unsigned_operands(), v0)
}

/// Runs the f32 probe loop for `rounds` rounds from the chain values `x0`
/// on the kernels of `isa` (the scalar twin for `Isa::Scalar` or where
/// AVX2 is unavailable): the same multiply-add count and checksum on
/// every ISA.
pub fn f32_fma_loop(isa: Isa, rounds: u64, x0: &[f32; F32_CHAINS]) -> FmaRun {
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 && Isa::Avx512.is_available() {
        // SAFETY: `Isa::Avx512` is available: AVX-512 F on top of AVX2 and FMA.
        return unsafe { avx2::f32_fma_loop_avx512(rounds, x0) };
    }
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Scalar && Isa::Avx2.is_available() {
        // SAFETY: AVX2 (with FMA and F16C) is available (checked above).
        return unsafe { avx2::f32_fma_loop(rounds, x0) };
    }
    let _ = isa;
    scalar::f32_fma_loop(rounds, x0)
}
