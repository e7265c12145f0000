use super::keep::{walk, walk_dense, Buffers, Candidate, Kept};
use super::reference::full_sort;
use super::*;
use fak_kernels::expf::expf;
use proptest::prelude::*;

#[test]
fn greedy_picks_max_lowest_on_tie() {
    assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), Some(1));
    assert_eq!(argmax(&[f32::NAN, -1.0]), Some(1));
    assert_eq!(argmax(&[]), None);
    let mut s = Sampler::new(SamplingParams::greedy());
    assert_eq!(s.sample(&[0.0, 0.5, -2.0]), Some(1));
}

#[test]
fn same_seed_same_draws() {
    let logits: Vec<f32> = (0..100).map(|i| ((i * 37 % 11) as f32) * 0.3).collect();
    let p = SamplingParams {
        temperature: 0.9,
        top_k: 40,
        top_p: 0.95,
        seed: 7,
        ..SamplingParams::greedy()
    };
    let mut a = Sampler::new(p);
    let mut b = Sampler::new(p);
    let da: Vec<_> = (0..50).map(|_| a.sample(&logits)).collect();
    let db: Vec<_> = (0..50).map(|_| b.sample(&logits)).collect();
    assert_eq!(da, db);
    let mut c = Sampler::new(SamplingParams { seed: 8, ..p });
    let dc: Vec<_> = (0..50).map(|_| c.sample(&logits)).collect();
    assert_ne!(da, dc);
}

#[test]
fn validate_rejects_out_of_range_and_nan() {
    let g = SamplingParams::greedy();
    assert!(g.validate().is_ok());
    for bad in [
        SamplingParams {
            temperature: f32::NAN,
            ..g
        },
        SamplingParams {
            temperature: -1.0,
            ..g
        },
        SamplingParams { top_p: 1.5, ..g },
        SamplingParams { top_p: 0.0, ..g },
        SamplingParams { min_p: -0.1, ..g },
        SamplingParams {
            presence_penalty: 3.0,
            ..g
        },
        SamplingParams {
            frequency_penalty: f32::NAN,
            ..g
        },
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
    let e = SamplingParams { top_p: 2.0, ..g }.validate().unwrap_err();
    assert_eq!(e.to_string(), "top_p must be within (0, 1], got 2");
}

#[test]
fn penalties_change_greedy_choice() {
    let logits = [1.0, 0.9, 0.1];
    let mut s = Sampler::new(SamplingParams {
        presence_penalty: 0.5,
        ..SamplingParams::greedy()
    });
    assert_eq!(s.sample(&logits), Some(0));
    s.accept(0);
    assert_eq!(s.sample(&logits), Some(1));
    let mut f = Sampler::new(SamplingParams {
        frequency_penalty: 0.06,
        ..SamplingParams::greedy()
    });
    f.accept(0);
    assert_eq!(f.sample(&logits), Some(0), "one use: 1.0 - 0.06 > 0.9");
    f.accept(0);
    assert_eq!(f.sample(&logits), Some(1), "two uses: 1.0 - 0.12 < 0.9");
}

#[test]
fn min_p_drops_unlikely_tokens() {
    // p ∝ e^0, e^-10: the second is far below 0.5 · p_max.
    let logits = [0.0, -10.0];
    for seed in 0..50 {
        let mut s = Sampler::new(SamplingParams {
            temperature: 1.0,
            min_p: 0.5,
            seed,
            ..SamplingParams::greedy()
        });
        assert_eq!(s.sample(&logits), Some(0));
    }
}

proptest! {
    #[test]
    fn top_k_one_is_greedy(logits in proptest::collection::vec(-50.0f32..50.0, 1..200), seed in any::<u64>()) {
        let mut s = Sampler::new(SamplingParams { temperature: 1.3, top_k: 1, seed, ..SamplingParams::greedy() });
        prop_assert_eq!(s.sample(&logits), argmax(&logits));
    }

    #[test]
    fn sample_stays_in_top_k(logits in proptest::collection::vec(-50.0f32..50.0, 5..200), seed in any::<u64>()) {
        let mut s = Sampler::new(SamplingParams { temperature: 1.0, top_k: 3, seed, ..SamplingParams::greedy() });
        let id = s.sample(&logits).unwrap() as usize;
        let greater = logits.iter().filter(|&&v| v > logits[id]).count();
        prop_assert!(greater < 3);
    }
}

/// The kept candidates and their probabilities by the book
/// ([`full_sort`]: sort every candidate by descending logit, ties by
/// ascending id, cut to top-k, softmax at the temperature, cut where the
/// f32 running sum first reaches top-p, cut below `min_p · p_max`; each
/// cut keeps at least one), with the sampler's own `expf`. Returned by
/// ascending id.
fn reference(logits: &[f32], p: &SamplingParams) -> Vec<(u32, f32)> {
    let mut c = Vec::new();
    full_sort(logits, p, expf, &mut c);
    c.sort_by_key(|x| x.0);
    c
}

/// What [`Buffers::keep`] keeps, with probabilities, by ascending id.
fn kept(logits: &[f32], p: &SamplingParams) -> Vec<(u32, f32)> {
    let mut b = Buffers::default();
    let mut v: Vec<(u32, f32)> = match b.keep(logits, p) {
        Kept::Nothing => vec![],
        Kept::Dense { sum } => {
            assert_eq!(b.weights.len(), logits.len());
            logits
                .iter()
                .zip(&b.weights)
                .enumerate()
                .filter(|(_, (l, _))| !l.is_nan())
                .map(|(i, (_, &w))| (i as u32, (f64::from(w) / sum) as f32))
                .collect()
        }
        Kept::Listed { total } => {
            let c = &b.candidates;
            let sum: f32 = c.iter().map(|e| e.prob).sum();
            assert!((total - sum).abs() <= 1e-5 * sum, "total {total} vs {sum}");
            for e in c {
                assert_eq!(e.logit.to_bits(), logits[e.id as usize].to_bits());
            }
            c.iter().map(|e| (e.id, e.prob)).collect()
        }
    };
    v.sort_by_key(|x| x.0);
    v
}

/// Logits with many ties (a few small integers), some NaN, -inf, +inf and
/// huge values, or plain uniform ones.
fn logit() -> impl Strategy<Value = f32> {
    prop_oneof![
        8 => (-3i32..=3).prop_map(|v| v as f32),
        8 => -30.0f32..30.0,
        1 => Just(f32::NAN),
        1 => Just(f32::NEG_INFINITY),
        1 => prop_oneof![Just(f32::MAX), Just(-f32::MAX), Just(-1e30f32), Just(1e30f32)],
    ]
}

fn logits() -> impl Strategy<Value = Vec<f32>> {
    prop_oneof![
        proptest::collection::vec(logit(), 0..40),
        proptest::collection::vec(logit(), 40..1500),
        // Near-flat: the nucleus outgrows the first head.
        proptest::collection::vec(-0.5f32..0.5, 64..1500),
    ]
}

fn params() -> impl Strategy<Value = SamplingParams> {
    (
        prop_oneof![0.05f32..3.0, Just(1.0f32), Just(100.0f32)],
        prop_oneof![Just(0usize), 1usize..50, 50usize..1600],
        prop_oneof![
            Just(1.0f32),
            0.001f32..1.0,
            Just(0.5f32),
            Just(0.25f32),
            Just(0.999_999_9f32)
        ],
        prop_oneof![Just(0.0f32), 0.0f32..0.5, Just(1.0f32), Just(1.5f32)],
        any::<u64>(),
    )
        .prop_map(|(temperature, top_k, top_p, min_p, seed)| SamplingParams {
            temperature,
            top_k,
            top_p,
            min_p,
            seed,
            ..SamplingParams::greedy()
        })
}

/// Relative tolerance on a kept probability: the f64 sum of the softmax
/// runs in another order than the reference's, which can move an f32
/// probability by one ulp (2^-23 relative).
const PROB_TOL: f32 = 1e-6;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn kept_set_and_probs_match_the_full_sort(logits in logits(), p in params()) {
        let want = reference(&logits, &p);
        let got = kept(&logits, &p);
        let ids = |v: &[(u32, f32)]| v.iter().map(|x| x.0).collect::<Vec<_>>();
        prop_assert_eq!(ids(&got), ids(&want), "{:?}", p);
        for (g, w) in got.iter().zip(&want) {
            prop_assert!(
                (g.1 - w.1).abs() <= PROB_TOL * w.1.max(g.1),
                "token {}: {} vs {} ({:?})", g.0, g.1, w.1, p
            );
        }
        // A draw is always one of the kept tokens (or None with none kept).
        let mut s = Sampler::new(p);
        let t = s.sample(&logits);
        prop_assert_eq!(t.is_some(), !want.is_empty());
        if let Some(t) = t {
            prop_assert!(want.iter().any(|x| x.0 == t && x.1 > 0.0) || want.iter().all(|x| x.1 == 0.0));
        }
    }
}

/// Frequencies of `n` draws of `p` from `logits` against the reference's
/// renormalised probabilities: no token outside the kept set, and a
/// chi-square statistic below a loose bound (the seed is fixed, so the
/// test is deterministic; the bound is about 8 standard deviations above
/// the statistic's mean).
fn assert_draws_follow_reference(logits: &[f32], p: SamplingParams, n: usize) {
    let want = reference(logits, &p);
    let total: f64 = want.iter().map(|x| f64::from(x.1)).sum();
    let mut seen = std::collections::HashMap::<u32, usize>::new();
    let mut s = Sampler::new(p);
    for _ in 0..n {
        *seen.entry(s.sample(logits).unwrap()).or_default() += 1;
    }
    for t in seen.keys() {
        assert!(
            want.iter().any(|x| x.0 == *t),
            "{t} drawn but not kept ({p:?})"
        );
    }
    let mut chi2 = 0.0;
    let mut bins = 0usize;
    for &(id, prob) in &want {
        let expect = n as f64 * f64::from(prob) / total;
        if expect > 0.0 {
            let o = *seen.get(&id).unwrap_or(&0) as f64;
            chi2 += (o - expect) * (o - expect) / expect;
            bins += 1;
        }
    }
    let df = bins.saturating_sub(1) as f64;
    let bound = df + 8.0 * (2.0 * df).sqrt() + 10.0;
    assert!(
        chi2 < bound,
        "chi2 {chi2:.1} over {bound:.1} ({bins} tokens, {p:?})"
    );
}

#[test]
fn draws_follow_the_distribution() {
    // A peaked head with ties, then a long tail (some masked to -inf).
    let logits: Vec<f32> = (0..3000)
        .map(|i| match i {
            7 | 1234 => 4.0,
            42 => 3.5,
            _ if i % 97 == 0 => f32::NEG_INFINITY,
            _ => ((i * 7919 % 1000) as f32) / 250.0 - 2.0,
        })
        .collect();
    let g = SamplingParams::greedy();
    for p in [
        SamplingParams {
            temperature: 1.0,
            ..g
        },
        SamplingParams {
            temperature: 0.7,
            top_p: 0.9,
            ..g
        },
        SamplingParams {
            temperature: 1.0,
            top_k: 40,
            top_p: 0.95,
            ..g
        },
        SamplingParams {
            temperature: 1.0,
            min_p: 0.05,
            ..g
        },
        SamplingParams {
            temperature: 0.3,
            top_p: 0.5,
            ..g
        },
    ] {
        assert_draws_follow_reference(&logits, SamplingParams { seed: 11, ..p }, 40_000);
    }
}

#[test]
fn same_seed_same_draws_over_a_large_vocabulary() {
    let logits: Vec<f32> = (0..49152)
        .map(|i| ((i * 7919 % 4093) as f32) / 400.0)
        .collect();
    let p = SamplingParams {
        temperature: 1.0,
        top_p: 0.95,
        min_p: 0.01,
        seed: 3,
        ..SamplingParams::greedy()
    };
    let run = || {
        let mut s = Sampler::new(p);
        (0..20).map(|_| s.sample(&logits)).collect::<Vec<_>>()
    };
    let a = run();
    assert_eq!(a, run());
    assert!(a.iter().all(Option::is_some));
}

#[test]
fn infinite_logits_share_or_spread_the_mass() {
    // +inf tokens take all the mass (the softmax's limit); the old code
    // made every probability NaN and drew the last candidate.
    let logits = [0.0, f32::INFINITY, -1.0, f32::INFINITY, f32::NEG_INFINITY];
    let t1 = SamplingParams {
        temperature: 1.0,
        ..SamplingParams::greedy()
    };
    assert_eq!(
        kept(&logits, &t1),
        vec![(0, 0.0), (1, 0.5), (2, 0.0), (3, 0.5), (4, 0.0)]
    );
    let mut drawn = [0usize; 5];
    let mut s = Sampler::new(SamplingParams { seed: 5, ..t1 });
    for _ in 0..200 {
        drawn[s.sample(&logits).unwrap() as usize] += 1;
    }
    assert_eq!(drawn[0] + drawn[2] + drawn[4], 0, "{drawn:?}");
    assert!(drawn[1] > 50 && drawn[3] > 50, "{drawn:?}");
    // All -inf: uniform.
    let all = [f32::NEG_INFINITY; 4];
    assert_eq!(
        kept(&all, &t1),
        vec![(0, 0.25), (1, 0.25), (2, 0.25), (3, 0.25)]
    );
}

#[test]
fn walk_never_falls_through_to_a_zero_probability_token() {
    // r at the end (rounding can leave it there): the last token with
    // mass, not the masked one after it (the old walk returned the last).
    let c = |id, prob| Candidate {
        id,
        logit: 0.0,
        prob,
    };
    let v = [c(3, 0.5), c(9, 0.5), c(4, 0.0)];
    assert_eq!(walk(&v, 0.25), Some(3));
    assert_eq!(walk(&v, 0.75), Some(9));
    assert_eq!(walk(&v, 1.0), Some(9));
    assert_eq!(walk(&[c(4, 0.0)], 0.0), Some(4));
    assert_eq!(walk(&[], 0.0), None);
    let w = [0.0, 0.5, 0.0, 0.5, 0.0];
    assert_eq!(walk_dense(&w, 0.25), Some(1));
    assert_eq!(walk_dense(&w, 0.75), Some(3));
    assert_eq!(walk_dense(&w, 1.0), Some(3));
    assert_eq!(walk_dense(&[0.0, 0.0], 0.0), None);
}

/// The f32 nearest `-k · ln 16` whose weight is exactly `16^-k`: a weight
/// on the edge between two of top-p's bands.
fn on_band_edge(k: i32) -> f32 {
    let target = 16f32.powi(-k);
    let mut x = -(k as f32) * 16f32.ln();
    for _ in 0..64 {
        if expf(x) == target {
            return x;
        }
        x = f32::from_bits(if expf(x) < target {
            x.to_bits() - 1
        } else {
            x.to_bits() + 1
        });
    }
    panic!("no f32 with e^x = 16^-{k}");
}

#[test]
fn top_p_keeps_weights_on_a_band_edge() {
    let mut logits = vec![0.0, on_band_edge(1), on_band_edge(2), on_band_edge(3)];
    logits.extend((0..200).map(|i| -12.0 - i as f32 * 0.01));
    for top_p in [0.9, 0.99, 0.999, 0.9999] {
        let p = SamplingParams {
            temperature: 1.0,
            top_p,
            ..SamplingParams::greedy()
        };
        let (got, want) = (kept(&logits, &p), reference(&logits, &p));
        let ids = |v: &[(u32, f32)]| v.iter().map(|x| x.0).collect::<Vec<_>>();
        assert_eq!(ids(&got), ids(&want), "top_p {top_p}");
    }
}

#[test]
fn the_maximum_weighs_exactly_one() {
    // The module relies on it: p_max is 1 / sum.
    assert_eq!(expf(0.0), 1.0);
    assert_eq!(expf(-0.0), 1.0);
}

#[test]
fn min_p_above_one_keeps_the_most_likely() {
    let p = SamplingParams {
        temperature: 1.0,
        min_p: 1.5,
        ..SamplingParams::greedy()
    };
    let got = kept(&[1.0, 2.0, 2.0, 0.0], &p);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, 1, "ties go to the lowest id");
}
