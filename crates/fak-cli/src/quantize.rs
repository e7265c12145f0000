//! `fak quantize IN OUT TYPE`.

use std::path::PathBuf;

use anyhow::{bail, Context};
use fak_model::quantize::{quantize_file, FileType, QuantizeParams};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(clap::Args)]
pub struct QuantizeArgs {
    /// Input GGUF file.
    input: PathBuf,
    /// Output GGUF file.
    output: PathBuf,
    /// Target file type (llama.cpp's mixtures, no importance matrix): f16,
    /// bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k_s, q3_k_m, q3_k_l,
    /// q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k, iq4_nl, iq4_xs, tq1_0, tq2_0.
    ty: String,
    /// Threads, 1..=1024 (default: all cores). Each quantizes its own rows
    /// of every tensor; the file is the same for any count.
    #[arg(long, short = 't', value_parser = crate::parse_threads)]
    threads: Option<usize>,
}

/// llama.cpp's file types that need an importance matrix (codebook
/// formats and their mixtures), refused with a reason of their own.
const CODEBOOK_TYPES: [&str; 10] = [
    "iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq2_m", "iq3_xxs", "iq3_xs", "iq3_s", "iq3_m",
];

pub fn run(a: QuantizeArgs) -> anyhow::Result<()> {
    let Some(ftype) = FileType::from_name(&a.ty) else {
        let lower = a.ty.to_ascii_lowercase();
        if lower == "mxfp4_moe" {
            bail!(
                "mxfp4_moe puts MXFP4 only on mixture-of-experts tensors, which fak's architectures do not have \
                 (llama.cpp's llama-quantize --tensor-type NAME=mxfp4 writes MXFP4 into other files, and fak runs them)"
            );
        }
        if matches!(lower.as_str(), "mxfp4" | "nvfp4" | "q1_0") {
            bail!(
                "{lower} has no llama.cpp file type to match byte for byte \
                 (llama.cpp's llama-quantize --tensor-type NAME={lower} writes it into other files, and fak runs them)"
            );
        }
        if CODEBOOK_TYPES.contains(&lower.as_str()) {
            bail!(
                "{lower} is not made here: ggml makes it only with an importance matrix and a codebook search, \
                 so fak's output could not be byte-identical to llama.cpp's (use llama.cpp's llama-quantize --imatrix)"
            );
        }
        let names: Vec<&str> = FileType::ALL.iter().map(|t| t.name()).collect();
        bail!(
            "unknown target type '{}' (expected one of {})",
            a.ty,
            names.join(", ")
        );
    };
    if a.input == a.output {
        bail!("input and output are the same file: {}", a.input.display());
    }
    let input = fak_gguf::GgufFile::open(&a.input)
        .with_context(|| format!("reading {}", a.input.display()))?;
    let bar = ProgressBar::new(input.tensors().len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{spinner} quantizing [{bar:40}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut progress = |i: usize, _n: usize, name: &str| {
        bar.set_position(i as u64);
        bar.set_message(name.to_string());
    };
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let params = QuantizeParams { ftype, threads };
    quantize_file(&input, &a.output, params, &mut progress)
        .with_context(|| format!("writing {}", a.output.display()))?;
    bar.finish_and_clear();
    eprintln!(
        "fak: wrote {} ({})",
        a.output.display(),
        a.ty.to_ascii_lowercase()
    );
    Ok(())
}
