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

use std::collections::BTreeMap;

use crate::{BlockId, Tenant};

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
    /// The published block.
    block: BlockId,
    /// Where the node hangs.
    parent: Place,
    /// The block's tokens (also the node's key in `parent`'s children).
    key: Box<[u32]>,
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
}

impl PrefixIndex {
    /// An empty index over blocks `0..capacity`.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            nodes: Vec::new(),
            free_nodes: Vec::new(),
            roots: BTreeMap::new(),
            block_node: vec![None; capacity],
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

    /// The block node `n` publishes.
    pub(crate) fn block_of(&self, n: NodeId) -> Option<BlockId> {
        self.node(n).map(|node| node.block)
    }

    /// The node that publishes `b`, if any.
    pub(crate) fn node_of(&self, b: BlockId) -> Option<NodeId> {
        self.block_node.get(b.0 as usize).copied().flatten()
    }

    /// Whether `b` is published (and so immutable).
    pub(crate) fn is_published(&self, b: BlockId) -> bool {
        self.node_of(b).is_some()
    }

    /// Number of nodes (published blocks).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.nodes.len() - self.free_nodes.len()
    }

    /// Publishes `block` as the child of `at` keyed by `key` and returns the
    /// new node. The caller guarantees that `at` has no child with this key,
    /// that `block` is not yet published, and that `at` exists.
    pub(crate) fn insert(&mut self, at: Place, key: &[u32], block: BlockId) -> NodeId {
        debug_assert!(self.child(at, key).is_none());
        debug_assert!(!self.is_published(block));
        let node = Node {
            block,
            parent: at,
            key: key.into(),
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
        if let Some(slot) = self.block_node.get_mut(block.0 as usize) {
            *slot = Some(id);
        }
        id
    }

    /// Removes `n` and all its descendants; returns their blocks (now
    /// unpublished), `n`'s own block first.
    pub(crate) fn remove_subtree(&mut self, n: NodeId) -> Vec<BlockId> {
        let mut removed = Vec::new();
        // Unlink n from its parent.
        let Some((parent, key)) = self.node(n).map(|node| (node.parent, node.key.clone())) else {
            return removed;
        };
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
        // Then drop the subtree, depth first.
        let mut stack = vec![n];
        while let Some(id) = stack.pop() {
            let Some(node) = self.nodes.get_mut(id.0 as usize).and_then(Option::take) else {
                continue;
            };
            self.free_nodes.push(id);
            if let Some(slot) = self.block_node.get_mut(node.block.0 as usize) {
                *slot = None;
            }
            removed.push(node.block);
            stack.extend(node.children.into_values());
        }
        removed
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
        let a = ix.insert(Place::Root(T), &[1, 2], BlockId(4));
        ix.insert(Place::Node(a), &[3, 4], BlockId(5));
        ix.insert(Place::Root(T), &[3, 4], BlockId(6));
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
        let a = ix.insert(Place::Root(T), &[1], BlockId(0));
        let b = ix.insert(Place::Node(a), &[2], BlockId(1));
        ix.insert(Place::Node(b), &[3], BlockId(2));
        ix.insert(Place::Node(a), &[4], BlockId(3));
        ix.insert(Place::Root(T), &[9], BlockId(4));
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
        ix.insert(Place::Root(T), &[5], BlockId(7));
        assert_eq!(ix.nodes.len(), 5);
    }
}
