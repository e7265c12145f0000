//! The sampler as it was before it stopped sorting the vocabulary, kept as
//! the baseline of `fak bench sampling` and as the oracle of the sampling
//! tests. **Not for production**: it sorts every candidate on every draw
//! (O(V log V)); [`Sampler`](crate::Sampler) keeps the same tokens with the
//! same probabilities without that sort.
//!
//! ```text
//!   logits ─► every non-NaN (id, logit) ─► top-k (select) ─► sort all
//!          (descending logit, ties ascending id) ─► softmax(/T), f64 sum
//!          ─► top-p (f32 running sum) ─► min-p ─► [walk with one draw]
//! ```
//!
//! The exponential is a parameter: the tests pass fak-kernels' `expf` (the
//! sampler's own, so the comparison is exact whatever the platform's libm),
//! the benchmark passes `f32::exp` (libm's, which the old sampler called).
//! No penalties (they change the logits before either sampler runs).

use rand::Rng;

use super::SamplingParams;

/// Fills `c` with the candidates that survive top-k, top-p and min-p and
/// their probabilities (each cut keeps at least one), by descending logit,
/// ties by ascending id. `c` is empty when every logit is NaN (or there
/// are none). A weight is `exp((logit − max) / T)`, 1 for the logits equal
/// to the maximum (so `+inf` logits share the mass), and a probability is
/// `(weight / sum) as f32` with the sum in f64.
///
/// Greedy settings (`temperature <= 0`) are not its business: it divides
/// by the temperature as given.
pub fn full_sort(
    logits: &[f32],
    p: &SamplingParams,
    exp: impl Fn(f32) -> f32,
    c: &mut Vec<(u32, f32)>,
) {
    c.clear();
    c.extend(
        logits
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.is_nan())
            .map(|(i, &v)| (i as u32, v)),
    );
    if c.is_empty() {
        return;
    }
    let by_logit = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if p.top_k > 0 && p.top_k < c.len() {
        c.select_nth_unstable_by(p.top_k - 1, by_logit);
        c.truncate(p.top_k);
    }
    c.sort_unstable_by(by_logit);
    let max = c[0].1;
    let mut sum = 0.0f64;
    for e in c.iter_mut() {
        e.1 = if e.1 == max {
            1.0
        } else {
            exp((e.1 - max) / p.temperature)
        };
        sum += f64::from(e.1);
    }
    for e in c.iter_mut() {
        e.1 = (f64::from(e.1) / sum) as f32;
    }
    if p.top_p < 1.0 {
        let mut acc = 0.0f32;
        let mut keep = c.len();
        for (i, e) in c.iter().enumerate() {
            acc += e.1;
            if acc >= p.top_p {
                keep = i + 1;
                break;
            }
        }
        c.truncate(keep.max(1));
    }
    if p.min_p > 0.0 {
        let floor = c[0].1 * p.min_p;
        let keep = c.iter().take_while(|e| e.1 >= floor).count();
        c.truncate(keep.max(1));
    }
}

/// [`full_sort`], then one draw: `u = rng.gen::<f32>() · Σp`, walking the
/// kept candidates in their order. Returns the token and how many
/// candidates were kept (`c` holds them); `None` when none were.
pub fn full_sort_draw(
    logits: &[f32],
    p: &SamplingParams,
    exp: impl Fn(f32) -> f32,
    rng: &mut impl Rng,
    c: &mut Vec<(u32, f32)>,
) -> Option<(u32, usize)> {
    full_sort(logits, p, exp, c);
    if c.is_empty() {
        return None;
    }
    let total: f32 = c.iter().map(|e| e.1).sum();
    let mut r = rng.gen::<f32>() * total;
    for e in c.iter() {
        if r < e.1 {
            return Some((e.0, c.len()));
        }
        r -= e.1;
    }
    c.last().map(|e| (e.0, c.len()))
}
