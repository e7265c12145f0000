//! `fak serve`: the OpenAI-compatible HTTP server (fak-server).

use std::path::PathBuf;

use anyhow::{bail, Context};

use crate::bench::{KvWindowArg, MaskModeArg};
use crate::KvTypeArg;

/// `--prefill` values (fak_engine::PrefillMix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PrefillArg {
    /// One prompt per pass, oldest first (prompts under 16 tokens share):
    /// a burst's first tokens come one prompt apart, not all at its end.
    Serial,
    /// Prompts fill the token budget: the fewest passes.
    Fill,
}

impl From<PrefillArg> for fak_engine::PrefillMix {
    fn from(a: PrefillArg) -> fak_engine::PrefillMix {
        match a {
            PrefillArg::Serial => fak_engine::SERIAL_PREFILL,
            PrefillArg::Fill => fak_engine::PrefillMix::Fill,
        }
    }
}

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Path to a GGUF model file.
    #[arg(long, short = 'm')]
    model: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port (0 picks a free one; the address is printed on stderr).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Worker threads of the forward pass (default: all cores).
    #[arg(long, short = 't')]
    threads: Option<usize>,
    /// Context per sequence in tokens (default: the model's trained context).
    #[arg(long)]
    ctx: Option<usize>,
    /// KV cache memory in MiB (default: room for --max-running full contexts, at most 4096).
    #[arg(long)]
    kv_mem: Option<usize>,
    /// API keys, comma-separated; each key is its own tenant.
    #[arg(long, value_delimiter = ',', conflicts_with = "api_key_file")]
    api_key: Vec<String>,
    /// File with one API key per line.
    #[arg(long)]
    api_key_file: Option<PathBuf>,
    /// Most requests waiting for KV blocks before new ones get 429.
    #[arg(long, default_value_t = 256)]
    max_waiting: usize,
    /// Most requests running at once.
    #[arg(long, default_value_t = 64)]
    max_running: usize,
    /// Model name clients send and /v1/models lists (default: the file's
    /// stem); more names after commas are aliases a request may use too.
    #[arg(long, value_delimiter = ',')]
    served_model_name: Vec<String>,
    /// Answer a request whatever model it names (Claude Code and other
    /// clients that send their own model names).
    #[arg(long)]
    accept_any_model: bool,
    /// Largest request body in bytes.
    #[arg(long, default_value_t = fak_server::DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
    /// Element type of the KV cache.
    #[arg(long, value_enum, default_value_t = KvTypeArg::F16)]
    kv_type: KvTypeArg,
    /// Speculative decoding: `lookup` verifies tokens drafted from each
    /// sequence's own context, several per pass; every output is the same.
    #[arg(long, value_enum, default_value_t = crate::SpeculativeArg::Off)]
    speculative: crate::SpeculativeArg,
    #[command(flatten)]
    draft: crate::DraftArgs,
    /// Sliding-window layers' rows (gemma3's local layers): drop the blocks
    /// outside the window, or keep every row (more memory; the same
    /// results). Models without windows are unaffected.
    #[arg(long, value_enum, default_value_t = KvWindowArg::Drop)]
    kv_window: KvWindowArg,
    /// Tokens per KV block (the unit of allocation and copy-on-write).
    #[arg(long, default_value_t = fak_engine::DEFAULT_BLOCK_SIZE)]
    block_size: usize,
    /// Most tokens in one forward pass (decode tokens, then prefill chunks).
    #[arg(long, default_value_t = fak_engine::DEFAULT_TOKEN_BUDGET)]
    token_budget: usize,
    /// How a pass takes in waiting prompts.
    #[arg(long, value_enum, default_value_t = PrefillArg::Serial)]
    prefill: PrefillArg,
    /// Where constrained requests' token masks are computed (same tokens
    /// either way; docs/SERVING.md, "Masks off the critical path").
    #[arg(long, value_enum, default_value_t = MaskModeArg::CheckFirst)]
    mask_mode: MaskModeArg,
    /// Directory where sessions are saved (at each turn and on SIGTERM) and restored from at start.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Most sessions one API key may hold (POST /v1/sessions and forks beyond it get 429).
    #[arg(long, default_value_t = fak_server::DEFAULT_MAX_SESSIONS)]
    max_sessions: usize,
    /// Seconds an idle session is kept before it is freed (default: kept until deleted).
    #[arg(long)]
    session_ttl: Option<u64>,
    /// Most stored responses (Responses API, `store: true`) per API key;
    /// past it the least recently used is dropped.
    #[arg(long, default_value_t = fak_server::DEFAULT_MAX_STORED)]
    max_stored_responses: usize,
    /// Seconds an unused stored response is kept.
    #[arg(long, default_value_t = fak_server::DEFAULT_STORED_TTL.as_secs())]
    response_ttl: u64,
    /// Publish KV-cache events (vLLM's format: BlockStored, BlockRemoved,
    /// AllBlocksCleared) on this ZMQ endpoint, for a KV-aware router such
    /// as vllm-router's `kv_aware` policy (`tcp://*:5557`). They carry
    /// every cached prompt's tokens: bind where only the router reaches.
    #[arg(long, value_name = "ENDPOINT")]
    kv_events: Option<String>,
    /// Answer replay requests (a subscriber that missed batches asks for
    /// them from a sequence number) on this ZMQ endpoint (`tcp://*:5558`).
    #[arg(long, value_name = "ENDPOINT", requires = "kv_events")]
    kv_events_replay: Option<String>,
}

pub fn run(a: ServeArgs) -> anyhow::Result<()> {
    if a.threads == Some(0) {
        bail!("--threads must be at least 1");
    }
    if a.max_running == 0 {
        bail!("--max-running must be at least 1");
    }
    if a.block_size == 0 || a.block_size > 4096 {
        bail!("--block-size must be within 1..=4096, got {}", a.block_size);
    }
    if a.token_budget == 0 {
        bail!("--token-budget must be at least 1");
    }
    if a.max_sessions == 0 {
        bail!("--max-sessions must be at least 1");
    }
    if a.response_ttl == 0 {
        bail!("--response-ttl must be at least 1 second");
    }
    if a.session_ttl == Some(0) {
        bail!("--session-ttl must be at least 1 second");
    }
    let mut keys: Vec<String> = a.api_key.iter().map(|k| k.trim().to_string()).collect();
    if let Some(f) = &a.api_key_file {
        let text = std::fs::read_to_string(f)
            .with_context(|| format!("reading API key file {}", f.display()))?;
        keys.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(String::from),
        );
        if keys.is_empty() {
            bail!("{} holds no API key", f.display());
        }
    }
    if keys.iter().any(String::is_empty) {
        bail!("--api-key: a key is empty");
    }
    if !a.model.exists() {
        bail!("{}: no such file", a.model.display());
    }
    let names: Vec<String> = a
        .served_model_name
        .iter()
        .map(|n| n.trim().to_string())
        .collect();
    if names.iter().any(String::is_empty) {
        bail!("--served-model-name: a name is empty");
    }
    let draft = a.draft.params(a.speculative)?;
    let cfg = fak_server::ServerConfig {
        draft_model: a.draft.draft_model,
        draft,
        host: a.host,
        port: a.port,
        threads: a.threads,
        ctx: a.ctx,
        kv_mem_mib: a.kv_mem,
        api_keys: keys,
        max_waiting: a.max_waiting,
        max_running: a.max_running,
        served_model_name: names.first().cloned(),
        model_aliases: names.iter().skip(1).cloned().collect(),
        any_model: if a.accept_any_model {
            fak_server::AnyModel::Accept
        } else {
            fak_server::AnyModel::Refuse
        },
        max_body_bytes: a.max_body_bytes,
        kv_type: a.kv_type.into(),
        speculative: a.speculative.into(),
        kv_window: a.kv_window.into(),
        block_size: a.block_size,
        token_budget: a.token_budget,
        prefill: a.prefill.into(),
        mask: a.mask_mode.into(),
        state_dir: a.state_dir,
        max_sessions_per_tenant: a.max_sessions,
        session_ttl: a.session_ttl.map(std::time::Duration::from_secs),
        stored: fak_server::StoredLimits {
            max_per_tenant: a.max_stored_responses,
            ttl: std::time::Duration::from_secs(a.response_ttl),
        },
        kv_events: a.kv_events.map(|endpoint| fak_server::KvEventsConfig {
            endpoint,
            replay: a.kv_events_replay,
        }),
        ..fak_server::ServerConfig::new(a.model)
    };
    fak_server::run(cfg)?;
    Ok(())
}
