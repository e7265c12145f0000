//! Paged, copy-on-write KV-cache bookkeeping: pure logic, no tensors.
//!
//! The storage layer (another crate) owns `n_blocks` physical blocks of
//! `block_size` K/V rows each (every layer, K and V), addressed by
//! [`BlockId`]. This crate decides which block holds which position of which
//! sequence, when blocks are shared, when one must be copied before a write,
//! and which blocks survive as a reusable prefix cache. The storage performs
//! the [`BlockCopy`]s it is told to, and writes a sequence's position `p` to
//! row `p % block_size` of `blocks(s)[p / block_size]`.
//!
//! # Block tables and sharing
//!
//! ```text
//!  block_size = 4                        physical blocks (refcount)
//!                                        ┌────┬────┬────┬────┬────┬────┐
//!  seq A  len 10  [b0 b1 b2] ──────────► │ b0 │ b1 │ b2 │ b3 │ b4 │ b5 │
//!  seq B  len  9  [b0 b1 b3]  (fork of   │ 3  │ 2  │ 1  │ 1  │ 1  │ 0  │
//!                  A, then diverged)     └────┴────┴────┴────┴────┴────┘
//!  seq C  len  6  [b0 b4]     (attached b0 from the prefix index)
//!
//!  positions of A:  0..4 → b0   4..8 → b1   8..10 → b2 rows 0..2
//! ```
//!
//! * [`KvManager::fork`] shares every block (refcount + 1); nothing is copied.
//! * [`KvManager::append`] grows a sequence. New positions go to fresh blocks,
//!   except those that fill the partially filled last block; if that block is
//!   shared or published it is first replaced by a fresh block and a
//!   [`BlockCopy`] of its filled rows is returned (copy-on-write). Hence a
//!   block with refcount > 1, or a published one, is never written.
//! * [`KvManager::truncate`] drops positions from the end, releasing blocks
//!   wholly past the new length.
//! * [`KvManager::drop_before`] releases a sequence's blocks wholly before
//!   a position (a sliding window's rows no later query reads); the block
//!   table keeps a count of the dropped leading entries, whose positions
//!   [`KvManager::locate`] then refuses ([`KvError::PositionDropped`]), as
//!   does a `truncate` that would end inside them.
//!
//! # Prefix cache
//!
//! [`KvManager::publish`] registers a sequence's *full* blocks in a trie keyed
//! by each block's tokens, one root per [`Tenant`] (see the `radix` module):
//! a later [`KvManager::attach_prefix`] on an empty sequence of the same
//! tenant reuses the longest matching chain of blocks. Published blocks are
//! immutable. Block lifecycle:
//!
//! ```text
//!           allocate                  last release ┌─ unpublished ─► free
//!   free ────────────► used (rc ≥ 1) ──────────────┤
//!    ▲                   ▲                         └─ published ───► cached (rc 0, LRU)
//!    │                   │              attach_prefix                  │   │
//!    │                   └─────────────────────────────────────────────┘   │
//!    └── evicted when nothing is free: the LRU-oldest cached block ────────┘
//!        leaves the index with its whole subtree (unreferenced blocks of the
//!        subtree become free, referenced ones merely private)
//! ```
//!
//! `free + used + cached == capacity` always ([`KvManager::stats`]).
//! Different tenants never share a block.
//!
//! # Sliding windows
//!
//! A manager made with [`KvManager::with_window`] serves layers whose
//! query at `p` reads only rows `p + 1 - W..=p`: continuing a sequence
//! from length `n` needs the rows `n + 1 - W..n`, nothing earlier. Its
//! index keeps a path findable after the path's early blocks are gone:
//! released entries are published as *hollow* nodes (the tokens, no
//! block), evicting a block whose node has children only hollows the node,
//! and `attach_prefix` attaches a match only if every block of its window
//! is held, shrinking the match to one whose window is held otherwise
//! (never attaching rows it does not have):
//!
//! ```text
//!   W = 8, block_size 4: sequence of 14 published after drop_before(7)
//!   index:  ○[0..4) ─► b5[4..8) ─► b6[8..12)        (○ hollow)
//!   attach of those 12 tokens: the next token reads 5..12 → b5, b6: 12
//!   after b5 is evicted (hollowed): reads 5..12 → b5 missing → 4 → ○ → 0
//! ```
//!
//! # Contract with the storage and the engine
//!
//! * Perform every [`BlockCopy`] returned by `append` before writing the new
//!   positions and before the next call on the manager (a later allocation
//!   may hand the source block to someone else).
//! * Write position `p` of `s` only at [`KvManager::locate`]`(s, p)` and only
//!   for positions made writable by the last `append`
//!   ([`KvManager::is_writable`] says so).
//! * The manager never sees token content except through `publish` and
//!   `attach_prefix`; `publish` trusts that `tokens` are the ids whose KV the
//!   sequence holds (it rejects only tokens that contradict the index).
//! * Every fallible call is atomic: on `Err`, nothing changed.
//!
//! # Example
//!
//! ```
//! use fak_kv::{KvManager, PoolConfig, Tenant};
//!
//! let mut kv = KvManager::new(PoolConfig { block_size: 2, n_blocks: 8 }).unwrap();
//! let a = kv.create_seq(Tenant(0));
//! assert!(kv.append(a, 5).unwrap().is_empty()); // 3 fresh blocks, nothing to copy
//! kv.publish(a, &[1, 2, 3, 4, 5]).unwrap(); // the 2 full blocks enter the index
//!
//! let b = kv.create_seq(Tenant(0));
//! assert_eq!(kv.attach_prefix(b, &[1, 2, 3, 4, 9]).unwrap(), 4);
//! assert_eq!(kv.blocks(b).unwrap(), &kv.blocks(a).unwrap()[..2]);
//!
//! let c = kv.fork(a).unwrap();
//! let copies = kv.append(c, 1).unwrap(); // c's last block is shared with a: copy it
//! assert_eq!(copies.len(), 1);
//! assert_eq!(copies[0].n_tokens, 1);
//! ```

#![forbid(unsafe_code)]

mod error;
mod events;
mod manager;
mod pool;
mod radix;

pub use error::KvError;
pub use events::{block_hash, KvEvent};
pub use manager::KvManager;

/// Index of a physical block, `0..n_blocks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockId(pub u32);

/// A sequence handle issued by [`KvManager`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeqSlot(pub u32);

/// A cache namespace: blocks are never shared across tenants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tenant(pub u64);

/// Shape of the block pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// Tokens (K/V rows) per block, ≥ 1.
    pub block_size: usize,
    /// Physical blocks, `1..=u32::MAX + 1`.
    pub n_blocks: usize,
}

/// A copy the storage must perform before writing: rows `0..n_tokens` of
/// block `src` into block `dst` (every layer, K and V).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockCopy {
    /// Block to read.
    pub src: BlockId,
    /// Block to write (freshly allocated, exclusive to the appending sequence).
    pub dst: BlockId,
    /// Rows to copy, `1..block_size`.
    pub n_tokens: usize,
}

/// Block counts; `free + used + cached == capacity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Total blocks.
    pub capacity: usize,
    /// Blocks holding nothing.
    pub free: usize,
    /// Blocks with refcount > 0.
    pub used: usize,
    /// Blocks with refcount 0 kept for prefix reuse (evicted LRU-first).
    pub cached: usize,
}
