//! The settings of `fak serve` ([`ServerConfig`], its defaults) and the
//! settings types it holds that several modules read: the model names a
//! request may use ([`ModelNames`], [`AnyModel`]) and the stored
//! responses' bounds ([`StoredLimits`]).
//!
//! They sit in this leaf module, below the engine thread and the shared
//! state that read them, and are re-exported from the crate root
//! (`fak_server::ServerConfig`, ...). `ServerConfig` and the default caps
//! lived in `lib.rs`, the model names in `state.rs`, the stored responses'
//! bounds in `stored.rs`.

use std::path::PathBuf;
use std::time::Duration;

use crate::kv_events::KvEventsConfig;

/// Default cap on a request body.
pub const DEFAULT_MAX_BODY_BYTES: usize = 8 << 20;

/// Default cap on sessions per API key.
pub const DEFAULT_MAX_SESSIONS: usize = 256;

/// Settings of `fak serve`.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// GGUF model file.
    pub model: PathBuf,
    /// Address to listen on.
    pub host: String,
    /// Port (0: any free port; the chosen one is printed).
    pub port: u16,
    /// Matmul threads (default: all cores).
    pub threads: Option<usize>,
    /// Context per sequence (default: the model's trained context).
    pub ctx: Option<usize>,
    /// KV cache memory in MiB (default: room for `max_running` full
    /// contexts, at most 4096 MiB).
    pub kv_mem_mib: Option<usize>,
    /// Accepted API keys; empty: no authentication. Each key is a tenant.
    pub api_keys: Vec<String>,
    /// Most requests waiting for admission before 429.
    pub max_waiting: usize,
    /// Most requests decoding at once.
    pub max_running: usize,
    /// The model name clients use (default: the file's stem).
    pub served_model_name: Option<String>,
    /// Other names a request may use for the model.
    pub model_aliases: Vec<String>,
    /// Whether a request may name any model (clients with fixed names).
    pub any_model: AnyModel,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Tokens per KV block.
    pub block_size: usize,
    /// Most tokens per forward pass.
    pub token_budget: usize,
    /// How a pass takes in waiting prompts.
    pub prefill: fak_engine::PrefillMix,
    /// Where constrained requests' token masks are computed.
    pub mask: fak_engine::MaskMode,
    /// Element type of the KV cache.
    pub kv_type: fak_model::KvType,
    /// Whether sliding-window layers (gemma3's local ones) keep the rows
    /// outside their window.
    pub kv_window: fak_engine::KvWindow,
    /// Where sessions are saved (restored at start); `None`: not saved.
    pub state_dir: Option<PathBuf>,
    /// Most sessions one API key may hold.
    pub max_sessions_per_tenant: usize,
    /// Idle sessions unused this long are freed; `None`: kept.
    pub session_ttl: Option<std::time::Duration>,
    /// How many stored responses (Responses API) are kept, how long.
    pub stored: StoredLimits,
    /// Whether decoding verifies drafted tokens (the output is the same).
    pub speculative: fak_engine::Speculative,
    /// A draft model (a GGUF of the same vocabulary) and how it drafts.
    pub draft_model: Option<PathBuf>,
    pub draft: fak_engine::DraftParams,
    /// Where the KV-cache events go (`--kv-events`); `None`: not published.
    pub kv_events: Option<KvEventsConfig>,
}

impl ServerConfig {
    /// Defaults for `model`.
    pub fn new(model: PathBuf) -> ServerConfig {
        ServerConfig {
            model,
            host: "127.0.0.1".into(),
            port: 8080,
            threads: None,
            ctx: None,
            kv_mem_mib: None,
            api_keys: Vec::new(),
            max_waiting: 256,
            max_running: 64,
            served_model_name: None,
            model_aliases: Vec::new(),
            any_model: AnyModel::Refuse,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            block_size: fak_engine::DEFAULT_BLOCK_SIZE,
            token_budget: fak_engine::DEFAULT_TOKEN_BUDGET,
            prefill: fak_engine::SERIAL_PREFILL,
            mask: fak_engine::MaskMode::default(),
            kv_type: fak_model::KvType::F16,
            kv_window: fak_engine::KvWindow::Drop,
            state_dir: None,
            max_sessions_per_tenant: DEFAULT_MAX_SESSIONS,
            session_ttl: None,
            stored: StoredLimits::default(),
            speculative: fak_engine::Speculative::Off,
            draft_model: None,
            draft: fak_engine::DraftParams::default(),
            kv_events: None,
        }
    }

    /// The served model name.
    pub fn model_name(&self) -> String {
        self.served_model_name.clone().unwrap_or_else(|| {
            self.model
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "fak".into())
        })
    }

    /// Every name a request may use.
    pub fn model_names(&self) -> ModelNames {
        ModelNames {
            primary: self.model_name(),
            aliases: self.model_aliases.clone(),
            any: self.any_model,
        }
    }
}

/// The names a request's `model` may use.
#[derive(Debug, Clone)]
pub struct ModelNames {
    /// The name `/v1/models` lists and answers carry by default.
    pub primary: String,
    /// Other names accepted for the same model.
    pub aliases: Vec<String>,
    /// Whether any name is accepted (`--accept-any-model`).
    pub any: AnyModel,
}

/// Whether a request may name any model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AnyModel {
    /// Only the served name and its aliases.
    #[default]
    Refuse,
    /// Any name is this server's model (clients with fixed model names).
    Accept,
}

/// Default cap on stored responses per API key.
pub const DEFAULT_MAX_STORED: usize = 256;

/// Default time an unused stored response is kept.
pub const DEFAULT_STORED_TTL: Duration = Duration::from_secs(3600);

/// How many responses are kept, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct StoredLimits {
    /// Most entries per API key.
    pub max_per_tenant: usize,
    /// Entries unused this long are dropped.
    pub ttl: Duration,
}

impl Default for StoredLimits {
    fn default() -> StoredLimits {
        StoredLimits {
            max_per_tenant: DEFAULT_MAX_STORED,
            ttl: DEFAULT_STORED_TTL,
        }
    }
}
