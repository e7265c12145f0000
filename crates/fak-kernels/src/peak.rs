//! Int8 multiply-add throughput probe: the denominator of the prefill
//! roofline (`int8 multiply-adds per token ÷ peak`).
//!
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
