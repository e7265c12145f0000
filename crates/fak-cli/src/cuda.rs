//! `fak cuda`: the CUDA backend's checks and speed runs (built with the
//! `cuda` feature).
//!
//! ```text
//! fak cuda check                       every kernel against its CPU twin
//! fak cuda truncate IN OUT --layers N  a GGUF cut to its first N blocks
//! fak cuda reference MODEL --out REF   CPU logits of the check batch (no GPU needed)
//! fak cuda logits --model M --reference REF | --synthetic SPEC
//!                                      device logits against the CPU's
//! fak cuda bench --synthetic SPEC      copy rate, prefill, decode (batch 1 and B), fleet probe
//! ```
//!
//! `scripts/gpu-check.sh` runs them in order on a GPU machine. Each prints
//! a table on stdout, or one JSON object with `--json`; a failed check
//! exits 1 after printing its result.

use std::path::PathBuf;

use anyhow::{bail, Context};
use fak_cuda::{check, synth, Device};
use fak_gguf::GgufFile;

#[derive(clap::Args)]
pub struct CudaArgs {
    #[command(subcommand)]
    cmd: CudaCmd,
}

#[derive(clap::Subcommand)]
enum CudaCmd {
    /// Every CUDA kernel against its CPU scalar twin on random data.
    Check(JsonArg),
    /// Write a copy of a GGUF model with only its first N blocks.
    Truncate(TruncateArgs),
    /// Compute the logits check's CPU reference (no GPU needed).
    Reference(ReferenceArgs),
    /// Device logits against the CPU's (a file with a reference, or a
    /// synthetic model computed both ways here).
    Logits(LogitsArgs),
    /// Speed runs of a synthetic model of a real shape.
    Bench(CudaBenchArgs),
}

#[derive(clap::Args)]
struct JsonArg {
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
    /// Device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

#[derive(clap::Args)]
struct TruncateArgs {
    /// Input GGUF.
    input: PathBuf,
    /// Output GGUF.
    output: PathBuf,
    /// Blocks to keep.
    #[arg(long)]
    layers: usize,
}

#[derive(clap::Args)]
struct ReferenceArgs {
    /// GGUF model.
    model: PathBuf,
    /// Where to write the reference (JSON).
    #[arg(long)]
    out: PathBuf,
}

#[derive(clap::Args)]
struct LogitsArgs {
    /// GGUF model (with --reference).
    #[arg(long, requires = "reference", conflicts_with = "synthetic")]
    model: Option<PathBuf>,
    /// The CPU reference written by `fak cuda reference`.
    #[arg(long)]
    reference: Option<PathBuf>,
    /// A synthetic model (`SHAPE:TYPE[@LAYERS]`, e.g. `qwen2.5-7b:q4_k@2`),
    /// its CPU reference computed here.
    #[arg(long, required_unless_present = "model")]
    synthetic: Option<String>,
    #[command(flatten)]
    common: JsonArg,
}

#[derive(clap::Args)]
struct CudaBenchArgs {
    /// The model: `SHAPE:TYPE[@LAYERS]` (shapes: qwen2.5-7b,
    /// qwen2.5-coder-1.5b; types: q4_k, q8_0).
    #[arg(long)]
    synthetic: String,
    /// Prompt / prefix tokens before the timed decode steps.
    #[arg(long, default_value_t = 512)]
    context: usize,
    /// Timed decode steps.
    #[arg(long, default_value_t = 32)]
    steps: usize,
    /// Sequences of the batched decode run.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    #[command(flatten)]
    common: JsonArg,
}

pub fn run(a: CudaArgs) -> anyhow::Result<()> {
    match a.cmd {
        CudaCmd::Check(j) => kernels(j),
        CudaCmd::Truncate(t) => truncate(t),
        CudaCmd::Reference(r) => reference(r),
        CudaCmd::Logits(l) => logits(l),
        CudaCmd::Bench(b) => bench(b),
    }
}

fn open(ordinal: usize) -> anyhow::Result<Device> {
    Device::open(ordinal).context("opening the CUDA device")
}

fn kernels(j: JsonArg) -> anyhow::Result<()> {
    let dev = open(j.device)?;
    let checks = check::kernels(&dev)?;
    let pass = checks.iter().all(|c| c.pass);
    if j.json {
        outln!(
            "{}",
            serde_json::json!({"device": dev.info(), "checks": checks, "pass": pass})
        )?;
    } else {
        outln!("device: {} ({})", dev.info().name, dev.info().arch)?;
        for c in &checks {
            outln!(
                "{:4}  {:28} {:52} {:>8} values  {:>6} differ  worst {:.3}  ({})",
                if c.pass { "ok" } else { "FAIL" },
                c.kernel,
                c.case,
                c.values,
                c.differing,
                c.worst,
                c.required
            )?;
        }
    }
    if !pass {
        bail!("a kernel check failed");
    }
    Ok(())
}

fn truncate(t: TruncateArgs) -> anyhow::Result<()> {
    let file =
        GgufFile::open(&t.input).with_context(|| format!("reading {}", t.input.display()))?;
    let w = fak_cuda::truncate::truncate_layers(&file, t.layers)?;
    w.write_file(&t.output)
        .with_context(|| format!("writing {}", t.output.display()))?;
    eprintln!("wrote {} ({} blocks)", t.output.display(), t.layers);
    Ok(())
}

fn reference(r: ReferenceArgs) -> anyhow::Result<()> {
    let file =
        GgufFile::open(&r.model).with_context(|| format!("reading {}", r.model.display()))?;
    let rf = check::cpu_reference(file)?;
    let text = serde_json::to_string(&rf)?;
    std::fs::write(&r.out, text).with_context(|| format!("writing {}", r.out.display()))?;
    eprintln!(
        "wrote {} ({} rows, {})",
        r.out.display(),
        rf.rows.len(),
        rf.source
    );
    Ok(())
}

fn logits(l: LogitsArgs) -> anyhow::Result<()> {
    let dev = open(l.common.device)?;
    let (file, name, rf, tol) = match (&l.model, &l.synthetic) {
        (Some(m), _) => {
            let Some(rp) = &l.reference else {
                bail!("--model needs --reference");
            };
            let text =
                std::fs::read_to_string(rp).with_context(|| format!("reading {}", rp.display()))?;
            let rf: check::Reference =
                serde_json::from_str(&text).with_context(|| format!("parsing {}", rp.display()))?;
            let file = GgufFile::open(m).with_context(|| format!("reading {}", m.display()))?;
            (file, m.display().to_string(), rf, check::Tolerance::Trained)
        }
        (None, Some(s)) => {
            let spec = synth::SynthSpec::parse(s)?;
            let bytes = synth::gguf_bytes(&spec)?;
            let rf = check::cpu_reference(GgufFile::from_bytes(bytes.clone())?)?;
            let s = check::cpu_self_sensitivity(&bytes, &rf)?;
            let tol = check::Tolerance::RandomWeights {
                cpu_self_sensitivity: s,
            };
            (GgufFile::from_bytes(bytes)?, spec.name(), rf, tol)
        }
        (None, None) => bail!("give --model and --reference, or --synthetic"),
    };
    let r = check::logits(&dev, file, &name, &rf, tol)?;
    if l.common.json {
        outln!("{}", serde_json::to_string(&r)?)?;
    } else {
        outln!(
            "{}  {}: {} rows × {}, max |Δ| {:.5} (max |logit| {:.3}), argmax {}/{}, top-10 overlap ≥ {}, batch-invariant {}, tolerance {:?}",
            if r.pass { "ok" } else { "FAIL" },
            r.model,
            r.rows,
            r.n_vocab,
            r.max_abs_diff,
            r.max_abs_logit,
            r.argmax_agree,
            r.rows,
            r.top10_overlap_min,
            r.batch_invariant,
            r.tolerance
        )?;
    }
    if !r.pass {
        bail!("the logits check failed");
    }
    Ok(())
}

fn bench(b: CudaBenchArgs) -> anyhow::Result<()> {
    if b.context == 0 || b.steps == 0 || b.batch == 0 {
        bail!("--context, --steps and --batch must be at least 1");
    }
    let spec = synth::SynthSpec::parse(&b.synthetic)?;
    let dev = open(b.common.device)?;
    eprintln!("building {} ...", spec.name());
    let t = std::time::Instant::now();
    let file = GgufFile::from_bytes(synth::gguf_bytes(&spec)?)?;
    eprintln!("built in {:.1} s; uploading", t.elapsed().as_secs_f64());
    let model = fak_cuda::DeviceModel::load(&dev, file)?;
    let p = fak_cuda::bench::BenchParams {
        context: b.context,
        steps: b.steps,
        batch: b.batch,
        ..Default::default()
    };
    let r = fak_cuda::bench::run(&dev, &model, &spec.name(), &p, |what| {
        eprintln!("{what} ...")
    })?;
    if b.common.json {
        outln!("{}", serde_json::to_string(&r)?)?;
    } else {
        outln!(
            "{} on {}: {:.2} GB of matrices",
            r.model,
            r.device.name,
            r.matrix_bytes as f64 / 1e9
        )?;
        outln!("copy (d2d, read+write): {:.0} GB/s", r.copy_gb_per_s)?;
        outln!(
            "prefill {} tokens: {:.0} tokens/s",
            p.context,
            r.prefill_tokens_per_s
        )?;
        for (how, d) in [
            ("launches", &r.decode_1),
            ("graph", &r.decode_1_graph),
            ("launches", &r.decode_batch),
            ("graph", &r.decode_batch_graph),
        ] {
            outln!(
                "decode batch {:>3} ({how:8}): {:.3} ms/step (min {:.3}, max {:.3}), {:.0} tokens/s, {:.0} GB/s = {:.0}% of copy",
                d.batch,
                d.step_ms_median,
                d.step_ms_min,
                d.step_ms_max,
                d.tokens_per_s,
                d.gb_per_s,
                100.0 * d.fraction_of_copy
            )?;
        }
        outln!(
            "batch {} / batch 1 (graphs): {:.1}×",
            p.batch,
            r.batch_speedup
        )?;
        for (what, prof) in [("batch 1", &r.profile_1), ("batched", &r.profile_batch)] {
            let per = prof.passes.max(1) as f64;
            let parts: Vec<String> = prof
                .ms
                .iter()
                .map(|(k, v)| format!("{k} {:.3}", v / per))
                .collect();
            outln!("GPU ms per {what} step: {}", parts.join(", "))?;
        }
        let f = &r.fleet;
        outln!(
            "fleet {} agents × {} turns on {} prefix: {:.2} s, {:.1} agent-turns/s, memory roofline {:.0}%",
            f.agents,
            f.turns,
            f.prefix,
            f.seconds,
            f.agent_turns_per_s,
            100.0 * f.roofline_fraction
        )?;
    }
    Ok(())
}

/// The device line of `fak inspect --system`: its info, or why there is
/// none.
pub fn system_device() -> serde_json::Value {
    match Device::open(0) {
        Ok(d) => serde_json::to_value(d.info()).unwrap_or(serde_json::Value::Null),
        Err(e) => serde_json::json!({"none": e.to_string()}),
    }
}
