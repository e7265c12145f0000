//! A server's sessions across its life: restored from `--state-dir` at
//! start, saved at shutdown, freed when idle past `--session-ttl`.
//!
//! ```text
//!   start:    DIR/*.session ─► Store::read (refused: one log line) ─►
//!             SessionOp::Restore (tokens only; KV at the next request)
//!   SIGTERM:  drain ─► every session's tokens from the engine ─► files
//!   each 1 s: idle past the TTL ─► SessionOp::Free, file removed
//! ```

use super::ops::{new_id, persist, state_of, tenant};
use crate::engine_thread::SessionOp;
use crate::registry::{PublicId, Record};
use crate::state::AppState;

/// Loads the state directory's sessions (KV recomputed at their next
/// request); a refused file costs one log line, the others still load.
pub async fn restore(st: &AppState) {
    let Some(store) = st.store().cloned() else {
        return;
    };
    let (mut ok, mut refused) = (0, 0);
    for path in store.files() {
        let (s, owner) = match store.read(&path) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("fak serve: state: refused {}: {e}", path.display());
                refused += 1;
                continue;
            }
        };
        let n = s.tokens.len();
        let eid = match new_id(st, SessionOp::Restore(tenant(owner), s.tokens)).await {
            Ok(e) => e,
            Err(e) => {
                eprintln!(
                    "fak serve: state: refused {}: {}",
                    path.display(),
                    e.message
                );
                refused += 1;
                continue;
            }
        };
        let rec = Record {
            parent: s.parent,
            created: s.created,
            last_used_unix: s.last_used,
            tokens: n,
            messages: s.messages,
            lineage: s.lineage,
            evicted: s.evicted,
            close: s.close,
            appends: s.appends,
            tools: s.tools,
            ..Record::new(owner, eid, s.parent)
        };
        st.sessions().lock().insert(s.id, rec);
        ok += 1;
    }
    let noun = if ok == 1 { "session" } else { "sessions" };
    eprintln!(
        "fak serve: state: restored {ok} {noun} from {} ({refused} refused)",
        store.dir().display()
    );
}

/// Saves every session (at shutdown).
pub async fn save_all(st: &AppState) {
    if st.store().is_none() {
        return;
    }
    let all: Vec<(PublicId, Record)> = st
        .sessions()
        .lock()
        .iter()
        .map(|(&id, r)| (id, r.clone()))
        .collect();
    for (id, r) in all {
        match state_of(st, r.engine).await {
            Ok(s) => persist(st, id, &r, &s.tokens()),
            Err(e) => eprintln!("fak serve: state: cannot save session {id}: {}", e.message),
        }
    }
}

/// Frees idle sessions past the TTL, once a second.
pub async fn sweep(st: AppState, ttl: std::time::Duration) {
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(1).min(ttl)).await;
        for (id, r) in st.sessions().take_expired(ttl) {
            if st
                .engine()
                .session(SessionOp::Free(r.engine))
                .await
                .is_err()
            {
                // Still finishing a cancelled request: try again later.
                st.sessions().lock().insert(id, r);
                continue;
            }
            if let Some(store) = st.store() {
                store.remove(id);
            }
        }
    }
}
