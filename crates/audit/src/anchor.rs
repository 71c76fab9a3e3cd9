//! Where the chain continues when the writer opens its file for the first time (a start):
//! never from a tail it cannot vouch for (issue 39, C1), and not from the start again after
//! a rotation left an empty file (H3).
//!
//! Someone who can write the audit files but cannot read `audit.checkpoint_key` can rewrite
//! records and recompute every hash after them; only a checkpoint signed by the key stops
//! them. So, with a key, the writer continues the chain it finds at the end of the file only
//! when the file ends with a checkpoint it can verify with its own key (the closing checkpoint
//! of a clean stop, a rotation's, or a heartbeat's), its signature covering the head it
//! continues from. In every other case — no checkpoint, one signed by another key, records
//! after the last checkpoint (a crash, or records added), a chain that does not link up to the
//! end, a file that ends before the last checkpoint this writer is known to have signed — it
//! starts a new chain from [`GENESIS`] with an `audit_chain_restart` record that names what it
//! found and why, and never signs across the break: `audit verify --public-key` then reports
//! the records before it that no checkpoint covers as not proven.
//!
//! The chain's state is also kept beside the log, in `STEM-chain.json` (for `audit.jsonl`:
//! `audit-chain.json`), written with every checkpoint and at every reopen: the last record's
//! sequence and hash and the last checkpoint line. A file that holds no record (a rotation by
//! rename, then a restart before any record) continues from it, with a key only when its
//! checkpoint verifies.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::chain::{read_head, split_line, Chain, Sealed, Segment};
use super::checkpoint::{Previous, PublicKey, Signed};
use super::merkle;
use super::timestamp;

/// Most bytes read back from the end of the file for its last checkpoint. A file with none in
/// its last 64 MiB starts a new chain.
const LOOK_BACK_BYTES: u64 = 64 << 20;

/// Where the chain continues.
pub(super) struct Resumed {
    pub(super) chain: Chain,
    /// `event.sequence` of the last checkpoint (without a key: of the last record).
    pub(super) checkpointed: u64,
    /// The last checkpoint, which the next one names.
    pub(super) previous: Option<Previous>,
    /// The last checkpoint's line (for the state file).
    pub(super) checkpoint_line: Option<Vec<u8>>,
    /// A new chain: the record that says why comes first.
    pub(super) restart: Option<Restart>,
}

/// Why the chain starts again, as the `audit_chain_restart` record says.
#[derive(Debug, Clone)]
pub(super) struct Restart {
    /// `audit.restart.reason`: `no_checkpoint`, `other_key`, `unsigned_tail`, `broken_chain`,
    /// `tail_cut`, `unreadable`, `no_tree`.
    pub(super) reason: &'static str,
    /// `event.reason`.
    pub(super) sentence: String,
    /// The last record found (`audit.restart.found_records`, `audit.restart.found_head`).
    pub(super) found: Option<(u64, String)>,
    /// The last checkpoint verified (`audit.restart.anchored_records`).
    pub(super) anchored: Option<u64>,
    /// The checkpoint key changed (`other_key`): the key id of the file's last checkpoint and
    /// the proxy's, for the `audit_key_changed` record written after this one.
    pub(super) key_change: Option<(String, String)>,
}

impl Restart {
    /// The `audit_chain_restart` line (newline included, without the chain's members).
    pub(super) fn line(&self, node: Option<&str>) -> Vec<u8> {
        let mut record = serde_json::Map::new();
        let mut put = |k: &str, value: serde_json::Value| {
            record.insert(k.to_owned(), value);
        };
        put("@timestamp", timestamp(std::time::SystemTime::now()).into());
        put("event.action", "audit_chain_restart".into());
        put("event.outcome", "unknown".into());
        put("event.reason", self.sentence.clone().into());
        put("audit.restart.reason", self.reason.into());
        if let Some((records, head)) = &self.found {
            put("audit.restart.found_records", (*records).into());
            put("audit.restart.found_head", head.clone().into());
        }
        if let Some(anchored) = self.anchored {
            put("audit.restart.anchored_records", anchored.into());
        }
        super::close_record(record, node)
    }
}

/// The state file beside the log.
#[derive(Debug, Serialize, Deserialize)]
struct State {
    /// The last record's `event.sequence`.
    sequence: u64,
    /// Its `event.hash`.
    head: String,
    /// The last checkpoint's line, as written (without its newline).
    #[serde(default)]
    checkpoint: Option<String>,
}

/// `DIR/STEM-chain.json` for the log `DIR/STEM.…`.
pub(super) fn state_path(log: &Path) -> PathBuf {
    let name = log.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.split('.').next().filter(|s| !s.is_empty()).unwrap_or("audit");
    log.with_file_name(format!("{stem}-chain.json"))
}

/// Writes the state file (whole, or not at all).
pub(super) fn save(log: &Path, chain: &Chain, checkpoint: Option<&[u8]>) -> io::Result<()> {
    let state = State {
        sequence: chain.sequence,
        head: chain.head_str().to_owned(),
        checkpoint: checkpoint
            .map(|l| String::from_utf8_lossy(l.strip_suffix(b"\n").unwrap_or(l)).into_owned()),
    };
    let path = state_path(log);
    let temporary = path.with_extension("json.partial");
    let bytes = serde_json::to_vec(&state).map_err(io::Error::other)?;
    {
        let mut file = File::create(&temporary)?;
        io::Write::write_all(&mut file, &bytes)?;
        file.sync_data()?;
    }
    std::fs::rename(&temporary, &path)
}

fn load(log: &Path) -> Option<State> {
    serde_json::from_slice(&std::fs::read(state_path(log)).ok()?).ok()
}

/// The Merkle tree after the checkpoint `line` (its tree, as its `audit.checkpoint.tree_size`,
/// `tree_edge` and `root` say when they add up, with the line itself as the next leaf, by its
/// own scheme: a checkpoint written before scheme 2 continues a tree whose next lines are) and
/// its origin (its note's first line). `None` for a checkpoint without a tree.
pub(super) fn segment_after(line: &[u8]) -> Option<Segment> {
    #[derive(Deserialize)]
    struct Members {
        #[serde(rename = "audit.checkpoint.tree_size")]
        size: u64,
        #[serde(rename = "audit.checkpoint.tree_edge")]
        edge: Vec<String>,
        #[serde(rename = "audit.checkpoint.root")]
        root: String,
        #[serde(rename = "audit.checkpoint.note")]
        note: String,
    }
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let m: Members = serde_json::from_slice(line).ok()?;
    let edge = m.edge.iter().map(|h| merkle::decode(h)).collect::<Option<Vec<_>>>()?;
    let mut tree = merkle::Tree::from_edge(m.size, edge)?;
    if merkle::decode(&m.root)? != tree.root() {
        return None;
    }
    let origin = m.note.split('\n').next().filter(|o| !o.is_empty())?.to_owned();
    tree.push_hash(Sealed::parse(line)?.leaf());
    Some(Segment { tree, origin })
}

/// A checkpoint line checked: it verifies with `key` and its `event.hash` continues from the
/// head it signs. Its sequence, hash, and the checkpoint as the next one names it.
fn checkpoint_at(
    line: &[u8],
    key: &PublicKey,
) -> Result<(u64, [u8; 64], Previous), Option<String>> {
    let sealed = Sealed::parse(line).ok_or(None)?;
    let signed: Signed = serde_json::from_slice(line).map_err(|_| None)?;
    let sequence: Option<u64> = serde_json::from_slice::<Link>(line).ok().and_then(|l| l.sequence);
    if signed.keyid.as_deref() != Some(key.keyid()) {
        return Err(signed.keyid.clone());
    }
    let head = signed.head.as_deref().unwrap_or("");
    let ok = signed.verifies_with(key)
        && head.len() == 64
        && sealed.follows(head.as_bytes(), &sealed.leaf())
        && sequence.is_some()
        && signed.records.map(|r| r + 1) == sequence;
    match (ok, sequence, signed.as_previous()) {
        (true, Some(sequence), Some(previous)) => Ok((sequence, sealed.hash_array(), previous)),
        _ => Err(None),
    }
}

#[derive(Deserialize)]
struct Link {
    #[serde(rename = "event.sequence")]
    sequence: Option<u64>,
    #[serde(rename = "event.previous_hash")]
    previous: Option<String>,
    #[serde(rename = "event.action")]
    action: Option<String>,
}

/// Where the chain continues on the first open of `file` (the log at `log`).
pub(super) fn resume(file: &mut File, log: &Path, key: Option<&PublicKey>) -> Resumed {
    let state = load(log);
    let Some(key) = key else {
        // Without a key nothing can be vouched for: the file's end, else the state file.
        let chain = match read_head(file) {
            Ok(Some(chain)) => Some(chain),
            Ok(None) => state.and_then(|s| {
                let head: [u8; 64] = s.head.as_bytes().try_into().ok()?;
                Some(Chain { head, sequence: s.sequence, mark: true, known: true, tree: None })
            }),
            Err(error) => {
                tracing::warn!(
                    path = %log.display(), %error,
                    "cannot read the end of the audit log: its hash chain starts again",
                );
                None
            }
        };
        return match chain {
            Some(chain) => Resumed {
                checkpointed: chain.sequence,
                chain,
                previous: None,
                checkpoint_line: None,
                restart: None,
            },
            None => fresh(None),
        };
    };
    let found = match scan(file, key) {
        Ok(found) => found,
        Err(e) => Found::Unreadable(e.to_string()),
    };
    let restart =
        |reason: &'static str, sentence: String, tail: Option<(u64, [u8; 64])>, anchored| {
            let found = tail.map(|(s, h)| (s, String::from_utf8_lossy(&h).into_owned()));
            let restart = Restart { reason, sentence, found, anchored, key_change: None };
            tracing::warn!(
                path = %log.display(), reason, why = %restart.sentence,
                "the audit log's chain cannot be continued under the checkpoint key: a new chain \
                 starts with an audit_chain_restart record",
            );
            let mut resumed = fresh(Some(restart));
            resumed.chain.sequence = tail.map_or(0, |(s, _)| s);
            resumed.checkpointed = resumed.chain.sequence;
            // Decided: a reopen before the first write must not decide again from another file.
            resumed.chain.known = true;
            resumed
        };
    match found {
        Found::Blank => {
            let Some(state) = state else { return fresh(None) };
            let tail = state.head.as_bytes().try_into().ok().map(|h: [u8; 64]| (state.sequence, h));
            let Some(line) = state.checkpoint.as_deref() else {
                return restart(
                    "no_checkpoint",
                    format!(
                        "the log file holds no record and {} names no signed checkpoint",
                        state_path(log).display()
                    ),
                    tail,
                    None,
                );
            };
            let segment = segment_after(line.as_bytes());
            match checkpoint_at(line.as_bytes(), key) {
                Ok((sequence, _, _)) if segment.is_none() => restart(
                    "no_tree",
                    format!(
                        "the last signed checkpoint (record {sequence}) carries no Merkle tree \
                         (written before it, or its tree does not add up): a new tree starts"
                    ),
                    tail,
                    Some(sequence),
                ),
                Ok((sequence, head, previous)) if Some((sequence, head)) == tail => Resumed {
                    chain: Chain { head, sequence, mark: true, known: true, tree: segment },
                    checkpointed: sequence,
                    previous: Some(previous),
                    checkpoint_line: Some(line.as_bytes().to_vec()),
                    restart: None,
                },
                Ok((sequence, _, _)) => restart(
                    "unsigned_tail",
                    format!(
                        "the log file holds no record; the last file ended at record {} after \
                         the last signed checkpoint (record {sequence})",
                        state.sequence
                    ),
                    tail,
                    Some(sequence),
                ),
                Err(_) => restart(
                    "no_checkpoint",
                    format!(
                        "the log file holds no record and the checkpoint in {} does not verify \
                         with this proxy's key",
                        state_path(log).display()
                    ),
                    tail,
                    None,
                ),
            }
        }
        Found::Anchored { sequence, head, previous, line, after: 0, tail } => {
            let saved = state
                .and_then(|s| s.checkpoint)
                .and_then(|l| checkpoint_at(l.as_bytes(), key).ok())
                .map(|(s, _, _)| s);
            if let Some(saved) = saved.filter(|s| *s > sequence) {
                return restart(
                    "tail_cut",
                    format!(
                        "the file ends at the checkpoint of record {sequence}, but this proxy \
                         signed a checkpoint at record {saved}: records were removed from the end"
                    ),
                    Some(tail),
                    Some(sequence),
                );
            }
            let Some(segment) = segment_after(&line) else {
                return restart(
                    "no_tree",
                    format!(
                        "the last signed checkpoint (record {sequence}) carries no Merkle tree \
                         (written before it, or its tree does not add up): a new tree starts"
                    ),
                    Some(tail),
                    Some(sequence),
                );
            };
            Resumed {
                chain: Chain { head, sequence, mark: true, known: true, tree: Some(segment) },
                checkpointed: sequence,
                previous: Some(previous),
                checkpoint_line: Some(line),
                restart: None,
            }
        }
        Found::Anchored { sequence, after, tail, .. } => restart(
            "unsigned_tail",
            format!(
                "{after} record(s) after the last checkpoint signed with this proxy's key \
                 (record {sequence}) carry no signature: the proxy stopped without its closing \
                 checkpoint (a crash), or they were added or rewritten"
            ),
            Some(tail),
            Some(sequence),
        ),
        Found::Broken { sequence, why, tail } => restart(
            "broken_chain",
            format!(
                "after the last checkpoint signed with this proxy's key (record {sequence}): {why}"
            ),
            tail,
            Some(sequence),
        ),
        Found::NoCheckpoint { other_key, tail } => match other_key {
            Some(keyid) => {
                let mut resumed = restart(
                    "other_key",
                    format!(
                        "the last checkpoint in the file is signed by key {keyid}, not by this \
                         proxy's key ({}); none verifies with it",
                        key.keyid()
                    ),
                    tail,
                    None,
                );
                if let Some(restart) = &mut resumed.restart {
                    restart.key_change = Some((keyid, key.keyid().to_owned()));
                }
                resumed
            }
            None => restart(
                "no_checkpoint",
                "no checkpoint in the file verifies with this proxy's key (none, or each one \
                 changed): its records are not vouched for"
                    .to_owned(),
                tail,
                None,
            ),
        },
        Found::Unreadable(error) => {
            restart("unreadable", format!("cannot read the end of the file: {error}"), None, None)
        }
    }
}

fn fresh(restart: Option<Restart>) -> Resumed {
    Resumed {
        chain: Chain::default(),
        checkpointed: 0,
        previous: None,
        checkpoint_line: None,
        restart,
    }
}

/// What the end of the file holds.
enum Found {
    /// No record at all.
    Blank,
    /// The last checkpoint verified (its sequence and hash, the line), and `after` records
    /// after it that link to it; `tail` is the last record.
    Anchored {
        sequence: u64,
        head: [u8; 64],
        previous: Previous,
        line: Vec<u8>,
        after: u64,
        tail: (u64, [u8; 64]),
    },
    /// The chain after the last verified checkpoint does not link.
    Broken {
        sequence: u64,
        why: String,
        tail: Option<(u64, [u8; 64])>,
    },
    /// No checkpoint verifies (the key id of the last one, when another key signed it).
    NoCheckpoint {
        other_key: Option<String>,
        tail: Option<(u64, [u8; 64])>,
    },
    Unreadable(String),
}

const CHECKPOINT_ACTION: &[u8] = b"\"event.action\":\"audit_checkpoint\"";

/// Reads the file back from its end to its last checkpoint that verifies with `key`, then
/// checks the links from it to the end.
fn scan(file: &mut File, key: &PublicKey) -> io::Result<Found> {
    let len = file.seek(SeekFrom::End(0))?;
    let mut want: u64 = 64 * 1024;
    loop {
        let from = len.saturating_sub(want);
        let mut buffer = vec![0u8; usize::try_from(len - from).unwrap_or(usize::MAX)];
        file.seek(SeekFrom::Start(from))?;
        file.read_exact(&mut buffer)?;
        let mut lines: Vec<&[u8]> = buffer.split(|b| *b == b'\n').collect();
        if from > 0 {
            // It may begin inside a line.
            lines.remove(0);
        }
        let mut tail = None;
        let mut other_key = None;
        for i in (0..lines.len()).rev() {
            let line = lines[i];
            let Some((_, hash)) = split_line(line) else { continue };
            if tail.is_none() {
                if let Some(sequence) =
                    serde_json::from_slice::<Link>(line).ok().and_then(|l| l.sequence)
                {
                    let mut h = [0u8; 64];
                    h.copy_from_slice(hash);
                    tail = Some((sequence, h));
                }
            }
            if !line.windows(CHECKPOINT_ACTION.len()).any(|w| w == CHECKPOINT_ACTION) {
                continue;
            }
            match checkpoint_at(line, key) {
                Ok((sequence, head, previous)) => {
                    return Ok(forward(&lines[i + 1..], sequence, head, previous, line, tail));
                }
                Err(keyid) => {
                    if other_key.is_none() {
                        other_key = keyid;
                    }
                }
            }
        }
        if from == 0 || want >= LOOK_BACK_BYTES {
            if tail.is_none() && from == 0 && lines.iter().all(|l| l.trim_ascii().is_empty()) {
                return Ok(Found::Blank);
            }
            return Ok(Found::NoCheckpoint { other_key, tail });
        }
        want = want.saturating_mul(2);
    }
}

/// Checks the lines after a verified checkpoint: each record continues the chain, torn lines
/// are followed by a record that names the hash it continues from, and any checkpoint among
/// them verifies (it would have been found first).
fn forward(
    lines: &[&[u8]],
    sequence: u64,
    head: [u8; 64],
    previous: Previous,
    line: &[u8],
    tail: Option<(u64, [u8; 64])>,
) -> Found {
    let (mut at, mut seq, mut after, mut torn) = (head, sequence, 0u64, false);
    for line in lines {
        if line.trim_ascii().is_empty() {
            continue;
        }
        let Some(sealed) = Sealed::parse(line) else {
            torn = true;
            continue;
        };
        let broken = |why: String| Found::Broken { sequence, why, tail };
        let Ok(link) = serde_json::from_slice::<Link>(line) else {
            return broken(format!("the line after record {seq} is not JSON"));
        };
        let named = link.previous.as_deref().map(str::as_bytes);
        if torn && named.is_none() {
            return broken(format!("a cut line after record {seq} is not followed by a new start"));
        }
        if named.is_some_and(|n| n != at) || !sealed.follows(&at, &sealed.leaf()) {
            return broken(format!("the record after record {seq} does not continue the chain"));
        }
        if link.sequence != Some(seq + 1) {
            return broken(format!(
                "the record after record {seq} is numbered {:?}",
                link.sequence
            ));
        }
        if link.action.as_deref() == Some("audit_checkpoint") {
            return broken(format!("the checkpoint at record {} does not verify", seq + 1));
        }
        at = sealed.hash_array();
        seq += 1;
        after += 1;
        torn = false;
    }
    Found::Anchored {
        sequence,
        head,
        previous,
        line: line.to_vec(),
        after,
        tail: tail.unwrap_or((sequence, head)),
    }
}

// Tested with the writer's file, in `writer/tests.rs` (`anchoring`).
