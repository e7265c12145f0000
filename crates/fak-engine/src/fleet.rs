//! Agent fleets: a shared prefix computed once, agents forked from it, and
//! a continuous-batching scheduler that runs every agent's turns.
//!
//! ```text
//!   prefix(P ids) ──► root sequence (computed once, published)
//!        │ fork (O(blocks))
//!        ├──► agent 0 ─ submit(result, D) ─► Ingest ──► Decode ×D ─► TurnDone
//!        ├──► agent 1 ─ ...                   │  chunks     │ 1 token / step
//!        └──► agent A-1                       ▼             ▼
//!                                  one forward per step, ≤ budget tokens:
//!                                  [decode tokens of every decoding agent]
//!                                  + [ingest chunks, oldest turn first]
//! ```
//!
//! A fleet is a thin client of the [`Engine`]: the prefix and each agent
//! are engine sessions, and a turn is one request appending to its
//! agent's session. The engine's scheduler puts decode tokens first
//! (round-robin when there are more decoders than the budget) and gives
//! the rest of the token budget to ingests in arrival order. A long ingest
//! is chunked over several passes, so it never holds decoders up for more
//! than one budget's worth of work, and agents at different turns, some
//! ingesting and some decoding, share every pass.
//!
//! A turn's last generated token is not fed to the model until the agent's
//! next turn (the session keeps it and feeds it first), so no forward pass
//! is spent on a token whose logits nobody reads. A turn generates exactly
//! its `decode` tokens: end-of-generation tokens do not stop it (the
//! benchmark protocol), which is why the fleet's engine has no tokenizer.

use std::collections::HashMap;
use std::ops::Range;
use std::time::{Duration, Instant};

use fak_kv::Tenant;
use fak_model::Model;

use crate::engine::{Engine, EngineConfig};
use crate::error::EngineError;
use crate::paged::PagedKvConfig;
use crate::request::{Context, Event, MaxTokens, Request, RequestId, SessionId, StopAt, StopRules};
use crate::sampling::SamplingParams;
use crate::seqs::{EvictMode, EvictReport, PrefixCache, Sequences};

/// Identifies an agent of a [`Fleet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AgentId(pub u32);

/// Sizes and policies of a [`Fleet`].
#[derive(Debug, Clone, Copy)]
pub struct FleetConfig {
    /// KV cache sizes.
    pub kv: PagedKvConfig,
    /// Most tokens in one forward pass (decode tokens first, then ingest
    /// chunks).
    pub token_budget: usize,
    /// Whether sequences reuse cached prefixes.
    pub prefix_cache: PrefixCache,
    /// Cache namespace of this fleet's sequences.
    pub tenant: Tenant,
    /// Whether decode verifies drafted tokens (the output is the same).
    pub speculative: crate::spec::Speculative,
}

/// Something that happened during a [`Fleet::step`].
#[derive(Debug, Clone, PartialEq)]
pub enum FleetEvent {
    /// An agent produced the first token of a turn; `ttft` runs from the
    /// turn's submission to the end of the pass that produced it.
    FirstToken {
        agent: AgentId,
        token: u32,
        ttft: Duration,
    },
    /// An agent finished its turn with these generated tokens.
    TurnDone { agent: AgentId, generated: Vec<u32> },
}

struct Agent {
    session: SessionId,
    sampling: SamplingParams,
    /// The turn in flight.
    turn: Option<RequestId>,
    turns: u64,
    generated: Vec<u32>,
    submitted: Instant,
}

/// Counters of a fleet's work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FleetCounters {
    /// Forward passes run.
    pub passes: u64,
    /// Tokens run through the model.
    pub tokens_computed: u64,
    /// Prefix tokens agents got by fork or cache instead of computing.
    pub tokens_reused: u64,
    /// Times a prefix was computed.
    pub prefix_evaluations: u64,
    /// Time inside the forward passes, by phase and pass kind.
    pub forward: fak_model::ForwardTimes,
    /// Draft tokens verified (speculative decoding).
    pub draft_tokens: u64,
    /// Of those, the ones accepted.
    pub accepted_draft_tokens: u64,
}

/// A fleet of agents over one model and one paged KV cache; driven by a
/// single owner (the engine thread).
pub struct Fleet<'m> {
    engine: Engine<'m>,
    agents: Vec<Agent>,
    by_request: HashMap<RequestId, AgentId>,
    tenant: Tenant,
    /// Events of agents' turns that ran while [`Fleet::prefix`] waited.
    pending: Vec<FleetEvent>,
    tokens_reused: u64,
    prefix_evaluations: u64,
}

impl<'m> Fleet<'m> {
    /// An empty fleet.
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] for unusable cache sizes.
    pub fn new(model: &'m Model, cfg: FleetConfig) -> Result<Fleet<'m>, EngineError> {
        let mut engine = Engine::new(
            model,
            None,
            EngineConfig {
                kv: cfg.kv,
                token_budget: cfg.token_budget,
                max_running: usize::MAX,
                max_waiting: None,
                n_ctx: cfg.kv.n_blocks.saturating_mul(cfg.kv.block_size),
                prefix_cache: cfg.prefix_cache,
                // A turn's results arrive together and are measured as a
                // whole: the fewest passes win.
                prefill: crate::engine::PrefillMix::Fill,
                mask: crate::engine::MaskMode::default(),
            },
        )?;
        engine.set_speculative(cfg.speculative);
        Ok(Fleet {
            engine,
            agents: Vec::new(),
            by_request: HashMap::new(),
            tenant: cfg.tenant,
            pending: Vec::new(),
            tokens_reused: 0,
            prefix_evaluations: 0,
        })
    }

    /// Work counters so far.
    pub fn counters(&self) -> FleetCounters {
        let s = self.engine.stats();
        FleetCounters {
            passes: s.passes,
            tokens_computed: s.tokens_computed,
            tokens_reused: self.tokens_reused,
            prefix_evaluations: self.prefix_evaluations,
            forward: s.forward,
            draft_tokens: s.spec_draft_tokens,
            accepted_draft_tokens: s.spec_accepted_tokens,
        }
    }

    /// The sequences (KV statistics).
    pub fn sequences(&self) -> &Sequences {
        self.engine.sequences()
    }

    /// Computes `ids` once into a new root session (reusing cached blocks
    /// of an equal prefix where the cache has them) and publishes it.
    /// Agents are then spawned from it with [`Fleet::spawn`].
    ///
    /// # Errors
    ///
    /// [`EngineError::EmptyPrompt`]; model and KV errors.
    pub fn prefix(&mut self, ids: &[u32]) -> Result<SessionId, EngineError> {
        if ids.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        let root = self.engine.create_session(self.tenant)?;
        let req = Request {
            context: Context::Session(root),
            tenant: self.tenant,
            ..Request::greedy(ids.to_vec(), 0)
        };
        let id = self.engine.add(req)?;
        let mut done = false;
        while !done {
            for ev in self.engine.step()? {
                match ev {
                    Event::Admitted {
                        id: r,
                        cached_tokens,
                        ..
                    } if r == id => {
                        self.tokens_reused += cached_tokens as u64;
                        if cached_tokens < ids.len() {
                            self.prefix_evaluations += 1;
                        }
                    }
                    Event::Finished { id: r, .. } if r == id => done = true,
                    Event::Failed { id: r, error } if r == id => return Err(error),
                    other => {
                        if let Some(e) = self.agent_event(other)? {
                            self.pending.push(e);
                        }
                    }
                }
            }
        }
        self.engine.publish_session(root)?;
        Ok(root)
    }

    /// A new agent forked from `root` (O(blocks)); with `None`, an agent
    /// with an empty context.
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSession`] for an unknown root.
    pub fn spawn(
        &mut self,
        root: Option<SessionId>,
        sampling: SamplingParams,
    ) -> Result<AgentId, EngineError> {
        let session = match root {
            Some(r) => {
                let s = self.engine.fork_session(r)?;
                self.tokens_reused += self.engine.session_tokens(s)?.len() as u64;
                s
            }
            None => self.engine.create_session(self.tenant)?,
        };
        self.agents.push(Agent {
            session,
            sampling,
            turn: None,
            turns: 0,
            generated: Vec::new(),
            submitted: Instant::now(),
        });
        Ok(AgentId((self.agents.len() - 1) as u32))
    }

    fn agent(&self, a: AgentId) -> Result<&Agent, EngineError> {
        self.agents
            .get(a.0 as usize)
            .ok_or(EngineError::UnknownSeq(a.0))
    }

    /// Starts a turn: the agent ingests `ids` (after its previous turn's
    /// last token), then generates exactly `decode` tokens (at least 1).
    /// Turn `k` samples with seed `sampling.seed + k`.
    ///
    /// # Errors
    ///
    /// [`EngineError::AgentBusy`] if the agent's previous turn is not
    /// done; [`EngineError::EmptyPrompt`] if there is nothing to ingest;
    /// the engine's checks of the request.
    pub fn submit(&mut self, a: AgentId, ids: &[u32], decode: usize) -> Result<(), EngineError> {
        let ag = self.agent(a)?;
        if ag.turn.is_some() {
            return Err(EngineError::AgentBusy(a.0));
        }
        let req = Request {
            prompt: ids.to_vec(),
            sampling: SamplingParams {
                seed: ag.sampling.seed.wrapping_add(ag.turns),
                ..ag.sampling
            },
            max_tokens: MaxTokens::Strict(decode.max(1)),
            stop: StopRules {
                eog: StopAt::Never,
                ..StopRules::default()
            },
            tenant: self.tenant,
            context: Context::Session(ag.session),
            ..Request::greedy(Vec::new(), 0)
        };
        let id = self.engine.add(req)?;
        self.by_request.insert(id, a);
        let ag = &mut self.agents[a.0 as usize];
        ag.turn = Some(id);
        ag.turns += 1;
        ag.generated.clear();
        ag.submitted = Instant::now();
        Ok(())
    }

    /// Whether every agent is idle and every event was returned.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.agents.iter().all(|a| a.turn.is_none())
    }

    /// The tokens an agent's context holds (its last generated token is
    /// fed at its next turn and is not counted until then).
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSeq`] for an unknown agent.
    pub fn context(&self, a: AgentId) -> Result<&[u32], EngineError> {
        self.engine.session_tokens(self.agent(a)?.session)
    }

    /// Removes tokens `span` of an idle agent's context; see
    /// [`EvictMode`]. No other agent changes.
    ///
    /// # Errors
    ///
    /// [`EngineError::AgentBusy`] while the agent is in a turn; as
    /// [`Sequences::evict`].
    pub fn evict(
        &mut self,
        a: AgentId,
        span: Range<usize>,
        mode: EvictMode,
    ) -> Result<EvictReport, EngineError> {
        let ag = self.agent(a)?;
        if ag.turn.is_some() {
            return Err(EngineError::AgentBusy(a.0));
        }
        self.engine.evict_session(ag.session, span, mode)
    }

    /// Runs one engine step and returns what happened to the agents. Does
    /// nothing (and returns no events) when every agent is idle.
    ///
    /// # Errors
    ///
    /// The first failed turn's error (the other agents keep going), or an
    /// engine error.
    pub fn step(&mut self) -> Result<Vec<FleetEvent>, EngineError> {
        let mut out = std::mem::take(&mut self.pending);
        for ev in self.engine.step()? {
            if let Some(e) = self.agent_event(ev)? {
                out.push(e);
            }
        }
        Ok(out)
    }

    /// An engine event as an agent's fleet event.
    fn agent_event(&mut self, ev: Event) -> Result<Option<FleetEvent>, EngineError> {
        let Some(&agent) = self.by_request.get(&ev.id()) else {
            return Ok(None);
        };
        let ag = &mut self.agents[agent.0 as usize];
        Ok(match ev {
            Event::Token { token, .. } => {
                ag.generated.push(token);
                (ag.generated.len() == 1).then(|| FleetEvent::FirstToken {
                    agent,
                    token,
                    ttft: ag.submitted.elapsed(),
                })
            }
            Event::Finished { id, .. } => {
                self.by_request.remove(&id);
                ag.turn = None;
                Some(FleetEvent::TurnDone {
                    agent,
                    generated: std::mem::take(&mut ag.generated),
                })
            }
            Event::Failed { id, error } => {
                self.by_request.remove(&id);
                ag.turn = None;
                return Err(error);
            }
            Event::Admitted { .. } => None,
        })
    }
}
