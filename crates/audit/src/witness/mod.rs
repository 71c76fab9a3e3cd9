//! Witnesses of the audit log's checkpoints (issue 39, item 6; C2SP tlog-witness and
//! tlog-cosignature): after each checkpoint the writer hands it, with the lines it covers, to
//! one task per witness in `audit.witnesses`, which sends it with `add-checkpoint` (the size
//! the witness last cosigned, the consistency proof from it, the checkpoint), checks the
//! returned cosignature with the witness's key in `audit.witness_keys`, and appends an
//! `audit_cosignature` record to the log (through the writer, so it is in the chain like every
//! record). `GET /audit/checkpoint` serves the latest checkpoint with the cosignatures
//! gathered for it. Nothing of this is on the request path: a witness that is slow, down or
//! wrong changes no answer, and is tried again at the next checkpoint.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::merkle::{self, Hash};

mod history;
mod push;
pub mod record;
pub mod verify;
pub mod vkey;

pub(crate) use history::History;
pub use history::MAX_LEAVES;
pub use vkey::{CosignatureError, VkeyError, WitnessKey};

/// The most witnesses `audit.witnesses` may list (a task each).
pub(crate) const MAX_WITNESSES: usize = 32;

/// How long one `add-checkpoint` exchange may take (connect, send, answer).
pub(crate) const PUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A checkpoint the writer wrote, as its record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The signed note, as written (`audit.checkpoint.note`).
    pub note: String,
    /// The note's text: its three lines, final newline included, no signature.
    pub text: String,
    /// The origin.
    pub origin: String,
    /// The tree size.
    pub size: u64,
    /// The root.
    pub root: Hash,
    /// The right edge (`audit.checkpoint.tree_edge`).
    pub edge: Vec<Hash>,
    /// The checkpoint record's `event.sequence`.
    pub sequence: u64,
}

impl Written {
    /// What the `audit_checkpoint` line `line` (with or without its newline) says; `None` for
    /// another line, or a checkpoint without a tree.
    pub fn parse(line: &[u8]) -> Option<Written> {
        #[derive(serde::Deserialize)]
        struct Members {
            #[serde(rename = "audit.checkpoint.note")]
            note: Option<String>,
            #[serde(rename = "audit.checkpoint.tree_edge")]
            edge: Option<Vec<String>>,
            #[serde(rename = "event.sequence")]
            sequence: Option<u64>,
        }
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let m: Members = serde_json::from_slice(line).ok()?;
        let note = m.note?;
        let at = note.rfind("\n\n")?;
        let text = note[..at + 1].to_owned();
        let said = super::note::parse_text(&text).ok()?;
        let edge = m.edge?.iter().map(|h| merkle::decode(h)).collect::<Option<Vec<_>>>()?;
        Some(Written {
            note,
            text,
            origin: said.origin,
            size: said.size,
            root: said.root,
            edge,
            sequence: m.sequence?,
        })
    }
}

/// One configured witness: where it takes checkpoints, and its key.
#[derive(Debug, Clone)]
pub struct Witness {
    /// The submission prefix (`audit.witnesses`), without a trailing `/`.
    pub url: String,
    /// Its key (`audit.witness_keys`, the same position).
    pub key: WitnessKey,
}

/// Pushes and their outcome, per witness (`robots_proxy_audit_witness_pushes_total`).
#[derive(Debug, Default)]
pub(crate) struct PushCounts {
    /// Checkpoints the witness cosigned, the cosignature verified and recorded.
    pub ok: AtomicU64,
    /// Pushes that did not give one (the witness down, slow, refusing, or a cosignature that
    /// does not verify with its key).
    pub failed: AtomicU64,
}

/// What the writer and the witnesses' tasks share.
#[derive(Debug)]
pub(crate) struct Hub {
    pub(crate) witnesses: Vec<(Witness, Arc<PushCounts>)>,
    pub(crate) history: Mutex<History>,
    pub(crate) latest: watch::Sender<Option<Arc<Written>>>,
    /// The audit file (to catch up a witness from, [`history::seed_from_file`]).
    pub(crate) path: PathBuf,
    started: std::sync::atomic::AtomicBool,
}

impl Hub {
    /// The hub for `witnesses`, with the log at `path`.
    pub(crate) fn new(witnesses: Vec<Witness>, path: PathBuf) -> Hub {
        let witnesses = witnesses.into_iter().map(|w| (w, Arc::default())).collect();
        let (latest, _) = watch::channel(None);
        Hub { witnesses, history: Mutex::default(), latest, path, started: Default::default() }
    }

    /// The counts per witness: its key name and URL, pushes ok and failed.
    pub(crate) fn counts(&self) -> Vec<(String, u64, u64)> {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        self.witnesses
            .iter()
            .map(|(w, c)| (w.key.name().to_owned(), load(&c.ok), load(&c.failed)))
            .collect()
    }

    /// Takes in the lines of a batch that reached the file whole (each without its newline),
    /// and after a checkpoint among them wakes the witnesses' tasks.
    pub(crate) fn took<'a>(&self, lines: impl Iterator<Item = (&'a [u8], bool)>) {
        let mut newest = None;
        {
            let mut history = self.history.lock().unwrap_or_else(|e| e.into_inner());
            for (line, checkpoint) in lines {
                match checkpoint.then(|| Written::parse(line)).flatten() {
                    Some(written) => {
                        history.checkpoint(&written, line);
                        newest = Some(written);
                    }
                    None => history.line(line),
                }
            }
        }
        if let Some(written) = newest {
            self.latest.send_replace(Some(Arc::new(written)));
        }
    }
}

/// The witnesses of an `[audit]` section, or why they cannot be used (each problem with its
/// key, as `config check` names them).
pub fn configured(
    section: &super::AuditSection,
) -> Result<Vec<Witness>, Vec<(&'static str, String)>> {
    let mut problems = Vec::new();
    let mut witnesses = Vec::new();
    if section.witnesses.is_empty() && section.witness_keys.is_empty() {
        return Ok(witnesses);
    }
    if section.checkpoint_key.is_none() {
        problems.push((
            "audit.witnesses",
            "witnesses cosign checkpoints: set audit.checkpoint_key too".to_owned(),
        ));
    }
    if section.witnesses.len() > MAX_WITNESSES {
        problems.push((
            "audit.witnesses",
            format!("{} witnesses: at most {MAX_WITNESSES}", section.witnesses.len()),
        ));
    }
    if section.witnesses.len() != section.witness_keys.len() {
        problems.push((
            "audit.witness_keys",
            format!(
                "{} witness URL(s) and {} key(s): give one key per URL, in the same order",
                section.witnesses.len(),
                section.witness_keys.len()
            ),
        ));
    }
    for (i, url) in section.witnesses.iter().enumerate() {
        if let Err(e) = check_url(url) {
            problems.push(("audit.witnesses", format!("entry {} ({url:?}): {e}", i + 1)));
        }
    }
    let mut names = std::collections::HashSet::new();
    for (i, text) in section.witness_keys.iter().enumerate() {
        match text.parse::<WitnessKey>() {
            Ok(key) => {
                if !names.insert(key.name().to_owned()) {
                    problems.push((
                        "audit.witness_keys",
                        format!("entry {}: the key name {} is given twice", i + 1, key.name()),
                    ));
                }
                if let Some(url) = section.witnesses.get(i) {
                    witnesses.push(Witness { url: url.trim_end_matches('/').to_owned(), key });
                }
            }
            Err(e) => {
                problems.push(("audit.witness_keys", format!("entry {} ({text:?}): {e}", i + 1)))
            }
        }
    }
    if problems.is_empty() {
        Ok(witnesses)
    } else {
        Err(problems)
    }
}

/// A witness URL: `https`, or `http` to a loopback address (a witness on the same machine or
/// behind a local bastion); no query or fragment.
fn check_url(text: &str) -> Result<(), String> {
    let url = url::Url::parse(text).map_err(|e| format!("not a URL: {e}"))?;
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        return Err("a witness's submission prefix has no query, fragment or user".into());
    }
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    match url.scheme() {
        "https" if url.host().is_some() => Ok(()),
        "http" if loopback => Ok(()),
        "http" => Err("http is allowed only to a loopback address: use https".into()),
        other => Err(format!("the scheme {other:?} is not https")),
    }
}

/// The hub of the witnesses `section` configures, for the log at `path`: `None` without
/// witnesses or without a checkpoint key (nothing to cosign).
pub(super) fn hub(
    section: &super::AuditSection,
    path: &std::path::Path,
) -> Result<Option<Arc<Hub>>, super::AuditError> {
    let witnesses = configured(section).map_err(|problems| {
        let said: Vec<String> = problems.iter().map(|(k, m)| format!("{k}: {m}")).collect();
        super::AuditError::Witnesses(said.join("; "))
    })?;
    let wanted = !witnesses.is_empty() && section.checkpoint_key.is_some();
    Ok(wanted.then(|| Arc::new(Hub::new(witnesses, path.to_owned()))))
}

impl super::AuditLog {
    /// Starts pushing checkpoints to the witnesses of `audit.witnesses` (one task each, on the
    /// current runtime), with `tls` for `https` witnesses. Nothing without witnesses; a
    /// second call does nothing.
    pub fn start_witnesses(&self, tls: rustls::ClientConfig) {
        let shared = &self.shared;
        let (Some(hub), Some(served)) = (&shared.witnesses, &shared.latest) else { return };
        if hub.started.swap(true, Ordering::Relaxed) {
            return;
        }
        let client = push::client(tls);
        for (witness, counts) in &hub.witnesses {
            let task = push::Task {
                witness: witness.clone(),
                counts: counts.clone(),
                hub: hub.clone(),
                client: client.clone(),
                log: shared.tx.downgrade(),
                served: served.clone(),
                node: shared.node.clone(),
                acked: None,
                failing: false,
            };
            tokio::spawn(task.run(hub.latest.subscribe()));
        }
    }

    /// Per witness: its key name, checkpoints it cosigned (verified and recorded), pushes
    /// that failed. Empty without witnesses.
    pub fn witness_counts(&self) -> Vec<(String, u64, u64)> {
        self.shared.witnesses.as_ref().map(|hub| hub.counts()).unwrap_or_default()
    }
}
