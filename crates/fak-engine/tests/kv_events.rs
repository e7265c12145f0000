//! The engine's prefix events ([`Engine::enable_kv_events`]): a finished
//! request's full blocks are stored root first, each hash chained over the
//! tokens (prompt and generated) it holds; a second tenant with the same
//! tokens adds no event; blocks the pool evicts are removed, only after
//! they were stored; an engine without the log reports nothing; a
//! restarted log makes a consumer that lost events whole again; and across
//! a session's life (turns, publish, fork, exact eviction, free, then
//! eviction under pressure) a consumer of the events holds exactly what
//! the index holds.

use std::collections::HashSet;

use fak_engine::{
    block_hash, Engine, EngineConfig, Event, KvEvent, PagedKvConfig, PrefixCache, Request, StopAt,
    StopRules, Tenant,
};
use fak_model::KvType;

mod common;

use common::{ids, model, tok};

const BS: usize = 16;

fn config(n_blocks: usize) -> EngineConfig {
    EngineConfig {
        kv: PagedKvConfig {
            block_size: BS,
            n_blocks,
            kv_type: KvType::F16,
            window: fak_engine::KvWindow::Drop,
        },
        token_budget: 256,
        max_running: 8,
        max_waiting: None,
        n_ctx: 512,
        prefix_cache: PrefixCache::On,
        prefill: fak_engine::SERIAL_PREFILL,
        mask: fak_engine::MaskMode::default(),
    }
}

/// Runs one greedy request of `n` tokens to its end; the tokens the
/// sequence held (the prompt and every generated token but the last).
fn run(e: &mut Engine<'_>, tenant: u64, prompt: Vec<u32>, n: usize) -> Vec<u32> {
    let id = e
        .add(Request {
            tenant: Tenant(tenant),
            stop: StopRules {
                eog: StopAt::Never,
                ..StopRules::default()
            },
            ..Request::greedy(prompt.clone(), n)
        })
        .expect("add");
    let mut out = Vec::new();
    while e.has_work() {
        for ev in e.step().expect("step") {
            match ev {
                Event::Token { id: i, token, .. } if i == id => out.push(token),
                Event::Failed { error, .. } => panic!("{error}"),
                _ => {}
            }
        }
    }
    out.pop();
    [prompt, out].concat()
}

/// Replays `events` into `live`, checking that each store's parent is
/// known and each removal was stored.
fn replay(live: &mut HashSet<u64>, events: Vec<KvEvent>) {
    for e in events {
        match e {
            KvEvent::Stored {
                hash,
                parent,
                tokens,
            } => {
                assert_eq!(tokens.len(), BS);
                assert!(parent.is_none_or(|p| live.contains(&p)), "orphan store");
                assert_eq!(block_hash(parent, &tokens), hash);
                assert!(live.insert(hash), "stored twice");
            }
            KvEvent::Removed { hash } => assert!(live.remove(&hash), "removed unknown"),
            KvEvent::Cleared => live.clear(),
        }
    }
}

/// The chained hashes of `tokens`' full blocks.
fn chain(tokens: &[u32]) -> Vec<u64> {
    let mut parent = None;
    tokens
        .chunks_exact(BS)
        .map(|key| {
            let h = block_hash(parent, key);
            parent = Some(h);
            h
        })
        .collect()
}

#[test]
fn finished_prefixes_are_stored_once_and_evicted_ones_removed() {
    let mut e = Engine::new(model(), Some(tok()), config(12)).expect("engine");
    e.enable_kv_events();
    let mut live = HashSet::new();
    let first = e.take_kv_events();
    assert_eq!(first, [KvEvent::Cleared]);

    let held = run(&mut e, 0, ids(1, 70), 6);
    replay(&mut live, e.take_kv_events());
    let want: HashSet<u64> = chain(&held).into_iter().collect();
    assert_eq!(want.len(), held.len() / BS);
    assert_eq!(live, want, "the finished request's full blocks");

    // The same tokens for another tenant: its own blocks, no new event.
    assert_eq!(run(&mut e, 1, ids(1, 70), 6), held);
    assert!(e.take_kv_events().is_empty());

    // Other prompts fill the 12-block pool: cached chains are evicted.
    let mut removed = 0;
    for k in 0..4 {
        run(&mut e, 0, ids(100 + k, 70), 6);
        let ev = e.take_kv_events();
        removed += ev
            .iter()
            .filter(|x| matches!(x, KvEvent::Removed { .. }))
            .count();
        replay(&mut live, ev);
    }
    assert!(removed > 0, "nothing was evicted");

    // Without the log: nothing.
    let mut quiet = Engine::new(model(), Some(tok()), config(12)).expect("engine");
    run(&mut quiet, 0, ids(1, 70), 6);
    assert!(quiet.take_kv_events().is_empty());
}

#[test]
fn a_restarted_log_makes_a_consumer_that_lost_events_whole() {
    let mut e = Engine::new(model(), Some(tok()), config(12)).expect("engine");
    e.enable_kv_events();
    // `truth` sees every event; `lagging` misses a stretch of them.
    let mut truth = HashSet::new();
    let mut lagging = HashSet::new();
    let start = e.take_kv_events();
    replay(&mut truth, start.clone());
    replay(&mut lagging, start);
    run(&mut e, 0, ids(1, 70), 6);
    let first = e.take_kv_events();
    replay(&mut truth, first.clone());
    replay(&mut lagging, first);
    // Lost: a store and the evictions other prompts force.
    for k in 0..3 {
        run(&mut e, 0, ids(100 + k, 70), 6);
        replay(&mut truth, e.take_kv_events());
    }
    assert_ne!(lagging, truth, "nothing was lost");
    // Events not yet taken when the log restarts are covered by it.
    run(&mut e, 0, ids(200, 70), 6);
    e.restart_kv_events();
    let again = e.take_kv_events();
    assert_eq!(again.first(), Some(&KvEvent::Cleared));
    replay(&mut lagging, again);
    // What the engine holds now: everything `truth` had, and the last
    // request's chain (and no block the last request evicted).
    let mut check = HashSet::new();
    e.restart_kv_events();
    replay(&mut check, e.take_kv_events());
    assert_eq!(lagging, check);
    assert!(chain(&run(&mut e, 0, ids(200, 70), 6))
        .iter()
        .all(|h| lagging.contains(h)));
}

/// Takes the pending events into `live`, then checks `live` against what
/// the index holds (a restarted log's snapshot) and goes on from that.
fn check_whole(e: &mut Engine<'_>, live: &mut HashSet<u64>, step: &str) {
    replay(live, e.take_kv_events());
    e.restart_kv_events();
    let mut truth = HashSet::new();
    replay(&mut truth, e.take_kv_events());
    assert_eq!(*live, truth, "after {step}");
}

#[test]
fn every_session_step_keeps_a_consumer_whole() {
    use fak_engine::{Context, EvictMode};
    let mut e = Engine::new(model(), Some(tok()), config(14)).expect("engine");
    e.enable_kv_events();
    let mut live = HashSet::new();
    check_whole(&mut e, &mut live, "start");
    let turn = |e: &mut Engine<'_>, s, prompt: Vec<u32>| {
        let id = e
            .add(Request {
                context: Context::Session(s),
                tenant: Tenant(0),
                stop: StopRules {
                    eog: StopAt::Never,
                    ..StopRules::default()
                },
                ..Request::greedy(prompt, 4)
            })
            .expect("add");
        while e.has_work() {
            for ev in e.step().expect("step") {
                if let Event::Failed { id: i, error } = ev {
                    assert_ne!(i, id, "{error}");
                }
            }
        }
    };
    let s = e.create_session(Tenant(0)).unwrap();
    turn(&mut e, s, ids(1, 40));
    check_whole(&mut e, &mut live, "a session turn");
    e.publish_session(s).expect("publish");
    check_whole(&mut e, &mut live, "publish");
    assert!(!live.is_empty(), "publishing stored nothing");
    let f = e.fork_session(s).expect("fork");
    turn(&mut e, f, ids(2, 20));
    check_whole(&mut e, &mut live, "a fork's turn");
    e.evict_session(s, 4..20, EvictMode::Exact).expect("evict");
    check_whole(&mut e, &mut live, "an exact eviction");
    e.publish_session(s).expect("publish");
    check_whole(&mut e, &mut live, "publishing the evicted session");
    e.free_session(f).expect("free");
    e.free_session(s).expect("free");
    check_whole(&mut e, &mut live, "freeing both");
    // Pressure: the cached prefixes are evicted (least recently used).
    for k in 0..4 {
        run(&mut e, 0, ids(300 + k, 70), 6);
        check_whole(&mut e, &mut live, "pressure");
    }
}
