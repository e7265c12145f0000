//! The throughput probes' checksums are the same on every ISA (so the SIMD
//! loops do the work they claim) and depend on every round; the f32 probe's
//! kernels also count the same FMAs as the scalar twin, and run at a
//! positive finite rate.

use std::time::Instant;

use fak_kernels::peak::{f32_fma_loop, int8_mac_loop, F32_CHAINS, F32_FMAS_PER_ROUND};
use fak_kernels::Isa;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[test]
fn int8_probe_checksum_is_equal_on_every_isa() {
    let mut rng = StdRng::seed_from_u64(0x9eed);
    for rounds in [0u64, 1, 2, 7, 255, 256, 257, 1000] {
        let v0: [i8; 32] = std::array::from_fn(|_| rng.gen());
        let want = int8_mac_loop(Isa::Scalar, rounds, v0);
        for isa in Isa::available() {
            assert_eq!(
                int8_mac_loop(isa, rounds, v0),
                want,
                "{isa} rounds={rounds}"
            );
        }
    }
}

#[test]
fn int8_probe_checksum_depends_on_rounds() {
    let v0 = [3i8; 32];
    let sums: Vec<i32> = (0..6)
        .map(|r| int8_mac_loop(fak_kernels::isa(), r, v0))
        .collect();
    assert_eq!(sums[0], 0);
    for w in sums.windows(2) {
        assert_ne!(w[0], w[1]);
    }
}

fn random_chains(rng: &mut StdRng) -> [f32; F32_CHAINS] {
    std::array::from_fn(|_| rng.gen_range(-4.0f32..4.0))
}

#[test]
fn f32_probe_counts_and_checksum_are_equal_on_every_isa() {
    let mut rng = StdRng::seed_from_u64(0xf32f);
    for rounds in [0u64, 1, 2, 3, 7, 40, 1000] {
        let x0 = random_chains(&mut rng);
        let want = f32_fma_loop(Isa::Scalar, rounds, &x0);
        assert_eq!(want.fmas, rounds * F32_FMAS_PER_ROUND);
        assert!(want.checksum.is_finite());
        // Every ISA, the unavailable ones through their fallback.
        for isa in Isa::ALL {
            let got = f32_fma_loop(isa, rounds, &x0);
            assert_eq!(got.fmas, want.fmas, "{isa} rounds={rounds}");
            assert_eq!(
                got.checksum.to_bits(),
                want.checksum.to_bits(),
                "{isa} rounds={rounds}: {} vs {}",
                got.checksum,
                want.checksum
            );
        }
    }
}

#[test]
fn f32_probe_checksum_depends_on_rounds() {
    let x0: [f32; F32_CHAINS] = std::array::from_fn(|c| 1.0 + c as f32 / 256.0);
    let sums: Vec<f64> = (0..6)
        .map(|r| f32_fma_loop(fak_kernels::isa(), r, &x0).checksum)
        .collect();
    let start: f64 = x0.iter().map(|&x| f64::from(x)).sum();
    assert_eq!(sums[0], start);
    for w in sums.windows(2) {
        assert_ne!(w[0], w[1]);
    }
}

/// Each ISA's loop, timed as the driver times it: FMAs the kernel reports
/// over the wall time.
#[test]
fn f32_probe_rate_is_positive_and_finite_on_every_isa() {
    let x0: [f32; F32_CHAINS] = std::array::from_fn(|c| 1.5 + c as f32 / 512.0);
    for isa in Isa::available() {
        let t0 = Instant::now();
        let r = f32_fma_loop(isa, 20_000, &x0);
        let gflops = 2.0 * r.fmas as f64 / t0.elapsed().as_secs_f64() / 1e9;
        assert!(gflops.is_finite() && gflops > 0.0, "{isa}: {gflops}");
        assert_eq!(r.fmas, 20_000 * F32_FMAS_PER_ROUND, "{isa}");
    }
}
