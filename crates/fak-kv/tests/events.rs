//! The event log ([`KvManager::enable_events`]): replaying the events
//! gives exactly the set of prefixes the index holds, for any schedule of
//! publishes, attaches, frees and evictions across tenants; every stored
//! block's parent is already known to a listener; a prefix two tenants
//! hold is stored once and removed only when both let it go.

use std::collections::HashSet;

use fak_kv::{block_hash, KvEvent, KvManager, PoolConfig, Tenant};
use proptest::prelude::*;

const BS: usize = 2;

/// What a router holds after replaying events.
#[derive(Default)]
struct Listener {
    live: HashSet<u64>,
}

impl Listener {
    fn apply(&mut self, events: Vec<KvEvent>) -> Result<(), String> {
        for e in events {
            match e {
                KvEvent::Stored {
                    hash,
                    parent,
                    tokens,
                } => {
                    if tokens.len() != BS {
                        return Err(format!("a stored block of {} tokens", tokens.len()));
                    }
                    if parent.is_some_and(|p| !self.live.contains(&p)) {
                        return Err(format!("{hash:#x} stored before its parent"));
                    }
                    if block_hash(parent, &tokens) != hash {
                        return Err(format!("{hash:#x} is not its parent's and tokens' hash"));
                    }
                    if !self.live.insert(hash) {
                        return Err(format!("{hash:#x} stored twice"));
                    }
                }
                KvEvent::Removed { hash } => {
                    if !self.live.remove(&hash) {
                        return Err(format!("{hash:#x} removed but not held"));
                    }
                }
                KvEvent::Cleared => self.live.clear(),
            }
        }
        Ok(())
    }
}

/// The chained hashes of `tokens`' first `n` full blocks.
fn chain(tokens: &[u32], n: usize) -> Vec<u64> {
    let mut parent = None;
    let mut out = Vec::new();
    for key in tokens.chunks_exact(BS).take(n) {
        let h = block_hash(parent, key);
        out.push(h);
        parent = Some(h);
    }
    out
}

/// Publishes `tokens` under `tenant` through a sequence that then ends.
fn publish(kv: &mut KvManager, tenant: Tenant, tokens: &[u32]) {
    let s = kv.create_seq(tenant);
    let n = kv.attach_prefix(s, tokens).expect("attach");
    kv.append(s, tokens.len() - n).expect("append");
    kv.publish(s, tokens).expect("publish");
    kv.free_seq(s).expect("free");
}

#[test]
fn a_prefix_two_tenants_hold_is_stored_once_and_removed_at_the_last() {
    let mut kv = KvManager::new(PoolConfig {
        block_size: BS,
        n_blocks: 4,
    })
    .expect("manager");
    let p = [1, 2, 3, 4];
    publish(&mut kv, Tenant(0), &p);
    kv.enable_events();
    let h = chain(&p, 2);
    // Already published: stored at once, after "nothing held".
    assert_eq!(
        kv.take_events(),
        [
            KvEvent::Cleared,
            KvEvent::Stored {
                hash: h[0],
                parent: None,
                tokens: vec![1, 2].into()
            },
            KvEvent::Stored {
                hash: h[1],
                parent: Some(h[0]),
                tokens: vec![3, 4].into()
            },
        ]
    );
    publish(&mut kv, Tenant(1), &p);
    assert_eq!(
        kv.take_events(),
        Vec::<KvEvent>::new(),
        "the second holder changes nothing"
    );
    // A third prefix needs 2 blocks: the pool evicts the oldest cached
    // chain (tenant 0's), whose hashes tenant 1 still holds.
    publish(&mut kv, Tenant(2), &[9, 9, 8, 8]);
    let ev = kv.take_events();
    assert!(
        !ev.iter().any(|e| matches!(e, KvEvent::Removed { .. })),
        "{ev:?}"
    );
    // And again: tenant 1's go too, the last holder of `p`.
    publish(&mut kv, Tenant(3), &[7, 7, 6, 6]);
    let removed: HashSet<u64> = kv
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            KvEvent::Removed { hash } => Some(hash),
            _ => None,
        })
        .collect();
    assert_eq!(removed, h.into_iter().collect());
}

/// A publish: a tenant and whole blocks of tokens.
fn op() -> impl Strategy<Value = (u64, Vec<u32>)> {
    (0..3u64, prop::collection::vec(0..3u32, 0..6))
        .prop_map(|(t, blocks)| (t, blocks.iter().flat_map(|&b| [b, b + 1]).collect()))
}

proptest! {
    #[test]
    fn replayed_events_are_what_the_index_holds(ops in prop::collection::vec(op(), 1..40)) {
        let mut kv = KvManager::new(PoolConfig { block_size: BS, n_blocks: 6 }).expect("manager");
        kv.enable_events();
        let mut heard = Listener::default();
        let mut published: Vec<(Tenant, Vec<u32>)> = Vec::new();
        for (t, tokens) in ops {
            publish(&mut kv, Tenant(t), &tokens);
            published.push((Tenant(t), tokens));
            heard.apply(kv.take_events()).map_err(TestCaseError::fail)?;
            let mut held = HashSet::new();
            for (t, toks) in &published {
                held.extend(chain(toks, kv.prefix_match(*t, toks) / BS));
            }
            prop_assert_eq!(&heard.live, &held);
        }
    }
}
