//! The Merkle tree in `audit verify` (issue 39, item 1): every line of a chain is a leaf; each
//! checkpoint that carries a tree (`audit.checkpoint.tree_size`, `root`, `tree_edge`, `note`)
//! must name the root of the lines before it since the chain started, and its note must say
//! the same size and root (and, with a key, verify). Files that start inside a tree take it up
//! from the first checkpoint's right edge, once that edge adds up to its root.

use super::{Kind, Location, State, Stop};
use crate::merkle::{self, Tree};
use crate::note;

/// The members of a checkpoint that name its tree.
#[derive(serde::Deserialize)]
struct Members {
    #[serde(rename = "audit.checkpoint.tree_size")]
    size: Option<u64>,
    #[serde(rename = "audit.checkpoint.root")]
    root: Option<String>,
    #[serde(rename = "audit.checkpoint.tree_edge")]
    edge: Option<Vec<String>>,
    #[serde(rename = "audit.checkpoint.note")]
    note: Option<String>,
    #[serde(rename = "audit.checkpoint.keyid")]
    keyid: Option<String>,
}

/// The tree of the chain so far, when known, and whether a checkpoint in it named its tree.
#[derive(Default)]
pub(super) struct Leaves {
    tree: Option<Tree>,
    named: bool,
}

/// Takes in the line `bytes` (as written, without its newline), whose leaf hash is `leaf`
/// (`chain::Sealed::leaf`), as the next leaf: a new tree
/// when it starts a chain (it continues from [`crate::chain::GENESIS`]); a checkpoint's
/// tree is checked first.
pub(super) fn leaf(
    bytes: &[u8],
    leaf: merkle::Hash,
    starts_chain: bool,
    checkpoint: bool,
    at: &Location,
    state: &mut State<'_>,
) -> Result<(), Stop> {
    if starts_chain {
        state.tree = Leaves { tree: Some(Tree::default()), named: false };
    }
    if checkpoint {
        check(bytes, at, state)?;
    }
    if let Some(tree) = &mut state.tree.tree {
        tree.push_hash(leaf);
    }
    Ok(())
}

fn check(bytes: &[u8], at: &Location, state: &mut State<'_>) -> Result<(), Stop> {
    let bad = |m: String| Err(Stop::Tampered(Kind::BadCheckpoint, at.clone(), m));
    let m: Members = serde_json::from_slice(bytes).unwrap_or(Members {
        size: None,
        root: None,
        edge: None,
        note: None,
        keyid: None,
    });
    let (Some(size), Some(root), Some(edge), Some(text)) = (m.size, m.root, m.edge, m.note) else {
        if state.tree.named {
            return bad("the checkpoint carries no Merkle tree, unlike those before it".into());
        }
        // Written before the tree existed.
        state.tree.tree = None;
        return Ok(());
    };
    let Some(root) = merkle::decode(&root) else {
        return bad("audit.checkpoint.root is not a base64 hash".into());
    };
    let edge = edge.iter().map(|h| merkle::decode(h)).collect::<Option<Vec<_>>>();
    let Some(named) = edge.and_then(|e| Tree::from_edge(size, e)).filter(|t| t.root() == root)
    else {
        return bad("the checkpoint's tree_edge does not add up to its root".into());
    };
    state.tree.named = true;
    match &state.tree.tree {
        Some(tree) if tree.size() != size || tree.root() != root => {
            return bad(format!(
                "Merkle root mismatch: the checkpoint names {} at tree size {size}, but the {} \
                 line(s) before it in the chain hash to {}: lines before it were changed, \
                 removed or added",
                merkle::encode(&root),
                tree.size(),
                merkle::encode(&tree.root())
            ));
        }
        Some(_) => {}
        None => state.tree.tree = Some(named),
    }
    let key = state.options.keys.zip(m.keyid.as_deref()).and_then(|(k, id)| k.by_keyid(id));
    let said = match key {
        Some(key) => note::open(&text, key),
        None => text
            .rfind("\n\n")
            .ok_or(note::NoteError::Form("no blank line before the signatures"))
            .and_then(|i| note::parse_text(&text[..i + 1])),
    };
    match said {
        Ok(c) if c.size == size && c.root == root => Ok(()),
        Ok(c) => bad(format!(
            "the checkpoint's note says tree size {} and root {}, its record {size} and {}",
            c.size,
            merkle::encode(&c.root),
            merkle::encode(&root)
        )),
        Err(e) => bad(format!("the checkpoint's note: {e}")),
    }
}
