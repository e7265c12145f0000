//! AVX2 and AVX-512 bodies of the throughput probes (`crate::peak`): the
//! int8 multiply-add loops, then the f32 FMA chains.

use std::arch::x86_64::*;

use super::scalar::{chain_sum, FmaRun, F32_CHAINS, FMA_ADD, FMA_MUL};

/// Accumulator registers per block of the f32 loops.
const BLOCK: usize = 12;

/// AVX2 twin of `peak::scalar::int8_mac_loop`: per round, `v += 1`
/// bytewise, then for each of the 8 accumulators
/// `acc += madd(maddubs(u[j], v), 1)`; returns the wrapping sum of all
/// lanes (equal to the scalar twin's).
///
/// * `u`: `[8][32]` bytes in `0..16`; `v0`: `[32]` signed bytes.
///
/// # Safety
///
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn int8_mac_loop(rounds: u64, u: [[u8; 32]; 8], v0: [i8; 32]) -> i32 {
    // SAFETY: 32-byte unaligned loads from 32-byte arrays.
    let uv: [__m256i; 8] = u.map(|b| unsafe { _mm256_loadu_si256(b.as_ptr().cast()) });
    // SAFETY: as above.
    let mut v = unsafe { _mm256_loadu_si256(v0.as_ptr().cast()) };
    let (one8, one16) = (_mm256_set1_epi8(1), _mm256_set1_epi16(1));
    let mut acc = [_mm256_setzero_si256(); 8];
    for _ in 0..rounds {
        v = _mm256_add_epi8(v, one8);
        for (a, &uj) in acc.iter_mut().zip(&uv) {
            let p = _mm256_madd_epi16(_mm256_maddubs_epi16(uj, v), one16);
            *a = _mm256_add_epi32(*a, p);
        }
    }
    let mut lanes = [0i32; 64];
    for (chunk, a) in lanes.chunks_exact_mut(8).zip(acc) {
        // SAFETY: 8 i32 lanes into an 8-element slice.
        unsafe { _mm256_storeu_si256(chunk.as_mut_ptr().cast(), a) };
    }
    lanes.iter().fold(0i32, |s, &x| s.wrapping_add(x))
}

/// AVX-512 VNNI twin of `peak::scalar::int8_mac_loop`: the same 256
/// multiply-adds per round as [`int8_mac_loop`], as four 512-bit
/// `vpdpbusd` (`u[2j]` and `u[2j + 1]` side by side against `v` in both
/// halves; its four-byte lane sums are exactly `madd(maddubs(u, v), 1)`'s).
/// Three rounds run on three accumulator sets, since one `vpdpbusd` waits
/// for the last on its accumulator; the wrapping lane sum is the same.
///
/// * `u`: `[8][32]` bytes in `0..16`; `v0`: `[32]` signed bytes.
///
/// # Safety
///
/// The CPU must support AVX-512 F, BW and VNNI.
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vnni")]
pub(crate) unsafe fn int8_mac_loop_vnni(rounds: u64, u: [[u8; 32]; 8], v0: [i8; 32]) -> i32 {
    let mut pairs = [[0u8; 64]; 4];
    for (j, p) in pairs.iter_mut().enumerate() {
        p[..32].copy_from_slice(&u[2 * j]);
        p[32..].copy_from_slice(&u[2 * j + 1]);
    }
    // SAFETY: 64-byte unaligned loads from 64-byte arrays.
    let uv: [__m512i; 4] = pairs.map(|b| unsafe { _mm512_loadu_si512(b.as_ptr().cast()) });
    // SAFETY: 32-byte unaligned load from a 32-byte array.
    let mut v = _mm512_broadcast_i64x4(unsafe { _mm256_loadu_si256(v0.as_ptr().cast()) });
    let one8 = _mm512_set1_epi8(1);
    let mut acc = [[_mm512_setzero_si512(); 4]; 3];
    for _ in 0..rounds / 3 {
        for set in acc.iter_mut() {
            v = _mm512_add_epi8(v, one8);
            for (a, &uj) in set.iter_mut().zip(&uv) {
                *a = _mm512_dpbusd_epi32(*a, uj, v);
            }
        }
    }
    for _ in 0..rounds % 3 {
        v = _mm512_add_epi8(v, one8);
        for (a, &uj) in acc[0].iter_mut().zip(&uv) {
            *a = _mm512_dpbusd_epi32(*a, uj, v);
        }
    }
    let mut lanes = [0i32; 16];
    let mut sum = 0i32;
    for a in acc.iter().flatten() {
        // SAFETY: 16 i32 lanes into a 16-element array.
        unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), *a) };
        sum = lanes.iter().fold(sum, |s, &x| s.wrapping_add(x));
    }
    sum
}

/// AVX2 twin of `peak::scalar::f32_fma_loop`: the 192 chains as two blocks
/// of 12 vectors of 8 (12 accumulators, the multiplier and the addend fill
/// 14 of the 16 registers; 12 independent `vfmadd` cover the FMA latency
/// of both ports); each block runs every round.
///
/// # Safety
///
/// The CPU must support AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn f32_fma_loop(rounds: u64, x0: &[f32; F32_CHAINS]) -> FmaRun {
    const LANES: usize = 8;
    let mut x = *x0;
    let (m, a) = (_mm256_set1_ps(FMA_MUL), _mm256_set1_ps(FMA_ADD));
    let mut fmas = 0u64;
    for block in x.chunks_exact_mut(BLOCK * LANES) {
        // SAFETY: 8-float unaligned loads inside a block of BLOCK · 8 floats.
        let mut acc: [__m256; BLOCK] =
            std::array::from_fn(|j| unsafe { _mm256_loadu_ps(block.as_ptr().add(j * LANES)) });
        for _ in 0..rounds {
            for v in &mut acc {
                *v = _mm256_fmadd_ps(*v, m, a);
            }
        }
        for (j, v) in acc.iter().enumerate() {
            // SAFETY: 8-float unaligned stores inside the block, as loaded.
            unsafe { _mm256_storeu_ps(block.as_mut_ptr().add(j * LANES), *v) };
        }
        fmas = fmas.saturating_add(rounds.saturating_mul((BLOCK * LANES) as u64));
    }
    FmaRun {
        fmas,
        checksum: chain_sum(&x),
    }
}

/// AVX-512 twin of `peak::scalar::f32_fma_loop`: the 192 chains as one
/// block of 12 vectors of 16, every round.
///
/// # Safety
///
/// The CPU must support AVX-512 F (and AVX2 and FMA).
#[target_feature(enable = "avx2,fma,avx512f")]
pub(crate) unsafe fn f32_fma_loop_avx512(rounds: u64, x0: &[f32; F32_CHAINS]) -> FmaRun {
    const LANES: usize = 16;
    let mut x = *x0;
    let (m, a) = (_mm512_set1_ps(FMA_MUL), _mm512_set1_ps(FMA_ADD));
    let mut fmas = 0u64;
    for block in x.chunks_exact_mut(BLOCK * LANES) {
        // SAFETY: 16-float unaligned loads inside a block of BLOCK · 16 floats.
        let mut acc: [__m512; BLOCK] =
            std::array::from_fn(|j| unsafe { _mm512_loadu_ps(block.as_ptr().add(j * LANES)) });
        for _ in 0..rounds {
            for v in &mut acc {
                *v = _mm512_fmadd_ps(*v, m, a);
            }
        }
        for (j, v) in acc.iter().enumerate() {
            // SAFETY: 16-float unaligned stores inside the block, as loaded.
            unsafe { _mm512_storeu_ps(block.as_mut_ptr().add(j * LANES), *v) };
        }
        fmas = fmas.saturating_add(rounds.saturating_mul((BLOCK * LANES) as u64));
    }
    FmaRun {
        fmas,
        checksum: chain_sum(&x),
    }
}
