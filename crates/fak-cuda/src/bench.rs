//! Speed runs on the device, each measured against the device's own copy
//! bandwidth in the same run.
//!
//! * **copy**: device-to-device copies of a 2 GiB buffer; bytes read plus
//!   written per second (the ceiling a memory-bound pass can approach).
//! * **prefill**: one sequence's prompt in one pass.
//! * **decode, batch 1**: one sequence after a prompt, one token per step;
//!   bytes per step = every weight matrix + the KV rows attention reads.
//! * **decode, batch B**: B sequences that each hold a copy of one prefix,
//!   one token each per step; aggregate tokens/s against batch 1.
//! * **fleet**: agents × turns on one prefix: each turn every agent's tool
//!   result is ingested (one pass for all agents) and a reply decoded (one
//!   step per token for all agents); agent-turns/s.
//!
//! Step times are host wall-clock around the whole pass (uploads, kernels,
//! the logits download): what a caller of [`DeviceModel::forward`] sees.

use std::time::Instant;

use fak_model::{Batch, LogitsWanted, SeqId};
use serde::Serialize;

use crate::device::{Device, DeviceInfo};
use crate::error::CudaError;
use crate::model::{DeviceModel, OpTimes, Workspace};

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchParams {
    /// Prompt (and shared prefix) length of the decode runs.
    pub context: usize,
    /// Timed decode steps per run.
    pub steps: usize,
    /// Sequences of the batched decode run.
    pub batch: usize,
    /// Fleet: agents.
    pub agents: usize,
    /// Fleet: turns per agent.
    pub turns: usize,
    /// Fleet: shared prefix tokens.
    pub prefix: usize,
    /// Fleet: tool-result tokens per turn.
    pub tool_tokens: usize,
    /// Fleet: reply tokens per turn.
    pub reply_tokens: usize,
}

impl Default for BenchParams {
    fn default() -> Self {
        BenchParams {
            context: 512,
            steps: 32,
            batch: 64,
            agents: 8,
            turns: 10,
            prefix: 1024,
            tool_tokens: 64,
            reply_tokens: 48,
        }
    }
}

/// A decode run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct DecodeRun {
    /// Sequences per step.
    pub batch: usize,
    /// Context rows before the first timed step.
    pub context: usize,
    /// Timed steps.
    pub steps: usize,
    /// Median step time, ms.
    pub step_ms_median: f64,
    /// Fastest and slowest step, ms.
    pub step_ms_min: f64,
    /// Slowest step, ms.
    pub step_ms_max: f64,
    /// Tokens per second at the median (batch / step time).
    pub tokens_per_s: f64,
    /// Bytes one step reads: weights once + each sequence's KV rows.
    pub bytes_per_step: f64,
    /// bytes_per_step / median step time, GB/s.
    pub gb_per_s: f64,
    /// gb_per_s / the copy rate.
    pub fraction_of_copy: f64,
}

/// The fleet run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct FleetRun {
    /// Agents.
    pub agents: usize,
    /// Turns per agent.
    pub turns: usize,
    /// Shared prefix tokens (computed once, copied to every agent).
    pub prefix: usize,
    /// Tool-result tokens ingested per agent per turn.
    pub tool_tokens: usize,
    /// Reply tokens decoded per agent per turn.
    pub reply_tokens: usize,
    /// Wall time of all turns (prefix excluded), s.
    pub seconds: f64,
    /// agents × turns / seconds.
    pub agent_turns_per_s: f64,
    /// Passes run (ingest + decode steps).
    pub passes: usize,
    /// Bytes the passes read at least (weights per pass + KV rows), over
    /// the copy rate: the memory roofline's time, s.
    pub roofline_seconds: f64,
    /// roofline_seconds / seconds.
    pub roofline_fraction: f64,
}

/// Everything one bench run measured.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// The device.
    pub device: DeviceInfo,
    /// The model (synthetic spec or file).
    pub model: String,
    /// Bytes of weight matrices per pass.
    pub matrix_bytes: usize,
    /// Device-to-device copy rate, GB/s (read + write).
    pub copy_gb_per_s: f64,
    /// Prompt of `context` tokens in one pass: tokens/s.
    pub prefill_tokens_per_s: f64,
    /// Batch 1 decode, kernels launched one by one.
    pub decode_1: DecodeRun,
    /// Batch 1 decode, each step replayed as a CUDA graph.
    pub decode_1_graph: DecodeRun,
    /// GPU time per operation of two batch-1 steps (ms).
    pub profile_1: OpTimes,
    /// Batched decode, launched one by one.
    pub decode_batch: DecodeRun,
    /// Batched decode as a CUDA graph.
    pub decode_batch_graph: DecodeRun,
    /// GPU time per operation of two batched steps (ms).
    pub profile_batch: OpTimes,
    /// decode_batch_graph tokens/s over decode_1_graph tokens/s.
    pub batch_speedup: f64,
    /// The fleet probe.
    pub fleet: FleetRun,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    v[v.len() / 2]
}

/// Device-to-device copy rate in GB/s (bytes read + written).
///
/// # Errors
///
/// Driver errors.
pub fn copy_rate(dev: &Device) -> Result<f64, CudaError> {
    let n = 1usize << 29; // 2 GiB of f32
    let src = dev.stream.alloc_zeros::<f32>(n)?;
    let mut dst = dev.stream.alloc_zeros::<f32>(n)?;
    dev.stream.memcpy_dtod(&src, &mut dst)?;
    dev.synchronize()?;
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..4 {
            dev.stream.memcpy_dtod(&src, &mut dst)?;
        }
        dev.synchronize()?;
        times.push(t.elapsed().as_secs_f64() / 4.0);
    }
    let s = median(&mut times);
    Ok(2.0 * 4.0 * n as f64 / s / 1e9)
}

fn token(i: usize, n_vocab: usize) -> u32 {
    ((i.wrapping_mul(2_654_435_761)) % n_vocab) as u32
}

fn prompt(len: usize, n_vocab: usize, salt: usize) -> Vec<u32> {
    (0..len).map(|i| token(i + salt * 7919, n_vocab)).collect()
}

/// Runs the speed runs for `model`.
///
/// # Errors
///
/// Driver errors, or a KV too large for the device.
pub fn run(
    dev: &Device,
    model: &DeviceModel,
    name: &str,
    p: &BenchParams,
    mut progress: impl FnMut(&str),
) -> Result<BenchReport, CudaError> {
    let cfg = model.config().clone();
    let nv = cfg.n_vocab;
    progress("copy bandwidth");
    let copy = copy_rate(dev)?;
    let weights = model.matrix_bytes() as f64;
    let mut ws = Workspace::new();

    // Prefill + batch-1 decode.
    progress("prefill and batch-1 decode");
    let n_ctx = p.context + 3 * (p.steps + 2) + 8;
    let mut kv = model.new_kv(dev, 1, n_ctx)?;
    let mut b = Batch::new();
    b.push_seq(SeqId(0), 0, &prompt(p.context, nv, 0), LogitsWanted::Yes);
    model.forward(dev, &b, &mut kv, &mut ws)?; // warm-up (allocations)
    kv.clear(0);
    let t = Instant::now();
    model.forward(dev, &b, &mut kv, &mut ws)?;
    let prefill_tokens_per_s = p.context as f64 / t.elapsed().as_secs_f64();
    let kv_row_bytes = kv.bytes_for_rows(1) as f64;
    let ctx0 = p.context;
    let mut times = decode_steps(dev, model, &mut kv, &mut ws, 1, p.steps)?;
    let decode_1 = decode_run(1, ctx0, &mut times, weights, kv_row_bytes, copy);
    ws.profile = Some(OpTimes::default());
    decode_steps(dev, model, &mut kv, &mut ws, 1, 2)?;
    let profile_1 = ws.profile.take().unwrap_or_default();
    ws.graphs_on = true;
    let ctx1 = kv.len(0);
    let mut times = decode_steps(dev, model, &mut kv, &mut ws, 1, p.steps + 1)?;
    let decode_1_graph = decode_run(1, ctx1, &mut times[1..], weights, kv_row_bytes, copy);
    ws.graphs_on = false;
    drop(kv);

    // Batched decode on copies of one prefix.
    progress("batched decode");
    let mut kv = model.new_kv(dev, p.batch, n_ctx)?;
    let mut b = Batch::new();
    b.push_seq(SeqId(0), 0, &prompt(p.context, nv, 0), LogitsWanted::Yes);
    model.forward(dev, &b, &mut kv, &mut ws)?;
    for s in 1..p.batch {
        kv.copy_prefix(dev, 0, s, p.context)?;
    }
    // The first step grows the workspace: untimed.
    let mut times = decode_steps(dev, model, &mut kv, &mut ws, p.batch, p.steps + 1)?;
    let decode_batch = decode_run(
        p.batch,
        ctx0 + 1,
        &mut times[1..],
        weights,
        kv_row_bytes,
        copy,
    );
    ws.profile = Some(OpTimes::default());
    decode_steps(dev, model, &mut kv, &mut ws, p.batch, 2)?;
    let profile_batch = ws.profile.take().unwrap_or_default();
    ws.graphs_on = true;
    let ctxb = kv.len(0);
    let mut times = decode_steps(dev, model, &mut kv, &mut ws, p.batch, p.steps + 1)?;
    let decode_batch_graph =
        decode_run(p.batch, ctxb, &mut times[1..], weights, kv_row_bytes, copy);
    drop(kv);
    let batch_speedup = decode_batch_graph.tokens_per_s / decode_1_graph.tokens_per_s;

    // Fleet probe.
    progress("fleet probe");
    let per_turn = p.tool_tokens + p.reply_tokens;
    let n_ctx = p.prefix + p.turns * per_turn + 8;
    ws.graphs_on = true;
    let mut kv = model.new_kv(dev, p.agents, n_ctx)?;
    let mut b = Batch::new();
    b.push_seq(SeqId(0), 0, &prompt(p.prefix, nv, 1), LogitsWanted::Yes);
    model.forward(dev, &b, &mut kv, &mut ws)?;
    for s in 1..p.agents {
        kv.copy_prefix(dev, 0, s, p.prefix)?;
    }
    let t = Instant::now();
    let mut passes = 0;
    let mut roof_bytes = 0.0f64;
    for turn in 0..p.turns {
        let mut b = Batch::new();
        for s in 0..p.agents {
            let start = kv.len(s);
            let ids = prompt(p.tool_tokens, nv, 100 + turn * p.agents + s);
            b.push_seq(SeqId(s as u32), start as u32, &ids, LogitsWanted::Yes);
        }
        let rows: usize = (0..p.agents).map(|s| kv.len(s) + p.tool_tokens).sum();
        model.forward(dev, &b, &mut kv, &mut ws)?;
        passes += 1;
        roof_bytes += weights + kv_row_bytes * rows as f64;
        for r in 0..p.reply_tokens {
            let mut b = Batch::new();
            for s in 0..p.agents {
                let start = kv.len(s);
                b.push_seq(
                    SeqId(s as u32),
                    start as u32,
                    &[token(r + s, nv)],
                    LogitsWanted::Yes,
                );
            }
            let rows: usize = (0..p.agents).map(|s| kv.len(s) + 1).sum();
            model.forward(dev, &b, &mut kv, &mut ws)?;
            passes += 1;
            roof_bytes += weights + kv_row_bytes * rows as f64;
        }
    }
    let seconds = t.elapsed().as_secs_f64();
    let roofline_seconds = roof_bytes / (copy * 1e9);
    let fleet = FleetRun {
        agents: p.agents,
        turns: p.turns,
        prefix: p.prefix,
        tool_tokens: p.tool_tokens,
        reply_tokens: p.reply_tokens,
        seconds,
        agent_turns_per_s: (p.agents * p.turns) as f64 / seconds,
        passes,
        roofline_seconds,
        roofline_fraction: roofline_seconds / seconds,
    };
    Ok(BenchReport {
        device: dev.info().clone(),
        model: name.into(),
        matrix_bytes: model.matrix_bytes(),
        copy_gb_per_s: copy,
        prefill_tokens_per_s,
        decode_1,
        decode_1_graph,
        profile_1,
        decode_batch,
        decode_batch_graph,
        profile_batch,
        batch_speedup,
        fleet,
    })
}

/// Runs `steps` decode steps of the first `batch` slots (one token each,
/// continuing each slot), returning each step's wall time in seconds.
fn decode_steps(
    dev: &Device,
    model: &DeviceModel,
    kv: &mut crate::kv::DeviceKv,
    ws: &mut Workspace,
    batch: usize,
    steps: usize,
) -> Result<Vec<f64>, CudaError> {
    let nv = model.config().n_vocab;
    let mut times = Vec::with_capacity(steps);
    for i in 0..steps {
        let mut b = Batch::new();
        for s in 0..batch {
            let at = kv.len(s);
            b.push_seq(
                SeqId(s as u32),
                at as u32,
                &[token(i + s, nv)],
                LogitsWanted::Yes,
            );
        }
        let t = Instant::now();
        model.forward(dev, &b, kv, ws)?;
        times.push(t.elapsed().as_secs_f64());
    }
    Ok(times)
}

fn decode_run(
    batch: usize,
    context: usize,
    times: &mut [f64],
    weights: f64,
    kv_row_bytes: f64,
    copy: f64,
) -> DecodeRun {
    let med = median(times);
    let min = times.iter().copied().fold(f64::INFINITY, f64::min);
    let max = times.iter().copied().fold(0.0, f64::max);
    // Rows read at the median step (the middle of the run).
    let rows = batch as f64 * (context + times.len() / 2) as f64;
    let bytes = weights + kv_row_bytes * rows;
    let gbps = bytes / med / 1e9;
    DecodeRun {
        batch,
        context,
        steps: times.len(),
        step_ms_median: med * 1e3,
        step_ms_min: min * 1e3,
        step_ms_max: max * 1e3,
        tokens_per_s: batch as f64 / med,
        bytes_per_step: bytes,
        gb_per_s: gbps,
        fraction_of_copy: gbps / copy,
    }
}
