//! The crate's single error type.
//!
//! Every variant names the sequence (or configuration field) at fault and the
//! numbers involved, so a rejected call can be diagnosed from the message.

use crate::{SeqSlot, Tenant};

/// Everything a [`crate::KvManager`] call can reject.
///
/// Every fallible call is atomic: when it returns an error, the manager's
/// state (block tables, refcounts, free list, cache, prefix index) is exactly
/// what it was before the call.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KvError {
    /// Not enough free or evictable cached blocks for the request.
    #[error("out of KV blocks: needed {needed}, only {available} free or evictable")]
    OutOfBlocks {
        /// Blocks the call would have had to allocate.
        needed: usize,
        /// Free plus cached (evictable) blocks at the time of the call.
        available: usize,
    },
    /// The slot was never issued, or was released by `free_seq`.
    #[error("unknown sequence {0:?} (never created, or already freed)")]
    UnknownSeq(SeqSlot),
    /// [`crate::KvManager::create_seq_at`] or [`crate::KvManager::fork_at`]
    /// named a slot that holds a live sequence.
    #[error("sequence slot {0:?} is already in use")]
    SlotTaken(SeqSlot),
    /// The [`crate::PoolConfig`] is unusable.
    #[error("bad KV pool config: {0}")]
    BadConfig(String),
    /// `truncate` asked to keep more positions than the sequence holds.
    #[error("cannot truncate {seq:?} to {n} positions: it holds only {len}")]
    TruncateBeyondLen {
        /// The sequence.
        seq: SeqSlot,
        /// The requested length.
        n: usize,
        /// The sequence's length.
        len: usize,
    },
    /// A position at or past the sequence's length.
    #[error("position {pos} is out of range for {seq:?} (length {len})")]
    PositionOutOfRange {
        /// The sequence.
        seq: SeqSlot,
        /// The position asked about.
        pos: usize,
        /// The sequence's length.
        len: usize,
    },
    /// A position whose block was released by
    /// [`crate::KvManager::drop_before`] (outside a sliding window).
    #[error(
        "position {pos} of {seq:?} was dropped with its block (outside the sliding window); \
         rows are kept from position {first_kept}"
    )]
    PositionDropped {
        /// The sequence.
        seq: SeqSlot,
        /// The position asked about.
        pos: usize,
        /// The first position whose rows are still held.
        first_kept: usize,
    },
    /// `append` would overflow the length counter.
    #[error("appending {n} positions to {seq:?} (length {len}) overflows usize")]
    LengthOverflow {
        /// The sequence.
        seq: SeqSlot,
        /// The sequence's length.
        len: usize,
        /// The requested growth.
        n: usize,
    },
    /// `publish` got a token slice whose length is not the sequence's length.
    #[error("publish of {seq:?} needs one token per position: expected {expected}, got {got}")]
    TokenCountMismatch {
        /// The sequence.
        seq: SeqSlot,
        /// The sequence's length.
        expected: usize,
        /// The number of tokens passed.
        got: usize,
    },
    /// `attach_prefix` was called on a sequence that already holds positions.
    #[error("attach_prefix needs an empty sequence, but {seq:?} holds {len} positions")]
    SeqNotEmpty {
        /// The sequence.
        seq: SeqSlot,
        /// The sequence's length.
        len: usize,
    },
    /// `publish` was given tokens that disagree with the path under which one
    /// of the sequence's blocks is already published (the tokens are not the
    /// ones this block's KV was computed from).
    #[error(
        "publish of {seq:?} (tenant {tenant:?}): block #{block_index} is already published \
         under a different token path; the tokens passed are not the ones it holds"
    )]
    PublishConflict {
        /// The sequence.
        seq: SeqSlot,
        /// The sequence's tenant.
        tenant: Tenant,
        /// Index of the offending entry in the sequence's block table.
        block_index: usize,
    },
}
