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
//! Decoding agents always get their token into the next forward pass; the
//! rest of the token budget goes to ingests in arrival order. A long ingest
//! is chunked over several passes, so it never holds decoders up for more
//! than one budget's worth of work, and agents at different turns, some
//! ingesting and some decoding, share every pass.
//!
//! A turn's last generated token is not fed to the model until the agent's
//! next turn (it is prepended to that turn's ingest), so no forward pass is
//! spent on a token whose logits nobody reads.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::{Duration, Instant};

use fak_kv::Tenant;
use fak_model::{LogitsWanted, Model, SeqId};

use crate::paged::PagedKvConfig;
use crate::sampling::{Sampler, SamplingParams};
use crate::seqs::{Append, EvictMode, EvictReport, PrefixCache, Sequences};
use crate::EngineError;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Ingest,
    Decode,
}

struct Agent {
    seq: SeqId,
    sampler: Sampler,
    phase: Phase,
    /// Tokens still to ingest this turn.
    pending: VecDeque<u32>,
    /// Generated but not yet fed (the last token of the previous step or turn).
    unfed: Option<u32>,
    decode_left: usize,
    generated: Vec<u32>,
    submitted: Instant,
    /// Order of submission (ingest priority).
    ticket: u64,
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
}

/// A fleet of agents over one model and one paged KV cache; driven by a
/// single owner (the engine thread).
pub struct Fleet<'m> {
    model: &'m Model,
    seqs: Sequences,
    agents: Vec<Agent>,
    budget: usize,
    tenant: Tenant,
    next_ticket: u64,
    counters: FleetCounters,
}

impl<'m> Fleet<'m> {
    /// An empty fleet.
    ///
    /// # Errors
    ///
    /// [`EngineError::Kv`] for unusable cache sizes.
    pub fn new(model: &'m Model, cfg: FleetConfig) -> Result<Fleet<'m>, EngineError> {
        Ok(Fleet {
            model,
            seqs: Sequences::new(model, cfg.kv, cfg.prefix_cache, cfg.token_budget)?,
            agents: Vec::new(),
            budget: cfg.token_budget.max(1),
            tenant: cfg.tenant,
            next_ticket: 0,
            counters: FleetCounters::default(),
        })
    }

    /// Work counters so far.
    pub fn counters(&self) -> FleetCounters {
        self.counters
    }

    /// The sequences (KV statistics).
    pub fn sequences(&self) -> &Sequences {
        &self.seqs
    }

    /// Computes `ids` once into a new root sequence (reusing cached blocks
    /// of an equal prefix where the cache has them) and publishes it.
    /// Agents are then spawned from it with [`Fleet::spawn`].
    ///
    /// # Errors
    ///
    /// [`EngineError::EmptyPrompt`]; model and KV errors.
    pub fn prefix(&mut self, ids: &[u32]) -> Result<SeqId, EngineError> {
        if ids.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        let root = self.seqs.create(self.tenant);
        let reused = self.seqs.attach_prefix(root, ids)?;
        let rest = &ids[reused..];
        self.counters.tokens_reused += reused as u64;
        if !rest.is_empty() {
            self.seqs.step(
                self.model,
                &[Append {
                    seq: root,
                    ids: rest,
                    logits: LogitsWanted::No,
                }],
            )?;
            self.counters.tokens_computed += rest.len() as u64;
            self.counters.passes += rest.len().div_ceil(self.budget) as u64;
            self.counters.prefix_evaluations += 1;
        }
        self.seqs.publish(root)?;
        Ok(root)
    }

    /// A new agent forked from `root` (O(blocks)); with `None`, an agent
    /// with an empty context.
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSeq`] for an unknown root.
    pub fn spawn(
        &mut self,
        root: Option<SeqId>,
        sampling: SamplingParams,
    ) -> Result<AgentId, EngineError> {
        let seq = match root {
            Some(r) => {
                let s = self.seqs.fork(r)?;
                self.counters.tokens_reused += self.seqs.tokens(s)?.len() as u64;
                s
            }
            None => self.seqs.create(self.tenant),
        };
        self.agents.push(Agent {
            seq,
            sampler: Sampler::new(sampling),
            phase: Phase::Idle,
            pending: VecDeque::new(),
            unfed: None,
            decode_left: 0,
            generated: Vec::new(),
            submitted: Instant::now(),
            ticket: 0,
        });
        Ok(AgentId((self.agents.len() - 1) as u32))
    }

    fn agent(&mut self, a: AgentId) -> Result<&mut Agent, EngineError> {
        self.agents
            .get_mut(a.0 as usize)
            .ok_or(EngineError::UnknownSeq(a.0))
    }

    /// Starts a turn: the agent ingests `ids` (after its previous turn's
    /// last token), then generates `decode` tokens (at least 1).
    ///
    /// # Errors
    ///
    /// [`EngineError::AgentBusy`] if the agent's previous turn is not
    /// done; [`EngineError::EmptyPrompt`] if there is nothing to ingest.
    pub fn submit(&mut self, a: AgentId, ids: &[u32], decode: usize) -> Result<(), EngineError> {
        let ticket = self.next_ticket;
        let ag = self.agent(a)?;
        if ag.phase != Phase::Idle {
            return Err(EngineError::AgentBusy(a.0));
        }
        ag.pending.clear();
        ag.pending.extend(ag.unfed.take());
        ag.pending.extend(ids.iter().copied());
        if ag.pending.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        ag.phase = Phase::Ingest;
        ag.decode_left = decode.max(1);
        ag.generated.clear();
        ag.submitted = Instant::now();
        ag.ticket = ticket;
        self.next_ticket += 1;
        Ok(())
    }

    /// Whether every agent is idle.
    pub fn is_idle(&self) -> bool {
        self.agents.iter().all(|a| a.phase == Phase::Idle)
    }

    /// The tokens an agent's context holds (its last generated token is
    /// fed at its next turn and is not counted until then).
    ///
    /// # Errors
    ///
    /// [`EngineError::UnknownSeq`] for an unknown agent.
    pub fn context(&self, a: AgentId) -> Result<&[u32], EngineError> {
        let ag = self
            .agents
            .get(a.0 as usize)
            .ok_or(EngineError::UnknownSeq(a.0))?;
        self.seqs.tokens(ag.seq)
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
        if ag.phase != Phase::Idle {
            return Err(EngineError::AgentBusy(a.0));
        }
        let seq = ag.seq;
        let rep = self.seqs.evict(self.model, seq, span, mode)?;
        self.counters.tokens_computed += rep.recomputed as u64;
        Ok(rep)
    }

    /// Runs one forward pass of the scheduler and returns what happened.
    /// Does nothing (and returns no events) when every agent is idle.
    ///
    /// # Errors
    ///
    /// Model and KV errors (e.g. the cache is full); the agents of the
    /// failed pass keep their state, so the caller may free work and retry.
    pub fn step(&mut self) -> Result<Vec<FleetEvent>, EngineError> {
        let mut budget = self.budget;
        // (agent index, token ids, finishes its ingest / is a decode)
        let mut plan: Vec<(usize, Vec<u32>, bool)> = Vec::new();
        for (i, ag) in self.agents.iter().enumerate() {
            if budget == 0 {
                break;
            }
            if ag.phase == Phase::Decode {
                if let Some(t) = ag.unfed {
                    plan.push((i, vec![t], true));
                    budget -= 1;
                }
            }
        }
        let mut ingesting: Vec<usize> = (0..self.agents.len())
            .filter(|&i| self.agents[i].phase == Phase::Ingest)
            .collect();
        ingesting.sort_by_key(|&i| self.agents[i].ticket);
        for i in ingesting {
            if budget == 0 {
                break;
            }
            let ag = &self.agents[i];
            let n = ag.pending.len().min(budget);
            let chunk: Vec<u32> = ag.pending.iter().take(n).copied().collect();
            plan.push((i, chunk, n == ag.pending.len()));
            budget -= n;
        }
        if plan.is_empty() {
            return Ok(Vec::new());
        }
        let items: Vec<Append<'_>> = plan
            .iter()
            .map(|(i, ids, last)| Append {
                seq: self.agents[*i].seq,
                ids,
                logits: if *last {
                    LogitsWanted::Yes
                } else {
                    LogitsWanted::No
                },
            })
            .collect();
        let mut picked: Vec<Option<u32>> = vec![None; plan.len()];
        {
            let agents = &mut self.agents;
            self.seqs.step_with(self.model, &items, |k, logits| {
                if let Some((i, _, _)) = plan.get(k) {
                    if let Some(ag) = agents.get_mut(*i) {
                        picked[k] = ag.sampler.sample(logits);
                    }
                }
            })?;
        }
        let n_tokens: usize = plan.iter().map(|(_, ids, _)| ids.len()).sum();
        self.counters.passes += 1;
        self.counters.tokens_computed += n_tokens as u64;
        let now = Instant::now();
        let mut events = Vec::new();
        for ((i, ids, last), tok) in plan.into_iter().zip(picked) {
            let ag = &mut self.agents[i];
            let id = AgentId(i as u32);
            match ag.phase {
                Phase::Ingest => {
                    ag.pending.drain(..ids.len());
                    if !last {
                        continue;
                    }
                    let t = tok.ok_or(EngineError::NoLogits)?;
                    events.push(FleetEvent::FirstToken {
                        agent: id,
                        token: t,
                        ttft: now.duration_since(ag.submitted),
                    });
                    ag.phase = Phase::Decode;
                    Self::accept(ag, id, t, &mut events);
                }
                Phase::Decode => {
                    ag.unfed = None;
                    let t = tok.ok_or(EngineError::NoLogits)?;
                    Self::accept(ag, id, t, &mut events);
                }
                Phase::Idle => {}
            }
        }
        Ok(events)
    }

    /// Records a generated token; ends the turn after the last one.
    fn accept(ag: &mut Agent, id: AgentId, t: u32, events: &mut Vec<FleetEvent>) {
        ag.generated.push(t);
        ag.unfed = Some(t);
        ag.decode_left = ag.decode_left.saturating_sub(1);
        if ag.decode_left == 0 {
            ag.phase = Phase::Idle;
            events.push(FleetEvent::TurnDone {
                agent: id,
                generated: std::mem::take(&mut ag.generated),
            });
        }
    }
}
