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

use crate::kv::KvError;
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

/// The encoded rows.
enum Data {
    F16(Vec<f16>),
    Q8_0(Vec<BlockQ8_0>),
}

/// Rows of `n_kv_dim` values in one [`KvType`], stored in *segments* of
/// `seg_rows` rows (a paged block of one layer, or one sequence's layer in
/// a flat store), head-major inside a segment:
///
/// ```text
///   segment s:  [head 0: rows 0..seg_rows, head_dim each]
///               [head 1: rows 0..seg_rows, head_dim each]  ...
///   row r = s · seg_rows + i,  head h  at  ((s · heads + h) · seg_rows + i) · per_head
/// ```
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
}

const ZERO_BLOCK: BlockQ8_0 = BlockQ8_0 { d: 0, qs: [0; 32] };

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
            KvType::Q8_0 => {
                probe_alloc::<BlockQ8_0>(n)?;
                Data::Q8_0(vec![ZERO_BLOCK; n])
            }
        };
        Ok(KvRowBuf {
            data,
            per_head,
            head_dim,
            heads,
            seg_rows: shape.seg_rows.max(1),
            rot,
        })
    }

    /// Bytes of storage.
    pub fn bytes(&self) -> usize {
        match &self.data {
            Data::F16(v) => std::mem::size_of_val(v.as_slice()),
            Data::Q8_0(v) => std::mem::size_of_val(v.as_slice()),
        }
    }

    /// Element offset of head `head` of row `row`.
    fn at(&self, row: usize, head: usize) -> usize {
        let (s, i) = (row / self.seg_rows, row % self.seg_rows);
        ((s * self.heads + head) * self.seg_rows + i) * self.per_head
    }

    /// Rows from `row` to the end of its segment.
    fn seg_left(&self, row: usize) -> usize {
        self.seg_rows - row % self.seg_rows
    }

    /// Encodes `x` (`[n_kv_dim]`) into row `row`; a row past the end is
    /// ignored (callers check positions first).
    pub fn write(&mut self, row: usize, x: &[f32]) {
        let (hd, per, rot) = (self.head_dim, self.per_head, self.rot);
        for (h, xh) in x.chunks_exact(hd).take(self.heads).enumerate() {
            let o = self.at(row, h);
            match &mut self.data {
                Data::F16(v) => {
                    if let Some(dst) = v.get_mut(o..o + per) {
                        for (d, s) in dst.iter_mut().zip(xh) {
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
    /// buffer ends first; empty past it or for a head past the row).
    pub fn run(&self, row: usize, m: usize, head: usize) -> KvRun<'_> {
        let (a, m) = if head < self.heads {
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

    /// Decodes row `row` into `out` (`[n_kv_dim]` f32).
    pub fn read(&self, row: usize, out: &mut [f32]) {
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
        let cnt = n * self.per_head;
        for h in 0..self.heads {
            let (s, d) = (self.at(src, h), self.at(dst, h));
            let fits = |len: usize| s + cnt <= len && d + cnt <= len && cnt > 0;
            match &mut self.data {
                Data::F16(v) if fits(v.len()) => v.copy_within(s..s + cnt, d),
                Data::Q8_0(v) if fits(v.len()) => v.copy_within(s..s + cnt, d),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in KvType::ALL {
            assert_eq!(KvType::parse(t.name()), Some(t));
        }
        assert_eq!(KvType::parse("q4_0"), None);
    }

    /// Sizes whose product overflows, or that no allocator can give, are
    /// refused with a typed error before anything is allocated (they used
    /// to panic with "capacity overflow" or abort the process).
    #[test]
    fn impossible_sizes_are_typed_errors() {
        let shape = |segments, seg_rows| KvRowShape {
            segments,
            seg_rows,
            n_kv_dim: 128,
            head_dim: 64,
        };
        for ty in KvType::ALL {
            assert!(matches!(
                KvRowBuf::new(ty, shape(usize::MAX, 2)),
                Err(KvError::TooLarge { .. })
            ));
            // 2^62 bytes: below isize::MAX, beyond any address space.
            let rows = (1usize << 62) / ty.row_bytes(128);
            assert!(
                matches!(
                    KvRowBuf::new(ty, shape(1, rows)),
                    Err(KvError::AllocFailed { .. })
                ),
                "{ty}"
            );
        }
    }

    #[test]
    fn q8_0_rows_round_trip_within_half_a_step() {
        let n = 128;
        let shape = KvRowShape {
            segments: 1,
            seg_rows: 3,
            n_kv_dim: n,
            head_dim: 64,
        };
        let mut buf = KvRowBuf::new(KvType::Q8_0, shape).expect("rows");
        let mut x: Vec<f32> = (0..n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        x[5] = 150.0; // one outlier channel, as in Qwen2's keys
        buf.write(1, &x);
        let mut back = vec![0.0f32; n];
        buf.read(1, &mut back);
        // Stored: H·x per 64-value chunk, each 32-value block rounded to a
        // step of amax/127. H is orthonormal, so the error's norm per chunk
        // is at most half a step times sqrt(64).
        let mut hx = x.clone();
        hadamard_rotate(&mut hx, 64);
        for (c, (xs, ys)) in x.chunks(64).zip(back.chunks(64)).enumerate() {
            let steps: Vec<f32> = hx[c * 64..(c + 1) * 64]
                .chunks(32)
                .map(|b| b.iter().fold(0.0f32, |m, v| m.max(v.abs())) / 127.0)
                .collect();
            let bound: f32 = steps
                .iter()
                .map(|s| 32.0 * (s / 2.0).powi(2))
                .sum::<f32>()
                .sqrt();
            let err: f32 = xs
                .iter()
                .zip(ys)
                .map(|(a, b)| (a - b).powi(2))
                .sum::<f32>()
                .sqrt();
            assert!(
                err <= bound * 1.001 + 1e-4,
                "chunk {c}: error {err} > {bound}"
            );
        }
        // The outlier itself comes back within one unit.
        assert!((back[5] - 150.0).abs() < 1.0);
        buf.copy_rows(1, 2, 1);
        let mut copied = vec![0.0f32; n];
        buf.read(2, &mut copied);
        assert_eq!(back, copied);
        assert_eq!(buf.run(0, 3, 1).rows(64), 3);
        assert_eq!(buf.run(2, 5, 0).rows(64), 1);
        assert_eq!(buf.run(9, 1, 0).rows(64), 0);
        assert_eq!(buf.run(0, 3, 2).rows(64), 0);
        assert_eq!(buf.bytes(), 3 * 4 * 34);
    }

    /// Value `i` of row `r` in the head-major layout tests: exact in f16.
    fn value(r: usize, i: usize) -> f32 {
        (r * 16 + i) as f32 / 4.0
    }

    #[test]
    fn f16_heads_are_contiguous_per_segment_and_rows_round_trip() {
        let (heads, hd, seg) = (3, 4, 5);
        let shape = KvRowShape {
            segments: 2,
            seg_rows: seg,
            n_kv_dim: heads * hd,
            head_dim: hd,
        };
        let mut buf = KvRowBuf::new(KvType::F16, shape).expect("rows");
        for r in 0..2 * seg {
            let x: Vec<f32> = (0..heads * hd).map(|i| value(r, i)).collect();
            buf.write(r, &x);
        }
        for r in 0..2 * seg {
            let mut back = vec![0.0f32; heads * hd];
            buf.read(r, &mut back);
            let want: Vec<f32> = (0..heads * hd).map(|i| value(r, i)).collect();
            assert_eq!(back, want, "row {r}");
        }
        // A run is one head's rows, contiguous, cut at the segment's end.
        let KvRun::F16(run) = buf.run(3, 10, 1) else {
            panic!("f16 store gave a Q8_0 run");
        };
        let got: Vec<f32> = run.iter().map(|x| x.to_f32()).collect();
        let want: Vec<f32> = (3..seg)
            .flat_map(|r| (hd..2 * hd).map(move |i| value(r, i)))
            .collect();
        assert_eq!(got, want);
        assert_eq!(buf.run(seg, 10, 2).rows(hd), seg);
        // Copying rows moves every head; the source segment is unchanged.
        buf.copy_rows(1, seg + 2, 3);
        for (src, dst) in [(1, seg + 2), (2, seg + 3), (3, seg + 4)] {
            let mut a = vec![0.0f32; heads * hd];
            let mut b = vec![0.0f32; heads * hd];
            buf.read(src, &mut a);
            buf.read(dst, &mut b);
            assert_eq!(a, b, "row {src} -> {dst}");
        }
        let mut untouched = vec![0.0f32; heads * hd];
        buf.read(seg + 1, &mut untouched);
        let want: Vec<f32> = (0..heads * hd).map(|i| value(seg + 1, i)).collect();
        assert_eq!(untouched, want);
    }
}
