//! AVX2 body of the int8 throughput probe (`crate::peak`).

use std::arch::x86_64::*;

/// AVX2 twin of `peak::scalar_int8_mac_loop`: per round, `v += 1`
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
