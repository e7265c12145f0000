//! The device runtime: one context, one stream, the kernels compiled once.
//!
//! [`Device::open`] loads the driver and NVRTC dynamically (a machine without
//! them gets [`CudaError::NoDriver`], never a panic), compiles `kernels.cu`
//! for the device's own compute capability (`compute_XY` PTX, which the
//! driver turns into that chip's machine code at load) and resolves every
//! kernel by name. Work is queued on one stream in order; the engine thread
//! that owns the device is the only one that uses it.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::CompileOptions;
use serde::Serialize;

use crate::error::CudaError;

/// The kernel source, compiled at run time.
pub(crate) const KERNELS_CU: &str = include_str!("kernels.cu");

/// What the device is, for `fak inspect --system` and reports.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name (`NVIDIA H200`).
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Device memory in bytes.
    pub total_memory: usize,
    /// Free device memory in bytes when opened.
    pub free_memory: usize,
    /// Multiprocessors.
    pub multiprocessors: i32,
    /// Driver API version (`13000` = 13.0).
    pub driver_version: i32,
    /// NVRTC version (major, minor).
    pub nvrtc_version: (i32, i32),
    /// The architecture the kernels were compiled for (`compute_90`).
    pub arch: String,
}

/// Every kernel of `kernels.cu`, resolved once.
pub(crate) struct Kernels {
    pub quantize_q8_0: CudaFunction,
    pub quantize_q8_k: CudaFunction,
    pub matmul_q8_0: CudaFunction,
    pub matmul_q4_k: CudaFunction,
    pub matmul_q8_0_r4: CudaFunction,
    pub matmul_q8_0_t1: CudaFunction,
    pub matmul_q4_k_t1: CudaFunction,
    pub matmul_q4_k_r4: CudaFunction,
    pub rms_norm: CudaFunction,
    pub softmax_rows: CudaFunction,
    pub rope: CudaFunction,
    pub swiglu: CudaFunction,
    pub add_assign: CudaFunction,
    pub add_bias: CudaFunction,
    pub gather_rows: CudaFunction,
    pub kv_write: CudaFunction,
    pub attention_chunks: CudaFunction,
    pub attention_combine: CudaFunction,
    pub f32_to_f16: CudaFunction,
    pub f16_to_f32: CudaFunction,
    pub f32_to_bf16: CudaFunction,
    pub bf16_to_f32: CudaFunction,
}

impl Kernels {
    fn load(m: &Arc<CudaModule>) -> Result<Kernels, CudaError> {
        let f = |name: &str| m.load_function(name).map_err(CudaError::from);
        Ok(Kernels {
            quantize_q8_0: f("quantize_q8_0")?,
            quantize_q8_k: f("quantize_q8_k")?,
            matmul_q8_0: f("matmul_q8_0")?,
            matmul_q4_k: f("matmul_q4_k")?,
            matmul_q8_0_r4: f("matmul_q8_0_r4")?,
            matmul_q8_0_t1: f("matmul_q8_0_t1")?,
            matmul_q4_k_t1: f("matmul_q4_k_t1")?,
            matmul_q4_k_r4: f("matmul_q4_k_r4")?,
            rms_norm: f("rms_norm")?,
            softmax_rows: f("softmax_rows")?,
            rope: f("rope")?,
            swiglu: f("swiglu")?,
            add_assign: f("add_assign")?,
            add_bias: f("add_bias")?,
            gather_rows: f("gather_rows")?,
            kv_write: f("kv_write")?,
            attention_chunks: f("attention_chunks")?,
            attention_combine: f("attention_combine")?,
            f32_to_f16: f("f32_to_f16_kernel")?,
            f16_to_f32: f("f16_to_f32_kernel")?,
            f32_to_bf16: f("f32_to_bf16_kernel")?,
            bf16_to_f32: f("bf16_to_f32_kernel")?,
        })
    }
}

/// An opened CUDA device with its stream and compiled kernels.
pub struct Device {
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) k: Kernels,
    info: DeviceInfo,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device").field("info", &self.info).finish()
    }
}

/// Whether the driver library can be loaded (no panic where it cannot).
fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the driver library by its known names;
    // no CUDA function is called.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Whether the NVRTC library can be loaded.
fn nvrtc_present() -> bool {
    // SAFETY: as `driver_present`, for libnvrtc.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// NVRTC's version, (0, 0) if it cannot be read.
fn nvrtc_version() -> (i32, i32) {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is loaded (checked by the caller); both pointers
    // are valid for one write each.
    let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if r == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        (major, minor)
    } else {
        (0, 0)
    }
}

/// Compiles the kernels to PTX for `compute_{major}{minor}`.
///
/// Needs only NVRTC (no device, no driver), so it also runs on machines
/// without a GPU where the library is installed: the kernels' compile check.
///
/// # Errors
///
/// [`CudaError::NoDriver`] without NVRTC; [`CudaError::Compile`] with the
/// compiler's log.
pub fn compile_kernels(cc: (i32, i32)) -> Result<cudarc::nvrtc::Ptx, CudaError> {
    if !nvrtc_present() {
        return Err(CudaError::NoDriver(
            "libnvrtc not found (set LD_LIBRARY_PATH to CUDA's lib64)".into(),
        ));
    }
    let opts = CompileOptions {
        // Explicit round-to-nearest intrinsics carry the exact arithmetic;
        // these keep the rest IEEE too.
        ftz: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        fmad: Some(false),
        options: vec![format!("--gpu-architecture=compute_{}{}", cc.0, cc.1)],
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(KERNELS_CU, opts).map_err(|e| match e {
        cudarc::nvrtc::CompileError::CompileError { log, .. } => {
            CudaError::Compile(log.to_string_lossy().into_owned())
        }
        other => CudaError::Compile(other.to_string()),
    })
}

impl Device {
    /// Opens device `ordinal`, compiles and loads the kernels.
    ///
    /// # Errors
    ///
    /// [`CudaError::NoDriver`] when the driver or NVRTC cannot be loaded or
    /// there is no device; driver and compile errors otherwise.
    pub fn open(ordinal: usize) -> Result<Device, CudaError> {
        if !driver_present() {
            return Err(CudaError::NoDriver("libcuda not found".into()));
        }
        let count = CudaContext::device_count()
            .map_err(|e| CudaError::NoDriver(format!("cannot count devices: {e}")))?;
        if count <= 0 || ordinal >= count as usize {
            return Err(CudaError::NoDriver(format!(
                "device {ordinal} asked for, {count} present"
            )));
        }
        let ctx = CudaContext::new(ordinal)?;
        // One stream, used in order: cudarc's per-buffer event tracking
        // (for several streams) would add two events to every launch.
        // SAFETY: all work of this context is queued on the one stream
        // below, so no cross-stream synchronisation is needed.
        unsafe { ctx.disable_event_tracking() };
        // A stream of our own: the legacy default stream cannot be
        // captured into a CUDA graph.
        let stream = ctx.new_stream()?;
        let cc = ctx.compute_capability()?;
        let ptx = compile_kernels(cc)?;
        let module = ctx.load_module(ptx)?;
        let k = Kernels::load(&module)?;
        let (free, total) = ctx.mem_get_info()?;
        let multiprocessors = ctx.attribute(
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )?;
        let mut driver_version = 0;
        // SAFETY: the driver is loaded; the pointer is valid for one write.
        let _ = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver_version) };
        let info = DeviceInfo {
            ordinal,
            name: ctx.name()?,
            compute_capability: cc,
            total_memory: total,
            free_memory: free,
            multiprocessors,
            driver_version,
            nvrtc_version: nvrtc_version(),
            arch: format!("compute_{}{}", cc.0, cc.1),
        };
        Ok(Device { stream, k, info })
    }

    /// What the device is.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Waits for all queued work.
    ///
    /// # Errors
    ///
    /// A driver error, including one from earlier asynchronous work.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.stream.synchronize()?;
        Ok(())
    }
}
