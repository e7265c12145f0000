//! What the prefix index tells a KV-aware router: which prefixes this
//! engine holds, as vLLM's KV-cache events say it (`BlockStored`,
//! `BlockRemoved`, `AllBlocksCleared`).
//!
//! A block is named by a *chained* hash: of its parent's hash and its own
//! tokens, so a hash stands for the whole token prefix up to the block's
//! end, the same on every replica and in every process (SHA-256, not a
//! seeded hasher). A router walks a request's blocks from the root and
//! finds which replica holds the longest prefix.
//!
//! ```text
//!   tokens  [a a a a][b b b b][c c c c]        block_size 4
//!   hash    h1 = H(∅, aaaa)   h2 = H(h1, bbbb)   h3 = H(h2, cccc)
//!   events  Stored{h1, parent ∅}  Stored{h2, parent h1}  Stored{h3, parent h2}
//! ```
//!
//! Tenants never share blocks, but the same prefix held by two tenants has
//! the same hash: the log counts holders per hash, so a hash is stored once
//! (at its first holder) and removed once (at its last). Events name no
//! tenant; they do carry every stored block's token ids, so whoever reads
//! them learns the prompts of every tenant of the engine (as with vLLM's).

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use sha2::{Digest, Sha256};

/// A change to the set of prefixes an engine holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvEvent {
    /// A full block became findable by prefix.
    Stored {
        /// The block's chained hash ([`block_hash`]).
        hash: u64,
        /// The previous block's; `None` for a block at position 0.
        parent: Option<u64>,
        /// The block's tokens (`block_size` ids).
        tokens: Box<[u32]>,
    },
    /// The last holder of a prefix let it go (evicted, or overwritten).
    Removed {
        /// The block's chained hash.
        hash: u64,
    },
    /// The engine holds nothing (it started, or was reset).
    Cleared,
}

/// The chained hash of a block: the first 8 bytes (big-endian) of
/// SHA-256 over a version tag, the parent's hash (or a marker for none)
/// and the tokens as little-endian u32s.
pub fn block_hash(parent: Option<u64>, tokens: &[u32]) -> u64 {
    let mut h = Sha256::new();
    h.update(b"fak-kv-block/1");
    match parent {
        Some(p) => {
            h.update([1]);
            h.update(p.to_be_bytes());
        }
        None => h.update([0]),
    }
    for t in tokens {
        h.update(t.to_le_bytes());
    }
    let d = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&d[..8]);
    u64::from_be_bytes(first)
}

/// Pending events and the holders per hash.
#[derive(Debug, Clone, Default)]
pub(crate) struct EventLog {
    pending: Vec<KvEvent>,
    holders: HashMap<u64, u32>,
}

impl EventLog {
    /// A log whose first event says the engine holds nothing.
    pub(crate) fn new() -> EventLog {
        EventLog {
            pending: vec![KvEvent::Cleared],
            holders: HashMap::new(),
        }
    }

    /// One more holder of `hash`; stored at the first.
    pub(crate) fn stored(&mut self, hash: u64, parent: Option<u64>, tokens: &[u32]) {
        let n = self.holders.entry(hash).or_insert(0);
        *n += 1;
        if *n == 1 {
            self.pending.push(KvEvent::Stored {
                hash,
                parent,
                tokens: tokens.into(),
            });
        }
    }

    /// One holder of `hash` fewer; removed at the last.
    pub(crate) fn removed(&mut self, hash: u64) {
        if let Entry::Occupied(mut e) = self.holders.entry(hash) {
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
                self.pending.push(KvEvent::Removed { hash });
            }
        }
    }

    /// The events since the last call, oldest first.
    pub(crate) fn take(&mut self) -> Vec<KvEvent> {
        std::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_chain_and_are_fixed() {
        let a = block_hash(None, &[1, 2]);
        assert_eq!(a, block_hash(None, &[1, 2]));
        assert_ne!(a, block_hash(None, &[2, 1]));
        // The same block after another prefix is another hash.
        assert_ne!(block_hash(Some(a), &[3, 4]), block_hash(None, &[3, 4]));
        assert_ne!(block_hash(Some(0), &[3, 4]), block_hash(None, &[3, 4]));
        // Fixed across builds and processes (a replica fleet shares them):
        // Python's hashlib gives the same first 8 bytes of
        // sha256(b"fak-kv-block/1" + b"\x00" + pack("<2I", 1, 2)).
        assert_eq!(block_hash(None, &[]), 0xdf87_52f5_2150_8104);
        assert_eq!(a, 0x72c5_ce9f_f079_56b7);
    }

    #[test]
    fn holders_are_counted() {
        let mut log = EventLog::new();
        log.stored(7, None, &[1]);
        log.stored(7, None, &[1]);
        log.removed(7);
        log.removed(9);
        assert_eq!(
            log.take(),
            [
                KvEvent::Cleared,
                KvEvent::Stored {
                    hash: 7,
                    parent: None,
                    tokens: vec![1].into()
                }
            ]
        );
        log.removed(7);
        assert_eq!(log.take(), [KvEvent::Removed { hash: 7 }]);
        assert!(log.take().is_empty());
    }
}
