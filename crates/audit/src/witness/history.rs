//! The leaves the witnesses may still need: a consistency proof from the size a witness last
//! cosigned to the newest checkpoint needs the hashes of the leaves in between
//! (RFC 9162 §2.1.4). The writer feeds every line it wrote whole ([`History::line`]) and every
//! checkpoint ([`History::checkpoint`]); the history keeps the tree's right edge at a base size
//! and the leaf hashes after it (32 bytes a record, at most [`MAX_LEAVES`]). A witness further
//! behind than the history (after a restart, or a long outage) is caught up from the audit
//! file itself ([`seed_from_file`]): the last checkpoint at or before its size, whose record
//! carries the tree's edge, and the lines after it.

use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::chain::{split_line, GENESIS};
use crate::merkle::{self, Hash, Tree};

use super::Written;

/// The most leaf hashes kept in memory (32 MiB): past that, the oldest are folded into the
/// base edge, and a witness further behind is caught up from the file.
pub const MAX_LEAVES: usize = 1 << 20;

/// The tree of the current origin: its edge at a base size, then the leaves after it, and
/// the tree at each checkpoint since the base (a witness's size is always one of them).
#[derive(Debug, Default)]
pub(crate) struct History {
    origin: String,
    base: Tree,
    leaves: Vec<Hash>,
    /// The tree over `base` and `leaves`.
    tip: Tree,
    /// The tree at each checkpoint from the base on, oldest first.
    checkpoints: std::collections::VecDeque<Tree>,
    /// Lines written since the last checkpoint: leaves of the next one.
    pending: Vec<Hash>,
}

/// A slice of history that a proof is computed from, outside the lock.
#[derive(Debug, Clone)]
pub(crate) struct Span {
    pub(crate) base: Tree,
    pub(crate) leaves: Vec<Hash>,
}

impl History {
    /// A line of the chain written whole (without its newline).
    pub(crate) fn line(&mut self, line: &[u8]) {
        self.pending.push(crate::chain::leaf_of_line(line));
    }

    /// A checkpoint record written whole (`line`, without its newline; `written`, what it
    /// says). The lines before it become leaves of its tree, when they add up to it; else the
    /// history starts again from its edge (a new tree, or the first checkpoint seen).
    pub(crate) fn checkpoint(&mut self, written: &Written, line: &[u8]) {
        let pending = std::mem::take(&mut self.pending);
        let size = self.tip.size() + pending.len() as u64;
        let mut follows = written.origin == self.origin && size == written.size;
        if follows {
            for leaf in &pending {
                self.tip.push_hash(*leaf);
            }
            self.leaves.extend(pending);
            follows = self.tip.root() == written.root;
        }
        if !follows {
            self.origin = written.origin.clone();
            self.base = Tree::from_edge(written.size, written.edge.clone()).unwrap_or_default();
            self.tip = self.base.clone();
            self.leaves.clear();
            self.checkpoints.clear();
        }
        self.checkpoints.push_back(self.tip.clone());
        if self.leaves.len() > MAX_LEAVES {
            let drop = self.leaves.len() - MAX_LEAVES / 2;
            for leaf in self.leaves.drain(..drop) {
                self.base.push_hash(leaf);
            }
            let base = self.base.size();
            self.checkpoints.retain(|t| t.size() >= base);
        }
        // The checkpoint's own line is the next leaf.
        self.pending.push(crate::chain::leaf_of_line(line));
    }

    /// The span from the tree of `old` leaves on, when the history holds it (origin
    /// `origin`): from the checkpoint of that size, else from the base.
    pub(crate) fn span(&self, origin: &str, old: u64) -> Option<Span> {
        if origin != self.origin || old < self.base.size() || old > self.tip.size() {
            return None;
        }
        let from = self.checkpoints.iter().rev().find(|t| t.size() <= old);
        let from = from.unwrap_or(&self.base);
        let skip = usize::try_from(from.size() - self.base.size()).ok()?;
        Some(Span { base: from.clone(), leaves: self.leaves.get(skip..)?.to_vec() })
    }

    /// Takes older leaves found in the file: `span` ends where the history starts.
    pub(crate) fn prepend(&mut self, origin: &str, span: Span) {
        if origin != self.origin || span.end() != self.base.size() {
            return;
        }
        let mut leaves = span.leaves;
        leaves.append(&mut self.leaves);
        self.leaves = leaves;
        self.checkpoints.push_front(span.base.clone());
        self.base = span.base;
    }

    /// The origin and the tree at the base.
    pub(crate) fn base(&self) -> (&str, &Tree) {
        (&self.origin, &self.base)
    }
}

impl Span {
    /// The size of the tree it ends with.
    pub(crate) fn end(&self) -> u64 {
        self.base.size() + self.leaves.len() as u64
    }

    /// The tree of the first `size` leaves (base size <= size <= end).
    pub(crate) fn tree_at(&self, size: u64) -> Option<Tree> {
        let take = usize::try_from(size.checked_sub(self.base.size())?).ok()?;
        let mut tree = self.base.clone();
        for leaf in self.leaves.get(..take)? {
            tree.push_hash(*leaf);
        }
        Some(tree)
    }

    /// The RFC 9162 §2.1.4 consistency proof from the tree of `old` leaves to that of `new`
    /// (base size <= old <= new <= end), and the old root. Nodes left of the base are the
    /// old tree's right edge (a proof's nodes left of `old` always are).
    pub(crate) fn consistency(&self, old: u64, new: u64) -> Option<(Vec<Hash>, Hash)> {
        let old_tree = self.tree_at(old)?;
        if new > self.end() || old > new {
            return None;
        }
        let old_root = old_tree.root();
        if old == 0 || old == new {
            return Some((Vec::new(), old_root));
        }
        // The old tree's edge, each node with its range.
        let mut edge = Vec::new();
        let mut start = 0u64;
        for (bit, hash) in (0..64).rev().filter(|b| old >> b & 1 == 1).zip(old_tree.edge()) {
            edge.push((start, start + (1u64 << bit), *hash));
            start += 1u64 << bit;
        }
        let b = self.base.size();
        let mth = |lo: u64, hi: u64| -> Option<Hash> {
            if lo >= b {
                let from = usize::try_from(lo - b).ok()?;
                let to = usize::try_from(hi - b).ok()?;
                return Some(merkle::root_of(self.leaves.get(from..to)?));
            }
            edge.iter().find(|(s, e, _)| *s == lo && *e == hi).map(|(_, _, h)| *h)
        };
        let mut proof = Vec::new();
        subproof(old, 0, new, true, &mth, &mut proof)?;
        Some((proof, old_root))
    }
}

/// RFC 6962 SUBPROOF over the leaves [lo, hi), `m` counted from `lo`.
fn subproof(
    m: u64,
    lo: u64,
    hi: u64,
    b: bool,
    mth: &dyn Fn(u64, u64) -> Option<Hash>,
    out: &mut Vec<Hash>,
) -> Option<()> {
    let n = hi - lo;
    if m == n {
        if !b {
            out.push(mth(lo, hi)?);
        }
        return Some(());
    }
    let mut k = 1u64;
    while k << 1 < n {
        k <<= 1;
    }
    if m <= k {
        subproof(m, lo, lo + k, b, mth, out)?;
        out.push(mth(lo + k, hi)?);
    } else {
        subproof(m - k, lo + k, hi, false, mth, out)?;
        out.push(mth(lo, lo + k)?);
    }
    Some(())
}

/// The members of a line that place it in a tree.
#[derive(serde::Deserialize)]
struct Members {
    #[serde(rename = "event.previous_hash")]
    previous: Option<String>,
    #[serde(rename = "audit.checkpoint.tree_size")]
    tree_size: Option<u64>,
    #[serde(rename = "audit.checkpoint.tree_edge")]
    edge: Option<Vec<String>>,
    #[serde(rename = "audit.checkpoint.note")]
    note: Option<String>,
}

/// The leaves of tree `origin` from the last checkpoint at or before `want` up to `until`
/// (the history's base), read from the audit file `path`; checked to add up to `until_tree`.
pub(crate) fn seed_from_file(
    path: &Path,
    origin: &str,
    want: u64,
    until_tree: &Tree,
) -> Result<Span, String> {
    let until = until_tree.size();
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    let mut found: Option<Span> = None;
    loop {
        line.clear();
        let n =
            reader.read_until(b'\n', &mut line).map_err(|e| format!("{}: {e}", path.display()))?;
        if n == 0 || line.last() != Some(&b'\n') {
            break;
        }
        line.pop();
        // Only lines of the chain are leaves (torn lines are not), as `audit prove` reads them.
        if split_line(&line).is_none() {
            continue;
        }
        let Ok(m) = serde_json::from_slice::<Members>(&line) else { continue };
        if m.previous.as_deref().map(str::as_bytes) == Some(&GENESIS[..]) {
            found = None;
        }
        if let (Some(size), Some(edge), Some(note)) = (m.tree_size, m.edge, m.note) {
            let ours = note.split('\n').next() == Some(origin);
            if ours && size <= want {
                let edge: Option<Vec<Hash>> = edge.iter().map(|h| merkle::decode(h)).collect();
                if let Some(base) = edge.and_then(|e| Tree::from_edge(size, e)) {
                    found = Some(Span { base, leaves: Vec::new() });
                }
            }
        }
        if let Some(span) = found.as_mut() {
            if span.end() == until {
                break;
            }
            span.leaves.push(crate::chain::leaf_of_line(&line));
            if span.leaves.len() > 4 * MAX_LEAVES {
                return Err(format!("more than {} records behind", 4 * MAX_LEAVES));
            }
        }
    }
    let span = found.ok_or_else(|| {
        format!(
            "{} holds no checkpoint of {origin} at or before tree size {want} (it was rotated \
             away)",
            path.display()
        )
    })?;
    match span.tree_at(span.end()) {
        Some(tree) if span.end() == until && tree == *until_tree => Ok(span),
        _ => Err(format!(
            "the lines of {} do not add up to the tree the proxy signed at size {until}",
            path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaves(n: u64) -> Vec<Hash> {
        (0..n).map(|i| merkle::leaf_hash(format!("line {i}").as_bytes())).collect()
    }

    #[test]
    fn proofs_from_a_base_are_those_from_every_leaf() {
        let all = leaves(70);
        for base in [0u64, 1, 5, 8, 13, 32, 40] {
            let mut tree = Tree::default();
            for leaf in &all[..base as usize] {
                tree.push_hash(*leaf);
            }
            let span = Span { base: tree, leaves: all[base as usize..].to_vec() };
            for old in base.max(1)..=70 {
                for new in old..=70 {
                    let (proof, old_root) = span.consistency(old, new).unwrap();
                    let full = &all[..new as usize];
                    let want = merkle::consistency_proof(old as usize, full).unwrap();
                    assert_eq!(proof, want, "base {base} old {old} new {new}");
                    assert_eq!(old_root, merkle::root_of(&all[..old as usize]));
                    let new_root = merkle::root_of(full);
                    assert!(merkle::verify_consistency(old, new, &old_root, &new_root, &proof));
                }
            }
            assert!(span.consistency(base.saturating_sub(1), 70).is_none() || base == 0);
        }
    }

    /// The history fed as the writer feeds it: lines, then checkpoints that cover them, each
    /// checkpoint's line the next leaf; spans from any checkpoint size give proofs to the
    /// newest; a checkpoint of another origin starts it again.
    #[test]
    fn the_history_follows_the_writer() {
        let mut history = History::default();
        let mut tree = Tree::default();
        let mut sizes = Vec::new();
        let written = |tree: &Tree, origin: &str| Written {
            note: String::new(),
            text: String::new(),
            origin: origin.to_owned(),
            size: tree.size(),
            root: tree.root(),
            edge: tree.edge().to_vec(),
            sequence: 0,
        };
        // Lines before the first checkpoint the history sees: it starts from its edge.
        for i in 0..5 {
            tree.push_hash(merkle::leaf_hash(format!("old {i}").as_bytes()));
        }
        for round in 0..6u64 {
            let line = format!("checkpoint {round}");
            history.checkpoint(&written(&tree, "o"), line.as_bytes());
            sizes.push(tree.size());
            tree.push_hash(merkle::leaf_hash(line.as_bytes()));
            for i in 0..round * 3 {
                let line = format!("record {round} {i}");
                history.line(line.as_bytes());
                tree.push_hash(merkle::leaf_hash(line.as_bytes()));
            }
        }
        let newest = *sizes.last().unwrap();
        let root = {
            let mut t = Tree::default();
            for i in 0..5 {
                t.push_hash(merkle::leaf_hash(format!("old {i}").as_bytes()));
            }
            t
        };
        assert!(history.span("o", 4).is_none(), "before the history");
        assert!(history.span("other", newest).is_none());
        for old in &sizes {
            let span = history.span("o", *old).unwrap();
            let (proof, old_root) = span.consistency(*old, newest).unwrap();
            let new_root = span.tree_at(newest).unwrap().root();
            assert!(merkle::verify_consistency(*old, newest, &old_root, &new_root, &proof));
        }
        assert_eq!(history.base().1.size(), root.size());
        // Another origin: started again.
        history.checkpoint(&written(&tree, "p"), b"x");
        assert!(history.span("o", newest).is_none());
        assert_eq!(history.base(), ("p", &tree));
    }
}
