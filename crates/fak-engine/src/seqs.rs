//! Many sequences over one paged KV cache: ragged steps, fork, prefix reuse
//! and span eviction.
//!
//! ```text
//!   prefix  ──publish──► radix index (per tenant)
//!                            │ attach_prefix (blocks, then rows)
//!   new seq ◄────────────────┘  then compute only the rest
//!
//!   step([(seq a, 5 prompt ids), (seq b, 1 decode id), ...])
//!     └─► one ragged Batch, cut into forward calls of ≤ max_batch_tokens
//!         (a long prefill is chunked; chunking never changes a result)
//!
//!   evict(seq, a..b, Exact):  truncate to a ──► re-ingest tokens[b..]
//!                             == a sequence that never saw a..b, bit for bit
//!   evict(seq, a..b, Shift):  move rows b.. to a.., re-rope keys by -(b-a)
//!                             APPROXIMATE: later rows keep the span's influence
//! ```
//!
//! Every sequence's logits are a function of its own tokens only (the model
//! computes each token's rows independently of the other tokens in a
//! batch, and the cache stores rows exactly), which the tests check as
//! bytes.
//!
//! With sliding-window rows dropped ([`crate::paged::KvWindow::Drop`]), cutting a
//! sequence back (`truncate`, exact eviction, a failed step's rollback) to a
//! length whose next token would read dropped rows cannot keep the rows: the
//! cache is then emptied and the kept tokens become *pending*, recomputed
//! in front of the sequence's next step (the same rows, so the same
//! logits). Shift eviction cannot recompute (it moves rows) and is refused
//! with [`EngineError::WindowDropped`] once rows were dropped.
//!
//! ```text
//!   tokens  [t0 ............................ t_n)     what the sequence holds
//!   cache   [rows 0 ........ kv_len)                  kv_len < n: pending
//!   next step(ids):  forward(tokens[kv_len..n] ++ ids)  logits only for ids
//! ```

use std::collections::HashMap;
use std::ops::Range;

use fak_kv::Tenant;
use fak_model::{Batch, BatchToken, ForwardTimes, KvStore, LogitsWanted, Model, SeqId, Workspace};

use crate::error::EngineError;
use crate::paged::{PagedKv, PagedKvConfig};

/// Whether new sequences look for, and offer, cached prefixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixCache {
    /// Attach cached blocks of an equal prefix; publish full blocks.
    On,
    /// Every sequence computes all of its tokens.
    Off,
}

/// How [`Sequences::evict`] removes a span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictMode {
    /// Keep the rows before the span, recompute every row after it: the
    /// result is bit-identical to never having seen the span.
    Exact,
    /// APPROXIMATE: move the rows after the span down and re-rope their
    /// keys, without recomputing. Cheap, but those rows were computed while
    /// attending to the span, so its influence remains.
    Shift,
}

/// What [`Sequences::evict`] did.
#[derive(Debug, Clone)]
pub struct EvictReport {
    /// Tokens removed.
    pub removed: usize,
    /// Tokens whose rows were recomputed (0 for [`EvictMode::Shift`]).
    pub recomputed: usize,
    /// Logits after the sequence's last token when rows were recomputed
    /// (`[n_vocab]`); `None` for shift mode or an empty tail.
    pub logits: Option<Vec<f32>>,
}

/// Tokens to append to one sequence in a [`Sequences::step`].
#[derive(Debug, Clone, Copy)]
pub struct Append<'a> {
    /// The sequence.
    pub seq: SeqId,
    /// Token ids, appended in order after the sequence's current tokens.
    pub ids: &'a [u32],
    /// Whether to return the logits after the last id.
    pub logits: LogitsWanted,
}

/// Which of an item's tokens return logits in [`Sequences::step_rows_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// Only the last token's (as [`Sequences::step`]).
    Last,
    /// Every token's: what verifying a draft needs, since the logits after
    /// each draft token decide whether the next one is kept.
    Every,
}

/// Many sequences sharing one paged KV cache.
pub struct Sequences {
    kv: PagedKv,
    ws: Workspace,
    batch: Batch,
    tokens: HashMap<SeqId, Vec<u32>>,
    prefix: PrefixCache,
    max_batch_tokens: usize,
    n_vocab: usize,
}

impl Sequences {
    /// A cache for `model` with the given sizes. Forward calls hold at most
    /// `max_batch_tokens` tokens (at least 1).
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] for unusable sizes.
    pub fn new(
        model: &Model,
        sizes: PagedKvConfig,
        prefix: PrefixCache,
        max_batch_tokens: usize,
    ) -> Result<Sequences, EngineError> {
        // A model made to read every position in every layer needs them all.
        let sizes = match model.window_mode() {
            fak_model::WindowMode::Full => sizes.with_window(crate::paged::KvWindow::Keep),
            fak_model::WindowMode::AsTrained => sizes,
        };
        Ok(Sequences {
            kv: PagedKv::new(model.config(), sizes)?,
            ws: Workspace::new(),
            batch: Batch::new(),
            tokens: HashMap::new(),
            prefix,
            max_batch_tokens: max_batch_tokens.max(1),
            n_vocab: model.config().n_vocab,
        })
    }

    /// The KV store (block statistics, storage size).
    pub fn kv(&self) -> &PagedKv {
        &self.kv
    }

    /// Starts logging the prefixes the cache holds ([`PagedKv::enable_events`]).
    pub fn enable_kv_events(&mut self) {
        self.kv.enable_events();
    }

    /// Starts the prefix event log over ([`PagedKv::restart_events`]).
    pub fn restart_kv_events(&mut self) {
        self.kv.restart_events();
    }

    /// The prefix events since the last call.
    pub fn take_kv_events(&mut self) -> Vec<fak_kv::KvEvent> {
        self.kv.take_events()
    }

    /// Time inside the forward passes so far, by phase and pass kind.
    pub fn forward_times(&self) -> ForwardTimes {
        *self.ws.times()
    }

    /// A new, empty sequence in `tenant`'s cache namespace.
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] if the KV store's layer groups are out of step
    /// ([`PagedKv::create`]).
    pub fn create(&mut self, tenant: Tenant) -> Result<SeqId, EngineError> {
        let s = self.kv.create(tenant)?;
        self.tokens.insert(s, Vec::new());
        Ok(s)
    }

    /// A new sequence sharing all of `src`'s tokens and blocks; costs
    /// O(blocks), computes nothing.
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSeq`] if `src` does not exist.
    pub fn fork(&mut self, src: SeqId) -> Result<SeqId, EngineError> {
        let toks = self.tokens(src)?.to_vec();
        let s = self.kv.fork(src)?;
        self.tokens.insert(s, toks);
        Ok(s)
    }

    /// Drops a sequence; its blocks go back to the pool (or the prefix
    /// cache, if published).
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSeq`] if `seq` does not exist.
    pub fn free(&mut self, seq: SeqId) -> Result<(), EngineError> {
        self.tokens(seq)?;
        self.kv.free(seq)?;
        self.tokens.remove(&seq);
        Ok(())
    }

    /// The tokens `seq` holds.
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSeq`] if `seq` does not exist.
    pub fn tokens(&self, seq: SeqId) -> Result<&[u32], EngineError> {
        self.tokens
            .get(&seq)
            .map(Vec::as_slice)
            .ok_or(EngineError::UnknownSeq(seq.0))
    }

    /// For an empty `seq`: attaches the cached blocks of the longest cached
    /// prefix of `prompt` (whole blocks, then the matching rows of one more
    /// cached block, copied before the first write; at least one token is
    /// always left to compute, so the caller gets logits). Returns the number of tokens
    /// reused; 0 when prefix caching is off.
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSeq`], or [`EngineError::Kv`] if `seq` is not
    /// empty.
    pub fn attach_prefix(&mut self, seq: SeqId, prompt: &[u32]) -> Result<usize, EngineError> {
        self.tokens(seq)?;
        if self.prefix == PrefixCache::Off || prompt.len() < 2 {
            return Ok(0);
        }
        let n = self.kv.attach_prefix(seq, &prompt[..prompt.len() - 1])?;
        if let Some(t) = self.tokens.get_mut(&seq) {
            t.extend_from_slice(&prompt[..n]);
        }
        Ok(n)
    }

    /// Offers `seq`'s full blocks to the prefix cache (no-op when off).
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSeq`] if `seq` does not exist.
    pub fn publish(&mut self, seq: SeqId) -> Result<(), EngineError> {
        if self.prefix == PrefixCache::Off {
            return Ok(());
        }
        let toks = self
            .tokens
            .get(&seq)
            .ok_or(EngineError::UnknownSeq(seq.0))?;
        // Pending tokens have no rows yet: publish what the cache holds.
        let held = self.kv.seq_len(seq).map_err(model_err)?;
        self.kv.publish(seq, &toks[..held.min(toks.len())])
    }

    /// Cuts `seq`'s cache back to `n` positions, exactly: when the next
    /// token would read sliding-window rows that were dropped, the cache
    /// is emptied instead, and the tokens it held become pending (see the
    /// module docs).
    fn cut_kv(&mut self, seq: SeqId, n: usize) -> Result<(), EngineError> {
        match self.kv.truncate(seq, n) {
            Err(EngineError::WindowDropped { .. }) => self.kv.truncate(seq, 0),
            other => other,
        }
    }

    /// Tokens of `seq` without rows in the cache yet (pending recompute).
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSeq`] if `seq` does not exist.
    pub fn pending(&self, seq: SeqId) -> Result<usize, EngineError> {
        let n = self.tokens(seq)?.len();
        Ok(n.saturating_sub(self.kv.seq_len(seq).map_err(model_err)?))
    }

    /// Keeps the first `n` tokens of `seq` (blocks before them are kept;
    /// a shared partial block is copied on the next write).
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSeq`]; [`EngineError::BadSpan`] if `n` is
    /// beyond the sequence's length.
    pub fn truncate(&mut self, seq: SeqId, n: usize) -> Result<(), EngineError> {
        let len = self.tokens(seq)?.len();
        if n > len {
            return Err(EngineError::BadSpan {
                start: n,
                end: len,
                len,
            });
        }
        let held = self.kv.seq_len(seq).map_err(model_err)?;
        self.cut_kv(seq, n.min(held))?;
        if let Some(t) = self.tokens.get_mut(&seq) {
            t.truncate(n);
        }
        Ok(())
    }

    /// Appends every item's ids to its sequence in ragged forward passes
    /// of at most `max_batch_tokens` tokens, and returns, per item, the
    /// logits after its last id (`[n_vocab]`) when it asked for them.
    ///
    /// A sequence may appear in several items; they are appended in order.
    /// On error, every sequence of the step is rolled back to its state
    /// before the step.
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSeq`], [`EngineError::Model`] (e.g. out of KV
    /// blocks, a token id outside the vocabulary).
    pub fn step(
        &mut self,
        model: &Model,
        items: &[Append<'_>],
    ) -> Result<Vec<Option<Vec<f32>>>, EngineError> {
        let mut out: Vec<Option<Vec<f32>>> = vec![None; items.len()];
        self.step_with(model, items, |i, row| {
            if let Some(slot) = out.get_mut(i) {
                *slot = Some(row.to_vec());
            }
        })?;
        Ok(out)
    }

    /// [`Sequences::step`] without collecting: `on_logits(i, logits)` is
    /// called with item `i`'s logits (`[n_vocab]`) as soon as its forward
    /// call finishes (items in no particular order).
    ///
    /// # Errors
    ///
    /// As [`Sequences::step`].
    pub fn step_with(
        &mut self,
        model: &Model,
        items: &[Append<'_>],
        mut on_logits: impl FnMut(usize, &[f32]),
    ) -> Result<(), EngineError> {
        let rows = vec![Rows::Last; items.len()];
        self.step_rows_with(model, items, &rows, |i, _, row| on_logits(i, row))
    }

    /// [`Sequences::step_with`] with, per item, which tokens return
    /// logits: `on_row(i, j, logits)` gets item `i`'s logits after its
    /// `j`-th id (`[n_vocab]`), rows of one item in order. An item whose
    /// `logits` is [`LogitsWanted::No`] returns none.
    ///
    /// # Errors
    ///
    /// As [`Sequences::step`].
    pub fn step_rows_with(
        &mut self,
        model: &Model,
        items: &[Append<'_>],
        rows: &[Rows],
        mut on_row: impl FnMut(usize, usize, &[f32]),
    ) -> Result<(), EngineError> {
        // Plan positions; remember lengths for rollback. A sequence's
        // pending tokens (rows dropped by a cut) go first, without logits.
        let mut next: HashMap<SeqId, usize> = HashMap::new();
        let mut toks: Vec<(BatchToken, Option<(usize, usize)>)> = Vec::new();
        let mut held: Vec<(SeqId, usize)> = Vec::new();
        for (i, it) in items.iter().enumerate() {
            let start = match next.get(&it.seq) {
                Some(&p) => p,
                None => {
                    let all = self.tokens(it.seq)?;
                    let kv_len = self.kv.seq_len(it.seq).map_err(model_err)?;
                    held.push((it.seq, kv_len));
                    for (pos, &id) in (kv_len..).zip(&all[kv_len.min(all.len())..]) {
                        toks.push((
                            BatchToken {
                                token: id,
                                pos: pos as u32,
                                seq: it.seq,
                                logits: LogitsWanted::No,
                            },
                            None,
                        ));
                    }
                    all.len()
                }
            };
            let every = rows.get(i) == Some(&Rows::Every);
            for (j, &id) in it.ids.iter().enumerate() {
                let last = j + 1 == it.ids.len();
                let want = (last || every) && it.logits == LogitsWanted::Yes;
                toks.push((
                    BatchToken {
                        token: id,
                        pos: (start + j) as u32,
                        seq: it.seq,
                        logits: if want {
                            LogitsWanted::Yes
                        } else {
                            LogitsWanted::No
                        },
                    },
                    want.then_some((i, j)),
                ));
            }
            next.insert(it.seq, start + it.ids.len());
        }
        let result = self.run_tokens(model, &toks, &mut on_row);
        if let Err(e) = result {
            for (s, n) in held {
                self.cut_kv(s, n)?;
            }
            return Err(e);
        }
        for it in items {
            if let Some(t) = self.tokens.get_mut(&it.seq) {
                t.extend_from_slice(it.ids);
            }
        }
        Ok(())
    }

    fn run_tokens(
        &mut self,
        model: &Model,
        toks: &[(BatchToken, Option<(usize, usize)>)],
        on_row: &mut impl FnMut(usize, usize, &[f32]),
    ) -> Result<(), EngineError> {
        for chunk in toks.chunks(self.max_batch_tokens) {
            self.batch.tokens.clear();
            self.batch.tokens.extend(chunk.iter().map(|(t, _)| *t));
            let logits = model.forward_into(&self.batch, &mut self.kv, &mut self.ws)?;
            for (b, (_, item)) in chunk.iter().enumerate() {
                if let (Some((i, j)), Some(row)) = (item, logits.for_batch_token(b)) {
                    on_row(*i, *j, row);
                }
            }
        }
        Ok(())
    }

    /// Appends `ids` to one sequence and returns the logits after the last.
    ///
    /// # Errors
    ///
    /// As [`Sequences::step`]; [`EngineError::EmptyPrompt`] for no ids.
    pub fn ingest(
        &mut self,
        model: &Model,
        seq: SeqId,
        ids: &[u32],
    ) -> Result<Vec<f32>, EngineError> {
        if ids.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        let mut out = self.step(
            model,
            &[Append {
                seq,
                ids,
                logits: LogitsWanted::Yes,
            }],
        )?;
        out.pop().flatten().ok_or(EngineError::NoLogits)
    }

    /// Removes tokens `span` (`a..b`) from `seq`; see [`EvictMode`]. Other
    /// sequences, forked siblings included, never change.
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSeq`]; [`EngineError::BadSpan`] if the span
    /// is empty or not inside the sequence; model errors while recomputing
    /// (the sequence is then left truncated to `a`).
    pub fn evict(
        &mut self,
        model: &Model,
        seq: SeqId,
        span: Range<usize>,
        mode: EvictMode,
    ) -> Result<EvictReport, EngineError> {
        let toks = self.tokens(seq)?.to_vec();
        let (a, b) = (span.start, span.end);
        if a >= b || b > toks.len() {
            return Err(EngineError::BadSpan {
                start: a,
                end: b,
                len: toks.len(),
            });
        }
        let tail = &toks[b..];
        match mode {
            EvictMode::Exact => {
                let held = self.kv.seq_len(seq).map_err(model_err)?;
                self.cut_kv(seq, a.min(held))?;
                if let Some(t) = self.tokens.get_mut(&seq) {
                    t.truncate(a);
                }
                // Tokens before the span whose rows were dropped are
                // recomputed with the tail.
                let pending = self.pending(seq)?;
                let logits = if tail.is_empty() {
                    None
                } else {
                    Some(self.ingest(model, seq, tail)?)
                };
                Ok(EvictReport {
                    removed: b - a,
                    recomputed: tail.len() + if tail.is_empty() { 0 } else { pending },
                    logits,
                })
            }
            EvictMode::Shift => {
                // Shifting moves rows; it cannot move rows that are gone.
                let first_kept = self.kv.first_kept(seq)?;
                let held = self.kv.seq_len(seq).map_err(model_err)?;
                if first_kept > 0 || held < toks.len() {
                    return Err(EngineError::WindowDropped {
                        seq: seq.0,
                        needed_from: 0,
                        first_kept: if first_kept > 0 { first_kept } else { held },
                    });
                }
                self.shift(model, seq, a, b, &toks)?;
                Ok(EvictReport {
                    removed: b - a,
                    recomputed: 0,
                    logits: None,
                })
            }
        }
    }

    /// Shift-mode eviction: rows `b..len` move to `a..`, keys re-roped.
    fn shift(
        &mut self,
        model: &Model,
        seq: SeqId,
        a: usize,
        b: usize,
        toks: &[u32],
    ) -> Result<(), EngineError> {
        let cfg = model.config();
        let (n_layer, dim) = self.kv.dims();
        let n_tail = toks.len() - b;
        // Read the tail's rows (all layers) before truncating.
        let mut k = vec![0.0f32; n_tail * n_layer * dim];
        let mut v = vec![0.0f32; n_tail * n_layer * dim];
        for (i, pos) in (b..toks.len()).enumerate() {
            for layer in 0..n_layer {
                let o = (i * n_layer + layer) * dim;
                self.kv
                    .read_rows(layer, seq, pos, &mut k[o..o + dim], &mut v[o..o + dim]);
            }
        }
        self.kv.truncate(seq, a)?;
        let kv = &mut self.kv;
        kv.reserve(seq, a + n_tail).map_err(model_err)?;
        let delta = (b - a) as u32;
        for i in 0..n_tail {
            for layer in 0..n_layer {
                let o = (i * n_layer + layer) * dim;
                fak_model::rope_shift_back(&mut k[o..o + dim], cfg.head_dim, cfg, layer, delta);
                kv.write(layer, seq, a + i, &k[o..o + dim], &v[o..o + dim])
                    .map_err(model_err)?;
            }
        }
        kv.commit(seq, a + n_tail).map_err(model_err)?;
        if let Some(t) = self.tokens.get_mut(&seq) {
            t.truncate(a);
            t.extend_from_slice(&toks[b..]);
        }
        Ok(())
    }

    /// Vocabulary size of the logits this returns.
    pub fn n_vocab(&self) -> usize {
        self.n_vocab
    }
}

/// A KV error of the store as the engine's.
fn model_err(e: fak_model::KvError) -> EngineError {
    EngineError::Model(e.into())
}
