//! `fak bench evict`: the cost of removing a span from one sequence.
//!
//! ```text
//!   tokens: LCG ids 1..=L (one stream, crate::LcgIds); span = [at, at + S)
//!   root  = the L tokens, computed once (untimed); every rep forks it
//!   exact    evict(fork, span, Exact)   truncate to `at`, recompute the tail   (timed)
//!   reingest fork of the first `at` tokens, ingest ids at+S..L               (timed)
//!   shift    evict(fork, span, Shift)   APPROXIMATE: move rows, re-rope keys  (timed)
//!   full     a fresh sequence prefilling all L - S remaining tokens           (timed)
//!   span     fork of the first `at` tokens, ingest the span's S tokens        (timed)
//! ```
//!
//! With `at = L - S - k` the span is the sequence's last S tokens but k: an
//! agent evicting its last tool result (S = R) with the k tokens it
//! generated after it; `exact / span` is then "eviction cost over that
//! result's ingest cost".
//!
//! Exact eviction is truncation plus re-ingesting the tail, so its cost
//! should equal `reingest`; `full` is what an engine without exact
//! eviction would pay.

use std::fmt::Write as _;
use std::time::Instant;

use fak_engine::{EvictMode, PagedKvConfig, PrefixCache, Sequences, Tenant};
use serde::Serialize;

use crate::error::{params, Result};
use crate::{median, LcgIds, ModelSpec, RunHeader};

/// Schema tag of [`EvictReport`].
pub const SCHEMA: &str = "fak-bench-evict/1";

/// What `fak bench evict` measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    pub model: ModelSpec,
    /// Sequence length L.
    pub len: usize,
    /// Span length S.
    pub span: usize,
    /// Span start (`None`: the middle of the sequence).
    pub at: Option<usize>,
    /// Measured repetitions (median reported).
    pub reps: usize,
    /// Most tokens per forward call.
    pub ubatch: usize,
}

/// Median seconds of each operation.
#[derive(Debug, Clone, Serialize)]
pub struct EvictTimes {
    pub exact_s: f64,
    pub reingest_s: f64,
    pub shift_s: f64,
    pub full_recompute_s: f64,
    /// exact / reingest (the target: at most 1).
    pub exact_over_reingest: f64,
    /// Ingesting the span's own tokens after the kept prefix.
    pub span_ingest_s: f64,
    /// exact / span_ingest.
    pub exact_over_span_ingest: f64,
    pub exact_s_reps: Vec<f64>,
    pub reingest_s_reps: Vec<f64>,
}

/// The JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct EvictReport {
    /// Every key but `engine_version`, which this schema never had.
    #[serde(flatten)]
    pub header: RunHeader,
    pub len: usize,
    pub span: usize,
    pub at: usize,
    pub tail_tokens: usize,
    pub reps: usize,
    pub times: EvictTimes,
}

/// The span start of `p`, once the span is checked to lie strictly inside
/// the sequence (`0 < at`, `at + span < len`, without overflow).
///
/// # Errors
///
/// [`Error::Params`](crate::Error::Params) naming the values.
pub fn check(p: &Params) -> Result<usize> {
    let at = p.at.unwrap_or(p.len.saturating_sub(p.span) / 2);
    let inside = at
        .checked_add(p.span)
        .is_some_and(|end| at > 0 && end < p.len);
    if p.reps == 0 || p.span == 0 || !inside {
        return Err(params(format!(
            "need --reps >= 1, --span >= 1 and 0 < --at, at + span < --len \
             (got at {at}, span {}, len {})",
            p.span, p.len
        )));
    }
    Ok(at)
}

/// Runs the protocol (see the module docs); progress lines on stderr.
///
/// # Errors
///
/// A span that is empty or not strictly inside the sequence, `reps` of 0,
/// loading the model, model and KV errors.
pub fn run(p: &Params) -> Result<EvictReport> {
    let at = check(p)?;
    let model = p.model.load()?;
    let ids: Vec<u32> = LcgIds::take(model.config().n_vocab, p.len);
    let tail: Vec<u32> = ids[at + p.span..].to_vec();
    let remaining: Vec<u32> = [&ids[..at], &tail[..]].concat();
    let sizes = PagedKvConfig::for_sequences(16, 6, p.len.saturating_add(16));
    let mut seqs = Sequences::new(&model, sizes, PrefixCache::Off, p.ubatch)?;
    eprintln!("bench evict: computing the {}-token sequence", p.len);
    let root = seqs.create(Tenant(0))?;
    seqs.ingest(&model, root, &ids)?;
    let mut exact = Vec::new();
    let mut reingest = Vec::new();
    let mut shift = Vec::new();
    let mut full = Vec::new();
    let mut span_in = Vec::new();
    let span_ids: Vec<u32> = ids[at..at + p.span].to_vec();
    for rep in 0..=p.reps {
        let s = seqs.fork(root)?;
        let t = Instant::now();
        seqs.evict(&model, s, at..at + p.span, EvictMode::Exact)?;
        let e = t.elapsed().as_secs_f64();
        seqs.free(s)?;

        let s = seqs.fork(root)?;
        seqs.truncate(s, at)?;
        let t = Instant::now();
        seqs.ingest(&model, s, &tail)?;
        let r = t.elapsed().as_secs_f64();
        seqs.free(s)?;

        let s = seqs.fork(root)?;
        let t = Instant::now();
        seqs.evict(&model, s, at..at + p.span, EvictMode::Shift)?;
        let sh = t.elapsed().as_secs_f64();
        seqs.free(s)?;

        let s = seqs.create(Tenant(0))?;
        let t = Instant::now();
        seqs.ingest(&model, s, &remaining)?;
        let f = t.elapsed().as_secs_f64();
        seqs.free(s)?;
        let s = seqs.fork(root)?;
        seqs.truncate(s, at)?;
        let t = Instant::now();
        seqs.ingest(&model, s, &span_ids)?;
        let si = t.elapsed().as_secs_f64();
        seqs.free(s)?;
        if rep > 0 {
            span_in.push(si);
            exact.push(e);
            reingest.push(r);
            shift.push(sh);
            full.push(f);
        }
        eprintln!("bench evict: rep {rep}/{} done", p.reps);
    }
    let (e, r) = (median(&exact), median(&reingest));
    let mut header = RunHeader::model_run(SCHEMA, &p.model.path, &model)?;
    header.engine_version = None;
    Ok(EvictReport {
        header,
        len: p.len,
        span: p.span,
        at,
        tail_tokens: tail.len(),
        reps: p.reps,
        times: EvictTimes {
            exact_s: e,
            reingest_s: r,
            shift_s: median(&shift),
            full_recompute_s: median(&full),
            exact_over_reingest: e / r.max(1e-12),
            span_ingest_s: median(&span_in),
            exact_over_span_ingest: e / median(&span_in).max(1e-12),
            exact_s_reps: exact,
            reingest_s_reps: reingest,
        },
    })
}

impl EvictReport {
    /// Human-readable summary.
    pub fn table(&self) -> String {
        let t = &self.times;
        let mut s = format!(
            "remove {} of {} tokens at {} ({} tail tokens):\n",
            self.span, self.len, self.at, self.tail_tokens
        );
        let _ = writeln!(s, "  exact evict      {:>9.1} ms", t.exact_s * 1e3);
        let _ = writeln!(s, "  re-ingest tail   {:>9.1} ms", t.reingest_s * 1e3);
        let _ = writeln!(s, "  exact/re-ingest  {:>9.3}", t.exact_over_reingest);
        let _ = writeln!(s, "  shift (approx.)  {:>9.1} ms", t.shift_s * 1e3);
        let _ = writeln!(s, "  ingest the span  {:>9.1} ms", t.span_ingest_s * 1e3);
        let _ = writeln!(s, "  exact/span       {:>9.3}", t.exact_over_span_ingest);
        let _ = writeln!(s, "  full recompute   {:>9.1} ms", t.full_recompute_s * 1e3);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    fn params_at(at: Option<usize>, span: usize, len: usize) -> Params {
        Params {
            model: ModelSpec {
                path: "/nonexistent.gguf".into(),
                threads: None,
            },
            len,
            span,
            at,
            reps: 1,
            ubatch: 512,
        }
    }

    /// A span start near `usize::MAX` used to wrap `at + span` past the
    /// check and then panic slicing the ids; it is refused before the
    /// model is loaded.
    #[test]
    fn spans_outside_the_sequence_are_refused_before_loading() {
        for (at, span, len) in [
            (Some(usize::MAX - 10), 64, 1100),
            (Some(usize::MAX), 1, 1100),
            (Some(1), usize::MAX, 1100),
            (Some(0), 64, 1100),
            (Some(1036), 64, 1100),
            (None, 0, 1100),
        ] {
            let p = params_at(at, span, len);
            assert!(
                matches!(run(&p), Err(Error::Params(_))),
                "at {at:?} span {span} len {len}"
            );
        }
        assert_eq!(check(&params_at(None, 64, 1100)).ok(), Some(518));
        assert_eq!(check(&params_at(Some(1035), 64, 1100)).ok(), Some(1035));
    }
}
