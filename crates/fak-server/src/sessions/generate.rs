//! The generating session endpoints: `POST /v1/sessions/{id}/chat/completions`
//! (new messages rendered incrementally, a reply appended) and
//! `POST /v1/sessions/{id}/completions` (raw tokens appended, optionally a
//! reply).
//!
//! ```text
//!   claim (409 if busy) ─► the turn's tokens ─► submit (Context::Session)
//!   ─► forward: events passed on to the response; at Finished, settle:
//!      tokens from the engine, lineage, messages, persist ─► release
//! ```

use std::sync::{Arc, OnceLock};

use axum::extract::Path;
use axum::response::Response;
use fak_engine::{Context, Event, FinishReason, MaxTokens, Request};
use fak_tokenizer::ToolMessage;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::ops::{checked_messages, persist, prompt_ids, state_of, stored, tenant};
use super::turn::{chat_delta, close_after};
use crate::api::{self, ChatRequest, Common, Prompt};
use crate::chat::{engine_request, respond, OutputLimit, Placement};
use crate::engine_thread::Loaded;
use crate::error::ApiError;
use crate::registry::lineage::{self, Origin};
use crate::registry::{Claim, Owner, StoredMessage};
use crate::reply::{Kind, Shape};
use crate::state::{AppState, Caller, RawBody};
use crate::tools;
use crate::tools::ToolReply;

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

pub(super) async fn chat(
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
    let mut req = request(&claim, &r.common, prompt, logprobs, None)?;
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

pub(super) async fn completions(
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
    let req = request(&claim, &r.common, prompt, logprobs, zero.then_some(0))?;
    let (_, rx) = st.engine().submit(req, arrived).await?;
    turn(&st, l, claim, rx, Kind::Completion, &r.common, plan, None).await
}

/// The engine request of a turn: `prompt` appended to the claimed
/// session. `max_tokens` overrides the body's limit (`Some(0)`: append
/// only); a limit given must fit the session's context, and without one
/// the engine gives the reply all the room left.
fn request(
    claim: &Claim,
    c: &Common,
    prompt: Vec<u32>,
    logprobs: fak_engine::Logprobs,
    max_tokens: Option<usize>,
) -> Result<Request, ApiError> {
    let max_tokens = match max_tokens {
        Some(n) => MaxTokens::Strict(n),
        None => OutputLimit::Strict.max_tokens(c.max_tokens()?),
    };
    let at = Placement {
        tenant: tenant(claim.record.owner),
        context: Context::Session(claim.engine),
        max_tokens,
    };
    engine_request(c, prompt, logprobs, at)
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
