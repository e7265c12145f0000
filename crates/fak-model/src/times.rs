//! Where a forward pass spends its time, measured on every pass.
//!
//! [`Model::forward_into`](crate::Model::forward_into) reads the clock at
//! each phase boundary (about ten times per layer, tens of nanoseconds
//! each) and adds the laps to its [`Workspace`](crate::Workspace):
//!
//! ```text
//!   pass ─┬─ matmul     activation quantization + every weight product
//!         ├─ attention  K/V writes + scores, softmax, value sums
//!         └─ other      embeddings, norms, RoPE, SwiGLU, residual adds
//! ```
//!
//! Passes are kept apart by [`PassKind`]: a *decode* pass gives every
//! sequence in it exactly one token; any other pass is an *ingest* pass
//! (prefill, tool results, or decode tokens batched with them).

use std::time::{Duration, Instant};

/// What kind of pass a batch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassKind {
    /// Every sequence in the batch has one token.
    Decode,
    /// Some sequence has several tokens.
    Ingest,
}

/// Totals of the passes of one [`PassKind`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PhaseTimes {
    /// Passes.
    pub passes: u64,
    /// Batch tokens over those passes.
    pub tokens: u64,
    /// Activation quantization and weight products (the output head too).
    pub matmul: Duration,
    /// K/V writes and attention.
    pub attention: Duration,
    /// Everything else inside the pass.
    pub other: Duration,
}

impl PhaseTimes {
    /// Time inside the passes.
    pub fn total(&self) -> Duration {
        self.matmul + self.attention + self.other
    }

    /// `self + o`, field by field.
    pub fn plus(&self, o: &PhaseTimes) -> PhaseTimes {
        PhaseTimes {
            passes: self.passes + o.passes,
            tokens: self.tokens + o.tokens,
            matmul: self.matmul + o.matmul,
            attention: self.attention + o.attention,
            other: self.other + o.other,
        }
    }
}

/// Decode and ingest totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForwardTimes {
    /// Passes where every sequence had one token.
    pub decode: PhaseTimes,
    /// All other passes.
    pub ingest: PhaseTimes,
}

impl ForwardTimes {
    /// The totals of `kind`.
    pub fn of(&self, kind: PassKind) -> &PhaseTimes {
        match kind {
            PassKind::Decode => &self.decode,
            PassKind::Ingest => &self.ingest,
        }
    }

    fn of_mut(&mut self, kind: PassKind) -> &mut PhaseTimes {
        match kind {
            PassKind::Decode => &mut self.decode,
            PassKind::Ingest => &mut self.ingest,
        }
    }

    /// Both kinds together.
    pub fn all(&self) -> PhaseTimes {
        self.decode.plus(&self.ingest)
    }
}

/// A phase of a pass.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Phase {
    Matmul,
    Attention,
    Other,
}

/// The running clock of one pass.
pub(crate) struct PassClock {
    last: Instant,
    acc: PhaseTimes,
}

impl PassClock {
    /// Starts timing a pass of `tokens` batch tokens.
    pub(crate) fn start(tokens: usize) -> PassClock {
        PassClock {
            last: Instant::now(),
            acc: PhaseTimes {
                passes: 1,
                tokens: tokens as u64,
                ..PhaseTimes::default()
            },
        }
    }

    /// Charges the time since the last lap to `phase`.
    pub(crate) fn lap(&mut self, phase: Phase) {
        let now = Instant::now();
        let d = now - self.last;
        self.last = now;
        match phase {
            Phase::Matmul => self.acc.matmul += d,
            Phase::Attention => self.acc.attention += d,
            Phase::Other => self.acc.other += d,
        }
    }

    /// Adds this pass (up to its last lap) to `into`.
    pub(crate) fn finish(self, kind: PassKind, into: &mut ForwardTimes) {
        let t = into.of_mut(kind);
        *t = t.plus(&self.acc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laps_add_up_by_phase_and_kind() {
        let mut all = ForwardTimes::default();
        let mut c = PassClock::start(3);
        std::thread::sleep(Duration::from_millis(2));
        c.lap(Phase::Attention);
        c.lap(Phase::Other);
        c.finish(PassKind::Ingest, &mut all);
        assert_eq!(all.ingest.passes, 1);
        assert_eq!(all.ingest.tokens, 3);
        assert!(all.ingest.attention >= Duration::from_millis(2));
        assert!(all.ingest.other < all.ingest.attention);
        assert_eq!(all.decode, PhaseTimes::default());
        let mut c = PassClock::start(1);
        c.lap(Phase::Matmul);
        c.finish(PassKind::Decode, &mut all);
        assert_eq!(all.all().passes, 2);
        assert_eq!(all.all().tokens, 4);
        assert_eq!(all.all().total(), all.decode.total() + all.ingest.total());
    }
}
