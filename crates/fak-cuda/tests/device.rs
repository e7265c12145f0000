//! The CUDA backend's tests. Without NVRTC or a device each test prints one
//! line saying why it skipped (CI machines have no GPU); the GPU check
//! script (`scripts/gpu-check.sh`) runs the same checks on a device.

use fak_cuda::{check, compile_kernels, CudaError, Device};

/// Every kernel compiles for Hopper (and for an older architecture the
/// kernels must also support). Needs only NVRTC, no device.
#[test]
fn kernels_compile_with_nvrtc() {
    for cc in [(9, 0), (8, 0)] {
        match compile_kernels(cc) {
            Ok(ptx) => assert!(ptx.to_src().contains(".entry matmul_q4_k")),
            Err(CudaError::NoDriver(why)) => {
                eprintln!("skipped: {why}");
                return;
            }
            Err(e) => panic!("compute_{}{}: {e}", cc.0, cc.1),
        }
    }
}

fn device() -> Option<Device> {
    match Device::open(0) {
        Ok(d) => Some(d),
        Err(CudaError::NoDriver(why)) => {
            eprintln!("skipped: {why}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// Every kernel against its CPU twin (bit-exact or within its bound).
#[test]
fn kernels_match_their_cpu_twins() {
    let Some(dev) = device() else { return };
    let checks = check::kernels(&dev).expect("checks ran");
    for c in &checks {
        assert!(c.pass, "{c:?}");
    }
}

/// The device forward of a small synthetic qwen2 model against the CPU
/// forward, Q8_0 and Q4_K, and batch invariance.
#[test]
fn synthetic_forward_matches_the_cpu() {
    let Some(dev) = device() else { return };
    for spec in ["qwen2.5-coder-1.5b:q8_0@2", "qwen2.5-coder-1.5b:q4_k@2"] {
        let spec = fak_cuda::synth::SynthSpec::parse(spec).expect("spec");
        let bytes = fak_cuda::synth::gguf_bytes(&spec).expect("bytes");
        let cpu = fak_gguf::GgufFile::from_bytes(bytes.clone()).expect("file");
        let reference = check::cpu_reference(cpu).expect("cpu");
        let s = check::cpu_self_sensitivity(&bytes, &reference).expect("perturbed");
        let gpu = fak_gguf::GgufFile::from_bytes(bytes).expect("file");
        let tol = check::Tolerance::RandomWeights {
            cpu_self_sensitivity: s,
        };
        let r = check::logits(&dev, gpu, &spec.name(), &reference, tol).expect("gpu");
        assert!(r.pass, "{r:?}");
    }
}
