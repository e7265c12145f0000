//! `fak chat`: an interactive conversation.
//!
//! The conversation is re-rendered with the model's chat template every
//! turn; the tokens it shares with what the sequence already holds are kept
//! (their KV is reused), and only the new suffix is computed.

use std::io::{BufRead, Write};

use anyhow::{bail, Context};
use fak_engine::{Sampler, SamplingParams, Sequence};
use fak_tokenizer::{ChatMessage, ChatTemplate, StreamDecoder};

use crate::ModelArgs;

#[derive(clap::Args)]
pub struct ChatArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// System prompt.
    #[arg(long)]
    system: Option<String>,
    /// Maximum tokens per reply.
    #[arg(short = 'n', long = "n-predict", default_value_t = 256)]
    n: usize,
    /// Context size in tokens.
    #[arg(long, default_value_t = 4096)]
    ctx: usize,
    /// Temperature; 0 means greedy.
    #[arg(long = "temp", default_value_t = 0.0)]
    temperature: f32,
    /// Top-k filter (0 = off).
    #[arg(long, default_value_t = 40)]
    top_k: usize,
    /// Top-p filter.
    #[arg(long, default_value_t = 0.95)]
    top_p: f32,
    /// RNG seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

pub fn run(a: ChatArgs) -> anyhow::Result<()> {
    let (model, tok) = a.model.load()?;
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
    let mut seq = Sequence::new(&model, a.ctx);
    let mut sampler = Sampler::new(SamplingParams {
        temperature: a.temperature,
        top_k: a.top_k,
        top_p: a.top_p,
        seed: a.seed,
    });
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    eprintln!("fak chat: type a message and press Enter; an empty line or Ctrl-D quits.");
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
        let common = seq
            .tokens()
            .iter()
            .zip(&ids)
            .take_while(|(a, b)| a == b)
            .count();
        // Keep at least one token to feed so that fresh logits come out.
        let keep = common.min(ids.len().saturating_sub(1));
        seq.truncate(keep)?;
        let mut logits = seq.ingest(&model, &ids[keep..])?;
        let mut decoder = StreamDecoder::new();
        let mut reply_ids = Vec::new();
        for _ in 0..a.n {
            let id = sampler
                .sample(&logits)
                .context("the model produced no usable logits")?;
            if tok.is_eog(id) {
                break;
            }
            reply_ids.push(id);
            let piece = decoder.push(&tok, id);
            out.write_all(piece.as_bytes())?;
            out.flush()?;
            if seq.tokens().len() + 1 >= seq.n_ctx() {
                eprintln!("\nfak chat: context full ({} tokens)", seq.n_ctx());
                break;
            }
            logits = seq.ingest(&model, &[id])?;
        }
        out.write_all(decoder.finish().as_bytes())?;
        writeln!(out)?;
        messages.push(ChatMessage {
            role: "assistant".into(),
            content: tok.decode(&reply_ids),
        });
    }
    Ok(())
}
