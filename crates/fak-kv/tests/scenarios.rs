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

fn windowed(block_size: usize, n_blocks: usize, window: usize) -> KvManager {
    KvManager::with_window(
        PoolConfig {
            block_size,
            n_blocks,
        },
        window,
    )
    .unwrap()
}

/// Appends `toks`, then releases what a window of `w` no longer reads, as
/// the engine does after each forward pass.
fn append_windowed(st: &mut Storage, kv: &mut KvManager, s: SeqSlot, toks: &[u32], w: usize) {
    st.append(kv, s, toks);
    let n = kv.len(s).unwrap();
    kv.drop_before(s, (n + 1).saturating_sub(w)).unwrap();
}

/// The rows `s` holds from the first the next token reads, as read back.
fn window_rows(st: &Storage, kv: &KvManager, s: SeqSlot, w: usize) -> Vec<u32> {
    let n = kv.len(s).unwrap();
    ((n + 1).saturating_sub(w)..n)
        .map(|p| st.0[&kv.locate(s, p).unwrap()])
        .collect()
}

/// With a window, a sequence published after its early blocks were
/// dropped is found again: hollow nodes stand for the dropped blocks, and
/// the match attaches only the blocks of its window (the rest dropped).
/// Without a window the same sequence indexes nothing
/// (`publish_with_dropped_blocks_is_exact`).
#[test]
fn windowed_publish_after_drop_finds_the_window_again() {
    let w = 8;
    let mut kv = windowed(4, 16, w);
    let mut st = Storage::default();
    let toks: Vec<u32> = (0..14).collect();
    let a = kv.create_seq(Tenant(0));
    append_windowed(&mut st, &mut kv, a, &toks, w);
    assert_eq!(kv.dropped(a).unwrap(), 1);
    kv.publish(a, &toks).unwrap();
    // One hollow node for block 0, then blocks 1 and 2 (the partial 3rd
    // block is not published).
    assert_eq!(kv.index_nodes(), 3);
    assert_eq!(kv.prefix_match(Tenant(0), &toks), 12);
    assert_eq!(kv.prefix_match(Tenant(1), &toks), 0);
    let b = kv.create_seq(Tenant(0));
    assert_eq!(kv.attach_prefix_rows(b, &toks), Ok(12));
    // The next token (12) reads 5..12: blocks 1 and 2 are attached, block
    // 0 counts as dropped.
    assert_eq!(kv.dropped(b).unwrap(), 1);
    assert_eq!(kv.blocks(b).unwrap(), &kv.blocks(a).unwrap()[..2]);
    assert_eq!(window_rows(&st, &kv, b, w), (5..12).collect::<Vec<_>>());
    append_windowed(&mut st, &mut kv, b, &[90, 91], w);
    assert_eq!(window_rows(&st, &kv, b, w), [7, 8, 9, 10, 11, 90, 91]);
    // A match whose window reaches the hollow block shrinks to a point
    // whose window is held; here none is: 6 reads 0..6 (block 0 gone).
    let c = kv.create_seq(Tenant(0));
    assert_eq!(kv.prefix_match(Tenant(0), &toks[..6]), 0);
    assert_eq!(kv.attach_prefix_rows(c, &toks[..6]), Ok(0));
    assert_eq!(kv.dropped(c).unwrap(), 0);
    // Freed, everything returns: the published blocks cached, nothing leaks.
    for s in [a, b, c] {
        kv.free_seq(s).unwrap();
    }
    let stats = kv.stats();
    assert_eq!((stats.used, stats.cached), (0, 2));
}

/// A match shrinks to the longest prefix whose window the index holds,
/// and never attaches a row it does not have.
#[test]
fn windowed_match_shrinks_to_a_held_window() {
    let w = 8;
    let mut kv = windowed(4, 16, w);
    let mut st = Storage::default();
    let toks: Vec<u32> = (0..24).collect();
    let a = kv.create_seq(Tenant(0));
    // Published at 12 (blocks 0..3), then grown to 24: blocks 0..4 dropped
    // (0..3 cached, 3 freed: never published), then published again.
    append_windowed(&mut st, &mut kv, a, &toks[..12], w);
    kv.publish(a, &toks[..12]).unwrap();
    append_windowed(&mut st, &mut kv, a, &toks[12..], w);
    assert_eq!(kv.dropped(a).unwrap(), 4);
    kv.publish(a, &toks).unwrap();
    // index: b0 b1 b2 ○ b4 b5
    assert_eq!(kv.index_nodes(), 6);
    assert_eq!(kv.prefix_match(Tenant(0), &toks), 24);
    // 14 reads 7..14, block 3 is hollow: 12 (reads 5..12, blocks 1 and 2).
    let mut other = toks[..14].to_vec();
    other.extend([99, 99]);
    assert_eq!(kv.prefix_match(Tenant(0), &other), 12);
    let b = kv.create_seq(Tenant(0));
    assert_eq!(kv.attach_prefix_rows(b, &other), Ok(12));
    assert_eq!(kv.dropped(b).unwrap(), 1);
    assert_eq!(window_rows(&st, &kv, b, w), (5..12).collect::<Vec<_>>());
    // 17 reads 10..17 → block 3 again: 12.
    assert_eq!(kv.prefix_match(Tenant(0), &toks[..17]), 12);
    // 21 reads 14..21: blocks 3 (hollow) → 12.
    assert_eq!(kv.prefix_match(Tenant(0), &toks[..21]), 12);
    // 23 reads 16..23: blocks 4 and 5 → all of it.
    assert_eq!(kv.prefix_match(Tenant(0), &toks[..23]), 23);
    let c = kv.create_seq(Tenant(0));
    assert_eq!(kv.attach_prefix_rows(c, &toks[..23]), Ok(23));
    assert_eq!(window_rows(&st, &kv, c, w), (16..23).collect::<Vec<_>>());
    // A later sequence that computes block 3 again fills the hollow node.
    let d = kv.create_seq(Tenant(0));
    append_windowed(&mut st, &mut kv, d, &toks[..16], w);
    kv.publish(d, &toks[..16]).unwrap();
    assert_eq!(kv.index_nodes(), 6);
    assert_eq!(kv.prefix_match(Tenant(0), &other), 14);
}

/// Evicting the oldest cached block of a windowed chain (its first block,
/// the first one the window released) makes its node hollow and keeps the
/// rest findable; without a window the whole chain goes with it.
#[test]
fn windowed_eviction_hollows_and_keeps_the_tail() {
    let w = 8;
    for window in [Some(w), None] {
        let mut kv = match window {
            Some(w) => windowed(4, 8, w),
            None => manager(4, 8),
        };
        let mut st = Storage::default();
        let toks: Vec<u32> = (0..16).collect();
        let a = kv.create_seq(Tenant(0));
        // Published per 4-token step, as the engine's prefill chunks are.
        for chunk in toks.chunks(4) {
            append_windowed(&mut st, &mut kv, a, chunk, w);
            let n = kv.len(a).unwrap();
            kv.publish(a, &toks[..n]).unwrap();
        }
        kv.free_seq(a).unwrap();
        assert_eq!(kv.stats().cached, 4);
        // Another tenant takes 5 of the 8 blocks: one cached block goes,
        // the least recently used: block 0 (dropped first).
        let b = kv.create_seq(Tenant(1));
        st.append(&mut kv, b, &[7; 20]);
        let found = kv.prefix_match(Tenant(0), &toks);
        match window {
            Some(_) => {
                assert_eq!(found, 16, "the window 9..16 is still held");
                assert_eq!(kv.stats().cached, 3);
                let c = kv.create_seq(Tenant(0));
                assert_eq!(kv.attach_prefix_rows(c, &toks), Ok(16));
                assert_eq!(window_rows(&st, &kv, c, w), (9..16).collect::<Vec<_>>());
                kv.free_seq(c).unwrap();
            }
            None => assert_eq!(found, 0, "without a window the chain went whole"),
        }
        // Draining the pool removes every node, hollow ones included.
        kv.free_seq(b).unwrap();
        let s = kv.create_seq(Tenant(0));
        st.append(&mut kv, s, &[1; 32]);
        assert_eq!(kv.index_nodes(), 0);
        kv.free_seq(s).unwrap();
        assert_eq!(kv.stats().free, 8);
    }
}
