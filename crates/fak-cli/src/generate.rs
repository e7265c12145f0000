//! `fak generate`.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use fak_engine::{
    generate, generate_many, BatchMode, GenerateParams, ManyParams, SamplingParams, StopAt,
};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::{KvTypeArg, ModelArgs};

#[derive(clap::Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Prompt text (special tokens such as <|im_start|> are parsed).
    #[arg(long, short = 'p', conflicts_with_all = ["prompt_file", "prompts_json"])]
    prompt: Option<String>,
    /// File holding the raw prompt text.
    #[arg(long, conflicts_with = "prompts_json")]
    prompt_file: Option<PathBuf>,
    /// JSON file holding a list of prompt strings; each gets its own
    /// sequence (see --batch-mode). With --json the output is a list.
    #[arg(long)]
    prompts_json: Option<PathBuf>,
    /// With --prompts-json: run all prompts in one ragged batch per step
    /// (together) or one after the other (alone). Outputs are identical.
    #[arg(long, value_enum, default_value_t = Mode::Together)]
    batch_mode: Mode,
    /// With --json: add each prompt's `logits_digest`, the SHA-256 of every
    /// step's f32 logits (little-endian bytes, steps in order).
    #[arg(long)]
    logits_digest: bool,
    /// Element type of the KV cache.
    #[arg(long, value_enum, default_value_t = KvTypeArg::F16)]
    kv_type: KvTypeArg,
    /// Tokens per KV block (with --prompts-json).
    #[arg(long, default_value_t = fak_engine::DEFAULT_BLOCK_SIZE)]
    block_size: usize,
    /// Most tokens per forward call (with --prompts-json).
    #[arg(long, default_value_t = 512)]
    max_batch_tokens: usize,
    /// Number of tokens to generate.
    #[arg(short = 'n', long = "n-predict", default_value_t = 64)]
    n: usize,
    /// Temperature; 0 means greedy.
    #[arg(long = "temp", default_value_t = 0.0)]
    temperature: f32,
    /// Top-k filter (0 = off).
    #[arg(long, default_value_t = 40)]
    top_k: usize,
    /// Top-p filter (1.0 = off).
    #[arg(long, default_value_t = 0.95)]
    top_p: f32,
    /// RNG seed for sampling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Keep generating past end-of-generation tokens.
    #[arg(long)]
    ignore_eos: bool,
    /// Print one JSON object on stdout instead of streaming text.
    #[arg(long)]
    json: bool,
}

/// `--batch-mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    Together,
    Alone,
}

pub fn run(a: GenerateArgs) -> anyhow::Result<()> {
    if !(0.0..=1.0).contains(&a.top_p) {
        bail!("--top-p must be within 0..=1, got {}", a.top_p);
    }
    if a.prompts_json.is_some() {
        return run_many(&a);
    }
    if a.logits_digest && !a.json {
        bail!("--logits-digest needs --json");
    }
    let text = match (&a.prompt, &a.prompt_file) {
        (Some(p), None) => p.clone(),
        (None, Some(f)) => std::fs::read_to_string(f)
            .with_context(|| format!("reading prompt file {}", f.display()))?,
        _ => bail!("give exactly one of --prompt, --prompt-file or --prompts-json"),
    };
    let (model, tok) = a.model.load()?;
    let prompt_ids = tok.encode(&text, fak_tokenizer::EncodeOptions::default());
    if prompt_ids.is_empty() {
        bail!("the prompt tokenizes to nothing; give some text");
    }
    let params = gen_params(&a);
    let t0 = Instant::now();
    let stdout = std::io::stdout();
    let gen = if a.json {
        generate(&model, &tok, &prompt_ids, &params, a.logits_digest, |_| {})?
    } else {
        let mut lock = stdout.lock();
        let g = generate(&model, &tok, &prompt_ids, &params, false, |piece| {
            let _ = lock.write_all(piece.as_bytes());
            let _ = lock.flush();
        })?;
        let _ = writeln!(lock);
        g
    };
    let dt = t0.elapsed().as_secs_f64();
    if a.json {
        let mut obj = json!({"prompt_ids": gen.prompt_ids, "generated_ids": gen.generated_ids, "text": gen.text});
        if a.logits_digest {
            let mut h = Sha256::new();
            for step in &gen.step_logits {
                hash_logits(&mut h, step);
            }
            obj["logits_digest"] = json!(hex(&h.finalize()));
        }
        println!("{obj}");
    }
    eprintln!(
        "fak: {} prompt + {} generated tokens in {:.2} s",
        gen.prompt_ids.len(),
        gen.generated_ids.len(),
        dt
    );
    Ok(())
}

/// `--prompts-json`: several prompts through [`generate_many`].
fn run_many(a: &GenerateArgs) -> anyhow::Result<()> {
    let Some(path) = &a.prompts_json else {
        bail!("--prompts-json is missing");
    };
    if a.logits_digest && !a.json {
        bail!("--logits-digest needs --json");
    }
    let raw = std::fs::read_to_string(path)
        .with_context(|| format!("reading prompts file {}", path.display()))?;
    let texts: Vec<String> = serde_json::from_str(&raw)
        .with_context(|| format!("{}: expected a JSON list of prompt strings", path.display()))?;
    if texts.is_empty() {
        bail!("{}: the prompt list is empty", path.display());
    }
    let (model, tok) = a.model.load()?;
    let mut prompts = Vec::with_capacity(texts.len());
    for (i, t) in texts.iter().enumerate() {
        let ids = tok.encode(t, fak_tokenizer::EncodeOptions::default());
        if ids.is_empty() {
            bail!("prompt {i} tokenizes to nothing; give some text");
        }
        prompts.push(ids);
    }
    let params = ManyParams {
        gen: gen_params(a),
        mode: match a.batch_mode {
            Mode::Together => BatchMode::Together,
            Mode::Alone => BatchMode::Alone,
        },
        block_size: a.block_size,
        max_batch_tokens: a.max_batch_tokens,
    };
    let t0 = Instant::now();
    let mut hashers: Vec<Sha256> = prompts.iter().map(|_| Sha256::new()).collect();
    let gens = generate_many(&model, &tok, &prompts, &params, |i, logits| {
        if let Some(h) = hashers.get_mut(i) {
            hash_logits(h, logits);
        }
    })?;
    let dt = t0.elapsed().as_secs_f64();
    if a.json {
        let list: Vec<serde_json::Value> = gens
            .iter()
            .zip(hashers)
            .map(|(g, h)| {
                let mut obj = json!({"prompt_ids": g.prompt_ids, "generated_ids": g.generated_ids, "text": g.text});
                if a.logits_digest {
                    obj["logits_digest"] = json!(hex(&h.finalize()));
                }
                obj
            })
            .collect();
        println!("{}", serde_json::Value::Array(list));
    } else {
        for (i, g) in gens.iter().enumerate() {
            println!("--- prompt {i}\n{}", g.text);
        }
    }
    let generated: usize = gens.iter().map(|g| g.generated_ids.len()).sum();
    eprintln!(
        "fak: {} prompts, {generated} generated tokens in {dt:.2} s ({:?} mode)",
        gens.len(),
        a.batch_mode
    );
    Ok(())
}

/// Feeds `logits` into `h` as little-endian f32 bytes.
fn hash_logits(h: &mut Sha256, logits: &[f32]) {
    for x in logits {
        h.update(x.to_le_bytes());
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn gen_params(a: &GenerateArgs) -> GenerateParams {
    GenerateParams {
        max_tokens: a.n,
        sampling: SamplingParams {
            temperature: a.temperature,
            top_k: a.top_k,
            top_p: a.top_p,
            seed: a.seed,
            ..SamplingParams::greedy()
        },
        stop: if a.ignore_eos {
            StopAt::Never
        } else {
            StopAt::EndOfGeneration
        },
        kv_type: a.kv_type.into(),
    }
}
