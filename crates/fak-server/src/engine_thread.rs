//! The engine thread: the one OS thread that owns the model, the KV cache
//! and the [`Engine`]. Handlers reach it only through [`EngineHandle`].
//!
//! ```text
//!   loop {
//!     idle?  block on the command channel      busy?  drain it without waiting
//!     Submit → engine.add → reply Ok(id) | Err(typed error)
//!     Session(op) → create / restore / fork / free / publish / evict /
//!       info on the engine's sessions → reply (no forward pass, except an
//!       exact eviction's recomputed tail)
//!     a request whose event channel closed (client gone) → engine.cancel
//!     engine.step() → route events; observe TTFT / ITL / e2e / queue time
//!     gauges and counters ← engine.stats()
//!     --kv-events: prefix events → the publisher's queue (never waits)
//!   }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use std::ops::Range;

use fak_engine::{
    Engine, EngineConfig, EngineError, Event, EvictMode, FinishReason, KvBudget, PagedKvConfig,
    PrefixCache, Request, RequestId, SessionBlocks, SessionId,
};
use fak_kv::Tenant;
use fak_model::Model;
use fak_tokenizer::{ChatTemplate, Tokenizer};
use tokio::sync::{mpsc, oneshot};

use crate::config::ServerConfig;
use crate::kv_events::EventSink;
use crate::metrics::{set_counter, CacheConfig, Metrics};

/// What the loaded model offers the handlers.
#[derive(Clone)]
pub struct Loaded {
    /// The tokenizer (shared: handlers tokenize and render).
    pub tok: Arc<Tokenizer>,
    /// The chat template, if the file has one.
    pub template: Option<Arc<ChatTemplate>>,
    /// Context per sequence.
    pub n_ctx: usize,
    /// KV blocks.
    pub n_blocks: usize,
    /// Tokens per block.
    pub block_size: usize,
}

enum Command {
    Submit {
        req: Box<Request>,
        events: mpsc::UnboundedSender<Event>,
        reply: oneshot::Sender<Result<RequestId, EngineError>>,
        arrived: Instant,
    },
    Session {
        op: SessionOp,
        reply: oneshot::Sender<Result<SessionReply, EngineError>>,
    },
    Shutdown,
}

/// An operation on an engine session.
#[derive(Debug)]
pub enum SessionOp {
    /// A new, empty session.
    Create(Tenant),
    /// A session holding tokens, KV computed at its next request.
    Restore(Tenant, Vec<u32>),
    /// A copy-on-write fork.
    Fork(SessionId),
    /// Drop it.
    Free(SessionId),
    /// Offer its full blocks to the prefix cache.
    Publish(SessionId),
    /// Remove a span of its KV tokens.
    Evict(SessionId, Range<usize>, EvictMode),
    /// Its tokens and blocks.
    Info(SessionId),
}

/// What a session operation gives back.
#[derive(Debug)]
pub enum SessionReply {
    /// The new session.
    Id(SessionId),
    /// Done.
    Done,
    /// Tokens removed and recomputed.
    Evicted { removed: usize, recomputed: usize },
    /// The session's state.
    Info(SessionState),
}

/// A session as the engine holds it.
#[derive(Debug, Clone)]
pub struct SessionState {
    /// Its tokens in its KV (or all of them, for a dropped session).
    pub kv_tokens: Vec<u32>,
    /// The last sampled token, fed at its next request.
    pub unfed: Option<u32>,
    /// Its blocks.
    pub blocks: SessionBlocks,
}

impl SessionState {
    /// Every token of the session, the unfed one last.
    pub fn tokens(&self) -> Vec<u32> {
        let mut t = self.kv_tokens.clone();
        t.extend(self.unfed);
        t
    }
}

/// The handlers' side of the engine thread.
#[derive(Clone)]
pub struct EngineHandle {
    tx: mpsc::UnboundedSender<Command>,
    thread: Arc<Mutex<Option<std::thread::JoinHandle<()>>>>,
}

/// Why a submission did not reach the engine.
pub enum SubmitError {
    /// The engine refused the request.
    Engine(EngineError),
    /// The engine thread is gone.
    Stopped,
}

impl EngineHandle {
    /// Hands a request to the engine; returns its id and its event stream.
    pub async fn submit(
        &self,
        req: Request,
        arrived: Instant,
    ) -> Result<(RequestId, mpsc::UnboundedReceiver<Event>), SubmitError> {
        let (etx, erx) = mpsc::unbounded_channel();
        let (rtx, rrx) = oneshot::channel();
        self.tx
            .send(Command::Submit {
                req: Box::new(req),
                events: etx,
                reply: rtx,
                arrived,
            })
            .map_err(|_| SubmitError::Stopped)?;
        match rrx.await {
            Ok(Ok(id)) => Ok((id, erx)),
            Ok(Err(e)) => Err(SubmitError::Engine(e)),
            Err(_) => Err(SubmitError::Stopped),
        }
    }

    /// Runs a session operation on the engine thread.
    pub async fn session(&self, op: SessionOp) -> Result<SessionReply, SubmitError> {
        let (rtx, rrx) = oneshot::channel();
        self.tx
            .send(Command::Session { op, reply: rtx })
            .map_err(|_| SubmitError::Stopped)?;
        match rrx.await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(SubmitError::Engine(e)),
            Err(_) => Err(SubmitError::Stopped),
        }
    }

    /// Stops the thread (after the server has drained) and waits for it.
    pub fn shutdown(&self) {
        let _ = self.tx.send(Command::Shutdown);
        let handle = self.thread.lock().ok().and_then(|mut g| g.take());
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

/// Starts the engine thread; it loads the model and reports on `loaded`.
pub fn spawn(
    cfg: ServerConfig,
    metrics: Arc<Metrics>,
    sink: Option<EventSink>,
) -> (EngineHandle, oneshot::Receiver<Result<Loaded, String>>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (ltx, lrx) = oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("fak-engine".into())
        .spawn(move || engine_main(cfg, metrics, sink, rx, ltx))
        .ok();
    let handle = EngineHandle {
        tx,
        thread: Arc::new(Mutex::new(thread)),
    };
    (handle, lrx)
}

fn load(
    cfg: &ServerConfig,
) -> Result<(Model, Tokenizer, Option<ChatTemplate>, EngineConfig), String> {
    let mut model =
        Model::load(&cfg.model).map_err(|e| format!("loading {}: {e}", cfg.model.display()))?;
    if let Some(t) = cfg.threads {
        model
            .set_threads(t)
            .map_err(|e| format!("--threads {t}: {e}"))?;
    }
    let tok = Tokenizer::from_gguf(model.gguf())
        .map_err(|e| format!("tokenizer of {}: {e}", cfg.model.display()))?;
    let template = ChatTemplate::from_gguf(model.gguf())
        .map_err(|e| format!("chat template of {}: {e}", cfg.model.display()))?;
    let trained = model.config().n_ctx_train;
    let n_ctx = cfg.ctx.unwrap_or(trained);
    if n_ctx == 0 || n_ctx > trained {
        return Err(format!(
            "--ctx {n_ctx} must be within 1..={trained}, the model's trained context"
        ));
    }
    let budget = match cfg.kv_mem_mib {
        Some(mib) => KvBudget::Bytes(mib.saturating_mul(1 << 20)),
        None => KvBudget::Sequences {
            n_seq: cfg.max_running,
            n_ctx,
        },
    };
    let kv = PagedKvConfig::for_budget(model.config(), cfg.kv_type, cfg.block_size, budget)
        .map_err(|e| format!("--kv-mem {e}"))?
        .with_window(cfg.kv_window);
    let ecfg = EngineConfig {
        kv,
        token_budget: cfg.token_budget.max(1),
        max_running: cfg.max_running.max(1),
        max_waiting: Some(cfg.max_waiting),
        n_ctx,
        prefix_cache: PrefixCache::On,
        prefill: cfg.prefill,
        mask: cfg.mask,
    };
    Ok((model, tok, template, ecfg))
}

/// The draft model, on the target's thread count.
fn load_draft(cfg: &ServerConfig) -> Result<Option<Model>, String> {
    let Some(path) = &cfg.draft_model else {
        return Ok(None);
    };
    let mut m = Model::load(path).map_err(|e| format!("loading {}: {e}", path.display()))?;
    if let Some(t) = cfg.threads {
        m.set_threads(t)
            .map_err(|e| format!("--threads {t}: {e}"))?;
    }
    Ok(Some(m))
}

struct Track {
    tx: mpsc::UnboundedSender<Event>,
    arrived: Instant,
    last: Option<Instant>,
}

fn engine_main(
    cfg: ServerConfig,
    metrics: Arc<Metrics>,
    mut sink: Option<EventSink>,
    mut rx: mpsc::UnboundedReceiver<Command>,
    loaded: oneshot::Sender<Result<Loaded, String>>,
) {
    let (model, tok, template, ecfg) = match load(&cfg) {
        Ok(x) => x,
        Err(e) => {
            let _ = loaded.send(Err(e));
            return;
        }
    };
    let draft = match load_draft(&cfg) {
        Ok(d) => d,
        Err(e) => {
            let _ = loaded.send(Err(e));
            return;
        }
    };
    let tok = Arc::new(tok);
    let mut engine = match Engine::new(&model, Some(tok.as_ref()), ecfg) {
        Ok(e) => e,
        Err(e) => {
            let _ = loaded.send(Err(format!("KV cache: {e}")));
            return;
        }
    };
    engine.set_speculative(cfg.speculative);
    // The first constrained request (a tool call, a JSON schema) would
    // otherwise build the grammar compiler on this thread and stall every
    // running sequence meanwhile.
    if let Err(e) = engine.prepare_constraints() {
        eprintln!("fak serve: constrained requests will fail: {e}");
    }
    if let Some(d) = &draft {
        if let Err(e) = engine.set_draft_model(d, cfg.draft) {
            let _ = loaded.send(Err(format!("--draft-model: {e}")));
            return;
        }
    }
    metrics
        .cache_config
        .get_or_create(&CacheConfig {
            block_size: ecfg.kv.block_size.to_string(),
            num_gpu_blocks: ecfg.kv.n_blocks.to_string(),
        })
        .set(1);
    let info = Loaded {
        tok: tok.clone(),
        template: template.map(Arc::new),
        n_ctx: ecfg.n_ctx,
        n_blocks: ecfg.kv.n_blocks,
        block_size: ecfg.kv.block_size,
    };
    if let Some(s) = &mut sink {
        // The first batch (seq 0) says the replica holds nothing.
        engine.enable_kv_events();
        s.flush(&mut engine);
    }
    if loaded.send(Ok(info)).is_err() {
        return;
    }
    let mut tracks: HashMap<RequestId, Track> = HashMap::new();
    loop {
        // Commands: wait for one when idle, take what is there when busy.
        let first = if engine.has_work() {
            rx.try_recv().ok()
        } else {
            match rx.blocking_recv() {
                Some(c) => Some(c),
                None => break,
            }
        };
        let mut next = first;
        let mut stop = false;
        while let Some(cmd) = next {
            match cmd {
                Command::Submit {
                    req,
                    events,
                    reply,
                    arrived,
                } => match engine.add(*req) {
                    Ok(id) => {
                        tracks.insert(
                            id,
                            Track {
                                tx: events,
                                arrived,
                                last: None,
                            },
                        );
                        if reply.send(Ok(id)).is_err() {
                            // The handler is gone already.
                            let _ = engine.cancel(id);
                            tracks.remove(&id);
                        }
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                },
                Command::Session { op, reply } => {
                    let _ = reply.send(session_op(&mut engine, op));
                    if let Some(s) = &mut sink {
                        s.flush(&mut engine);
                    }
                }
                Command::Shutdown => stop = true,
            }
            next = rx.try_recv().ok();
        }
        if stop {
            break;
        }
        // A closed event channel means the client went away.
        let gone: Vec<RequestId> = tracks
            .iter()
            .filter(|(_, t)| t.tx.is_closed())
            .map(|(&id, _)| id)
            .collect();
        for id in gone {
            let _ = engine.cancel(id);
            tracks.remove(&id);
        }
        // Requests just queued count as waiting while the step runs (a
        // long prefill step would hide them from a router until it ends).
        publish(&engine, &metrics);
        let events = match engine.step() {
            Ok(ev) => ev,
            Err(e) => {
                // An engine bookkeeping failure: fail everything in flight
                // rather than serve from a broken state.
                eprintln!("fak serve: engine error: {e}");
                for (id, t) in tracks.drain() {
                    let _ = t.tx.send(Event::Failed {
                        id,
                        error: EngineError::Stopped(e.to_string()),
                    });
                }
                break;
            }
        };
        // Before any event goes out: a client that has its answer sees
        // gauges and counters that include this step, and a router the
        // prefixes it left behind.
        publish(&engine, &metrics);
        if let Some(s) = &mut sink {
            s.flush(&mut engine);
        }
        let now = Instant::now();
        for ev in events {
            let id = ev.id();
            let Some(t) = tracks.get_mut(&id) else {
                continue;
            };
            let end = match &ev {
                Event::Admitted { queued, .. } => {
                    metrics.queue_time.observe(queued.as_secs_f64());
                    false
                }
                Event::Token { .. } => {
                    match t.last {
                        None => metrics.ttft.observe((now - t.arrived).as_secs_f64()),
                        Some(l) => metrics.itl.observe((now - l).as_secs_f64()),
                    }
                    t.last = Some(now);
                    false
                }
                Event::Finished { reason, .. } => {
                    metrics.e2e.observe((now - t.arrived).as_secs_f64());
                    metrics.finished(match reason {
                        FinishReason::Cancelled => "abort",
                        r => r.openai(),
                    });
                    true
                }
                Event::Failed { error, .. } => {
                    if matches!(error, EngineError::ConstraintFailed(_)) {
                        metrics.constraint_failures.inc();
                    }
                    metrics.finished("error");
                    true
                }
            };
            if t.tx.send(ev).is_err() {
                let _ = engine.cancel(id);
                tracks.remove(&id);
                continue;
            }
            if end {
                tracks.remove(&id);
            }
        }
    }
}

fn session_op(engine: &mut Engine, op: SessionOp) -> Result<SessionReply, EngineError> {
    Ok(match op {
        SessionOp::Create(t) => SessionReply::Id(engine.create_session(t)?),
        SessionOp::Restore(t, tokens) => SessionReply::Id(engine.restore_session(t, tokens)?),
        SessionOp::Fork(s) => SessionReply::Id(engine.fork_session(s)?),
        SessionOp::Free(s) => {
            engine.free_session(s)?;
            SessionReply::Done
        }
        SessionOp::Publish(s) => {
            engine.publish_session(s)?;
            SessionReply::Done
        }
        SessionOp::Evict(s, span, mode) => {
            let r = engine.evict_session(s, span, mode)?;
            SessionReply::Evicted {
                removed: r.removed,
                recomputed: r.recomputed,
            }
        }
        SessionOp::Info(s) => SessionReply::Info(SessionState {
            kv_tokens: engine.session_tokens(s)?.to_vec(),
            unfed: engine.session_unfed(s)?,
            blocks: engine.session_blocks(s)?,
        }),
    })
}

/// Gauges and counters from the engine's statistics.
fn publish(engine: &Engine, metrics: &Metrics) {
    let s = engine.stats();
    metrics.running.set(s.running as i64);
    metrics.waiting.set(s.waiting as i64);
    metrics.kv_usage.set(s.kv_usage);
    set_counter(&metrics.prefix_queries, s.prefix_queries_tokens);
    set_counter(&metrics.prefix_hits, s.prefix_hits_tokens);
    set_counter(&metrics.prompt_tokens, s.prompt_tokens);
    set_counter(&metrics.generation_tokens, s.generation_tokens);
    set_counter(&metrics.preemptions, s.preemptions);
    metrics.sessions.set(s.sessions as i64);
    set_counter(&metrics.session_drops, s.sessions_dropped);
    set_counter(&metrics.forward_passes, s.passes);
    set_counter(&metrics.tokens_computed, s.tokens_computed);
    set_counter(&metrics.spec_drafts, s.spec_drafts);
    set_counter(&metrics.spec_draft_tokens, s.spec_draft_tokens);
    set_counter(&metrics.spec_accepted_tokens, s.spec_accepted_tokens);
    set_counter(&metrics.mask_workers_started, s.mask_workers_started);
}
