//! Keys and values on the device, one contiguous run of rows per sequence
//! slot (the paged, block-table layout that mirrors `fak-kv` comes next; the
//! forward only needs "rows 0..len of a slot").
//!
//! ```text
//! k[layer], v[layer]: [n_slots, n_ctx, n_head_kv · head_dim] f16
//!                      slot s ─► rows 0..len[s] valid
//! ```

use cudarc::driver::CudaSlice;

use crate::device::Device;
use crate::error::CudaError;

/// Per-slot key/value rows of every layer, resident on the device.
pub struct DeviceKv {
    pub(crate) k: Vec<CudaSlice<u16>>,
    pub(crate) v: Vec<CudaSlice<u16>>,
    n_slots: usize,
    n_ctx: usize,
    kv_dim: usize,
    lens: Vec<usize>,
    /// Unique per store (graphs captured over its buffers are keyed by it).
    id: u64,
}

/// Source of [`DeviceKv`] ids.
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl std::fmt::Debug for DeviceKv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceKv")
            .field("n_slots", &self.n_slots)
            .field("n_ctx", &self.n_ctx)
            .field("kv_dim", &self.kv_dim)
            .finish()
    }
}

impl DeviceKv {
    /// Room for `n_slots` sequences of up to `n_ctx` tokens, `n_layer`
    /// layers of rows of `kv_dim` f16 values.
    ///
    /// # Errors
    ///
    /// [`CudaError::Spec`] for a zero or overflowing size; driver errors
    /// (out of device memory).
    pub fn new(
        dev: &Device,
        n_layer: usize,
        kv_dim: usize,
        n_slots: usize,
        n_ctx: usize,
    ) -> Result<DeviceKv, CudaError> {
        let per = n_slots
            .checked_mul(n_ctx)
            .and_then(|x| x.checked_mul(kv_dim))
            .filter(|&x| x > 0)
            .ok_or_else(|| CudaError::Spec(format!("KV of {n_slots} × {n_ctx} × {kv_dim}")))?;
        let mut k = Vec::with_capacity(n_layer);
        let mut v = Vec::with_capacity(n_layer);
        for _ in 0..n_layer {
            k.push(dev.stream.alloc_zeros::<u16>(per)?);
            v.push(dev.stream.alloc_zeros::<u16>(per)?);
        }
        Ok(DeviceKv {
            k,
            v,
            n_slots,
            n_ctx,
            kv_dim,
            lens: vec![0; n_slots],
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// This store's id (unique in the process).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Sequence slots.
    pub fn n_slots(&self) -> usize {
        self.n_slots
    }

    /// Rows per slot.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Valid rows of `slot` (0 for a slot out of range).
    pub fn len(&self, slot: usize) -> usize {
        self.lens.get(slot).copied().unwrap_or(0)
    }

    /// Whether every slot is empty.
    pub fn is_empty(&self) -> bool {
        self.lens.iter().all(|&l| l == 0)
    }

    /// Forgets `slot`'s rows.
    pub fn clear(&mut self, slot: usize) {
        if let Some(l) = self.lens.get_mut(slot) {
            *l = 0;
        }
    }

    /// Bytes of f16 rows a pass reads for attention over `rows` rows.
    pub fn bytes_for_rows(&self, rows: usize) -> usize {
        2 * 2 * self.k.len() * self.kv_dim * rows
    }

    /// Copies the first `n` rows of slot `from` to slot `to` in every layer
    /// (a device-to-device copy; `to` then holds exactly `n` rows).
    ///
    /// # Errors
    ///
    /// [`CudaError::Spec`] for slots out of range or `n` past `from`'s
    /// rows; driver errors.
    pub fn copy_prefix(
        &mut self,
        dev: &Device,
        from: usize,
        to: usize,
        n: usize,
    ) -> Result<(), CudaError> {
        if from >= self.n_slots || to >= self.n_slots || n > self.len(from) || from == to {
            return Err(CudaError::Spec(format!(
                "copy {n} rows from slot {from} to slot {to}"
            )));
        }
        let rows = n * self.kv_dim;
        let (src, dst) = (
            from * self.n_ctx * self.kv_dim,
            to * self.n_ctx * self.kv_dim,
        );
        for cache in self.k.iter_mut().chain(self.v.iter_mut()) {
            let tmp = cache.slice(src..src + rows);
            let tmp = dev.stream.clone_dtod(&tmp)?;
            let mut dst_view = cache.slice_mut(dst..dst + rows);
            dev.stream.memcpy_dtod(&tmp, &mut dst_view)?;
        }
        self.lens[to] = n;
        Ok(())
    }

    /// Checks that the batch's tokens `(slot, pos)` each continue their
    /// slot (positions `len, len + 1, …` in batch order) and fit; returns
    /// each slot's length after the batch.
    pub(crate) fn check(&self, toks: &[(usize, usize)]) -> Result<Vec<(usize, usize)>, CudaError> {
        let mut ends: Vec<(usize, usize)> = Vec::new();
        for (i, &(slot, pos)) in toks.iter().enumerate() {
            if slot >= self.n_slots {
                return Err(CudaError::Spec(format!(
                    "token {i}: sequence {slot}, the device KV has {} slots",
                    self.n_slots
                )));
            }
            let expect = match ends.iter().find(|e| e.0 == slot) {
                Some(e) => e.1,
                None => self.lens[slot],
            };
            if pos != expect {
                return Err(CudaError::Spec(format!(
                    "token {i}: position {pos}, sequence {slot} expects {expect}"
                )));
            }
            if pos >= self.n_ctx {
                return Err(CudaError::Spec(format!(
                    "token {i}: position {pos} past the device KV's {} rows",
                    self.n_ctx
                )));
            }
            match ends.iter_mut().find(|e| e.0 == slot) {
                Some(e) => e.1 = pos + 1,
                None => ends.push((slot, pos + 1)),
            }
        }
        Ok(ends)
    }

    /// Records the slots' new lengths after a pass.
    pub(crate) fn commit(&mut self, ends: &[(usize, usize)]) {
        for &(slot, end) in ends {
            self.lens[slot] = end;
        }
    }
}
