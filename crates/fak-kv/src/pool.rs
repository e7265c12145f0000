//! The physical block pool: refcounts, the free list and the LRU of cached
//! blocks.
//!
//! Every block is in exactly one of three states, derived from two facts the
//! pool tracks (its refcount, and whether it sits in the LRU):
//!
//! ```text
//!              take_free                     decref to 0, published
//!   ┌──────┐ ───────────► ┌──────────────┐ ──────────────────────► ┌────────────┐
//!   │ free │              │ used (rc ≥ 1)│                         │ cached     │
//!   └──────┘ ◄─────────── └──────────────┘ ◄────────────────────── │ (rc 0, LRU)│
//!      ▲    decref to 0,        incref (attach_prefix: uncache)    └────────────┘
//!      │    unpublished                                                  │
//!      └──────────────────────── evicted (uncache + free) ───────────────┘
//! ```
//!
//! The pool does not know about the prefix index; [`crate::KvManager`]
//! decides on each release whether a block becomes cached or free.
//!
//! Costs: `take_free`, `incref`, `decref`, `free` are O(1); LRU insert,
//! remove and oldest are O(log n) (a `BTreeMap` keyed by a monotonically
//! increasing tick).

use std::collections::BTreeMap;

use crate::BlockId;

/// What a [`BlockPool::decref`] left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    /// Other holders remain.
    StillUsed,
    /// The refcount reached zero: the caller must call [`BlockPool::free`]
    /// or [`BlockPool::cache`] on the block.
    Unreferenced,
}

/// Refcounts, free list and LRU over `capacity` blocks with ids
/// `0..capacity`.
#[derive(Debug, Clone)]
pub(crate) struct BlockPool {
    /// Per block: number of block-table entries that reference it.
    refcount: Vec<u32>,
    /// Free blocks (refcount 0, not cached), used as a stack.
    free: Vec<BlockId>,
    /// Cached blocks (refcount 0, kept for prefix reuse), oldest tick first.
    lru: BTreeMap<u64, BlockId>,
    /// Per block: its key in `lru` while cached.
    lru_tick: Vec<Option<u64>>,
    /// Next LRU tick; strictly increasing.
    next_tick: u64,
    /// Number of blocks with refcount > 0.
    used: usize,
}

impl BlockPool {
    /// A pool of `capacity` free blocks. The caller guarantees
    /// `capacity <= u32::MAX as usize + 1`.
    pub(crate) fn new(capacity: usize) -> Self {
        // Reversed so that pops hand out 0, 1, 2, ... (nicer to read in tests).
        let free = (0..capacity)
            .rev()
            .map(|i| BlockId(i as u32))
            .collect::<Vec<_>>();
        Self {
            refcount: vec![0; capacity],
            free,
            lru: BTreeMap::new(),
            lru_tick: vec![None; capacity],
            next_tick: 0,
            used: 0,
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.refcount.len()
    }

    pub(crate) fn n_free(&self) -> usize {
        self.free.len()
    }

    pub(crate) fn n_cached(&self) -> usize {
        self.lru.len()
    }

    pub(crate) fn n_used(&self) -> usize {
        self.used
    }

    /// Blocks an allocation could obtain: free ones plus evictable cached ones.
    pub(crate) fn available(&self) -> usize {
        self.free.len() + self.lru.len()
    }

    /// The refcount of `b`; 0 for an id outside the pool.
    pub(crate) fn refcount(&self, b: BlockId) -> u32 {
        self.refcount.get(b.0 as usize).copied().unwrap_or(0)
    }

    /// Whether `b` is cached (refcount 0, in the LRU).
    pub(crate) fn is_cached(&self, b: BlockId) -> bool {
        matches!(self.lru_tick.get(b.0 as usize), Some(Some(_)))
    }

    /// Pops a free block and gives it refcount 1.
    pub(crate) fn take_free(&mut self) -> Option<BlockId> {
        let b = self.free.pop()?;
        self.refcount[b.0 as usize] = 1;
        self.used += 1;
        Some(b)
    }

    /// Adds one reference to `b`; a cached block leaves the LRU (it is used
    /// again). `b` must not be on the free list.
    pub(crate) fn incref(&mut self, b: BlockId) {
        let i = b.0 as usize;
        if self.refcount[i] == 0 {
            self.uncache(b);
            self.used += 1;
        }
        self.refcount[i] += 1;
    }

    /// Drops one reference to `b` (which must have refcount ≥ 1).
    pub(crate) fn decref(&mut self, b: BlockId) -> Release {
        let i = b.0 as usize;
        debug_assert!(self.refcount[i] > 0, "decref of unreferenced {b:?}");
        self.refcount[i] = self.refcount[i].saturating_sub(1);
        if self.refcount[i] == 0 {
            self.used -= 1;
            Release::Unreferenced
        } else {
            Release::StillUsed
        }
    }

    /// Puts an unreferenced, uncached block on the free list.
    pub(crate) fn free(&mut self, b: BlockId) {
        debug_assert_eq!(self.refcount[b.0 as usize], 0);
        debug_assert!(!self.is_cached(b));
        self.free.push(b);
    }

    /// Puts an unreferenced block into the LRU as the most recently used.
    pub(crate) fn cache(&mut self, b: BlockId) {
        debug_assert_eq!(self.refcount[b.0 as usize], 0);
        debug_assert!(!self.is_cached(b));
        let tick = self.next_tick;
        self.next_tick += 1;
        self.lru.insert(tick, b);
        self.lru_tick[b.0 as usize] = Some(tick);
    }

    /// Removes `b` from the LRU; returns whether it was there.
    pub(crate) fn uncache(&mut self, b: BlockId) -> bool {
        match self.lru_tick.get_mut(b.0 as usize).and_then(Option::take) {
            Some(tick) => {
                self.lru.remove(&tick);
                true
            }
            None => false,
        }
    }

    /// The least recently used cached block.
    pub(crate) fn lru_oldest(&self) -> Option<BlockId> {
        self.lru.first_key_value().map(|(_, &b)| b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(p: &BlockPool) {
        assert_eq!(p.n_free() + p.n_used() + p.n_cached(), p.capacity());
        let used = (0..p.capacity())
            .filter(|&i| p.refcount(BlockId(i as u32)) > 0)
            .count();
        assert_eq!(used, p.n_used());
    }

    #[test]
    fn take_free_hands_out_ascending_ids_until_empty() {
        let mut p = BlockPool::new(3);
        assert_eq!(p.take_free(), Some(BlockId(0)));
        assert_eq!(p.take_free(), Some(BlockId(1)));
        assert_eq!(p.take_free(), Some(BlockId(2)));
        assert_eq!(p.take_free(), None);
        assert_eq!(p.n_used(), 3);
        check(&p);
    }

    #[test]
    fn refcounts_follow_incref_decref() {
        let mut p = BlockPool::new(2);
        let b = p.take_free().unwrap();
        p.incref(b);
        assert_eq!(p.refcount(b), 2);
        assert_eq!(p.decref(b), Release::StillUsed);
        assert_eq!(p.decref(b), Release::Unreferenced);
        assert_eq!(p.n_used(), 0);
        p.free(b);
        check(&p);
        assert_eq!(p.n_free(), 2);
        assert_eq!(p.refcount(BlockId(99)), 0, "out-of-range id reads as 0");
    }

    #[test]
    fn lru_orders_by_release_time_and_incref_uncaches() {
        let mut p = BlockPool::new(3);
        let a = p.take_free().unwrap();
        let b = p.take_free().unwrap();
        let c = p.take_free().unwrap();
        for x in [b, a, c] {
            assert_eq!(p.decref(x), Release::Unreferenced);
            p.cache(x);
        }
        check(&p);
        assert_eq!(p.n_cached(), 3);
        assert_eq!(p.available(), 3);
        assert_eq!(p.lru_oldest(), Some(b));
        // Reusing b takes it out of the LRU.
        p.incref(b);
        assert!(!p.is_cached(b));
        assert_eq!(p.lru_oldest(), Some(a));
        assert!(p.uncache(a));
        assert!(!p.uncache(a));
        p.free(a);
        assert_eq!(p.lru_oldest(), Some(c));
        check(&p);
    }
}
