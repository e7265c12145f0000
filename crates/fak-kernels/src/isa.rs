//! Runtime instruction-set detection and selection for the SIMD kernels.
//!
//! The kernels are compiled for a baseline x86-64 target; the faster paths
//! live in `#[target_feature]` functions that may only run on a CPU that has
//! those features. [`isa`] picks the path once per process:
//!
//! ```text
//!   FAK_ISA set? ──yes──► parse_isa ──► known and available? ──yes──► use it
//!        │                                   │ no
//!        │                                   ▼
//!        │                     message on stderr, fall through
//!        ▼                                   │
//!   best available: Avx512 > Avx2 > Scalar ◄─┘
//! ```
//!
//! The choice is cached in a [`OnceLock`], so every dot product in a process
//! takes the same path: a result depends only on its inputs and the ISA.

use std::fmt;
use std::sync::OnceLock;

/// Name of the environment variable that forces a kernel path.
pub const ISA_ENV_VAR: &str = "FAK_ISA";

/// A family of kernels, from the portable reference to the widest SIMD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Isa {
    /// Portable scalar reference kernels (ggml's generic order).
    Scalar,
    /// AVX2 + FMA + F16C (256-bit integer and float SIMD).
    Avx2,
    /// AVX-512 F/BW/VL + AVX512-VNNI, on top of everything [`Isa::Avx2`] needs.
    Avx512,
}

impl Isa {
    /// Every ISA, from the most portable to the widest.
    pub const ALL: [Isa; 3] = [Isa::Scalar, Isa::Avx2, Isa::Avx512];

    /// The lower-case name used by `FAK_ISA` and [`fmt::Display`].
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// Whether this CPU can run the kernels of this ISA (detected once).
    pub fn is_available(self) -> bool {
        match self {
            Isa::Scalar => true,
            Isa::Avx2 => cpu().avx2,
            Isa::Avx512 => cpu().avx512,
        }
    }

    /// The ISAs this CPU can run, from the most portable to the widest.
    pub fn available() -> Vec<Isa> {
        Isa::ALL.into_iter().filter(|i| i.is_available()).collect()
    }
}

impl fmt::Display for Isa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses an ISA name as accepted by `FAK_ISA`: `scalar`, `avx2` or
/// `avx512` (ASCII case-insensitive, surrounding whitespace ignored).
/// Returns `None` for anything else.
pub fn parse_isa(s: &str) -> Option<Isa> {
    let s = s.trim();
    Isa::ALL
        .into_iter()
        .find(|isa| isa.name().eq_ignore_ascii_case(s))
}

/// The ISA every dispatched kernel uses in this process.
///
/// Decided on the first call and cached: `FAK_ISA` if it names an ISA this
/// CPU supports, otherwise the widest available one. An unknown or
/// unsupported `FAK_ISA` value is reported once on stderr and ignored.
pub fn isa() -> Isa {
    static CHOSEN: OnceLock<Isa> = OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let value = std::env::var(ISA_ENV_VAR).ok();
        match choose_isa(value.as_deref(), best_available()) {
            Ok(isa) => isa,
            Err(message) => {
                eprintln!("fak: {message}");
                best_available()
            }
        }
    })
}

/// The selection rule of [`isa`], as a pure function of the `FAK_ISA` value
/// and the widest available ISA: `Ok` with the ISA to use, or `Err` with the
/// message explaining why the value was ignored (use `best` then).
pub fn choose_isa(env_value: Option<&str>, best: Isa) -> Result<Isa, String> {
    let Some(value) = env_value else {
        return Ok(best);
    };
    match parse_isa(value) {
        None => Err(format!(
            "{ISA_ENV_VAR}={value:?} is not one of scalar, avx2, avx512; using {best}"
        )),
        Some(forced) if forced > best => Err(format!(
            "{ISA_ENV_VAR}={forced} is not supported by this CPU; using {best}"
        )),
        Some(forced) => Ok(forced),
    }
}

/// The widest ISA this CPU supports.
fn best_available() -> Isa {
    Isa::ALL
        .into_iter()
        .rev()
        .find(|i| i.is_available())
        .unwrap_or(Isa::Scalar)
}

/// The CPU features behind each ISA that this CPU has, for diagnostics such
/// as `fak inspect --system` (e.g. `["avx2", "fma", "f16c"]`).
pub fn detected_isa_features() -> Vec<&'static str> {
    cpu().features.clone()
}

/// Cached result of feature detection.
struct CpuFeatures {
    avx2: bool,
    avx512: bool,
    features: Vec<&'static str>,
}

fn cpu() -> &'static CpuFeatures {
    static CPU: OnceLock<CpuFeatures> = OnceLock::new();
    CPU.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> CpuFeatures {
    let probes: [(&'static str, bool); 8] = [
        ("avx2", is_x86_feature_detected!("avx2")),
        ("fma", is_x86_feature_detected!("fma")),
        ("f16c", is_x86_feature_detected!("f16c")),
        ("avx512f", is_x86_feature_detected!("avx512f")),
        ("avx512bw", is_x86_feature_detected!("avx512bw")),
        ("avx512vl", is_x86_feature_detected!("avx512vl")),
        ("avx512vnni", is_x86_feature_detected!("avx512vnni")),
        ("avx512bf16", is_x86_feature_detected!("avx512bf16")),
    ];
    let has = |name: &str| probes.iter().any(|&(n, ok)| ok && n == name);
    let avx2 = has("avx2") && has("fma") && has("f16c");
    let avx512 = avx2 && has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512vnni");
    CpuFeatures {
        avx2,
        avx512,
        features: probes
            .iter()
            .filter(|&&(_, ok)| ok)
            .map(|&(n, _)| n)
            .collect(),
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> CpuFeatures {
    CpuFeatures {
        avx2: false,
        avx512: false,
        features: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for isa in Isa::ALL {
            assert_eq!(parse_isa(isa.name()), Some(isa));
            assert_eq!(isa.to_string(), isa.name());
        }
    }

    #[test]
    fn chosen_isa_is_available() {
        assert!(isa().is_available());
        assert!(Isa::Scalar.is_available());
        assert!(Isa::available().contains(&isa()));
    }

    #[test]
    fn avx512_implies_avx2() {
        if Isa::Avx512.is_available() {
            assert!(Isa::Avx2.is_available());
        }
    }
}
