//! The session endpoints under `/v1/sessions`, scoped to the API key; the
//! lifecycle ones are here (create, fork, list, detail, delete), the
//! generating ones in `generate.rs`, evict in `evict.rs`; what they share
//! (engine session queries, appending, persisting, prompt encoding) is in
//! `ops.rs`.
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

use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use fak_engine::{Residency, SessionId};
use serde::Deserialize;
use serde_json::{json, Value};

use super::ops::{append, checked_messages, new_id, persist, prompt_ids, state_of, stored, tenant};
use super::turn::chat_delta;
use crate::api::{self, Prompt};
use crate::engine_thread::SessionOp;
use crate::error::ApiError;
use crate::registry::lineage::{self, Origin};
use crate::registry::{not_found, Owner, PublicId, Record};
use crate::state::{AppState, Caller, RawBody};
use crate::tools;

/// The session routes (behind the API-key check).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions", post(create).get(list))
        .route("/v1/sessions/{id}", axum::routing::get(info).delete(delete))
        .route("/v1/sessions/{id}/fork", post(fork))
        .route(
            "/v1/sessions/{id}/chat/completions",
            post(super::generate::chat),
        )
        .route(
            "/v1/sessions/{id}/completions",
            post(super::generate::completions),
        )
        .route("/v1/sessions/{id}/evict", post(super::evict::evict))
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
        return Err(crate::registry::limit_error(max));
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
        return Err(crate::registry::limit_error(max));
    }
    let eid = new_id(&st, SessionOp::Fork(claim.engine)).await?;
    let src = &claim.record;
    let mut rec = Record {
        lineage: lineage::forked(&src.lineage, claim.id, src.tokens),
        parent: Some(claim.id),
        state: crate::registry::Use::Idle,
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
        "busy": r.state == crate::registry::Use::Busy,
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
