//! A pool of device buffers: plain allocations (`cuMemAlloc`, never managed
//! memory), kept when released and handed out again for a request of the
//! same size class, so passes of varying batch sizes stop allocating once
//! they have seen their largest batch.
//!
//! Size classes are powers of two elements; a buffer may be longer than
//! asked for, and users slice it to the length they need.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};

use crate::error::CudaError;

/// Released device buffers of element type `T`, by size class.
pub struct BufferPool<T> {
    free: HashMap<usize, Vec<CudaSlice<T>>>,
    /// Buffers handed out that came from the free lists.
    pub reused: u64,
    /// Buffers that had to be allocated.
    pub allocated: u64,
}

impl<T> Default for BufferPool<T> {
    fn default() -> Self {
        BufferPool {
            free: HashMap::new(),
            reused: 0,
            allocated: 0,
        }
    }
}

/// The size class of a request for `len` elements.
pub fn size_class(len: usize) -> usize {
    len.max(1).next_power_of_two()
}

impl<T: DeviceRepr + ValidAsZeroBits> BufferPool<T> {
    /// A buffer of at least `len` elements (contents unspecified: a reused
    /// buffer keeps what it held).
    ///
    /// # Errors
    ///
    /// A driver error when a new allocation fails.
    pub fn take(
        &mut self,
        stream: &Arc<CudaStream>,
        len: usize,
    ) -> Result<CudaSlice<T>, CudaError> {
        let class = size_class(len);
        if let Some(b) = self.free.get_mut(&class).and_then(Vec::pop) {
            self.reused += 1;
            return Ok(b);
        }
        self.allocated += 1;
        Ok(stream.alloc_zeros::<T>(class)?)
    }

    /// Returns `buf` for reuse.
    pub fn give(&mut self, buf: CudaSlice<T>) {
        let class = size_class(buf.len());
        self.free.entry(class).or_default().push(buf);
    }

    /// Buffers held for reuse.
    pub fn held(&self) -> usize {
        self.free.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_are_powers_of_two() {
        assert_eq!(size_class(0), 1);
        assert_eq!(size_class(1), 1);
        assert_eq!(size_class(3), 4);
        assert_eq!(size_class(4096), 4096);
        assert_eq!(size_class(4097), 8192);
    }
}
