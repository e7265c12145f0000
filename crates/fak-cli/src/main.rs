//! `fak`: inspect, tokenize, generate, chat, quantize and benchmark GGUF models.
//!
//! Every error is printed as one line on stderr with a non-zero exit.
//! Machine-readable output (`--json`) goes to stdout; progress and timings
//! go to stderr.

mod bench;
mod chat;
mod generate;
mod inspect;
mod project;
mod quantize;
mod serve;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "fak",
    version,
    about = "fak: an LLM inference engine for fleets of agents"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Show a GGUF file's metadata, hyperparameters and tensors.
    Inspect(inspect::InspectArgs),
    /// Tokenize text with a model's tokenizer.
    Tokenize(inspect::TokenizeArgs),
    /// Generate a continuation of a prompt.
    Generate(generate::GenerateArgs),
    /// Chat interactively, with the model's chat template applied.
    Chat(chat::ChatArgs),
    /// Requantize a model file: fak quantize IN OUT TYPE (f16, q8_0, q4_0, q4_1).
    Quantize(quantize::QuantizeArgs),
    /// Benchmarks: `fak bench model` measures single-stream prefill and decode.
    Bench(bench::BenchArgs),
    /// MODELED projections of fleet throughput from measured rates.
    Project(project::ProjectArgs),
    /// Serve the model over an OpenAI-compatible HTTP API.
    Serve(serve::ServeArgs),
}

/// Shared model-loading options.
#[derive(clap::Args, Clone)]
pub struct ModelArgs {
    /// Path to a GGUF model file.
    #[arg(long, short = 'm')]
    pub model: PathBuf,
    /// Worker threads (default: all cores).
    #[arg(long, short = 't')]
    pub threads: Option<usize>,
}

/// `--kv-type` values: the element type of the KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum KvTypeArg {
    /// f16 rows (the default, as llama.cpp's).
    #[default]
    F16,
    /// Q8_0 blocks: about half the memory of f16.
    #[value(name = "q8_0")]
    Q8_0,
}

impl From<KvTypeArg> for fak_model::KvType {
    fn from(a: KvTypeArg) -> fak_model::KvType {
        match a {
            KvTypeArg::F16 => fak_model::KvType::F16,
            KvTypeArg::Q8_0 => fak_model::KvType::Q8_0,
        }
    }
}

impl ModelArgs {
    /// Loads the model and its tokenizer.
    pub fn load(&self) -> anyhow::Result<(fak_model::Model, fak_tokenizer::Tokenizer)> {
        use anyhow::Context;
        let mut model = fak_model::Model::load(&self.model)
            .with_context(|| format!("loading {}", self.model.display()))?;
        if let Some(t) = self.threads {
            model.set_threads(t);
        }
        let tok = fak_tokenizer::Tokenizer::from_gguf(model.gguf())
            .with_context(|| format!("tokenizer of {}", self.model.display()))?;
        Ok((model, tok))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Inspect(a) => inspect::inspect(a),
        Cmd::Tokenize(a) => inspect::tokenize(a),
        Cmd::Generate(a) => generate::run(a),
        Cmd::Chat(a) => chat::run(a),
        Cmd::Quantize(a) => quantize::run(a),
        Cmd::Bench(a) => bench::run(a),
        Cmd::Project(a) => project::run(a),
        Cmd::Serve(a) => serve::run(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let msg = format!("{e:#}").replace('\n', " ");
            eprintln!("fak: error: {msg}");
            ExitCode::FAILURE
        }
    }
}
