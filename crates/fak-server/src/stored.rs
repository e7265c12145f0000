//! Stored responses of the Responses API (`store: true`): each one keeps
//! its conversation and a snapshot of that conversation's KV blocks, held
//! by an engine session, so a later `previous_response_id` finds every
//! full block of it in the prefix cache and computes only its new tokens.
//!
//! ```text
//!   a response ends ─► conversation + reply rendered (no generation prompt)
//!     ─► engine session: Create, append the tokens (the prompt's blocks are
//!        found in the prefix cache; the reply's are computed once), Publish
//!     ─► Entry { owner, conversation, response JSON, session, tokens }
//!   previous_response_id ─► the entry's conversation (+ the new input),
//!     rendered; its blocks are the snapshot's, shared copy-on-write
//!   bounds: per API key at most max_per_tenant entries; all entries at
//!     most half the KV pool's tokens; unused for ttl: dropped; over a
//!     bound: the least recently used go first (their sessions freed)
//! ```
//!
//! Entries are per API key: another key's id is a 404. They live in
//! memory: a restart forgets them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fak_engine::SessionId;
use fak_tokenizer::ToolMessage;
use serde_json::Value;

use crate::engine_thread::SessionOp;
use crate::error::ApiError;
use crate::state::{AppState, KeyTenant};

/// Default cap on stored responses per API key.
pub const DEFAULT_MAX_STORED: usize = 256;

/// Default time an unused stored response is kept.
pub const DEFAULT_STORED_TTL: Duration = Duration::from_secs(3600);

/// A stored response's id: `resp_` and 32 hex digits (128 random bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoredId(pub u128);

impl StoredId {
    /// A fresh random id.
    pub fn random() -> StoredId {
        StoredId(rand::random())
    }

    /// Parses `resp_<32 hex>`.
    pub fn parse(s: &str) -> Option<StoredId> {
        let hex = s.strip_prefix("resp_")?;
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u128::from_str_radix(hex, 16).ok().map(StoredId)
    }
}

impl std::fmt::Display for StoredId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "resp_{:032x}", self.0)
    }
}

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

struct Entry {
    owner: KeyTenant,
    conversation: Vec<ToolMessage>,
    response: Value,
    /// The engine session holding the KV snapshot.
    session: Option<SessionId>,
    /// The tokens that session holds.
    tokens: Vec<u32>,
    last_used: Instant,
}

/// A stored response's conversation and KV snapshot (the engine session,
/// and the tokens it holds).
pub struct Previous {
    pub conversation: Vec<ToolMessage>,
    pub snapshot: Option<(SessionId, Vec<u32>)>,
}

/// A response to keep.
pub struct NewEntry {
    pub owner: KeyTenant,
    pub conversation: Vec<ToolMessage>,
    pub response: Value,
    /// The snapshot's engine session.
    pub session: Option<SessionId>,
    /// The tokens it holds.
    pub tokens: Vec<u32>,
}

/// The stored responses.
pub struct Stored {
    limits: StoredLimits,
    entries: Mutex<HashMap<StoredId, Entry>>,
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("no response with id {id:?}"))
}

impl Stored {
    /// An empty store.
    pub fn new(limits: StoredLimits) -> Stored {
        Stored {
            limits,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<StoredId, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on `id`'s entry when `key` owns it (and it is not past
    /// its time), marking it used.
    fn with<T>(
        &self,
        key: KeyTenant,
        id: &str,
        f: impl FnOnce(&Entry) -> T,
    ) -> Result<T, ApiError> {
        let sid = StoredId::parse(id).ok_or_else(|| not_found(id))?;
        let mut m = self.lock();
        match m.get_mut(&sid) {
            Some(e) if e.owner == key && e.last_used.elapsed() < self.limits.ttl => {
                e.last_used = Instant::now();
                Ok(f(e))
            }
            _ => Err(not_found(id)),
        }
    }

    /// The conversation of a stored response (its input and its reply),
    /// and its snapshot.
    ///
    /// # Errors
    ///
    /// 404 (`previous_response_id`) when there is none such for `key`.
    pub fn previous(&self, key: KeyTenant, id: &str) -> Result<Previous, ApiError> {
        self.with(key, id, |e| Previous {
            conversation: e.conversation.clone(),
            snapshot: e.session.map(|s| (s, e.tokens.clone())),
        })
        .map_err(|e| ApiError {
            param: Some("previous_response_id"),
            ..e
        })
    }

    /// The stored response object.
    ///
    /// # Errors
    ///
    /// 404 when there is none such for `key`.
    pub fn response(&self, key: KeyTenant, id: &str) -> Result<Value, ApiError> {
        self.with(key, id, |e| e.response.clone())
    }

    /// Deletes a stored response and frees its snapshot.
    ///
    /// # Errors
    ///
    /// 404 when there is none such for `key`.
    pub async fn remove(&self, st: &AppState, key: KeyTenant, id: &str) -> Result<(), ApiError> {
        let sid = StoredId::parse(id).ok_or_else(|| not_found(id))?;
        let e = {
            let mut m = self.lock();
            match m.get(&sid) {
                Some(e) if e.owner == key => m.remove(&sid),
                _ => None,
            }
        };
        let e = e.ok_or_else(|| not_found(id))?;
        free(st, e.session).await;
        Ok(())
    }

    /// Keeps a finished response with its snapshot (`session` holding
    /// `tokens`, the conversation rendered; `None` when none could be
    /// made, and the next turn computes it again). Entries over the bounds
    /// are dropped, least recently used first.
    pub async fn insert(
        &self,
        st: &AppState,
        id: StoredId,
        entry: NewEntry,
        max_tokens_total: usize,
    ) {
        let key = entry.owner;
        let dropped = {
            let mut m = self.lock();
            m.insert(
                id,
                Entry {
                    owner: entry.owner,
                    conversation: entry.conversation,
                    response: entry.response,
                    session: entry.session,
                    tokens: entry.tokens,
                    last_used: Instant::now(),
                },
            );
            self.over_bounds(&mut m, key, max_tokens_total)
        };
        for s in dropped {
            free(st, Some(s)).await;
        }
    }

    /// Removes expired entries and, least recently used first, entries
    /// over the bounds; their sessions, to free.
    fn over_bounds(
        &self,
        m: &mut HashMap<StoredId, Entry>,
        key: KeyTenant,
        max_tokens_total: usize,
    ) -> Vec<SessionId> {
        let mut freed = Vec::new();
        let ttl = self.limits.ttl;
        m.retain(|_, e| {
            let keep = e.last_used.elapsed() < ttl;
            if !keep {
                freed.extend(e.session);
            }
            keep
        });
        loop {
            let mine = m.values().filter(|e| e.owner == key).count();
            let total: usize = m.values().map(|e| e.tokens.len()).sum();
            let victim = if mine > self.limits.max_per_tenant {
                m.iter()
                    .filter(|(_, e)| e.owner == key)
                    .min_by_key(|(_, e)| e.last_used)
                    .map(|(&k, _)| k)
            } else if total > max_tokens_total && m.len() > 1 {
                m.iter().min_by_key(|(_, e)| e.last_used).map(|(&k, _)| k)
            } else {
                None
            };
            match victim.and_then(|k| m.remove(&k)) {
                Some(e) => freed.extend(e.session),
                None => return freed,
            }
        }
    }

    /// Drops expired entries (the periodic sweep).
    pub async fn sweep(&self, st: &AppState) {
        let ttl = self.limits.ttl;
        let freed: Vec<SessionId> = {
            let mut m = self.lock();
            let mut f = Vec::new();
            m.retain(|_, e| {
                let keep = e.last_used.elapsed() < ttl;
                if !keep {
                    f.extend(e.session);
                }
                keep
            });
            f
        };
        for s in freed {
            free(st, Some(s)).await;
        }
    }
}

/// Frees an engine session (retrying a little while a request that was
/// cancelled still holds it).
pub async fn free(st: &AppState, s: Option<SessionId>) {
    let Some(s) = s else { return };
    for _ in 0..20 {
        match st.engine().session(SessionOp::Free(s)).await {
            Err(crate::engine_thread::SubmitError::Engine(
                fak_engine::EngineError::SessionBusy(_),
            )) => tokio::time::sleep(Duration::from_millis(50)).await,
            _ => return,
        }
    }
}
