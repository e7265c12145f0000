//! The scalar twins of the throughput probes (`crate::peak`), and the
//! constants and result type every ISA's loop shares.

/// Independent f32 multiply-add chains of `peak::f32_fma_loop`: 24 AVX2
/// vectors of 8 (two register blocks of 12), 12 AVX-512 vectors of 16.
pub const F32_CHAINS: usize = 192;

/// f32 fused multiply-adds per round of `peak::f32_fma_loop` (2 flops each).
pub const F32_FMAS_PER_ROUND: u64 = F32_CHAINS as u64;

/// Every chain's step is `x ← x · FMA_MUL + FMA_ADD`.
pub(crate) const FMA_MUL: f32 = 0.5;
/// See [`FMA_MUL`].
pub(crate) const FMA_ADD: f32 = 0.375;

/// What one `peak::f32_fma_loop` did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FmaRun {
    /// Multiply-adds executed, as counted by the kernel that ran them.
    pub fmas: u64,
    /// Sum of every chain's final value, in chain order (in f64).
    pub checksum: f64,
}

/// Scalar twin of the AVX2 loop: the same products, pair sums and
/// wrapping 32-bit lane sums, in plain integer arithmetic.
///
/// * `u`: `[8][32]` bytes in `0..16`; `v0`: `[32]` signed bytes.
pub(crate) fn int8_mac_loop(rounds: u64, u: [[u8; 32]; 8], v0: [i8; 32]) -> i32 {
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

/// Scalar twin of the SIMD loops: `x ← x · 0.5 + 0.375` on every chain,
/// `rounds` times, as a multiply then an add. The product by 0.5 is exact
/// unless it is subnormal, and then far below half an ulp of 0.375: one
/// rounding either way, as in the fused form, so the result is the SIMD
/// kernels' to the bit.
pub(crate) fn f32_fma_loop(rounds: u64, x0: &[f32; F32_CHAINS]) -> FmaRun {
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
