//! `fak`: inspect, tokenize, generate, chat, quantize and benchmark GGUF models,
//! and export their tokenizers.
//!
//! Every error is printed as one line on stderr with a non-zero exit (2
//! for a usage error, as clap's, 1 otherwise). Machine-readable output
//! (`--json`) goes to stdout; progress and timings go to stderr. A stdout
//! closed by its reader (`fak ... | head -1`) ends the command with exit 0.

#![forbid(unsafe_code)]

/// `println!` that hands back the write error instead of panicking on it
/// (Rust ignores SIGPIPE, so a closed pipe is an `EPIPE` error here; see
/// [`is_broken_pipe`]).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// `print!` that hands back the write error (see [`outln!`]).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut lock = std::io::stdout().lock();
        write!(lock, $($arg)*).and_then(|()| lock.flush())
    }};
}

mod bench;
mod chat;
#[cfg(feature = "cuda")]
mod cuda;
mod export_tokenizer;
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
    /// Write a Hugging Face tokenizer directory (tokenizer.json,
    /// tokenizer_config.json) that tokenizes exactly as the model does.
    ExportTokenizer(export_tokenizer::ExportTokenizerArgs),
    /// Generate a continuation of a prompt.
    Generate(generate::GenerateArgs),
    /// Chat interactively, with the model's chat template applied.
    Chat(chat::ChatArgs),
    /// Requantize a model file: fak quantize IN OUT TYPE (f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k_s/m/l, q4_k_s/m, q5_k_s/m, q6_k, iq4_nl, iq4_xs).
    Quantize(quantize::QuantizeArgs),
    /// Benchmarks: `fak bench model` measures single-stream prefill and decode.
    Bench(bench::BenchArgs),
    /// MODELED projections of fleet throughput from measured rates.
    Project(project::ProjectArgs),
    /// Serve the model over an OpenAI-compatible HTTP API.
    Serve(serve::ServeArgs),
    /// The CUDA backend: kernel and logits checks, speed runs.
    #[cfg(feature = "cuda")]
    Cuda(cuda::CudaArgs),
}

/// Shared model-loading options.
#[derive(clap::Args, Clone)]
pub struct ModelArgs {
    /// Path to a GGUF model file.
    #[arg(long, short = 'm')]
    pub model: PathBuf,
    /// Worker threads, 1..=1024 (default: all cores).
    #[arg(long, short = 't', value_parser = parse_threads)]
    pub threads: Option<usize>,
}

/// `--threads`: a count within `1..=`[`fak_kernels::pool::MAX_THREADS`].
pub fn parse_threads(s: &str) -> Result<usize, String> {
    let max = fak_kernels::pool::MAX_THREADS;
    match s.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("must be a whole number within 1..={max}")),
    }
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

/// The sampling flags of `fak generate` and `fak chat`.
#[derive(Debug, Clone, clap::Args)]
pub struct SampleArgs {
    /// Temperature within 0..=100; 0 means greedy.
    #[arg(long = "temp", default_value_t = 0.0, allow_negative_numbers = true)]
    pub temperature: f32,
    /// Top-k filter (0 = off).
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    /// Top-p filter within (0, 1] (1.0 = off).
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true)]
    pub top_p: f32,
    /// RNG seed for sampling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl SampleArgs {
    /// The sampler settings (checked later by `SamplingParams::validate`).
    pub fn params(&self) -> fak_engine::SamplingParams {
        fak_engine::SamplingParams {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            seed: self.seed,
            ..fak_engine::SamplingParams::greedy()
        }
    }
}

/// A draft model for `--speculative draft|auto`.
#[derive(Debug, Clone, clap::Args)]
pub struct DraftArgs {
    /// A smaller GGUF of the same vocabulary that drafts tokens for the
    /// model to verify (`--speculative draft`, or `auto`). A vocabulary
    /// that differs is refused at load.
    #[arg(long)]
    pub draft_model: Option<PathBuf>,
    /// Most tokens the draft model drafts per sequence per step.
    #[arg(long, default_value_t = fak_engine::DraftParams::default().max_draft)]
    pub draft_max: usize,
    /// The draft model stops at a token it gives less than this
    /// probability.
    #[arg(long, default_value_t = fak_engine::DraftParams::default().p_min)]
    pub draft_p_min: f32,
}

impl DraftArgs {
    /// The draft settings, checked against `--speculative`.
    pub fn params(&self, spec: SpeculativeArg) -> anyhow::Result<fak_engine::DraftParams> {
        match (spec, &self.draft_model) {
            (SpeculativeArg::Draft, None) => {
                anyhow::bail!("--speculative draft needs --draft-model")
            }
            (SpeculativeArg::Off | SpeculativeArg::Lookup, Some(_)) => {
                anyhow::bail!("--draft-model drafts only with --speculative draft or auto")
            }
            _ => {}
        }
        if let Some(p) = &self.draft_model {
            if !p.exists() {
                anyhow::bail!("--draft-model {}: no such file", p.display());
            }
        }
        if self.draft_max == 0 {
            anyhow::bail!("--draft-max must be at least 1");
        }
        if !(0.0..=1.0).contains(&self.draft_p_min) {
            anyhow::bail!("--draft-p-min must be within 0..=1");
        }
        Ok(fak_engine::DraftParams {
            max_draft: self.draft_max,
            p_min: self.draft_p_min,
        })
    }
}

/// `--speculative` values: whether decoding verifies drafted tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SpeculativeArg {
    /// Plain decoding (the default).
    #[default]
    Off,
    /// Drafts from the sequence's own context (prompt lookup), the
    /// tenant's recent outputs and what a request's grammar forces; the
    /// output is the same as plain decoding's, token for token.
    Lookup,
    /// Lookup drafts where they pay: each sequence drafts the length that
    /// makes its pass the most tokens per second, by the decode passes'
    /// measured times and the sequence's acceptance, then the draft model's (with
    /// --draft-model) where they pay; grammar drafts always (the same
    /// output again).
    Auto,
    /// The draft model's drafts (--draft-model), and what a request's
    /// grammar forces (the same output again).
    Draft,
}

impl From<SpeculativeArg> for fak_engine::Speculative {
    fn from(a: SpeculativeArg) -> fak_engine::Speculative {
        match a {
            SpeculativeArg::Off => fak_engine::Speculative::Off,
            SpeculativeArg::Lookup => {
                fak_engine::Speculative::Lookup(fak_engine::LookupParams::default())
            }
            SpeculativeArg::Auto => {
                fak_engine::Speculative::Auto(fak_engine::LookupParams::default())
            }
            SpeculativeArg::Draft => fak_engine::Speculative::Draft,
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
            model
                .set_threads(t)
                .with_context(|| format!("--threads {t}"))?;
        }
        let tok = fak_tokenizer::Tokenizer::from_gguf(model.gguf())
            .with_context(|| format!("tokenizer of {}", self.model.display()))?;
        Ok((model, tok))
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    let r = match cli.cmd {
        Cmd::Inspect(a) => inspect::inspect(a),
        Cmd::Tokenize(a) => inspect::tokenize(a),
        Cmd::ExportTokenizer(a) => export_tokenizer::run(a),
        Cmd::Generate(a) => generate::run(a),
        Cmd::Chat(a) => chat::run(a),
        Cmd::Quantize(a) => quantize::run(a),
        Cmd::Bench(a) => bench::run(a),
        Cmd::Project(a) => project::run(a),
        Cmd::Serve(a) => serve::run(a),
        #[cfg(feature = "cuda")]
        Cmd::Cuda(a) => cuda::run(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fak: error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

/// `e` and its causes on one line, each after a colon, as `{e:#}` prints
/// them, except that a cause whose text the line already ends with is not
/// repeated (an error that both shows its source in its message and
/// returns it from `source()`, as `GgufError::Io` does, would otherwise
/// print the OS error twice).
fn one_line(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if msg.ends_with(&text) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&text);
    }
    msg.replace('\n', " ")
}

/// Whether `e` comes from writing to a pipe whose reader has gone (`fak
/// generate ... | head -1`): the reader has what it wanted, so this is a
/// normal end.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Handles a clap error: `--help` and `--version` print as usual (exit 0);
/// a usage error prints one line, the first paragraph of clap's message
/// plus a hint, and exits 2.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        return match e.print() {
            Ok(()) => ExitCode::SUCCESS,
            Err(io) if io.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        };
    }
    let command = command_path();
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        eprintln!("fak: error: a subcommand is required (see '{command} --help')");
        return ExitCode::from(2);
    }
    let text = e.render().to_string();
    let first: Vec<&str> = text
        .lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty())
        .collect();
    let first = first.join(" ");
    let first = first.strip_prefix("error: ").unwrap_or(&first);
    eprintln!("fak: error: {first} (see '{command} --help')");
    ExitCode::from(2)
}

/// The (sub)command the arguments name, as far as they name one: `fak
/// bench evict`, or `fak`.
fn command_path() -> String {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut path = vec!["fak".to_string()];
    for arg in std::env::args().skip(1) {
        let Some(sub) = cmd.find_subcommand(&arg).cloned() else {
            break;
        };
        path.push(arg);
        cmd = sub;
    }
    path.join(" ")
}
