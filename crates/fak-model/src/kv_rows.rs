//! Row storage behind the KV stores: each row holds one token's K (or V)
//! for one layer, `n_kv_dim = n_head_kv · head_dim` values (stored head by
//! head, see [`KvRowBuf`]), in one of two element types:
//!
//! ```text
//!   KvType::F16    head = [f16; head_dim]                2 bytes/value (default,
//!                                                        llama.cpp's default)
//!   KvType::Q8_0   head = [BlockQ8_0; head_dim / 32]     34 bytes per 32 values
//!                  (each head starts a block: head_dim % 32 == 0)
//! ```
//!
//! Q8_0 rows are *rotated* before they are quantized: each chunk of
//! [`KvType::rotation`] values (a power of two dividing the head dim) is
//! multiplied by the orthonormal Walsh–Hadamard matrix
//! (`fak_kernels::attn::hadamard_rotate`). A few huge channels (Qwen2's
//! key bias reaches 100+ against typical values of 1-8) would otherwise set
//! every block's scale and round the other channels to a step of about 1;
//! rotated, they are spread over the chunk. Attention rotates queries the
//! same way (scores are unchanged: `(Hq)·(Hk) = q·k`) and rotates value
//! sums back (`H` is its own inverse). llama.cpp rotates its quantized
//! caches the same way. Rows are then written with llama.cpp's run-time
//! Q8_0 quantizer and read by the kernels of `fak_kernels::attn`.
//!
//! ```text
//!   write  k ─► H per chunk ─► Q8_0 ─► cache ◄─ scores  (H q) · (dequant)
//!   write  v ─► H per chunk ─► Q8_0 ─► cache ◄─ sums    Σ w · dequant ─► H ─► out
//! ``` The stores ([`crate::FlatKv`], the paged store of
//! fak-engine) address rows by index; this type only encodes, decodes and
//! copies them.

use fak_kernels::attn::{hadamard_rotate, quantize_q8_0_blocks};
use fak_kernels::blocks::BlockQ8_0;
use half::f16;

use crate::error::KvError;
use crate::ModelConfig;

/// Largest Hadamard rotation of a Q8_0 cache row (values).
pub const MAX_ROTATION: usize = 256;

/// The element type of cached keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvType {
    /// f16 (the default; llama.cpp's default too).
    #[default]
    F16,
    /// Q8_0 blocks: about half the memory of f16, values rounded to 8 bits
    /// per 32-value block.
    Q8_0,
}

impl KvType {
    /// Every type, in the order the CLI lists them.
    pub const ALL: [KvType; 2] = [KvType::F16, KvType::Q8_0];

    /// The name the CLI and reports use (`f16`, `q8_0`).
    pub fn name(self) -> &'static str {
        match self {
            KvType::F16 => "f16",
            KvType::Q8_0 => "q8_0",
        }
    }

    /// The type called `name` (see [`KvType::name`]).
    pub fn parse(name: &str) -> Option<KvType> {
        KvType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Bytes of one row of `n_kv_dim` values.
    pub fn row_bytes(self, n_kv_dim: usize) -> usize {
        match self {
            KvType::F16 => n_kv_dim * 2,
            KvType::Q8_0 => n_kv_dim / 32 * BlockQ8_0::BYTES,
        }
    }

    /// Size of the Hadamard rotation applied to rows of this type for a
    /// model with `head_dim` (see the module docs): the largest power of
    /// two that divides `head_dim`, at most `MAX_ROTATION` (256); `None` for
    /// f16, which is stored as it is.
    pub fn rotation(self, head_dim: usize) -> Option<usize> {
        match self {
            KvType::F16 => None,
            KvType::Q8_0 if head_dim == 0 => None,
            KvType::Q8_0 => Some((1usize << head_dim.trailing_zeros()).min(MAX_ROTATION)),
        }
    }

    /// Checks that rows of `cfg` can be stored in this type.
    ///
    /// # Errors
    ///
    /// [`KvError::TypeUnsupported`] for Q8_0 with a head dim that is not a
    /// multiple of 32.
    pub fn check(self, cfg: &ModelConfig) -> Result<(), KvError> {
        match self {
            KvType::F16 => Ok(()),
            KvType::Q8_0 if cfg.head_dim > 0 && cfg.head_dim.is_multiple_of(32) => Ok(()),
            KvType::Q8_0 => Err(KvError::TypeUnsupported {
                ty: self.name(),
                head_dim: cfg.head_dim,
            }),
        }
    }
}

impl std::fmt::Display for KvType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A run of consecutive stored rows of **one KV head**, position-major and
/// contiguous: `[m, head_dim]` f16 values, or `[m, head_dim / 32]` Q8_0
/// blocks.
#[derive(Debug, Clone, Copy)]
pub enum KvRun<'a> {
    /// f16 rows.
    F16(&'a [f16]),
    /// Q8_0 rows.
    Q8_0(&'a [BlockQ8_0]),
}

impl KvRun<'_> {
    /// Number of whole rows of one `head_dim`-wide head in the run.
    pub fn rows(&self, head_dim: usize) -> usize {
        match self {
            KvRun::F16(s) => s.len().checked_div(head_dim).unwrap_or(0),
            KvRun::Q8_0(s) => s.len().checked_div(head_dim / 32).unwrap_or(0),
        }
    }

    /// Address of the first row (two runs with the same address are the
    /// same stored rows).
    pub fn addr(&self) -> usize {
        match self {
            KvRun::F16(s) => s.as_ptr() as usize,
            KvRun::Q8_0(s) => s.as_ptr() as usize,
        }
    }
}

/// A run of consecutive stored **key** rows of one KV head: row-major like
/// a value run ([`KvRun`]), or, for f16 keys, **dims-major** (the layout
/// [`KvRowBuf::new_keys`] stores), read by
/// `fak_kernels::attn::dot_f32_f16_cols_group` without transposing tiles.
#[derive(Debug, Clone, Copy)]
pub enum KeyRun<'a> {
    /// Row-major rows (Q8_0 keys; f16 keys of a row-major buffer).
    Rows(KvRun<'a>),
    /// f16 keys dims-major: dim `d` of run row `r` at `data[d * dstride +
    /// r]`, for `r < n_rows`.
    Cols {
        /// From the run's first row of dim 0 to the end of its tile
        /// (`[head_dim, dstride]`, less the tile's rows before the run).
        data: &'a [f16],
        /// Values between consecutive dims (the tile's row count).
        dstride: usize,
        /// Rows in the run.
        n_rows: usize,
    },
}

impl KeyRun<'_> {
    /// Number of whole rows of one `head_dim`-wide head in the run (for a
    /// dims-major run, those whose every dim lies inside `data`).
    pub fn rows(&self, head_dim: usize) -> usize {
        match self {
            KeyRun::Rows(r) => r.rows(head_dim),
            KeyRun::Cols {
                data,
                dstride,
                n_rows,
            } => {
                if head_dim == 0 {
                    return 0;
                }
                let last_dim = (head_dim - 1).saturating_mul(*dstride);
                let fit = data.len().saturating_sub(last_dim);
                let fit = if head_dim > 1 { fit.min(*dstride) } else { fit };
                (*n_rows).min(fit)
            }
        }
    }

    /// Address of the first row (two runs with the same address are the
    /// same stored rows).
    pub fn addr(&self) -> usize {
        match self {
            KeyRun::Rows(r) => r.addr(),
            KeyRun::Cols { data, .. } => data.as_ptr() as usize,
        }
    }
}

/// Rows per tile of a dims-major key buffer: a tile of one head is
/// `[head_dim][32]` f16 values, one contiguous 4 KiB piece for a 64-wide
/// head, so the score kernel reads each tile front to back.
pub const KEY_TILE_ROWS: usize = 32;

/// How a [`KvRowBuf`] orders one head's rows inside a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// `[seg_rows][per_head]`: row after row (values, Q8_0 keys).
    RowMajor,
    /// Tiles of [`KEY_TILE_ROWS`] rows, each `[head_dim][tile rows]`: dim
    /// after dim inside a tile (f16 keys).
    DimsMajor,
}

/// The encoded rows.
enum Data {
    F16(Vec<f16>),
    Q8_0(Vec<BlockQ8_0>),
}

/// Rows of `n_kv_dim` values in one [`KvType`], stored in *segments* of
/// `seg_rows` rows (a paged block of one layer, or a 64-row piece of one
/// sequence's layer in a flat store), head-major inside a segment:
///
/// ```text
///   segment s:  [head 0: rows 0..seg_rows, head_dim each]
///               [head 1: rows 0..seg_rows, head_dim each]  ...
///   row r = s · seg_rows + i,  head h  at  ((s · heads + h) · seg_rows + i) · per_head
/// ```
///
/// A key buffer of f16 rows ([`KvRowBuf::new_keys`]) stores each head's
/// part of a segment in tiles of [`KEY_TILE_ROWS`] rows, **dims-major**
/// inside a tile, so that the score kernel loads one dim of 8 or 16
/// consecutive rows at once rather than transposing 8 × 8 tiles, and still
/// reads memory front to back (a whole segment dims-major would put a
/// 256-row block's dims 512 bytes apart, which measured slower than
/// row-major once the cache came from DRAM):
///
/// ```text
///   segment s, head h:  [tile 0: dim 0: rows 0..32][dim 1: rows 0..32] ...
///                       [tile 1: dim 0: rows 32..64] ...   (last tile: the rest)
///   row i = 32 t + j, dim d  at  (s · heads + h) · seg_rows · head_dim
///                                  + 32 t · head_dim + d · tile_rows(t) + j
/// ```
///
/// Values stay row-major: a value sum adds whole rows.
///
/// Attention reads one head at a time over many rows, so each head's rows
/// of a segment are one contiguous stream (8 KiB for a 64-token block of
/// 64-wide f16 heads) rather than 128-byte pieces at the stride of a whole
/// row, which the hardware prefetchers followed poorly once a fleet's
/// cache outgrew L3 (see docs/history/PERFORMANCE-avx2-vm.md, "Attention over a cache larger than L3").
pub struct KvRowBuf {
    data: Data,
    /// Elements (f16 values or Q8_0 blocks) per head per row.
    per_head: usize,
    /// Values per head.
    head_dim: usize,
    /// Heads per row.
    heads: usize,
    /// Rows per segment (at least 1).
    seg_rows: usize,
    /// Hadamard rotation size of Q8_0 rows.
    rot: usize,
    /// Order inside a segment's head.
    layout: Layout,
}

/// Checks that `n` elements of `T` can be allocated. `vec![zero; n]`
/// aborts the process when the allocator refuses; `try_reserve_exact`
/// reports it. The probe's pages are never touched (no memory is used),
/// and the real buffer then comes zeroed from the allocator as before.
fn probe_alloc<T>(n: usize) -> Result<(), KvError> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(n).map_err(|_| KvError::AllocFailed {
        bytes: n.saturating_mul(std::mem::size_of::<T>()),
    })
}

/// Shape of a [`KvRowBuf`].
#[derive(Debug, Clone, Copy)]
pub struct KvRowShape {
    /// Number of segments.
    pub segments: usize,
    /// Rows per segment.
    pub seg_rows: usize,
    /// Values per row (`heads · head_dim`).
    pub n_kv_dim: usize,
    /// Values per head.
    pub head_dim: usize,
}

impl KvRowBuf {
    /// Zeroed rows of `shape`. The caller has checked the type against the
    /// model ([`KvType::check`]: Q8_0 needs `head_dim % 32 == 0`).
    ///
    /// # Errors
    ///
    /// [`KvError::TooLarge`] if the size overflows `isize`;
    /// [`KvError::AllocFailed`] if the allocator refuses it. Both are found
    /// before the buffer is allocated.
    pub fn new(ty: KvType, shape: KvRowShape) -> Result<KvRowBuf, KvError> {
        KvRowBuf::with_layout(ty, shape, Layout::RowMajor)
    }

    /// Like [`KvRowBuf::new`], for keys: f16 rows are stored dims-major
    /// inside each segment's head (see the type's docs) and read with
    /// [`KvRowBuf::key_run`]; Q8_0 rows stay row-major.
    ///
    /// # Errors
    ///
    /// As [`KvRowBuf::new`].
    pub fn new_keys(ty: KvType, shape: KvRowShape) -> Result<KvRowBuf, KvError> {
        let layout = match ty {
            KvType::F16 => Layout::DimsMajor,
            KvType::Q8_0 => Layout::RowMajor,
        };
        KvRowBuf::with_layout(ty, shape, layout)
    }

    fn with_layout(ty: KvType, shape: KvRowShape, layout: Layout) -> Result<KvRowBuf, KvError> {
        let rot = ty.rotation(shape.head_dim).unwrap_or(1);
        let head_dim = shape.head_dim.max(1);
        let heads = shape.n_kv_dim / head_dim;
        let per_head = match ty {
            KvType::F16 => head_dim,
            KvType::Q8_0 => head_dim / 32,
        };
        let elem = match ty {
            KvType::F16 => std::mem::size_of::<f16>(),
            KvType::Q8_0 => std::mem::size_of::<BlockQ8_0>(),
        };
        let n = shape
            .segments
            .checked_mul(shape.seg_rows)
            .and_then(|rows| rows.checked_mul(heads))
            .and_then(|x| x.checked_mul(per_head))
            .filter(|n| {
                n.checked_mul(elem)
                    .is_some_and(|b| b <= isize::MAX as usize)
            })
            .ok_or(KvError::TooLarge {
                segments: shape.segments,
                seg_rows: shape.seg_rows,
                n_kv_dim: shape.n_kv_dim,
            })?;
        let data = match ty {
            // Zeroed u16 bits come from the allocator's zeroed pages (no
            // writes: a large pool costs memory only as it fills), and
            // f16 0x0000 is +0.0.
            KvType::F16 => {
                probe_alloc::<u16>(n)?;
                Data::F16(half::vec::HalfBitsVecExt::reinterpret_into(vec![0u16; n]))
            }
            // Likewise: zeroed pages, no writes (a zero block is d = +0.0
            // and every quant 0).
            KvType::Q8_0 => Data::Q8_0(BlockQ8_0::zeroed_vec(n).ok_or(KvError::AllocFailed {
                bytes: n.saturating_mul(elem),
            })?),
        };
        Ok(KvRowBuf {
            data,
            per_head,
            head_dim,
            heads,
            seg_rows: shape.seg_rows.max(1),
            rot,
            layout,
        })
    }

    /// Bytes of storage.
    pub fn bytes(&self) -> usize {
        match &self.data {
            Data::F16(v) => std::mem::size_of_val(v.as_slice()),
            Data::Q8_0(v) => std::mem::size_of_val(v.as_slice()),
        }
    }

    /// Element offset of head `head` of row `row` (of its dim 0, for a
    /// dims-major buffer: dim `d` is `d · self.dim_stride(row)` further).
    fn at(&self, row: usize, head: usize) -> usize {
        let (s, i) = (row / self.seg_rows, row % self.seg_rows);
        match self.layout {
            Layout::RowMajor => ((s * self.heads + head) * self.seg_rows + i) * self.per_head,
            Layout::DimsMajor => {
                let (t, j) = (i / KEY_TILE_ROWS, i % KEY_TILE_ROWS);
                (s * self.heads + head) * self.seg_rows * self.per_head
                    + t * KEY_TILE_ROWS * self.per_head
                    + j
            }
        }
    }

    /// Distance between consecutive values of one head of row `row`: 1
    /// row-major; dims-major, the row count of its tile.
    fn dim_stride(&self, row: usize) -> usize {
        match self.layout {
            Layout::RowMajor => 1,
            Layout::DimsMajor => {
                let t0 = row % self.seg_rows / KEY_TILE_ROWS * KEY_TILE_ROWS;
                (self.seg_rows - t0).min(KEY_TILE_ROWS)
            }
        }
    }

    /// Rows from `row` on that one run holds: to the end of its segment
    /// (row-major) or of its tile (dims-major).
    fn run_left(&self, row: usize) -> usize {
        match self.layout {
            Layout::RowMajor => self.seg_left(row),
            Layout::DimsMajor => self.dim_stride(row) - row % self.seg_rows % KEY_TILE_ROWS,
        }
    }

    /// Rows from `row` to the end of its segment.
    fn seg_left(&self, row: usize) -> usize {
        self.seg_rows - row % self.seg_rows
    }

    /// Encodes `x` (`[n_kv_dim]`) into row `row`; a row past the end is
    /// ignored (callers check positions first).
    pub fn write(&mut self, row: usize, x: &[f32]) {
        let (hd, per, rot) = (self.head_dim, self.per_head, self.rot);
        let step = self.dim_stride(row);
        for (h, xh) in x.chunks_exact(hd).take(self.heads).enumerate() {
            let o = self.at(row, h);
            match &mut self.data {
                Data::F16(v) => {
                    let span = (per - 1) * step + 1;
                    if let Some(dst) = v.get_mut(o..o + span) {
                        for (d, s) in dst.iter_mut().step_by(step).zip(xh) {
                            *d = f16::from_f32(*s);
                        }
                    }
                }
                Data::Q8_0(v) => {
                    if let Some(dst) = v.get_mut(o..o + per) {
                        let mut tmp = [0.0f32; MAX_ROTATION];
                        for (xs, ds) in xh.chunks(rot).zip(dst.chunks_mut(rot / 32)) {
                            let t = &mut tmp[..xs.len()];
                            t.copy_from_slice(xs);
                            hadamard_rotate(t, rot);
                            quantize_q8_0_blocks(t, ds);
                        }
                    }
                }
            }
        }
    }

    /// Rows `row..row + m` of head `head` (fewer if the segment or the
    /// buffer ends first; empty past it or for a head past the row). A
    /// dims-major key buffer has no row-major runs (empty; see
    /// [`KvRowBuf::key_run`]).
    pub fn run(&self, row: usize, m: usize, head: usize) -> KvRun<'_> {
        let (a, m) = if head < self.heads && self.layout == Layout::RowMajor {
            (self.at(row, head), m.min(self.seg_left(row)))
        } else {
            (0, 0)
        };
        let b = a.saturating_add(m * self.per_head);
        match &self.data {
            Data::F16(v) => KvRun::F16(&v[a.min(v.len())..b.min(v.len())]),
            Data::Q8_0(v) => KvRun::Q8_0(&v[a.min(v.len())..b.min(v.len())]),
        }
    }

    /// Key rows `row..row + m` of head `head`: dims-major, cut at the end
    /// of `row`'s tile, for a key buffer of f16 rows; row-major, cut as
    /// [`KvRowBuf::run`] cuts them, otherwise.
    pub fn key_run(&self, row: usize, m: usize, head: usize) -> KeyRun<'_> {
        let Data::F16(v) = &self.data else {
            return KeyRun::Rows(self.run(row, m, head));
        };
        if self.layout == Layout::RowMajor {
            return KeyRun::Rows(self.run(row, m, head));
        }
        if head >= self.heads {
            return KeyRun::Cols {
                data: &[],
                dstride: self.dim_stride(row),
                n_rows: 0,
            };
        }
        let a = self.at(row, head);
        let dstride = self.dim_stride(row);
        // The end of this tile: dim head_dim - 1's last row.
        let b = a - row % self.seg_rows % KEY_TILE_ROWS + self.per_head * dstride;
        let data = &v[a.min(v.len())..b.min(v.len())];
        let run = KeyRun::Cols {
            data,
            dstride,
            n_rows: m.min(self.run_left(row)),
        };
        KeyRun::Cols {
            data,
            dstride,
            n_rows: run.rows(self.head_dim),
        }
    }

    /// Decodes row `row` into `out` (`[n_kv_dim]` f32).
    pub fn read(&self, row: usize, out: &mut [f32]) {
        if let (Layout::DimsMajor, Data::F16(v)) = (self.layout, &self.data) {
            let step = self.dim_stride(row);
            for (h, oh) in out
                .chunks_exact_mut(self.head_dim)
                .enumerate()
                .take(self.heads)
            {
                let o = self.at(row, h);
                for (d, x) in oh.iter_mut().enumerate() {
                    *x = v.get(o + d * step).map_or(0.0, |b| b.to_f32());
                }
            }
            return;
        }
        for (h, oh) in out.chunks_exact_mut(self.head_dim).enumerate() {
            match self.run(row, 1, h) {
                KvRun::F16(s) => {
                    for (d, x) in oh.iter_mut().zip(s) {
                        *d = x.to_f32();
                    }
                }
                KvRun::Q8_0(s) => {
                    for (ob, b) in oh.chunks_mut(32).zip(s) {
                        let d = fak_kernels::fp::f16_to_f32(b.d);
                        for (o, &q) in ob.iter_mut().zip(&b.qs) {
                            *o = d * f32::from(q);
                        }
                    }
                    hadamard_rotate(oh, self.rot);
                }
            }
        }
    }

    /// Copies rows `src..src + n` to `dst..dst + n`, every head (ranges
    /// are cut at the end of either segment and of the buffer).
    pub fn copy_rows(&mut self, src: usize, dst: usize, n: usize) {
        let n = n.min(self.seg_left(src)).min(self.seg_left(dst));
        // Pieces of rows that lie in one run on both sides (all n rows
        // row-major; within one tile on each side dims-major), each copied
        // as one range per head (row-major) or per (head, dim).
        let mut done = 0;
        while done < n {
            let (a, b) = (src + done, dst + done);
            let k = (n - done).min(self.run_left(a)).min(self.run_left(b));
            self.copy_piece(a, b, k);
            done += k;
        }
    }

    /// Copies rows `src..src + n` to `dst..dst + n`, each side inside one
    /// run ([`KvRowBuf::run_left`]).
    fn copy_piece(&mut self, src: usize, dst: usize, n: usize) {
        let (cnt, pieces) = match self.layout {
            Layout::RowMajor => (n * self.per_head, 1),
            Layout::DimsMajor => (n, self.per_head),
        };
        let (ss, ds) = (self.dim_stride(src), self.dim_stride(dst));
        for h in 0..self.heads {
            for j in 0..pieces {
                let s = self.at(src, h) + j * ss;
                let d = self.at(dst, h) + j * ds;
                let fits = |len: usize| s + cnt <= len && d + cnt <= len && cnt > 0;
                match &mut self.data {
                    Data::F16(v) if fits(v.len()) => v.copy_within(s..s + cnt, d),
                    Data::Q8_0(v) if fits(v.len()) => v.copy_within(s..s + cnt, d),
                    _ => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
