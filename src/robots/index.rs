//! A radix tree over the literal prefixes of a rule set's patterns.
//!
//! Walking the tree along a path visits exactly the rules whose literal prefix (the part before
//! the first `*`) is a prefix of the path: the only rules that can match. A file of 100,000 rules
//! thus costs a walk of the path's length plus the few candidates on the way, instead of a scan
//! of every rule. Nodes, edges and labels live in flat vectors, so the tree is compact, immutable
//! and cheap to share.

use super::pattern;
use super::{Rule, RuleKind};

#[derive(Debug, Clone, Copy, Default)]
struct Span {
    start: u32,
    len: u32,
}

impl Span {
    fn range(self) -> std::ops::Range<usize> {
        self.start as usize..(self.start + self.len) as usize
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Node {
    label: Span,
    edges: Span,
    rules: Span,
}

#[derive(Debug, Clone, Copy)]
struct Edge {
    byte: u8,
    node: u32,
}

/// The compiled form of the rules that apply to one product token (or to `*`).
#[derive(Debug, Default)]
pub(crate) struct PrefixIndex {
    nodes: Vec<Node>,
    edges: Vec<Edge>,
    rules: Vec<u32>,
    labels: Vec<u8>,
}

/// The winning rule of a walk: its index, pattern length and kind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Best {
    pub(crate) rule: u32,
    len: u32,
    allow: bool,
    line: u32,
}

impl Best {
    /// Whether a rule of this length and kind can no longer win against `self`.
    fn beats(&self, len: u32, allow: bool, line: u32) -> bool {
        (self.len, self.allow, std::cmp::Reverse(self.line))
            >= (len, allow, std::cmp::Reverse(line))
    }
}

fn prefix(rule: &Rule) -> &[u8] {
    &rule.pattern.as_bytes()[..rule.shape.prefix_len as usize]
}

impl PrefixIndex {
    /// Builds the index over the rules named by `ids` (indices into `all`).
    pub(crate) fn build(all: &[Rule], mut ids: Vec<u32>) -> Self {
        ids.sort_unstable_by(|&a, &b| prefix(&all[a as usize]).cmp(prefix(&all[b as usize])));
        let mut index = PrefixIndex {
            nodes: vec![Node::default()],
            edges: Vec::new(),
            rules: Vec::with_capacity(ids.len()),
            labels: Vec::new(),
        };
        // (node, range of `ids`, depth): an explicit stack, so deep trees cannot overflow ours.
        let mut work = vec![(0u32, 0usize, ids.len(), 0usize)];
        while let Some((node, lo, hi, depth)) = work.pop() {
            let mut i = lo;
            let rules_start = index.rules.len() as u32;
            while i < hi && prefix(&all[ids[i] as usize]).len() == depth {
                index.rules.push(ids[i]);
                i += 1;
            }
            // Longest patterns first, so a walk can stop looking at a node early.
            let here = &mut index.rules[rules_start as usize..];
            here.sort_unstable_by_key(|&r| std::cmp::Reverse(all[r as usize].pattern.len()));
            let edges_start = index.edges.len() as u32;
            while i < hi {
                let first = prefix(&all[ids[i] as usize]);
                let byte = first[depth];
                let mut j = i + 1;
                while j < hi && prefix(&all[ids[j] as usize])[depth] == byte {
                    j += 1;
                }
                let last = prefix(&all[ids[j - 1] as usize]);
                let common = first.iter().zip(last).take_while(|(a, b)| a == b).count();
                let child = index.nodes.len() as u32;
                let label = Span { start: index.labels.len() as u32, len: (common - depth) as u32 };
                index.labels.extend_from_slice(&first[depth..common]);
                index.nodes.push(Node { label, ..Node::default() });
                index.edges.push(Edge { byte, node: child });
                work.push((child, i, j, common));
                i = j;
            }
            let n = &mut index.nodes[node as usize];
            n.rules = Span { start: rules_start, len: index.rules.len() as u32 - rules_start };
            n.edges = Span { start: edges_start, len: index.edges.len() as u32 - edges_start };
        }
        index
    }

    /// The longest matching rule for `path` (canonical form), allow winning ties.
    pub(crate) fn longest_match(&self, all: &[Rule], path: &[u8]) -> Option<Best> {
        let mut best: Option<Best> = None;
        let mut node = self.nodes[0];
        let mut depth = 0usize;
        loop {
            for &r in &self.rules[node.rules.range()] {
                let rule = &all[r as usize];
                let len = rule.pattern.len() as u32;
                let allow = rule.kind == RuleKind::Allow;
                if let Some(b) = &best {
                    if b.len > len {
                        break; // rules here are sorted longest first
                    }
                    if b.beats(len, allow, rule.line) {
                        continue;
                    }
                }
                let pat = rule.pattern.as_bytes();
                let rest = &pat[rule.shape.prefix_len as usize..rule.shape.body_len as usize];
                if pattern::matches_rest(rest, rule.shape.anchored, &path[depth..]) {
                    best = Some(Best { rule: r, len, allow, line: rule.line });
                }
            }
            let Some(&byte) = path.get(depth) else { break };
            let edges = &self.edges[node.edges.range()];
            let found = if edges.len() <= 8 {
                edges.iter().find(|e| e.byte == byte)
            } else {
                edges.binary_search_by_key(&byte, |e| e.byte).ok().map(|i| &edges[i])
            };
            let Some(edge) = found else { break };
            let child = self.nodes[edge.node as usize];
            let label = &self.labels[child.label.range()];
            if !path[depth..].starts_with(label) {
                break;
            }
            depth += label.len();
            node = child;
        }
        best
    }

    /// Approximate heap size in bytes, for the cache's weigher.
    pub(crate) fn heap_size(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.edges.capacity() * std::mem::size_of::<Edge>()
            + self.rules.capacity() * 4
            + self.labels.capacity()
    }
}
