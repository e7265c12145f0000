//! The fleet scheduler: agents sharing a forked prefix, chunked ingests
//! mixed with decodes under a token budget, and exact eviction, all give
//! each agent exactly the tokens it would get running alone.

use fak_engine::{
    AgentId, EngineError, EvictMode, Fleet, FleetConfig, FleetEvent, PagedKvConfig, PrefixCache,
    SamplingParams, Sequence, Tenant,
};
use fak_model::KvType;

mod common;

use common::{ids, model};

fn config(budget: usize, prefix_cache: PrefixCache) -> FleetConfig {
    FleetConfig {
        speculative: fak_engine::Speculative::Off,
        kv: PagedKvConfig {
            block_size: 4,
            n_blocks: 256,
            kv_type: KvType::F16,
            window: fak_engine::KvWindow::Drop,
        },
        token_budget: budget,
        prefix_cache,
        tenant: Tenant(7),
    }
}

/// Greedy tokens of one agent run alone in a flat cache: per turn, ingest
/// (previous turn's last token +) the result, then decode `d` tokens.
fn alone(prefix: &[u32], results: &[Vec<u32>], d: usize) -> Vec<Vec<u32>> {
    let m = model();
    let mut s = Sequence::new(m, 512).expect("sequence");
    s.ingest(m, prefix).expect("prefix");
    let mut out = Vec::new();
    let mut carry: Option<u32> = None;
    for r in results {
        let mut feed: Vec<u32> = carry.into_iter().collect();
        feed.extend(r);
        let mut logits = s.ingest(m, &feed).expect("ingest");
        let mut gen = Vec::new();
        loop {
            let t = fak_engine::argmax(&logits).expect("argmax");
            gen.push(t);
            if gen.len() == d {
                break;
            }
            logits = s.ingest(m, &[t]).expect("decode");
        }
        carry = gen.last().copied();
        out.push(gen);
    }
    out
}

/// Runs every agent through its turns with no barrier between agents;
/// returns each agent's generated tokens per turn.
fn run_fleet(
    fleet: &mut Fleet<'_>,
    agents: &[AgentId],
    results: &[Vec<Vec<u32>>],
    d: usize,
) -> Vec<Vec<Vec<u32>>> {
    let mut out = vec![Vec::new(); agents.len()];
    for (a, r) in agents.iter().zip(results) {
        fleet.submit(*a, &r[0], d).expect("submit");
    }
    let mut first = 0;
    while !fleet.is_idle() {
        for ev in fleet.step().expect("step") {
            match ev {
                FleetEvent::FirstToken { .. } => first += 1,
                FleetEvent::TurnDone { agent, generated } => {
                    let i = agent.0 as usize;
                    out[i].push(generated);
                    let turn = out[i].len();
                    if turn < results[i].len() {
                        fleet.submit(agent, &results[i][turn], d).expect("submit");
                    }
                }
            }
        }
    }
    assert_eq!(first, results.iter().map(Vec::len).sum::<usize>());
    out
}

#[test]
fn fleet_agents_match_running_alone_for_any_budget() {
    let m = model();
    let prefix = ids(1, 13);
    let results: Vec<Vec<Vec<u32>>> = (0..3)
        .map(|a| {
            (0..3)
                .map(|t| ids(100 + 10 * a + t, 3 + 2 * a as usize))
                .collect()
        })
        .collect();
    let want: Vec<Vec<Vec<u32>>> = results.iter().map(|r| alone(&prefix, r, 4)).collect();
    for budget in [2usize, 5, 64] {
        let mut fleet = Fleet::new(m, config(budget, PrefixCache::On)).expect("fleet");
        let root = fleet.prefix(&prefix).expect("prefix");
        let agents: Vec<AgentId> = (0..3)
            .map(|_| {
                fleet
                    .spawn(Some(root), SamplingParams::greedy())
                    .expect("spawn")
            })
            .collect();
        let got = run_fleet(&mut fleet, &agents, &results, 4);
        assert_eq!(got, want, "budget {budget}");
        let c = fleet.counters();
        assert_eq!(c.prefix_evaluations, 1);
        assert_eq!(c.tokens_reused, 3 * 13);
    }
}

#[test]
fn no_reuse_ablation_gives_the_same_tokens() {
    let m = model();
    let prefix = ids(2, 9);
    let results: Vec<Vec<Vec<u32>>> = (0..2)
        .map(|a| vec![ids(200 + a, 4), ids(300 + a, 2)])
        .collect();
    let mut fleet = Fleet::new(m, config(16, PrefixCache::Off)).expect("fleet");
    let agents: Vec<AgentId> = (0..2)
        .map(|_| fleet.spawn(None, SamplingParams::greedy()).expect("spawn"))
        .collect();
    let with_prefix: Vec<Vec<Vec<u32>>> = results
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r[0] = [prefix.clone(), r[0].clone()].concat();
            r
        })
        .collect();
    let got = run_fleet(&mut fleet, &agents, &with_prefix, 3);
    for (g, r) in got.iter().zip(&results) {
        assert_eq!(*g, alone(&prefix, r, 3));
    }
    assert_eq!(fleet.counters().tokens_reused, 0);
}

#[test]
fn evicting_a_result_equals_never_having_seen_it() {
    let m = model();
    let prefix = ids(3, 10);
    let (r0, r1, r2) = (ids(31, 6), ids(32, 5), ids(33, 4));
    let mut fleet = Fleet::new(m, config(8, PrefixCache::On)).expect("fleet");
    let root = fleet.prefix(&prefix).expect("prefix");
    let a = fleet
        .spawn(Some(root), SamplingParams::greedy())
        .expect("spawn");
    let b = fleet
        .spawn(Some(root), SamplingParams::greedy())
        .expect("spawn");
    let turn = |fleet: &mut Fleet<'_>, agent: AgentId, r: &[u32]| -> Vec<u32> {
        fleet.submit(agent, r, 3).expect("submit");
        let mut out = None;
        while !fleet.is_idle() {
            for ev in fleet.step().expect("step") {
                if let FleetEvent::TurnDone { generated, .. } = ev {
                    out = Some(generated);
                }
            }
        }
        out.expect("turn done")
    };
    let g0 = turn(&mut fleet, a, &r0);
    turn(&mut fleet, b, &r0);
    // Agent a's context: prefix + r0 + g0[..2] (g0[2] is fed next turn).
    let span = 10..16;
    assert!(matches!(
        fleet
            .submit(a, &r1, 3)
            .and_then(|_| fleet.evict(a, span.clone(), EvictMode::Exact)),
        Err(EngineError::AgentBusy(_))
    ));
    while !fleet.is_idle() {
        fleet.step().expect("step");
    }
    let ctx: Vec<u32> = fleet.context(a).expect("ctx").to_vec();
    let rep = fleet.evict(a, span, EvictMode::Exact).expect("evict");
    assert_eq!(rep.removed, 6);
    let after = turn(&mut fleet, a, &r2);
    // Reference: never saw r0.
    let mut s = Sequence::new(m, 256).expect("sequence");
    let without: Vec<u32> = [&ctx[..10], &ctx[16..]].concat();
    assert_eq!(fleet.context(a).expect("ctx")[..without.len()], without[..]);
    let _ = g0;
    s.ingest(m, &without).expect("ingest");
    let carry = *fleet
        .context(a)
        .expect("ctx")
        .get(without.len())
        .expect("carry");
    let mut feed = vec![carry];
    feed.extend(&r2);
    let mut logits = s.ingest(m, &feed).expect("ingest");
    let mut want = Vec::new();
    for _ in 0..3 {
        let t = fak_engine::argmax(&logits).expect("argmax");
        want.push(t);
        logits = s.ingest(m, &[t]).expect("decode");
    }
    assert_eq!(after, want);
}
