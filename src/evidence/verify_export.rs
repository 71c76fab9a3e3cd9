//! `evidence verify-export DIR --public-key K` (issue 39, item 5; review M6): what the
//! receiver of an export runs, with the public key of `audit.checkpoint_key` and nothing else.
//! Every record of `records.jsonl` must be the record of its proof (`proofs/<sequence>.json`,
//! as `audit prove` prints it), and the proof must verify against its signed checkpoint
//! (`audit::proof::check`: the note's signature, the leaf, the path to the root); every
//! version file must hash to its name, and every file the manifest lists to its digest.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::EvidenceError;
use crate::audit::checkpoint::PublicKey;
use crate::audit::proof::{check, InclusionProof};

/// `evidence verify-export`.
#[derive(Debug, Clone, clap::Args)]
pub struct VerifyExportArgs {
    /// The directory `evidence export` wrote.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// The public key of `audit.checkpoint_key` (a JWK or PEM, as `audit public-key` prints
    /// it), obtained from the operator apart from the export.
    #[arg(long, value_name = "FILE")]
    pub public_key: PathBuf,
}

fn read(path: &Path) -> Result<Vec<u8>, EvidenceError> {
    std::fs::read(path)
        .map_err(|source| EvidenceError::Unreadable { path: path.to_owned(), source })
}

fn tampered(message: String) -> EvidenceError {
    EvidenceError::Tampered(format!("invalid: {message}"))
}

/// Checks the export; says what was checked.
pub fn run(args: &VerifyExportArgs) -> Result<String, EvidenceError> {
    let key = PublicKey::read(&args.public_key)
        .map_err(|e| EvidenceError::Argument(format!("--public-key {e}")))?;
    let dir = &args.dir;
    let manifest: Value = serde_json::from_slice(&read(&dir.join("manifest.json"))?)
        .map_err(|e| EvidenceError::Argument(format!("manifest.json is not JSON: {e}")))?;
    // Every file the manifest lists, by its digest.
    let listed = manifest.get("files").and_then(Value::as_array).cloned().unwrap_or_default();
    for entry in &listed {
        let name = entry.get("path").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() || name.contains("..") || name.starts_with('/') {
            return Err(tampered(format!("manifest.json lists the file {name:?}")));
        }
        let bytes = read(&dir.join(name))?;
        let digest = crate::robots_version::sha256_hex(&bytes);
        if entry.get("sha256").and_then(Value::as_str) != Some(digest.as_str()) {
            return Err(tampered(format!(
                "{name} hashes to sha256 {digest}, not as manifest.json says"
            )));
        }
    }
    // Every version, by its name.
    let versions = dir.join("versions");
    let mut version_count = 0;
    if let Ok(entries) = std::fs::read_dir(&versions) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let digest = crate::robots_version::sha256_hex(&read(&entry.path())?);
            if name.strip_suffix(".txt") != Some(digest.as_str()) {
                return Err(tampered(format!(
                    "versions/{name} hashes to sha256 {digest}: not the version its name says"
                )));
            }
            version_count += 1;
        }
    }
    // Every record, by its proof.
    let records = read(&dir.join("records.jsonl"))?;
    let mut checkpoints = std::collections::BTreeSet::new();
    let mut proved = 0;
    for (n, line) in records.split(|&b| b == b'\n').enumerate().filter(|(_, l)| !l.is_empty()) {
        let at = format!("records.jsonl:{}", n + 1);
        let value: Value = serde_json::from_slice(line)
            .map_err(|_| tampered(format!("{at}: the line is not JSON: it was changed")))?;
        let Some(sequence) = value.get("event.sequence").and_then(Value::as_u64) else {
            return Err(tampered(format!("{at}: the record has no event.sequence")));
        };
        // The records of several instances keep their proofs under their instance's name
        // (their sequences collide); one instance's, or a single proxy's, directly.
        let instance = super::instances::node_name(&value);
        let own = super::export::proof_path(sequence, instance);
        let name = if instance.is_some() && dir.join(&own).exists() {
            own
        } else {
            super::export::proof_path(sequence, None)
        };
        let proof: InclusionProof = match std::fs::read(dir.join(&name)) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| tampered(format!("{name} is not a proof: {e}")))?,
            Err(_) => {
                return Err(tampered(format!(
                    "{at}: no proof ({name}): the record is not proven (see manifest.json \
                     proofs_missing)"
                )))
            }
        };
        // A proof of scheme 2 proves the line without its `event.hash` member (derived from
        // the hash before and the leaf); one of scheme 1 the line as written.
        let leaf = crate::audit::chain::Sealed::parse(line).map(|sealed| sealed.leaf_bytes());
        let proves = proof.record.as_bytes() == line
            || leaf.is_some_and(|leaf| proof.record.as_bytes() == &*leaf);
        if !proves {
            return Err(tampered(format!(
                "{at}: the record is not the one {name} proves: it was changed"
            )));
        }
        let checkpoint = check(&proof, &key).map_err(|e| tampered(format!("{at}: {name}: {e}")))?;
        checkpoints.insert((checkpoint.origin, checkpoint.size));
        proved += 1;
    }
    Ok(format!(
        "valid: {proved} record(s) proved against {} signed checkpoint(s) with key {}; {} \
         version(s) and {} file(s) match their digests\n",
        checkpoints.len(),
        key.keyid(),
        version_count,
        listed.len()
    ))
}
