//! The prefix index: a trie at block granularity, one root per [`Tenant`].
//!
//! Each node stands for one *full* physical block and is keyed by that
//! block's `block_size` token ids. The node's path from its tenant's root
//! spells the whole token prefix the block's KV was computed from (a block's
//! KV depends on every earlier token), so only whole-path matches are valid:
//!
//! ```text
//!   tenant 7 root                     (block_size = 2)
//!    ├─[1 2]→ b4 ──[3 4]→ b9          "1 2 3 4"   → [b4, b9]
//!    │              └─[3 5]→ b2       "1 2 3 5"   → [b4, b2]
//!    └─[8 8]→ b0                      "8 8"       → [b0]
//!   tenant 9 root
//!    └─[1 2]→ b6                      same tokens, other tenant: another block
//! ```
//!
//! Every node's block is *published*: immutable from then on (writers copy it
//! first). Removing a node removes its whole subtree, because the
//! descendants' paths go through it. The index holds no refcounts; it only
//! maps paths to blocks and blocks back to their node.
//!
//! A node may be *hollow*: it keeps its key and its children but no block
//! (a sliding-window manager's, see [`crate::KvManager::with_window`]: the
//! rows were dropped, or evicted, while later blocks of the path are still
//! worth finding). A hollow node never stays a leaf: removing a node also
//! removes the hollow ancestors it leaves childless.
//!
//! ```text
//!   windowed, block_size 2:  root ─[1 2]→ ○ ─[3 4]→ ○ ─[5 6]→ b7 ─[7 8]→ b3
//!   "1 2 3 4 5 6 7 8" walks 4 nodes; blocks only for positions 4..8
//! ```

use std::collections::BTreeMap;

use crate::events::{block_hash, EventLog};
use crate::{BlockId, KvEvent, Tenant};

/// Index of a node in the slab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct NodeId(u32);

/// A place in the trie: a tenant's root, or a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// The (implicit) root of a tenant's trie.
    Root(Tenant),
    /// A node.
    Node(NodeId),
}

/// Children of one place, keyed by a block's tokens (`block_size` ids).
type Children = BTreeMap<Box<[u32]>, NodeId>;

#[derive(Debug, Clone)]
struct Node {
    /// The published block; `None` for a hollow node.
    block: Option<BlockId>,
    /// Where the node hangs.
    parent: Place,
    /// The block's tokens (also the node's key in `parent`'s children).
    key: Box<[u32]>,
    /// The chained hash of the path's tokens up to this node's end
    /// ([`block_hash`]).
    hash: u64,
    children: Children,
}

/// The trie, plus the reverse map block → node.
#[derive(Debug, Clone)]
pub(crate) struct PrefixIndex {
    /// Node slab; `None` marks a recycled slot (listed in `free_nodes`).
    nodes: Vec<Option<Node>>,
    free_nodes: Vec<NodeId>,
    /// Children of each tenant's root; a tenant with no nodes has no entry.
    roots: BTreeMap<Tenant, Children>,
    /// Per block id: the node that publishes it.
    block_node: Vec<Option<NodeId>>,
    /// Blocks published and unpublished, when a router listens.
    events: Option<EventLog>,
}

impl PrefixIndex {
    /// An empty index over blocks `0..capacity`.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            nodes: Vec::new(),
            free_nodes: Vec::new(),
            roots: BTreeMap::new(),
            block_node: vec![None; capacity],
            events: None,
        }
    }

    /// Starts the event log (its first event: nothing is held), unless
    /// it runs.
    pub(crate) fn enable_events(&mut self) {
        if self.events.is_none() {
            self.events = Some(EventLog::new());
            // What is already published is stored now, root first.
            let mut order: Vec<NodeId> = Vec::new();
            let mut stack: Vec<NodeId> = self
                .roots
                .values()
                .flat_map(|c| c.values().copied())
                .collect();
            while let Some(n) = stack.pop() {
                order.push(n);
                if let Some(node) = self.node(n) {
                    stack.extend(node.children.values().copied());
                }
            }
            for n in order {
                self.log_stored(n);
            }
        }
    }

    /// Starts the log over: its pending events are dropped, and it says
    /// again that nothing is held, then stores every published block.
    pub(crate) fn restart_events(&mut self) {
        self.events = None;
        self.enable_events();
    }

    /// The events since the last call (none when the log is off).
    pub(crate) fn take_events(&mut self) -> Vec<KvEvent> {
        self.events.as_mut().map(EventLog::take).unwrap_or_default()
    }

    /// The hash of the node at `at` (`None` for a root).
    fn hash_at(&self, at: Place) -> Option<u64> {
        match at {
            Place::Root(_) => None,
            Place::Node(n) => self.node(n).map(|node| node.hash),
        }
    }

    /// Logs `n`'s block as stored, if it has one (and the log runs).
    fn log_stored(&mut self, n: NodeId) {
        let Some(log) = self.events.as_mut() else {
            return;
        };
        let node = |id: NodeId| self.nodes.get(id.0 as usize).and_then(Option::as_ref);
        let Some(at) = node(n).filter(|x| x.block.is_some()) else {
            return;
        };
        let parent = match at.parent {
            Place::Root(_) => None,
            Place::Node(p) => node(p).map(|x| x.hash),
        };
        log.stored(at.hash, parent, &at.key);
    }

    /// Logs a block of hash `hash` as removed.
    fn log_removed(&mut self, hash: u64) {
        if let Some(log) = self.events.as_mut() {
            log.removed(hash);
        }
    }

    fn node(&self, n: NodeId) -> Option<&Node> {
        self.nodes.get(n.0 as usize).and_then(Option::as_ref)
    }

    fn children(&self, at: Place) -> Option<&Children> {
        match at {
            Place::Root(t) => self.roots.get(&t),
            Place::Node(n) => self.node(n).map(|node| &node.children),
        }
    }

    /// The child of `at` keyed by `key`.
    pub(crate) fn child(&self, at: Place, key: &[u32]) -> Option<NodeId> {
        self.children(at)?.get(key).copied()
    }

    /// The child of `at` whose key starts with the longest run of `rest`'s
    /// ids (at most `limit` of them), with that length; `None` when no
    /// child's key starts with `rest[0]`. Keys sharing the longest prefix
    /// with `rest` sort next to it, so only its two neighbours are read.
    pub(crate) fn longest_child(
        &self,
        at: Place,
        rest: &[u32],
        limit: usize,
    ) -> Option<(NodeId, usize)> {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let children = self.children(at)?;
        let below = children
            .range::<[u32], _>((Unbounded, Included(rest)))
            .next_back();
        let above = children
            .range::<[u32], _>((Excluded(rest), Unbounded))
            .next();
        let lcp = |key: &[u32]| {
            key.iter()
                .zip(rest)
                .take(limit)
                .take_while(|(a, b)| a == b)
                .count()
        };
        [below, above]
            .into_iter()
            .flatten()
            .map(|(key, &node)| (node, lcp(key)))
            .filter(|&(_, n)| n > 0)
            .max_by_key(|&(_, n)| n)
    }

    /// The block node `n` publishes (`None` for a hollow node).
    pub(crate) fn block_of(&self, n: NodeId) -> Option<BlockId> {
        self.node(n).and_then(|node| node.block)
    }

    /// Whether `n` has children.
    pub(crate) fn has_children(&self, n: NodeId) -> bool {
        self.node(n).is_some_and(|node| !node.children.is_empty())
    }

    /// Makes `n` hollow: its block is unpublished and returned; its key
    /// and children stay.
    pub(crate) fn hollow(&mut self, n: NodeId) -> Option<BlockId> {
        let b = self
            .nodes
            .get_mut(n.0 as usize)
            .and_then(Option::as_mut)
            .and_then(|node| node.block.take())?;
        if let Some(slot) = self.block_node.get_mut(b.0 as usize) {
            *slot = None;
        }
        if let Some(h) = self.node(n).map(|node| node.hash) {
            self.log_removed(h);
        }
        Some(b)
    }

    /// Publishes `block` at the hollow node `n`. The caller guarantees
    /// that `n` is hollow and `block` is not yet published.
    pub(crate) fn fill(&mut self, n: NodeId, block: BlockId) {
        debug_assert!(!self.is_published(block));
        let Some(node) = self.nodes.get_mut(n.0 as usize).and_then(Option::as_mut) else {
            return;
        };
        debug_assert!(node.block.is_none(), "fill of a node with a block");
        node.block = Some(block);
        if let Some(slot) = self.block_node.get_mut(block.0 as usize) {
            *slot = Some(n);
        }
        self.log_stored(n);
    }

    /// The node that publishes `b`, if any.
    pub(crate) fn node_of(&self, b: BlockId) -> Option<NodeId> {
        self.block_node.get(b.0 as usize).copied().flatten()
    }

    /// Whether `b` is published (and so immutable).
    pub(crate) fn is_published(&self, b: BlockId) -> bool {
        self.node_of(b).is_some()
    }

    /// Number of nodes (published blocks and hollow nodes).
    pub(crate) fn len(&self) -> usize {
        self.nodes.len() - self.free_nodes.len()
    }

    /// Publishes `block` as the child of `at` keyed by `key` and returns the
    /// new node (a hollow one for `None`). The caller guarantees that `at`
    /// has no child with this key, that `block` is not yet published, and
    /// that `at` exists.
    pub(crate) fn insert(&mut self, at: Place, key: &[u32], block: Option<BlockId>) -> NodeId {
        debug_assert!(self.child(at, key).is_none());
        debug_assert!(!block.is_some_and(|b| self.is_published(b)));
        let node = Node {
            block,
            parent: at,
            key: key.into(),
            hash: block_hash(self.hash_at(at), key),
            children: Children::new(),
        };
        let id = match self.free_nodes.pop() {
            Some(id) => {
                self.nodes[id.0 as usize] = Some(node);
                id
            }
            None => {
                self.nodes.push(Some(node));
                NodeId((self.nodes.len() - 1) as u32)
            }
        };
        let children = match at {
            Place::Root(t) => Some(self.roots.entry(t).or_default()),
            Place::Node(p) => self
                .nodes
                .get_mut(p.0 as usize)
                .and_then(Option::as_mut)
                .map(|p| &mut p.children),
        };
        if let Some(children) = children {
            children.insert(key.into(), id);
        }
        if let Some(slot) = block.and_then(|b| self.block_node.get_mut(b.0 as usize)) {
            *slot = Some(id);
        }
        self.log_stored(id);
        id
    }

    /// Removes `n` and all its descendants, then the hollow ancestors this
    /// leaves without children; returns the removed blocks (now
    /// unpublished), `n`'s own block first when it has one.
    pub(crate) fn remove_subtree(&mut self, n: NodeId) -> Vec<BlockId> {
        let mut removed = Vec::new();
        let Some(parent) = self.unlink(n) else {
            return removed;
        };
        // Then drop the subtree, depth first.
        let mut stack = vec![n];
        while let Some(id) = stack.pop() {
            let Some(node) = self.nodes.get_mut(id.0 as usize).and_then(Option::take) else {
                continue;
            };
            self.free_nodes.push(id);
            if let Some(b) = node.block {
                if let Some(slot) = self.block_node.get_mut(b.0 as usize) {
                    *slot = None;
                }
                removed.push(b);
                self.log_removed(node.hash);
            }
            stack.extend(node.children.into_values());
        }
        // A hollow node left childless leads to nothing: remove it too.
        let mut up = parent;
        while let Place::Node(p) = up {
            match self.node(p) {
                Some(node) if node.block.is_none() && node.children.is_empty() => {}
                _ => break,
            }
            let Some(next) = self.unlink(p) else { break };
            if let Some(slot) = self.nodes.get_mut(p.0 as usize) {
                *slot = None;
            }
            self.free_nodes.push(p);
            up = next;
        }
        removed
    }

    /// Detaches `n` from its parent's children (the node itself stays in
    /// the slab); returns the parent, `None` for an unknown node.
    fn unlink(&mut self, n: NodeId) -> Option<Place> {
        let (parent, key) = self.node(n).map(|node| (node.parent, node.key.clone()))?;
        match parent {
            Place::Root(t) => {
                if let Some(children) = self.roots.get_mut(&t) {
                    children.remove(&key);
                    if children.is_empty() {
                        self.roots.remove(&t);
                    }
                }
            }
            Place::Node(p) => {
                if let Some(Some(p)) = self.nodes.get_mut(p.0 as usize) {
                    p.children.remove(&key);
                }
            }
        }
        Some(parent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Tenant = Tenant(1);

    fn walk(ix: &PrefixIndex, t: Tenant, tokens: &[u32], bs: usize) -> Vec<BlockId> {
        let mut at = Place::Root(t);
        let mut out = Vec::new();
        for key in tokens.chunks_exact(bs) {
            match ix.child(at, key) {
                Some(n) => {
                    out.push(ix.block_of(n).unwrap());
                    at = Place::Node(n);
                }
                None => break,
            }
        }
        out
    }

    #[test]
    fn insert_and_walk_whole_paths_only() {
        let mut ix = PrefixIndex::new(8);
        let a = ix.insert(Place::Root(T), &[1, 2], Some(BlockId(4)));
        ix.insert(Place::Node(a), &[3, 4], Some(BlockId(5)));
        ix.insert(Place::Root(T), &[3, 4], Some(BlockId(6)));
        assert_eq!(walk(&ix, T, &[1, 2, 3, 4], 2), [BlockId(4), BlockId(5)]);
        assert_eq!(walk(&ix, T, &[3, 4, 1, 2], 2), [BlockId(6)]);
        assert_eq!(
            walk(&ix, T, &[1, 2, 3], 2),
            [BlockId(4)],
            "partial blocks never match"
        );
        assert_eq!(walk(&ix, Tenant(2), &[1, 2], 2), []);
        assert!(ix.is_published(BlockId(5)));
        assert!(!ix.is_published(BlockId(7)));
        assert!(!ix.is_published(BlockId(700)));
        assert_eq!(ix.len(), 3);
    }

    #[test]
    fn remove_subtree_unpublishes_descendants_and_recycles_nodes() {
        let mut ix = PrefixIndex::new(8);
        let a = ix.insert(Place::Root(T), &[1], Some(BlockId(0)));
        let b = ix.insert(Place::Node(a), &[2], Some(BlockId(1)));
        ix.insert(Place::Node(b), &[3], Some(BlockId(2)));
        ix.insert(Place::Node(a), &[4], Some(BlockId(3)));
        ix.insert(Place::Root(T), &[9], Some(BlockId(4)));
        let mut removed = ix.remove_subtree(b);
        assert_eq!(removed[0], BlockId(1));
        removed.sort();
        assert_eq!(removed, [BlockId(1), BlockId(2)]);
        assert!(!ix.is_published(BlockId(2)));
        assert_eq!(walk(&ix, T, &[1, 4], 1), [BlockId(0), BlockId(3)]);
        assert_eq!(walk(&ix, T, &[1, 2, 3], 1), [BlockId(0)]);
        assert_eq!(ix.len(), 3);
        // Removing a root child empties the tenant when it was the last one.
        ix.remove_subtree(a);
        let n9 = ix.node_of(BlockId(4)).unwrap();
        ix.remove_subtree(n9);
        assert_eq!(ix.len(), 0);
        assert!(ix.roots.is_empty());
        // Recycled slots are reused.
        ix.insert(Place::Root(T), &[5], Some(BlockId(7)));
        assert_eq!(ix.nodes.len(), 5);
    }

    #[test]
    fn hollow_nodes_keep_their_children_and_are_pruned_with_the_last_leaf() {
        let mut ix = PrefixIndex::new(8);
        let h1 = ix.insert(Place::Root(T), &[1], None);
        let h2 = ix.insert(Place::Node(h1), &[2], None);
        let b = ix.insert(Place::Node(h2), &[3], Some(BlockId(5)));
        let c = ix.insert(Place::Node(b), &[4], Some(BlockId(6)));
        assert_eq!(ix.block_of(h1), None);
        assert_eq!(ix.child(Place::Node(h2), &[3]), Some(b));
        // Hollowing keeps the key and the children, unpublishes the block.
        assert!(ix.has_children(b));
        assert_eq!(ix.hollow(b), Some(BlockId(5)));
        assert_eq!(ix.hollow(b), None);
        assert!(!ix.is_published(BlockId(5)));
        assert_eq!(ix.child(Place::Node(b), &[4]), Some(c));
        // Filling gives a hollow node a block again.
        ix.fill(h2, BlockId(2));
        assert_eq!(ix.node_of(BlockId(2)), Some(h2));
        assert_eq!(ix.len(), 4);
        // Removing the leaf removes the hollow node above it, and stops at
        // the node with a block.
        assert_eq!(ix.remove_subtree(c), [BlockId(6)]);
        assert_eq!(ix.len(), 2);
        assert_eq!(ix.child(Place::Node(h2), &[3]), None);
        // The last block gone, the hollow root child goes too.
        assert_eq!(ix.remove_subtree(h2), [BlockId(2)]);
        assert_eq!(ix.len(), 0);
        assert!(ix.roots.is_empty());
    }
}
