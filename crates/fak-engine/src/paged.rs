//! The paged KV store: K/V rows (f16, or Q8_0 on request) in fixed-size
//! blocks, addressed through [`fak_kv::KvManager`]'s block tables.
//!
//! ```text
//!   seq 3 block table:  [ b7 | b2 | b9 ]          block_size = 4 tokens
//!   position 9  ──►  blocks[9 / 4] = b9, row 9 % 4 = 1
//!
//!   storage (K and V alike), one segment per (physical block, layer),
//!   segment index b · n_layer + layer, head-major inside (KvRowBuf):
//!   block b, layer l: [kv head 0: row 0..block_size][kv head 1: ...] ...
//!            each row of a head: head_dim values as f16 (default) or
//!            head_dim / 32 Q8_0 blocks
//!   i.e. [block][layer][kv_head][row][head_dim]
//! ```
//!
//! Bookkeeping (refcounts, copy-on-write, the prefix index) is fak-kv's;
//! this module only moves rows: when fak-kv hands out a fresh block for a
//! shared one, [`PagedKv::reserve`](fak_model::KvStore::reserve) copies the
//! old rows over before anything is written. Sequence ids of the model
//! ([`SeqId`]) and slots of fak-kv ([`SeqSlot`]) are the same numbers.

use std::collections::HashMap;

use fak_kv::{BlockCopy, KvManager, PoolConfig, PoolStats, SeqSlot, Tenant};
use fak_model::{KvError, KvRowBuf, KvRowShape, KvRun, KvStore, KvType, ModelConfig, SeqId};

use crate::EngineError;

/// Default tokens per KV block for the CLI's commands.
///
/// Attention walks a sequence one block-run at a time, and each run costs
/// a kernel call with its own set-up. On the fleet probe (SmolLM2 Q8_0, 2
/// threads) 64-token blocks ran 1.594–1.611 agent-turns/s against
/// 1.322–1.369 with 16 (`fak bench fleet --profile probe --block-size N`,
/// alternated in one session; docs/history/FLEET-avx2-vm.md), with identical generated
/// tokens. Larger blocks share a prefix
/// at a coarser grain (a cached prefix is reused up to its last whole
/// block) and copy more on the first write to a shared partial block.
pub const DEFAULT_BLOCK_SIZE: usize = 64;

/// Tokens per KV block for agent fleets (`fak bench fleet`), whose
/// contexts are long: a shared prefix of 1k–20k tokens plus tens of turns
/// of private history per agent.
///
/// Each agent's private rows come from DRAM on every decode step, one
/// block-run at a time: a 64-token block is one 8 KiB run per head and
/// layer, and each run is one kernel call and a new stream for the
/// prefetchers. Longer blocks make fewer, longer runs. Measured on the
/// 40-turn bounded-long point (SmolLM2 Q8_0, P 1024, A 8, D 32, R 48,
/// 2 threads; docs/history/FLEET-avx2-vm.md), with identical generated tokens:
/// - 256-token blocks ran 1.692 and 1.713 agent-turns/s;
/// - 64-token blocks ran 1.617.
///
/// At 20 turns the two sizes read alike (2.069 and 2.092 against 2.087 and
/// 1.991). The cost: up to 255 unused positions per agent (peak RSS 914
/// against 819 MB at 40 turns), and prefixes shared at a 256-token grain.
pub const FLEET_BLOCK_SIZE: usize = 256;

/// Sizes of a [`PagedKv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PagedKvConfig {
    /// Tokens per block.
    pub block_size: usize,
    /// Number of physical blocks.
    pub n_blocks: usize,
    /// Element type of the stored rows.
    pub kv_type: KvType,
}

impl PagedKvConfig {
    /// Enough blocks of `block_size` tokens for `n_seq` private sequences of
    /// `n_ctx` tokens each (every sequence rounds up to whole blocks).
    pub fn for_sequences(block_size: usize, n_seq: usize, n_ctx: usize) -> PagedKvConfig {
        let block_size = block_size.max(1);
        PagedKvConfig {
            block_size,
            // Saturating: a count that overflows is refused by PagedKv::new.
            n_blocks: n_seq
                .max(1)
                .saturating_mul(n_ctx.div_ceil(block_size).max(1)),
            kv_type: KvType::F16,
        }
    }

    /// The same sizes, storing rows as `kv_type`.
    pub fn with_kv_type(self, kv_type: KvType) -> PagedKvConfig {
        PagedKvConfig { kv_type, ..self }
    }
}

/// K/V storage in blocks, plus fak-kv's bookkeeping.
pub struct PagedKv {
    mgr: KvManager,
    n_layer: usize,
    n_kv_dim: usize,
    block_size: usize,
    kv_type: KvType,
    /// Rows `[n_blocks][n_layer][n_head_kv][block_size][head_dim]`: one
    /// segment per (block, layer), head-major inside (see [`KvRowBuf`]).
    k: KvRowBuf,
    /// Same layout as `k`.
    v: KvRowBuf,
    /// Positions whose rows are complete in every layer, per sequence.
    committed: HashMap<SeqSlot, usize>,
}

impl PagedKv {
    /// A store for `cfg`'s layers and KV width.
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] if the sizes are zero or do not fit in memory
    /// arithmetic; [`EngineError::Model`] if `sizes.kv_type` cannot hold
    /// the model's rows.
    pub fn new(model: &ModelConfig, sizes: PagedKvConfig) -> Result<PagedKv, EngineError> {
        sizes
            .kv_type
            .check(model)
            .map_err(fak_model::ModelError::from)?;
        let n_kv_dim = model.n_head_kv * model.head_dim;
        let per_block = model
            .n_layer
            .checked_mul(sizes.block_size)
            .and_then(|x| x.checked_mul(n_kv_dim));
        let total = per_block.and_then(|x| x.checked_mul(sizes.n_blocks));
        let Some(_) = total.filter(|&t| t > 0 && t <= isize::MAX as usize / 2) else {
            return Err(EngineError::Kv(fak_kv::KvError::BadConfig(format!(
                "{} blocks of {} tokens x {} layers x {} values",
                sizes.n_blocks, sizes.block_size, model.n_layer, n_kv_dim
            ))));
        };
        let shape = KvRowShape {
            segments: model.n_layer * sizes.n_blocks,
            seg_rows: sizes.block_size,
            n_kv_dim,
            head_dim: model.head_dim,
        };
        // The rows first: they dwarf the bookkeeping, so a pool too large
        // for memory is refused by their allocation probe.
        let k = KvRowBuf::new(sizes.kv_type, shape).map_err(fak_model::ModelError::from)?;
        let v = KvRowBuf::new(sizes.kv_type, shape).map_err(fak_model::ModelError::from)?;
        let mgr = KvManager::new(PoolConfig {
            block_size: sizes.block_size,
            n_blocks: sizes.n_blocks,
        })?;
        Ok(PagedKv {
            mgr,
            n_layer: model.n_layer,
            n_kv_dim,
            block_size: sizes.block_size,
            kv_type: sizes.kv_type,
            k,
            v,
            committed: HashMap::new(),
        })
    }

    /// The bookkeeping (read-only).
    pub fn manager(&self) -> &KvManager {
        &self.mgr
    }

    /// Tokens per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Pool occupancy.
    pub fn stats(&self) -> PoolStats {
        self.mgr.stats()
    }

    /// Bytes of K and V storage.
    pub fn storage_bytes(&self) -> usize {
        self.k.bytes() + self.v.bytes()
    }

    /// A new, empty sequence in `tenant`'s namespace.
    pub fn create(&mut self, tenant: Tenant) -> SeqId {
        let s = self.mgr.create_seq(tenant);
        self.committed.insert(s, 0);
        SeqId(s.0)
    }

    /// A copy of `src` that shares all of its blocks (O(blocks)).
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] for an unknown sequence.
    pub fn fork(&mut self, src: SeqId) -> Result<SeqId, EngineError> {
        let len = self.committed_len(src)?;
        let s = self.mgr.fork(SeqSlot(src.0))?;
        // A fork holds exactly the committed rows of its parent.
        self.mgr.truncate(s, len)?;
        self.committed.insert(s, len);
        Ok(SeqId(s.0))
    }

    /// Drops a sequence and releases its blocks.
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] for an unknown sequence.
    pub fn free(&mut self, seq: SeqId) -> Result<(), EngineError> {
        self.mgr.free_seq(SeqSlot(seq.0))?;
        self.committed.remove(&SeqSlot(seq.0));
        Ok(())
    }

    /// Keeps positions `0..n` of `seq`.
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] for an unknown sequence or `n` beyond its length.
    pub fn truncate(&mut self, seq: SeqId, n: usize) -> Result<(), EngineError> {
        let len = self.committed_len(seq)?;
        let n = n.min(len);
        self.mgr.truncate(SeqSlot(seq.0), n)?;
        self.committed.insert(SeqSlot(seq.0), n);
        Ok(())
    }

    /// Attaches the longest cached prefix of `tokens` to the empty `seq`;
    /// returns how many tokens it covers: whole blocks, then the rows of
    /// one more cached block that spell the rest of the match
    /// ([`KvManager::attach_prefix_rows`]; copied before the first write).
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] for an unknown or non-empty sequence.
    pub fn attach_prefix(&mut self, seq: SeqId, tokens: &[u32]) -> Result<usize, EngineError> {
        let n = self.mgr.attach_prefix_rows(SeqSlot(seq.0), tokens)?;
        self.committed.insert(SeqSlot(seq.0), n);
        Ok(n)
    }

    /// Offers `seq`'s full blocks to the prefix index; `tokens` are its ids
    /// at positions `0..len`.
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] for an unknown sequence or a token count that is
    /// not its length.
    pub fn publish(&mut self, seq: SeqId, tokens: &[u32]) -> Result<(), EngineError> {
        self.mgr.publish(SeqSlot(seq.0), tokens)?;
        Ok(())
    }

    fn committed_len(&self, seq: SeqId) -> Result<usize, EngineError> {
        self.committed
            .get(&SeqSlot(seq.0))
            .copied()
            .ok_or(EngineError::Kv(fak_kv::KvError::UnknownSeq(SeqSlot(seq.0))))
    }

    /// Row index of layer `layer`'s first row of block `block` in `k`/`v`.
    fn base(&self, block: fak_kv::BlockId, layer: usize) -> usize {
        (block.0 as usize * self.n_layer + layer) * self.block_size
    }

    /// Row index of the row at `pos` of `seq` in `layer`, if that position
    /// has a block.
    fn offset(&self, layer: usize, seq: SeqId, pos: usize) -> Option<usize> {
        let blocks = self.mgr.blocks(SeqSlot(seq.0)).ok()?;
        let b = *blocks.get(pos / self.block_size)?;
        Some(self.base(b, layer) + pos % self.block_size)
    }

    fn copy_block(&mut self, c: BlockCopy) {
        let rows = c.n_tokens.min(self.block_size);
        for layer in 0..self.n_layer {
            let (src, dst) = (self.base(c.src, layer), self.base(c.dst, layer));
            self.k.copy_rows(src, dst, rows);
            self.v.copy_rows(src, dst, rows);
        }
    }

    /// Rows of a position that has no block: an empty run (never read by a
    /// correct forward pass; returning it keeps reads panic-free).
    fn none(&self) -> KvRun<'_> {
        KvRun::F16(&[])
    }
}

/// fak-kv's error as the model's: out of blocks and unknown sequences by
/// their own variants, anything else carried whole in `KvError::Store`.
fn kv_err(seq: SeqId, e: fak_kv::KvError) -> KvError {
    match e {
        fak_kv::KvError::OutOfBlocks { needed, available } => {
            KvError::OutOfBlocks { needed, available }
        }
        fak_kv::KvError::UnknownSeq(_) => KvError::UnknownSeq(seq.0),
        other => KvError::Store {
            seq: seq.0,
            source: other,
        },
    }
}

impl KvStore for PagedKv {
    fn seq_len(&self, seq: SeqId) -> Result<usize, KvError> {
        self.committed
            .get(&SeqSlot(seq.0))
            .copied()
            .ok_or(KvError::UnknownSeq(seq.0))
    }

    fn reserve(&mut self, seq: SeqId, n: usize) -> Result<(), KvError> {
        let slot = SeqSlot(seq.0);
        let have = self.mgr.len(slot).map_err(|e| kv_err(seq, e))?;
        if n <= have {
            return Ok(());
        }
        let copies = self
            .mgr
            .append(slot, n - have)
            .map_err(|e| kv_err(seq, e))?;
        for c in copies {
            self.copy_block(c);
        }
        Ok(())
    }

    fn write(
        &mut self,
        layer: usize,
        seq: SeqId,
        pos: usize,
        k: &[f32],
        v: &[f32],
    ) -> Result<(), KvError> {
        if k.len() != self.n_kv_dim || v.len() != self.n_kv_dim {
            return Err(KvError::Width {
                got: k.len().max(v.len()),
                want: self.n_kv_dim,
            });
        }
        let reserved = self.mgr.len(SeqSlot(seq.0)).map_err(|e| kv_err(seq, e))?;
        let o = match self.offset(layer, seq, pos) {
            Some(o) if pos < reserved && layer < self.n_layer => o,
            _ => {
                return Err(KvError::ContextFull {
                    seq: seq.0,
                    pos,
                    n_ctx: reserved,
                })
            }
        };
        debug_assert!(
            self.mgr.is_writable(SeqSlot(seq.0), pos).unwrap_or(false),
            "write into a shared block"
        );
        self.k.write(o, k);
        self.v.write(o, v);
        Ok(())
    }

    fn commit(&mut self, seq: SeqId, n: usize) -> Result<(), KvError> {
        let reserved = self.mgr.len(SeqSlot(seq.0)).map_err(|e| kv_err(seq, e))?;
        if n > reserved {
            return Err(KvError::NotContiguous {
                seq: seq.0,
                pos: n,
                len: reserved,
            });
        }
        self.committed.insert(SeqSlot(seq.0), n);
        Ok(())
    }

    fn kv_type(&self) -> KvType {
        self.kv_type
    }

    fn k_run(&self, layer: usize, seq: SeqId, pos: usize, end: usize, head: usize) -> KvRun<'_> {
        match self.offset(layer, seq, pos) {
            Some(o) => self.k.run(o, self.run_len(pos, end), head),
            None => self.none(),
        }
    }

    fn v_run(&self, layer: usize, seq: SeqId, pos: usize, end: usize, head: usize) -> KvRun<'_> {
        match self.offset(layer, seq, pos) {
            Some(o) => self.v.run(o, self.run_len(pos, end), head),
            None => self.none(),
        }
    }
}

impl PagedKv {
    /// Rows from `pos` to the end of its block, at most up to `end`.
    fn run_len(&self, pos: usize, end: usize) -> usize {
        let block_end = (pos / self.block_size + 1) * self.block_size;
        block_end.min(end).saturating_sub(pos).max(1)
    }

    /// Reads the K and V rows (`[n_kv_dim]` each, as f32) of `seq` at `pos`
    /// in `layer` into `k` and `v`.
    pub(crate) fn read_rows(
        &self,
        layer: usize,
        seq: SeqId,
        pos: usize,
        k: &mut [f32],
        v: &mut [f32],
    ) {
        if let Some(o) = self.offset(layer, seq, pos) {
            self.k.read(o, k);
            self.v.read(o, v);
        }
    }

    /// Model layers and KV row width.
    pub(crate) fn dims(&self) -> (usize, usize) {
        (self.n_layer, self.n_kv_dim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: every fak-kv error but out-of-blocks used to become
    /// `UnknownSeq`, so a caller could not tell what had gone wrong.
    #[test]
    fn kv_errors_map_losslessly() {
        let seq = SeqId(3);
        assert_eq!(
            kv_err(
                seq,
                fak_kv::KvError::OutOfBlocks {
                    needed: 2,
                    available: 1
                }
            ),
            KvError::OutOfBlocks {
                needed: 2,
                available: 1
            }
        );
        assert_eq!(
            kv_err(seq, fak_kv::KvError::UnknownSeq(SeqSlot(3))),
            KvError::UnknownSeq(3)
        );
        let other = fak_kv::KvError::LengthOverflow {
            seq: SeqSlot(3),
            len: usize::MAX,
            n: 1,
        };
        assert_eq!(
            kv_err(seq, other.clone()),
            KvError::Store {
                seq: 3,
                source: other
            }
        );
    }
}
