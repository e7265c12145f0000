//! The shapes the attention kernels read, shared by the dispatchers, the
//! scalar twins and the SIMD twins of [`crate::attn`]: a group of queries
//! ([`QueryGroup`]), f16 K/V rows ([`KvRows`]), f16 keys stored dims-major
//! ([`KvCols`]), Q8_0 K/V rows ([`KvRowsQ8`]), and the bounds arithmetic
//! that clips a call to the rows its buffers hold.
//!
//! A leaf: it imports only the block layout, so every other file of the
//! module can import it without forming a loop.

use crate::blocks::BlockQ8_0;

/// `G` query heads that share one key head (grouped-query attention):
/// `q` holds them one after another, `[G, n]` row-major f32, with
/// `G = q.len() / n` (a trailing partial query is ignored).
#[derive(Debug, Clone, Copy)]
pub struct QueryGroup<'a> {
    /// `[G, n]` queries.
    pub q: &'a [f32],
    /// Head dim.
    pub n: usize,
}

impl<'a> QueryGroup<'a> {
    /// Number of whole queries.
    pub fn len(&self) -> usize {
        self.q.len().checked_div(self.n).unwrap_or(0)
    }

    /// Whether the group holds no whole query.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The queries, `[n]` each.
    pub fn queries(&self) -> impl Iterator<Item = &'a [f32]> {
        let (q, n) = (self.q, self.n.max(1));
        q.chunks_exact(n).take(self.len())
    }
}

/// `n_rows` f16 rows of `width` values, row `r` at `data[r * stride ..]`
/// (one KV head's slice of consecutive cache rows).
#[derive(Debug, Clone, Copy)]
pub struct KvRows<'a> {
    /// The rows' f16 bit patterns.
    pub data: &'a [u16],
    /// Distance between rows, in values.
    pub stride: usize,
    /// Number of rows.
    pub n_rows: usize,
    /// Values per row (the head dim).
    pub width: usize,
}

/// `n_rows` f16 key rows of `width` values stored **dims-major**: value
/// (row `r`, dim `d`) at `data[d * dstride + r]`, so dim `d` of
/// consecutive rows is contiguous (one KV block's keys of one layer and
/// KV head, `dstride` = the block's row capacity).
///
/// ```text
///   data:  dim 0: r0 r1 r2 .. r(n_rows-1) [..dstride]
///          dim 1: r0 r1 r2 ..             [..dstride]
///          ...    (width dims)
/// ```
#[derive(Debug, Clone, Copy)]
pub struct KvCols<'a> {
    /// The keys' f16 bit patterns, `[width, dstride]`.
    pub data: &'a [u16],
    /// Distance between one dim's values of consecutive dims, in values
    /// (at least `n_rows`).
    pub dstride: usize,
    /// Number of rows.
    pub n_rows: usize,
    /// Dims per row (the head dim).
    pub width: usize,
}

/// `n_rows` Q8_0 rows of `width` values (`width / 32` blocks), row `r`
/// starting at block `data[r * stride]` (one KV head's slice of
/// consecutive cache rows).
#[derive(Debug, Clone, Copy)]
pub struct KvRowsQ8<'a> {
    /// The blocks.
    pub data: &'a [BlockQ8_0],
    /// Distance between rows, in blocks.
    pub stride: usize,
    /// Number of rows.
    pub n_rows: usize,
    /// Values per row (the head dim; a multiple of 32).
    pub width: usize,
}

/// How many of `n_rows` rows of `width` values, row `r` starting at
/// `r * stride`, lie entirely inside a buffer of `len` values (any
/// element unit: f16 values, Q8_0 blocks).
pub(crate) fn rows_that_fit(len: usize, width: usize, stride: usize, n_rows: usize) -> usize {
    match len.checked_sub(width) {
        None => 0,
        Some(spare) => spare
            .checked_div(stride)
            .map_or(n_rows, |r| r + 1)
            .min(n_rows),
    }
}

/// How many of `n_rows` dims-major rows ([`KvCols`]) have all of dims
/// `0..dims` inside a buffer of `len` values: dim `d` of row `r` at
/// `d * dstride + r`. With more than one dim, rows past `dstride` are not
/// rows (they would be the next dim's values), so at most `dstride`.
pub(crate) fn cols_that_fit(len: usize, dims: usize, dstride: usize, n_rows: usize) -> usize {
    let Some(last) = dims.checked_sub(1) else {
        return n_rows;
    };
    let in_last = last
        .checked_mul(dstride)
        .and_then(|start| len.checked_sub(start))
        .unwrap_or(0);
    let rows = n_rows.min(in_last);
    if dims > 1 {
        rows.min(dstride)
    } else {
        rows
    }
}

/// Values each of `g` queries can use in a `[g, stride]` buffer of `len`
/// values: the last query's row may be short; with one query, all of it.
pub(crate) fn per_query_capacity(len: usize, g: usize, stride: usize) -> usize {
    if g <= 1 {
        len
    } else {
        let last = (g - 1).saturating_mul(stride);
        len.saturating_sub(last).min(stride)
    }
}

/// The dims and rows a dims-major score call covers: dims `min(qs.n,
/// k.width)` (a `zip` of each query with each key row), and the rows that
/// hold those dims inside `k.data` ([`cols_that_fit`]) and fit in every
/// query's output row ([`per_query_capacity`]).
pub(crate) fn cols_call_bounds(
    qs: &QueryGroup<'_>,
    k: &KvCols<'_>,
    out_len: usize,
    out_stride: usize,
) -> (usize, usize) {
    let dims = qs.n.min(k.width);
    let rows = cols_that_fit(k.data.len(), dims, k.dstride, k.n_rows).min(per_query_capacity(
        out_len,
        qs.len(),
        out_stride,
    ));
    (dims, rows)
}
