//! The KV abstraction the forward pass reads and writes through.
//!
//! The forward pass never owns keys and values. It asks a [`KvStore`] to
//! store each new token's K and V rows, then reads the rows of positions
//! `0..=pos` of that token's sequence for attention. A paged, copy-on-write
//! cache implements the same trait by resolving `(seq, pos)` through a block
//! table; [`FlatKv`] is the simple contiguous implementation: one fixed
//! region per sequence, allocated once.
//!
//! Rows are stored as f16 (llama.cpp's default KV type) or, on request,
//! as Q8_0 blocks ([`KvType`], see `kv_rows`).

use crate::batch::SeqId;
pub use crate::error::KvError;
pub use crate::kv_rows::{KeyRun, KvRun, KvType};
use crate::kv_rows::{KvRowBuf, KvRowShape};

/// Storage for keys and values, addressed by (layer, sequence, position).
///
/// Each row holds `n_head_kv * head_dim` values (`write` takes them heads
/// contiguous: `[head 0: d values][head 1: d values]...`); reads are per
/// head.
pub trait KvStore {
    /// Number of positions the sequence holds (all layers agree after a
    /// complete forward pass).
    fn seq_len(&self, seq: SeqId) -> Result<usize, KvError>;

    /// Makes room for positions `0..n` of `seq` in every layer.
    fn reserve(&mut self, seq: SeqId, n: usize) -> Result<(), KvError>;

    /// Stores K and V (each `[n_head_kv * head_dim]`) of the token at `pos`.
    fn write(
        &mut self,
        layer: usize,
        seq: SeqId,
        pos: usize,
        k: &[f32],
        v: &[f32],
    ) -> Result<(), KvError>;

    /// Element type of the stored rows (attention rotates queries and
    /// value sums for types whose rows are rotated, see [`KvType`]).
    fn kv_type(&self) -> KvType;

    /// Marks positions `0..n` of `seq` complete (called after all layers
    /// were written).
    fn commit(&mut self, seq: SeqId, n: usize) -> Result<(), KvError>;

    /// The longest run of KV head `head`'s K rows stored together from
    /// `pos` on, at most up to position `end` (exclusive, `end > pos`): `m`
    /// rows, `1 <= m <= end - pos`, each `[head_dim]` values in the store's
    /// [`KvType`], either position-major with no gap between rows
    /// ([`KeyRun::Rows`]) or dims-major ([`KeyRun::Cols`]).
    ///
    /// Attention walks a sequence run by run; a paged store returns up to
    /// the end of `pos`'s block, a flat store up to the end of `pos`'s
    /// 64-row segment. Which runs a walk sees never changes what is
    /// computed per position. A position without storage, or a head past
    /// the row, gives an empty run.
    fn k_run(&self, layer: usize, seq: SeqId, pos: usize, end: usize, head: usize) -> KeyRun<'_>;

    /// Like [`KvStore::k_run`], for V rows, always position-major with no
    /// gap between rows.
    fn v_run(&self, layer: usize, seq: SeqId, pos: usize, end: usize, head: usize) -> KvRun<'_>;
}

/// Rows per segment of a [`FlatKv`] (as a paged store's default block).
pub const FLAT_SEG_ROWS: usize = 64;

/// A contiguous KV store: `n_seq` sequences of up to `n_ctx` positions each,
/// allocated once.
///
/// Layout of `k` and `v`: rows `[seq][layer][pos]`, each `[n_kv_dim]`
/// values in the store's [`KvType`]; `ctx_rows` rows (`n_ctx` rounded up
/// to [`FLAT_SEG_ROWS`]) per (sequence, layer), in segments of
/// [`FLAT_SEG_ROWS`] rows, head-major inside, f16 keys dims-major (see
/// [`KvRowBuf`]).
pub struct FlatKv {
    kv_type: KvType,
    n_layer: usize,
    n_ctx: usize,
    /// Rows per (sequence, layer): `n_ctx` rounded up to whole segments.
    ctx_rows: usize,
    n_kv_dim: usize,
    k: KvRowBuf,
    v: KvRowBuf,
    /// Committed length per sequence.
    len: Vec<usize>,
    /// Reserved length per sequence (positions that may be written).
    reserved: Vec<usize>,
}

impl FlatKv {
    /// `dims`: layers, row width, head dim.
    fn new_typed(
        ty: KvType,
        (n_layer, n_kv_dim, head_dim): (usize, usize, usize),
        n_ctx: usize,
        n_seq: usize,
    ) -> Result<FlatKv, KvError> {
        let too_large = KvError::TooLarge {
            segments: n_seq,
            seg_rows: n_ctx,
            n_kv_dim,
        };
        let per_seq_layer = n_ctx.div_ceil(FLAT_SEG_ROWS).max(1);
        let ctx_rows = per_seq_layer
            .checked_mul(FLAT_SEG_ROWS)
            .ok_or(too_large.clone())?;
        let shape = KvRowShape {
            segments: n_seq
                .checked_mul(n_layer)
                .and_then(|x| x.checked_mul(per_seq_layer))
                .ok_or(too_large)?,
            seg_rows: FLAT_SEG_ROWS,
            n_kv_dim,
            head_dim,
        };
        Ok(FlatKv {
            kv_type: ty,
            n_layer,
            n_ctx,
            ctx_rows,
            n_kv_dim,
            k: KvRowBuf::new_keys(ty, shape)?,
            v: KvRowBuf::new(ty, shape)?,
            len: vec![0; n_seq],
            reserved: vec![0; n_seq],
        })
    }

    /// A store sized for `model`'s layers and KV width, f16 rows.
    ///
    /// # Errors
    ///
    /// [`KvError::TooLarge`] or [`KvError::AllocFailed`] for a size that
    /// cannot be allocated (checked before allocating).
    pub fn for_model(
        cfg: &crate::ModelConfig,
        n_ctx: usize,
        n_seq: usize,
    ) -> Result<FlatKv, KvError> {
        FlatKv::for_model_typed(cfg, n_ctx, n_seq, KvType::F16)
    }

    /// Like [`FlatKv::for_model`], storing rows as `ty`.
    ///
    /// # Errors
    ///
    /// [`KvError::TypeUnsupported`] if `ty` cannot hold `cfg`'s rows; as
    /// [`FlatKv::for_model`].
    pub fn for_model_typed(
        cfg: &crate::ModelConfig,
        n_ctx: usize,
        n_seq: usize,
        ty: KvType,
    ) -> Result<FlatKv, KvError> {
        ty.check(cfg)?;
        let dim = cfg.n_head_kv * cfg.head_dim;
        let dims = (cfg.n_layer, dim, cfg.head_dim);
        FlatKv::new_typed(ty, dims, n_ctx, n_seq)
    }

    /// Bytes of K and V storage.
    pub fn storage_bytes(&self) -> usize {
        self.k.bytes() + self.v.bytes()
    }

    /// Context size per sequence.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Forgets everything of `seq` (its memory is kept for reuse).
    pub fn clear(&mut self, seq: SeqId) -> Result<(), KvError> {
        let i = self.index(seq)?;
        self.len[i] = 0;
        self.reserved[i] = 0;
        Ok(())
    }

    /// Keeps only the first `n` positions of `seq`.
    pub fn truncate(&mut self, seq: SeqId, n: usize) -> Result<(), KvError> {
        let i = self.index(seq)?;
        self.len[i] = self.len[i].min(n);
        self.reserved[i] = self.len[i];
        Ok(())
    }

    fn index(&self, seq: SeqId) -> Result<usize, KvError> {
        let i = seq.0 as usize;
        if i < self.len.len() {
            Ok(i)
        } else {
            Err(KvError::UnknownSeq(seq.0))
        }
    }

    /// Row index of (layer, seq, pos).
    fn row(&self, layer: usize, seq: usize, pos: usize) -> usize {
        (seq * self.n_layer + layer) * self.ctx_rows + pos
    }
}

impl KvStore for FlatKv {
    fn seq_len(&self, seq: SeqId) -> Result<usize, KvError> {
        Ok(self.len[self.index(seq)?])
    }

    fn reserve(&mut self, seq: SeqId, n: usize) -> Result<(), KvError> {
        let i = self.index(seq)?;
        if n > self.n_ctx {
            return Err(KvError::ContextFull {
                seq: seq.0,
                pos: n - 1,
                n_ctx: self.n_ctx,
            });
        }
        self.reserved[i] = self.reserved[i].max(n);
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
        let i = self.index(seq)?;
        if k.len() != self.n_kv_dim || v.len() != self.n_kv_dim {
            return Err(KvError::Width {
                got: k.len().max(v.len()),
                want: self.n_kv_dim,
            });
        }
        if pos >= self.reserved[i] || layer >= self.n_layer {
            return Err(KvError::ContextFull {
                seq: seq.0,
                pos,
                n_ctx: self.reserved[i],
            });
        }
        let row = self.row(layer, i, pos);
        self.k.write(row, k);
        self.v.write(row, v);
        Ok(())
    }

    fn commit(&mut self, seq: SeqId, n: usize) -> Result<(), KvError> {
        let i = self.index(seq)?;
        if n > self.reserved[i] {
            return Err(KvError::NotContiguous {
                seq: seq.0,
                pos: n,
                len: self.reserved[i],
            });
        }
        self.len[i] = n;
        Ok(())
    }

    fn kv_type(&self) -> KvType {
        self.kv_type
    }

    fn k_run(&self, layer: usize, seq: SeqId, pos: usize, end: usize, head: usize) -> KeyRun<'_> {
        let (row, m) = self.run_rows(layer, seq, pos, end);
        self.k.key_run(row, m, head)
    }

    fn v_run(&self, layer: usize, seq: SeqId, pos: usize, end: usize, head: usize) -> KvRun<'_> {
        let (row, m) = self.run_rows(layer, seq, pos, end);
        self.v.run(row, m, head)
    }
}

impl FlatKv {
    /// First row and row count of a run (empty for an unknown sequence,
    /// layer or position).
    fn run_rows(&self, layer: usize, seq: SeqId, pos: usize, end: usize) -> (usize, usize) {
        let s = seq.0 as usize;
        if s >= self.len.len() || layer >= self.n_layer || pos >= self.n_ctx {
            return (0, 0);
        }
        let m = end.min(self.n_ctx).saturating_sub(pos).max(1);
        (self.row(layer, s, pos), m)
    }
}
