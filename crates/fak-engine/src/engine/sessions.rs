//! Engine sessions: persistent sequences that requests append to.
//!
//! ```text
//!   create ─► Resident(seq) ──fork──► Resident(seq') (shares every block)
//!                │  ▲
//!   pool full:   │  │ next request: tokens are its input again; the prefix
//!   idle, least  ▼  │ cache gives back whatever blocks survived, the rest
//!   recently ─► Dropped(tokens)      is recomputed (same rows, same output)
//!   used            ▲
//!   restore(tokens)─┘ (persisted sessions come back like this)
//! ```
//!
//! A session's logical tokens are its KV tokens plus its unfed token (the
//! last one sampled, fed at its next request). A dropped session keeps
//! them all as plain tokens; they are fed, in order, before its next
//! request's prompt, so every row comes out as it was.

use std::ops::Range;

use fak_kv::Tenant;
use fak_model::SeqId;

use super::Engine;
use crate::request::{RequestId, SessionId};
use crate::seqs::{EvictMode, EvictReport, PrefixCache};
use crate::EngineError;

/// Where a session's tokens are.
pub(super) enum SessionKv {
    /// In a sequence of the KV cache.
    Resident(SeqId),
    /// Only as token ids (KV dropped under pressure, or restored); the
    /// next request recomputes them.
    Dropped(Vec<u32>),
}

pub(super) struct Session {
    pub(super) kv: SessionKv,
    pub(super) tenant: Tenant,
    /// The last sampled token of the session's last request (resident
    /// sessions only).
    pub(super) unfed: Option<u32>,
    /// The request appending to it now.
    pub(super) busy: Option<RequestId>,
    /// When it was last used (the engine's use counter).
    pub(super) last_used: u64,
}

pub(super) struct SessionSlot {
    pub(super) generation: u32,
    pub(super) live: Option<Session>,
}

/// Whether a session's rows are in the KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residency {
    /// Its rows are in the cache.
    Resident,
    /// Its rows were dropped (or it was restored); the next request
    /// recomputes what the prefix cache no longer holds.
    Dropped,
}

/// The KV blocks a session holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionBlocks {
    /// Whether its rows are in the cache.
    pub residency: Residency,
    /// Blocks only this session references.
    pub owned: usize,
    /// Blocks it shares with other sequences (forks, the prefix cache).
    pub shared: usize,
}

/// What a request on a session starts from.
pub(super) struct SessionInput {
    /// Tokens its sequence holds.
    pub(super) base: usize,
    /// Tokens to feed before the prompt.
    pub(super) feed: Vec<u32>,
    /// A dropped session's tokens, to drop it again on a rollback.
    pub(super) restore: Option<Vec<u32>>,
}

impl Engine<'_> {
    fn touch(&mut self) -> u64 {
        self.uses += 1;
        self.uses
    }

    /// A new, empty session in `tenant`'s cache namespace.
    pub fn create_session(&mut self, tenant: Tenant) -> SessionId {
        let seq = self.seqs.create(tenant);
        let last_used = self.touch();
        self.insert_session(Session {
            kv: SessionKv::Resident(seq),
            tenant,
            unfed: None,
            busy: None,
            last_used,
        })
    }

    /// A session holding `tokens` whose KV is not computed yet: the next
    /// request recomputes them (or finds them in the prefix cache), then
    /// its own prompt.
    ///
    /// # Errors
    ///
    /// [`EngineError::TokenOutOfRange`], [`EngineError::ContextFull`].
    pub fn restore_session(
        &mut self,
        tenant: Tenant,
        tokens: Vec<u32>,
    ) -> Result<SessionId, EngineError> {
        let n_vocab = self.model.config().n_vocab;
        if let Some((index, &id)) = tokens
            .iter()
            .enumerate()
            .find(|(_, &t)| t as usize >= n_vocab)
        {
            return Err(EngineError::TokenOutOfRange { index, id, n_vocab });
        }
        if tokens.len() > self.cfg.n_ctx {
            return Err(EngineError::ContextFull {
                needed: tokens.len(),
                n_ctx: self.cfg.n_ctx,
            });
        }
        let last_used = self.touch();
        Ok(self.insert_session(Session {
            kv: SessionKv::Dropped(tokens),
            tenant,
            unfed: None,
            busy: None,
            last_used,
        }))
    }

    pub(super) fn insert_session(&mut self, s: Session) -> SessionId {
        let slot = match self.free_sessions.pop() {
            Some(i) => i,
            None => {
                self.sessions.push(SessionSlot {
                    generation: 0,
                    live: None,
                });
                (self.sessions.len() - 1) as u32
            }
        };
        let e = &mut self.sessions[slot as usize];
        e.live = Some(s);
        SessionId {
            slot,
            generation: e.generation,
        }
    }

    pub(super) fn session(&self, id: SessionId) -> Result<&Session, EngineError> {
        self.sessions
            .get(id.slot as usize)
            .filter(|s| s.generation == id.generation)
            .and_then(|s| s.live.as_ref())
            .ok_or(EngineError::UnknownSession(id))
    }

    pub(super) fn session_mut(&mut self, id: SessionId) -> Option<&mut Session> {
        self.sessions
            .get_mut(id.slot as usize)
            .filter(|s| s.generation == id.generation)
            .and_then(|s| s.live.as_mut())
    }

    fn idle_session(&self, id: SessionId) -> Result<&Session, EngineError> {
        let s = self.session(id)?;
        if s.busy.is_some() {
            return Err(EngineError::SessionBusy(id));
        }
        Ok(s)
    }

    /// A copy-on-write fork of an idle session: shares every block,
    /// computes nothing (O(blocks)).
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSession`], [`EngineError::SessionBusy`].
    pub fn fork_session(&mut self, src: SessionId) -> Result<SessionId, EngineError> {
        let s = self.idle_session(src)?;
        let (tenant, unfed) = (s.tenant, s.unfed);
        let kv = match &s.kv {
            SessionKv::Resident(seq) => SessionKv::Resident(self.seqs.fork(*seq)?),
            SessionKv::Dropped(t) => SessionKv::Dropped(t.clone()),
        };
        let last_used = self.touch();
        if let Some(s) = self.session_mut(src) {
            s.last_used = last_used;
        }
        Ok(self.insert_session(Session {
            kv,
            tenant,
            unfed,
            busy: None,
            last_used,
        }))
    }

    /// Drops an idle session; its blocks go back to the pool (or the prefix
    /// cache, if published).
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSession`], [`EngineError::SessionBusy`].
    pub fn free_session(&mut self, id: SessionId) -> Result<(), EngineError> {
        if let SessionKv::Resident(seq) = self.idle_session(id)?.kv {
            self.seqs.free(seq)?;
        }
        let e = &mut self.sessions[id.slot as usize];
        e.live = None;
        e.generation = e.generation.wrapping_add(1);
        self.free_sessions.push(id.slot);
        Ok(())
    }

    /// The tokens an idle session's KV holds (its last sampled token, fed
    /// at its next request, is not among them); for a dropped session,
    /// all of its tokens.
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSession`].
    pub fn session_tokens(&self, id: SessionId) -> Result<&[u32], EngineError> {
        match &self.session(id)?.kv {
            SessionKv::Resident(seq) => self.seqs.tokens(*seq),
            SessionKv::Dropped(t) => Ok(t),
        }
    }

    /// The session's last sampled token, not yet in its KV.
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSession`].
    pub fn session_unfed(&self, id: SessionId) -> Result<Option<u32>, EngineError> {
        Ok(self.session(id)?.unfed)
    }

    /// The KV blocks a session holds, and whether it is resident.
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSession`].
    pub fn session_blocks(&self, id: SessionId) -> Result<SessionBlocks, EngineError> {
        let SessionKv::Resident(seq) = self.session(id)?.kv else {
            return Ok(SessionBlocks {
                residency: Residency::Dropped,
                owned: 0,
                shared: 0,
            });
        };
        let mgr = self.seqs.kv().manager();
        let blocks = mgr.blocks(fak_kv::SeqSlot(seq.0))?;
        let owned = blocks.iter().filter(|&&b| mgr.refcount(b) <= 1).count();
        Ok(SessionBlocks {
            residency: Residency::Resident,
            owned,
            shared: blocks.len() - owned,
        })
    }

    /// Offers an idle session's full blocks to its tenant's prefix cache
    /// (nothing for a dropped session).
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSession`], [`EngineError::SessionBusy`].
    pub fn publish_session(&mut self, id: SessionId) -> Result<(), EngineError> {
        match self.idle_session(id)?.kv {
            SessionKv::Resident(seq) => self.seqs.publish(seq),
            SessionKv::Dropped(_) => Ok(()),
        }
    }

    /// Removes tokens `span` from an idle session's KV; see [`EvictMode`].
    /// No other session changes, forks included. A dropped session's
    /// tokens are cut out in either mode (nothing to shift: its rows are
    /// recomputed at its next request, so the result is exact).
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSession`], [`EngineError::SessionBusy`]; as
    /// [`Sequences::evict`](crate::Sequences::evict).
    pub fn evict_session(
        &mut self,
        id: SessionId,
        span: Range<usize>,
        mode: EvictMode,
    ) -> Result<EvictReport, EngineError> {
        let last_used = self.touch();
        let model = self.model;
        let s = self.idle_session(id)?;
        let rep = match &s.kv {
            SessionKv::Resident(seq) => self.seqs.evict(model, *seq, span, mode)?,
            SessionKv::Dropped(t) => {
                if span.start >= span.end || span.end > t.len() {
                    return Err(EngineError::BadSpan {
                        start: span.start,
                        end: span.end,
                        len: t.len(),
                    });
                }
                let removed = span.len();
                if let Some(SessionKv::Dropped(t)) = self.session_mut(id).map(|s| &mut s.kv) {
                    t.drain(span);
                }
                EvictReport {
                    removed,
                    recomputed: 0,
                    logits: None,
                }
            }
        };
        if let Some(s) = self.session_mut(id) {
            s.last_used = last_used;
        }
        self.stats.tokens_computed += rep.recomputed as u64;
        Ok(rep)
    }

    /// Drops an idle session's KV rows, keeping its tokens: its full blocks
    /// are offered to the prefix cache first, so the next request gets
    /// back whatever the pool has not reused meanwhile. Returns whether it
    /// was resident.
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSession`], [`EngineError::SessionBusy`].
    pub fn drop_session_kv(&mut self, id: SessionId) -> Result<bool, EngineError> {
        let s = self.idle_session(id)?;
        let SessionKv::Resident(seq) = s.kv else {
            return Ok(false);
        };
        let unfed = s.unfed;
        let mut tokens = self.seqs.tokens(seq)?.to_vec();
        tokens.extend(unfed);
        if self.cfg.prefix_cache == PrefixCache::On {
            self.seqs.publish(seq)?;
        }
        self.seqs.free(seq)?;
        if let Some(s) = self.session_mut(id) {
            s.kv = SessionKv::Dropped(tokens);
            s.unfed = None;
        }
        self.stats.sessions_dropped += 1;
        Ok(true)
    }

    /// Under KV pressure: drops the least recently used idle session that
    /// owns blocks. Returns whether one was dropped.
    pub(super) fn drop_lru_session(&mut self) -> Result<bool, EngineError> {
        let mut best: Option<(u64, SessionId)> = None;
        for (slot, e) in self.sessions.iter().enumerate() {
            let Some(s) = &e.live else { continue };
            if s.busy.is_some() || !matches!(s.kv, SessionKv::Resident(_)) {
                continue;
            }
            let id = SessionId {
                slot: slot as u32,
                generation: e.generation,
            };
            if self.session_blocks(id)?.owned == 0 {
                continue;
            }
            if best.is_none_or(|(t, _)| s.last_used < t) {
                best = Some((s.last_used, id));
            }
        }
        match best {
            Some((_, id)) => self.drop_session_kv(id),
            None => Ok(false),
        }
    }

    /// For [`Engine::add`] on a session: its sequence, the tokens it holds
    /// and the tokens to feed before the prompt. A dropped session gets a
    /// new, empty sequence; its tokens are fed again (and kept in
    /// `restore` in case the request is rolled back).
    pub(super) fn session_input(
        &mut self,
        id: SessionId,
        tenant: Tenant,
    ) -> Result<SessionInput, EngineError> {
        let s = self.session(id)?;
        if s.busy.is_some() {
            return Err(EngineError::SessionBusy(id));
        }
        if s.tenant != tenant {
            return Err(EngineError::UnknownSession(id));
        }
        match &s.kv {
            SessionKv::Resident(seq) => {
                let base = self.seqs.tokens(*seq)?.len();
                Ok(SessionInput {
                    base,
                    feed: s.unfed.into_iter().collect(),
                    restore: None,
                })
            }
            SessionKv::Dropped(t) => Ok(SessionInput {
                base: 0,
                feed: t.clone(),
                restore: Some(t.clone()),
            }),
        }
    }

    /// Marks a session busy with `req`; a dropped one gets its sequence.
    pub(super) fn claim_session(&mut self, id: SessionId, req: RequestId) {
        let last_used = self.touch();
        let tenant = match self.session(id) {
            Ok(s) => s.tenant,
            Err(_) => return,
        };
        let needs_seq = matches!(self.session(id).map(|s| &s.kv), Ok(SessionKv::Dropped(_)));
        let fresh = needs_seq.then(|| self.seqs.create(tenant));
        if let Some(s) = self.session_mut(id) {
            s.busy = Some(req);
            s.last_used = last_used;
            if let Some(seq) = fresh {
                s.kv = SessionKv::Resident(seq);
            }
        }
    }

    /// The sequence of a resident session.
    pub(super) fn session_seq(&self, id: SessionId) -> Result<SeqId, EngineError> {
        match self.session(id)?.kv {
            SessionKv::Resident(seq) => Ok(seq),
            SessionKv::Dropped(_) => Err(EngineError::UnknownSession(id)),
        }
    }

    /// A rolled-back request of a session that was dropped before it: the
    /// session is dropped again, with the tokens it had.
    pub(super) fn unrestore(&mut self, id: SessionId, tokens: Vec<u32>) -> Result<(), EngineError> {
        if let Ok(seq) = self.session_seq(id) {
            self.seqs.free(seq)?;
        }
        if let Some(s) = self.session_mut(id) {
            s.kv = SessionKv::Dropped(tokens);
            s.unfed = None;
        }
        Ok(())
    }
}
