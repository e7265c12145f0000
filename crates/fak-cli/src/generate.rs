//! `fak generate`.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use fak_engine::{generate, GenerateParams, SamplingParams, StopAt};
use serde_json::json;

use crate::ModelArgs;

#[derive(clap::Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Prompt text (special tokens such as <|im_start|> are parsed).
    #[arg(long, short = 'p', conflicts_with = "prompt_file")]
    prompt: Option<String>,
    /// File holding the raw prompt text.
    #[arg(long)]
    prompt_file: Option<PathBuf>,
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

pub fn run(a: GenerateArgs) -> anyhow::Result<()> {
    let text = match (&a.prompt, &a.prompt_file) {
        (Some(p), None) => p.clone(),
        (None, Some(f)) => std::fs::read_to_string(f)
            .with_context(|| format!("reading prompt file {}", f.display()))?,
        _ => bail!("give exactly one of --prompt or --prompt-file"),
    };
    if !(0.0..=1.0).contains(&a.top_p) {
        bail!("--top-p must be within 0..=1, got {}", a.top_p);
    }
    let (model, tok) = a.model.load()?;
    let prompt_ids = tok.encode(&text, fak_tokenizer::EncodeOptions::default());
    if prompt_ids.is_empty() {
        bail!("the prompt tokenizes to nothing; give some text");
    }
    let params = GenerateParams {
        max_tokens: a.n,
        sampling: SamplingParams {
            temperature: a.temperature,
            top_k: a.top_k,
            top_p: a.top_p,
            seed: a.seed,
        },
        stop: if a.ignore_eos {
            StopAt::Never
        } else {
            StopAt::EndOfGeneration
        },
    };
    let t0 = Instant::now();
    let stdout = std::io::stdout();
    let gen = if a.json {
        generate(&model, &tok, &prompt_ids, &params, false, |_| {})?
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
        println!(
            "{}",
            json!({"prompt_ids": gen.prompt_ids, "generated_ids": gen.generated_ids, "text": gen.text})
        );
    }
    eprintln!(
        "fak: {} prompt + {} generated tokens in {:.2} s",
        gen.prompt_ids.len(),
        gen.generated_ids.len(),
        dt
    );
    Ok(())
}
