//! `fak serve --kv-events`: the engine's prefix events, published in
//! vLLM's KV-cache event format over ZMQ, so that a KV-aware router
//! (vllm-router's `kv_aware` policy, llm-d's KV-cache indexer) sends a
//! request to the replica that already holds its prefix.
//!
//! ```text
//!   engine thread                     publisher thread
//!   ─────────────                     ────────────────
//!   step() / session op               recv batch (≤ 20 ms wait)
//!   take_kv_events() ──try_send──▶    [queue of QUEUE_BATCHES]
//!     full? drop, count, and          encode: msgpack [ts, events, 0]
//!     restart the log next time       PUB  [topic "", seq u64 BE, payload]
//!                                     keep (seq, payload) for replay
//!                                     ROUTER: [id, "", start] → every kept
//!                                       batch from start, then seq -1
//! ```
//!
//! The engine thread never waits: a full queue drops the batch and counts
//! its events (`fak:kv_events_dropped`); the next flush restarts the event
//! log (`AllBlocksCleared`, then every published block), so a subscriber's
//! index is whole again without a gap in `seq`. A subscriber that missed
//! batches on the wire (it joined late, or its queue overflowed) sees the
//! gap in `seq` and asks the replay socket for them.
//!
//! The wire format, as vLLM's `kv_events` module writes it and
//! vllm-router reads it:
//! * three frames: the topic (empty), `seq` as 8 big-endian bytes counted
//!   from 0 at each start (a lower `seq` tells a subscriber the replica
//!   restarted), and the payload;
//! * the payload: the msgpack array `[ts (float64 seconds), events,
//!   dp_rank (0)]`; each event a map tagged by `"type"`:
//!   `BlockStored {block_hashes, parent_block_hash, token_ids, block_size,
//!   lora_id, medium, lora_name}`, `BlockRemoved {block_hashes, medium}`,
//!   `AllBlocksCleared {}`. Consecutive stores of one chain are merged into
//!   one event, as vLLM does. `medium` is `"GPU"`: vLLM's name for the
//!   engine's own KV cache, the tier routers credit (fak's lives in host
//!   memory).
//!
//! Events name no tenant, but they carry every stored block's token ids:
//! whoever reads the endpoint learns every tenant's prompts. Bind it where
//! only the router can reach it.

use std::collections::VecDeque;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fak_engine::{Engine, KvEvent};

use crate::metrics::Metrics;

/// Batches the engine thread may hand over before it drops.
pub const QUEUE_BATCHES: usize = 1024;
/// Batches kept for replay (at most [`REPLAY_BYTES`] of payload).
pub const REPLAY_BATCHES: usize = 4096;
/// Payload bytes kept for replay.
pub const REPLAY_BYTES: usize = 64 << 20;
/// Most events in one payload (vllm-router refuses a batch of more than
/// 4096).
pub const EVENTS_PER_PAYLOAD: usize = 1024;
/// The `seq` that ends a replay.
const END_SEQ: u64 = u64::MAX;

/// Where the events go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvEventsConfig {
    /// The PUB socket's ZMQ endpoint (`tcp://*:5557`).
    pub endpoint: String,
    /// The replay ROUTER socket's endpoint, if any.
    pub replay: Option<String>,
}

/// Why the publisher did not start.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// An endpoint could not be bound (malformed, or in use).
    #[error("{flag} {endpoint}: {source} (give a ZMQ endpoint this host can bind, such as tcp://*:5557)")]
    Bind {
        flag: &'static str,
        endpoint: String,
        source: zmq::Error,
    },
    /// The publisher thread did not start.
    #[error("--kv-events: starting the publisher thread: {0}")]
    Thread(std::io::Error),
}

/// Where a sink takes events from: the engine (a stand-in in tests).
pub(crate) trait EventSource {
    /// The events since the last call ([`Engine::take_kv_events`]).
    fn take(&mut self) -> Vec<KvEvent>;
    /// Starts the log over ([`Engine::restart_kv_events`]).
    fn restart(&mut self);
}

impl EventSource for Engine<'_> {
    fn take(&mut self) -> Vec<KvEvent> {
        self.take_kv_events()
    }

    fn restart(&mut self) {
        self.restart_kv_events();
    }
}

/// The engine thread's side: hands event batches to the publisher.
pub(crate) struct EventSink {
    tx: SyncSender<Vec<KvEvent>>,
    metrics: Arc<Metrics>,
    restart: bool,
}

impl EventSink {
    /// Hands the engine's new events to the publisher, never waiting. A
    /// batch that does not fit is dropped and counted, and the next call
    /// restarts the engine's log first ([`Engine::restart_kv_events`]).
    pub(crate) fn flush(&mut self, engine: &mut impl EventSource) {
        if self.restart {
            engine.restart();
        }
        let events = engine.take();
        if events.is_empty() {
            return;
        }
        match self.tx.try_send(events) {
            Ok(()) => {
                if self.restart {
                    self.metrics.kv_events_restarts.inc();
                }
                self.restart = false;
            }
            Err(TrySendError::Full(ev) | TrySendError::Disconnected(ev)) => {
                self.metrics.kv_events_dropped.inc_by(ev.len() as u64);
                self.restart = true;
            }
        }
    }
}

/// Binds the sockets and starts the publisher thread; the engine thread
/// keeps the returned sink. The thread ends when the sink is dropped.
///
/// # Errors
///
/// [`BindError`] when an endpoint cannot be bound (malformed, or in use)
/// or the thread does not start.
pub(crate) fn start(cfg: &KvEventsConfig, metrics: Arc<Metrics>) -> Result<EventSink, BindError> {
    let ctx = zmq::Context::new();
    let bind = |kind, flag: &'static str, endpoint: &str| {
        let err = |source| BindError::Bind {
            flag,
            endpoint: endpoint.to_string(),
            source,
        };
        let s = ctx.socket(kind).map_err(err)?;
        // Close at once at shutdown; a subscriber that falls this far
        // behind loses batches (and asks for a replay).
        s.set_linger(0).map_err(err)?;
        s.set_sndhwm(100_000).map_err(err)?;
        s.bind(endpoint).map_err(err)?;
        Ok(s)
    };
    let publisher = bind(zmq::PUB, "--kv-events", &cfg.endpoint)?;
    let replay = match &cfg.replay {
        Some(ep) => Some(bind(zmq::ROUTER, "--kv-events-replay", ep)?),
        None => None,
    };
    let (tx, rx) = sync_channel(QUEUE_BATCHES);
    let m = metrics.clone();
    std::thread::Builder::new()
        .name("fak-kv-events".into())
        .spawn(move || {
            // The context outlives its sockets.
            let _ctx = ctx;
            publish_loop(rx, &publisher, replay.as_ref(), &m);
        })
        .map_err(BindError::Thread)?;
    Ok(EventSink {
        tx,
        metrics,
        restart: false,
    })
}

/// What the publisher has sent and keeps for replay.
struct Sent {
    next_seq: u64,
    kept: VecDeque<(u64, Vec<u8>)>,
    kept_bytes: usize,
}

fn publish_loop(
    rx: Receiver<Vec<KvEvent>>,
    publisher: &zmq::Socket,
    replay: Option<&zmq::Socket>,
    metrics: &Metrics,
) {
    let mut sent = Sent {
        next_seq: 0,
        kept: VecDeque::new(),
        kept_bytes: 0,
    };
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(events) => {
                let ts = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs_f64())
                    .unwrap_or(0.0);
                for payload in encode(ts, &events) {
                    let seq = sent.next_seq;
                    sent.next_seq += 1;
                    let frames: [&[u8]; 3] = [b"", &seq.to_be_bytes(), &payload];
                    if publisher.send_multipart(frames, 0).is_ok() {
                        metrics.kv_events_batches.inc();
                    }
                    sent.kept_bytes += payload.len();
                    sent.kept.push_back((seq, payload));
                    while sent.kept.len() > REPLAY_BATCHES || sent.kept_bytes > REPLAY_BYTES {
                        match sent.kept.pop_front() {
                            Some((_, p)) => sent.kept_bytes -= p.len(),
                            None => break,
                        }
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if let Some(r) = replay {
            serve_replays(r, &sent, metrics);
        }
    }
}

/// Answers every waiting replay request: `[identity, "", start seq]` gets
/// each kept batch from `start` on as `[identity, "", topic, seq, payload]`,
/// then `[identity, "", "", -1, ""]`. Batches no longer kept are not sent;
/// the subscriber sees the hole and drops what it knew of this replica.
fn serve_replays(r: &zmq::Socket, sent: &Sent, metrics: &Metrics) {
    while let Ok(frames) = r.recv_multipart(zmq::DONTWAIT) {
        let [id, empty, start] = frames.as_slice() else {
            continue;
        };
        let Ok(start) = <[u8; 8]>::try_from(start.as_slice()) else {
            continue;
        };
        if !empty.is_empty() {
            continue;
        }
        let start = u64::from_be_bytes(start);
        metrics.kv_events_replays.inc();
        for (seq, payload) in sent.kept.iter().filter(|(s, _)| *s >= start) {
            let frames: [&[u8]; 5] = [id, b"", b"", &seq.to_be_bytes(), payload];
            if r.send_multipart(frames, zmq::DONTWAIT).is_err() {
                break;
            }
        }
        let end: [&[u8]; 5] = [id, b"", b"", &END_SEQ.to_be_bytes(), b""];
        let _ = r.send_multipart(end, zmq::DONTWAIT);
    }
}

/// One event on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wire {
    /// A chain of stored blocks, each the parent of the next.
    Stored {
        hashes: Vec<u64>,
        parent: Option<u64>,
        tokens: Vec<u32>,
        block_size: usize,
    },
    Removed {
        hashes: Vec<u64>,
    },
    Cleared,
}

/// The engine's events as wire events: consecutive stores of one chain
/// (each the parent of the next, of one block size) become one, and so do
/// consecutive removals.
fn merge(events: &[KvEvent]) -> Vec<Wire> {
    let mut out: Vec<Wire> = Vec::new();
    for e in events {
        match e {
            KvEvent::Stored {
                hash,
                parent,
                tokens,
            } => {
                if let Some(Wire::Stored {
                    hashes,
                    tokens: all,
                    block_size,
                    ..
                }) = out.last_mut()
                {
                    if *parent == hashes.last().copied() && tokens.len() == *block_size {
                        hashes.push(*hash);
                        all.extend_from_slice(tokens);
                        continue;
                    }
                }
                out.push(Wire::Stored {
                    hashes: vec![*hash],
                    parent: *parent,
                    tokens: tokens.to_vec(),
                    block_size: tokens.len(),
                });
            }
            KvEvent::Removed { hash } => {
                if let Some(Wire::Removed { hashes }) = out.last_mut() {
                    hashes.push(*hash);
                    continue;
                }
                out.push(Wire::Removed {
                    hashes: vec![*hash],
                });
            }
            KvEvent::Cleared => out.push(Wire::Cleared),
        }
    }
    out
}

/// The msgpack payloads for `events` at time `ts`: one per
/// [`EVENTS_PER_PAYLOAD`] wire events.
fn encode(ts: f64, events: &[KvEvent]) -> Vec<Vec<u8>> {
    merge(events)
        .chunks(EVENTS_PER_PAYLOAD)
        .map(|chunk| encode_payload(ts, chunk))
        .collect()
}

fn encode_payload(ts: f64, events: &[Wire]) -> Vec<u8> {
    use rmp::encode as w;
    // Writes into a Vec cannot fail.
    let mut b = Vec::new();
    let _ = w::write_array_len(&mut b, 3);
    let _ = w::write_f64(&mut b, ts);
    let _ = w::write_array_len(&mut b, events.len() as u32);
    let str = |b: &mut Vec<u8>, s: &str| {
        let _ = w::write_str(b, s);
    };
    let hashes = |b: &mut Vec<u8>, hs: &[u64]| {
        let _ = w::write_array_len(b, hs.len() as u32);
        for h in hs {
            let _ = w::write_uint(b, *h);
        }
    };
    for e in events {
        match e {
            Wire::Stored {
                hashes: hs,
                parent,
                tokens,
                block_size,
            } => {
                let _ = w::write_map_len(&mut b, 8);
                str(&mut b, "type");
                str(&mut b, "BlockStored");
                str(&mut b, "block_hashes");
                hashes(&mut b, hs);
                str(&mut b, "parent_block_hash");
                match parent {
                    Some(p) => {
                        let _ = w::write_uint(&mut b, *p);
                    }
                    None => {
                        let _ = w::write_nil(&mut b);
                    }
                }
                str(&mut b, "token_ids");
                let _ = w::write_array_len(&mut b, tokens.len() as u32);
                for t in tokens {
                    let _ = w::write_uint(&mut b, u64::from(*t));
                }
                str(&mut b, "block_size");
                let _ = w::write_uint(&mut b, *block_size as u64);
                str(&mut b, "lora_id");
                let _ = w::write_nil(&mut b);
                str(&mut b, "medium");
                str(&mut b, "GPU");
                str(&mut b, "lora_name");
                let _ = w::write_nil(&mut b);
            }
            Wire::Removed { hashes: hs } => {
                let _ = w::write_map_len(&mut b, 3);
                str(&mut b, "type");
                str(&mut b, "BlockRemoved");
                str(&mut b, "block_hashes");
                hashes(&mut b, hs);
                str(&mut b, "medium");
                str(&mut b, "GPU");
            }
            Wire::Cleared => {
                let _ = w::write_map_len(&mut b, 1);
                str(&mut b, "type");
                str(&mut b, "AllBlocksCleared");
            }
        }
    }
    let _ = w::write_uint(&mut b, 0);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(hash: u64, parent: Option<u64>, t: u32) -> KvEvent {
        KvEvent::Stored {
            hash,
            parent,
            tokens: vec![t; 4].into(),
        }
    }

    #[test]
    fn a_chain_of_stores_is_one_event_and_a_new_root_another() {
        let ev = [
            KvEvent::Cleared,
            stored(1, None, 7),
            stored(2, Some(1), 8),
            stored(3, None, 9),
            KvEvent::Removed { hash: 2 },
            KvEvent::Removed { hash: 1 },
        ];
        assert_eq!(
            merge(&ev),
            [
                Wire::Cleared,
                Wire::Stored {
                    hashes: vec![1, 2],
                    parent: None,
                    tokens: [[7; 4], [8; 4]].concat(),
                    block_size: 4
                },
                Wire::Stored {
                    hashes: vec![3],
                    parent: None,
                    tokens: vec![9; 4],
                    block_size: 4
                },
                Wire::Removed { hashes: vec![2, 1] },
            ]
        );
    }

    #[test]
    fn the_payload_is_vllms_tagged_batch() {
        let p = encode_payload(
            1.5,
            &[
                Wire::Cleared,
                Wire::Stored {
                    hashes: vec![u64::MAX],
                    parent: None,
                    tokens: vec![1, 2],
                    block_size: 2,
                },
            ],
        );
        // [1.5, [{"type": "AllBlocksCleared"}, {...}], 0]
        assert_eq!(p[0], 0x93);
        assert_eq!(p[1], 0xcb);
        assert_eq!(&p[2..10], &1.5f64.to_be_bytes());
        assert_eq!(p[10], 0x92);
        assert_eq!(p[11], 0x81);
        assert_eq!(*p.last().unwrap(), 0);
        let text = String::from_utf8_lossy(&p);
        for key in [
            "AllBlocksCleared",
            "BlockStored",
            "block_hashes",
            "parent_block_hash",
            "token_ids",
            "block_size",
            "lora_id",
            "medium",
            "GPU",
            "lora_name",
        ] {
            assert!(text.contains(key), "{key}");
        }
        // u64::MAX as a uint64 (0xcf), not a signed int.
        assert!(p
            .windows(9)
            .any(|w| w == [0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]));
    }

    /// A source that logs what it was asked.
    #[derive(Default)]
    struct Fake {
        pending: Vec<KvEvent>,
        restarts: usize,
    }

    impl EventSource for Fake {
        fn take(&mut self) -> Vec<KvEvent> {
            std::mem::take(&mut self.pending)
        }

        fn restart(&mut self) {
            self.restarts += 1;
            self.pending = vec![KvEvent::Cleared, stored(1, None, 1)];
        }
    }

    #[test]
    fn a_full_queue_drops_counts_and_restarts_the_log_once_there_is_room() {
        let (tx, rx) = sync_channel(1);
        let metrics = Arc::new(Metrics::new());
        let mut sink = EventSink {
            tx,
            metrics: metrics.clone(),
            restart: false,
        };
        let mut src = Fake {
            pending: vec![stored(1, None, 1)],
            restarts: 0,
        };
        sink.flush(&mut src);
        // The queue holds one batch: the next is dropped and counted.
        src.pending = vec![stored(2, Some(1), 2), KvEvent::Removed { hash: 9 }];
        sink.flush(&mut src);
        assert_eq!(metrics.kv_events_dropped.get(), 2);
        assert_eq!(src.restarts, 0);
        // Still full: the restart's batch is dropped too, and tried again.
        sink.flush(&mut src);
        assert_eq!(src.restarts, 1);
        assert_eq!(metrics.kv_events_dropped.get(), 4);
        assert_eq!(rx.recv().ok(), Some(vec![stored(1, None, 1)]));
        sink.flush(&mut src);
        assert_eq!(src.restarts, 2);
        assert_eq!(metrics.kv_events_restarts.get(), 1);
        assert_eq!(
            rx.recv().ok(),
            Some(vec![KvEvent::Cleared, stored(1, None, 1)])
        );
        // Whole again: no more restarts.
        src.pending = vec![KvEvent::Removed { hash: 1 }];
        sink.flush(&mut src);
        assert_eq!(src.restarts, 2);
        assert_eq!(rx.recv().ok(), Some(vec![KvEvent::Removed { hash: 1 }]));
    }

    #[test]
    fn long_batches_are_cut_into_payloads_the_router_accepts() {
        let ev: Vec<KvEvent> = (0..2500).map(|i| stored(i + 1, None, i as u32)).collect();
        assert_eq!(encode(0.0, &ev).len(), 3);
    }
}
