//! Per-request text handling: stop strings held back until they resolve,
//! and log-probabilities of a step's logits.
//!
//! ```text
//!   stops = ["</a>"]        held text      released
//!   piece "x<"          ─►  "<"            "x"      ("<" may start "</a>")
//!   piece "/b"          ─►  ""             "</b"    (no longer a prefix)
//!   piece "</"  "a>"    ─►  "</" ─► match  stop; the text ends before "</a>"
//! ```

use crate::request::{StepLogprobs, TokenLogprob};

/// Text of one request that may still become a stop string.
#[derive(Debug, Default)]
pub(crate) struct StopScanner {
    stops: Vec<String>,
    held: String,
}

/// What [`StopScanner::push`] found.
pub(crate) enum Scan {
    /// No match: this text is safe to release.
    Release(String),
    /// Stop string `k` matched: release this text (before the match) and
    /// stop.
    Stop(usize, String),
}

impl StopScanner {
    /// A scanner for these stop strings (empty strings are ignored).
    pub(crate) fn new(stops: &[String]) -> StopScanner {
        StopScanner {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            held: String::new(),
        }
    }

    /// Adds a piece of generated text.
    pub(crate) fn push(&mut self, piece: &str) -> Scan {
        if self.stops.is_empty() {
            return Scan::Release(piece.to_string());
        }
        self.held.push_str(piece);
        // The earliest match wins (ties: the first stop string listed).
        let hit = self
            .stops
            .iter()
            .enumerate()
            .filter_map(|(k, s)| self.held.find(s.as_str()).map(|at| (at, k)))
            .min();
        if let Some((at, k)) = hit {
            let before = self.held[..at].to_string();
            self.held.clear();
            return Scan::Stop(k, before);
        }
        // Hold the longest suffix that is a prefix of some stop string.
        let keep = self
            .held
            .char_indices()
            .map(|(i, _)| i)
            .find(|&i| {
                let tail = &self.held[i..];
                self.stops.iter().any(|s| s.starts_with(tail))
            })
            .unwrap_or(self.held.len());
        let out = self.held[..keep].to_string();
        self.held.drain(..keep);
        Scan::Release(out)
    }

    /// Releases whatever is held (the request ended without a match).
    pub(crate) fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

/// Log-probabilities of `chosen` and the `n_top` most likely tokens under
/// `logits` (`[n_vocab]`): a log-softmax in f64, NaN logits excluded.
pub(crate) fn logprobs(logits: &[f32], chosen: u32, n_top: usize) -> StepLogprobs {
    let max = logits
        .iter()
        .copied()
        .filter(|v| !v.is_nan())
        .fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits
        .iter()
        .filter(|v| !v.is_nan())
        .map(|&v| f64::from(v - max).exp())
        .sum();
    let log_z = f64::from(max) + sum.ln();
    let lp = |v: f32| -> f32 {
        if v.is_nan() {
            f32::NEG_INFINITY
        } else {
            (f64::from(v) - log_z) as f32
        }
    };
    let chosen_lp = logits
        .get(chosen as usize)
        .map_or(f32::NEG_INFINITY, |&v| lp(v));
    let mut top: Vec<(u32, f32)> = logits
        .iter()
        .enumerate()
        .filter(|(_, v)| !v.is_nan())
        .map(|(i, &v)| (i as u32, v))
        .collect();
    let by = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    let n = n_top.min(top.len());
    if n > 0 && n < top.len() {
        top.select_nth_unstable_by(n - 1, by);
    }
    top.truncate(n);
    top.sort_unstable_by(by);
    StepLogprobs {
        chosen: TokenLogprob {
            token: chosen,
            logprob: chosen_lp,
        },
        top: top
            .into_iter()
            .map(|(token, v)| TokenLogprob {
                token,
                logprob: lp(v),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&str]) -> (String, Option<usize>) {
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let mut sc = StopScanner::new(&stops);
        let mut out = String::new();
        for p in pieces {
            match sc.push(p) {
                Scan::Release(t) => out.push_str(&t),
                Scan::Stop(k, t) => {
                    out.push_str(&t);
                    return (out, Some(k));
                }
            }
        }
        out.push_str(&sc.finish());
        (out, None)
    }

    #[test]
    fn stop_string_across_pieces_is_cut_before_the_match() {
        assert_eq!(
            run(&["</a>"], &["x<", "/", "a", ">tail"]),
            ("x".into(), Some(0))
        );
        assert_eq!(run(&["</a>"], &["x<", "/b"]), ("x</b".into(), None));
        assert_eq!(run(&[], &["a", "b"]), ("ab".into(), None));
        // The earliest match wins, whichever stop string it is.
        assert_eq!(run(&["cd", "b"], &["abcd"]), ("a".into(), Some(1)));
    }

    #[test]
    fn held_text_is_released_as_soon_as_it_cannot_match() {
        let stops = vec!["STOP".to_string()];
        let mut sc = StopScanner::new(&stops);
        match sc.push("hello ST") {
            Scan::Release(t) => assert_eq!(t, "hello "),
            Scan::Stop(..) => panic!("no match yet"),
        }
        match sc.push("AY") {
            Scan::Release(t) => assert_eq!(t, "STAY"),
            Scan::Stop(..) => panic!("STAY is not STOP"),
        }
        // Multi-byte characters are held and released whole.
        match sc.push("é") {
            Scan::Release(t) => assert_eq!(t, "é"),
            Scan::Stop(..) => panic!(),
        }
    }

    #[test]
    fn logprobs_are_a_normalized_log_softmax() {
        let l = [2.0f32, 1.0, 0.0, f32::NAN];
        let lp = logprobs(&l, 1, 2);
        let p: f64 = [2.0f64, 1.0, 0.0].iter().map(|v| v.exp()).sum();
        assert!((f64::from(lp.chosen.logprob) - (1.0 - p.ln())).abs() < 1e-6);
        assert_eq!(lp.top.len(), 2);
        assert_eq!((lp.top[0].token, lp.top[1].token), (0, 1));
        assert!(lp.top[0].logprob > lp.top[1].logprob);
        assert_eq!(logprobs(&l, 3, 0).chosen.logprob, f32::NEG_INFINITY);
    }
}
