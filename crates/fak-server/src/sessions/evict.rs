//! `POST /v1/sessions/{id}/evict`: a span of a session's tokens removed,
//! exactly (the rows after it recomputed: later output bit-identical to
//! never having seen the span) or by shifting (approximate, no compute).

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use axum::Json;
use fak_engine::{EvictMode, Residency};
use serde::Deserialize;
use serde_json::json;

use super::ops::{append, persist, state_of};
use crate::api;
use crate::engine_thread::{SessionOp, SessionReply};
use crate::error::ApiError;
use crate::registry::lineage::{self, Evicted};
use crate::registry::{unix_now, Owner};
use crate::state::{Caller, RawBody};

#[derive(Deserialize)]
struct EvictBody {
    span: Option<(usize, usize)>,
    message: Option<usize>,
    mode: Option<String>,
}

pub(super) async fn evict(
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
