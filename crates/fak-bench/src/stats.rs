//! Summary statistics of timing samples: one family over one sort.
//!
//! ```text
//! median(xs)         middle value; mean of the two middle ones for even lengths
//! percentile(xs, p)  nearest rank: the ⌈p/100 · n⌉-th smallest (at least the 1st)
//! stats(xs)          min, median, mean, percentile 90, max
//! every one is 0 for an empty sample
//! ```

use serde::Serialize;

/// Summary statistics of a sample, in the sample's unit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    pub min: f64,
    pub median: f64,
    pub mean: f64,
    pub p90: f64,
    pub max: f64,
}

/// `xs` in ascending order (total order: NaNs sort last).
fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// Median of an ascending sample; 0 when empty.
fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Nearest-rank `p`-th percentile of an ascending sample; 0 when empty.
fn percentile_sorted(v: &[f64], p: f64) -> f64 {
    let n = v.len();
    if n == 0 {
        return 0.0;
    }
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    v[rank.clamp(1, n) - 1]
}

/// Median of `xs` (mean of the two middle values for even lengths); 0 when empty.
pub fn median(xs: &[f64]) -> f64 {
    median_sorted(&sorted(xs))
}

/// Nearest-rank `p`-th percentile (`p` in 0..=100) of an unsorted sample;
/// 0 when empty.
pub fn percentile(xs: &[f64], p: f64) -> f64 {
    percentile_sorted(&sorted(xs), p)
}

/// Min, median, mean, nearest-rank 90th percentile and max of `xs`.
pub fn stats(xs: &[f64]) -> Stats {
    let v = sorted(xs);
    let (Some(&min), Some(&max)) = (v.first(), v.last()) else {
        return Stats {
            min: 0.0,
            median: 0.0,
            mean: 0.0,
            p90: 0.0,
            max: 0.0,
        };
    };
    Stats {
        min,
        median: median_sorted(&v),
        mean: v.iter().sum::<f64>() / v.len() as f64,
        p90: percentile_sorted(&v, 90.0),
        max,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn median_and_stats() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        let s = stats(&[5.0, 1.0, 4.0, 2.0, 3.0, 6.0, 7.0, 8.0, 9.0, 10.0]);
        assert_eq!(
            s,
            Stats {
                min: 1.0,
                median: 5.5,
                mean: 5.5,
                p90: 9.0,
                max: 10.0
            }
        );
        assert_eq!(stats(&[]).max, 0.0);
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let xs: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&xs, 50.0), 10.0);
        assert_eq!(percentile(&xs, 95.0), 19.0);
        assert_eq!(percentile(&xs, 0.0), 1.0);
        assert_eq!(percentile(&xs, 100.0), 20.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }

    proptest! {
        /// The median lies between min and max and splits the sample; the
        /// 90th percentile of `stats` is `percentile(xs, 90)`.
        #[test]
        fn median_is_central(xs in proptest::collection::vec(-1e6f64..1e6, 1..50)) {
            let m = median(&xs);
            let s = stats(&xs);
            prop_assert!(s.min <= m && m <= s.max);
            prop_assert!(s.min <= s.p90 && s.p90 <= s.max);
            prop_assert_eq!(s.p90, percentile(&xs, 90.0));
            let below = xs.iter().filter(|&&x| x < m).count();
            let above = xs.iter().filter(|&&x| x > m).count();
            prop_assert!(below <= xs.len() / 2 && above <= xs.len() / 2);
        }
    }
}
