//! The forward pass over a ragged batch.
//!
//! ```text
//! per layer, for all batch tokens at once:
//!   h = rms_norm(x) · attn_norm
//!   q,k,v = h·Wqᵀ (+bq), h·Wkᵀ (+bk), h·Wvᵀ (+bv)      matmuls over the whole batch
//!   q,k per head: rms_norm · attn_{q,k}_norm            (qwen3 only; `heads`)
//!   rope(q, k) at each token's own position             (angles / rope_freqs: llama 3.x)
//!   KvStore.write(k, v) for every token                   (then attention reads 0..=pos)
//!   a = attention(q, own sequence's K/V)                  per run of a sequence's tokens
//!   x += a·Woᵀ
//!   h = rms_norm(x) · ffn_norm
//!   x += (silu(h·Wgᵀ) ⊙ h·Wuᵀ)·Wdᵀ
//! logits = (rms_norm(x) · output_norm)·Woutᵀ              only for tokens that asked
//! ```
//!
//! Gemma 3 adds a few steps (scaled embeddings, q/k and post norms, GELU,
//! local RoPE base and windows, soft-cap); they are in `crate::gemma3`.

use fak_kernels::ops as kops;

use crate::attention::{attention_chunk, AttnBuffers, Run};
use crate::batch::{Batch, LogitsWanted, SeqId};
use crate::error::{BatchError, ModelError};
use crate::gemma3;
use crate::heads;
use crate::kv::KvStore;
use crate::matmul::{Product, QuantActs};
use crate::ops;
use crate::times::{ForwardTimes, PassClock, PassKind, Phase};
use crate::weights::{Model, Weight};

/// Logits for the tokens of a batch that asked for them.
#[derive(Debug, Clone, Default)]
pub struct Logits {
    /// Vocabulary size (row length).
    pub n_vocab: usize,
    /// Batch index of each row, ascending.
    pub batch_index: Vec<usize>,
    /// `[batch_index.len(), n_vocab]`, row-major.
    pub data: Vec<f32>,
}

impl Logits {
    /// Row `i` (`[n_vocab]`), in the order of `batch_index`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.n_vocab..(i + 1) * self.n_vocab]
    }

    /// The row of batch token `b`, if it asked for logits.
    pub fn for_batch_token(&self, b: usize) -> Option<&[f32]> {
        self.batch_index.binary_search(&b).ok().map(|i| self.row(i))
    }
}

/// Reusable buffers of [`Model::forward_into`]; they grow to the largest
/// batch seen and are kept.
pub struct Workspace {
    x: Vec<f32>,
    h: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attn: Vec<f32>,
    proj: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    normed: Vec<f32>,
    attn_bufs: AttnBuffers,
    rope_angles: Vec<(f32, f32)>,
    rope_angles_local: Vec<(f32, f32)>,
    ends: Vec<(SeqId, usize)>,
    acts: QuantActs,
    logits: Logits,
    times: ForwardTimes,
}

impl Default for Workspace {
    fn default() -> Workspace {
        Workspace {
            x: Vec::new(),
            h: Vec::new(),
            q: Vec::new(),
            k: Vec::new(),
            v: Vec::new(),
            attn: Vec::new(),
            proj: Vec::new(),
            gate: Vec::new(),
            up: Vec::new(),
            normed: Vec::new(),
            attn_bufs: AttnBuffers::default(),
            rope_angles: Vec::new(),
            rope_angles_local: Vec::new(),
            ends: Vec::new(),
            acts: QuantActs::new(),
            logits: Logits::default(),
            times: ForwardTimes::default(),
        }
    }
}

impl Workspace {
    /// Empty buffers.
    pub fn new() -> Workspace {
        Workspace::default()
    }

    /// The logits of the last pass.
    pub fn logits(&self) -> &Logits {
        &self.logits
    }

    /// Where the passes run through this workspace spent their time, by
    /// phase and pass kind, since it was made.
    pub fn times(&self) -> &ForwardTimes {
        &self.times
    }

    /// Moves the last pass's logits out (the buffer starts empty again).
    pub fn take_logits(&mut self) -> Logits {
        std::mem::take(&mut self.logits)
    }
}

/// Initial capacity of the attention-score buffer (positions).
const SCORES_MIN: usize = 4096;

/// Positions from which a single token's attention runs its KV heads on
/// the pool's threads instead of one. Below it the fork and join cost
/// about what the split saves.
const ATTN_SPLIT_MIN_ROWS: usize = 256;

/// `buf` resized to `n` values (zeros where it grew), as a slice.
fn sized(buf: &mut Vec<f32>, n: usize) -> &mut [f32] {
    buf.resize(n, 0.0);
    &mut buf[..n]
}

impl Model {
    /// Number of threads used by the matrix products (at least 1), the
    /// calling thread included.
    pub fn threads(&self) -> usize {
        self.pool.n_threads()
    }

    /// Sets the number of threads by starting a new persistent pool of
    /// `n - 1` workers; the old pool's workers are joined once no forward
    /// pass uses them.
    ///
    /// # Errors
    ///
    /// [`ModelError::Pool`]: `n` is 0 or above
    /// [`MAX_THREADS`](fak_kernels::pool::MAX_THREADS), or the OS refused
    /// to start a worker. The model then keeps its previous pool.
    pub fn set_threads(&mut self, n: usize) -> Result<(), ModelError> {
        if n == self.pool.n_threads() {
            return Ok(());
        }
        let pool = fak_kernels::pool::ThreadPool::new(n)?;
        self.pool = std::sync::Arc::new(pool);
        Ok(())
    }

    /// Runs the batch through the model, writing its K/V into `kv`, and
    /// returns logits for the tokens with [`LogitsWanted::Yes`].
    ///
    /// Allocates its buffers on every call; loops that run many passes use
    /// [`Model::forward_into`] with a [`Workspace`] instead.
    pub fn forward<K: KvStore + Sync>(
        &self,
        batch: &Batch,
        kv: &mut K,
    ) -> Result<Logits, ModelError> {
        let mut ws = Workspace::new();
        self.forward_into(batch, kv, &mut ws)?;
        Ok(ws.take_logits())
    }

    /// [`Model::forward`] into the reusable buffers of `ws`: once `ws` has
    /// seen a batch of this size, a pass makes no heap allocation (the
    /// decode-step test counts them) except inside a [`KvStore`] that
    /// allocates.
    pub fn forward_into<'w, K: KvStore + Sync>(
        &self,
        batch: &Batch,
        kv: &mut K,
        ws: &'w mut Workspace,
    ) -> Result<&'w Logits, ModelError> {
        let cfg = &self.cfg;
        let n = batch.len();
        let d = cfg.n_embd;
        let hd = cfg.head_dim;
        let q_dim = cfg.n_head * hd;
        let kv_dim = cfg.n_head_kv * hd;
        let mut clock = PassClock::start(n);
        self.check_batch(batch, kv, &mut ws.ends)?;
        let kind = if ws.ends.len() == n {
            PassKind::Decode
        } else {
            PassKind::Ingest
        };
        for &(seq, end) in &ws.ends {
            kv.reserve(seq, end)?;
        }
        let x = sized(&mut ws.x, n * d);
        let h = sized(&mut ws.h, n * d);
        let q = sized(&mut ws.q, n * q_dim);
        let k = sized(&mut ws.k, n * kv_dim);
        let v = sized(&mut ws.v, n * kv_dim);
        let attn = sized(&mut ws.attn, n * q_dim);
        let proj = sized(&mut ws.proj, n * d);
        let gate = sized(&mut ws.gate, n * cfg.n_ff);
        let up = sized(&mut ws.up, n * cfg.n_ff);
        // RoPE angles, `[n, rope_dim / 2]`: once per token for all layers.
        let half = cfg.rope_dim / 2;
        let angles = &mut ws.rope_angles;
        angles.resize(n * half, (0.0, 0.0));
        let factors = cfg.rope_freq_factors.as_deref();
        self.rows_mut(angles, half, |ti, a| {
            let pos = batch.tokens[ti].pos;
            ops::rope_angles(pos, cfg.rope_theta, cfg.rope_dim, factors, a);
        })?;
        let angles: &[(f32, f32)] = angles;
        // Local layers with their own base (Gemma 3) get their own table.
        let local_theta = (0..cfg.n_layer)
            .map(|l| cfg.rope_theta_at(l))
            .find(|&t| t != cfg.rope_theta);
        let angles_local = &mut ws.rope_angles_local;
        if let Some(theta) = local_theta {
            angles_local.resize(n * half, (0.0, 0.0));
            self.rows_mut(angles_local, half, |ti, a| {
                let pos = batch.tokens[ti].pos;
                ops::rope_angles(pos, theta, cfg.rope_dim, factors, a);
            })?;
        }
        let angles_local: &[(f32, f32)] = angles_local;
        let acts = &mut ws.acts;
        let attn_bufs = &mut ws.attn_bufs;
        let scores = &mut attn_bufs.scores;
        // Room for the longest context in the batch, at least SCORES_MIN and
        // grown by doubling: decode steps reallocate only at powers of two.
        // The buffer holds one row of scores per query head of a KV group.
        let group = (cfg.n_head / cfg.n_head_kv.max(1)).max(1);
        let longest = ws.ends.iter().map(|e| e.1).max().unwrap_or(0) * group;
        if scores.capacity() < longest {
            scores.reserve(longest.max(SCORES_MIN).next_power_of_two() - scores.len());
        }

        // Embeddings.
        for (t, xt) in batch.tokens.iter().zip(x.chunks_exact_mut(d)) {
            let row = self.row(&self.tok_embd, t.token as usize);
            fak_kernels::dequantize_row(self.tok_embd.ty, row, xt).map_err(|source| {
                ModelError::Kernel {
                    tensor: self.tok_embd.name.clone(),
                    source,
                }
            })?;
            if cfg.gemma3.is_some() {
                gemma3::scale_embedding(xt, d);
            }
        }

        for (li, layer) in self.layers.iter().enumerate() {
            self.rows_mut(h, d, |t, ht| {
                kops::rms_norm(&x[t * d..(t + 1) * d], &layer.attn_norm, cfg.rms_eps, ht);
            })?;
            clock.lap(Phase::Other);
            acts.quantize(&self.pool, layer.wq.ty, h, d, &layer.wq.name)?;
            if same_acts(&layer.wq, &layer.wk) && same_acts(&layer.wq, &layer.wv) {
                self.matmul_many(
                    acts,
                    &mut [
                        Product {
                            w: &layer.wq,
                            out: &mut *q,
                        },
                        Product {
                            w: &layer.wk,
                            out: &mut *k,
                        },
                        Product {
                            w: &layer.wv,
                            out: &mut *v,
                        },
                    ],
                )?;
            } else {
                self.matmul_q(&layer.wq, acts, q)?;
                if layer.wk.ty != layer.wq.ty {
                    acts.quantize(&self.pool, layer.wk.ty, h, d, &layer.wk.name)?;
                }
                self.matmul_q(&layer.wk, acts, k)?;
                if layer.wv.ty != layer.wk.ty {
                    acts.quantize(&self.pool, layer.wv.ty, h, d, &layer.wv.name)?;
                }
                self.matmul_q(&layer.wv, acts, v)?;
            }
            clock.lap(Phase::Matmul);
            add_bias(q, layer.bq.as_deref());
            add_bias(k, layer.bk.as_deref());
            add_bias(v, layer.bv.as_deref());

            // q/k norm (qwen3, gemma3) and RoPE at each token's position
            // (on the pool for long batches), then the keys and values go
            // to the cache.
            let angles = match local_theta {
                Some(t) if cfg.rope_theta_at(li) == t => angles_local,
                _ => angles,
            };
            let (q_norm, k_norm) = match (&layer.qk_norm, &layer.gemma) {
                (Some(w), _) => (Some(&w.q[..]), Some(&w.k[..])),
                (None, Some(g)) => (Some(&g.q_norm[..]), Some(&g.k_norm[..])),
                (None, None) => (None, None),
            };
            self.rows_mut(q, q_dim, |ti, row| {
                heads::norm_rope_row(row, q_norm, &angles[ti * half..(ti + 1) * half], cfg)
            })?;
            self.rows_mut(k, kv_dim, |ti, row| {
                heads::norm_rope_row(row, k_norm, &angles[ti * half..(ti + 1) * half], cfg)
            })?;
            clock.lap(Phase::Other);
            for (ti, t) in batch.tokens.iter().enumerate() {
                kv.write(
                    li,
                    t.seq,
                    t.pos as usize,
                    &k[ti * kv_dim..(ti + 1) * kv_dim],
                    &v[ti * kv_dim..(ti + 1) * kv_dim],
                )?;
            }

            // Attention. Chunks of consecutive batch tokens, claimed in order
            // by the pool's threads (later prefill tokens have more keys, so
            // a free thread takes the next chunk); within a chunk, consecutive tokens of one
            // sequence attend together (`attend_run`: each key tile is read
            // once for all their queries). Each query's arithmetic is the
            // same however tokens are grouped or which thread runs them, so
            // results stay bit-identical and batch-invariant.
            let kv_view: &K = kv;
            let q_all: &[f32] = q;
            if n == 1 {
                let t = &batch.tokens[0];
                let run = Run {
                    seq: t.seq,
                    pos0: t.pos as usize,
                    c: 1,
                };
                let runs = std::slice::from_ref(&run);
                let n_kv = cfg.n_head_kv;
                if run.end() < ATTN_SPLIT_MIN_ROWS || n_kv < 2 || self.pool.n_threads() < 2 {
                    self.attend_chunk(
                        li,
                        runs,
                        &q[..q_dim],
                        kv_view,
                        attn_bufs,
                        &mut attn[..q_dim],
                    );
                } else {
                    // One token over a long context: its KV heads side by
                    // side on the pool's threads (alone, the token's
                    // attention would run on one).
                    let per = q_dim / n_kv;
                    let q1 = &q[..q_dim];
                    self.pool
                        .run_chunks_dynamic_mut(&mut attn[..q_dim], per, |h, out| {
                            let mut bufs = AttnBuffers::default();
                            self.attend_heads(li, runs, q1, kv_view, &mut bufs, out, h..h + 1);
                        })?;
                }
            } else {
                let chunk = attention_chunk(n, self.pool.n_threads());
                self.pool
                    .run_chunks_dynamic_mut(attn, chunk * q_dim, |c, out| {
                        let first = c * chunk;
                        let count = out.len() / q_dim;
                        let toks = &batch.tokens[first..first + count];
                        let mut runs: Vec<Run> = Vec::with_capacity(count);
                        for t in toks {
                            match runs.last_mut() {
                                Some(r) if r.seq == t.seq && r.pos0 + r.c == t.pos as usize => {
                                    r.c += 1
                                }
                                _ => runs.push(Run {
                                    seq: t.seq,
                                    pos0: t.pos as usize,
                                    c: 1,
                                }),
                            }
                        }
                        let rows = first * q_dim..(first + count) * q_dim;
                        let mut bufs = AttnBuffers::default();
                        self.attend_chunk(li, &runs, &q_all[rows], kv_view, &mut bufs, out);
                    })?;
            }
            clock.lap(Phase::Attention);
            acts.quantize(&self.pool, layer.wo.ty, attn, q_dim, &layer.wo.name)?;
            self.matmul_q(&layer.wo, acts, proj)?;
            clock.lap(Phase::Matmul);
            let post = layer.gemma.as_ref().map(|g| &g.post_attn_norm[..]);
            self.add_residual(x, proj, h, post)?;

            self.rows_mut(h, d, |t, ht| {
                kops::rms_norm(&x[t * d..(t + 1) * d], &layer.ffn_norm, cfg.rms_eps, ht);
            })?;
            clock.lap(Phase::Other);
            acts.quantize(&self.pool, layer.w_gate.ty, h, d, &layer.w_gate.name)?;
            if same_acts(&layer.w_gate, &layer.w_up) {
                self.matmul_many(
                    acts,
                    &mut [
                        Product {
                            w: &layer.w_gate,
                            out: &mut *gate,
                        },
                        Product {
                            w: &layer.w_up,
                            out: &mut *up,
                        },
                    ],
                )?;
            } else {
                self.matmul_q(&layer.w_gate, acts, gate)?;
                if layer.w_up.ty != layer.w_gate.ty {
                    acts.quantize(&self.pool, layer.w_up.ty, h, d, &layer.w_up.name)?;
                }
                self.matmul_q(&layer.w_up, acts, up)?;
            }
            clock.lap(Phase::Matmul);
            let up_all: &[f32] = up;
            let gelu = layer.gemma.is_some();
            self.rows_mut(gate, cfg.n_ff, |t, g| {
                let u = &up_all[t * cfg.n_ff..(t + 1) * cfg.n_ff];
                if gelu {
                    gemma3::geglu(g, u);
                } else {
                    kops::swiglu(g, u);
                }
            })?;
            clock.lap(Phase::Other);
            acts.quantize(
                &self.pool,
                layer.w_down.ty,
                gate,
                cfg.n_ff,
                &layer.w_down.name,
            )?;
            self.matmul_q(&layer.w_down, acts, proj)?;
            clock.lap(Phase::Matmul);
            let post = layer.gemma.as_ref().map(|g| &g.post_ffw_norm[..]);
            self.add_residual(x, proj, h, post)?;
        }
        for &(seq, end) in &ws.ends {
            kv.commit(seq, end)?;
        }

        // Output for the tokens that asked.
        let out = &mut ws.logits;
        out.batch_index.clear();
        out.batch_index.extend(
            batch
                .tokens
                .iter()
                .enumerate()
                .filter(|(_, t)| t.logits == LogitsWanted::Yes)
                .map(|(i, _)| i),
        );
        let n_out = out.batch_index.len();
        let normed = sized(&mut ws.normed, n_out * d);
        for (&bi, ht) in out.batch_index.iter().zip(normed.chunks_exact_mut(d)) {
            kops::rms_norm(&x[bi * d..(bi + 1) * d], &self.output_norm, cfg.rms_eps, ht);
        }
        out.n_vocab = self.output.n_out;
        let data = sized(&mut out.data, n_out * self.output.n_out);
        clock.lap(Phase::Other);
        if n_out > 0 {
            acts.quantize(&self.pool, self.output.ty, normed, d, &self.output.name)?;
            self.matmul_q(&self.output, acts, data)?;
            if let Some(c) = cfg.gemma3.as_ref().and_then(|g| g.final_logit_softcap) {
                self.rows_mut(data, self.output.n_out, |_, row| gemma3::softcap(row, c))?;
            }
        }
        clock.lap(Phase::Matmul);
        clock.finish(kind, &mut ws.times);
        Ok(&ws.logits)
    }

    /// `x += y`, row by row; with `post` (Gemma 3's post-attention / FFN
    /// norm) `x += rms_norm(y) · post`, through `scratch` (`[n, n_embd]`).
    fn add_residual(
        &self,
        x: &mut [f32],
        y: &[f32],
        scratch: &mut [f32],
        post: Option<&[f32]>,
    ) -> Result<(), ModelError> {
        let d = self.cfg.n_embd;
        let eps = self.cfg.rms_eps;
        let y: &[f32] = match post {
            Some(w) => {
                self.rows_mut(scratch, d, |t, st| {
                    kops::rms_norm(&y[t * d..(t + 1) * d], w, eps, st);
                })?;
                scratch
            }
            None => y,
        };
        self.rows_mut(x, d, |t, xt| {
            kops::add_assign(xt, &y[t * d..(t + 1) * d]);
        })
    }

    /// Checks token ids and positions; fills `ends` with each sequence's
    /// length after the batch, sorted by sequence.
    fn check_batch<K: KvStore>(
        &self,
        batch: &Batch,
        kv: &K,
        ends: &mut Vec<(SeqId, usize)>,
    ) -> Result<(), ModelError> {
        let n_vocab = self.tok_embd.n_out;
        ends.clear();
        for (i, t) in batch.tokens.iter().enumerate() {
            if t.token as usize >= n_vocab {
                return Err(BatchError::TokenOutOfRange {
                    index: i,
                    id: t.token,
                    n_vocab,
                }
                .into());
            }
            let slot = ends.binary_search_by_key(&t.seq, |e| e.0);
            let expect = match slot {
                Ok(j) => ends[j].1,
                Err(_) => kv.seq_len(t.seq)?,
            };
            if t.pos as usize != expect {
                return Err(BatchError::Position {
                    index: i,
                    seq: t.seq.0,
                    expected: expect,
                    got: t.pos,
                }
                .into());
            }
            match slot {
                Ok(j) => ends[j].1 = expect + 1,
                Err(j) => ends.insert(j, (t.seq, expect + 1)),
            }
        }
        Ok(())
    }
}

/// Whether `a` and `b` take the same quantized activations (one
/// [`QuantActs`] then serves both products).
fn same_acts(a: &Weight, b: &Weight) -> bool {
    fak_kernels::vec_dot_type(a.ty) == fak_kernels::vec_dot_type(b.ty)
}

fn add_bias(x: &mut [f32], b: Option<&[f32]>) {
    if let Some(b) = b {
        for row in x.chunks_exact_mut(b.len()) {
            kops::add_assign(row, b);
        }
    }
}
