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
use crate::error::EngineError;
use crate::request::{RequestId, SessionId};
use crate::seqs::{EvictMode, EvictReport, PrefixCache};

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
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] if the KV store cannot make a sequence
    /// ([`crate::Sequences::create`]).
    pub fn create_session(&mut self, tenant: Tenant) -> Result<SessionId, EngineError> {
        let seq = self.seqs.create(tenant)?;
        let last_used = self.touch();
        Ok(self.insert_session(Session {
            kv: SessionKv::Resident(seq),
            tenant,
            unfed: None,
            busy: None,
            last_used,
        }))
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
    /// [`Sequences::evict`](crate::seqs::Sequences::evict).
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
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] if the dropped session's new sequence cannot be
    /// made; the session is left as it was.
    pub(super) fn claim_session(
        &mut self,
        id: SessionId,
        req: RequestId,
    ) -> Result<(), EngineError> {
        let last_used = self.touch();
        let tenant = match self.session(id) {
            Ok(s) => s.tenant,
            Err(_) => return Ok(()),
        };
        let needs_seq = matches!(self.session(id).map(|s| &s.kv), Ok(SessionKv::Dropped(_)));
        let fresh = needs_seq.then(|| self.seqs.create(tenant)).transpose()?;
        if let Some(s) = self.session_mut(id) {
            s.busy = Some(req);
            s.last_used = last_used;
            if let Some(seq) = fresh {
                s.kv = SessionKv::Resident(seq);
            }
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    use fak_model::{KvType, Model};

    use super::*;
    use crate::engine::EngineConfig;
    use crate::paged::PagedKvConfig;
    use crate::request::{Context, Event, Request, StopAt, Usage};

    fn model() -> Model {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../models/smollm2-135m-instruct-q8_0.gguf");
        assert!(
            p.exists(),
            "{} is missing: run scripts/fetch-models.sh",
            p.display()
        );
        let mut m = Model::load(&p).expect("load");
        m.set_threads(2).expect("two threads");
        m
    }

    fn ids(seed: u64, n: usize) -> Vec<u32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 33) % 49152) as u32
            })
            .collect()
    }

    fn turn(s: SessionId, prompt: &[u32], n: usize) -> Request {
        let mut r = Request::greedy(prompt.to_vec(), n);
        r.stop.eog = StopAt::Never;
        r.context = Context::Session(s);
        r
    }

    /// Steps until idle: each request's tokens and usage.
    fn drain(e: &mut Engine<'_>) -> HashMap<RequestId, (Vec<u32>, Option<Usage>)> {
        let mut out: HashMap<RequestId, (Vec<u32>, Option<Usage>)> = HashMap::new();
        while e.has_work() {
            for ev in e.step().expect("step") {
                match ev {
                    Event::Token { id, token, .. } => out.entry(id).or_default().0.push(token),
                    Event::Finished { id, usage, .. } => out.entry(id).or_default().1 = Some(usage),
                    Event::Failed { error, .. } => panic!("failed: {error}"),
                    Event::Admitted { .. } => {}
                }
            }
        }
        out
    }

    fn run(e: &mut Engine<'_>, reqs: Vec<Request>) -> Vec<(Vec<u32>, Usage)> {
        let ids: Vec<RequestId> = reqs.into_iter().map(|r| e.add(r).expect("add")).collect();
        let mut out = drain(e);
        ids.iter()
            .map(|id| {
                let (t, u) = out.remove(id).expect("events");
                (t, u.expect("finished"))
            })
            .collect()
    }

    #[test]
    fn dropped_sessions_recompute_identically_and_roll_back() {
        let m = model();
        let cfg = EngineConfig {
            kv: PagedKvConfig {
                block_size: 16,
                n_blocks: 64,
                kv_type: KvType::F16,
                window: crate::paged::KvWindow::Drop,
            },
            token_budget: 512,
            max_running: 4,
            max_waiting: None,
            n_ctx: 512,
            prefix_cache: PrefixCache::On,
            prefill: crate::engine::SERIAL_PREFILL,
            mask: crate::engine::MaskMode::default(),
        };
        let mut e = Engine::new(&m, None, cfg).expect("engine");
        let (p1, p2, p3) = (ids(1, 40), ids(2, 9), ids(3, 7));
        let (s, r) = (
            e.create_session(Tenant(0)).unwrap(),
            e.create_session(Tenant(0)).unwrap(),
        );
        let o = run(&mut e, vec![turn(s, &p1, 6), turn(r, &p1, 6)]);
        assert_eq!(o[0].0, o[1].0);
        let b = e.session_blocks(s).expect("blocks");
        assert_eq!(b.residency, Residency::Resident);
        assert!(b.owned > 0);
        let logical: Vec<u32> = [&p1[..], &o[0].0[..]].concat();

        assert!(e.drop_session_kv(s).expect("drop"));
        assert!(!e.drop_session_kv(s).expect("drop again"));
        assert_eq!(
            e.session_blocks(s).expect("blocks").residency,
            Residency::Dropped
        );
        assert_eq!(e.session_tokens(s).expect("tokens"), &logical[..]);
        assert_eq!(e.session_unfed(s).expect("unfed"), None);

        // A cancelled request leaves it dropped, with the same tokens.
        let id = e.add(turn(s, &p2, 6)).expect("add");
        e.cancel(id).expect("cancel");
        drain(&mut e);
        assert_eq!(
            e.session_blocks(s).expect("blocks").residency,
            Residency::Dropped
        );
        assert_eq!(e.session_tokens(s).expect("tokens"), &logical[..]);

        // The next request recomputes (the prefix cache gives back whole
        // blocks) and continues exactly as the resident twin does.
        let o = run(&mut e, vec![turn(s, &p2, 6), turn(r, &p2, 6)]);
        assert_eq!(o[0].0, o[1].0);
        assert!(o[0].1.cached_tokens >= 32, "{:?}", o[0].1);
        assert!(o[0].1.cached_tokens < o[1].1.cached_tokens);
        assert_eq!(o[0].1.prompt_tokens, o[1].1.prompt_tokens);
        assert_eq!(
            e.session_blocks(s).expect("blocks").residency,
            Residency::Resident
        );

        // A restored session (tokens only) continues the same way, and an
        // exact eviction from a dropped one is a cut of its tokens.
        let mut all = e.session_tokens(r).expect("tokens").to_vec();
        all.extend(e.session_unfed(r).expect("unfed"));
        let q = e.restore_session(Tenant(0), all.clone()).expect("restore");
        let o = run(&mut e, vec![turn(q, &p3, 5), turn(r, &p3, 5)]);
        assert_eq!(o[0].0, o[1].0);
        let f = e.restore_session(Tenant(0), all.clone()).expect("restore");
        let rep = e.evict_session(f, 40..46, EvictMode::Exact).expect("evict");
        assert_eq!((rep.removed, rep.recomputed), (6, 0));
        let cut: Vec<u32> = [&all[..40], &all[46..]].concat();
        assert_eq!(e.session_tokens(f).expect("tokens"), &cut[..]);
        assert!(matches!(
            e.restore_session(Tenant(0), vec![49152]),
            Err(EngineError::TokenOutOfRange { .. })
        ));
        assert!(matches!(
            e.add(Request {
                tenant: Tenant(1),
                ..turn(f, &p3, 1)
            }),
            Err(EngineError::UnknownSession(_))
        ));
    }
}
