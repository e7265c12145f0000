//! Prometheus metrics under the names that vLLM exports, which the Gateway
//! API Inference Extension's model-server protocol and llm-d's router read
//! (see deploy/README.md), so fak replicas pool behind them unchanged.
//!
//! Gauges and counters are set by the engine thread after every step;
//! histograms are observed there as request events happen.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// `finished_reason` label of `vllm:request_success_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Reason {
    /// `stop`, `length`, `abort` or `error`.
    pub finished_reason: String,
}

/// Labels of `vllm:cache_config_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheConfig {
    /// Tokens per KV block.
    pub block_size: String,
    /// KV blocks in the pool (vLLM's name; here they live in host memory).
    pub num_gpu_blocks: String,
}

/// Every metric `/metrics` serves.
pub struct Metrics {
    registry: Registry,
    pub running: Gauge,
    pub waiting: Gauge,
    pub kv_usage: Gauge<f64, AtomicU64>,
    pub cache_config: Family<CacheConfig, Gauge>,
    pub prefix_queries: Counter,
    pub prefix_hits: Counter,
    pub prompt_tokens: Counter,
    pub generation_tokens: Counter,
    pub preemptions: Counter,
    pub sessions: Gauge,
    pub session_drops: Counter,
    pub forward_passes: Counter,
    pub tokens_computed: Counter,
    pub mask_workers_started: Counter,
    pub constraint_failures: Counter,
    pub spec_drafts: Counter,
    pub spec_draft_tokens: Counter,
    pub spec_accepted_tokens: Counter,
    pub kv_events_batches: Counter,
    pub kv_events_dropped: Counter,
    pub kv_events_restarts: Counter,
    pub kv_events_replays: Counter,
    pub success: Family<Reason, Counter>,
    pub ttft: Histogram,
    pub itl: Histogram,
    pub e2e: Histogram,
    pub queue_time: Histogram,
}

impl Metrics {
    /// All metrics, registered and zero.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let running = Gauge::default();
        let waiting = Gauge::default();
        let kv_usage = Gauge::<f64, AtomicU64>::default();
        let cache_config = Family::<CacheConfig, Gauge>::default();
        let prefix_queries = Counter::default();
        let prefix_hits = Counter::default();
        let prompt_tokens = Counter::default();
        let generation_tokens = Counter::default();
        let preemptions = Counter::default();
        let sessions = Gauge::default();
        let session_drops = Counter::default();
        let forward_passes = Counter::default();
        let tokens_computed = Counter::default();
        let mask_workers_started = Counter::default();
        let constraint_failures = Counter::default();
        let spec_drafts = Counter::default();
        let spec_draft_tokens = Counter::default();
        let spec_accepted_tokens = Counter::default();
        let kv_events_batches = Counter::default();
        let kv_events_dropped = Counter::default();
        let kv_events_restarts = Counter::default();
        let kv_events_replays = Counter::default();
        let success = Family::<Reason, Counter>::default();
        // 1 ms .. ~65 s.
        let secs = || Histogram::new(exponential_buckets(0.001, 2.0, 17));
        let (ttft, itl, e2e, queue_time) = (secs(), secs(), secs(), secs());
        let r = &mut registry;
        r.register(
            "vllm:num_requests_running",
            "Requests admitted and not finished",
            running.clone(),
        );
        r.register(
            "vllm:num_requests_waiting",
            "Requests waiting for KV blocks",
            waiting.clone(),
        );
        r.register(
            "vllm:kv_cache_usage_perc",
            "Fraction of KV blocks in use (0-1)",
            kv_usage.clone(),
        );
        r.register(
            "vllm:cache_config_info",
            "KV cache configuration",
            cache_config.clone(),
        );
        r.register(
            "vllm:prefix_cache_queries",
            "Prompt tokens looked up in the prefix cache",
            prefix_queries.clone(),
        );
        r.register(
            "vllm:prefix_cache_hits",
            "Prompt tokens found in the prefix cache",
            prefix_hits.clone(),
        );
        r.register(
            "vllm:prompt_tokens",
            "Prompt tokens of admitted requests",
            prompt_tokens.clone(),
        );
        r.register(
            "vllm:generation_tokens",
            "Tokens generated",
            generation_tokens.clone(),
        );
        r.register(
            "vllm:num_preemptions",
            "Requests preempted (KV freed, recomputed later)",
            preemptions.clone(),
        );
        r.register(
            "fak:sessions",
            "Agent sessions held by the engine (resident or dropped)",
            sessions.clone(),
        );
        r.register(
            "fak:session_kv_drops",
            "Idle sessions whose KV rows were dropped under pressure (recomputed at next use)",
            session_drops.clone(),
        );
        r.register(
            "fak:forward_passes",
            "Forward passes run (one pass carries every running request's tokens for a step)",
            forward_passes.clone(),
        );
        r.register(
            "fak:tokens_computed",
            "Tokens run through the model (prompt tokens not found in the prefix cache, \
             recomputed tokens and each decode step's sampled token); over fak:forward_passes it is the \
             mean batch size",
            tokens_computed.clone(),
        );
        r.register(
            "fak:mask_workers_started",
            "Mask worker threads started (--mask-mode overlap): the first, plus each \
             replacement started after a worker died",
            mask_workers_started.clone(),
        );
        r.register(
            "fak:constraint_failures",
            "Requests failed because their grammar failed while generating (a mask that \
             failed or panicked, or a mask worker that died holding the request)",
            constraint_failures.clone(),
        );
        r.register(
            "vllm:spec_decode_num_drafts",
            "Drafts verified (--speculative): one per sequence per pass that carried draft tokens",
            spec_drafts.clone(),
        );
        r.register(
            "vllm:spec_decode_num_draft_tokens",
            "Draft tokens verified",
            spec_draft_tokens.clone(),
        );
        r.register(
            "vllm:spec_decode_num_accepted_tokens",
            "Draft tokens accepted (each one a pass its sequence did not need)",
            spec_accepted_tokens.clone(),
        );
        r.register(
            "fak:kv_events_batches",
            "KV-cache event batches published (--kv-events)",
            kv_events_batches.clone(),
        );
        r.register(
            "fak:kv_events_dropped",
            "KV-cache events dropped because the publisher's queue was full (the event log \
             restarts after a drop, so subscribers are whole again)",
            kv_events_dropped.clone(),
        );
        r.register(
            "fak:kv_events_restarts",
            "Times the KV-cache event log restarted after a drop (AllBlocksCleared, then every \
             held prefix again)",
            kv_events_restarts.clone(),
        );
        r.register(
            "fak:kv_events_replays",
            "Replay requests answered (--kv-events-replay)",
            kv_events_replays.clone(),
        );
        r.register(
            "vllm:request_success",
            "Requests finished, by reason",
            success.clone(),
        );
        r.register(
            "vllm:time_to_first_token_seconds",
            "Time from arrival to the first token",
            ttft.clone(),
        );
        r.register(
            "vllm:inter_token_latency_seconds",
            "Time between consecutive tokens of a request",
            itl.clone(),
        );
        r.register(
            "vllm:e2e_request_latency_seconds",
            "Time from arrival to the last token",
            e2e.clone(),
        );
        r.register(
            "vllm:request_queue_time_seconds",
            "Time waiting for admission",
            queue_time.clone(),
        );
        Metrics {
            registry,
            running,
            waiting,
            kv_usage,
            cache_config,
            prefix_queries,
            prefix_hits,
            prompt_tokens,
            generation_tokens,
            preemptions,
            sessions,
            session_drops,
            forward_passes,
            tokens_computed,
            mask_workers_started,
            constraint_failures,
            spec_drafts,
            spec_draft_tokens,
            spec_accepted_tokens,
            kv_events_batches,
            kv_events_dropped,
            kv_events_restarts,
            kv_events_replays,
            success,
            ttft,
            itl,
            e2e,
            queue_time,
        }
    }

    /// The text exposition (OpenMetrics text, which Prometheus reads).
    pub fn encode(&self) -> String {
        let mut s = String::new();
        if prometheus_client::encoding::text::encode(&mut s, &self.registry).is_err() {
            s.clear();
        }
        s
    }

    /// Counts a finished request.
    pub fn finished(&self, reason: &str) {
        self.success
            .get_or_create(&Reason {
                finished_reason: reason.to_string(),
            })
            .inc();
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

/// Sets a counter to `to` (counters only grow; the engine's totals do).
pub fn set_counter(c: &Counter, to: u64) {
    let now = c.get();
    if to > now {
        c.inc_by(to - now);
    }
}
