//! Proofs from the audit log's Merkle tree (`merkle.rs`): `audit prove` (one record's
//! inclusion in a signed checkpoint, checked alone by `audit check-proof` with the public key)
//! and `audit consistency` (a later checkpoint extends an earlier one). Hashes in proofs are
//! base64 (standard, padded), as in a checkpoint's root line.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::chain::{Scheme, Sealed, GENESIS, SCHEME_MEMBER};
use super::checkpoint::PublicKey;
use super::merkle::{self, Hash};
use super::note::{self, Checkpoint, NoteError};

/// The first member of a proof file of a line of scheme 2: its `record` is the line without
/// its `event.hash` member, the leaf's bytes.
pub const PROOF_FORMAT: &str = "robots-proxy audit inclusion proof v2";

/// The first member of a proof file of a line written before scheme 2: its `record` is the
/// line as written, the leaf's bytes then.
pub const PROOF_FORMAT_V1: &str = "robots-proxy audit inclusion proof v1";

/// Why a proof cannot be made or checked.
#[derive(Debug, thiserror::Error)]
pub enum ProofError {
    /// A file cannot be read.
    #[error("{0}: cannot read: {1}")]
    Read(String, std::io::Error),
    /// The input is not what it should be.
    #[error("{0}")]
    Input(String),
    /// The proof or checkpoints do not hold (tampering, or another log).
    #[error("{0}")]
    Invalid(String),
}

impl ProofError {
    /// The exit status: 1 when the proof does not hold, else 2.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            ProofError::Invalid(_) => 1,
            _ => 2,
        }
    }
}

/// One record's inclusion in a signed checkpoint, as `audit prove` prints it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InclusionProof {
    /// [`PROOF_FORMAT`] (or [`PROOF_FORMAT_V1`]).
    pub format: String,
    /// The record proved: the bytes of its leaf, every one of which the proof covers (the line
    /// without its newline and without its `event.hash` member; in `v1` proofs, of lines
    /// written before, the line as written).
    pub record: String,
    /// Its `event.sequence`.
    pub sequence: u64,
    /// Its index in the tree (from 0).
    pub leaf_index: u64,
    /// SHA-256(0x00 || record), base64.
    pub leaf_hash: String,
    /// The checkpoint's tree size.
    pub tree_size: u64,
    /// The checkpoint's root, base64.
    pub root: String,
    /// The inclusion proof (RFC 9162 §2.1.3), from the leaf's sibling up, base64.
    pub proof: Vec<String>,
    /// The checkpoint, signed-note text.
    pub checkpoint: String,
    /// The `event.sequence` of the checkpoint's record in the log.
    pub checkpoint_sequence: u64,
}

/// A tree of the log (one chain): its leaves and its checkpoints.
struct Tree {
    first_sequence: u64,
    leaves: Vec<Hash>,
    /// (tree size, note, the checkpoint record's sequence).
    checkpoints: Vec<(u64, String, u64)>,
    /// The lines to prove that are in this tree, by sequence: each leaf's bytes and its scheme.
    wanted: std::collections::BTreeMap<u64, (String, Scheme)>,
    /// Witnesses' cosignatures (`audit_cosignature`): the checkpoint record's sequence, and
    /// the witness's signature lines.
    cosignatures: Vec<(u64, Vec<String>)>,
}

#[derive(Deserialize)]
struct Members {
    #[serde(rename = "event.sequence")]
    sequence: Option<u64>,
    #[serde(rename = "event.previous_hash")]
    previous: Option<String>,
    #[serde(rename = "audit.checkpoint.tree_size")]
    tree_size: Option<u64>,
    #[serde(rename = "audit.checkpoint.note")]
    note: Option<String>,
    #[serde(rename = "event.action")]
    action: Option<String>,
}

/// Reads the trees of `files` (oldest first). A tree whose first record the files do not hold
/// is left out (its indexes are not known). `want`: the sequences of the lines to keep.
fn read_trees(
    files: &[PathBuf],
    want: &std::collections::BTreeSet<u64>,
) -> Result<Vec<Tree>, ProofError> {
    let mut trees: Vec<Tree> = Vec::new();
    let mut current: Option<Tree> = None;
    for path in files {
        let name = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|e| ProofError::Read(name.clone(), e))?;
        let mut reader = BufReader::new(file);
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| ProofError::Read(name.clone(), e))?;
            if n == 0 {
                break;
            }
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            // Only lines of the chain are leaves (torn lines are not).
            let Some(sealed) = Sealed::parse(&line) else { continue };
            let Ok(m) = serde_json::from_slice::<Members>(&line) else { continue };
            let Some(sequence) = m.sequence else { continue };
            if m.previous.as_deref().map(str::as_bytes) == Some(&GENESIS[..]) {
                trees.extend(current.take());
                current = Some(Tree {
                    first_sequence: sequence,
                    leaves: Vec::new(),
                    checkpoints: Vec::new(),
                    wanted: Default::default(),
                    cosignatures: Vec::new(),
                });
            }
            let Some(tree) = current.as_mut() else { continue };
            if let (Some(size), Some(note)) = (m.tree_size, m.note) {
                tree.checkpoints.push((size, note, sequence));
            }
            let cosignature = m.action.as_deref() == Some("audit_cosignature");
            let cosigned = cosignature.then(|| super::witness::record::Cosignature::parse(&line));
            if let Some(c) = cosigned.flatten() {
                let lines = c.witness_lines().into_iter().map(|l| format!("{l}\n")).collect();
                tree.cosignatures.push((c.checkpoint_sequence, lines));
            }
            if want.contains(&sequence) {
                let bytes = String::from_utf8_lossy(&sealed.leaf_bytes()).into_owned();
                tree.wanted.insert(sequence, (bytes, sealed.scheme));
            }
            tree.leaves.push(sealed.leaf());
        }
    }
    trees.extend(current);
    Ok(trees)
}

/// The proof that record `sequence` of `files` is in the first checkpoint that covers it.
pub fn prove(files: &[PathBuf], sequence: u64) -> Result<InclusionProof, ProofError> {
    let trees = read_trees(files, &[sequence].into())?;
    prove_in(&trees, sequence)
}

/// [`prove`] for each of `sequences`, reading the files once (`evidence export`).
pub fn prove_many(
    files: &[PathBuf],
    sequences: &[u64],
) -> Result<Vec<Result<InclusionProof, ProofError>>, ProofError> {
    let trees = read_trees(files, &sequences.iter().copied().collect())?;
    Ok(sequences.iter().map(|&sequence| prove_in(&trees, sequence)).collect())
}

fn prove_in(trees: &[Tree], sequence: u64) -> Result<InclusionProof, ProofError> {
    let tree = trees.iter().rev().find(|t| t.wanted.contains_key(&sequence)).ok_or_else(|| {
        ProofError::Input(format!(
            "no record with event.sequence {sequence} in a chain whose first record (event.\
             previous_hash 64 zeros) the files hold: give every file from the oldest"
        ))
    })?;
    let index = sequence - tree.first_sequence;
    // The first checkpoint that covers it and that witnesses cosigned, else the first.
    let covers = |(size, _, _): &&(u64, String, u64)| *size > index;
    let cosigned = |(_, _, at): &&(u64, String, u64)| tree.cosignatures.iter().any(|c| c.0 == *at);
    let chosen = tree.checkpoints.iter().filter(covers).find(cosigned);
    let Some((size, note, at)) = chosen.or_else(|| tree.checkpoints.iter().find(covers)) else {
        return Err(ProofError::Input(format!(
            "no checkpoint with a Merkle tree covers event.sequence {sequence} yet (the next \
             checkpoint of the proxy will: at most audit.checkpoint_interval later)"
        )));
    };
    let size_usize = usize::try_from(*size).unwrap_or(usize::MAX);
    let leaves = tree.leaves.get(..size_usize).ok_or_else(|| {
        ProofError::Invalid(format!(
            "the checkpoint at event.sequence {at} covers more lines than the files hold"
        ))
    })?;
    let said = note_text(note)?;
    let root = merkle::root_of(leaves);
    if said.root != root || said.size != *size {
        return Err(ProofError::Invalid(format!(
            "the lines before the checkpoint at event.sequence {at} do not hash to its root: \
             the log was changed (run audit verify)"
        )));
    }
    let proof = merkle::inclusion_proof(usize::try_from(index).unwrap_or(usize::MAX), leaves)
        .unwrap_or_default();
    let (record, scheme) =
        tree.wanted.get(&sequence).cloned().unwrap_or((String::new(), Scheme::Leaf));
    let format = if scheme == Scheme::Line { PROOF_FORMAT_V1 } else { PROOF_FORMAT };
    Ok(InclusionProof {
        format: format.to_owned(),
        record,
        sequence,
        leaf_index: index,
        leaf_hash: merkle::encode(&leaves[index as usize]),
        tree_size: *size,
        root: merkle::encode(&root),
        proof: proof.iter().map(merkle::encode).collect(),
        checkpoint: cosigned_note(note, *at, &tree.cosignatures),
        checkpoint_sequence: *at,
    })
}

/// The checkpoint `note` (record `at`) with the witnesses' signature lines recorded for it.
fn cosigned_note(note: &str, at: u64, cosignatures: &[(u64, Vec<String>)]) -> String {
    let mut out = note.to_owned();
    for line in cosignatures.iter().filter(|c| c.0 == at).flat_map(|c| &c.1) {
        if !out.contains(line.as_str()) {
            out.push_str(line);
        }
    }
    out
}

/// The checkpoint a note says, unverified.
fn note_text(text: &str) -> Result<Checkpoint, ProofError> {
    let at = text.rfind("\n\n").ok_or_else(|| ProofError::Input("not a signed note".into()))?;
    note::parse_text(&text[..at + 1]).map_err(|e| ProofError::Input(e.to_string()))
}

fn opened(text: &str, key: &PublicKey, what: &str) -> Result<Checkpoint, ProofError> {
    note::open(text, key).map_err(|e| match e {
        NoteError::Form(_) | NoteError::Checkpoint(_) => ProofError::Input(format!("{what}: {e}")),
        _ => ProofError::Invalid(format!("{what}: {e}")),
    })
}

/// Checks a proof alone, with the public key: the checkpoint's signature, and the record's
/// path to its root. The checkpoint it is proved against, when valid.
pub fn check(proof: &InclusionProof, key: &PublicKey) -> Result<Checkpoint, ProofError> {
    // The record is the leaf's bytes in both formats; the format says which bytes those are,
    // and the record must be of that form (a whole line of scheme 1, or a line of scheme 2
    // without its event.hash member).
    let of_form = match proof.format.as_str() {
        PROOF_FORMAT => Some(proof.record.as_bytes().ends_with(&[SCHEME_MEMBER, b"}"].concat())),
        PROOF_FORMAT_V1 => {
            Some(Sealed::parse(proof.record.as_bytes()).is_some_and(|s| s.scheme == Scheme::Line))
        }
        _ => None,
    };
    match of_form {
        None => {
            return Err(ProofError::Input(format!(
                "not a proof of format {PROOF_FORMAT:?} (or {PROOF_FORMAT_V1:?})"
            )))
        }
        Some(false) => {
            return Err(ProofError::Invalid(format!(
                "the record is not a leaf of the form its format {:?} says",
                proof.format
            )))
        }
        Some(true) => {}
    }
    let checkpoint = opened(&proof.checkpoint, key, "the checkpoint")?;
    let invalid = |m: &str| Err(ProofError::Invalid(m.to_owned()));
    let leaf = merkle::leaf_hash(proof.record.as_bytes());
    if merkle::decode(&proof.leaf_hash) != Some(leaf) {
        return invalid(
            "the record does not hash to the proof's leaf_hash: the record was changed",
        );
    }
    let sequence = serde_json::from_str::<Members>(&proof.record).ok().and_then(|m| m.sequence);
    if sequence != Some(proof.sequence) {
        return invalid("the record's event.sequence is not the proof's sequence");
    }
    let Some(path) = proof.proof.iter().map(|h| merkle::decode(h)).collect::<Option<Vec<_>>>()
    else {
        return Err(ProofError::Input("a hash of the proof is not base64 of 32 bytes".into()));
    };
    if !merkle::verify_inclusion(proof.leaf_index, checkpoint.size, &leaf, &path, &checkpoint.root)
    {
        return invalid(
            "the record is not in the signed checkpoint's tree at that index: the record, the \
             proof or the checkpoint was changed",
        );
    }
    Ok(checkpoint)
}

/// The names of the `keys` whose cosignatures of the proof's checkpoint verify; an error when
/// one of them does not verify, or fewer than `quorum` keys cosigned it.
pub(crate) fn check_cosigned(
    proof: &InclusionProof,
    keys: &[super::witness::WitnessKey],
    quorum: usize,
) -> Result<Vec<String>, ProofError> {
    let note = &proof.checkpoint;
    let at = note.rfind("\n\n").ok_or_else(|| ProofError::Input("not a signed note".into()))?;
    let (text, lines) = (&note[..at + 1], &note[at + 2..]);
    let mut names = Vec::new();
    for key in keys {
        match key.find(text, lines.lines()) {
            Ok(Some(_)) => names.push(key.name().to_owned()),
            Ok(None) => {}
            Err(e) => return Err(ProofError::Invalid(format!("witness {}: {e}", key.name()))),
        }
    }
    if names.len() < quorum {
        return Err(ProofError::Invalid(format!(
            "the checkpoint is cosigned by {} of the {} witness key(s) given, not {quorum}",
            names.len(),
            keys.len()
        )));
    }
    Ok(names)
}

/// A consistency proof between two checkpoints, as `audit consistency` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Consistency {
    /// The origin both name.
    pub origin: String,
    /// The old tree size.
    pub old_size: u64,
    /// The old root, base64.
    pub old_root: String,
    /// The new tree size.
    pub new_size: u64,
    /// The new root, base64.
    pub new_root: String,
    /// The consistency proof (RFC 9162 §2.1.4), base64.
    pub proof: Vec<String>,
}

/// Proves from the log `files` that checkpoint `new` extends checkpoint `old` (signed-note
/// texts; with `key`, both signatures are checked).
pub fn consistency(
    old: &str,
    new: &str,
    files: &[PathBuf],
    key: Option<&PublicKey>,
) -> Result<Consistency, ProofError> {
    let (old, new) = match key {
        Some(key) => (opened(old, key, "OLD")?, opened(new, key, "NEW")?),
        None => (note_text(old)?, note_text(new)?),
    };
    if old.origin != new.origin {
        return Err(ProofError::Invalid(format!(
            "OLD and NEW are checkpoints of different logs (origins {} and {})",
            old.origin, new.origin
        )));
    }
    if old.size > new.size {
        return Err(ProofError::Invalid(format!(
            "OLD (tree size {}) is larger than NEW ({}): NEW does not extend it",
            old.size, new.size
        )));
    }
    let trees = read_trees(files, &Default::default())?;
    let has_origin = |t: &&Tree| {
        t.checkpoints.iter().any(|(_, n, _)| note_text(n).is_ok_and(|c| c.origin == new.origin))
    };
    let tree = trees.iter().find(has_origin).ok_or_else(|| {
        ProofError::Input(format!(
            "the log files hold no checkpoint of origin {} from its chain's first record",
            new.origin
        ))
    })?;
    let n = usize::try_from(new.size).unwrap_or(usize::MAX);
    let leaves = tree.leaves.get(..n).ok_or_else(|| {
        ProofError::Input(format!(
            "the log files hold {} line(s) of the tree, not {n}",
            tree.leaves.len()
        ))
    })?;
    let proof = match old.size {
        0 => Vec::new(),
        m => merkle::consistency_proof(m as usize, leaves).unwrap_or_default(),
    };
    if !merkle::verify_consistency(old.size, new.size, &old.root, &new.root, &proof) {
        return Err(ProofError::Invalid(
            "NEW does not extend OLD: their roots are not those of one growing log (or the log \
             files were changed)"
                .into(),
        ));
    }
    Ok(Consistency {
        origin: new.origin,
        old_size: old.size,
        old_root: merkle::encode(&old.root),
        new_size: new.size,
        new_root: merkle::encode(&new.root),
        proof: proof.iter().map(merkle::encode).collect(),
    })
}
