//! The session endpoints under `/v1/sessions`, scoped to the API key.
//!
//! ```text
//!   POST   /v1/sessions                          create: prefix computed once (or cached)
//!   POST   /v1/sessions/{id}/fork                copy-on-write, no compute
//!   POST   /v1/sessions/{id}/chat/completions    new messages → reply, appended
//!   POST   /v1/sessions/{id}/completions         raw append (+ generate)
//!   POST   /v1/sessions/{id}/evict               exact (default) or shift
//!   GET    /v1/sessions[/{id}]                   list / detail with lineage
//!   DELETE /v1/sessions/{id}                     204
//!   a turn: claim (409 if busy) → submit → forward events to the response;
//!           at the end: tokens from the engine, lineage, persist, release
//! ```

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use fak_engine::{
    Context, Event, EvictMode, FinishReason, Request, Residency, SamplingParams, SessionId,
    StopRules, Usage,
};
use fak_kv::Tenant;
use fak_tokenizer::{AddSpecial, EncodeOptions, ToolMessage};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::lineage::{self, Evicted, Origin};
use super::turn::{chat_delta, close_after};
use super::{not_found, unix_now, Claim, Owner, PublicId, Record, StoredMessage};
use crate::api::{self, ChatRequest, Common, Prompt};
use crate::engine_thread::{Loaded, SessionOp, SessionReply, SessionState};
use crate::error::ApiError;
use crate::handlers::respond;
use crate::reply::{Kind, Shape, ToolReply};
use crate::state::{AppState, Caller, RawBody};
use crate::tools;

/// The session routes (behind the API-key check).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions", post(create).get(list))
        .route("/v1/sessions/{id}", axum::routing::get(info).delete(delete))
        .route("/v1/sessions/{id}/fork", post(fork))
        .route("/v1/sessions/{id}/chat/completions", post(chat))
        .route("/v1/sessions/{id}/completions", post(completions))
        .route("/v1/sessions/{id}/evict", post(evict))
}

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
async fn append(
    st: &AppState,
    owner: Owner,
    id: SessionId,
    tokens: Vec<u32>,
) -> Result<Usage, ApiError> {
    let req = Request {
        prompt: tokens,
        sampling: SamplingParams::greedy(),
        max_tokens: 0,
        stop: StopRules::default(),
        logprobs: fak_engine::Logprobs::Off,
        tenant: tenant(owner),
        context: Context::Session(id),
        constraint: None,
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

fn prompt_ids(l: &Loaded, p: Option<Prompt>, first: bool) -> Result<Vec<u32>, ApiError> {
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

fn checked_messages(msgs: &[api::Message]) -> Result<Vec<ToolMessage>, ApiError> {
    msgs.iter().enumerate().map(|(i, m)| m.checked(i)).collect()
}

fn stored(m: &ToolMessage) -> StoredMessage {
    StoredMessage::new(m)
}

#[derive(Deserialize)]
struct CreateBody {
    messages: Option<Vec<api::Message>>,
    prompt: Option<Prompt>,
    /// Tools rendered into the conversation from its first message on.
    tools: Option<Value>,
}

async fn create(c: Caller, RawBody(body): RawBody) -> Result<Response, ApiError> {
    let Caller {
        st, loaded: l, key, ..
    } = c;
    let b: CreateBody = api::parse(&body)?;
    let owner = Owner(key.0);
    let max = st.limits().max_per_tenant;
    if st.sessions().count(owner) >= max {
        return Err(super::limit_error(max));
    }
    // The engine session comes after the body is checked.
    let placeholder = SessionId {
        slot: u32::MAX,
        generation: 0,
    };
    let mut rec = Record::new(owner, placeholder, None);
    rec.tools = tools::parse(b.tools.as_ref(), None, None, l.template.as_deref())?.map(|t| t.defs);
    let pieces: Vec<(Vec<u32>, Origin)> = match (b.messages, b.prompt) {
        (Some(m), None) if !m.is_empty() => {
            let msgs = checked_messages(&m)?;
            api::check_tool_answers(&[], &msgs)?;
            let d = chat_delta(&l, &rec, &msgs, rec.tools.as_deref(), false)?;
            rec.messages = msgs.iter().map(stored).collect();
            d.pieces
        }
        (None, Some(p)) if rec.tools.is_none() => {
            vec![(prompt_ids(&l, Some(p), true)?, Origin::Prefix)]
        }
        _ => {
            return Err(ApiError::bad_request(
                "give either messages (a non-empty list, with tools if any) or prompt \
                 (text or token ids, without tools)",
            ))
        }
    };
    let tokens: Vec<u32> = pieces.iter().flat_map(|(t, _)| t.clone()).collect();
    if tokens.is_empty() {
        return Err(ApiError::bad_param(
            "prompt",
            "the session's prefix is empty",
        ));
    }
    let eid = new_id(&st, SessionOp::Create(tenant(owner))).await?;
    let made = async {
        let usage = append(&st, owner, eid, tokens).await?;
        st.engine().session(SessionOp::Publish(eid)).await?;
        let s = state_of(&st, eid).await?;
        Ok::<_, ApiError>((usage, s))
    }
    .await;
    let (usage, s) = match made {
        Ok(x) => x,
        Err(e) => {
            let _ = st.engine().session(SessionOp::Free(eid)).await;
            return Err(e);
        }
    };
    rec.engine = eid;
    for (t, o) in pieces {
        lineage::push(&mut rec.lineage, t.len(), o);
    }
    let all = s.tokens();
    rec.tokens = all.len();
    let id = PublicId::random();
    persist(&st, id, &rec, &all);
    if let Err(e) = st.sessions().insert(id, rec, max) {
        let _ = st.engine().session(SessionOp::Free(eid)).await;
        if let Some(store) = st.store() {
            store.remove(id);
        }
        return Err(e);
    }
    Ok(Json(json!({
        "id": id,
        "object": "session",
        "tokens": all.len(),
        "cached_tokens": usage.cached_tokens,
    }))
    .into_response())
}

/// `POST /v1/sessions/{id}/fork`: `{}` or no body. The body is read (and
/// checked) before the reply: a reply sent over an unread body made the
/// server close a keep-alive connection that its client then wrote its
/// next request into (a broken pipe, found by bench/fleet_http.py).
async fn fork(
    c: Caller,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let Caller { st, key, .. } = c;
    if !body.iter().all(u8::is_ascii_whitespace) {
        let v: Value = api::parse(&body)?;
        if v.as_object().is_none_or(|o| !o.is_empty()) {
            return Err(ApiError::bad_request(
                "a fork takes no parameters: send {} or no body",
            ));
        }
    }
    let owner = Owner(key.0);
    let claim = st.sessions().claim(owner, &id)?;
    let max = st.limits().max_per_tenant;
    if st.sessions().count(owner) >= max {
        return Err(super::limit_error(max));
    }
    let eid = new_id(&st, SessionOp::Fork(claim.engine)).await?;
    let src = &claim.record;
    let mut rec = Record {
        lineage: lineage::forked(&src.lineage, claim.id, src.tokens),
        parent: Some(claim.id),
        state: super::Use::Idle,
        ..Record::new(owner, eid, Some(claim.id))
    };
    rec.tokens = src.tokens;
    rec.messages = src.messages.clone();
    rec.evicted = src.evicted.clone();
    rec.close = src.close.clone();
    rec.appends = src.appends;
    let s = state_of(&st, eid).await?;
    let new = PublicId::random();
    persist(&st, new, &rec, &s.tokens());
    let n = rec.tokens;
    if let Err(e) = st.sessions().insert(new, rec, max) {
        let _ = st.engine().session(SessionOp::Free(eid)).await;
        if let Some(store) = st.store() {
            store.remove(new);
        }
        return Err(e);
    }
    Ok(
        Json(json!({"id": new, "object": "session", "tokens": n, "parent": claim.id}))
            .into_response(),
    )
}

/// What a turn adds to the session's records when it ends.
enum Plan {
    Chat {
        pieces: Vec<(usize, Origin)>,
        new: Vec<StoredMessage>,
        conversation: Vec<ToolMessage>,
        /// The session's tools after this turn.
        tools: Option<Vec<Value>>,
        /// How the reply's calls are read.
        reply: Option<ToolReply>,
    },
    Raw {
        n: usize,
    },
}

async fn chat(
    c: Caller,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let Caller {
        st,
        loaded: l,
        key,
        arrived,
        ..
    } = c;
    let r: ChatRequest = api::parse(&body)?;
    st.names().resolve(r.common.model.as_deref())?;
    if r.messages.is_empty() {
        return Err(ApiError::bad_param(
            "messages",
            "give the new messages (messages must not be empty)",
        ));
    }
    let msgs = checked_messages(&r.messages)?;
    let logprobs = api::chat_logprobs(r.logprobs, r.top_logprobs)?;
    let claim = st.sessions().claim(Owner(key.0), &id)?;
    let rec = &claim.record;
    api::check_tool_answers(&super::turn::live_messages(rec), &msgs)?;
    let session_tools = super::turn::session_tools(r.tools.as_ref(), rec)?;
    let tools = tools::parse(
        session_tools.as_ref(),
        r.tool_choice.as_ref(),
        r.parallel_tool_calls,
        l.template.as_deref(),
    )?;
    let defs = tools.as_ref().map(|t| t.defs.clone());
    let d = chat_delta(&l, rec, &msgs, defs.as_deref(), true)?;
    let prompt = d.tokens();
    let reply = tools::reply(tools.as_ref());
    let plan = Plan::Chat {
        pieces: d.pieces.iter().map(|(t, o)| (t.len(), o.clone())).collect(),
        new: msgs.iter().map(stored).collect(),
        conversation: d.conversation,
        tools: defs,
        reply: reply.clone(),
    };
    let mut req = request(&l, &claim, &r.common, prompt, logprobs, None)?;
    tools::constrain(&mut req, tools.as_ref())?;
    let (_, rx) = st
        .engine()
        .submit(req, arrived)
        .await
        .map_err(|e| tools::submit_error(e, tools.as_ref()))?;
    turn(&st, l, claim, rx, Kind::Chat, &r.common, plan, reply).await
}

#[derive(Deserialize)]
struct SessionCompletion {
    prompt: Option<Prompt>,
    logprobs: Option<i64>,
    #[serde(flatten)]
    common: Common,
}

async fn completions(
    c: Caller,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let Caller {
        st,
        loaded: l,
        key,
        arrived,
        ..
    } = c;
    let mut r: SessionCompletion = api::parse(&body)?;
    st.names().resolve(r.common.model.as_deref())?;
    let logprobs = api::completion_logprobs(r.logprobs)?;
    // max_tokens 0 appends without generating (sessions only).
    let zero = r.common.max_tokens == Some(0) && r.common.max_completion_tokens.is_none();
    if zero {
        r.common.max_tokens = None;
    }
    let claim = st.sessions().claim(Owner(key.0), &id)?;
    let prompt = prompt_ids(&l, r.prompt.take(), claim.record.tokens == 0)?;
    if prompt.is_empty() && !zero && state_of(&st, claim.engine).await?.unfed.is_none() {
        return Err(ApiError::bad_param(
            "prompt",
            "give a prompt: every token of this session is in its KV already, and the \
             engine keeps no logits between requests (a session can continue without a \
             prompt only right after a turn that generated)",
        ));
    }
    let plan = Plan::Raw { n: prompt.len() };
    let req = request(&l, &claim, &r.common, prompt, logprobs, zero.then_some(0))?;
    let (_, rx) = st.engine().submit(req, arrived).await?;
    turn(&st, l, claim, rx, Kind::Completion, &r.common, plan, None).await
}

fn request(
    l: &Loaded,
    claim: &Claim,
    c: &Common,
    prompt: Vec<u32>,
    logprobs: fak_engine::Logprobs,
    max_tokens: Option<usize>,
) -> Result<Request, ApiError> {
    c.check_n()?;
    let max_tokens = match max_tokens {
        Some(n) => n,
        None => match c.max_tokens()? {
            Some(n) => n,
            None => {
                let pool = l.n_blocks.saturating_sub(1) * l.block_size;
                l.n_ctx
                    .min(pool)
                    .saturating_sub(claim.record.tokens + prompt.len())
                    .max(1)
            }
        },
    };
    Ok(Request {
        prompt,
        sampling: c.sampling()?,
        max_tokens,
        stop: c.stop_rules()?,
        logprobs,
        tenant: tenant(claim.record.owner),
        context: Context::Session(claim.engine),
        constraint: c.constraint()?,
    })
}

#[allow(clippy::too_many_arguments)]
async fn turn(
    st: &AppState,
    l: Loaded,
    claim: Claim,
    rx: mpsc::UnboundedReceiver<Event>,
    kind: Kind,
    c: &Common,
    plan: Plan,
    tools: Option<ToolReply>,
) -> Result<Response, ApiError> {
    let (tx, out) = mpsc::unbounded_channel();
    let slot = Arc::new(OnceLock::new());
    let shape = Shape {
        kind,
        stream: c.stream,
        include_usage: c.include_usage(),
        model: st.name().to_string(),
        session: Some(slot.clone()),
        tools,
    };
    tokio::spawn(forward(st.clone(), l.clone(), claim, plan, rx, tx, slot));
    respond(&l, shape, out).await
}

/// Passes a turn's events on; before the last one, records what the turn
/// did to the session. A closed response (client gone) stops it, which
/// drops `rx` and so cancels the request (the session is rolled back).
async fn forward(
    st: AppState,
    l: Loaded,
    claim: Claim,
    plan: Plan,
    mut rx: mpsc::UnboundedReceiver<Event>,
    tx: mpsc::UnboundedSender<Event>,
    slot: Arc<OnceLock<Value>>,
) {
    let mut reply = String::new();
    while let Some(ev) = rx.recv().await {
        let last = match &ev {
            Event::Token { text, .. } => {
                reply.push_str(text);
                false
            }
            Event::Finished { reason, text, .. } => {
                reply.push_str(text);
                if *reason != FinishReason::Cancelled {
                    match settle(&st, &l, &claim, &plan, &reply, *reason).await {
                        Ok(v) => {
                            let _ = slot.set(v);
                        }
                        Err(e) => eprintln!("fak serve: session {}: {}", claim.id, e.message),
                    }
                }
                true
            }
            Event::Failed { .. } => true,
            Event::Admitted { .. } => false,
        };
        if tx.send(ev).is_err() || last {
            break;
        }
    }
    drop(claim);
}

/// Updates the record after a finished turn and saves it.
async fn settle(
    st: &AppState,
    l: &Loaded,
    claim: &Claim,
    plan: &Plan,
    reply: &str,
    reason: FinishReason,
) -> Result<Value, ApiError> {
    let s = state_of(st, claim.engine).await?;
    let all = s.tokens();
    let before = claim.record.tokens;
    let rec = claim.update(|r| {
        let fed: usize = match plan {
            Plan::Chat { pieces, .. } => pieces.iter().map(|(n, _)| n).sum(),
            Plan::Raw { n } => *n,
        };
        let generated = all.len().saturating_sub(before + fed);
        match plan {
            Plan::Chat {
                pieces,
                new,
                conversation,
                tools,
                reply: how,
            } => {
                for (n, o) in pieces {
                    lineage::push(&mut r.lineage, *n, o.clone());
                }
                let k = r.messages.len() + new.len();
                lineage::push(
                    &mut r.lineage,
                    generated,
                    Origin::Generated { message: Some(k) },
                );
                r.messages.extend(new.iter().cloned());
                let answer = match how {
                    Some(t) => {
                        let (content, calls) = t.read(reply);
                        let calls = tools::template_calls(t.base, &calls);
                        ToolMessage {
                            role: "assistant".into(),
                            content,
                            tool_calls: (!calls.is_empty()).then_some(calls),
                            tool_call_id: None,
                        }
                    }
                    None => ToolMessage {
                        role: "assistant".into(),
                        content: reply.to_string(),
                        ..ToolMessage::default()
                    },
                };
                r.messages.push(StoredMessage::new(&answer));
                r.tools = tools.clone();
                let eog = (reason == FinishReason::EndOfGeneration)
                    .then_some(s.unfed)
                    .flatten();
                r.close = close_after(l, conversation, tools.as_deref(), answer, reply, eog)
                    .map(|c| (c, k));
            }
            Plan::Raw { n } => {
                if *n > 0 {
                    lineage::push(&mut r.lineage, *n, Origin::Appended { k: r.appends });
                    r.appends += 1;
                }
                lineage::push(
                    &mut r.lineage,
                    generated,
                    Origin::Generated { message: None },
                );
            }
        }
        r.tokens = all.len();
    });
    if let Some(rec) = &rec {
        persist(st, claim.id, rec, &all);
    }
    Ok(json!({"id": claim.id, "tokens": all.len()}))
}

#[derive(Deserialize)]
struct EvictBody {
    span: Option<(usize, usize)>,
    message: Option<usize>,
    mode: Option<String>,
}

async fn evict(
    c: Caller,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let Caller { st, key, .. } = c;
    let b: EvictBody = api::parse(&body)?;
    let (mode, mode_name) = match b.mode.as_deref() {
        None | Some("exact") => (EvictMode::Exact, "exact"),
        Some("shift") => (EvictMode::Shift, "shift"),
        Some(m) => {
            return Err(ApiError::bad_param(
                "mode",
                format!("mode must be \"exact\" or \"shift\", got {m:?}"),
            ))
        }
    };
    let owner = Owner(key.0);
    let claim = st.sessions().claim(owner, &id)?;
    let (a, e) = match (b.span, b.message) {
        (Some(s), None) => s,
        (None, Some(k)) => match lineage::message_span(&claim.record.lineage, k) {
            Ok(Some(s)) => s,
            Ok(None) => {
                return Err(ApiError::bad_param(
                    "message",
                    format!("message {k} has no tokens in this session"),
                ))
            }
            Err(()) => {
                return Err(ApiError::bad_param(
                    "message",
                    format!("message {k}'s tokens are not one span; evict them by span"),
                ))
            }
        },
        _ => {
            return Err(ApiError::bad_request(
                "give either span: [start, end] or message: k",
            ))
        }
    };
    let mut s = state_of(&st, claim.engine).await?;
    let n = s.kv_tokens.len() + usize::from(s.unfed.is_some());
    if a >= e || e > n {
        return Err(ApiError::bad_param(
            "span",
            format!("span [{a}, {e}) is empty or not inside the session's {n} tokens"),
        ));
    }
    let all = s.tokens();
    if e > s.kv_tokens.len() {
        // The span takes the last sampled token: feed it first.
        append(&st, owner, claim.engine, Vec::new()).await?;
        s = state_of(&st, claim.engine).await?;
    }
    let approximate = mode == EvictMode::Shift && s.blocks.residency == Residency::Resident;
    let (removed, recomputed) = match st
        .engine()
        .session(SessionOp::Evict(claim.engine, a..e, mode))
        .await?
    {
        SessionReply::Evicted {
            removed,
            recomputed,
        } => (removed, recomputed),
        r => return Err(ApiError::internal(format!("unexpected engine reply {r:?}"))),
    };
    let after = state_of(&st, claim.engine).await?.tokens();
    let rec = claim.update(|r| {
        let had: Vec<usize> = (0..r.messages.len())
            .filter(|&k| r.lineage.iter().any(|g| g.origin.is_message(k)))
            .collect();
        lineage::remove(&mut r.lineage, a, e);
        r.evicted
            .push(Evicted::new(a, &all[a..e], unix_now(), mode_name));
        for k in had {
            if !r.lineage.iter().any(|g| g.origin.is_message(k)) {
                if let Some(m) = r.messages.get_mut(k) {
                    m.evicted = true;
                }
            }
        }
        if r.close
            .as_ref()
            .is_some_and(|(_, k)| r.messages.get(*k).is_none_or(|m| m.evicted))
        {
            r.close = None;
        }
        r.tokens = after.len();
    });
    if let Some(rec) = &rec {
        persist(&st, claim.id, rec, &after);
    }
    let mut v = json!({
        "id": claim.id,
        "tokens": after.len(),
        "removed": removed,
        "recomputed": recomputed,
        "mode": mode_name,
        "approximate": approximate,
    });
    if approximate {
        v["note"] = json!(
            "shift mode moved the later tokens' rows without recomputing them: they still \
             carry the evicted span's influence, so later output is approximate"
        );
    }
    Ok(Json(v).into_response())
}

fn find(st: &AppState, owner: Owner, id: &str) -> Result<(PublicId, Record), ApiError> {
    let pid = PublicId::parse(id).ok_or_else(|| not_found(id))?;
    st.sessions()
        .lock()
        .get(&pid)
        .filter(|r| r.owner == owner)
        .cloned()
        .map(|r| (pid, r))
        .ok_or_else(|| not_found(id))
}

#[derive(Deserialize)]
struct InfoQuery {
    /// `tokens`: add the session's token ids.
    include: Option<String>,
}

async fn info(
    c: Caller,
    Path(id): Path<String>,
    Query(q): Query<InfoQuery>,
) -> Result<Response, ApiError> {
    let Caller { st, key, .. } = c;
    let with_tokens = match q.include.as_deref() {
        None => false,
        Some("tokens") => true,
        Some(x) => {
            return Err(ApiError::bad_param(
                "include",
                format!("include must be \"tokens\", got {x:?}"),
            ))
        }
    };
    let (pid, r) = find(&st, Owner(key.0), &id)?;
    let s = state_of(&st, r.engine).await?;
    let mut v = json!({
        "id": pid,
        "object": "session",
        "tokens": r.tokens,
        "blocks": {"owned": s.blocks.owned, "shared": s.blocks.shared},
        "resident": s.blocks.residency == Residency::Resident,
        "busy": r.state == super::Use::Busy,
        "parent": r.parent,
        "created": r.created,
        "last_used": r.last_used_unix,
        "lineage": r.lineage.iter().map(|g| g.json()).collect::<Vec<_>>(),
        "evicted": r.evicted,
        "messages": r.messages,
    });
    if with_tokens {
        v["token_ids"] = json!(s.tokens());
    }
    Ok(Json(v).into_response())
}

async fn list(c: Caller) -> Result<Response, ApiError> {
    let Caller { st, key, .. } = c;
    let owner = Owner(key.0);
    let mut v: Vec<(PublicId, Record)> = st
        .sessions()
        .lock()
        .iter()
        .filter(|(_, r)| r.owner == owner)
        .map(|(&id, r)| (id, r.clone()))
        .collect();
    v.sort_by_key(|(id, r)| (r.created, id.0));
    let data: Vec<Value> = v
        .iter()
        .map(|(id, r)| {
            json!({"id": id, "object": "session", "tokens": r.tokens, "parent": r.parent,
                   "created": r.created, "last_used": r.last_used_unix})
        })
        .collect();
    Ok(Json(json!({"object": "list", "data": data})).into_response())
}

async fn delete(c: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    let Caller { st, key, .. } = c;
    let claim = st.sessions().claim(Owner(key.0), &id)?;
    st.engine().session(SessionOp::Free(claim.engine)).await?;
    if let Some(store) = st.store() {
        store.remove(claim.id);
    }
    claim.remove();
    Ok(StatusCode::NO_CONTENT.into_response())
}
