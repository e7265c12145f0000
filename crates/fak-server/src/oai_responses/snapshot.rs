//! Where a response runs, and how it becomes a stored snapshot.
//!
//! ```text
//!   previous_response_id with a snapshot S holding tokens T,
//!   and the new prompt P starts with T:   fork S (copy-on-write, no compute)
//!                                         ─► run P[len T..] in the fork
//!   otherwise, with store:                a new session ─► run P in it (its
//!                                         full blocks found in the prefix cache)
//!   otherwise:                            a fresh sequence (nothing kept)
//!
//!   at the end, with store: the conversation + reply rendered is T'; the
//!   session holds P + the generated tokens; when those start T', the rest
//!   of T' (the template's end of turn) is appended and the session is the
//!   new snapshot; when not (a reply the tokenizer writes otherwise), a new
//!   session takes T' (prefix cache first). Without store the fork is freed.
//! ```

use fak_engine::{Context, Request, SessionId};
use fak_kv::Tenant;

use crate::engine_thread::{SessionOp, SessionReply};
use crate::state::AppState;
use crate::stored::free;

/// An engine session a response runs in, freed when dropped unless it
/// was kept.
pub struct Scratch {
    st: AppState,
    session: Option<SessionId>,
}

impl Scratch {
    /// Hands the session over (it is no longer freed on drop).
    pub fn take(&mut self) -> Option<SessionId> {
        self.session.take()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            let st = self.st.clone();
            // A stream dropped mid-reply: its request is being cancelled.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move { free(st.engine(), Some(s)).await });
            }
        }
    }
}

async fn session(st: &AppState, op: SessionOp) -> Option<SessionId> {
    match st.engine().session(op).await {
        Ok(SessionReply::Id(s)) => Some(s),
        _ => None,
    }
}

/// Places `req` (a fresh request for the whole prompt) in a session: a
/// fork of `previous`'s snapshot when the prompt extends it (the prompt
/// is cut to the new tokens), else a new session when the response is
/// stored, else nowhere.
pub async fn place(
    st: &AppState,
    req: &mut Request,
    previous: Option<&(SessionId, Vec<u32>)>,
    store: bool,
) -> Scratch {
    let mut scratch = Scratch {
        st: st.clone(),
        session: None,
    };
    if let Some((s, tokens)) = previous {
        if req.prompt.len() > tokens.len() && req.prompt.starts_with(tokens) {
            if let Some(f) = session(st, SessionOp::Fork(*s)).await {
                req.prompt.drain(..tokens.len());
                req.context = Context::Session(f);
                scratch.session = Some(f);
                return scratch;
            }
        }
    }
    if store {
        if let Some(s) = session(st, SessionOp::Create(req.tenant)).await {
            req.context = Context::Session(s);
            scratch.session = Some(s);
        }
    }
    scratch
}

/// Makes the snapshot of a finished response: a session holding exactly
/// `tokens` (the conversation rendered), reusing `scratch`'s session when
/// it holds a prefix of them. `None` when the pool cannot hold it.
pub async fn settle(
    st: &AppState,
    tenant: Tenant,
    scratch: &mut Scratch,
    tokens: Vec<u32>,
) -> Option<SessionId> {
    if let Some(s) = scratch.take() {
        if let Ok(state) = crate::sessions::state_of(st, s).await {
            let held = state.tokens();
            if tokens.len() >= held.len() && tokens.starts_with(&held) {
                let rest = tokens[held.len()..].to_vec();
                let appended = rest.is_empty()
                    || crate::sessions::append_to(st, tenant, s, rest)
                        .await
                        .is_ok();
                if appended && st.engine().session(SessionOp::Publish(s)).await.is_ok() {
                    return Some(s);
                }
            }
        }
        free(st.engine(), Some(s)).await;
    }
    crate::sessions::create_holding(st, tenant, tokens)
        .await
        .ok()
}
