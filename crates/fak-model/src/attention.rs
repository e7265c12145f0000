//! Attention over cached K/V, grouped so that each key tile is read once
//! for as many queries as can use it.
//!
//! A chunk of batch tokens is split into *runs* (consecutive tokens of one
//! sequence). All queries of a chunk (`tokens × group` query heads per KV
//! head) are gathered, and:
//!
//! ```text
//!   shared rows 0..L   the K blocks every run of the chunk holds at the
//!                      same address (a fleet's common prefix): one pass
//!                      over them for all queries of the chunk
//!   rows L..end_r      per run r: one pass for its c_r × group queries
//!                      (a prefill run's tokens share all their rows)
//!
//!   scores[query, p]   p < end_max        query (token i of run r, head g)
//!   ┌──────────────────────────┬──────────────┐
//!   │ shared 0..L (all runs)   │ own L..end_r │  each query then keeps only
//!   └──────────────────────────┴──────────────┘  p <= its own position
//! ```
//!
//! Value sums are grouped the same way (rows every query of the chunk
//! uses, then rows every query of a run uses, then each token's own tail),
//! each 8-row value tile converted once for the group.
//!
//! A sliding-window layer (Gemma 3's local layers, window `W`) reads only
//! rows `lo..` where `lo` is the earliest window start of a run (or of the
//! chunk, for the shared passes): a query at `p` keeps scores `p-W+1..=p`,
//! its weights of the rows before are set to 0 and no row before every
//! query's window is read. A zero weight adds `0·v` (exactly 0) to a sum,
//! so grouping still changes no query's result.
//!
//! Rows a query computes past its own position are never used. A query's
//! scores are `dot_f32_f16_rows` sums (or, for a Q8_0 cache, the same
//! running sums over the dequantized rows; bit-identical on every ISA, per
//! row; f16 keys are stored dims-major and scored by
//! `dot_f32_f16_cols_group`, the same bits as the row-major kernel), then `· scale`, softmax over its own prefix and the value sums in
//! position order: the same operations in the same order however tokens
//! are grouped, so logits do not depend on what else is in the batch.

use fak_kernels::attn::{self, KvCols, KvRows, KvRowsQ8, QueryGroup};
use fak_kernels::ops as kops;
use half::slice::HalfFloatSliceExt;

use crate::batch::SeqId;
use crate::kv::{KeyRun, KvRun, KvStore};
use crate::weights::Model;

/// Tokens per attention chunk of a batch of `n` tokens on `threads`
/// threads: an even split over the threads (so decode steps of many
/// sequences group their shared prefix), at most 16 tokens (bounding each
/// chunk's score buffer and keeping long prefills balanced).
pub(crate) fn attention_chunk(n: usize, threads: usize) -> usize {
    n.div_ceil(threads.max(1)).clamp(1, 16)
}

/// Scratch of [`Model::attend_chunk`], reused across calls.
#[derive(Default)]
pub(crate) struct AttnBuffers {
    /// `[queries, head_dim]` gathered queries of one KV head.
    q: Vec<f32>,
    /// `[queries, end_max]` scores.
    pub(crate) scores: Vec<f32>,
    /// `[queries, head_dim]` value sums of one KV head.
    out: Vec<f32>,
}

/// A run of `c` consecutive tokens of one sequence, at positions
/// `pos0..pos0 + c`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Run {
    /// The sequence.
    pub(crate) seq: SeqId,
    /// Position of the first token.
    pub(crate) pos0: usize,
    /// Number of tokens.
    pub(crate) c: usize,
}

impl Run {
    /// One past the last position the run attends to.
    pub(crate) fn end(&self) -> usize {
        self.pos0 + self.c
    }
}

impl Model {
    /// Attention of the tokens of `runs` (in order) over their sequences'
    /// positions, each token over `0..=` its own position.
    ///
    /// * `q`, `out`: `[Σ c, n_head · head_dim]`, token-major; `q` roped.
    pub(crate) fn attend_chunk<K: KvStore>(
        &self,
        layer: usize,
        runs: &[Run],
        q: &[f32],
        kv: &K,
        bufs: &mut AttnBuffers,
        out: &mut [f32],
    ) {
        self.attend_heads(layer, runs, q, kv, bufs, out, 0..self.cfg.n_head_kv);
    }

    /// [`Model::attend_chunk`] for the query heads of KV heads `heads`
    /// only: `out` starts at the first of their columns in the first
    /// token's row (`[Σ c, q_dim]` less `heads.start · group · head_dim`
    /// values), so one token's heads split into disjoint slices of `out`
    /// that threads fill side by side. Each query's arithmetic is the same
    /// as in one call over every head.
    #[allow(clippy::too_many_arguments)] // attend_chunk's, and the heads
    pub(crate) fn attend_heads<K: KvStore>(
        &self,
        layer: usize,
        runs: &[Run],
        q: &[f32],
        kv: &K,
        bufs: &mut AttnBuffers,
        out: &mut [f32],
        heads: std::ops::Range<usize>,
    ) {
        let cfg = &self.cfg;
        let hd = cfg.head_dim;
        let q_dim = cfg.n_head * hd;
        let group = cfg.n_head / cfg.n_head_kv;
        let scale = cfg.attn_scale();
        // The first key row a query at `p` sees.
        let window = match self.window_mode {
            crate::WindowMode::AsTrained => cfg.window(layer),
            crate::WindowMode::Full => None,
        };
        let lo = |p: usize| match window {
            Some(w) => (p + 1).saturating_sub(w),
            None => 0,
        };
        let lo_chunk = runs.iter().map(|r| lo(r.pos0)).min().unwrap_or(0);
        let n_tok: usize = runs.iter().map(|r| r.c).sum();
        let end_max = runs.iter().map(Run::end).max().unwrap_or(0);
        let nq = n_tok * group;
        // A rotated cache (Q8_0) is read with rotated queries, and its
        // value sums are rotated back (see `kv_rows`).
        let rot = kv.kv_type().rotation(hd);
        // One token's KV groups are already contiguous in `q`.
        let direct = n_tok == 1 && rot.is_none();
        let AttnBuffers {
            q: qbuf,
            scores,
            out: obuf,
        } = bufs;
        scores.resize(nq * end_max, 0.0);
        if !direct {
            qbuf.resize(nq * hd, 0.0);
        }
        let shared = self.shared_rows(layer, runs, lo_chunk, kv);
        let out_base = heads.start * group * hd;
        for kvh in heads {
            let heads = kvh * group * hd..(kvh + 1) * group * hd;
            let qk: &[f32] = if direct {
                &q[heads]
            } else {
                for (t, dst) in qbuf.chunks_exact_mut(group * hd).enumerate() {
                    dst.copy_from_slice(&q[t * q_dim + heads.start..t * q_dim + heads.end]);
                }
                if let Some(r) = rot {
                    attn::hadamard_rotate(qbuf, r);
                }
                qbuf
            };
            // Shared rows: every query of the chunk at once.
            if let Some(first) = runs.first() {
                let all = QueryGroup { q: qk, n: hd };
                let rows = lo_chunk.min(shared)..shared;
                self.scores_over(layer, first.seq, rows, (all, kvh), kv, scores, end_max);
            }
            // Each run's own rows.
            let mut t0 = 0;
            for run in runs {
                let (qa, qb) = (t0 * group, (t0 + run.c) * group);
                let qs = QueryGroup {
                    q: &qk[qa * hd..qb * hd],
                    n: hd,
                };
                let rows = shared.max(lo(run.pos0)).min(run.end())..run.end();
                let sc = &mut scores[qa * end_max..];
                self.scores_over(layer, run.seq, rows, (qs, kvh), kv, sc, end_max);
                t0 += run.c;
            }
            // Each query: scale and softmax over its own prefix.
            let mut t0 = 0;
            for run in runs {
                for i in 0..run.c {
                    for g in 0..group {
                        let qi = (t0 + i) * group + g;
                        let first = lo(run.pos0 + i);
                        let row = &mut scores[qi * end_max..qi * end_max + run.pos0 + i + 1];
                        // Rows before the window that a value pass reads.
                        row[lo_chunk.min(first)..first].fill(0.0);
                        let sc = &mut row[first..];
                        for s in sc.iter_mut() {
                            *s *= scale;
                        }
                        kops::softmax(sc);
                    }
                }
                t0 += run.c;
            }
            // Value sums into `obuf` (`[queries, head_dim]`), each query's
            // rows in position order: rows every query of the chunk uses,
            // then rows every query of a run uses, then each token's own
            // tail (rows pos0 + 1 ..= its position).
            obuf.clear();
            obuf.resize(nq * hd, 0.0);
            let common = if runs.len() > 1 {
                runs.iter().map(|r| r.pos0 + 1).fold(shared, usize::min)
            } else {
                0
            };
            if let Some(first) = runs.first() {
                let (w, o) = (&scores[..], &mut obuf[..]);
                let rows = lo_chunk.min(common)..common;
                self.values_over(layer, first.seq, rows, (w, end_max, kvh), kv, o);
            }
            let mut t0 = 0;
            for run in runs {
                let (qa, qb) = (t0 * group, (t0 + run.c) * group);
                let w = &scores[qa * end_max..];
                let o = &mut obuf[qa * hd..qb * hd];
                let rows = common.max(lo(run.pos0)).min(run.pos0 + 1)..run.pos0 + 1;
                self.values_over(layer, run.seq, rows, (w, end_max, kvh), kv, o);
                for i in 1..run.c {
                    let (ta, tb) = ((t0 + i) * group, (t0 + i + 1) * group);
                    let w = &scores[ta * end_max..];
                    let o = &mut obuf[ta * hd..tb * hd];
                    let tail = run.pos0 + 1..run.pos0 + i + 1;
                    self.values_over(layer, run.seq, tail, (w, end_max, kvh), kv, o);
                }
                t0 += run.c;
            }
            if let Some(r) = rot {
                attn::hadamard_rotate(obuf, r);
            }
            for (qi, src) in obuf.chunks_exact(hd).enumerate() {
                let (t, g) = (qi / group, qi % group);
                let o = t * q_dim + (kvh * group + g) * hd - out_base;
                out[o..o + hd].copy_from_slice(src);
            }
        }
    }

    /// Adds the value rows `rows` of `seq` (KV head `kvh`), weighted, to
    /// the outputs of a group of queries, walking the store's runs: query
    /// `j`'s weight of row `p` is `w[j * w_stride + p]`; `out` is
    /// `[queries, head_dim]`.
    fn values_over<K: KvStore>(
        &self,
        layer: usize,
        seq: SeqId,
        rows: std::ops::Range<usize>,
        (w, w_stride, kvh): (&[f32], usize, usize),
        kv: &K,
        out: &mut [f32],
    ) {
        let hd = self.cfg.head_dim;
        let mut p = rows.start;
        while p < rows.end {
            let vrun = kv.v_run(layer, seq, p, rows.end, kvh);
            let m = vrun.rows(hd);
            if m == 0 {
                break;
            }
            match vrun {
                KvRun::F16(v) => {
                    let v: &[u16] = v.reinterpret_cast();
                    let vr = KvRows {
                        data: v,
                        stride: hd,
                        n_rows: m,
                        width: hd,
                    };
                    attn::axpy_f16_rows_group(&w[p..], w_stride, vr, out);
                }
                KvRun::Q8_0(v) => {
                    let vr = KvRowsQ8 {
                        data: v,
                        stride: hd / 32,
                        n_rows: m,
                        width: hd,
                    };
                    attn::axpy_q8_0_rows_group(&w[p..], w_stride, vr, out);
                }
            }
            p += m;
        }
    }

    /// Unscaled scores of the queries `qs` (KV head `kvh`) over the key rows
    /// `rows` of `seq`, walking the store's runs: query `j`'s score of row
    /// `p` goes to `scores[j * stride + p]`.
    #[allow(clippy::too_many_arguments)]
    fn scores_over<K: KvStore>(
        &self,
        layer: usize,
        seq: SeqId,
        rows: std::ops::Range<usize>,
        (qs, kvh): (QueryGroup<'_>, usize),
        kv: &K,
        scores: &mut [f32],
        stride: usize,
    ) {
        let hd = self.cfg.head_dim;
        let mut p = rows.start;
        while p < rows.end {
            let krun = kv.k_run(layer, seq, p, rows.end, kvh);
            let m = krun.rows(hd);
            if m == 0 {
                break;
            }
            let sc = &mut scores[p..];
            match krun {
                KeyRun::Cols { data, dstride, .. } => {
                    let kc = KvCols {
                        data: data.reinterpret_cast(),
                        dstride,
                        n_rows: m,
                        width: hd,
                    };
                    attn::dot_f32_f16_cols_group(qs, kc, sc, stride);
                }
                KeyRun::Rows(KvRun::F16(k)) => {
                    let k: &[u16] = k.reinterpret_cast();
                    attn::dot_f32_f16_rows_group(qs, k, hd, m, sc, stride);
                }
                KeyRun::Rows(KvRun::Q8_0(k)) => {
                    let kr = KvRowsQ8 {
                        data: k,
                        stride: hd / 32,
                        n_rows: m,
                        width: hd,
                    };
                    attn::dot_f32_q8_0_rows_group(qs, kr, sc, stride);
                }
            }
            p += m;
        }
    }

    /// Rows `from..L` whose keys every run holds at the same address
    /// (shared cached blocks), `L` at most every run's end; `from` is the
    /// chunk's first row read (a windowed layer's store may hold no rows
    /// before it). `L <= from` means none; 0 for a single run.
    fn shared_rows<K: KvStore>(&self, layer: usize, runs: &[Run], from: usize, kv: &K) -> usize {
        let Some(first) = runs.first() else {
            return 0;
        };
        if runs.iter().all(|r| r.seq == first.seq) {
            return 0;
        }
        let hd = self.cfg.head_dim;
        let limit = runs.iter().map(Run::end).min().unwrap_or(0);
        let mut p = from;
        while p < limit {
            // Head 0 stands for the row: a store keeps a row's heads
            // together in one block.
            let head = kv.k_run(layer, first.seq, p, limit, 0);
            let mut m = head.rows(hd);
            for r in &runs[1..] {
                let other = kv.k_run(layer, r.seq, p, limit, 0);
                if other.addr() != head.addr() {
                    return p;
                }
                m = m.min(other.rows(hd));
            }
            if m == 0 {
                break;
            }
            p += m;
        }
        p
    }
}
