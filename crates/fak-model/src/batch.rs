//! A ragged batch: tokens of one or more sequences, each at its own position.

/// Identifies a sequence inside a [`crate::KvStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeqId(pub u32);

/// Whether the forward pass should return logits for a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogitsWanted {
    /// Compute the output projection for this token.
    Yes,
    /// Skip it (prefill tokens whose next-token distribution is not needed).
    No,
}

/// One token of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchToken {
    /// Vocabulary id.
    pub token: u32,
    /// Position of the token in its sequence (0-based).
    pub pos: u32,
    /// The sequence the token belongs to.
    pub seq: SeqId,
    /// Whether to return logits for this token.
    pub logits: LogitsWanted,
}

/// A ragged batch of tokens.
///
/// Rules checked by the forward pass: within one sequence, the batch's
/// positions are consecutive and ascending, and the first one equals the
/// number of positions the KV store already holds for that sequence (a
/// sequence's cache is always a gap-free prefix).
#[derive(Debug, Clone, Default)]
pub struct Batch {
    /// Tokens in batch order.
    pub tokens: Vec<BatchToken>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Batch {
        Batch::default()
    }

    /// Appends the tokens of one sequence starting at `start_pos`, asking for
    /// logits only for the last one when `last_logits` is `LogitsWanted::Yes`.
    pub fn push_seq(&mut self, seq: SeqId, start_pos: u32, ids: &[u32], last_logits: LogitsWanted) {
        let n = ids.len();
        for (i, &token) in ids.iter().enumerate() {
            let logits = if i + 1 == n {
                last_logits
            } else {
                LogitsWanted::No
            };
            self.tokens.push(BatchToken {
                token,
                pos: start_pos + i as u32,
                seq,
                logits,
            });
        }
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the batch holds no token.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}
