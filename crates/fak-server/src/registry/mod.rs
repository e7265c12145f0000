//! The registry of this server's agent sessions: what each one holds
//! besides its KV (messages, lineage, evicted spans), the rules that keep
//! it consistent with the engine, and its files on disk ([`persist`]).
//! Pure bookkeeping below the application state, which holds it; the
//! HTTP endpoints that drive it are `sessions/`.
//!
//! ```text
//!   public id sess_<32 hex> (128-bit random) ─► Record { owner (API key),
//!     engine SessionId, parent, created, last used, messages, lineage,
//!     evicted spans, busy? }
//!   a handler: lock ─► claim (409 if busy; 404 if absent or another
//!     key's) ─► unlock ─► engine work ─► lock ─► update ─► persist
//! ```
//!
//! The registry is only bookkeeping: the tokens live in the engine, which
//! the handlers ask after every change (`SessionOp::Info`), so the counts
//! here are always the engine's.

pub mod lineage;
pub mod persist;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fak_engine::SessionId;
use serde::{Deserialize, Serialize};

pub use lineage::{Evicted, Segment};

use crate::error::ApiError;

/// A session's public id: 128 random bits, `sess_` and 32 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct PublicId(pub u128);

impl PublicId {
    /// A fresh random id.
    pub fn random() -> PublicId {
        PublicId(rand::random())
    }

    /// Parses `sess_<32 hex>`.
    pub fn parse(s: &str) -> Option<PublicId> {
        let hex = s.strip_prefix("sess_")?;
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u128::from_str_radix(hex, 16).ok().map(PublicId)
    }
}

impl std::fmt::Display for PublicId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sess_{:032x}", self.0)
    }
}

impl From<PublicId> for String {
    fn from(p: PublicId) -> String {
        p.to_string()
    }
}

impl TryFrom<String> for PublicId {
    type Error = String;
    fn try_from(s: String) -> Result<PublicId, String> {
        PublicId::parse(&s).ok_or_else(|| format!("bad session id {s:?}"))
    }
}

/// Who owns a session: the API key's tenant (0 without keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Owner(pub u64);

/// A message of a session's conversation (for the chat template).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredMessage {
    pub role: String,
    pub content: String,
    /// Evicted messages are left out of later renders.
    pub evicted: bool,
    /// An assistant message's calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<fak_tokenizer::ToolCall>>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl StoredMessage {
    /// A new (not evicted) message.
    pub fn new(m: &fak_tokenizer::ToolMessage) -> StoredMessage {
        StoredMessage {
            role: m.role.clone(),
            content: m.content.clone(),
            evicted: false,
            tool_calls: m.tool_calls.clone(),
            tool_call_id: m.tool_call_id.clone(),
        }
    }

    /// The message as the template sees it.
    pub fn message(&self) -> fak_tokenizer::ToolMessage {
        fak_tokenizer::ToolMessage {
            role: self.role.clone(),
            content: self.content.clone(),
            tool_calls: self.tool_calls.clone(),
            tool_call_id: self.tool_call_id.clone(),
        }
    }
}

/// Whether a request is using a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    Idle,
    Busy,
}

/// What the server keeps about one session.
#[derive(Debug, Clone)]
pub struct Record {
    pub owner: Owner,
    pub engine: SessionId,
    pub parent: Option<PublicId>,
    /// Unix seconds.
    pub created: u64,
    pub last_used_unix: u64,
    pub last_used: Instant,
    /// Tokens in the session (its KV plus the unfed token).
    pub tokens: usize,
    pub messages: Vec<StoredMessage>,
    pub lineage: Vec<Segment>,
    pub evicted: Vec<Evicted>,
    /// Template text owed after the last reply (its end-of-turn marker),
    /// appended before the next messages; `(text, message index)`.
    pub close: Option<(String, usize)>,
    /// Raw appends so far (`appended k`).
    pub appends: usize,
    /// Tool definitions rendered into the conversation (fixed once its
    /// first messages are rendered, since templates put them first).
    pub tools: Option<Vec<serde_json::Value>>,
    pub state: Use,
}

/// Unix seconds now.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Record {
    /// A new record for an engine session.
    pub fn new(owner: Owner, engine: SessionId, parent: Option<PublicId>) -> Record {
        let now = unix_now();
        Record {
            owner,
            engine,
            parent,
            created: now,
            last_used_unix: now,
            last_used: Instant::now(),
            tokens: 0,
            messages: Vec::new(),
            lineage: Vec::new(),
            evicted: Vec::new(),
            close: None,
            appends: 0,
            tools: None,
            state: Use::Idle,
        }
    }

    fn touch(&mut self) {
        self.last_used = Instant::now();
        self.last_used_unix = unix_now();
    }
}

/// Limits on sessions.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most sessions one tenant may hold.
    pub max_per_tenant: usize,
}

/// Every session of the server.
#[derive(Default)]
pub struct Registry {
    map: Mutex<HashMap<PublicId, Record>>,
}

/// 429: the tenant holds `max` sessions.
pub fn limit_error(max: usize) -> ApiError {
    ApiError::limited(format!(
        "this API key holds {max} sessions, the most allowed (--max-sessions): delete one first"
    ))
}

/// The same 404 for an unknown id and another tenant's. A session lives
/// on the replica that created it, so behind a router the message says how
/// its calls reach that replica.
pub fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!(
        "no session '{id}' on this server (a session lives on the replica that created it: \
         behind a router, send every call for it with the same x-session-id header)"
    ))
}

impl Registry {
    /// The map (a poisoned lock is taken over: records stay consistent
    /// because every update is a whole assignment).
    pub fn lock(&self) -> MutexGuard<'_, HashMap<PublicId, Record>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks `id` busy for `owner`; the guard marks it idle again.
    ///
    /// # Errors
    ///
    /// 404 if absent or another owner's, 409 if busy.
    pub fn claim(self: &Arc<Self>, owner: Owner, id: &str) -> Result<Claim, ApiError> {
        let pid = PublicId::parse(id).ok_or_else(|| not_found(id))?;
        let mut map = self.lock();
        let r = map
            .get_mut(&pid)
            .filter(|r| r.owner == owner)
            .ok_or_else(|| not_found(id))?;
        if r.state == Use::Busy {
            return Err(ApiError::conflict(format!(
                "session '{id}' is in use by another request; retry when it is done"
            )));
        }
        r.state = Use::Busy;
        r.touch();
        Ok(Claim {
            reg: self.clone(),
            id: pid,
            engine: r.engine,
            record: r.clone(),
        })
    }

    /// Adds a record unless `owner` already holds `max` sessions.
    ///
    /// # Errors
    ///
    /// 429 at the limit.
    pub fn insert(&self, id: PublicId, r: Record, max: usize) -> Result<(), ApiError> {
        let mut map = self.lock();
        if map.values().filter(|x| x.owner == r.owner).count() >= max {
            return Err(limit_error(max));
        }
        map.insert(id, r);
        Ok(())
    }

    /// Sessions `owner` holds.
    pub fn count(&self, owner: Owner) -> usize {
        self.lock().values().filter(|r| r.owner == owner).count()
    }

    /// Idle sessions unused for longer than `ttl`, taken out of the map.
    pub fn take_expired(&self, ttl: Duration) -> Vec<(PublicId, Record)> {
        let mut map = self.lock();
        let old: Vec<PublicId> = map
            .iter()
            .filter(|(_, r)| r.state == Use::Idle && r.last_used.elapsed() > ttl)
            .map(|(&id, _)| id)
            .collect();
        old.into_iter()
            .filter_map(|id| map.remove(&id).map(|r| (id, r)))
            .collect()
    }
}

/// A session held busy by one request; dropping it makes it idle again.
pub struct Claim {
    reg: Arc<Registry>,
    pub id: PublicId,
    pub engine: SessionId,
    /// The record as it was when claimed.
    pub record: Record,
}

impl Claim {
    /// Changes the record (kept busy until the claim drops); returns it.
    pub fn update(&self, f: impl FnOnce(&mut Record)) -> Option<Record> {
        let mut map = self.reg.lock();
        let r = map.get_mut(&self.id)?;
        f(r);
        r.touch();
        Some(r.clone())
    }

    /// Removes the record (the session was deleted).
    pub fn remove(self) {
        self.reg.lock().remove(&self.id);
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(r) = self.reg.lock().get_mut(&self.id) {
            r.state = Use::Idle;
        }
    }
}
