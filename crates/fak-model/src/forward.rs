//! The forward pass over a ragged batch.
//!
//! ```text
//! per layer, for all batch tokens at once:
//!   h = rms_norm(x) · attn_norm
//!   q,k,v = h·Wqᵀ (+bq), h·Wkᵀ (+bk), h·Wvᵀ (+bv)      matmuls over the whole batch
//!   rope(q, k) at each token's own position
//!   KvStore.write(k, v) for every token                   (then attention reads 0..=pos)
//!   a = attention(q, own sequence's K/V)                  per token, per head
//!   x += a·Woᵀ
//!   h = rms_norm(x) · ffn_norm
//!   x += (silu(h·Wgᵀ) ⊙ h·Wuᵀ)·Wdᵀ
//! logits = (rms_norm(x) · output_norm)·Woutᵀ              only for tokens that asked
//! ```

use std::collections::BTreeMap;

use fak_kernels::fp::f16_to_f32;

use crate::batch::{Batch, LogitsWanted, SeqId};
use crate::error::ModelError;
use crate::kv::KvStore;
use crate::matmul::QuantActs;
use crate::ops;
use crate::weights::Model;

/// Logits for the tokens of a batch that asked for them.
#[derive(Debug, Clone)]
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

impl Model {
    /// Number of threads used by the matrix products (at least 1), the
    /// calling thread included.
    pub fn threads(&self) -> usize {
        self.pool.n_threads()
    }

    /// Sets the number of threads (clamped to at least 1) by starting a new
    /// persistent pool of `n - 1` workers; the old pool's workers are joined
    /// once no forward pass uses them. If the OS refuses to start threads,
    /// the model keeps its previous pool (check [`Model::threads`]).
    pub fn set_threads(&mut self, n: usize) {
        let n = n.max(1);
        if n == self.pool.n_threads() {
            return;
        }
        if let Ok(pool) = fak_kernels::pool::ThreadPool::new(n) {
            self.pool = std::sync::Arc::new(pool);
        }
    }

    /// Runs the batch through the model, writing its K/V into `kv`, and
    /// returns logits for the tokens with [`LogitsWanted::Yes`].
    pub fn forward<K: KvStore + Sync>(
        &self,
        batch: &Batch,
        kv: &mut K,
    ) -> Result<Logits, ModelError> {
        let cfg = &self.cfg;
        let n = batch.len();
        let d = cfg.n_embd;
        let hd = cfg.head_dim;
        let q_dim = cfg.n_head * hd;
        let kv_dim = cfg.n_head_kv * hd;
        let ends = self.check_batch(batch, kv)?;
        for (&seq, &end) in &ends {
            kv.reserve(seq, end)?;
        }

        // Embeddings.
        let mut x = vec![0.0f32; n * d];
        for (t, xt) in batch.tokens.iter().zip(x.chunks_exact_mut(d)) {
            let row = self.row(&self.tok_embd, t.token as usize);
            fak_kernels::dequantize_row(self.tok_embd.ty, row, xt).map_err(|source| {
                ModelError::Kernel {
                    tensor: self.tok_embd.name.clone(),
                    source,
                }
            })?;
        }

        let mut h = vec![0.0f32; n * d];
        let mut q = vec![0.0f32; n * q_dim];
        let mut k = vec![0.0f32; n * kv_dim];
        let mut v = vec![0.0f32; n * kv_dim];
        let mut attn = vec![0.0f32; n * q_dim];
        let mut proj = vec![0.0f32; n * d];
        let mut gate = vec![0.0f32; n * cfg.n_ff];
        let mut up = vec![0.0f32; n * cfg.n_ff];
        let mut acts = QuantActs::new();
        let mut rope_cache = vec![(0.0f32, 0.0f32); cfg.rope_dim / 2];
        let mut scores: Vec<f32> = Vec::new();

        for (li, layer) in self.layers.iter().enumerate() {
            for (xt, ht) in x.chunks_exact(d).zip(h.chunks_exact_mut(d)) {
                ops::rms_norm(xt, &layer.attn_norm, cfg.rms_eps, ht);
            }
            acts.quantize(layer.wq.ty, &h, d, &layer.wq.name)?;
            self.matmul_q(&layer.wq, &acts, &mut q)?;
            if layer.wk.ty != layer.wq.ty {
                acts.quantize(layer.wk.ty, &h, d, &layer.wk.name)?;
            }
            self.matmul_q(&layer.wk, &acts, &mut k)?;
            if layer.wv.ty != layer.wk.ty {
                acts.quantize(layer.wv.ty, &h, d, &layer.wv.name)?;
            }
            self.matmul_q(&layer.wv, &acts, &mut v)?;
            add_bias(&mut q, layer.bq.as_deref());
            add_bias(&mut k, layer.bk.as_deref());
            add_bias(&mut v, layer.bv.as_deref());

            for (ti, t) in batch.tokens.iter().enumerate() {
                ops::rope_angles(t.pos, cfg.rope_theta, cfg.rope_dim, &mut rope_cache);
                for head in q[ti * q_dim..(ti + 1) * q_dim].chunks_exact_mut(hd) {
                    ops::rope_head(head, &rope_cache, cfg.rope_dim, cfg.rope_style);
                }
                for head in k[ti * kv_dim..(ti + 1) * kv_dim].chunks_exact_mut(hd) {
                    ops::rope_head(head, &rope_cache, cfg.rope_dim, cfg.rope_style);
                }
                kv.write(
                    li,
                    t.seq,
                    t.pos as usize,
                    &k[ti * kv_dim..(ti + 1) * kv_dim],
                    &v[ti * kv_dim..(ti + 1) * kv_dim],
                )?;
            }

            // Attention: one token per chunk, tokens spread over the pool's
            // threads. Each token's computation is the same whichever thread
            // runs it, so results stay bit-identical and batch-invariant.
            let kv_view: &K = kv;
            let q_all = &q;
            if n == 1 {
                let t = &batch.tokens[0];
                self.attend(
                    li,
                    t.seq,
                    t.pos as usize,
                    &q[..q_dim],
                    kv_view,
                    &mut scores,
                    &mut attn[..q_dim],
                );
            } else {
                self.pool.run_chunks_mut(&mut attn, q_dim, |ti, out| {
                    let t = &batch.tokens[ti];
                    let mut scores = Vec::with_capacity(t.pos as usize + 1);
                    self.attend(
                        li,
                        t.seq,
                        t.pos as usize,
                        &q_all[ti * q_dim..(ti + 1) * q_dim],
                        kv_view,
                        &mut scores,
                        out,
                    );
                })?;
            }
            acts.quantize(layer.wo.ty, &attn, q_dim, &layer.wo.name)?;
            self.matmul_q(&layer.wo, &acts, &mut proj)?;
            ops::add_assign(&mut x, &proj);

            for (xt, ht) in x.chunks_exact(d).zip(h.chunks_exact_mut(d)) {
                ops::rms_norm(xt, &layer.ffn_norm, cfg.rms_eps, ht);
            }
            acts.quantize(layer.w_gate.ty, &h, d, &layer.w_gate.name)?;
            self.matmul_q(&layer.w_gate, &acts, &mut gate)?;
            if layer.w_up.ty != layer.w_gate.ty {
                acts.quantize(layer.w_up.ty, &h, d, &layer.w_up.name)?;
            }
            self.matmul_q(&layer.w_up, &acts, &mut up)?;
            ops::swiglu(&mut gate, &up);
            acts.quantize(layer.w_down.ty, &gate, cfg.n_ff, &layer.w_down.name)?;
            self.matmul_q(&layer.w_down, &acts, &mut proj)?;
            ops::add_assign(&mut x, &proj);
        }
        for (&seq, &end) in &ends {
            kv.commit(seq, end)?;
        }

        // Output for the tokens that asked.
        let batch_index: Vec<usize> = batch
            .tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| t.logits == LogitsWanted::Yes)
            .map(|(i, _)| i)
            .collect();
        let n_out = batch_index.len();
        let mut normed = vec![0.0f32; n_out * d];
        for (&bi, ht) in batch_index.iter().zip(normed.chunks_exact_mut(d)) {
            ops::rms_norm(&x[bi * d..(bi + 1) * d], &self.output_norm, cfg.rms_eps, ht);
        }
        let mut data = vec![0.0f32; n_out * self.output.n_out];
        if n_out > 0 {
            acts.quantize(self.output.ty, &normed, d, &self.output.name)?;
            self.matmul_q(&self.output, &acts, &mut data)?;
        }
        Ok(Logits {
            n_vocab: self.output.n_out,
            batch_index,
            data,
        })
    }

    /// Checks token ids and positions; returns each sequence's length after
    /// the batch.
    fn check_batch<K: KvStore>(
        &self,
        batch: &Batch,
        kv: &K,
    ) -> Result<BTreeMap<SeqId, usize>, ModelError> {
        let n_vocab = self.tok_embd.n_out;
        let mut next: BTreeMap<SeqId, usize> = BTreeMap::new();
        for (i, t) in batch.tokens.iter().enumerate() {
            if t.token as usize >= n_vocab {
                return Err(ModelError::Batch(format!(
                    "token {i}: id {} is not below n_vocab {n_vocab}",
                    t.token
                )));
            }
            let expect = match next.get(&t.seq) {
                Some(&p) => p,
                None => kv.seq_len(t.seq)?,
            };
            if t.pos as usize != expect {
                return Err(ModelError::Batch(format!(
                    "token {i}: sequence {} expects position {expect}, got {}",
                    t.seq.0, t.pos
                )));
            }
            next.insert(t.seq, expect + 1);
        }
        Ok(next)
    }

    /// Attention of one token over its sequence's positions `0..=pos`.
    ///
    /// `q`: `[n_head * head_dim]` (roped); `out`: `[n_head * head_dim]`.
    #[allow(clippy::too_many_arguments)]
    fn attend<K: KvStore>(
        &self,
        layer: usize,
        seq: SeqId,
        pos: usize,
        q: &[f32],
        kv: &K,
        scores: &mut Vec<f32>,
        out: &mut [f32],
    ) {
        let cfg = &self.cfg;
        let hd = cfg.head_dim;
        let group = cfg.n_head / cfg.n_head_kv;
        let scale = 1.0f32 / (hd as f32).sqrt();
        scores.resize(pos + 1, 0.0);
        for h in 0..cfg.n_head {
            let kvh = h / group;
            let qh = &q[h * hd..(h + 1) * hd];
            for (p, s) in scores.iter_mut().enumerate() {
                let kr = &kv.k_row(layer, seq, p)[kvh * hd..(kvh + 1) * hd];
                let mut acc = 0.0f32;
                for (a, b) in qh.iter().zip(kr) {
                    acc += a * f16_to_f32(b.to_bits());
                }
                *s = acc * scale;
            }
            ops::softmax(scores);
            let oh = &mut out[h * hd..(h + 1) * hd];
            oh.fill(0.0);
            for (p, &w) in scores.iter().enumerate() {
                let vr = &kv.v_row(layer, seq, p)[kvh * hd..(kvh + 1) * hd];
                for (o, b) in oh.iter_mut().zip(vr) {
                    *o += w * f16_to_f32(b.to_bits());
                }
            }
        }
    }
}

fn add_bias(x: &mut [f32], b: Option<&[f32]>) {
    if let Some(b) = b {
        for row in x.chunks_exact_mut(b.len()) {
            ops::add_assign(row, b);
        }
    }
}
