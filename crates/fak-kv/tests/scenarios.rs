//! End-to-end scenarios through the public API, with a toy storage that
//! holds one token id per (block, row) and performs the returned copies.

use std::collections::HashMap;

use fak_kv::{BlockCopy, BlockId, KvManager, PoolConfig, SeqSlot, Tenant};

/// Toy storage: (block, row) → token id.
#[derive(Default)]
struct Storage(HashMap<(BlockId, usize), u32>);

impl Storage {
    fn copy(&mut self, c: &BlockCopy) {
        for r in 0..c.n_tokens {
            let v = self.0[&(c.src, r)];
            self.0.insert((c.dst, r), v);
        }
    }

    /// Appends `toks` to `s` the way an engine would.
    fn append(&mut self, kv: &mut KvManager, s: SeqSlot, toks: &[u32]) {
        let start = kv.len(s).unwrap();
        for c in kv.append(s, toks.len()).unwrap() {
            self.copy(&c);
        }
        for (i, &t) in toks.iter().enumerate() {
            assert!(kv.is_writable(s, start + i).unwrap());
            let at = kv.locate(s, start + i).unwrap();
            self.0.insert(at, t);
        }
    }

    fn read(&self, kv: &KvManager, s: SeqSlot) -> Vec<u32> {
        (0..kv.len(s).unwrap())
            .map(|p| self.0[&kv.locate(s, p).unwrap()])
            .collect()
    }
}

fn manager(block_size: usize, n_blocks: usize) -> KvManager {
    KvManager::new(PoolConfig {
        block_size,
        n_blocks,
    })
    .unwrap()
}

#[test]
fn tenant_isolation_same_tenant_hits_other_tenant_misses() {
    let prompt = [10, 11, 12, 13, 14, 15, 16, 17, 18];
    for (owner, asker, expect_hit) in [
        (Tenant(1), Tenant(1), true),
        (Tenant(1), Tenant(2), false),
        (Tenant(2), Tenant(2), true),
        (Tenant(2), Tenant(1), false),
    ] {
        let mut kv = manager(4, 16);
        let mut st = Storage::default();
        let a = kv.create_seq(owner);
        st.append(&mut kv, a, &prompt);
        kv.publish(a, &prompt).unwrap();
        let b = kv.create_seq(asker);
        let got = kv.attach_prefix(b, &prompt).unwrap();
        if expect_hit {
            assert_eq!(got, 8);
            assert_eq!(kv.blocks(b).unwrap(), &kv.blocks(a).unwrap()[..2]);
            assert_eq!(st.read(&kv, b), prompt[..8]);
        } else {
            assert_eq!(got, 0);
            assert!(kv.blocks(b).unwrap().is_empty());
        }
        // A cached (unreferenced) prefix is equally isolated.
        kv.free_seq(a).unwrap();
        kv.free_seq(b).unwrap();
        let c = kv.create_seq(asker);
        assert_eq!(
            kv.attach_prefix(c, &prompt).unwrap(),
            if expect_hit { 8 } else { 0 }
        );
    }
}

#[test]
fn fork_independence_appends_after_truncate_never_touch_the_parent() {
    let mut kv = manager(4, 32);
    let mut st = Storage::default();
    let parent = kv.create_seq(Tenant(0));
    let text: Vec<u32> = (100..114).collect(); // 14 tokens: blocks 4+4+4+2
    st.append(&mut kv, parent, &text);
    let parent_blocks = kv.blocks(parent).unwrap().to_vec();

    let child = kv.fork(parent).unwrap();
    // Child rewinds into the middle of a shared block and diverges.
    kv.truncate(child, 6).unwrap();
    let copies = kv.append(child, 3).unwrap();
    assert_eq!(copies.len(), 1, "the shared partial block must be copied");
    assert_eq!(copies[0].src, parent_blocks[1]);
    assert_eq!(copies[0].n_tokens, 2);
    for c in &copies {
        st.copy(c);
    }
    for (i, t) in [900, 901, 902].into_iter().enumerate() {
        assert!(kv.is_writable(child, 6 + i).unwrap());
        let at = kv.locate(child, 6 + i).unwrap();
        st.0.insert(at, t);
    }
    // More divergence, across a block boundary.
    st.append(&mut kv, child, &[903, 904, 905, 906]);

    assert_eq!(kv.blocks(parent).unwrap(), &parent_blocks[..]);
    assert_eq!(st.read(&kv, parent), text);
    let mut want: Vec<u32> = text[..6].to_vec();
    want.extend([900, 901, 902, 903, 904, 905, 906]);
    assert_eq!(st.read(&kv, child), want);
    assert_eq!(
        kv.blocks(child).unwrap()[0],
        parent_blocks[0],
        "still shared"
    );
    assert_eq!(kv.refcount(parent_blocks[0]), 2);

    // The parent, too, copies when it appends into a block the child shares.
    let grandchild = kv.fork(parent).unwrap();
    st.append(&mut kv, parent, &[7]);
    assert_eq!(st.read(&kv, grandchild), text);
    kv.free_seq(child).unwrap();
    kv.free_seq(grandchild).unwrap();
    kv.free_seq(parent).unwrap();
    assert_eq!(kv.stats().free, 32);
}

#[test]
fn shared_system_prompt_is_computed_once_for_a_fleet() {
    // 1 agent publishes a 64-token system prompt; 20 agents attach it.
    let mut kv = manager(16, 64);
    let mut st = Storage::default();
    let system: Vec<u32> = (0..64).collect();
    let first = kv.create_seq(Tenant(0));
    st.append(&mut kv, first, &system);
    kv.publish(first, &system).unwrap();
    kv.free_seq(first).unwrap();
    assert_eq!(kv.stats().cached, 4);
    let mut agents = Vec::new();
    for i in 0..20u32 {
        let s = kv.create_seq(Tenant(0));
        let mut prompt = system.clone();
        prompt.push(1000 + i);
        let hit = kv.attach_prefix(s, &prompt[..prompt.len() - 1]).unwrap();
        assert_eq!(hit, 64);
        st.append(&mut kv, s, &prompt[hit..]);
        assert_eq!(st.read(&kv, s), prompt);
        agents.push(s);
    }
    // 4 shared blocks + 1 private block per agent.
    assert_eq!(kv.stats().used, 4 + 20);
    for s in agents {
        kv.free_seq(s).unwrap();
    }
    assert_eq!(kv.stats().cached, 4);
}

/// A sliding window's blocks: `drop_before` frees the blocks wholly
/// before the window, the rows kept read back as written, appends go on
/// past the gap, and positions of dropped blocks are refused by `locate`
/// and by a `truncate` that would end inside them.
#[test]
fn drop_before_frees_blocks_outside_the_window() {
    let mut kv = manager(4, 8);
    let mut st = Storage::default();
    let a = kv.create_seq(Tenant(0));
    let toks: Vec<u32> = (100..114).collect();
    st.append(&mut kv, a, &toks); // 14 positions: 4 blocks
    assert_eq!(kv.stats().used, 4);
    // Window 5 after 14 positions: the next query reads 10..; blocks 0, 1
    // (positions 0..8) are wholly before it.
    assert_eq!(kv.drop_before(a, 10).unwrap(), 2);
    assert_eq!(kv.dropped(a).unwrap(), 2);
    assert_eq!(kv.stats().used, 2);
    assert_eq!(kv.stats().free, 6);
    assert_eq!(kv.blocks(a).unwrap().len(), 2);
    assert!(kv.block_at(a, 1).is_none());
    assert_eq!(kv.block_at(a, 2), Some(kv.blocks(a).unwrap()[0]));
    // Idempotent, and never past the length.
    assert_eq!(kv.drop_before(a, 10).unwrap(), 0);
    for (p, &t) in toks.iter().enumerate().skip(8) {
        assert_eq!(st.0[&kv.locate(a, p).unwrap()], t);
    }
    assert!(matches!(
        kv.locate(a, 7),
        Err(fak_kv::KvError::PositionDropped { first_kept: 8, .. })
    ));
    // Appending past the gap fills the partial block, then new ones.
    st.append(&mut kv, a, &[7, 8, 9]);
    assert_eq!(kv.len(a).unwrap(), 17);
    assert_eq!(kv.blocks(a).unwrap().len(), 3);
    assert_eq!(st.0[&kv.locate(a, 16).unwrap()], 9);
    // Truncating into a dropped block is refused, state unchanged; within
    // kept blocks and to 0 it works (0 also forgets the gap).
    let before = kv.stats();
    assert!(matches!(
        kv.truncate(a, 8),
        Err(fak_kv::KvError::PositionDropped { pos: 7, .. })
    ));
    assert_eq!(kv.stats(), before);
    kv.truncate(a, 9).unwrap();
    assert_eq!(kv.blocks(a).unwrap().len(), 1);
    kv.truncate(a, 0).unwrap();
    assert_eq!(kv.dropped(a).unwrap(), 0);
    assert_eq!(kv.stats().free, 8);
}

/// A fork shares only the live blocks; dropping in one sequence never
/// frees a block the other still holds, and the pool balances when both
/// are freed.
#[test]
fn drop_before_keeps_blocks_another_holder_needs() {
    let mut kv = manager(4, 8);
    let mut st = Storage::default();
    let a = kv.create_seq(Tenant(0));
    let toks: Vec<u32> = (0..12).collect();
    st.append(&mut kv, a, &toks);
    let b = kv.fork(a).unwrap();
    assert_eq!(kv.drop_before(a, 8).unwrap(), 2);
    // b still holds all three blocks: nothing went back to the pool.
    assert_eq!(kv.stats().used, 3);
    assert_eq!(st.read(&kv, b), toks);
    let c = kv.fork(a).unwrap(); // shares a's gap and live block
    assert_eq!(kv.dropped(c).unwrap(), 2);
    st.append(&mut kv, c, &[50]);
    assert_eq!(st.0[&kv.locate(c, 12).unwrap()], 50);
    assert_eq!(st.0[&kv.locate(a, 11).unwrap()], 11);
    for s in [a, b, c] {
        kv.free_seq(s).unwrap();
    }
    let st = kv.stats();
    assert_eq!((st.used, st.free, st.cached), (0, 8, 0));
}

/// Publishing a sequence with dropped blocks walks the gap only along
/// nodes the index already holds: blocks published before they were
/// dropped stay attachable (cached, not freed), and nothing is hung
/// below a gap the index does not know.
#[test]
fn publish_with_dropped_blocks_is_exact() {
    let mut kv = manager(4, 16);
    let mut st = Storage::default();
    let toks: Vec<u32> = (0..12).collect();
    let a = kv.create_seq(Tenant(0));
    st.append(&mut kv, a, &toks);
    kv.publish(a, &toks).unwrap();
    kv.drop_before(a, 8).unwrap();
    // The two dropped blocks were published: cached, still attachable.
    assert_eq!(kv.stats().cached, 2);
    let mut more = toks.clone();
    more.extend([12, 13, 14, 15]);
    st.append(&mut kv, a, &more[12..]);
    kv.publish(a, &more).unwrap();
    let b = kv.create_seq(Tenant(0));
    assert_eq!(kv.attach_prefix(b, &more).unwrap(), 16);
    assert_eq!(st.read(&kv, b), more);

    // Dropped before being published: only the gap-free part is indexed.
    let c = kv.create_seq(Tenant(1));
    st.append(&mut kv, c, &toks);
    kv.drop_before(c, 8).unwrap();
    kv.publish(c, &toks).unwrap();
    let d = kv.create_seq(Tenant(1));
    assert_eq!(kv.attach_prefix(d, &toks).unwrap(), 0);
}
