//! `fak inspect` and `fak tokenize`.

use std::path::PathBuf;

use anyhow::Context;
use fak_gguf::{GgufFile, MetaArray, MetaValue};
use serde_json::{json, Value};

#[derive(clap::Args)]
pub struct InspectArgs {
    /// GGUF file to inspect.
    #[arg(required_unless_present = "system")]
    model: Option<PathBuf>,
    /// Show the machine instead: CPU, detected ISA features, the kernel path
    /// chosen (FAK_ISA=scalar|avx2|avx512 forces one) and the thread count.
    #[arg(long, conflicts_with = "model")]
    system: bool,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct TokenizeArgs {
    /// Path to a GGUF model file.
    #[arg(long, short = 'm')]
    model: PathBuf,
    /// Text to tokenize (special tokens such as <|im_start|> are parsed).
    text: String,
    /// Print one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

/// llama.cpp's names for `general.file_type` values.
fn file_type_name(ft: u64) -> &'static str {
    match ft {
        0 => "ALL_F32",
        1 => "MOSTLY_F16",
        2 => "MOSTLY_Q4_0",
        3 => "MOSTLY_Q4_1",
        7 => "MOSTLY_Q8_0",
        8 => "MOSTLY_Q5_0",
        9 => "MOSTLY_Q5_1",
        10 => "MOSTLY_Q2_K",
        11 => "MOSTLY_Q3_K_S",
        12 => "MOSTLY_Q3_K_M",
        13 => "MOSTLY_Q3_K_L",
        14 => "MOSTLY_Q4_K_S",
        15 => "MOSTLY_Q4_K_M",
        16 => "MOSTLY_Q5_K_S",
        17 => "MOSTLY_Q5_K_M",
        18 => "MOSTLY_Q6_K",
        19 => "MOSTLY_IQ2_XXS",
        20 => "MOSTLY_IQ2_XS",
        21 => "MOSTLY_Q2_K_S",
        22 => "MOSTLY_IQ3_XS",
        23 => "MOSTLY_IQ3_XXS",
        24 => "MOSTLY_IQ1_S",
        25 => "MOSTLY_IQ4_NL",
        26 => "MOSTLY_IQ3_S",
        27 => "MOSTLY_IQ3_M",
        28 => "MOSTLY_IQ2_S",
        29 => "MOSTLY_IQ2_M",
        30 => "MOSTLY_IQ4_XS",
        31 => "MOSTLY_IQ1_M",
        32 => "MOSTLY_BF16",
        36 => "MOSTLY_TQ1_0",
        37 => "MOSTLY_TQ2_0",
        38 => "MOSTLY_MXFP4_MOE",
        _ => "unknown",
    }
}

fn array_json(a: &MetaArray, full: bool) -> Value {
    macro_rules! arr {
        ($v:expr, $t:expr) => {
            if full || $v.len() <= 16 {
                json!($v)
            } else {
                json!({"type": $t, "len": $v.len()})
            }
        };
    }
    match a {
        MetaArray::U8(v) => arr!(v, "u8"),
        MetaArray::I8(v) => arr!(v, "i8"),
        MetaArray::U16(v) => arr!(v, "u16"),
        MetaArray::I16(v) => arr!(v, "i16"),
        MetaArray::U32(v) => arr!(v, "u32"),
        MetaArray::I32(v) => arr!(v, "i32"),
        MetaArray::F32(v) => arr!(v, "f32"),
        MetaArray::Bool(v) => arr!(v, "bool"),
        MetaArray::Str(v) => arr!(v, "string"),
        MetaArray::U64(v) => arr!(v, "u64"),
        MetaArray::I64(v) => arr!(v, "i64"),
        MetaArray::F64(v) => arr!(v, "f64"),
        MetaArray::Array(v) => {
            if full || v.len() <= 16 {
                Value::Array(v.iter().map(|x| array_json(x, full)).collect())
            } else {
                json!({"type": "array", "len": v.len()})
            }
        }
    }
}

fn value_json(v: &MetaValue) -> Value {
    match v {
        MetaValue::U8(x) => json!(x),
        MetaValue::I8(x) => json!(x),
        MetaValue::U16(x) => json!(x),
        MetaValue::I16(x) => json!(x),
        MetaValue::U32(x) => json!(x),
        MetaValue::I32(x) => json!(x),
        MetaValue::F32(x) => json!(x),
        MetaValue::Bool(x) => json!(x),
        MetaValue::Str(x) => json!(x),
        MetaValue::U64(x) => json!(x),
        MetaValue::I64(x) => json!(x),
        MetaValue::F64(x) => json!(x),
        MetaValue::Array(a) => array_json(a, false),
    }
}

fn value_text(v: &MetaValue) -> String {
    let s = match value_json(v) {
        Value::String(s) => s,
        other => other.to_string(),
    };
    let s = s.replace('\n', "\\n");
    if s.chars().count() > 80 {
        let cut: String = s.chars().take(77).collect();
        format!("{cut}...")
    } else {
        s
    }
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

fn system(json_out: bool) -> anyhow::Result<()> {
    let isa = fak_kernels::isa();
    let features = fak_kernels::detected_isa_features();
    let available: Vec<String> = fak_kernels::Isa::available()
        .iter()
        .map(|i| i.to_string())
        .collect();
    let threads = fak_bench::threads_or_all(None);
    let cpu = fak_bench::cpu_model();
    let forced = std::env::var(fak_kernels::isa::ISA_ENV_VAR).ok();
    // The CUDA device, in builds with the `cuda` feature.
    #[cfg(feature = "cuda")]
    let cuda = Some(crate::cuda::system_device());
    #[cfg(not(feature = "cuda"))]
    let cuda: Option<Value> = None;
    if json_out {
        outln!(
            "{}",
            json!({"cpu": cpu, "isa": isa.to_string(), "isa_available": available, "isa_forced": forced, "cpu_features": features, "threads": threads, "cuda": cuda})
        )?;
    } else {
        outln!("cpu:           {cpu}")?;
        outln!(
            "kernel path:   {isa}{}",
            forced
                .map(|f| format!(" (FAK_ISA={f})"))
                .unwrap_or_default()
        )?;
        outln!("available:     {}", available.join(", "))?;
        outln!("cpu features:  {}", features.join(" "))?;
        outln!("threads:       {threads}")?;
        if let Some(c) = cuda {
            outln!("cuda:          {c}")?;
        }
    }
    Ok(())
}

pub fn inspect(a: InspectArgs) -> anyhow::Result<()> {
    let Some(model) = a.model.as_ref().filter(|_| !a.system) else {
        return system(a.json);
    };
    let f = GgufFile::open(model).with_context(|| format!("reading {}", model.display()))?;
    let cfg = fak_gguf::model::model_config(&f)
        .with_context(|| format!("validating {}", model.display()))?;
    let file_type = f.get_uint("general.file_type")?;
    let n_params: u64 = f.tensors().iter().map(|t| t.n_elements()).sum();
    let n_bytes: u64 = f.tensors().iter().map(|t| t.n_bytes).sum();
    let mut types: std::collections::BTreeMap<String, (usize, u64)> = Default::default();
    for t in f.tensors() {
        let e = types.entry(t.ty.name().to_string()).or_default();
        e.0 += 1;
        e.1 += t.n_bytes;
    }
    if a.json {
        let meta: serde_json::Map<String, Value> = f
            .metadata()
            .iter()
            .map(|(k, v)| (k.clone(), value_json(v)))
            .collect();
        let tensors: Vec<Value> = f
            .tensors()
            .iter()
            .map(|t| json!({"name": t.name, "type": t.ty.name(), "dims": t.dims, "n_elements": t.n_elements(), "n_bytes": t.n_bytes, "offset": t.offset}))
            .collect();
        let out = json!({
            "file": model.display().to_string(),
            "gguf_version": f.version(),
            "alignment": f.alignment(),
            "architecture": format!("{:?}", cfg.arch).to_lowercase(),
            "file_type": file_type.map(|ft| json!({"id": ft, "name": file_type_name(ft)})),
            "n_params": n_params,
            "tensor_bytes": n_bytes,
            "config": {
                "n_vocab": cfg.n_vocab, "n_embd": cfg.n_embd, "n_layer": cfg.n_layer, "n_head": cfg.n_head,
                "n_head_kv": cfg.n_head_kv, "head_dim": cfg.head_dim, "n_ff": cfg.n_ff, "n_ctx_train": cfg.n_ctx_train,
                "rope_theta": cfg.rope_theta, "rope_dim": cfg.rope_dim, "rope_style": format!("{:?}", cfg.rope_style).to_lowercase(),
                "rms_eps": cfg.rms_eps, "tied_embeddings": cfg.tied_embeddings, "qkv_bias": cfg.qkv_bias,
                "qk_norm": format!("{:?}", cfg.qk_norm).to_lowercase(), "rope_freq_factors": cfg.rope_freq_factors,
            },
            "tensor_types": types.iter().map(|(k, (n, b))| (k.clone(), json!({"count": n, "bytes": b}))).collect::<serde_json::Map<_, _>>(),
            "metadata": meta,
            "tensors": tensors,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
        return Ok(());
    }
    outln!("file:         {}", model.display())?;
    outln!(
        "gguf version: {}  alignment: {}",
        f.version(),
        f.alignment()
    )?;
    outln!("architecture: {:?}", cfg.arch)?;
    if let Some(ft) = file_type {
        outln!("file type:    {} ({ft})", file_type_name(ft))?;
    }
    outln!(
        "parameters:   {:.1} M in {} tensors, {}",
        n_params as f64 / 1e6,
        f.tensors().len(),
        human_bytes(n_bytes)
    )?;
    outln!(
        "config:       vocab {} · embd {} · layers {} · heads {}/{} kv · head_dim {} · ffn {} · ctx {}",
        cfg.n_vocab, cfg.n_embd, cfg.n_layer, cfg.n_head, cfg.n_head_kv, cfg.head_dim, cfg.n_ff, cfg.n_ctx_train
    )?;
    outln!(
        "              rope {:?} θ={} dim {} · rms_eps {:e} · tied embeddings: {} · qkv bias: {}",
        cfg.rope_style,
        cfg.rope_theta,
        cfg.rope_dim,
        cfg.rms_eps,
        cfg.tied_embeddings,
        cfg.qkv_bias
    )?;
    if cfg.qk_norm != fak_gguf::QkNorm::None || cfg.rope_freq_factors.is_some() {
        outln!(
            "              q/k norm: {:?} · rope freq factors: {}",
            cfg.qk_norm,
            cfg.rope_freq_factors
                .as_ref()
                .map_or("none".to_string(), |f| format!(
                    "{} (rope_freqs.weight)",
                    f.len()
                ))
        )?;
    }
    outln!("tensor types:")?;
    for (k, (n, b)) in &types {
        outln!("  {k:<6} {n:>5} tensors  {}", human_bytes(*b))?;
    }
    outln!("metadata ({} keys):", f.metadata().len())?;
    for (k, v) in f.metadata() {
        outln!("  {k:<42} {}", value_text(v))?;
    }
    outln!("tensors ({}):", f.tensors().len())?;
    for t in f.tensors() {
        let dims: Vec<String> = t.dims.iter().map(|d| d.to_string()).collect();
        outln!(
            "  {:<32} {:<6} [{}] {}",
            t.name,
            t.ty.name(),
            dims.join(", "),
            human_bytes(t.n_bytes)
        )?;
    }
    Ok(())
}

pub fn tokenize(a: TokenizeArgs) -> anyhow::Result<()> {
    let f = GgufFile::open(&a.model).with_context(|| format!("reading {}", a.model.display()))?;
    let tok = fak_tokenizer::Tokenizer::from_gguf(&f)
        .with_context(|| format!("tokenizer of {}", a.model.display()))?;
    let ids = tok.encode(&a.text, fak_tokenizer::EncodeOptions::default());
    let pieces: Vec<String> = ids
        .iter()
        .map(|&id| String::from_utf8_lossy(tok.token_bytes(id)).into_owned())
        .collect();
    if a.json {
        outln!(
            "{}",
            json!({"ids": ids, "pieces": pieces, "n_tokens": ids.len()})
        )?;
    } else {
        for (id, p) in ids.iter().zip(&pieces) {
            outln!("{id:>8} {p:?}")?;
        }
        eprintln!("{} tokens", ids.len());
    }
    Ok(())
}
