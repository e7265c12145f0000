//! fak's CUDA backend: a device runtime, kernels compiled at run time by
//! NVRTC for the device's own architecture, and a forward pass over a
//! ragged batch with the weights resident on the device.
//!
//! ```text
//!   GGUF ──► DeviceModel::load ──► weights on the device (Q8_0 repacked, Q4_K as stored)
//!                                      │
//!   Batch{token,pos,seq} ──► embed (host) ──► [ layer × n_layer ] ──► norm ──► output ──► logits
//!                                               │        ▲
//!                                       kv_write│        │attention over 0..=pos
//!                                               ▼        │
//!                                     DeviceKv: per-slot f16 rows on the device
//! ```
//!
//! The crate builds and links with no CUDA installed: `cudarc` opens the
//! driver (`libcuda`) and NVRTC (`libnvrtc`) when a [`Device`] is opened, and
//! [`Device::open`] returns [`CudaError::NoDriver`] where they are missing,
//! so tests and commands skip with one line instead of failing.
//!
//! Every kernel has a CPU twin in `fak-kernels` or `fak-model`; [`check`]
//! compares them on random data (bit-exact where the arithmetic is the same,
//! within a stated bound where the GPU sums in another order). The device
//! forward is checked against the CPU forward's logits ([`check::logits`]).
//!
//! Memory: plain device allocations only (`cuMemAlloc`), never managed
//! memory. Buffers are reused across passes ([`pool::BufferPool`]).

pub mod bench;
pub mod check;
mod device;
mod error;
mod kv;
mod model;
mod ops;
pub mod pool;
pub mod synth;
pub mod truncate;
mod weights;

pub use device::{compile_kernels, Device, DeviceInfo};
pub use error::CudaError;
pub use kv::DeviceKv;
pub use model::{DeviceModel, OpTimes, Workspace};
pub use weights::DeviceMatrix;
