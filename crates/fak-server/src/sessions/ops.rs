//! What the session endpoints share: the engine's answers about a session
//! ([`state_of`], [`new_id`]), appending tokens without generating
//! ([`append`], [`append_to`], [`create_holding`]), writing a session's
//! file ([`persist`]), and turning a prompt or messages into tokens and
//! stored messages ([`prompt_ids`], [`checked_messages`], [`stored`]).
//!
//! ```text
//!   handlers.rs (create, fork, ...) ─┐
//!   generate.rs, evict.rs ───────────┼─► ops.rs ─► EngineHandle (SessionOp, submit)
//!   lifecycle.rs ────────────────────┘         └─► Store (the session's file)
//! ```
//!
//! These lived in `handlers.rs`; they sit here, below every endpoint, so
//! the endpoints import them and `handlers.rs` only adds the routes.

use std::time::Instant;

use fak_engine::{Context, Event, MaxTokens, Request, SamplingParams, SessionId, StopRules, Usage};
use fak_kv::Tenant;
use fak_tokenizer::{AddSpecial, EncodeOptions, ToolMessage};

use crate::api::{self, Prompt};
use crate::engine_thread::{Loaded, SessionOp, SessionReply, SessionState};
use crate::error::ApiError;
use crate::registry::{Owner, PublicId, Record, StoredMessage};
use crate::state::AppState;

pub(super) fn tenant(o: Owner) -> Tenant {
    Tenant(o.0)
}

pub async fn state_of(st: &AppState, id: SessionId) -> Result<SessionState, ApiError> {
    match st.engine().session(SessionOp::Info(id)).await? {
        SessionReply::Info(s) => Ok(s),
        r => Err(ApiError::internal(format!("unexpected engine reply {r:?}"))),
    }
}

pub(super) async fn new_id(st: &AppState, op: SessionOp) -> Result<SessionId, ApiError> {
    match st.engine().session(op).await? {
        SessionReply::Id(s) => Ok(s),
        r => Err(ApiError::internal(format!("unexpected engine reply {r:?}"))),
    }
}

/// Writes the session's file, when the server has a state directory.
pub(super) fn persist(st: &AppState, id: PublicId, r: &Record, tokens: &[u32]) {
    if let Some(store) = st.store() {
        if let Err(e) = store.write(id, r, tokens) {
            eprintln!("fak serve: state: cannot save session {id}: {e}");
        }
    }
}

/// Appends `tokens` to a session without generating; the usage.
pub(super) async fn append(
    st: &AppState,
    owner: Owner,
    id: SessionId,
    tokens: Vec<u32>,
) -> Result<Usage, ApiError> {
    let req = Request {
        prompt: tokens,
        sampling: SamplingParams::greedy(),
        max_tokens: MaxTokens::Strict(0),
        stop: StopRules::default(),
        logprobs: fak_engine::Logprobs::Off,
        tenant: tenant(owner),
        context: Context::Session(id),
        constraint: None,
        speculation: Default::default(),
    };
    let (_, mut rx) = st.engine().submit(req, Instant::now()).await?;
    while let Some(ev) = rx.recv().await {
        match ev {
            Event::Finished { usage, .. } => return Ok(usage),
            Event::Failed { error, .. } => return Err(error.into()),
            _ => {}
        }
    }
    Err(ApiError::unavailable("the engine stopped"))
}

/// Appends `tokens` to the idle engine session `id` of `tenant`, without
/// generating.
///
/// # Errors
///
/// The engine's refusal.
pub async fn append_to(
    st: &AppState,
    tenant: Tenant,
    id: SessionId,
    tokens: Vec<u32>,
) -> Result<(), ApiError> {
    append(st, Owner(tenant.0), id, tokens).await.map(|_| ())
}

/// A new engine session in `tenant` holding `tokens` (their KV found in
/// the prefix cache where it is there, computed where not), its full
/// blocks offered to the prefix cache. Freed again if any step fails.
///
/// # Errors
///
/// The engine's refusal (a pool too small, a queue full).
pub async fn create_holding(
    st: &AppState,
    tenant: Tenant,
    tokens: Vec<u32>,
) -> Result<SessionId, ApiError> {
    let eid = new_id(st, SessionOp::Create(tenant)).await?;
    let made = async {
        append(st, Owner(tenant.0), eid, tokens).await?;
        st.engine().session(SessionOp::Publish(eid)).await?;
        Ok::<_, ApiError>(())
    }
    .await;
    if let Err(e) = made {
        let _ = st.engine().session(SessionOp::Free(eid)).await;
        return Err(e);
    }
    Ok(eid)
}

fn encode(l: &Loaded, text: &str, first: bool) -> Vec<u32> {
    let add = if first {
        AddSpecial::FromMetadata
    } else {
        AddSpecial::Never
    };
    l.tok.encode(
        text,
        EncodeOptions {
            add,
            ..Default::default()
        },
    )
}

pub(super) fn prompt_ids(l: &Loaded, p: Option<Prompt>, first: bool) -> Result<Vec<u32>, ApiError> {
    Ok(match p {
        None => Vec::new(),
        Some(Prompt::Text(t)) => encode(l, &t, first),
        Some(Prompt::Ids(ids)) => ids,
        Some(Prompt::Texts(mut v)) if v.len() == 1 => encode(l, &v.remove(0), first),
        Some(Prompt::IdLists(mut v)) if v.len() == 1 => v.remove(0),
        Some(_) => {
            return Err(ApiError::bad_param(
                "prompt",
                "give one prompt (a string or a list of token ids)",
            ))
        }
    })
}

pub(super) fn checked_messages(msgs: &[api::Message]) -> Result<Vec<ToolMessage>, ApiError> {
    msgs.iter().enumerate().map(|(i, m)| m.checked(i)).collect()
}

pub(super) fn stored(m: &ToolMessage) -> StoredMessage {
    StoredMessage::new(m)
}
