//! The int8 throughput probe's checksum is the same on every ISA (so the
//! SIMD loop does the work it claims), and depends on every round.

use fak_kernels::peak::int8_mac_loop;
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
