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
        return unsafe {
            crate::simd::peak_avx2::int8_mac_loop_vnni(rounds, unsigned_operands(), v0)
        };
    }
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Scalar && Isa::Avx2.is_available() {
        // SAFETY: AVX2 (with FMA and F16C) is available (checked above).
        return unsafe { crate::simd::peak_avx2::int8_mac_loop(rounds, unsigned_operands(), v0) };
    }
    let _ = isa;
    scalar_int8_mac_loop(rounds, unsigned_operands(), v0)
}

/// Scalar twin of the AVX2 loop: the same products, pair sums and
/// wrapping 32-bit lane sums, in plain integer arithmetic.
///
/// * `u`: `[8][32]` bytes in `0..16`; `v0`: `[32]` signed bytes.
pub(crate) fn scalar_int8_mac_loop(rounds: u64, u: [[u8; 32]; 8], v0: [i8; 32]) -> i32 {
    let mut v = v0;
    let mut acc = [[0i32; 8]; 8];
    for _ in 0..rounds {
        for x in &mut v {
            *x = x.wrapping_add(1);
        }
        for (a, uj) in acc.iter_mut().zip(&u) {
            for (lane, al) in a.iter_mut().enumerate() {
                let s: i32 = (0..4)
                    .map(|k| {
                        let b = lane * 4 + k;
                        i32::from(uj[b]) * i32::from(v[b])
                    })
                    .sum();
                *al = al.wrapping_add(s);
            }
        }
    }
    acc.iter().flatten().fold(0i32, |s, &x| s.wrapping_add(x))
}

/// Independent f32 multiply-add chains of [`f32_fma_loop`]: 24 AVX2
/// vectors of 8 (two register blocks of 12), 12 AVX-512 vectors of 16.
pub const F32_CHAINS: usize = 192;

/// f32 fused multiply-adds per round of [`f32_fma_loop`] (2 flops each).
pub const F32_FMAS_PER_ROUND: u64 = F32_CHAINS as u64;

/// Every chain's step is `x ← x · FMA_MUL + FMA_ADD`.
pub(crate) const FMA_MUL: f32 = 0.5;
/// See [`FMA_MUL`].
pub(crate) const FMA_ADD: f32 = 0.375;

/// What one [`f32_fma_loop`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FmaRun {
    /// Multiply-adds executed, as counted by the kernel that ran them.
    pub fmas: u64,
    /// Sum of every chain's final value, in chain order (in f64).
    pub checksum: f64,
}

/// Runs the f32 probe loop for `rounds` rounds from the chain values `x0`
/// on the kernels of `isa` (the scalar twin for `Isa::Scalar` or where
/// AVX2 is unavailable): the same multiply-add count and checksum on
/// every ISA.
pub fn f32_fma_loop(isa: Isa, rounds: u64, x0: &[f32; F32_CHAINS]) -> FmaRun {
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 && Isa::Avx512.is_available() {
        // SAFETY: `Isa::Avx512` is available: AVX-512 F on top of AVX2 and FMA.
        return unsafe { crate::simd::peak_avx2::f32_fma_loop_avx512(rounds, x0) };
    }
    #[cfg(target_arch = "x86_64")]
    if isa != Isa::Scalar && Isa::Avx2.is_available() {
        // SAFETY: AVX2 (with FMA and F16C) is available (checked above).
        return unsafe { crate::simd::peak_avx2::f32_fma_loop(rounds, x0) };
    }
    let _ = isa;
    scalar_f32_fma_loop(rounds, x0)
}

/// Scalar twin of the SIMD loops: `x ← x · 0.5 + 0.375` on every chain,
/// `rounds` times, as a multiply then an add. The product by 0.5 is exact
/// unless it is subnormal, and then far below half an ulp of 0.375: one
/// rounding either way, as in the fused form, so the result is the SIMD
/// kernels' to the bit.
pub(crate) fn scalar_f32_fma_loop(rounds: u64, x0: &[f32; F32_CHAINS]) -> FmaRun {
    let mut x = *x0;
    for _ in 0..rounds {
        for v in &mut x {
            *v = *v * FMA_MUL + FMA_ADD;
        }
    }
    FmaRun {
        fmas: rounds.saturating_mul(F32_FMAS_PER_ROUND),
        checksum: chain_sum(&x),
    }
}

/// Sum of the chains' values in chain order: the checksum of every ISA.
pub(crate) fn chain_sum(x: &[f32; F32_CHAINS]) -> f64 {
    x.iter().map(|&v| f64::from(v)).sum()
}
