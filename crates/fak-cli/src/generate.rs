//! `fak generate`.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use fak_engine::{
    generate_drafted, generate_many, BatchMode, CtxLimit, GenerateParams, ManyParams, StopAt,
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
    /// (together, the default) or one after the other (alone). Outputs are
    /// identical.
    #[arg(long, value_enum)]
    batch_mode: Option<Mode>,
    /// With --json: add each prompt's `logits_digest`, the SHA-256 of every
    /// step's f32 logits (little-endian bytes, steps in order).
    #[arg(long)]
    logits_digest: bool,
    /// Element type of the KV cache.
    #[arg(long, value_enum, default_value_t = KvTypeArg::F16)]
    kv_type: KvTypeArg,
    /// Speculative decoding: `lookup` verifies tokens drafted from the
    /// sequence's own context, `draft` a draft model's, several per pass;
    /// the output is the same.
    #[arg(long, value_enum, default_value_t = crate::SpeculativeArg::Off)]
    speculative: crate::SpeculativeArg,
    #[command(flatten)]
    draft: crate::DraftArgs,
    /// Tokens per KV block (with --prompts-json; default 64).
    #[arg(long)]
    block_size: Option<usize>,
    /// Most tokens per forward call (with --prompts-json; default 512).
    #[arg(long)]
    max_batch_tokens: Option<usize>,
    /// Number of tokens to generate. The prompt plus these must fit the
    /// model's trained context (see --allow-ctx-beyond-train).
    #[arg(
        short = 'n',
        long = "n-predict",
        default_value_t = 64,
        allow_negative_numbers = true
    )]
    n: usize,
    /// Allow a prompt plus --n-predict longer than the model's trained
    /// context (`n_ctx_train`; positions past it are outside what the
    /// model was trained on).
    #[arg(long)]
    allow_ctx_beyond_train: bool,
    #[command(flatten)]
    sample: crate::SampleArgs,
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
    let params = gen_params(&a)?;
    if a.logits_digest && !a.json {
        bail!("--logits-digest needs --json");
    }
    if a.prompts_json.is_some() {
        return run_many(&a, params);
    }
    for (flag, given) in [
        ("--batch-mode", a.batch_mode.is_some()),
        ("--block-size", a.block_size.is_some()),
        ("--max-batch-tokens", a.max_batch_tokens.is_some()),
    ] {
        if given {
            bail!("{flag} applies only with --prompts-json");
        }
    }
    let text = match (&a.prompt, &a.prompt_file) {
        (Some(p), None) => p.clone(),
        (None, Some(f)) => std::fs::read_to_string(f)
            .with_context(|| format!("reading prompt file {}", f.display()))?,
        _ => bail!("give exactly one of --prompt, --prompt-file or --prompts-json"),
    };
    let draft_params = a.draft.params(a.speculative)?;
    let (model, tok) = a.model.load()?;
    let draft_model = match &a.draft.draft_model {
        Some(p) => Some(load_draft(p, a.model.threads)?),
        None => None,
    };
    let drafting = draft_model.as_ref().map(|m| fak_engine::Drafting {
        model: m,
        params: draft_params,
    });
    let prompt_ids = tok.encode(&text, fak_tokenizer::EncodeOptions::default());
    if prompt_ids.is_empty() {
        bail!("the prompt tokenizes to nothing; give some text");
    }
    let t0 = Instant::now();
    // Logits are hashed step by step, never kept.
    let mut digest = Sha256::new();
    let on_logits = |l: &[f32]| {
        if a.logits_digest {
            hash_logits(&mut digest, l);
        }
    };
    let gen = if a.json {
        generate_drafted(
            &model,
            drafting,
            &tok,
            &prompt_ids,
            &params,
            on_logits,
            |_| ControlFlow::Continue(()),
        )?
    } else {
        let mut lock = std::io::stdout().lock();
        let mut failed = None;
        let g = generate_drafted(
            &model,
            drafting,
            &tok,
            &prompt_ids,
            &params,
            on_logits,
            |piece| match lock.write_all(piece.as_bytes()).and_then(|()| lock.flush()) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    failed = Some(e);
                    ControlFlow::Break(())
                }
            },
        )?;
        if let Some(e) = failed {
            return Err(e).context("writing to stdout");
        }
        writeln!(lock)?;
        g
    };
    let dt = t0.elapsed().as_secs_f64();
    if a.json {
        let mut obj = json!({"prompt_ids": gen.prompt_ids, "generated_ids": gen.generated_ids, "text": gen.text});
        if a.logits_digest {
            obj["logits_digest"] = json!(hex(&digest.finalize()));
        }
        if a.speculative != crate::SpeculativeArg::Off {
            obj["speculation"] = speculation_json(&gen.stats);
        }
        outln!("{obj}")?;
    }
    eprintln!(
        "fak: {} prompt + {} generated tokens in {:.2} s",
        gen.prompt_ids.len(),
        gen.generated_ids.len(),
        dt
    );
    if a.speculative != crate::SpeculativeArg::Off {
        eprintln!("fak: {}", speculation_line(&gen.stats));
    }
    Ok(())
}

/// What speculation did: forward passes, draft tokens and those accepted,
/// in all and per source.
pub(crate) fn speculation_json(s: &fak_engine::EngineStats) -> serde_json::Value {
    let rate = |acc: u64, d: u64| if d == 0 { 0.0 } else { acc as f64 / d as f64 };
    let other = |x: u64, fleet: u64, grammar: u64, model: u64| x - fleet - grammar - model;
    json!({
        "forward_passes": s.passes,
        "draft_tokens": s.spec_draft_tokens,
        "accepted_tokens": s.spec_accepted_tokens,
        "acceptance": rate(s.spec_accepted_tokens, s.spec_draft_tokens),
        "by_source": {
            "lookup_or_prediction": {
                "draft_tokens": other(s.spec_draft_tokens, s.spec_fleet_draft_tokens,
                    s.spec_grammar_draft_tokens, s.spec_model_draft_tokens),
                "accepted_tokens": other(s.spec_accepted_tokens, s.spec_fleet_accepted_tokens,
                    s.spec_grammar_accepted_tokens, s.spec_model_accepted_tokens),
            },
            "fleet": {"draft_tokens": s.spec_fleet_draft_tokens,
                "accepted_tokens": s.spec_fleet_accepted_tokens},
            "grammar": {"draft_tokens": s.spec_grammar_draft_tokens,
                "accepted_tokens": s.spec_grammar_accepted_tokens},
            "draft_model": {"draft_tokens": s.spec_model_draft_tokens,
                "accepted_tokens": s.spec_model_accepted_tokens,
                "passes": s.draft_model_passes,
                "seconds": s.draft_model_time.as_secs_f64()},
        },
    })
}

/// [`speculation_json`] as one line for stderr.
fn speculation_line(s: &fak_engine::EngineStats) -> String {
    let pct = |acc: u64, d: u64| {
        if d == 0 {
            0.0
        } else {
            100.0 * acc as f64 / d as f64
        }
    };
    let mut line = format!(
        "speculation: {} forward passes; {} of {} draft tokens accepted ({:.0}%)",
        s.passes,
        s.spec_accepted_tokens,
        s.spec_draft_tokens,
        pct(s.spec_accepted_tokens, s.spec_draft_tokens)
    );
    if s.draft_model_passes > 0 {
        line.push_str(&format!(
            "; draft model: {} of {} ({:.0}%) in {} passes, {:.2} s",
            s.spec_model_accepted_tokens,
            s.spec_model_draft_tokens,
            pct(s.spec_model_accepted_tokens, s.spec_model_draft_tokens),
            s.draft_model_passes,
            s.draft_model_time.as_secs_f64()
        ));
    }
    line
}

/// `--prompts-json`: several prompts through [`generate_many`].
fn run_many(a: &GenerateArgs, gen: GenerateParams) -> anyhow::Result<()> {
    let Some(path) = &a.prompts_json else {
        bail!("--prompts-json is missing");
    };
    let mode = a.batch_mode.unwrap_or(Mode::Together);
    let raw = std::fs::read_to_string(path)
        .with_context(|| format!("reading prompts file {}", path.display()))?;
    let texts: Vec<String> = serde_json::from_str(&raw)
        .with_context(|| format!("{}: expected a JSON list of prompt strings", path.display()))?;
    if texts.is_empty() {
        bail!("{}: the prompt list is empty", path.display());
    }
    let draft_params = a.draft.params(a.speculative)?;
    let (model, tok) = a.model.load()?;
    let draft_model = match &a.draft.draft_model {
        Some(p) => Some(load_draft(p, a.model.threads)?),
        None => None,
    };
    let mut prompts = Vec::with_capacity(texts.len());
    for (i, t) in texts.iter().enumerate() {
        let ids = tok.encode(t, fak_tokenizer::EncodeOptions::default());
        if ids.is_empty() {
            bail!("prompt {i} tokenizes to nothing; give some text");
        }
        prompts.push(ids);
    }
    let params = ManyParams {
        gen,
        mode: match mode {
            Mode::Together => BatchMode::Together,
            Mode::Alone => BatchMode::Alone,
        },
        block_size: a.block_size.unwrap_or(fak_engine::DEFAULT_BLOCK_SIZE),
        max_batch_tokens: a.max_batch_tokens.unwrap_or(512),
        draft: draft_model.as_ref().map(|m| fak_engine::Drafting {
            model: m,
            params: draft_params,
        }),
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
                if a.speculative != crate::SpeculativeArg::Off {
                    obj["speculation"] = speculation_json(&g.stats);
                }
                obj
            })
            .collect();
        outln!("{}", serde_json::Value::Array(list))?;
    } else {
        for (i, g) in gens.iter().enumerate() {
            outln!("--- prompt {i}\n{}", g.text)?;
        }
    }
    let generated: usize = gens.iter().map(|g| g.generated_ids.len()).sum();
    eprintln!(
        "fak: {} prompts, {generated} generated tokens in {dt:.2} s ({:?} mode)",
        gens.len(),
        mode
    );
    Ok(())
}

/// Loads a draft model on the target's thread count.
pub(crate) fn load_draft(
    path: &std::path::Path,
    threads: Option<usize>,
) -> anyhow::Result<fak_model::Model> {
    let mut m = fak_model::Model::load(path)
        .with_context(|| format!("loading --draft-model {}", path.display()))?;
    if let Some(t) = threads {
        m.set_threads(t).with_context(|| format!("--threads {t}"))?;
    }
    Ok(m)
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

/// The generation settings of `a`, sampling checked
/// ([`fak_engine::SamplingParams::validate`]) before anything is loaded.
fn gen_params(a: &GenerateArgs) -> anyhow::Result<GenerateParams> {
    let params = GenerateParams {
        max_tokens: a.n,
        sampling: a.sample.params(),
        stop: if a.ignore_eos {
            StopAt::Never
        } else {
            StopAt::EndOfGeneration
        },
        kv_type: a.kv_type.into(),
        speculative: a.speculative.into(),
        ctx_limit: if a.allow_ctx_beyond_train {
            CtxLimit::BeyondTrained
        } else {
            CtxLimit::Trained
        },
    };
    params.sampling.validate()?;
    Ok(params)
}
