//! A radix tree over the literal prefixes of a rule set's patterns.
//!
//! Walking the tree along a path visits exactly the rules whose literal prefix (the part before
//! the first `*`) is a prefix of the path: the only rules that can match. A file of 100,000 rules
//! thus costs a walk of the path's length plus the few candidates on the way, instead of a scan
//! of every rule. Nodes, edges, labels and rule entries live in flat vectors, so the tree is
//! compact, immutable and cheap to share.
//!
//! Each rule is kept as a small [`Entry`] that holds all a walk needs (priority, kind, and the
//! `*`-separated segments of the pattern after its prefix, split once at build time), so that a
//! decision touches only the index's own contiguous memory, never the [`Rule`]s themselves.

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
    /// Into `entries`, sorted best first: longest pattern, then allow, then earliest line.
    entries: Span,
    /// Into `tails`: this node's anchored wildcard entries by the last four bytes they demand
    /// of the path, when it has many (see [`TAILS_FROM`]); those are not in `entries`.
    tails: Span,
}

/// From how many anchored wildcard rules (`/*.ext$`) on one node they are looked up by the
/// path's last four bytes instead of being tried one by one. Files with thousands of such rules
/// would otherwise cost thousands of checks per decision.
const TAILS_FROM: usize = 32;

/// The last four bytes of a segment or path, as a key.
fn tail_key(b: &[u8]) -> Option<u32> {
    let t: [u8; 4] = b.get(b.len().checked_sub(4)?..)?.try_into().ok()?;
    Some(u32::from_be_bytes(t))
}

#[derive(Debug, Clone, Copy)]
struct Edge {
    byte: u8,
    node: u32,
}

/// What the walk needs to know about one rule.
#[derive(Debug, Clone, Copy)]
struct Entry {
    rule: u32,
    /// The pattern's length in octets: its priority.
    len: u32,
    line: u32,
    /// The literal segments after the prefix (between `*`s), into `segs`.
    segs: Span,
    allow: bool,
    /// Whether the path must end where the last segment ends (a final `$` not cancelled by a
    /// `*` before it).
    anchored: bool,
    /// For an anchored entry with segments, the byte the path must end with.
    last_byte: u8,
    /// A filter: bit `b % 64` is set for every byte `b` of the segments. A path that lacks one
    /// of them cannot match, which rejects most wildcard rules without searching the path.
    need: u64,
}

impl Entry {
    /// The ordering key: greater is better (longest, then allow, then earliest line).
    fn key(&self) -> (u32, bool, std::cmp::Reverse<u32>) {
        (self.len, self.allow, std::cmp::Reverse(self.line))
    }
}

/// The compiled form of the rules that apply to one product token (or to `*`).
#[derive(Debug, Default)]
pub(crate) struct PrefixIndex {
    nodes: Vec<Node>,
    edges: Vec<Edge>,
    entries: Vec<Entry>,
    segs: Vec<Span>,
    /// (tail key, span of `entries` sorted best first), sorted by key within each node.
    tails: Vec<(u32, Span)>,
    /// Node labels and pattern segments.
    bytes: Vec<u8>,
}

/// The winning rule of a walk.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Best {
    pub(crate) rule: u32,
    /// Whether the rule was taken as matching without a search, the budget being spent
    /// ([`MATCH_BUDGET`]): the verdict is the safe one, but the rule may not match the path.
    pub(crate) assumed: bool,
}

fn prefix(rule: &Rule) -> &[u8] {
    &rule.pattern.as_bytes()[..rule.shape.prefix_len as usize]
}

impl PrefixIndex {
    /// Builds the index over the rules named by `ids` (indices into `all`).
    pub(crate) fn build(all: &[Rule], ids: Vec<u32>) -> Self {
        // The prefixes copied into one buffer, so the construction below reads contiguous
        // memory rather than chasing each rule's pattern around the heap.
        let mut flat =
            Vec::with_capacity(ids.iter().map(|&r| prefix(&all[r as usize]).len()).sum());
        let mut spans: Vec<(u32, u32, u32)> = Vec::with_capacity(ids.len());
        for &r in &ids {
            let p = prefix(&all[r as usize]);
            spans.push((flat.len() as u32, p.len() as u32, r));
            flat.extend_from_slice(p);
        }
        let text = |(start, len, _): (u32, u32, u32)| &flat[start as usize..(start + len) as usize];
        // Not sorted as a whole: each node orders its own items by one byte (a radix sort from
        // the most significant byte), which costs the prefixes' length, not n log n string
        // comparisons of long shared beginnings.
        let mut items: Vec<(&[u8], u32)> = spans.iter().map(|&sp| (text(sp), sp.2)).collect();
        let mut scratch: Vec<(&[u8], u32)> = Vec::new();
        let mut index = PrefixIndex {
            nodes: vec![Node::default()],
            edges: Vec::new(),
            entries: Vec::with_capacity(items.len()),
            segs: Vec::new(),
            tails: Vec::new(),
            bytes: Vec::new(),
        };
        // (node, range of `items`, depth): an explicit stack, so deep trees cannot overflow ours.
        let mut work = vec![(0u32, 0usize, items.len(), 0usize)];
        while let Some((node, lo, hi, depth)) = work.pop() {
            order_by_byte(&mut items[lo..hi], depth, &mut scratch);
            let mut i = lo;
            let mut here: Vec<Entry> = Vec::new();
            while i < hi && items[i].0.len() == depth {
                here.push(index.entry(&all[items[i].1 as usize], items[i].1));
                i += 1;
            }
            let tailed = |e: &Entry, index: &PrefixIndex| -> Option<u32> {
                let last = index.segs[e.segs.range()].last()?;
                if e.anchored {
                    tail_key(&index.bytes[last.range()])
                } else {
                    None
                }
            };
            let mut with_tail: Vec<(u32, Entry)> = Vec::new();
            if here.iter().filter(|e| tailed(e, &index).is_some()).count() >= TAILS_FROM {
                let (t, rest): (Vec<Entry>, Vec<Entry>) =
                    here.into_iter().partition(|e| tailed(e, &index).is_some());
                with_tail = t.into_iter().filter_map(|e| Some((tailed(&e, &index)?, e))).collect();
                here = rest;
            }
            here.sort_unstable_by_key(|e| std::cmp::Reverse(e.key()));
            let entries_start = index.entries.len();
            index.entries.extend_from_slice(&here);
            let entries = Span {
                start: entries_start as u32,
                len: (index.entries.len() - entries_start) as u32,
            };
            with_tail.sort_unstable_by_key(|(k, e)| (*k, std::cmp::Reverse(e.key())));
            let tails_start = index.tails.len();
            for chunk in with_tail.chunk_by(|a, b| a.0 == b.0) {
                let start = index.entries.len() as u32;
                index.entries.extend(chunk.iter().map(|(_, e)| *e));
                index.tails.push((chunk[0].0, Span { start, len: chunk.len() as u32 }));
            }
            let tails =
                Span { start: tails_start as u32, len: (index.tails.len() - tails_start) as u32 };
            let edges_start = index.edges.len() as u32;
            while i < hi {
                let first = items[i].0;
                let byte = first[depth];
                // Ordered by the byte at `depth`: one run per child.
                let j = i + items[i..hi].partition_point(|(p, _)| p[depth] <= byte);
                // The child's label: as far as every item of the run agrees.
                let mut common = depth + 1;
                while common < first.len() {
                    let b = first[common];
                    if !items[i + 1..j].iter().all(|(p, _)| p.get(common) == Some(&b)) {
                        break;
                    }
                    common += 1;
                }
                let child = index.nodes.len() as u32;
                let label = Span { start: index.bytes.len() as u32, len: (common - depth) as u32 };
                index.bytes.extend_from_slice(&first[depth..common]);
                index.nodes.push(Node { label, ..Node::default() });
                index.edges.push(Edge { byte, node: child });
                work.push((child, i, j, common));
                i = j;
            }
            let n = &mut index.nodes[node as usize];
            n.entries = entries;
            n.tails = tails;
            n.edges = Span { start: edges_start, len: index.edges.len() as u32 - edges_start };
        }
        // Kept for the file's lifetime in the cache: no spare capacity (issue 22).
        index.nodes.shrink_to_fit();
        index.edges.shrink_to_fit();
        index.entries.shrink_to_fit();
        index.segs.shrink_to_fit();
        index.tails.shrink_to_fit();
        index.bytes.shrink_to_fit();
        index
    }

    /// The entry of one rule, its segments stored in `self`.
    fn entry(&mut self, rule: &Rule, id: u32) -> Entry {
        let pattern = rule.pattern.as_bytes();
        let rest = &pattern[rule.shape.prefix_len as usize..rule.shape.body_len as usize];
        // A trailing `*` swallows whatever an anchor would have demanded.
        let anchored = rule.shape.anchored && rest.last() != Some(&b'*');
        let segs_start = self.segs.len() as u32;
        for seg in rest.split(|&b| b == b'*').filter(|s| !s.is_empty()) {
            self.segs.push(Span { start: self.bytes.len() as u32, len: seg.len() as u32 });
            self.bytes.extend_from_slice(seg);
        }
        let need = rest.iter().filter(|&&b| b != b'*').fold(0, |m, &b| m | byte_bit(b));
        Entry {
            rule: id,
            len: rule.priority,
            line: rule.line,
            segs: Span { start: segs_start, len: self.segs.len() as u32 - segs_start },
            allow: rule.kind == RuleKind::Allow,
            anchored,
            last_byte: rest.last().copied().unwrap_or(0),
            need,
        }
    }

    /// Whether the part of a pattern after its prefix matches `path` (what follows the prefix).
    /// `filter` holds the [`byte_bit`] mask of the whole path (a superset of this rest's bytes),
    /// computed on first use.
    fn rest_matches(&self, e: &Entry, path: &[u8], filter: &mut PathFilter<'_>) -> bool {
        let segs = &self.segs[e.segs.range()];
        let Some((last, init)) = segs.split_last() else {
            return !e.anchored || path.is_empty();
        };
        if e.anchored && path.last() != Some(&e.last_byte) {
            return false;
        }
        if e.need & !filter.bits() != 0 {
            return false;
        }
        if (!init.is_empty() || !e.anchored) && !filter.charge(path.len()) {
            // Out of budget (see `MATCH_BUDGET`): the safe side, without searching; noted, so
            // that the decision never names a rule that was not seen to match.
            if !e.allow {
                filter.assumed.push(e.rule);
            }
            return !e.allow;
        }
        // Each segment at its leftmost place after the previous one: always safe for `*`-only
        // globs (see `pattern`), so no backtracking.
        let mut pos = 0usize;
        for seg in init {
            match find(&path[pos..], &self.bytes[seg.range()]) {
                Some(at) => pos += at + seg.len as usize,
                None => return false,
            }
        }
        let last = &self.bytes[last.range()];
        if e.anchored {
            path.len() >= pos + last.len() && same(&path[path.len() - last.len()..], last)
        } else {
            find(&path[pos..], last).is_some()
        }
    }

    /// The best of a node's entries that matches `rest`, if it beats `best`.
    fn best_at<'a>(
        &'a self,
        node: &Node,
        rest: &[u8],
        best: Option<&'a Entry>,
        filter: &mut PathFilter<'_>,
    ) -> Option<&'a Entry> {
        let mut best = self.best_of(node.entries, rest, best, filter);
        if node.tails.len > 0 {
            let tails = &self.tails[node.tails.range()];
            if let Some(key) = tail_key(rest) {
                if let Ok(i) = tails.binary_search_by_key(&key, |t| t.0) {
                    best = self.best_of(tails[i].1, rest, best, filter);
                }
            }
        }
        best
    }

    /// The best of a run of entries sorted best first: the first that matches is the run's
    /// best, and once one cannot beat the best so far, none after it can.
    fn best_of<'a>(
        &'a self,
        run: Span,
        rest: &[u8],
        best: Option<&'a Entry>,
        filter: &mut PathFilter<'_>,
    ) -> Option<&'a Entry> {
        for e in &self.entries[run.range()] {
            if best.is_some_and(|b| b.key() >= e.key()) {
                break;
            }
            if self.rest_matches(e, rest, filter) {
                return Some(e);
            }
        }
        best
    }

    /// The best matching rule for `path` (canonical form): the longest pattern, allow winning
    /// ties, then the earliest line.
    ///
    /// The walk goes down first and weighs the candidates on the way back up: deeper nodes hold
    /// longer prefixes, so a good best is known early and the wildcard rules near the root,
    /// usually shorter, are mostly skipped without being tried.
    pub(crate) fn longest_match(&self, path: &[u8]) -> Option<Best> {
        const CHAIN: usize = 32;
        let mut chain = [(0u32, 0u32); CHAIN];
        let mut len = 0usize;
        let mut best: Option<&Entry> = None;
        let mut filter = PathFilter { path, bits: None, budget: MATCH_BUDGET, assumed: Vec::new() };
        let mut node_id = 0u32;
        let mut depth = 0usize;
        loop {
            let node = &self.nodes[node_id as usize];
            if len < CHAIN {
                chain[len] = (node_id, depth as u32);
                len += 1;
            } else {
                best = self.best_at(node, &path[depth..], best, &mut filter);
            }
            let rest = &path[depth..];
            let Some(&byte) = rest.first() else { break };
            let edges = &self.edges[node.edges.range()];
            let found = if edges.len() <= 8 {
                edges.iter().find(|e| e.byte == byte)
            } else {
                edges.binary_search_by_key(&byte, |e| e.byte).ok().map(|i| &edges[i])
            };
            let Some(edge) = found else { break };
            let child = &self.nodes[edge.node as usize];
            let label = &self.bytes[child.label.range()];
            if !starts_with(rest, label) {
                break;
            }
            depth += label.len();
            node_id = edge.node;
        }
        for &(node_id, depth) in chain[..len].iter().rev() {
            let node = &self.nodes[node_id as usize];
            best = self.best_at(node, &path[depth as usize..], best, &mut filter);
        }
        best.map(|e| Best { rule: e.rule, assumed: filter.assumed.contains(&e.rule) })
    }

    /// Approximate heap size in bytes, for the cache's weigher.
    pub(crate) fn heap_size(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.edges.capacity() * std::mem::size_of::<Edge>()
            + self.entries.capacity() * std::mem::size_of::<Entry>()
            + self.segs.capacity() * std::mem::size_of::<Span>()
            + self.tails.capacity() * std::mem::size_of::<(u32, Span)>()
            + self.bytes.capacity()
    }
}

/// The filter bit of one byte.
#[inline]
fn byte_bit(b: u8) -> u64 {
    1 << (b % 64)
}

/// The filter bits of every byte of a whole path, computed when a wildcard rule first needs
/// them. Over the whole path, not the rest after a node's prefix: extra bits only loosen the
/// filter, so one computation serves every node of the walk.
struct PathFilter<'p> {
    path: &'p [u8],
    bits: Option<u64>,
    /// What is left of [`MATCH_BUDGET`] for this walk.
    budget: usize,
    /// The rules taken as matching without a search once the budget was spent.
    assumed: Vec<u32>,
}

/// How many path bytes one decision may search for wildcard segments. Each search is linear,
/// so one rule costs at most about twice the length of the path after its prefix; that length
/// is charged per rule tried. A hostile file of tens of thousands of wildcard rules, each of
/// which the path passes the byte filter for, against a 64 KiB URL, would otherwise cost
/// gigabytes of searching. 4 MiB is 64 rules against a 64 KiB path, and more than any real
/// file needs: the corpus's decisions search a few hundred bytes.
///
/// Once it is spent, the rules still to be tried are judged without searching, on the safe
/// side: a disallow counts as matching and an allow as not. The verdict can then only be more
/// restrictive than the exact one, never less.
const MATCH_BUDGET: usize = 4 << 20;

impl PathFilter<'_> {
    /// Charges the search of `len` path bytes; false once the budget cannot pay it.
    fn charge(&mut self, len: usize) -> bool {
        match self.budget.checked_sub(len) {
            Some(left) => {
                self.budget = left;
                true
            }
            None => {
                self.budget = 0;
                false
            }
        }
    }

    fn bits(&mut self) -> u64 {
        let path = self.path;
        *self.bits.get_or_insert_with(|| path.iter().fold(0, |m, &b| m | byte_bit(b)))
    }
}

/// Orders `items` (which share their first `depth` bytes) by their byte at `depth`, those that
/// end at `depth` first: a counting sort for big runs, a plain sort on the key for small ones.
fn order_by_byte<'a>(
    items: &mut [(&'a [u8], u32)],
    depth: usize,
    scratch: &mut Vec<(&'a [u8], u32)>,
) {
    let key = |p: &[u8]| p.get(depth).map_or(0usize, |&b| usize::from(b) + 1);
    if items.len() <= 64 {
        items.sort_unstable_by_key(|(p, _)| key(p));
        return;
    }
    let mut starts = [0usize; 258];
    for (p, _) in items.iter() {
        starts[key(p) + 1] += 1;
    }
    for k in 1..starts.len() {
        starts[k] += starts[k - 1];
    }
    scratch.clear();
    scratch.extend_from_slice(items);
    for &item in scratch.iter() {
        let k = key(item.0);
        items[starts[k]] = item;
        starts[k] += 1;
    }
}

/// Byte-slice equality without a call to `memcmp`: the slices compared here are a few bytes
/// long, where the call costs more than the comparison.
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

#[inline]
fn starts_with(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && same(&s[..prefix.len()], prefix)
}

/// Below this haystack length a plain scan on the needle's first byte beats setting up
/// `memmem`'s searcher. Its worst case is bounded by the length itself (at most 64 × 64 byte
/// comparisons), so a hostile pattern cannot make it quadratic in anything that grows.
const SHORT_HAYSTACK: usize = 64;

/// Leftmost occurrence of `needle` (non-empty) in `haystack`: linear in both lengths (`memmem`
/// is a two-way search with a SIMD prefilter), so a long `*` segment against a long path of
/// near-matches costs one pass, not one comparison of the segment per byte of the path.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, tail) = needle.split_first()?;
    if needle.len() > haystack.len() {
        return None;
    }
    if haystack.len() < SHORT_HAYSTACK {
        let last_start = haystack.len() - needle.len();
        return (0..=last_start)
            .find(|&i| haystack[i] == first && same(&haystack[i + 1..i + needle.len()], tail));
    }
    super::pattern::find(haystack, needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index's weight counts every element of every vector it keeps (a survivor of the
    /// engine's mutation run: the cache weighs files by it, and no engine test read it).
    #[test]
    fn heap_size_counts_every_vector() {
        let body = b"User-agent: *\nDisallow: /a\nDisallow: /ab\nAllow: /b/c\nDisallow: /c\n";
        for body in [&body[..], b"User-agent: *\nDisallow: /a*b\nAllow: /*.html$\n"] {
            let robots = crate::RobotsTxt::parse(body);
            let ids = (0..robots.rules.len() as u32).collect();
            let index = PrefixIndex::build(&robots.rules, ids);
            let least = index.nodes.len() * std::mem::size_of::<Node>()
                + index.edges.len() * std::mem::size_of::<Edge>()
                + index.entries.len() * std::mem::size_of::<Entry>()
                + index.segs.len() * std::mem::size_of::<Span>()
                + index.tails.len() * std::mem::size_of::<(u32, Span)>()
                + index.bytes.len();
            assert!(index.heap_size() >= least, "{} < {least}", index.heap_size());
            assert!(!index.edges.is_empty() && !index.entries.is_empty());
        }
    }
}
