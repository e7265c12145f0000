//! `fak chat`: an interactive conversation.
//!
//! The conversation is re-rendered with the model's chat template every
//! turn and sent to the engine as one request; the previous turns' whole
//! KV blocks come from the prefix cache, so only the rest is computed.

use std::io::{BufRead, Write};

use anyhow::{bail, Context};
use fak_engine::{
    check_context, CtxLimit, Engine, EngineConfig, Event, PrefixCache, Request, SamplingParams,
};
use fak_model::KvType;
use fak_tokenizer::{ChatMessage, ChatTemplate};

use crate::ModelArgs;

#[derive(clap::Args)]
pub struct ChatArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// System prompt.
    #[arg(long)]
    system: Option<String>,
    /// Maximum tokens per reply.
    #[arg(
        short = 'n',
        long = "n-predict",
        default_value_t = 256,
        allow_negative_numbers = true
    )]
    n: usize,
    /// Context size in tokens (default: the model's trained context,
    /// `n_ctx_train`; more needs --allow-ctx-beyond-train).
    #[arg(long, allow_negative_numbers = true)]
    ctx: Option<usize>,
    /// Allow --ctx beyond the model's trained context (positions past it
    /// are outside what the model was trained on).
    #[arg(long)]
    allow_ctx_beyond_train: bool,
    #[command(flatten)]
    sample: crate::SampleArgs,
}

pub fn run(a: ChatArgs) -> anyhow::Result<()> {
    let sampling = a.sample.params();
    sampling.validate()?;
    let (model, tok) = a.model.load()?;
    let n_ctx = a.ctx.unwrap_or(model.config().n_ctx_train);
    let limit = if a.allow_ctx_beyond_train {
        CtxLimit::BeyondTrained
    } else {
        CtxLimit::Trained
    };
    check_context(model.config(), n_ctx, limit).context("--ctx")?;
    let Some(template) =
        ChatTemplate::from_gguf(model.gguf()).context("reading the chat template")?
    else {
        bail!("{} has no tokenizer.chat_template", a.model.model.display());
    };
    let mut messages: Vec<ChatMessage> = Vec::new();
    if let Some(s) = &a.system {
        messages.push(ChatMessage {
            role: "system".into(),
            content: s.clone(),
        });
    }
    // One conversation: each turn's request finds the previous turns in the
    // prefix cache (published when they finished), and computes the rest.
    let cfg = EngineConfig::for_requests(1, n_ctx, KvType::F16, PrefixCache::On);
    let mut engine = Engine::new(&model, Some(&tok), cfg)?;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    eprintln!("fak chat: type a message and press Enter; an empty line or Ctrl-D quits.");
    let mut turn = 0u64;
    loop {
        eprint!("> ");
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end_matches(['\n', '\r']);
        if line.is_empty() {
            break;
        }
        messages.push(ChatMessage {
            role: "user".into(),
            content: line.to_string(),
        });
        let prompt = template.render(&messages, true)?;
        let ids = tok.encode(&prompt, fak_tokenizer::EncodeOptions::default());
        let room = n_ctx.saturating_sub(ids.len());
        if room == 0 {
            bail!(
                "context full: the conversation has {} tokens, the context is {n_ctx}",
                ids.len()
            );
        }
        let req = Request {
            sampling: SamplingParams {
                seed: a.sample.seed.wrapping_add(turn),
                ..sampling
            },
            ..Request::greedy(ids, a.n.min(room))
        };
        turn += 1;
        engine.add(req)?;
        let mut reply = String::new();
        while engine.has_work() {
            for ev in engine.step()? {
                match ev {
                    Event::Token { text, .. } | Event::Finished { text, .. } => {
                        out.write_all(text.as_bytes())?;
                        out.flush()?;
                        reply.push_str(&text);
                    }
                    Event::Failed { error, .. } => return Err(error.into()),
                    Event::Admitted { .. } => {}
                }
            }
        }
        writeln!(out)?;
        messages.push(ChatMessage {
            role: "assistant".into(),
            content: reply,
        });
    }
    Ok(())
}
