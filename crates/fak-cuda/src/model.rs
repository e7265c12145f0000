//! The llama / qwen2 forward pass on the device.
//!
//! A [`DeviceModel`] is stateless like `fak_model::Model`: it owns read-only
//! weights (resident on the device) and computes logits for a ragged
//! [`Batch`] through a [`DeviceKv`], with scratch buffers in a
//! [`Workspace`]. The steps and their arithmetic follow the CPU forward:
//!
//! ```text
//! embed (host: dequantize the token rows) ─► x [n, d]
//! per layer:  h = rms_norm(x)      q,k,v = Wq,k,v · q8(h) (+ bias)     rope(q, k)
//!             kv_write(k, v)       a = attention(q)                     x += Wo · q8(a)
//!             h = rms_norm(x)      g = silu(Wg · q8(h)) · (Wu · q8(h))  x += Wd · q8(g)
//! out:        rows that want logits ─► rms_norm ─► Wout · q8(·) ─► logits [n_out, vocab]
//! ```
//!
//! Every kernel computes a token's values from that token's inputs in an
//! order fixed by the shapes, so a sequence's logits are bit-identical
//! whatever else the batch holds ([`crate::check::logits`] checks it).

use cudarc::driver::CudaSlice;
use fak_gguf::{Arch, GgufFile, ModelConfig, QkNorm, RopeStyle, TensorInfo};
use fak_model::{Batch, LogitsWanted};

use crate::device::Device;
use crate::error::CudaError;
use crate::kv::DeviceKv;
use crate::ops::{self, Acts, KvShape, RopeShape, RowsPerWarp, TokenSlots};
use crate::pool::BufferPool;
use crate::weights::DeviceMatrix;

/// One layer's device weights.
struct Layer {
    attn_norm: CudaSlice<f32>,
    wq: DeviceMatrix,
    wk: DeviceMatrix,
    wv: DeviceMatrix,
    bias: Option<[CudaSlice<f32>; 3]>,
    wo: DeviceMatrix,
    ffn_norm: CudaSlice<f32>,
    w_gate: DeviceMatrix,
    w_up: DeviceMatrix,
    w_down: DeviceMatrix,
}

/// A llama / qwen2 model with its weights on the device.
pub struct DeviceModel {
    cfg: ModelConfig,
    /// The file, for embedding rows (looked up on the host).
    file: GgufFile,
    embd: TensorInfo,
    layers: Vec<Layer>,
    output_norm: CudaSlice<f32>,
    output: DeviceMatrix,
}

impl std::fmt::Debug for DeviceModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceModel")
            .field("arch", &self.cfg.arch)
            .field("n_layer", &self.cfg.n_layer)
            .finish()
    }
}

fn tensor<'a>(file: &'a GgufFile, name: &str) -> Result<&'a TensorInfo, CudaError> {
    file.tensor(name)
        .ok_or_else(|| CudaError::Unsupported(format!("tensor {name} is missing")))
}

/// A 1-D tensor as f32 on the device.
fn vector(dev: &Device, file: &GgufFile, name: &str) -> Result<CudaSlice<f32>, CudaError> {
    let t = tensor(file, name)?;
    let n = t.n_elements() as usize;
    let v = fak_kernels::dequantize_row_to_vec(t.ty, file.tensor_data(t), n)?;
    Ok(dev.stream.clone_htod(&v)?)
}

/// A matrix on the device.
fn matrix(dev: &Device, file: &GgufFile, name: &str) -> Result<DeviceMatrix, CudaError> {
    let t = tensor(file, name)?;
    DeviceMatrix::upload(
        dev,
        name,
        t.ty,
        t.row_len() as usize,
        t.n_rows() as usize,
        file.tensor_data(t),
    )
}

/// Device scratch buffers, grown to the largest batch seen (through a
/// [`BufferPool`], so growing reuses released buffers).
#[derive(Default)]
pub struct Workspace {
    cap: usize,
    f32s: BufferPool<f32>,
    i32s: BufferPool<i32>,
    bufs: Option<Bufs>,
    /// Host copy of the last pass's logits, `[n_out, n_vocab]`.
    logits: Vec<f32>,
    embed: Vec<f32>,
    /// Replay each pass shape's kernels as a CUDA graph (captured on
    /// first use; dropped when the buffers grow).
    pub graphs_on: bool,
    graphs: std::collections::HashMap<(usize, usize, u64), cudarc::driver::CudaGraph>,
    /// When set, passes run without graphs and add their per-operation
    /// GPU times here.
    pub profile: Option<OpTimes>,
    /// Attention's per-chunk partial results (see `ops::attention`).
    part: Option<CudaSlice<f32>>,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace").field("cap", &self.cap).finish()
    }
}

struct Bufs {
    x: CudaSlice<f32>,
    h: CudaSlice<f32>,
    q: CudaSlice<f32>,
    k: CudaSlice<f32>,
    v: CudaSlice<f32>,
    attn: CudaSlice<f32>,
    proj: CudaSlice<f32>,
    gate: CudaSlice<f32>,
    up: CudaSlice<f32>,
    normed: CudaSlice<f32>,
    logits: CudaSlice<f32>,
    cs: CudaSlice<f32>,
    slot: CudaSlice<i32>,
    pos: CudaSlice<i32>,
    idx: CudaSlice<i32>,
    acts: Acts,
}

impl Workspace {
    /// An empty workspace (buffers come with the first pass).
    pub fn new() -> Workspace {
        Workspace::default()
    }

    /// Host logits of the last pass: `[n_out, n_vocab]`, rows in batch
    /// order of the tokens that asked for logits.
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    fn ensure(&mut self, dev: &Device, cfg: &ModelConfig, n: usize) -> Result<(), CudaError> {
        if self.bufs.is_some() && n <= self.cap {
            return Ok(());
        }
        let cap = n.max(1).next_power_of_two();
        // Graphs point at the old buffers.
        self.graphs.clear();
        if let Some(old) = self.bufs.take() {
            for b in [
                old.x, old.h, old.q, old.k, old.v, old.attn, old.proj, old.gate, old.up,
                old.normed, old.logits, old.cs,
            ] {
                self.f32s.give(b);
            }
            for b in [old.slot, old.pos, old.idx] {
                self.i32s.give(b);
            }
        }
        let (d, qd, kvd, ff) = (cfg.n_embd, cfg.n_embd_q(), cfg.n_embd_kv(), cfg.n_ff);
        let s = &dev.stream;
        let f = &mut self.f32s;
        let widest = d.max(qd).max(ff);
        self.bufs = Some(Bufs {
            x: f.take(s, cap * d)?,
            h: f.take(s, cap * d)?,
            q: f.take(s, cap * qd)?,
            k: f.take(s, cap * kvd)?,
            v: f.take(s, cap * kvd)?,
            attn: f.take(s, cap * qd)?,
            proj: f.take(s, cap * d)?,
            gate: f.take(s, cap * ff)?,
            up: f.take(s, cap * ff)?,
            normed: f.take(s, cap * d)?,
            logits: f.take(s, cap * cfg.n_vocab)?,
            cs: f.take(s, cap * cfg.rope_dim.max(2))?,
            slot: self.i32s.take(s, cap)?,
            pos: self.i32s.take(s, cap)?,
            idx: self.i32s.take(s, cap)?,
            acts: Acts::new(dev, cap * widest)?,
        });
        self.cap = cap;
        Ok(())
    }
}

/// Quantizes `x` for `w`'s product unless `acts` already hold it.
fn acts_for(
    dev: &Device,
    w: &DeviceMatrix,
    x: &CudaSlice<f32>,
    n: usize,
    acts: &mut Acts,
) -> Result<(), CudaError> {
    // The caller invalidates `acts` whenever `x` changes.
    if acts.holds != Some((w.acts_type(), n, w.n_in)) {
        ops::quantize(dev, w.acts_type(), x, n, w.n_in, acts)?;
    }
    Ok(())
}

impl DeviceModel {
    /// Uploads the weights of `file` (llama or qwen2, Q8_0 / Q4_K
    /// matrices).
    ///
    /// # Errors
    ///
    /// [`CudaError::Unsupported`] for other architectures or formats;
    /// GGUF and driver errors.
    pub fn load(dev: &Device, file: GgufFile) -> Result<DeviceModel, CudaError> {
        let cfg = fak_gguf::model_config(&file)?;
        if !matches!(cfg.arch, Arch::Llama | Arch::Qwen2) || cfg.qk_norm != QkNorm::None {
            return Err(CudaError::Unsupported(format!(
                "architecture {} (the device forward has llama and qwen2)",
                cfg.arch.name()
            )));
        }
        let embd = tensor(&file, "token_embd.weight")?.clone();
        let mut layers = Vec::with_capacity(cfg.n_layer);
        for i in 0..cfg.n_layer {
            let n = |s: &str| format!("blk.{i}.{s}");
            let bias = if cfg.qkv_bias {
                Some([
                    vector(dev, &file, &n("attn_q.bias"))?,
                    vector(dev, &file, &n("attn_k.bias"))?,
                    vector(dev, &file, &n("attn_v.bias"))?,
                ])
            } else {
                None
            };
            layers.push(Layer {
                attn_norm: vector(dev, &file, &n("attn_norm.weight"))?,
                wq: matrix(dev, &file, &n("attn_q.weight"))?,
                wk: matrix(dev, &file, &n("attn_k.weight"))?,
                wv: matrix(dev, &file, &n("attn_v.weight"))?,
                bias,
                wo: matrix(dev, &file, &n("attn_output.weight"))?,
                ffn_norm: vector(dev, &file, &n("ffn_norm.weight"))?,
                w_gate: matrix(dev, &file, &n("ffn_gate.weight"))?,
                w_up: matrix(dev, &file, &n("ffn_up.weight"))?,
                w_down: matrix(dev, &file, &n("ffn_down.weight"))?,
            });
        }
        let output_norm = vector(dev, &file, "output_norm.weight")?;
        let output = if file.tensor("output.weight").is_some() {
            matrix(dev, &file, "output.weight")?
        } else {
            matrix(dev, &file, "token_embd.weight")?
        };
        dev.synchronize()?;
        Ok(DeviceModel {
            cfg,
            file,
            embd,
            layers,
            output_norm,
            output,
        })
    }

    /// The model's configuration.
    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    /// Bytes of weight matrices one pass reads (every layer's seven plus
    /// the output).
    pub fn matrix_bytes(&self) -> usize {
        let layers: usize = self
            .layers
            .iter()
            .map(|l| {
                [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]
                    .iter()
                    .map(|m| m.device_bytes())
                    .sum::<usize>()
            })
            .sum();
        layers + self.output.device_bytes()
    }

    /// A KV store sized for this model.
    ///
    /// # Errors
    ///
    /// As [`DeviceKv::new`].
    pub fn new_kv(
        &self,
        dev: &Device,
        n_slots: usize,
        n_ctx: usize,
    ) -> Result<DeviceKv, CudaError> {
        DeviceKv::new(dev, self.cfg.n_layer, self.cfg.n_embd_kv(), n_slots, n_ctx)
    }

    /// Runs `batch` (sequence ids are KV slots) and returns the logits of
    /// the tokens that asked for them: `[n_out, n_vocab]` f32 on the host,
    /// rows in batch order.
    ///
    /// # Errors
    ///
    /// [`CudaError::Spec`] for token ids out of range, slots or positions
    /// that do not continue their sequence; driver errors.
    pub fn forward<'w>(
        &self,
        dev: &Device,
        batch: &Batch,
        kv: &mut DeviceKv,
        ws: &'w mut Workspace,
    ) -> Result<&'w [f32], CudaError> {
        let cfg = &self.cfg;
        let n = batch.len();
        ws.logits.clear();
        if n == 0 {
            return Ok(&ws.logits);
        }
        let toks: Vec<(usize, usize)> = batch
            .tokens
            .iter()
            .map(|t| (t.seq.0 as usize, t.pos as usize))
            .collect();
        let ends = kv.check(&toks)?;
        let d = cfg.n_embd;
        let n_vocab = self.embd.n_rows() as usize;
        // Host side: embeddings, slots, positions, RoPE angles.
        ws.embed.resize(n * d, 0.0);
        let rb = self.embd.row_bytes() as usize;
        let table = self.file.tensor_data(&self.embd);
        for (i, t) in batch.tokens.iter().enumerate() {
            let id = t.token as usize;
            if id >= n_vocab {
                return Err(CudaError::Spec(format!(
                    "token {i}: id {id} past the vocabulary ({n_vocab})"
                )));
            }
            fak_kernels::dequantize_row(
                self.embd.ty,
                &table[id * rb..(id + 1) * rb],
                &mut ws.embed[i * d..(i + 1) * d],
            )?;
        }
        let half = cfg.rope_dim / 2;
        let mut cs = vec![0.0f32; n * half * 2];
        let mut pairs = vec![(0.0f32, 0.0f32); half];
        for (i, t) in batch.tokens.iter().enumerate() {
            fak_model::rope_angles(
                t.pos,
                cfg.rope_theta,
                cfg.rope_dim,
                cfg.rope_freq_factors.as_deref(),
                &mut pairs,
            );
            for (j, &(c, s)) in pairs.iter().enumerate() {
                cs[(i * half + j) * 2] = c;
                cs[(i * half + j) * 2 + 1] = s;
            }
        }
        let slots: Vec<i32> = toks.iter().map(|&(s, _)| s as i32).collect();
        let poss: Vec<i32> = toks.iter().map(|&(_, p)| p as i32).collect();
        let want: Vec<i32> = batch
            .tokens
            .iter()
            .enumerate()
            .filter(|(_, t)| t.logits == LogitsWanted::Yes)
            .map(|(i, _)| i as i32)
            .collect();

        ws.ensure(dev, cfg, n)?;
        let Some(b) = ws.bufs.as_mut() else {
            return Err(CudaError::Spec("workspace buffers missing".into()));
        };
        let s = &dev.stream;
        s.memcpy_htod(&ws.embed, &mut b.x)?;
        s.memcpy_htod(&cs, &mut b.cs)?;
        s.memcpy_htod(&slots, &mut b.slot)?;
        s.memcpy_htod(&poss, &mut b.pos)?;
        if !want.is_empty() {
            s.memcpy_htod(&want, &mut b.idx)?;
        }
        let n_out = want.len();
        let shape = PassShape { n, n_out };
        // Attention scratch for this pass's tokens over this store's rows.
        let kvs = KvShape {
            n_head: cfg.n_head,
            n_head_kv: cfg.n_head_kv,
            head_dim: cfg.head_dim,
            n_ctx: kv.n_ctx(),
        };
        let need = ops::attention_scratch(ws.cap, kvs);
        if ws.part.as_ref().is_none_or(|p| p.len() < need) {
            ws.graphs.clear();
            if let Some(old) = ws.part.take() {
                ws.f32s.give(old);
            }
            ws.part = Some(ws.f32s.take(s, need)?);
        }
        let Some(part) = ws.part.as_mut() else {
            return Err(CudaError::Spec("attention scratch missing".into()));
        };
        let mut marks = Marks::new(ws.profile.is_some());
        if ws.graphs_on && !marks.on {
            // Kernel launches only; inputs were uploaded above into the
            // buffers the graph reads.
            let key = (n, n_out, kv.id());
            let g = match ws.graphs.entry(key) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    s.begin_capture(
                        cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
                    )?;
                    let r = self.launch_pass(dev, kv, b, part, shape, &mut marks);
                    let g = s.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0));
                    r?;
                    e.insert(g?.ok_or_else(|| CudaError::Spec("empty graph capture".into()))?)
                }
            };
            g.launch()?;
        } else {
            marks.mark(dev, "upload")?;
            self.launch_pass(dev, kv, b, part, shape, &mut marks)?;
        }
        kv.commit(&ends);
        if n_out > 0 {
            let vocab = self.output.n_out;
            ws.logits.resize(n_out * vocab, 0.0);
            let view = b.logits.slice(0..n_out * vocab);
            s.memcpy_dtoh(&view, &mut ws.logits)?;
        }
        s.synchronize()?;
        if let Some(p) = ws.profile.as_mut() {
            marks.finish(p)?;
        }
        Ok(&ws.logits)
    }

    /// Queues one pass's kernels over inputs already in `b` (embeddings
    /// in `x`, angles, slots, positions, output indices): layers, then the
    /// output rows. Launches only (no copies, no allocation), so it can be
    /// captured into a CUDA graph.
    fn launch_pass(
        &self,
        dev: &Device,
        kv: &mut DeviceKv,
        b: &mut Bufs,
        part: &mut CudaSlice<f32>,
        shape: PassShape,
        m: &mut Marks,
    ) -> Result<(), CudaError> {
        let cfg = &self.cfg;
        let PassShape { n, n_out } = shape;
        let (d, qd, kvd, ff) = (cfg.n_embd, cfg.n_embd_q(), cfg.n_embd_kv(), cfg.n_ff);
        let style = match cfg.rope_style {
            RopeStyle::Normal => 0,
            RopeStyle::Neox => 1,
        };
        let kvs = KvShape {
            n_head: cfg.n_head,
            n_head_kv: cfg.n_head_kv,
            head_dim: cfg.head_dim,
            n_ctx: kv.n_ctx(),
        };
        let scale = cfg.attn_scale();
        let rpw = RowsPerWarp::Auto;
        for (li, l) in self.layers.iter().enumerate() {
            ops::rms_norm(dev, &b.x, &l.attn_norm, &mut b.h, n, d, cfg.rms_eps)?;
            m.mark(dev, "rms_norm")?;
            b.acts.holds = None;
            acts_for(dev, &l.wq, &b.h, n, &mut b.acts)?;
            m.mark(dev, "quantize")?;
            ops::matmul(dev, &l.wq, &b.acts, n, &mut b.q, rpw)?;
            acts_for(dev, &l.wk, &b.h, n, &mut b.acts)?;
            ops::matmul(dev, &l.wk, &b.acts, n, &mut b.k, rpw)?;
            acts_for(dev, &l.wv, &b.h, n, &mut b.acts)?;
            ops::matmul(dev, &l.wv, &b.acts, n, &mut b.v, rpw)?;
            m.mark(dev, "matmul_qkv")?;
            if let Some([bq, bk, bv]) = &l.bias {
                ops::add_bias(dev, &mut b.q, bq, qd, n * qd)?;
                ops::add_bias(dev, &mut b.k, bk, kvd, n * kvd)?;
                ops::add_bias(dev, &mut b.v, bv, kvd, n * kvd)?;
            }
            let rs = |heads| RopeShape {
                n_heads: heads,
                head_dim: cfg.head_dim,
                rope_dim: cfg.rope_dim,
                style,
            };
            ops::rope(dev, &mut b.q, &b.cs, n, rs(cfg.n_head))?;
            ops::rope(dev, &mut b.k, &b.cs, n, rs(cfg.n_head_kv))?;
            let ts = TokenSlots {
                slot: &b.slot,
                pos: &b.pos,
                n_tok: n,
            };
            let (kc, vc) = (&mut kv.k[li], &mut kv.v[li]);
            ops::kv_write(dev, &b.k, &b.v, kc, vc, &ts, kvs)?;
            m.mark(dev, "bias_rope_kv_write")?;
            ops::attention(dev, &b.q, kc, vc, &ts, kvs, scale, part, &mut b.attn)?;
            m.mark(dev, "attention")?;
            b.acts.holds = None;
            acts_for(dev, &l.wo, &b.attn, n, &mut b.acts)?;
            m.mark(dev, "quantize")?;
            ops::matmul(dev, &l.wo, &b.acts, n, &mut b.proj, rpw)?;
            m.mark(dev, "matmul_o")?;
            ops::add_assign(dev, &mut b.x, &b.proj, n * d)?;
            ops::rms_norm(dev, &b.x, &l.ffn_norm, &mut b.h, n, d, cfg.rms_eps)?;
            m.mark(dev, "rms_norm")?;
            b.acts.holds = None;
            acts_for(dev, &l.w_gate, &b.h, n, &mut b.acts)?;
            m.mark(dev, "quantize")?;
            ops::matmul(dev, &l.w_gate, &b.acts, n, &mut b.gate, rpw)?;
            acts_for(dev, &l.w_up, &b.h, n, &mut b.acts)?;
            ops::matmul(dev, &l.w_up, &b.acts, n, &mut b.up, rpw)?;
            m.mark(dev, "matmul_gate_up")?;
            ops::swiglu(dev, &mut b.gate, &b.up, n * ff)?;
            b.acts.holds = None;
            acts_for(dev, &l.w_down, &b.gate, n, &mut b.acts)?;
            m.mark(dev, "swiglu_quantize")?;
            ops::matmul(dev, &l.w_down, &b.acts, n, &mut b.proj, rpw)?;
            m.mark(dev, "matmul_down")?;
            ops::add_assign(dev, &mut b.x, &b.proj, n * d)?;
            m.mark(dev, "add")?;
        }
        if n_out > 0 {
            // Norm only the rows that want logits (gathered first).
            ops::gather_rows(dev, &b.x, &b.idx, &mut b.h, n_out, d)?;
            ops::rms_norm(
                dev,
                &b.h,
                &self.output_norm,
                &mut b.normed,
                n_out,
                d,
                cfg.rms_eps,
            )?;
            b.acts.holds = None;
            acts_for(dev, &self.output, &b.normed, n_out, &mut b.acts)?;
            m.mark(dev, "output_norm_quantize")?;
            ops::matmul(dev, &self.output, &b.acts, n_out, &mut b.logits, rpw)?;
            m.mark(dev, "matmul_output")?;
        }
        Ok(())
    }
}

/// Tokens and output rows of one pass.
#[derive(Debug, Clone, Copy)]
struct PassShape {
    n: usize,
    n_out: usize,
}

/// GPU time per operation of profiled passes: CUDA events recorded
/// between launches (profiled passes run without graphs).
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct OpTimes {
    /// Milliseconds per operation label, summed over passes.
    pub ms: std::collections::BTreeMap<String, f64>,
    /// Passes profiled.
    pub passes: usize,
}

/// Events between the launches of one pass (when profiling).
struct Marks {
    on: bool,
    events: Vec<(&'static str, cudarc::driver::CudaEvent)>,
}

impl Marks {
    fn new(on: bool) -> Marks {
        Marks {
            on,
            events: Vec::new(),
        }
    }

    /// Records that the work queued since the last mark was `label`.
    fn mark(&mut self, dev: &Device, label: &'static str) -> Result<(), CudaError> {
        if self.on {
            let e = dev
                .stream
                .record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))?;
            self.events.push((label, e));
        }
        Ok(())
    }

    /// Adds the time between consecutive marks to `into` (after a sync).
    fn finish(self, into: &mut OpTimes) -> Result<(), CudaError> {
        for w in self.events.windows(2) {
            let ms = w[0].1.elapsed_ms(&w[1].1)? as f64;
            *into.ms.entry(w[1].0.to_string()).or_insert(0.0) += ms;
        }
        into.passes += 1;
        Ok(())
    }
}
