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
//! Entries are per API key: another key's id is a 404. With
//! `--state-dir` each one is also a file, `DIR/responses/resp_<hex>.response`
//! (its conversation, response object and snapshot tokens, under a
//! checksum), read back at start: the snapshot's KV is recomputed at its
//! next use, as a restored session's is.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fak_engine::SessionId;
use fak_kv::Tenant;
use fak_tokenizer::ToolMessage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::StoredLimits;
use crate::engine_thread::{EngineHandle, SessionOp};
use crate::error::ApiError;
use crate::key::KeyTenant;
use crate::registry::persist::{read_checked, write_checked, StateError, Store};
use crate::registry::Owner;

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

struct Entry {
    owner: KeyTenant,
    /// The engine tenant of the snapshot.
    tenant: Tenant,
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
    /// The engine tenant of the snapshot.
    pub tenant: Tenant,
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
    pub async fn remove(
        &self,
        engine: &EngineHandle,
        store: Option<&Store>,
        key: KeyTenant,
        id: &str,
    ) -> Result<(), ApiError> {
        let sid = StoredId::parse(id).ok_or_else(|| not_found(id))?;
        let e = {
            let mut m = self.lock();
            match m.get(&sid) {
                Some(e) if e.owner == key => m.remove(&sid),
                _ => None,
            }
        };
        let e = e.ok_or_else(|| not_found(id))?;
        drop_all(engine, store, vec![(sid, e.session)]).await;
        Ok(())
    }

    /// Keeps a finished response with its snapshot (`session` holding
    /// `tokens`, the conversation rendered; `None` when none could be
    /// made, and the next turn computes it again), and its file with
    /// `--state-dir`. Entries over the bounds are dropped, least recently
    /// used first.
    pub async fn insert(
        &self,
        engine: &EngineHandle,
        store: Option<&Store>,
        id: StoredId,
        entry: NewEntry,
        max_tokens_total: usize,
    ) {
        let key = entry.owner;
        let e = Entry {
            owner: entry.owner,
            tenant: entry.tenant,
            conversation: entry.conversation,
            response: entry.response,
            session: entry.session,
            tokens: entry.tokens,
            last_used: Instant::now(),
        };
        if let Some(store) = store {
            if let Err(err) = write(store, id, &e) {
                eprintln!("fak serve: state: cannot save response {id}: {err}");
            }
        }
        let dropped = {
            let mut m = self.lock();
            m.insert(id, e);
            self.over_bounds(&mut m, key, max_tokens_total)
        };
        drop_all(engine, store, dropped).await;
    }

    /// Removes expired entries and, least recently used first, entries
    /// over the bounds; their ids and sessions, to free.
    fn over_bounds(
        &self,
        m: &mut HashMap<StoredId, Entry>,
        key: KeyTenant,
        max_tokens_total: usize,
    ) -> Vec<(StoredId, Option<SessionId>)> {
        let mut gone = self.expired(m);
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
            match victim.and_then(|k| m.remove(&k).map(|e| (k, e))) {
                Some((k, e)) => gone.push((k, e.session)),
                None => return gone,
            }
        }
    }

    /// Removes the entries unused past the TTL.
    fn expired(&self, m: &mut HashMap<StoredId, Entry>) -> Vec<(StoredId, Option<SessionId>)> {
        let ttl = self.limits.ttl;
        let old: Vec<StoredId> = m
            .iter()
            .filter(|(_, e)| e.last_used.elapsed() >= ttl)
            .map(|(&k, _)| k)
            .collect();
        old.into_iter()
            .filter_map(|k| m.remove(&k).map(|e| (k, e.session)))
            .collect()
    }

    /// Drops expired entries (the periodic sweep).
    pub async fn sweep(&self, engine: &EngineHandle, store: Option<&Store>) {
        let gone = {
            let mut m = self.lock();
            self.expired(&mut m)
        };
        drop_all(engine, store, gone).await;
    }

    /// Loads `--state-dir`'s stored responses (their KV recomputed at
    /// their next use); a refused file costs one log line.
    pub async fn restore(&self, engine: &EngineHandle, store: Option<&Store>) {
        let Some(store) = store.cloned() else {
            return;
        };
        let dir = store.dir().join(DIR);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "response"))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        let (mut ok, mut refused) = (0, 0);
        for path in files {
            match read(&store, &path) {
                Ok((id, mut e, tokens)) => {
                    e.session = match engine.session(SessionOp::Restore(e.tenant, tokens)).await {
                        Ok(crate::engine_thread::SessionReply::Id(s)) => Some(s),
                        _ => None,
                    };
                    self.lock().insert(id, e);
                    ok += 1;
                }
                Err(err) => {
                    eprintln!("fak serve: state: refused {}: {err}", path.display());
                    refused += 1;
                }
            }
        }
        if ok + refused > 0 {
            let noun = if ok == 1 { "response" } else { "responses" };
            eprintln!(
                "fak serve: state: restored {ok} stored {noun} from {} ({refused} refused)",
                dir.display()
            );
        }
    }
}

/// Where stored responses' files go under `--state-dir`.
const DIR: &str = "responses";
const MAGIC: &str = "fak-response 1";

/// A stored response as its file holds it.
#[derive(Serialize, Deserialize)]
struct OnDisk {
    model: String,
    owner: String,
    tenant: u64,
    id: String,
    conversation: Vec<ToolMessage>,
    response: Value,
    tokens: Vec<u32>,
}

fn path_of(store: &Store, id: StoredId) -> PathBuf {
    store.dir().join(DIR).join(format!("{id}.response"))
}

fn write(store: &Store, id: StoredId, e: &Entry) -> std::io::Result<()> {
    let owner = store
        .owner_name(Owner(e.owner.0))
        .unwrap_or_default()
        .to_string();
    let d = OnDisk {
        model: store.model().to_string(),
        owner,
        tenant: e.tenant.0,
        id: id.to_string(),
        conversation: e.conversation.clone(),
        response: e.response.clone(),
        tokens: e.tokens.clone(),
    };
    std::fs::create_dir_all(store.dir().join(DIR))?;
    let payload = serde_json::to_vec(&d).map_err(std::io::Error::other)?;
    write_checked(&path_of(store, id), MAGIC, &payload)
}

fn read(store: &Store, path: &Path) -> Result<(StoredId, Entry, Vec<u32>), StateError> {
    let payload = read_checked(path, MAGIC)?;
    let d: OnDisk = serde_json::from_slice(&payload)?;
    if d.model != store.model() {
        return Err(StateError::Model(d.model));
    }
    let owner = store.owner_named(&d.owner).ok_or(StateError::Owner)?;
    let id = StoredId::parse(&d.id).ok_or(StateError::Magic)?;
    if path_of(store, id).file_name() != path.file_name() {
        return Err(StateError::Magic);
    }
    let e = Entry {
        owner: KeyTenant(owner.0),
        tenant: Tenant(d.tenant),
        conversation: d.conversation,
        response: d.response,
        session: None,
        tokens: d.tokens.clone(),
        last_used: Instant::now(),
    };
    Ok((id, e, d.tokens))
}

/// Frees the sessions of dropped entries and deletes their files.
async fn drop_all(
    engine: &EngineHandle,
    store: Option<&Store>,
    gone: Vec<(StoredId, Option<SessionId>)>,
) {
    for (id, s) in gone {
        if let Some(store) = store {
            let _ = std::fs::remove_file(path_of(store, id));
        }
        free(engine, s).await;
    }
}

/// Frees an engine session (retrying a little while a request that was
/// cancelled still holds it).
pub async fn free(engine: &EngineHandle, s: Option<SessionId>) {
    let Some(s) = s else { return };
    for _ in 0..20 {
        match engine.session(SessionOp::Free(s)).await {
            Err(crate::engine_thread::SubmitError::Engine(
                fak_engine::EngineError::SessionBusy(_),
            )) => tokio::time::sleep(Duration::from_millis(50)).await,
            _ => return,
        }
    }
}
