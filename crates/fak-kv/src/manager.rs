//! [`KvManager`]: sequences, block tables, copy-on-write and prefix reuse on
//! top of the [`crate::pool`] and the [`crate::radix`] index.
//!
//! Copy-on-write happens only at the one place a sequence writes into an
//! existing block: its partially filled last block, when `append` grows it.
//!
//! ```text
//!  block_size 4; A = [b0 b1], len 6; B = fork(A); truncate(B, 5); append(B, 2)
//!
//!   before:  A ─► b0 ████ b1 ██··      (b1 refcount 2: shared with B)
//!            B ─► b0 ████ b1 █···      (B's len 5 ends inside b1)
//!   append(B, 2): b1 is shared ⇒ take b7, return BlockCopy{src: b1, dst: b7, n_tokens: 1}
//!   after:   A ─► b0 ████ b1 ██··      (untouched)
//!            B ─► b0 ████ b7 █▒▒·      (▒ = the two new positions, written by the caller)
//! ```

use std::collections::BTreeMap;

use crate::pool::{BlockPool, Release};
use crate::radix::{Place, PrefixIndex};
use crate::{BlockCopy, BlockId, KvError, PoolConfig, PoolStats, SeqSlot, Tenant};

#[cfg(test)]
mod tests;

/// One live sequence.
#[derive(Debug, Clone)]
struct Seq {
    tenant: Tenant,
    /// Positions held.
    len: usize,
    /// Leading block-table entries released by [`KvManager::drop_before`]
    /// (a sliding window's rows no query reads any more).
    dropped: usize,
    /// The live block table, entries `dropped..`; always exactly
    /// `len.div_ceil(block_size) - dropped` entries.
    blocks: Vec<BlockId>,
}

impl Seq {
    /// Block-table entries, dropped ones included.
    fn n_entries(&self) -> usize {
        self.dropped + self.blocks.len()
    }
}

/// Paged KV bookkeeping for many sequences over one block pool.
///
/// See the crate docs for the model. All methods are O(blocks touched) plus
/// O(log n) per LRU operation.
#[derive(Debug, Clone)]
pub struct KvManager {
    block_size: usize,
    /// The sliding window of the layers this manager serves, if any
    /// ([`KvManager::with_window`]).
    window: Option<usize>,
    pool: BlockPool,
    index: PrefixIndex,
    seqs: BTreeMap<SeqSlot, Seq>,
    /// Next slot number to try; slots are not reused until the counter wraps.
    next_slot: u32,
}

/// The two walks of `publish`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Check for conflicts; change nothing.
    Validate,
    /// Insert the missing nodes.
    Insert,
}

/// How far [`KvManager::attach_prefix`] matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grain {
    /// Whole blocks only.
    Blocks,
    /// Whole blocks, then the matching rows of one more block.
    Rows,
}

/// A path of the prefix index for some tokens ([`KvManager::chain`]).
struct Chain {
    /// Per full block of the path: its block, `None` for a hollow node.
    full: Vec<Option<BlockId>>,
    /// A published block after them whose first `k` ids match, and `k`.
    partial: Option<(BlockId, usize)>,
}

impl Chain {
    /// The block of entry `j`: a full one, or the partial one right after.
    fn block(&self, j: usize) -> Option<BlockId> {
        match self.full.get(j) {
            Some(&b) => b,
            None if j == self.full.len() => self.partial.map(|(b, _)| b),
            None => None,
        }
    }
}

/// The first position the token at `n` reads through a window of `w`.
fn window_start(n: usize, w: usize) -> usize {
    (n + 1).saturating_sub(w)
}

/// Whether `b` may be written in place: one holder, and not published.
fn exclusive(pool: &BlockPool, index: &PrefixIndex, b: BlockId) -> bool {
    pool.refcount(b) == 1 && !index.is_published(b)
}

/// Drops one reference to `b`; an unreferenced block becomes cached if it is
/// published, free otherwise.
fn release(pool: &mut BlockPool, index: &PrefixIndex, b: BlockId) {
    if pool.decref(b) == Release::Unreferenced {
        if index.is_published(b) {
            pool.cache(b);
        } else {
            pool.free(b);
        }
    }
}

/// Releases a block table from its end, so that a chain's deepest blocks
/// enter the LRU first and are evicted before their ancestors.
fn release_all(pool: &mut BlockPool, index: &PrefixIndex, blocks: &[BlockId]) {
    for &b in blocks.iter().rev() {
        release(pool, index, b);
    }
}

/// What evicting a cached block does to its index node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Evict {
    /// The node goes with its whole subtree: every descendant's path runs
    /// through it, and a continuation needs every row of its path.
    Subtree,
    /// A node with children is only made hollow (sliding window): a
    /// continuation deeper down reads only its window's rows, so the
    /// descendants stay findable. A leaf goes, with the hollow ancestors
    /// it leaves childless.
    Hollow,
}

/// Takes a free block, evicting the least recently used cached block (and,
/// per `evict`, its index subtree) when none is free. Returns `None` only
/// when no block is free or cached.
fn allocate(pool: &mut BlockPool, index: &mut PrefixIndex, evict: Evict) -> Option<BlockId> {
    if pool.n_free() == 0 {
        let victim = pool.lru_oldest()?;
        match index.node_of(victim) {
            Some(node) if evict == Evict::Hollow && index.has_children(node) => {
                index.hollow(node);
                pool.uncache(victim);
                pool.free(victim);
            }
            Some(node) => {
                for b in index.remove_subtree(node) {
                    // Unreferenced blocks of the subtree were cached: free them.
                    // Referenced ones stay with their holders, now private.
                    if pool.refcount(b) == 0 && pool.uncache(b) {
                        pool.free(b);
                    }
                }
            }
            None => {
                // A cached block is always published; recover regardless.
                debug_assert!(false, "cached {victim:?} is not in the index");
                pool.uncache(victim);
                pool.free(victim);
            }
        }
    }
    pool.take_free()
}

impl KvManager {
    /// A manager over `cfg.n_blocks` free blocks of `cfg.block_size` tokens.
    ///
    /// Errors: [`KvError::BadConfig`] if `block_size` or `n_blocks` is 0, or
    /// `n_blocks` does not fit the `u32` block ids.
    pub fn new(cfg: PoolConfig) -> Result<KvManager, KvError> {
        if cfg.block_size == 0 {
            return Err(KvError::BadConfig("block_size must be >= 1".into()));
        }
        if cfg.n_blocks == 0 {
            return Err(KvError::BadConfig("n_blocks must be >= 1".into()));
        }
        if cfg.n_blocks > u32::MAX as usize + 1 {
            return Err(KvError::BadConfig(format!(
                "n_blocks {} exceeds the {} addressable by u32 block ids",
                cfg.n_blocks,
                u32::MAX as u64 + 1
            )));
        }
        Ok(KvManager {
            block_size: cfg.block_size,
            window: None,
            pool: BlockPool::new(cfg.n_blocks),
            index: PrefixIndex::new(cfg.n_blocks),
            seqs: BTreeMap::new(),
            next_slot: 0,
        })
    }

    /// A manager for layers with a sliding window of `window` positions: a
    /// query at position `p` reads rows `p + 1 - window..=p` only, so a
    /// sequence continuing from length `n` needs the rows of positions
    /// `n + 1 - window..n` and no earlier ones.
    ///
    /// The prefix index then keeps a published path findable after its
    /// early blocks are gone: [`KvManager::publish`] hangs the blocks of a
    /// sequence's window below *hollow* nodes (key, no block) for the
    /// entries [`KvManager::drop_before`] released, eviction makes a node
    /// with children hollow instead of removing its subtree, and
    /// [`KvManager::attach_prefix_rows`] attaches a match of length `n`
    /// only when the index holds every block covering `n + 1 - window..n`
    /// (the longest shorter match where it does not), with the entries
    /// before them counted as dropped:
    ///
    /// ```text
    ///   window 4, block_size 2, published [○ ○ b5 b6]   (○ hollow: rows 0..4 gone)
    ///   match 8: the next token reads 5..8 → blocks 2, 3 held: attach 8, 2 dropped
    ///   match 7: reads 4..7 → blocks 2, 3 held: attach 7 (row 0 of b6)
    ///   match 5: reads 2..5 → block 1 hollow: shrink to 2, reads 0..2 → block 0: 0
    /// ```
    ///
    /// The manager does not drop rows by itself: the caller calls
    /// [`KvManager::drop_before`] with the window as before.
    ///
    /// Errors: as [`KvManager::new`]; [`KvError::BadConfig`] for a window
    /// of 0.
    pub fn with_window(cfg: PoolConfig, window: usize) -> Result<KvManager, KvError> {
        if window == 0 {
            return Err(KvError::BadConfig("window must be >= 1".into()));
        }
        let mut kv = KvManager::new(cfg)?;
        kv.window = Some(window);
        Ok(kv)
    }

    /// The sliding window of [`KvManager::with_window`] (`None`: every
    /// position is kept).
    pub fn window(&self) -> Option<usize> {
        self.window
    }

    /// Tokens per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    fn evict_mode(&self) -> Evict {
        match self.window {
            Some(_) => Evict::Hollow,
            None => Evict::Subtree,
        }
    }

    fn seq(&self, s: SeqSlot) -> Result<&Seq, KvError> {
        self.seqs.get(&s).ok_or(KvError::UnknownSeq(s))
    }

    fn new_slot(&mut self) -> SeqSlot {
        // Skips live slots after the counter wraps (at most seqs.len() steps).
        loop {
            let s = SeqSlot(self.next_slot);
            self.next_slot = self.next_slot.wrapping_add(1);
            if !self.seqs.contains_key(&s) {
                return s;
            }
        }
    }

    /// A new, empty sequence in `tenant`'s namespace.
    ///
    /// Slots are issued in increasing order and are not reused until the
    /// `u32` counter wraps (after 2^32 creations; live slots are skipped).
    pub fn create_seq(&mut self, tenant: Tenant) -> SeqSlot {
        let s = self.new_slot();
        self.seqs.insert(
            s,
            Seq {
                tenant,
                len: 0,
                dropped: 0,
                blocks: Vec::new(),
            },
        );
        s
    }

    /// A new, empty sequence in `tenant`'s namespace at slot `s`, for a
    /// caller that keeps several managers on one slot numbering (one per
    /// group of model layers) and issues the slots itself.
    ///
    /// # Errors
    ///
    /// [`KvError::SlotTaken`] when `s` holds a live sequence (nothing
    /// changes).
    pub fn create_seq_at(&mut self, s: SeqSlot, tenant: Tenant) -> Result<(), KvError> {
        if self.seqs.contains_key(&s) {
            return Err(KvError::SlotTaken(s));
        }
        self.seqs.insert(
            s,
            Seq {
                tenant,
                len: 0,
                dropped: 0,
                blocks: Vec::new(),
            },
        );
        Ok(())
    }

    /// A new sequence sharing all of `src`'s blocks (each refcount + 1), with
    /// the same tenant and length. O(blocks); copies happen lazily on append.
    pub fn fork(&mut self, src: SeqSlot) -> Result<SeqSlot, KvError> {
        self.seq(src)?;
        let s = self.new_slot();
        self.fork_at(src, s)?;
        Ok(s)
    }

    /// [`KvManager::fork`] into slot `dst`, issued by the caller (see
    /// [`KvManager::create_seq_at`]).
    ///
    /// # Errors
    ///
    /// [`KvError::UnknownSeq`] for an unknown `src`, [`KvError::SlotTaken`]
    /// when `dst` holds a live sequence (nothing changes either way).
    pub fn fork_at(&mut self, src: SeqSlot, dst: SeqSlot) -> Result<(), KvError> {
        let seq = self.seq(src)?.clone();
        if self.seqs.contains_key(&dst) {
            return Err(KvError::SlotTaken(dst));
        }
        for &b in &seq.blocks {
            self.pool.incref(b);
        }
        self.seqs.insert(dst, seq);
        Ok(())
    }

    /// Releases all of `s`'s blocks; `s` becomes unknown.
    pub fn free_seq(&mut self, s: SeqSlot) -> Result<(), KvError> {
        let seq = self.seqs.remove(&s).ok_or(KvError::UnknownSeq(s))?;
        release_all(&mut self.pool, &self.index, &seq.blocks);
        Ok(())
    }

    /// Positions (tokens) `s` holds.
    pub fn len(&self, s: SeqSlot) -> Result<usize, KvError> {
        Ok(self.seq(s)?.len)
    }

    /// Whether `s` holds no positions.
    pub fn is_empty(&self, s: SeqSlot) -> Result<bool, KvError> {
        Ok(self.seq(s)?.len == 0)
    }

    /// `s`'s tenant.
    pub fn tenant(&self, s: SeqSlot) -> Result<Tenant, KvError> {
        Ok(self.seq(s)?.tenant)
    }

    /// `s`'s live block table: position `p` lives in
    /// `blocks[p / block_size - dropped(s)]` at row `p % block_size`. Length
    /// `len(s).div_ceil(block_size) - dropped(s)`; without
    /// [`KvManager::drop_before`], `dropped(s)` is 0 and this is the whole
    /// table.
    pub fn blocks(&self, s: SeqSlot) -> Result<&[BlockId], KvError> {
        Ok(&self.seq(s)?.blocks)
    }

    /// Leading block-table entries of `s` released by
    /// [`KvManager::drop_before`]: positions `0..dropped(s) · block_size`
    /// have no rows any more.
    pub fn dropped(&self, s: SeqSlot) -> Result<usize, KvError> {
        Ok(self.seq(s)?.dropped)
    }

    /// The block holding block-table entry `i` of `s` (positions `i ·
    /// block_size..`); `None` past the table or for a dropped entry.
    pub fn block_at(&self, s: SeqSlot, i: usize) -> Option<BlockId> {
        let seq = self.seqs.get(&s)?;
        seq.blocks.get(i.checked_sub(seq.dropped)?).copied()
    }

    /// Where position `pos` of `s` lives: (block, row).
    ///
    /// Errors: [`KvError::UnknownSeq`], [`KvError::PositionOutOfRange`],
    /// [`KvError::PositionDropped`] for a position of a dropped block.
    pub fn locate(&self, s: SeqSlot, pos: usize) -> Result<(BlockId, usize), KvError> {
        let seq = self.seq(s)?;
        let i = pos / self.block_size;
        if pos < seq.len && i < seq.dropped {
            return Err(KvError::PositionDropped {
                seq: s,
                pos,
                first_kept: seq.dropped * self.block_size,
            });
        }
        match seq.blocks.get(i.wrapping_sub(seq.dropped)) {
            Some(&b) if pos < seq.len => Ok((b, pos % self.block_size)),
            _ => Err(KvError::PositionOutOfRange {
                seq: s,
                pos,
                len: seq.len,
            }),
        }
    }

    /// Releases `s`'s blocks whose positions all lie before `pos` (a
    /// sliding window's rows that no later query reads); returns how many
    /// were released (`pos` is clamped to `len(s)`). A released block goes back to the pool like one released by
    /// [`KvManager::free_seq`] (cached if it is published, free otherwise);
    /// other holders of it (forks, the prefix index) keep it.
    ///
    /// Errors (state unchanged): [`KvError::UnknownSeq`].
    pub fn drop_before(&mut self, s: SeqSlot, pos: usize) -> Result<usize, KvError> {
        let bs = self.block_size;
        let seq = self.seqs.get_mut(&s).ok_or(KvError::UnknownSeq(s))?;
        let upto = pos.min(seq.len) / bs;
        let n = upto.saturating_sub(seq.dropped).min(seq.blocks.len());
        let released: Vec<BlockId> = seq.blocks.drain(..n).collect();
        seq.dropped += n;
        // Oldest first: the oldest rows are the first the LRU gives up.
        for b in released {
            release(&mut self.pool, &self.index, b);
        }
        Ok(n)
    }

    /// Grows `s` by `n` positions: `len..len + n` become writable and the
    /// length becomes `len + n`.
    ///
    /// Allocates new blocks as needed (evicting cached blocks when no block
    /// is free). If the block holding position `len` (a partially filled
    /// last block) is shared (refcount > 1) or published, it is first
    /// replaced by a fresh block and `BlockCopy { src: old, dst: new,
    /// n_tokens: len % block_size }` is returned: the caller must perform the
    /// returned copies before writing, and before its next call on this
    /// manager. At most one copy is returned.
    ///
    /// Errors (state unchanged): [`KvError::UnknownSeq`],
    /// [`KvError::LengthOverflow`], [`KvError::OutOfBlocks`].
    pub fn append(&mut self, s: SeqSlot, n: usize) -> Result<Vec<BlockCopy>, KvError> {
        let bs = self.block_size;
        let seq = self.seqs.get(&s).ok_or(KvError::UnknownSeq(s))?;
        let len = seq.len;
        let new_len = len
            .checked_add(n)
            .ok_or(KvError::LengthOverflow { seq: s, len, n })?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let have = seq.n_entries();
        let row = len % bs;
        // Some(old) when the partial last block must be copied first.
        let cow_src = match seq.blocks.last() {
            Some(&old) if row != 0 && !exclusive(&self.pool, &self.index, old) => Some(old),
            _ => None,
        };
        let needed = new_len.div_ceil(bs) - have + usize::from(cow_src.is_some());
        let available = self.pool.available();
        if needed > available {
            return Err(KvError::OutOfBlocks { needed, available });
        }
        // Cannot fail: every allocation consumes one free or cached block and
        // eviction never takes one away. Roll back anyway if it ever did.
        let mut fresh = Vec::with_capacity(needed);
        let evict = self.evict_mode();
        for _ in 0..needed {
            match allocate(&mut self.pool, &mut self.index, evict) {
                Some(b) => fresh.push(b),
                None => {
                    release_all(&mut self.pool, &self.index, &fresh);
                    return Err(KvError::OutOfBlocks { needed, available });
                }
            }
        }
        let mut copies = Vec::new();
        let mut fresh = fresh.into_iter();
        let Some(seq) = self.seqs.get_mut(&s) else {
            // Unreachable: checked above and nothing removed it since.
            release_all(&mut self.pool, &self.index, &fresh.collect::<Vec<_>>());
            return Err(KvError::UnknownSeq(s));
        };
        // The first fresh block is the copy's destination.
        if let Some((old, dst)) = cow_src.and_then(|old| Some((old, fresh.next()?))) {
            if exclusive(&self.pool, &self.index, old) {
                // Eviction during allocation unpublished `old` and we are its
                // only holder: write in place, hand the spare block back.
                release(&mut self.pool, &self.index, dst);
            } else {
                copies.push(BlockCopy {
                    src: old,
                    dst,
                    n_tokens: row,
                });
                if let Some(last) = seq.blocks.last_mut() {
                    *last = dst;
                }
                release(&mut self.pool, &self.index, old);
            }
        }
        seq.blocks.extend(fresh);
        seq.len = new_len;
        Ok(copies)
    }

    /// Keeps positions `0..n` of `s` and releases the blocks wholly past `n`.
    /// A kept partial block that is shared or published is copied by the
    /// next `append`, never written in place.
    ///
    /// Truncating to 0 empties the sequence, dropped entries included.
    ///
    /// Errors (state unchanged): [`KvError::UnknownSeq`],
    /// [`KvError::TruncateBeyondLen`] when `n > len(s)`,
    /// [`KvError::PositionDropped`] when `0 < n` and the block of position
    /// `n - 1` was dropped ([`KvManager::drop_before`]).
    pub fn truncate(&mut self, s: SeqSlot, n: usize) -> Result<(), KvError> {
        let bs = self.block_size;
        let seq = self.seqs.get_mut(&s).ok_or(KvError::UnknownSeq(s))?;
        if n > seq.len {
            return Err(KvError::TruncateBeyondLen {
                seq: s,
                n,
                len: seq.len,
            });
        }
        let keep = n.div_ceil(bs);
        if n > 0 && keep <= seq.dropped {
            return Err(KvError::PositionDropped {
                seq: s,
                pos: n - 1,
                first_kept: seq.dropped * bs,
            });
        }
        let released = seq.blocks.split_off(keep.saturating_sub(seq.dropped));
        if n == 0 {
            seq.dropped = 0;
        }
        seq.len = n;
        release_all(&mut self.pool, &self.index, &released);
        Ok(())
    }

    /// For an empty sequence `s`: attaches the longest chain of published
    /// full blocks whose tokens spell a prefix of `tokens` under `s`'s tenant
    /// (refcount + 1 each; cached ones leave the LRU) and returns the number
    /// of tokens attached, a multiple of `block_size`. `len(s)` becomes that
    /// number. A windowed manager ([`KvManager::with_window`]) attaches only
    /// the blocks of the match's window and counts the entries before them
    /// as dropped.
    ///
    /// `tokens`: the ids of the prompt, positions `0..tokens.len()`. A caller
    /// that needs logits for the last prompt token should pass all but the
    /// last token, so that at least one position is left to compute.
    ///
    /// Errors (state unchanged): [`KvError::UnknownSeq`],
    /// [`KvError::SeqNotEmpty`].
    pub fn attach_prefix(&mut self, s: SeqSlot, tokens: &[u32]) -> Result<usize, KvError> {
        self.attach(s, tokens, Grain::Blocks)
    }

    /// [`KvManager::attach_prefix`] at token grain: after the chain of
    /// full blocks, a published block whose first `k` ids (`0 < k <
    /// block_size`) spell the rest of `tokens` is attached too, as a
    /// partial last block, and `len(s)` grows by `k`. Its rows `0..k` were
    /// computed from exactly this prefix, so they are the KV `s` would
    /// compute; the block stays published, so the next [`KvManager::append`]
    /// copies those `k` rows to a fresh block before anything is written
    /// (one block copy instead of `k` positions of forward pass).
    ///
    /// ```text
    ///   published:  [1 2 3 4]→[5 6 7 8]        (block_size 4)
    ///   tokens:      1 2 3 4   5 6 9           → 4 + 2 = 6 attached
    ///   s:          [b0      ][b1: rows 0..2 ]  append copies b1's 2 rows
    /// ```
    ///
    /// Returns [`KvManager::prefix_match`]`(tenant(s), tokens)`.
    ///
    /// Errors (state unchanged): as [`KvManager::attach_prefix`].
    pub fn attach_prefix_rows(&mut self, s: SeqSlot, tokens: &[u32]) -> Result<usize, KvError> {
        self.attach(s, tokens, Grain::Rows)
    }

    /// How many tokens of `tokens` [`KvManager::attach_prefix_rows`] would
    /// attach for a sequence of `tenant`; changes nothing. Without a
    /// window, every shorter prefix of a match matches too; with one, a
    /// shorter prefix may not (its window may reach blocks the index no
    /// longer holds).
    pub fn prefix_match(&self, tenant: Tenant, tokens: &[u32]) -> usize {
        self.usable(&self.chain(tenant, tokens, Grain::Rows))
    }

    /// The index's path for `tokens` under `tenant`: one entry per full
    /// block (`None` for a hollow node, walked only with a window), then
    /// at [`Grain::Rows`] one more published block whose first ids spell
    /// the rest, with that count.
    fn chain(&self, tenant: Tenant, tokens: &[u32], grain: Grain) -> Chain {
        let bs = self.block_size;
        let mut at = Place::Root(tenant);
        let mut full = Vec::new();
        for key in tokens.chunks_exact(bs) {
            let Some(node) = self.index.child(at, key) else {
                break;
            };
            let b = self.index.block_of(node);
            if b.is_none() && self.window.is_none() {
                break;
            }
            full.push(b);
            at = Place::Node(node);
        }
        let partial = match grain {
            Grain::Blocks => None,
            Grain::Rows => self
                .index
                .longest_child(at, &tokens[full.len() * bs..], bs - 1)
                .and_then(|(node, k)| Some((self.index.block_of(node)?, k))),
        };
        Chain { full, partial }
    }

    /// The longest prefix of `c` a sequence can continue from: all of it
    /// without a window; with one, the longest whose window's blocks are
    /// all held.
    fn usable(&self, c: &Chain) -> usize {
        let bs = self.block_size;
        let mut n = c.full.len() * bs + c.partial.map_or(0, |(_, k)| k);
        let Some(w) = self.window else {
            return n;
        };
        while n > 0 {
            let lo = window_start(n, w) / bs;
            let hi = (n - 1) / bs;
            // The highest missing block the window of n covers: every
            // match longer than its start reads it.
            match (lo..=hi).rev().find(|&j| c.block(j).is_none()) {
                Some(j) => n = j * bs,
                None => break,
            }
        }
        n
    }

    /// Attaches [`KvManager::usable`] of the chain for `tokens` to the
    /// empty `s`.
    fn attach(&mut self, s: SeqSlot, tokens: &[u32], grain: Grain) -> Result<usize, KvError> {
        let bs = self.block_size;
        let seq = self.seq(s)?;
        if seq.len != 0 {
            return Err(KvError::SeqNotEmpty {
                seq: s,
                len: seq.len,
            });
        }
        let c = self.chain(seq.tenant, tokens, grain);
        let n = self.usable(&c);
        let first = self.window.map_or(0, |w| window_start(n, w) / bs);
        // Every entry first..n.div_ceil(bs) holds a block (usable checked).
        let blocks: Vec<BlockId> = (first..n.div_ceil(bs)).filter_map(|j| c.block(j)).collect();
        debug_assert_eq!(blocks.len(), n.div_ceil(bs) - first);
        for &b in &blocks {
            self.pool.incref(b);
        }
        let Some(seq) = self.seqs.get_mut(&s) else {
            // Unreachable: checked above and nothing removed it since.
            release_all(&mut self.pool, &self.index, &blocks);
            return Err(KvError::UnknownSeq(s));
        };
        seq.blocks = blocks;
        seq.dropped = first;
        seq.len = n;
        Ok(n)
    }

    /// Registers the full blocks of `s` in the prefix index under `s`'s
    /// tenant, making them immutable and reusable by `attach_prefix`.
    ///
    /// `tokens`: the ids at positions `0..len(s)` (exactly `len(s)` entries;
    /// the tokens of a partial last block are checked for count only).
    /// Blocks already indexed along the path are kept. Where the index already
    /// holds a different block for the same path, the existing one stays and
    /// `s` keeps its own block private; its later blocks still hang below the
    /// existing node (same tokens, same KV). A hollow node on the path gets
    /// `s`'s block. Entries [`KvManager::drop_before`] released are walked
    /// along existing nodes; a windowed manager inserts hollow nodes for
    /// those missing ([`KvManager::with_window`]), one without a window
    /// inserts nothing below them.
    ///
    /// Errors (state unchanged): [`KvError::UnknownSeq`],
    /// [`KvError::TokenCountMismatch`], [`KvError::PublishConflict`] when one
    /// of `s`'s blocks is already published under a path other than
    /// `tokens`' (the tokens cannot be the ones it holds).
    pub fn publish(&mut self, s: SeqSlot, tokens: &[u32]) -> Result<(), KvError> {
        let bs = self.block_size;
        let seq = self.seqs.get(&s).ok_or(KvError::UnknownSeq(s))?;
        if tokens.len() != seq.len {
            return Err(KvError::TokenCountMismatch {
                seq: s,
                expected: seq.len,
                got: tokens.len(),
            });
        }
        // Pass 1 validates (so that errors leave the index untouched), pass
        // 2 inserts. `at` is None once the walk has left the existing trie.
        // Dropped entries have no block: without a window, the walk passes
        // them only along nodes the index already holds (published before
        // they were dropped) and inserts nothing below a gap; with one, it
        // inserts hollow nodes for them, so that the blocks after the gap
        // (the window of this length) are findable, provided there is at
        // least one such full block to hang below them.
        let hollow_gap = self.window.is_some() && tokens.len() / bs > seq.dropped;
        for pass in [Pass::Validate, Pass::Insert] {
            let mut at = Some(Place::Root(seq.tenant));
            let mut chunks = tokens.chunks_exact(bs);
            for key in chunks.by_ref().take(seq.dropped) {
                at = match (at.map(|p| (p, self.index.child(p, key))), pass) {
                    (Some((_, Some(node))), _) => Some(Place::Node(node)),
                    (Some((p, None)), Pass::Insert) if hollow_gap => {
                        Some(Place::Node(self.index.insert(p, key, None)))
                    }
                    _ => None,
                };
            }
            for (j, (key, &b)) in chunks.zip(&seq.blocks).enumerate() {
                let j = j + seq.dropped;
                let existing = at.and_then(|p| self.index.child(p, key));
                match existing {
                    Some(node) => {
                        let held = self.index.block_of(node);
                        if held != Some(b) && self.index.is_published(b) {
                            return Err(KvError::PublishConflict {
                                seq: s,
                                tenant: seq.tenant,
                                block_index: j,
                            });
                        }
                        // A hollow node gets this block: the same tokens'
                        // rows, computed again.
                        if held.is_none() && pass == Pass::Insert {
                            self.index.fill(node, b);
                        }
                        at = Some(Place::Node(node));
                    }
                    None if self.index.is_published(b) => {
                        return Err(KvError::PublishConflict {
                            seq: s,
                            tenant: seq.tenant,
                            block_index: j,
                        });
                    }
                    None => {
                        at = match (pass, at) {
                            (Pass::Insert, Some(p)) => {
                                Some(Place::Node(self.index.insert(p, key, Some(b))))
                            }
                            _ => None,
                        };
                    }
                }
            }
        }
        Ok(())
    }

    /// Starts logging what the prefix index holds, for a KV-aware router
    /// (see [`crate::KvEvent`]): the first events say nothing is held, then store
    /// what is already published.
    pub fn enable_events(&mut self) {
        self.index.enable_events();
    }

    /// Starts the event log over (enabling it if it was off): the events
    /// not yet taken are dropped, and the next ones say nothing is held,
    /// then store everything published. A consumer that lost events is
    /// whole again after them.
    pub fn restart_events(&mut self) {
        self.index.restart_events();
    }

    /// The events since the last call, oldest first (none unless
    /// [`KvManager::enable_events`] was called).
    pub fn take_events(&mut self) -> Vec<crate::KvEvent> {
        self.index.take_events()
    }

    /// Counts of free, used and cached blocks (they sum to the capacity).
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            capacity: self.pool.capacity(),
            free: self.pool.n_free(),
            used: self.pool.n_used(),
            cached: self.pool.n_cached(),
        }
    }

    /// Number of block-table entries (across live sequences) that reference
    /// `b`; 0 for free, cached and out-of-range ids.
    pub fn refcount(&self, b: BlockId) -> u32 {
        self.pool.refcount(b)
    }

    /// Nodes of the prefix index, hollow ones included
    /// ([`KvManager::with_window`]); each published block has one.
    pub fn index_nodes(&self) -> usize {
        self.index.len()
    }

    /// Whether `b` is published in the prefix index (and so immutable).
    pub fn is_published(&self, b: BlockId) -> bool {
        self.index.is_published(b)
    }

    /// Whether `b` is cached: unreferenced but kept for prefix reuse.
    pub fn is_cached(&self, b: BlockId) -> bool {
        self.pool.is_cached(b)
    }

    /// Whether `s` may write position `pos` in place right now: its block
    /// has refcount 1 and is unpublished.
    ///
    /// Errors: [`KvError::UnknownSeq`], [`KvError::PositionOutOfRange`] when
    /// `pos >= len(s)`.
    pub fn is_writable(&self, s: SeqSlot, pos: usize) -> Result<bool, KvError> {
        let (b, _) = self.locate(s, pos)?;
        Ok(exclusive(&self.pool, &self.index, b))
    }

    /// Live sequences, in slot order.
    pub fn seqs(&self) -> impl Iterator<Item = SeqSlot> + '_ {
        self.seqs.keys().copied()
    }
}
