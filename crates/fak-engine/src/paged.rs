//! The paged KV store: K/V rows (f16, or Q8_0 on request) in fixed-size
//! blocks, addressed through [`fak_kv::KvManager`]'s block tables.
//!
//! The model's layers are split into *groups* by attention window, each
//! with its own manager, block pool and rows: one group for a model
//! without sliding windows (llama, qwen2: the layout below, unchanged);
//! for gemma3 with [`KvWindow::Drop`] (the default) a global group (layers
//! 5, 11, 17 of the 270M file, every position) and a local group (the 15
//! window-512 layers), whose blocks are released once every position in
//! them is before the window of the sequence's next token:
//!
//! ```text
//!   seq of 1100 positions, block_size 64, W = 512: next token 1100 reads 589..
//!   global group (3 layers):  [b0 b1 ... b17]              18 blocks
//!   local group (15 layers):  [ -  ... -  b9' ... b17']    9 dropped, 9 held
//! ```
//!
//! A sequence has the same slot in every group's manager (every call is
//! made on all of them in the same order).
//!
//! Prefix reuse with windows: each group's manager keeps its own prefix
//! index, and the local group's is made with the window
//! ([`KvManager::with_window`]), so that a published prefix stays findable
//! after its early local blocks are gone: they stand in the index as
//! hollow nodes, and a match of `n` tokens needs only the local blocks
//! covering `n + 1 - W..n`. [`PagedKv::attach_prefix`] takes the longest
//! `n` every group can continue from. A published 1100-token prefix:
//!
//! ```text
//!   global index:  [b0 b1 ... b16]                 17 full blocks: 1088 tokens
//!   local index:   [○ ... ○ b9' ... b16']          9 hollow, the window's 8
//!   a prompt with that prefix: n = 1088 (the next token reads 577..1088,
//!   local blocks 9..16): 12 tokens of it recomputed, not 1088
//! ```
//!
//! What a windowed path may still serve is decided in fak-kv: the index
//! (hollow nodes, what eviction removes, which blocks a match needs) is
//! its bookkeeping, and the rule is one about positions, not rows. This
//! module decides which layers form which group, with which window, and
//! combines the groups' matches.
//! ```text
//!   seq 3 block table:  [ b7 | b2 | b9 ]          block_size = 4 tokens
//!   position 9  ──►  blocks[9 / 4] = b9, row 9 % 4 = 1
//!
//!   storage of a group (K and V alike), one segment per (physical block,
//!   layer of the group), segment index b · group layers + l, head-major
//!   inside (KvRowBuf):
//!   block b, layer l: [kv head 0: row 0..block_size][kv head 1: ...] ...
//!            each row of a head: head_dim values as f16 (default) or
//!            head_dim / 32 Q8_0 blocks
//!   i.e. V (and Q8_0 K): [block][layer][kv_head][row][head_dim]
//!        f16 K, dims-major: [block][layer][kv_head][head_dim][row]
//! ```
//!
//! Bookkeeping (refcounts, copy-on-write, the prefix index) is fak-kv's;
//! this module only moves rows: when fak-kv hands out a fresh block for a
//! shared one, [`PagedKv::reserve`](fak_model::KvStore::reserve) copies the
//! old rows over before anything is written. Sequence ids of the model
//! ([`SeqId`]) and slots of fak-kv ([`SeqSlot`]) are the same numbers.

use std::collections::{BTreeMap, HashMap};

use fak_kv::{BlockCopy, BlockId, KvManager, PoolConfig, PoolStats, SeqSlot, Tenant};
use fak_model::{
    KeyRun, KvError, KvRowBuf, KvRowShape, KvRun, KvStore, KvType, ModelConfig, SeqId,
};

use crate::error::EngineError;

/// Default tokens per KV block for the CLI's commands.
///
/// Attention walks a sequence one block-run at a time, and each run costs
/// a kernel call with its own set-up. On the fleet probe (SmolLM2 Q8_0, 2
/// threads) 64-token blocks ran 1.594–1.611 agent-turns/s against
/// 1.322–1.369 with 16 (`fak bench fleet --profile probe --block-size N`,
/// alternated in one run; docs/history/FLEET-avx2-vm.md), with identical generated
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

/// Whether sliding-window layers keep the rows outside their window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvWindow {
    /// A local layer's blocks are released once every position in them is
    /// before the window of the sequence's next token (the default; models
    /// without windows are unaffected). Operations that would need the
    /// released rows recompute them from the tokens or are refused with
    /// [`EngineError::WindowDropped`].
    #[default]
    Drop,
    /// Every layer keeps every position (one group): what the store did
    /// before windows were dropped, kept to measure the difference.
    Keep,
}

impl KvWindow {
    /// The flag spelling (`drop`, `keep`).
    pub fn name(self) -> &'static str {
        match self {
            KvWindow::Drop => "drop",
            KvWindow::Keep => "keep",
        }
    }
}

/// Sizes of a [`PagedKv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PagedKvConfig {
    /// Tokens per block.
    pub block_size: usize,
    /// Number of physical blocks (of each layer group).
    pub n_blocks: usize,
    /// Element type of the stored rows.
    pub kv_type: KvType,
    /// Whether sliding-window layers drop rows outside their window.
    pub window: KvWindow,
}

/// How much memory a KV pool may take ([`PagedKvConfig::for_budget`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvBudget {
    /// This many bytes of K and V rows (`fak serve --kv-mem`).
    Bytes(usize),
    /// Room for `n_seq` sequences of `n_ctx` tokens plus one block each,
    /// at most [`MAX_SEQUENCES_KV_BYTES`].
    Sequences {
        /// Sequences held at once.
        n_seq: usize,
        /// Tokens per sequence.
        n_ctx: usize,
    },
}

/// Most bytes a [`KvBudget::Sequences`] budget takes (4 GiB): a long
/// trained context times many sequences would otherwise ask for more than
/// the machine has. Give [`KvBudget::Bytes`] for more.
pub const MAX_SEQUENCES_KV_BYTES: usize = 4 << 30;

/// Why a [`KvBudget`] gives no usable pool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvBudgetError {
    /// Fewer than the two blocks a pool needs (a request's blocks plus one
    /// spare for a copy-on-write).
    #[error(
        "gives {n_blocks} KV blocks of {block_size} tokens ({block_bytes} bytes each), \
         fewer than 2; give more memory"
    )]
    TooFewBlocks {
        /// Blocks the budget pays for.
        n_blocks: usize,
        /// Tokens per block.
        block_size: usize,
        /// Bytes of one block (K and V rows of every layer).
        block_bytes: usize,
    },
}

impl PagedKvConfig {
    /// Bytes of one token's K and V rows in every layer of `model`, stored
    /// as `kv_type`.
    pub fn bytes_per_token(model: &ModelConfig, kv_type: KvType) -> usize {
        let n_kv_dim = model.n_head_kv.saturating_mul(model.head_dim);
        kv_type
            .row_bytes(n_kv_dim)
            .saturating_mul(model.n_layer)
            .saturating_mul(2)
    }

    /// As many blocks of `block_size` tokens (at least 1) as `budget` pays
    /// for, rows of `model` stored as `kv_type` (sliding windows dropped,
    /// [`KvWindow::Drop`]; see [`PagedKvConfig::with_window`]).
    ///
    /// ```text
    ///   block bytes = bytes_per_token · block_size
    ///   Bytes(b)                   n_blocks = b / block bytes
    ///   Sequences { n_seq, n_ctx } n_blocks = min(n_seq · (n_ctx + block_size) · bytes_per_token,
    ///                                             4 GiB) / block bytes
    /// ```
    ///
    /// # Errors
    ///
    /// [`KvBudgetError::TooFewBlocks`] when the budget pays for fewer than
    /// 2 blocks.
    pub fn for_budget(
        model: &ModelConfig,
        kv_type: KvType,
        block_size: usize,
        budget: KvBudget,
    ) -> Result<PagedKvConfig, KvBudgetError> {
        let block_size = block_size.max(1);
        let per_token = PagedKvConfig::bytes_per_token(model, kv_type).max(1);
        let block_bytes = per_token.saturating_mul(block_size);
        let bytes = match budget {
            KvBudget::Bytes(b) => b,
            KvBudget::Sequences { n_seq, n_ctx } => n_seq
                .max(1)
                .saturating_mul(n_ctx.saturating_add(block_size))
                .saturating_mul(per_token)
                .min(MAX_SEQUENCES_KV_BYTES),
        };
        let n_blocks = bytes / block_bytes;
        if n_blocks < 2 {
            return Err(KvBudgetError::TooFewBlocks {
                n_blocks,
                block_size,
                block_bytes,
            });
        }
        Ok(PagedKvConfig {
            block_size,
            n_blocks,
            kv_type,
            window: KvWindow::Drop,
        })
    }

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
            window: KvWindow::Drop,
        }
    }

    /// The same sizes, storing rows as `kv_type`.
    pub fn with_kv_type(self, kv_type: KvType) -> PagedKvConfig {
        PagedKvConfig { kv_type, ..self }
    }

    /// The same sizes, with `window` for sliding-window layers.
    pub fn with_window(self, window: KvWindow) -> PagedKvConfig {
        PagedKvConfig { window, ..self }
    }
}

/// One group of layers sharing an attention window: its own bookkeeping
/// and rows.
struct Group {
    mgr: KvManager,
    /// The layers' window (`None`: every position is kept).
    window: Option<usize>,
    /// Layers in the group.
    n_layer: usize,
    /// Keys `[n_blocks][n_layer][n_head_kv][head_dim][block_size]` (f16,
    /// dims-major) or `[..][block_size][head_dim / 32]` (Q8_0): one
    /// segment per (block, layer of the group), head-major inside (see
    /// [`KvRowBuf::new_keys`]).
    k: KvRowBuf,
    /// Values `[n_blocks][n_layer][n_head_kv][block_size][head_dim]`.
    v: KvRowBuf,
}

/// Block counts of one layer group ([`PagedKv::groups`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStats {
    /// Model layers in the group.
    pub layers: Vec<usize>,
    /// Their attention window (`None`: every position is kept).
    pub window: Option<usize>,
    /// Bytes of K and V rows per block.
    pub block_bytes: usize,
    /// The group's pool.
    pub pool: PoolStats,
}

/// K/V storage in blocks, plus fak-kv's bookkeeping.
pub struct PagedKv {
    /// Layer groups; the first holds every position (no window) whenever
    /// the model has a layer without a window.
    groups: Vec<Group>,
    /// Per model layer: (group, layer index inside the group).
    layer_at: Vec<(usize, usize)>,
    n_layer: usize,
    n_kv_dim: usize,
    block_size: usize,
    kv_type: KvType,
    /// Positions whose rows are complete in every layer, per sequence:
    /// also the set of live slots.
    committed: HashMap<SeqSlot, usize>,
    /// The next slot to issue ([`PagedKv::new_slot`]).
    next_slot: u32,
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
        // Layers by window, the unwindowed ones first (BTreeMap: None < Some).
        let mut by_window: BTreeMap<Option<usize>, Vec<usize>> = BTreeMap::new();
        for layer in 0..model.n_layer {
            let w = match sizes.window {
                KvWindow::Drop => model.window(layer),
                KvWindow::Keep => None,
            };
            by_window.entry(w).or_default().push(layer);
        }
        let mut groups = Vec::with_capacity(by_window.len());
        let mut layer_at = vec![(0, 0); model.n_layer];
        for (g, (window, layers)) in by_window.into_iter().enumerate() {
            for (i, &l) in layers.iter().enumerate() {
                layer_at[l] = (g, i);
            }
            let shape = KvRowShape {
                segments: layers.len() * sizes.n_blocks,
                seg_rows: sizes.block_size,
                n_kv_dim,
                head_dim: model.head_dim,
            };
            // The rows first: they dwarf the bookkeeping, so a pool too
            // large for memory is refused by their allocation probe.
            let k =
                KvRowBuf::new_keys(sizes.kv_type, shape).map_err(fak_model::ModelError::from)?;
            let v = KvRowBuf::new(sizes.kv_type, shape).map_err(fak_model::ModelError::from)?;
            let pool = PoolConfig {
                block_size: sizes.block_size,
                n_blocks: sizes.n_blocks,
            };
            let mgr = match window {
                Some(w) => KvManager::with_window(pool, w)?,
                None => KvManager::new(pool)?,
            };
            groups.push(Group {
                mgr,
                window,
                n_layer: layers.len(),
                k,
                v,
            });
        }
        Ok(PagedKv {
            groups,
            layer_at,
            n_layer: model.n_layer,
            n_kv_dim,
            block_size: sizes.block_size,
            kv_type: sizes.kv_type,
            committed: HashMap::new(),
            next_slot: 0,
        })
    }

    /// The bookkeeping of the first layer group (the one holding every
    /// position whenever the model has a layer without a window), read-only.
    pub fn manager(&self) -> &KvManager {
        &self.groups[0].mgr
    }

    /// Tokens per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Starts logging which prefixes the first layer group holds, for a
    /// KV-aware router ([`KvManager::enable_events`]).
    pub fn enable_events(&mut self) {
        self.groups[0].mgr.enable_events();
    }

    /// Starts the event log over ([`KvManager::restart_events`]).
    pub fn restart_events(&mut self) {
        self.groups[0].mgr.restart_events();
    }

    /// The prefix events since the last call ([`KvManager::take_events`]).
    pub fn take_events(&mut self) -> Vec<fak_kv::KvEvent> {
        self.groups[0].mgr.take_events()
    }

    /// Pool occupancy of the first layer group: it holds a block wherever
    /// another group does, so admission and preemption count its blocks.
    pub fn stats(&self) -> PoolStats {
        self.groups[0].mgr.stats()
    }

    /// Each layer group's layers, window, block bytes and occupancy.
    pub fn groups(&self) -> Vec<GroupStats> {
        self.groups
            .iter()
            .enumerate()
            .map(|(g, grp)| GroupStats {
                layers: (0..self.n_layer)
                    .filter(|&l| self.layer_at[l].0 == g)
                    .collect(),
                window: grp.window,
                block_bytes: 2
                    * grp.n_layer
                    * self.block_size
                    * self.kv_type.row_bytes(self.n_kv_dim),
                pool: grp.mgr.stats(),
            })
            .collect()
    }

    /// Bytes of K and V rows in blocks that sequences hold now (used
    /// blocks × block bytes, summed over the layer groups; cached and free
    /// blocks not counted).
    pub fn held_bytes(&self) -> usize {
        self.groups()
            .iter()
            .map(|g| g.pool.used * g.block_bytes)
            .sum()
    }

    /// Bytes of K and V storage.
    pub fn storage_bytes(&self) -> usize {
        self.groups.iter().map(|g| g.k.bytes() + g.v.bytes()).sum()
    }

    /// A new, empty sequence in `tenant`'s namespace, under one slot in
    /// every layer group (one numbering the store issues to all of them).
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] ([`fak_kv::KvError::SlotTaken`]) if a group
    /// holds the slot already: the groups would be out of step, which the
    /// single numbering rules out; nothing is created then.
    pub fn create(&mut self, tenant: Tenant) -> Result<SeqId, EngineError> {
        let s = self.new_slot();
        for k in 0..self.groups.len() {
            if let Err(e) = self.groups[k].mgr.create_seq_at(s, tenant) {
                self.unwind(s, k);
                return Err(e.into());
            }
        }
        self.committed.insert(s, 0);
        Ok(SeqId(s.0))
    }

    /// A copy of `src` that shares all of its blocks (O(blocks)).
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] for an unknown sequence.
    pub fn fork(&mut self, src: SeqId) -> Result<SeqId, EngineError> {
        let len = self.committed_len(src)?;
        let s = self.new_slot();
        for k in 0..self.groups.len() {
            let mgr = &mut self.groups[k].mgr;
            if let Err(e) = mgr.fork_at(SeqSlot(src.0), s) {
                self.unwind(s, k);
                return Err(e.into());
            }
            // A fork holds exactly the committed rows of its parent.
            if let Err(e) = mgr.truncate(s, len) {
                self.unwind(s, k + 1);
                return Err(e.into());
            }
        }
        self.committed.insert(s, len);
        Ok(SeqId(s.0))
    }

    /// The slot for a new sequence: one numbering for every layer group,
    /// issued here, so that the groups hold a sequence under the same slot
    /// by construction (each group's manager refuses a slot it holds).
    /// Slots go up and are reused only after the counter wraps, skipping
    /// live ones.
    fn new_slot(&mut self) -> SeqSlot {
        loop {
            let s = SeqSlot(self.next_slot);
            self.next_slot = self.next_slot.wrapping_add(1);
            if !self.committed.contains_key(&s) {
                return s;
            }
        }
    }

    /// Frees slot `s` in the first `made` groups (a create or fork that
    /// failed part way).
    fn unwind(&mut self, s: SeqSlot, made: usize) {
        for g in &mut self.groups[..made] {
            let _ = g.mgr.free_seq(s);
        }
    }

    /// Drops a sequence and releases its blocks.
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] for an unknown sequence.
    pub fn free(&mut self, seq: SeqId) -> Result<(), EngineError> {
        for g in &mut self.groups {
            g.mgr.free_seq(SeqSlot(seq.0))?;
        }
        self.committed.remove(&SeqSlot(seq.0));
        Ok(())
    }

    /// The first position of `seq` whose rows every layer still holds (0
    /// unless sliding-window rows were dropped).
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] for an unknown sequence.
    pub fn first_kept(&self, seq: SeqId) -> Result<usize, EngineError> {
        let mut first = 0;
        for g in &self.groups {
            first = first.max(g.mgr.dropped(SeqSlot(seq.0))? * self.block_size);
        }
        Ok(first)
    }

    /// Keeps positions `0..n` of `seq`.
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] for an unknown sequence;
    /// [`EngineError::WindowDropped`] (nothing changed) when the next
    /// token, at `n`, would read sliding-window rows that were dropped:
    /// truncating to 0 always works.
    pub fn truncate(&mut self, seq: SeqId, n: usize) -> Result<(), EngineError> {
        let len = self.committed_len(seq)?;
        let n = n.min(len);
        let slot = SeqSlot(seq.0);
        if n > 0 {
            for g in &self.groups {
                let Some(w) = g.window else { continue };
                let first_kept = g.mgr.dropped(slot)? * self.block_size;
                let needed_from = (n + 1).saturating_sub(w);
                if first_kept > needed_from {
                    return Err(EngineError::WindowDropped {
                        seq: seq.0,
                        needed_from,
                        first_kept,
                    });
                }
            }
        }
        for g in &mut self.groups {
            g.mgr.truncate(slot, n)?;
        }
        self.committed.insert(slot, n);
        Ok(())
    }

    /// Attaches the longest cached prefix of `tokens` to the empty `seq`;
    /// returns how many tokens it covers: whole blocks, then the rows of
    /// one more cached block that spell the rest of the match
    /// ([`KvManager::attach_prefix_rows`]; copied before the first write).
    ///
    /// With several layer groups, the longest length `n` every group can
    /// continue from: the global group needs the rows of `0..n`, a windowed
    /// group only those of its window before `n`
    /// ([`KvManager::prefix_match`]). A shorter prefix of a global match
    /// always matches, a windowed one's need not, so the length is lowered
    /// until every group agrees (each lowering is strict, so this ends);
    /// then every group attaches exactly `n`.
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] for an unknown or non-empty sequence.
    pub fn attach_prefix(&mut self, seq: SeqId, tokens: &[u32]) -> Result<usize, EngineError> {
        let slot = SeqSlot(seq.0);
        let tenant = self.groups[0].mgr.tenant(slot)?;
        let mut n = tokens.len();
        loop {
            let agreed = self
                .groups
                .iter()
                .map(|g| g.mgr.prefix_match(tenant, &tokens[..n]))
                .min()
                .unwrap_or(0);
            if agreed == n {
                break;
            }
            n = agreed;
        }
        let mut got = Vec::with_capacity(self.groups.len());
        for g in &mut self.groups {
            match g.mgr.attach_prefix_rows(slot, &tokens[..n]) {
                Ok(k) => got.push(k),
                Err(e) => {
                    // Only the first group can refuse (an unknown or
                    // non-empty sequence is so in every group).
                    for done in &mut self.groups[..got.len()] {
                        done.mgr.truncate(slot, 0)?;
                    }
                    return Err(e.into());
                }
            }
        }
        if got.iter().any(|&k| k != n) {
            // Unreachable: every group agreed on n above. Attach nothing
            // rather than rows a group does not hold.
            debug_assert!(false, "layer groups attached {got:?}, not {n}");
            for g in &mut self.groups {
                g.mgr.truncate(slot, 0)?;
            }
            n = 0;
        }
        self.drop_outside_windows(slot, n)?;
        self.committed.insert(slot, n);
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
        for g in &mut self.groups {
            g.mgr.publish(SeqSlot(seq.0), tokens)?;
        }
        Ok(())
    }

    /// Releases the blocks of windowed groups that the token at `n` (the
    /// next one) no longer reads: those wholly before `n + 1 - W`.
    fn drop_outside_windows(&mut self, slot: SeqSlot, n: usize) -> Result<(), fak_kv::KvError> {
        for g in &mut self.groups {
            if let Some(w) = g.window {
                g.mgr.drop_before(slot, (n + 1).saturating_sub(w))?;
            }
        }
        Ok(())
    }

    fn committed_len(&self, seq: SeqId) -> Result<usize, EngineError> {
        self.committed
            .get(&SeqSlot(seq.0))
            .copied()
            .ok_or(EngineError::Kv(fak_kv::KvError::UnknownSeq(SeqSlot(seq.0))))
    }

    /// The group of `layer`, its buffer row of `layer`'s first row of
    /// block `block`.
    fn base(&self, block: BlockId, layer: usize) -> (&Group, usize) {
        let (g, l) = self.layer_at[layer];
        let grp = &self.groups[g];
        (grp, (block.0 as usize * grp.n_layer + l) * self.block_size)
    }

    /// The group of `layer` and the buffer row of the row at `pos` of `seq`,
    /// if that position has a block in it.
    fn offset(&self, layer: usize, seq: SeqId, pos: usize) -> Option<(&Group, usize)> {
        let (g, _) = *self.layer_at.get(layer)?;
        let b = self.groups[g]
            .mgr
            .block_at(SeqSlot(seq.0), pos / self.block_size)?;
        let (grp, base) = self.base(b, layer);
        Some((grp, base + pos % self.block_size))
    }

    fn copy_block(&mut self, g: usize, c: BlockCopy) {
        let rows = c.n_tokens.min(self.block_size);
        let bs = self.block_size;
        let grp = &mut self.groups[g];
        for l in 0..grp.n_layer {
            let src = (c.src.0 as usize * grp.n_layer + l) * bs;
            let dst = (c.dst.0 as usize * grp.n_layer + l) * bs;
            grp.k.copy_rows(src, dst, rows);
            grp.v.copy_rows(src, dst, rows);
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
        let have = self.groups[0].mgr.len(slot).map_err(|e| kv_err(seq, e))?;
        if n <= have {
            return Ok(());
        }
        for g in 0..self.groups.len() {
            let grown = self.groups[g].mgr.append(slot, n - have);
            match grown {
                Ok(copies) => {
                    for c in copies {
                        self.copy_block(g, c);
                    }
                }
                Err(e) => {
                    // All groups or none: give back what the earlier ones took.
                    for done in &mut self.groups[..g] {
                        done.mgr.truncate(slot, have).map_err(|e| kv_err(seq, e))?;
                    }
                    return Err(kv_err(seq, e));
                }
            }
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
        let g = self.layer_at.get(layer).map_or(0, |&(g, _)| g);
        let reserved = self.groups[g]
            .mgr
            .len(SeqSlot(seq.0))
            .map_err(|e| kv_err(seq, e))?;
        let o = match self.offset(layer, seq, pos) {
            Some((_, o)) if pos < reserved => o,
            _ => {
                return Err(KvError::ContextFull {
                    seq: seq.0,
                    pos,
                    n_ctx: reserved,
                })
            }
        };
        debug_assert!(
            self.groups[g]
                .mgr
                .is_writable(SeqSlot(seq.0), pos)
                .unwrap_or(false),
            "write into a shared block"
        );
        let grp = &mut self.groups[g];
        grp.k.write(o, k);
        grp.v.write(o, v);
        Ok(())
    }

    fn commit(&mut self, seq: SeqId, n: usize) -> Result<(), KvError> {
        let slot = SeqSlot(seq.0);
        let reserved = self.groups[0].mgr.len(slot).map_err(|e| kv_err(seq, e))?;
        if n > reserved {
            return Err(KvError::NotContiguous {
                seq: seq.0,
                pos: n,
                len: reserved,
            });
        }
        self.committed.insert(slot, n);
        self.drop_outside_windows(slot, n)
            .map_err(|e| kv_err(seq, e))
    }

    fn kv_type(&self) -> KvType {
        self.kv_type
    }

    fn k_run(&self, layer: usize, seq: SeqId, pos: usize, end: usize, head: usize) -> KeyRun<'_> {
        match self.offset(layer, seq, pos) {
            Some((g, o)) => g.k.key_run(o, self.run_len(pos, end), head),
            None => KeyRun::Rows(self.none()),
        }
    }

    fn v_run(&self, layer: usize, seq: SeqId, pos: usize, end: usize, head: usize) -> KvRun<'_> {
        match self.offset(layer, seq, pos) {
            Some((g, o)) => g.v.run(o, self.run_len(pos, end), head),
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
    /// in `layer` into `k` and `v`; leaves them untouched for a position
    /// without rows (callers check [`PagedKv::first_kept`] first).
    pub(crate) fn read_rows(
        &self,
        layer: usize,
        seq: SeqId,
        pos: usize,
        k: &mut [f32],
        v: &mut [f32],
    ) {
        if let Some((g, o)) = self.offset(layer, seq, pos) {
            g.k.read(o, k);
            g.v.read(o, v);
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

    /// Shapes of SmolLM2-135M: 30 layers, 3 KV heads of 64 values.
    fn smollm2_shapes() -> ModelConfig {
        ModelConfig {
            arch: fak_model::Arch::Llama,
            n_vocab: 49152,
            n_embd: 576,
            n_layer: 30,
            n_head: 9,
            n_head_kv: 3,
            head_dim: 64,
            n_ff: 1536,
            n_ctx_train: 8192,
            rope_theta: 100000.0,
            rope_dim: 64,
            rope_style: fak_model::RopeStyle::Normal,
            rms_eps: 1e-5,
            tied_embeddings: true,
            qkv_bias: false,
            qk_norm: fak_model::QkNorm::None,
            rope_freq_factors: None,
            gemma3: None,
        }
    }

    /// SmolLM2's shapes with every other layer local (window 8): two
    /// layer groups, each with its own block manager.
    fn two_group_shapes() -> ModelConfig {
        use fak_model::{Gemma3Params, SlidingWindow};
        let mut m = smollm2_shapes();
        m.n_layer = 4;
        m.gemma3 = Some(Gemma3Params {
            sliding: Some(SlidingWindow {
                window: 8,
                layers: (0..4)
                    .map(|l| {
                        if l % 2 == 0 {
                            fak_model::LayerAttn::Local
                        } else {
                            fak_model::LayerAttn::Global
                        }
                    })
                    .collect(),
            }),
            rope_theta_local: 10000.0,
            attn_scale: 1.0,
            final_logit_softcap: None,
        });
        m
    }

    /// The layer groups hold every sequence under the same slot: the
    /// store issues one numbering to all of them, so creates, forks and
    /// frees in any order keep them in step; and a group that holds a
    /// slot already makes `create` and `fork` fail without changing any
    /// group, instead of handing out a slot that names two sequences.
    #[test]
    fn layer_groups_share_one_slot_numbering() {
        let cfg = PagedKvConfig {
            block_size: 4,
            n_blocks: 64,
            kv_type: KvType::F16,
            window: KvWindow::Drop,
        };
        let mut kv = PagedKv::new(&two_group_shapes(), cfg).expect("store");
        assert_eq!(kv.groups.len(), 2);
        let live = |kv: &PagedKv| -> Vec<Vec<bool>> {
            kv.groups
                .iter()
                .map(|g| (0..12).map(|s| g.mgr.len(SeqSlot(s)).is_ok()).collect())
                .collect()
        };
        let a = kv.create(Tenant(1)).expect("create");
        let b = kv.create(Tenant(1)).expect("create");
        let c = kv.fork(a).expect("fork");
        kv.free(b).expect("free");
        let d = kv.fork(c).expect("fork");
        let e = kv.create(Tenant(2)).expect("create");
        let groups = live(&kv);
        assert_eq!(groups[0], groups[1]);
        for s in [a, c, d, e] {
            assert!(groups[0][s.0 as usize], "{s:?} not live");
        }
        assert!(!groups[0][b.0 as usize]);
        // Group 1 holds the next slot by itself: out of step. Both calls
        // refuse, and group 0 is left as it was.
        let next = SeqSlot(e.0 + 1);
        kv.groups[1]
            .mgr
            .create_seq_at(next, Tenant(9))
            .expect("taken by hand");
        let before = live(&kv);
        assert!(matches!(
            kv.create(Tenant(1)),
            Err(EngineError::Kv(fak_kv::KvError::SlotTaken(s))) if s == next
        ));
        assert_eq!(live(&kv), before);
        kv.next_slot = next.0;
        assert!(matches!(
            kv.fork(a),
            Err(EngineError::Kv(fak_kv::KvError::SlotTaken(s))) if s == next
        ));
        assert_eq!(live(&kv), before);
    }

    #[test]
    fn kv_budgets_size_the_pool() {
        let m = smollm2_shapes();
        // K and V, 30 layers, 192 values: 2 bytes each, or 34 per 32.
        let f16 = 2 * 30 * 192 * 2;
        let q8 = 2 * 30 * (192 / 32 * 34);
        assert_eq!(PagedKvConfig::bytes_per_token(&m, KvType::F16), f16);
        assert_eq!(PagedKvConfig::bytes_per_token(&m, KvType::Q8_0), q8);
        assert_eq!((f16, q8), (23040, 12240));

        let sized = |kv_type, block_size, budget| {
            PagedKvConfig::for_budget(&m, kv_type, block_size, budget)
        };
        // A byte budget: whole blocks, rounded down.
        let mib64 = KvBudget::Bytes(64 << 20);
        let c = sized(KvType::F16, 64, mib64).expect("f16 pool");
        assert_eq!(c.n_blocks, (64 << 20) / (f16 * 64));
        assert_eq!(c.n_blocks, 45);
        assert_eq!(
            (c.block_size, c.kv_type, c.window),
            (64, KvType::F16, KvWindow::Drop)
        );
        let c = sized(KvType::Q8_0, 64, mib64).expect("q8_0 pool");
        assert_eq!((c.n_blocks, c.kv_type), (85, KvType::Q8_0));

        // Sequences: n_seq x (n_ctx + one block) tokens.
        let four = KvBudget::Sequences {
            n_seq: 4,
            n_ctx: 1024,
        };
        assert_eq!(sized(KvType::F16, 64, four).expect("pool").n_blocks, 68);
        assert_eq!(sized(KvType::Q8_0, 64, four).expect("pool").n_blocks, 68);
        // ... at most 4 GiB; a byte budget has no cap.
        let many = KvBudget::Sequences {
            n_seq: 64,
            n_ctx: 131072,
        };
        let c = sized(KvType::F16, 64, many).expect("capped pool");
        assert_eq!(c.n_blocks, MAX_SEQUENCES_KV_BYTES / (f16 * 64));
        assert_eq!(c.n_blocks, 2912);
        let c = sized(KvType::F16, 64, KvBudget::Bytes(8 << 30)).expect("8 GiB");
        assert_eq!(c.n_blocks, (8 << 30) / (f16 * 64));
        let huge = KvBudget::Sequences {
            n_seq: usize::MAX,
            n_ctx: usize::MAX,
        };
        assert_eq!(
            sized(KvType::F16, 64, huge).expect("saturates").n_blocks,
            2912
        );

        // Fewer than 2 blocks is refused, naming the sizes.
        let block = f16 * 64;
        assert_eq!(
            sized(KvType::F16, 64, KvBudget::Bytes(2 * block - 1)),
            Err(KvBudgetError::TooFewBlocks {
                n_blocks: 1,
                block_size: 64,
                block_bytes: block,
            })
        );
        assert_eq!(
            sized(KvType::F16, 64, KvBudget::Bytes(2 * block)).map(|c| c.n_blocks),
            Ok(2)
        );
        let e = sized(KvType::F16, 64, KvBudget::Bytes(1 << 20)).expect_err("1 MiB");
        assert_eq!(
            e.to_string(),
            "gives 0 KV blocks of 64 tokens (1474560 bytes each), fewer than 2; give more memory"
        );
        // One sequence of 8 tokens pays for 8 + 64 tokens: one block.
        let short = KvBudget::Sequences { n_seq: 1, n_ctx: 8 };
        assert!(matches!(
            sized(KvType::F16, 64, short),
            Err(KvBudgetError::TooFewBlocks { n_blocks: 1, .. })
        ));
        // A block size of 0 is taken as 1.
        let c = sized(KvType::F16, 0, KvBudget::Bytes(10 * f16)).expect("1-token blocks");
        assert_eq!((c.block_size, c.n_blocks), (1, 10));
    }
}
