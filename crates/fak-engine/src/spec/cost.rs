//! Whether a draft is worth the rows it adds to a pass, by what passes
//! measurably cost here.
//!
//! A draft of `d` tokens adds `d` rows to the pass that verifies it and
//! is expected to make `E(d) = q₁ + q₁q₂ + … + q₁⋯q_d` more tokens, `q_i`
//! being the chance that the draft's token `i` is accepted once the ones
//! before it were, measured per position for each sequence and source
//! ([`Acceptance::expected`]). What the rows cost is not a line: on a
//! memory-bound machine the first rows after one ride along with the
//! weight read, until the kernels' token tile fills, and then a row costs
//! its arithmetic. So the engine times its decode passes by their number
//! of rows ([`DecodeCost`]), and [`best_draft`] picks the length that makes
//! the pass the most tokens per second, or none:
//!
//! ```text
//!   t(n): measured decode passes        expected tokens per second
//!   │            ●──●                     of a draft of d:
//!   │        ●──●                           (1 + E(d)) / t(1 + d)
//!   │   ●─●─●                             d = 0 is plain decoding; a draft
//!   │ ●                                   must beat it by DRAFT_MARGIN
//!   └──────────────── rows n
//! ```
//!
//! Until the rows a choice needs have been timed, the older rule decides:
//! a line through every pass ([`PassCost`], [`drafting_pays`]) and a draft
//! length by the acceptance rate ([`Acceptance::draft_len`]).

/// Pass time against tokens in the pass, `t ≈ a + b·n`, fitted online by
/// least squares with exponential forgetting (recent passes count most).
#[derive(Debug, Clone, Copy, Default)]
pub struct PassCost {
    w: f64,
    n: f64,
    t: f64,
    nn: f64,
    nt: f64,
}

/// Weight kept by earlier passes at each new one.
const PASS_COST_DECAY: f64 = 0.98;

impl PassCost {
    /// Records a pass of `tokens` tokens that took `secs`.
    pub fn observe(&mut self, tokens: usize, secs: f64) {
        let n = tokens as f64;
        let d = PASS_COST_DECAY;
        self.w = self.w * d + 1.0;
        self.n = self.n * d + n;
        self.t = self.t * d + secs;
        self.nn = self.nn * d + n * n;
        self.nt = self.nt * d + n * secs;
    }

    /// The fitted `(a, b)`: seconds per pass and per token; `None` until
    /// passes of different sizes were seen (or the fit is not positive).
    pub fn fit(&self) -> Option<(f64, f64)> {
        let var = self.w * self.nn - self.n * self.n;
        if self.w < 2.0 || var <= 1e-9 * self.w * self.w {
            return None;
        }
        let b = (self.w * self.nt - self.n * self.t) / var;
        let a = (self.t - b * self.n) / self.w;
        (a > 0.0 && b > 0.0).then_some((a, b))
    }
}

/// Whether a sequence whose drafts are accepted at rate `rate` should
/// draft in a decode step of `batch` sequences, for pass costs `a + b·n`.
///
/// A plain step makes `m` tokens in `a + b·m`; drafting `D` more tokens
/// makes `m + r·D` in `a + b·(m + D)`. That is faster per token exactly
/// when `r > b·m / (a + b·m)`; a margin of 1.5 keeps measurement noise on
/// the side of plain decoding.
///
/// ```text
///   memory-bound (a ≫ b·m): threshold ≈ 0 → draft whenever anything is accepted
///   compute-bound (b·m ≫ a): threshold → 1 → never draft
/// ```
pub fn drafting_pays(a: f64, b: f64, batch: usize, rate: f64) -> bool {
    let m = batch.max(1) as f64;
    rate > 1.5 * b * m / (a + b * m)
}

/// Whether a sequence whose draft-model drafts are accepted at rate
/// `rate` should draft in a decode step of `batch` sequences, for target
/// pass costs `a + b·n` and a draft cost of `c` seconds per drafted token
/// (`None` until measured: try it).
///
/// A plain step makes `m` tokens in `T = a + b·m`. Drafting `k` tokens for
/// one sequence costs `k` more target rows and the draft model's work,
/// `k·(b + c)`, and gains `r·k` tokens worth `T/m` each. It pays when
/// `r > m·(b + c) / T`; a margin of 1.2 keeps noise on the side of plain
/// decoding.
///
/// ```text
///   a cheap draft model, memory-bound target (b, c ≪ a): pays at low rates
///   a draft model near the target's cost, or a compute-bound step: never
/// ```
pub fn model_drafting_pays(target: (f64, f64), c: Option<f64>, batch: usize, rate: f64) -> bool {
    let Some(c) = c else {
        return true;
    };
    let (a, b) = target;
    let m = batch.max(1) as f64;
    rate > 1.2 * m * (b + c) / (a + b * m)
}

/// A sequence's draft acceptance, two exponentially weighted measures:
/// the share of drafted tokens kept ([`Acceptance::rate`], from one half),
/// and for each draft position the chance that its token is kept once the
/// tokens before it were, from which [`Acceptance::expected`] tells how
/// many tokens a draft of a given length keeps.
///
/// The chance is kept per position because drafts are not alike: a
/// copied file or a tool call's JSON is right as a whole or wrong from
/// its first token (a draft of 7 keeps about 7·p), while natural text
/// loses a little at every token (about q + q² + …). One chance for all
/// positions would make long drafts of the first kind look poor.
#[derive(Debug, Clone, Copy)]
pub struct Acceptance {
    kept: f64,
    drafted: f64,
    /// Drafts that reached each position (position `i`: the draft had more
    /// than `i` tokens and its first `i` were kept).
    reached: [f64; ACCEPTANCE_POSITIONS],
    /// Of those, the ones whose token at the position was kept.
    kept_at: [f64; ACCEPTANCE_POSITIONS],
}

/// Draft positions [`Acceptance`] keeps chances for; later positions
/// take the last one's.
pub const ACCEPTANCE_POSITIONS: usize = 16;

impl Default for Acceptance {
    fn default() -> Acceptance {
        Acceptance {
            kept: 1.0,
            drafted: 2.0,
            reached: [0.0; ACCEPTANCE_POSITIONS],
            kept_at: [0.0; ACCEPTANCE_POSITIONS],
        }
    }
}

/// Weight kept by earlier drafts at each new one.
const ACCEPTANCE_DECAY: f64 = 0.8;

/// Weight kept by the per-position counts at each idle step: slow,
/// because a sequence whose drafts failed costs a pass each time it is
/// tried again.
const IDLE_DECAY: f64 = 0.9;

/// Where the per-position chances drift while a sequence does not draft:
/// high, so that however dear drafting is on this machine, a sequence
/// whose text turns repetitive is tried again.
const IDLE_TARGET: f64 = 0.8;

/// The chance of the first position before any draft.
const FIRST_PRIOR: f64 = 0.5;

impl Acceptance {
    /// Records a verified draft of `drafted` tokens of which `kept` were
    /// accepted.
    pub fn record(&mut self, drafted: usize, kept: usize) {
        let d = ACCEPTANCE_DECAY;
        self.kept = self.kept * d + kept as f64;
        self.drafted = self.drafted * d + drafted as f64;
        for (i, (reached, kept_at)) in self.reached.iter_mut().zip(&mut self.kept_at).enumerate() {
            *reached *= d;
            *kept_at *= d;
            if i < drafted && i <= kept {
                *reached += 1.0;
                *kept_at += f64::from(u8::from(i < kept));
            }
        }
    }

    /// A step in which the sequence did not draft because drafting did not
    /// pay: the rate drifts back toward one half (after about 15 such
    /// steps from a rate of zero it is above a quarter) and each
    /// position's chance toward [`IDLE_TARGET`], so a sequence whose text
    /// turns repetitive later is tried again.
    pub fn idle(&mut self) {
        let d = 0.75;
        self.kept = self.kept * d + (1.0 - d);
        self.drafted = self.drafted * d + 2.0 * (1.0 - d);
        let d = IDLE_DECAY;
        for (reached, kept) in self.reached.iter_mut().zip(&mut self.kept_at) {
            *reached = *reached * d + (1.0 - d);
            *kept = *kept * d + (1.0 - d) * IDLE_TARGET;
        }
    }

    /// The chance that the token at each draft position is kept once
    /// those before it were: the counts with one pseudo-draft at the
    /// previous position's chance (the first's: one half), so positions
    /// rarely reached lean on the one before.
    fn chances(&self) -> [f64; ACCEPTANCE_POSITIONS] {
        let mut q = [0.0; ACCEPTANCE_POSITIONS];
        let mut prev = FIRST_PRIOR;
        for ((qi, kept), reached) in q.iter_mut().zip(self.kept_at).zip(self.reached) {
            prev = ((kept + prev) / (reached + 1.0)).clamp(0.0, 1.0);
            *qi = prev;
        }
        q
    }

    /// Expected tokens kept of a draft of `d` tokens:
    /// `Σ_{i<d} Π_{j≤i} q_j` over the positions' chances.
    pub fn expected(&self, d: usize) -> f64 {
        self.expected_by_length().take(d).last().unwrap_or(0.0)
    }

    /// [`Acceptance::expected`] for drafts of 1, 2, 3, … tokens, each from
    /// the one before: the chances are worked out once.
    pub fn expected_by_length(&self) -> impl Iterator<Item = f64> {
        let q = self.chances();
        let (mut sum, mut p) = (0.0, 1.0);
        (0..).map(move |i: usize| {
            p *= q[i.min(ACCEPTANCE_POSITIONS - 1)];
            sum += p;
            sum
        })
    }

    /// The rate, in 0..=1.
    pub fn rate(&self) -> f64 {
        (self.kept / self.drafted.max(1e-9)).clamp(0.0, 1.0)
    }

    /// The draft length for a sequence at this rate: the full `max` above
    /// 60%, half above 30%, else 2.
    pub fn draft_len(&self, max: usize) -> usize {
        let r = self.rate();
        if r > 0.6 {
            max
        } else if r > 0.3 {
            (max / 2).max(1)
        } else {
            max.min(2)
        }
    }
}

/// Rows of a decode pass that [`DecodeCost`] keeps a time for.
pub const DECODE_ROWS: usize = 64;

/// Weight of a new time against what [`DecodeCost`] held for its rows
/// when the new one is slower, and when it is faster: a pass is slowed by
/// whatever else the machine does (and a first pass of a new size by
/// buffers growing), never sped up, so faster times count more.
const DECODE_COST_SLOWER: f64 = 0.25;
const DECODE_COST_FASTER: f64 = 0.5;

/// Decode passes after which a row count's time, not timed again, is
/// forgotten: a count that measured slow once is not chosen, so it would
/// never be timed again; forgotten, it is read off its neighbours, tried,
/// and timed afresh.
pub const DECODE_COST_STALE: u64 = 128;

/// Measured seconds of decode passes (passes with no prompt chunk, where
/// every row wants its logits: each decoding sequence's token and its
/// draft) by their number of rows, in two parts, because one grows with
/// the rows and the other with how long the sequences are:
///
/// ```text
///   pass time = rest(rows) + attention(rows) · Σ sequences' lengths
///               └ outside attention  └ attention per position of context
/// ```
///
/// Attention is charged per position of each *sequence*, not of each row:
/// a sequence's draft rows read its keys and values together, so on a
/// Zen 5, 8 rows of one Qwen2.5-Coder-1.5B sequence at 3,564 positions
/// spent 22 ms in attention against 6 ms for one row at 2,032, not 8 ×.
/// Without the split, a row count timed on a short chat and another timed
/// on a 4,000-token edit would be compared as if alike. Each part is a
/// weighted mean per row count; counts not timed yet are read off the
/// ones that were ([`DecodeCost::rest`]).
#[derive(Debug, Clone)]
pub struct DecodeCost {
    /// Time outside attention; row count `n` at `n - 1`; 0.0: not timed.
    rest: [f64; DECODE_ROWS],
    /// Attention seconds per position of the pass's sequences, likewise.
    attention: [f64; DECODE_ROWS],
    /// The decode pass (of `passes`) that last timed each row count.
    seen: [u64; DECODE_ROWS],
    /// Decode passes recorded.
    passes: u64,
}

impl Default for DecodeCost {
    fn default() -> DecodeCost {
        DecodeCost {
            rest: [0.0; DECODE_ROWS],
            attention: [0.0; DECODE_ROWS],
            seen: [0; DECODE_ROWS],
            passes: 0,
        }
    }
}

/// How [`DecodeCost::read`] goes on past the last timed row count.
#[derive(Debug, Clone, Copy)]
enum Onward {
    /// At the smaller of the two last counts' slope and this one (when
    /// known); with one count timed, at this one.
    Slope(Option<f64>),
    /// At the two last counts' slope, or flat.
    SecantOrFlat,
}

/// A weighted mean's update: faster times weigh more.
fn update(old: f64, new: f64) -> f64 {
    let w = if new < old {
        DECODE_COST_FASTER
    } else {
        DECODE_COST_SLOWER
    };
    old + w * (new - old)
}

impl DecodeCost {
    /// Records a decode pass of `rows` rows that took `secs`, of which
    /// `attention` in attention, for sequences of `positions` positions in
    /// all (each sequence's length with the token the pass samples).
    /// Passes of more than [`DECODE_ROWS`] rows, and times that are not
    /// finite and positive, are not kept.
    pub fn observe(&mut self, rows: usize, secs: f64, attention: f64, positions: f64) {
        let Some(i) = rows.checked_sub(1).filter(|&i| i < DECODE_ROWS) else {
            return;
        };
        if !(secs.is_finite() && secs > 0.0 && attention.is_finite() && attention >= 0.0) {
            return;
        }
        self.passes += 1;
        let rest = (secs - attention).max(0.0);
        let per = if positions > 0.0 {
            attention / positions
        } else {
            0.0
        };
        if self.value(&self.rest, rows).is_some() {
            self.rest[i] = update(self.rest[i], rest);
            self.attention[i] = update(self.attention[i], per);
        } else {
            self.rest[i] = rest;
            self.attention[i] = per;
        }
        self.seen[i] = self.passes;
    }

    /// `table`'s value for `rows` rows, if timed in the last
    /// [`DECODE_COST_STALE`] decode passes.
    fn value(&self, table: &[f64; DECODE_ROWS], rows: usize) -> Option<f64> {
        let i = rows.checked_sub(1)?;
        let fresh = self.passes.saturating_sub(*self.seen.get(i)?) < DECODE_COST_STALE;
        let timed = self.seen.get(i).is_some_and(|&s| s > 0);
        (timed && fresh).then(|| table.get(i).copied()).flatten()
    }

    /// `table` at `rows` rows: timed; else on the line between the
    /// nearest timed counts below and above (a count that turns out
    /// dearer than the line, such as the first row of a new token tile,
    /// is timed once tried and then known); else on from the last timed
    /// count as `onward` says. `None` below the first timed count, past
    /// [`DECODE_ROWS`], and past the last with no slope to go on.
    fn read(&self, table: &[f64; DECODE_ROWS], rows: usize, onward: Onward) -> Option<f64> {
        if rows == 0 || rows > DECODE_ROWS {
            return None;
        }
        if let Some(t) = self.value(table, rows) {
            return Some(t);
        }
        let below = (1..rows).rev().find(|&n| self.value(table, n).is_some())?;
        let tb = self.value(table, below)?;
        if let Some(above) = (rows + 1..=DECODE_ROWS).find(|&n| self.value(table, n).is_some()) {
            let ta = self.value(table, above)?;
            let f = (rows - below) as f64 / (above - below) as f64;
            return Some(tb + f * (ta - tb));
        }
        let secant = (1..below)
            .rev()
            .find_map(|n| Some((tb - self.value(table, n)?) / (below - n) as f64));
        let per_row = match onward {
            Onward::Slope(slope) => match (secant, slope) {
                (Some(s), Some(b)) => s.min(b),
                (s, b) => s.or(b)?,
            },
            Onward::SecantOrFlat => secant.unwrap_or(0.0),
        };
        Some(tb + per_row.max(0.0) * (rows - below) as f64)
    }

    /// The time outside attention of a decode pass of `rows` rows
    /// ([`DecodeCost::read`]; `slope`: seconds per row to go on with past
    /// the last timed count, optimistic so that longer drafts get tried
    /// and timed).
    pub fn rest(&self, rows: usize, slope: Option<f64>) -> Option<f64> {
        self.read(&self.rest, rows, Onward::Slope(slope))
    }

    /// The time of a decode pass of `rows` rows over sequences of
    /// `positions` positions in all.
    pub fn time(&self, rows: usize, positions: f64, slope: Option<f64>) -> Option<f64> {
        let rest = self.rest(rows, slope)?;
        let attention = self.read(&self.attention, rows, Onward::SecantOrFlat)?;
        Some(rest + attention * positions)
    }
}

/// A decode pass as planned so far: its rows, the tokens they are
/// expected to make, and its sequences' positions (their lengths, each
/// with the token the pass samples).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PassSoFar {
    /// Rows in the pass.
    pub rows: usize,
    /// Tokens the rows are expected to make.
    pub tokens: f64,
    /// The sequences' positions in all.
    pub positions: f64,
}

impl PassSoFar {
    /// A decode pass of `sequences` plain rows whose sequences hold
    /// `positions` positions in all.
    pub fn plain(sequences: usize, positions: f64) -> PassSoFar {
        PassSoFar {
            rows: sequences,
            tokens: sequences as f64,
            positions,
        }
    }

    /// Adds a draft of `d` tokens expected to keep `kept`.
    pub fn add(&mut self, d: usize, kept: f64) {
        self.rows += d;
        self.tokens += kept;
    }
}

/// How much more tokens per second a draft's pass must be expected to make
/// than the pass without it: noise stays on the side of plain decoding.
pub const DRAFT_MARGIN: f64 = 1.05;

/// What [`best_draft`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DraftChoice {
    /// Draft this many tokens.
    Draft(usize),
    /// No draft length pays.
    Plain,
    /// The rows the choice needs were not timed yet.
    Unmeasured,
}

/// What [`best_draft`] weighs: the pass, and the sequence that would draft.
#[derive(Debug, Clone, Copy)]
pub struct DraftAsk<'a> {
    /// The decode pass as planned so far.
    pub pass: PassSoFar,
    /// The source's acceptance for this sequence.
    pub acceptance: &'a Acceptance,
    /// Most tokens the draft may have.
    pub max: usize,
}

/// The draft length in `1..=ask.max` whose pass makes the most tokens per
/// second by `cost` (`slope`: seconds per row to extrapolate with, see
/// [`DecodeCost::rest`]), if that beats the pass without a draft by
/// [`DRAFT_MARGIN`].
pub fn best_draft(cost: &DecodeCost, slope: Option<f64>, ask: DraftAsk<'_>) -> DraftChoice {
    let pass = ask.pass;
    let Some(base) = cost.time(pass.rows, pass.positions, slope) else {
        return DraftChoice::Unmeasured;
    };
    let mut best = (0, pass.tokens / base * DRAFT_MARGIN);
    let mut timed = false;
    for (d, kept) in (1..=ask.max).zip(ask.acceptance.expected_by_length()) {
        let Some(t) = cost.time(pass.rows + d, pass.positions, slope) else {
            break;
        };
        timed = true;
        let rate = (pass.tokens + kept) / t;
        if rate > best.1 {
            best = (d, rate);
        }
    }
    match best.0 {
        _ if !timed && ask.max > 0 => DraftChoice::Unmeasured,
        0 => DraftChoice::Plain,
        d => DraftChoice::Draft(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_cost_fits_a_line() {
        let mut c = PassCost::default();
        assert!(c.fit().is_none());
        for k in 0..50 {
            let n = 1 + k % 9;
            c.observe(n, 0.020 + 0.002 * n as f64);
        }
        let (a, b) = c.fit().expect("a fit");
        assert!(
            (a - 0.020).abs() < 1e-9 && (b - 0.002).abs() < 1e-9,
            "{a} {b}"
        );
        // One size only: no fit.
        let mut one = PassCost::default();
        for _ in 0..10 {
            one.observe(1, 0.02);
        }
        assert!(one.fit().is_none());
    }

    #[test]
    fn drafting_pays_when_memory_bound_not_when_compute_bound() {
        // 20 ms to read the weights, 0.5 ms per token of compute.
        assert!(drafting_pays(0.020, 0.0005, 1, 0.1));
        assert!(!drafting_pays(0.020, 0.0005, 1, 0.03));
        // 64 sequences: a pass is mostly compute; only near-certain drafts.
        assert!(!drafting_pays(0.020, 0.0005, 64, 0.5));
        let mut r = Acceptance::default();
        assert_eq!(r.draft_len(8), 4);
        for _ in 0..10 {
            r.record(8, 8);
        }
        assert_eq!(r.draft_len(8), 8);
        for _ in 0..20 {
            r.record(8, 0);
        }
        assert_eq!(r.draft_len(8), 2);
        // Idle steps bring it back toward one half: tried again.
        let low = r.rate();
        for _ in 0..15 {
            r.idle();
        }
        assert!(r.rate() > 0.25 && r.rate() > low, "{low} -> {}", r.rate());
    }

    #[test]
    fn expected_tokens_follow_how_drafts_fail() {
        let mut r = Acceptance::default();
        // Before any draft: one half at every position.
        assert!((r.expected(3) - 0.875).abs() < 1e-12, "{}", r.expected(3));
        // Whole or nothing (a copied file, a tool call): 9 drafts in 10
        // kept whole (the last miss five drafts back); a draft of 7
        // keeps nearly 7 · q₁, far more than a chance per token would
        // give at the same share kept.
        for k in 0..60 {
            r.record(7, if k % 10 == 4 { 0 } else { 7 });
        }
        let e = r.expected(7);
        let q1 = r.expected(1);
        assert!((e - 7.0 * q1).abs() < 0.35 && e > 5.0, "{e} {q1}");
        // Natural text: every token kept at 0.5 whatever came before.
        let mut n = Acceptance::default();
        for k in 0..400usize {
            // Kept lengths 0, 1, 2, … with chances 1/2, 1/4, 1/8, …
            let kept = (k.trailing_ones() as usize).min(7);
            n.record(7, kept);
        }
        // (0.99 in the long run; the recent drafts weigh most.)
        let e = n.expected(7);
        assert!(e > 0.7 && e < 1.5, "{e}");
        assert!(
            n.expected(2) > 0.5 && n.expected(2) < 1.0,
            "{}",
            n.expected(2)
        );
        // Drafts cut at their first token: nothing expected.
        let mut z = Acceptance::default();
        for _ in 0..40 {
            z.record(2, 0);
        }
        assert!(z.expected(7) < 0.15, "{}", z.expected(7));
        // Idle, the chances drift up past any threshold below the target.
        for _ in 0..40 {
            z.idle();
        }
        let e = z.expected(1);
        assert!(e > 0.6 && e <= IDLE_TARGET + 1e-9, "{e}");
    }

    #[test]
    fn decode_cost_reads_untimed_rows_off_timed_ones() {
        let mut c = DecodeCost::default();
        assert_eq!(c.rest(1, Some(0.001)), None);
        c.observe(1, 0.010, 0.0, 100.0);
        assert_eq!(c.rest(1, None), Some(0.010));
        // One count timed: past it only with a slope.
        assert_eq!(c.rest(3, None), None);
        assert!((c.rest(3, Some(0.001)).unwrap() - 0.012).abs() < 1e-12);
        c.observe(5, 0.014, 0.0, 100.0);
        // Between two timed counts: on the line.
        assert!((c.rest(3, None).unwrap() - 0.012).abs() < 1e-12);
        // Past the last: at the two last counts' slope, or a smaller one.
        assert!((c.rest(9, None).unwrap() - 0.018).abs() < 1e-12);
        assert!((c.rest(9, Some(0.0005)).unwrap() - 0.016).abs() < 1e-12);
        // Newer times weigh in, faster ones more.
        c.observe(1, 0.020, 0.0, 100.0);
        assert!((c.rest(1, None).unwrap() - 0.0125).abs() < 1e-12);
        c.observe(1, 0.0105, 0.0, 100.0);
        assert!((c.rest(1, None).unwrap() - 0.0115).abs() < 1e-12);
        // A count not timed again for long is forgotten, then read off
        // its neighbours (here: past the last count timed, at a slope).
        for _ in 0..DECODE_COST_STALE {
            c.observe(1, 0.0115, 0.0, 100.0);
        }
        assert_eq!(c.rest(5, None), None);
        assert!((c.rest(5, Some(0.001)).unwrap() - 0.0155).abs() < 1e-12);
        // Nothing below the first count, nothing past the table, nothing
        // from a bad time.
        let mut d = DecodeCost::default();
        d.observe(4, 0.01, 0.0, 1.0);
        assert_eq!(d.rest(2, Some(0.001)), None);
        assert_eq!(d.rest(DECODE_ROWS + 1, Some(0.001)), None);
        d.observe(0, 0.01, 0.0, 1.0);
        d.observe(2, f64::NAN, 0.0, 1.0);
        d.observe(2, 0.01, -1.0, 1.0);
        assert_eq!(d.rest(2, None), None);
    }

    #[test]
    fn attention_is_charged_per_position_of_the_sequences() {
        // One row at 2,000 positions: 5 ms of attention; eight rows of the
        // same sequence at 4,000: 16 ms, not 8 × 2 × 5.
        let mut c = DecodeCost::default();
        c.observe(1, 0.013, 0.005, 2000.0);
        c.observe(8, 0.040, 0.016, 4000.0);
        assert!((c.rest(1, None).unwrap() - 0.008).abs() < 1e-12);
        assert!((c.rest(8, None).unwrap() - 0.024).abs() < 1e-12);
        // The same passes at 1,000 positions.
        let t1 = c.time(1, 1000.0, None).unwrap();
        let t8 = c.time(8, 1000.0, None).unwrap();
        assert!((t1 - 0.0105).abs() < 1e-12, "{t1}");
        assert!((t8 - 0.028).abs() < 1e-12, "{t8}");
        // Between and past the timed counts, attention is read as the
        // rest is; past the last count with nothing to go on, flat.
        let t4 = c.time(4, 1000.0, None).unwrap();
        assert!(t4 > t1 && t4 < t8, "{t4}");
        let mut one = DecodeCost::default();
        one.observe(1, 0.013, 0.005, 2000.0);
        let t = one.time(3, 2000.0, Some(0.001)).unwrap();
        assert!((t - 0.015).abs() < 1e-12, "{t}");
    }

    #[test]
    fn best_draft_follows_the_timed_costs() {
        // SmolLM2-135M Q8_0 on a Zen 5 (`fak bench verify`): a one-row
        // pass 4.2 ms, 3 rows 1.18 of it, 8 rows 1.66.
        let mut c = DecodeCost::default();
        for (n, t) in [(1, 4.2), (3, 4.96), (8, 6.97)] {
            c.observe(n, t * 1e-3, 0.0, 0.0);
        }
        // Acceptances whose draft tokens are each kept at `q`.
        let at = |q: f64| {
            let mut a = Acceptance::default();
            for k in 0..400u32 {
                // The kept lengths of drafts of 16 at a chance of q.
                let u = f64::from(k.wrapping_mul(2_654_435_761) >> 8) / f64::from(1u32 << 24);
                let kept = ((u.ln() / q.ln()).floor() as usize).min(16);
                a.record(16, kept);
            }
            a
        };
        let accs: Vec<(f64, Acceptance)> = [0.05, 0.3, 0.5, 0.7, 0.9, 0.95, 0.97, 0.99]
            .into_iter()
            .map(|q| (q, at(q)))
            .collect();
        let acc = |q: f64| &accs.iter().find(|(x, _)| *x == q).expect("a chance").1;
        let ask = |q: f64, max: usize| DraftAsk {
            pass: PassSoFar::plain(1, 0.0),
            acceptance: acc(q),
            max,
        };
        // Natural text: short drafts only, and none at all when hopeless.
        assert!(
            matches!(best_draft(&c, None, ask(0.3, 7)), DraftChoice::Draft(1..=2)),
            "{:?}",
            best_draft(&c, None, ask(0.3, 7))
        );
        assert_eq!(best_draft(&c, None, ask(0.05, 7)), DraftChoice::Plain);
        // A file being copied: the whole tile.
        assert_eq!(best_draft(&c, None, ask(0.95, 7)), DraftChoice::Draft(7));
        // Past the last timed count, on at the last slope (tried, then timed).
        assert_eq!(best_draft(&c, None, ask(0.99, 15)), DraftChoice::Draft(15));
        // A step between two timed counts, once timed, is avoided: with a
        // pass of 9 rows as dear as one of 16, a draft of 8 is never the
        // best.
        c.observe(16, 9.9e-3, 0.0, 0.0);
        c.observe(9, 9.8e-3, 0.0, 0.0);
        for q in [0.5, 0.7, 0.9, 0.97] {
            let d = best_draft(&c, None, ask(q, 15));
            assert!(!matches!(d, DraftChoice::Draft(8..=14)), "{q}: {d:?}");
        }
        // Passes that cost their rows in full (compute-bound) never draft
        // below certainty.
        let mut flat = DecodeCost::default();
        for n in [1, 8, 16] {
            flat.observe(n, n as f64 * 1e-3, 0.0, 0.0);
        }
        let eight = DraftAsk {
            pass: PassSoFar::plain(8, 0.0),
            ..ask(0.9, 7)
        };
        assert_eq!(best_draft(&flat, None, eight), DraftChoice::Plain);
        // Nothing timed: the caller decides.
        let none = DecodeCost::default();
        assert_eq!(
            best_draft(&none, None, ask(0.9, 7)),
            DraftChoice::Unmeasured
        );
        assert_eq!(best_draft(&c, None, ask(0.9, 0)), DraftChoice::Plain);
    }
}
