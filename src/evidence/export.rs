//! `evidence export --authority A --from T1 --to T2 --out DIR`: what a lawyer is handed.
//!
//! `DIR` (new, or an empty directory) receives:
//!
//! * `versions/<sha256>.txt`: each robots.txt version in force at some time in the interval,
//!   byte for byte (its SHA-256 is its name);
//! * `records.jsonl`: the audit records of the authority whose `@timestamp` is in the interval
//!   (bounds included), each line exactly as in its file, ordered by time;
//! * `windows.json`: the authority's windows that overlap the interval (with `--instance`, from
//!   that instance's records alone);
//! * `instance_windows.json`, when the records of several instances of a fleet name the
//!   authority and no `--instance` is given: each instance's windows from its own records;
//! * `proofs/<event.sequence>.json`: for each record, its inclusion proof against the first
//!   signed checkpoint that covers it, as `audit prove` prints it (the record, its leaf hash,
//!   the path to the root, the signed note): the receiver checks each with the public key
//!   alone (`evidence verify-export DIR --public-key K`, or `audit check-proof` on each); when
//!   the records come from several instances of a fleet (each numbers and chains its own),
//!   `proofs/<instance>/<event.sequence>.json`, each proved from that instance's files;
//! * `manifest.json`: the authority, the interval, the sources (each audit file with its
//!   SHA-256), every file written with its SHA-256 and size, `proofs_missing` (records no
//!   proof could be made for, and why), and `audit_verify`, the result of `audit verify` on the
//!   audit files read.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{json, Value};

use crate::config::Config;

use super::history::{InForce, Scope};
use super::time::show;
use super::{
    file_sha256, load_sources, parse_authority, parse_time, EvidenceError, Source, SourceArgs,
};

/// `evidence export`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExportArgs {
    /// The authority: scheme://host[:port], as `robots.authority` in the audit log.
    #[arg(long, value_name = "AUTHORITY")]
    pub authority: String,
    /// The start of the interval: RFC 3339 with a zone.
    #[arg(long, value_name = "TIME")]
    pub from: String,
    /// The end of the interval (included): RFC 3339 with a zone.
    #[arg(long, value_name = "TIME")]
    pub to: String,
    /// The directory to write; it must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The sources and configuration.
    #[command(flatten)]
    pub sources: SourceArgs,
}

/// The result of `audit verify` on the audit files read, for the manifest's `audit_verify`:
/// the report of `robots-proxy audit verify FILE…` (the files in the order given, as one chain;
/// checkpoint signatures checked with `--public-key`, else with the public half of
/// `audit.checkpoint_key` when it is configured), as JSON. `null` when no audit file was read.
fn verify_result(paths: &[PathBuf], config: &Config, public_key: Option<&Path>) -> Value {
    if paths.is_empty() {
        return Value::Null;
    }
    if let Some(path) = public_key {
        return match crate::audit::checkpoint::PublicKey::read(path) {
            Ok(key) => {
                let report = crate::audit::verify::verify_files(paths, Some(&key));
                serde_json::to_value(&report).unwrap_or(Value::Null)
            }
            Err(e) => json!({ "error": format!("--public-key {e}") }),
        };
    }
    let key = match &config.audit.checkpoint_key {
        None => None,
        Some(path) => match crate::audit::checkpoint::load_key(path) {
            Ok(key) => Some(crate::audit::checkpoint::PublicKey::of(&key)),
            Err(e) => return json!({ "error": format!("audit.checkpoint_key: {e}") }),
        },
    };
    let report = crate::audit::verify::verify_files(paths, key.as_ref());
    serde_json::to_value(&report).unwrap_or(Value::Null)
}

/// Runs the export; says what was written.
pub fn run(args: &ExportArgs) -> Result<String, EvidenceError> {
    let arg = |flag: &str, e: String| EvidenceError::Argument(format!("{flag}: {e}"));
    let from = parse_time(&args.from).map_err(|e| arg("--from", e))?;
    let to = parse_time(&args.to).map_err(|e| arg("--to", e))?;
    if to < from {
        return Err(EvidenceError::Argument(format!(
            "--to {} is before --from {}",
            args.to, args.from
        )));
    }
    let authority = parse_authority(&args.authority)?.to_string();
    refuse_non_empty(&args.out)?;
    let config = args.sources.load_config()?;
    let sources = args.sources.sources(&config);
    args.sources.check_instance(&sources)?;
    let keep = |record: &Value, at: SystemTime| {
        from <= at
            && at <= to
            && record.get("robots.authority").and_then(Value::as_str) == Some(authority.as_str())
    };
    let (history, mut records) =
        load_sources(&sources, Some(&authority), &keep, config.robots.max_age)?;
    super::warn_skipped(&history, "evidence export");
    // One instance's records and windows (`--instance`), else every source's; with several
    // instances, each one's windows too (issue 39, L5: they may have held different versions).
    let instance = args.sources.instance.as_deref();
    let scope = match instance {
        Some(name) => {
            super::instances::named(&history, name)?;
            records.retain(|k| super::instances::node_name(&k.value) == Some(name));
            Scope::Instance(Some(name))
        }
        None => Scope::All,
    };
    let overlapping = |scope: Scope<'_>| -> Vec<super::history::Window> {
        history
            .windows_in(&authority, scope)
            .into_iter()
            .filter(|w| w.from <= to && w.replaced_at.unwrap_or(w.last_confirmed) >= from)
            .collect()
    };
    let windows = overlapping(scope);
    let each = history.instances_at(&authority, from).each;
    let instance_windows: Vec<Value> = if instance.is_none() && each.len() > 1 {
        each.iter()
            .map(|e| {
                let w = overlapping(Scope::Instance(e.instance.as_deref()));
                let w: Vec<Value> = w.iter().map(super::report::window_json).collect();
                json!({ "instance": e.instance, "windows": w })
            })
            .collect()
    } else {
        Vec::new()
    };

    let write_error = |path: &Path, e: std::io::Error| {
        EvidenceError::Export(format!("cannot write {}: {e}", path.display()))
    };
    let versions_dir = args.out.join("versions");
    std::fs::create_dir_all(&versions_dir).map_err(|e| write_error(&versions_dir, e))?;
    let mut files: Vec<Value> = Vec::new();
    let mut put = |name: String, bytes: &[u8]| -> Result<(), EvidenceError> {
        let path = args.out.join(&name);
        std::fs::write(&path, bytes).map_err(|e| write_error(&path, e))?;
        files.push(json!({
            "path": name,
            "sha256": crate::robots_version::sha256_hex(bytes),
            "bytes": bytes.len(),
        }));
        Ok(())
    };
    let mut missing = Vec::new();
    let mut written = std::collections::BTreeSet::new();
    for w in &windows {
        if let InForce::File(digest) = &w.what {
            match history.body(digest) {
                Some(body) if written.insert(digest.clone()) => {
                    put(format!("versions/{digest}.txt"), &body.bytes)?;
                }
                Some(_) => {}
                None => missing.push(digest.clone()),
            }
        }
    }
    let mut lines = Vec::new();
    for k in &records {
        lines.extend_from_slice(&k.raw);
        lines.push(b'\n');
    }
    put("records.jsonl".to_owned(), &lines)?;
    let proofs_missing = write_proofs(&records, &sources, &args.out, &mut put)?;
    let windows_json: Vec<Value> = windows.iter().map(super::report::window_json).collect();
    let windows_text = serde_json::to_vec_pretty(&windows_json).unwrap_or_default();
    put("windows.json".to_owned(), &windows_text)?;
    if !instance_windows.is_empty() {
        let text = serde_json::to_vec_pretty(&instance_windows).unwrap_or_default();
        put("instance_windows.json".to_owned(), &text)?;
    }

    let mut described = Vec::new();
    let mut audit_files = Vec::new();
    for s in &sources {
        match s {
            Source::Audit(path) => {
                described.push(json!({
                    "kind": "audit",
                    "path": path.display().to_string(),
                    "sha256": file_sha256(path)?,
                }));
                audit_files.push(path.clone());
            }
            Source::StateDir(dir) => {
                described.push(json!({ "kind": "state-dir", "path": dir.display().to_string() }));
            }
        }
    }
    let manifest = json!({
        "authority": authority,
        "instance": instance,
        "from": show(from),
        "to": show(to),
        "generated_at": show(SystemTime::now()),
        "generator": format!("robots-proxy {}", env!("CARGO_PKG_VERSION")),
        "sources": described,
        "versions": written.len(),
        "versions_without_body": missing,
        "records": records.len(),
        "proofs_missing": proofs_missing,
        "files": files,
        // The `audit verify` report of the audit files read (see `verify_result`).
        "audit_verify": verify_result(&audit_files, &config, args.sources.public_key.as_deref()),
    });
    let manifest_path = args.out.join("manifest.json");
    let text = serde_json::to_vec_pretty(&manifest).unwrap_or_default();
    std::fs::write(&manifest_path, text).map_err(|e| write_error(&manifest_path, e))?;
    Ok(format!(
        "wrote {} version(s), {} record(s) of {authority} from {} to {} into {} (manifest.json)\n",
        written.len(),
        records.len(),
        show(from),
        show(to),
        args.out.display()
    ))
}

/// Writes a file of the export and lists it in the manifest.
type Put<'a> = dyn FnMut(String, &[u8]) -> Result<(), EvidenceError> + 'a;

/// Writes each record's proof, from the audit files read (oldest first, as given): the records
/// no proof could be made for, each with why.
///
/// Each instance of a fleet numbers and chains its own records, so a record is proved against
/// its own instance's files alone (the files whose records name that `service.node.name`);
/// with one instance (or none) the proofs are `proofs/<sequence>.json`, with several
/// `proofs/<instance>/<sequence>.json` ([`proof_path`]), since their sequences collide.
fn write_proofs(
    records: &[super::Kept],
    sources: &[Source],
    out: &Path,
    put: &mut Put<'_>,
) -> Result<Vec<Value>, EvidenceError> {
    let files: Vec<PathBuf> = sources
        .iter()
        .filter_map(|s| match s {
            Source::Audit(path) => Some(path.clone()),
            Source::StateDir(_) => None,
        })
        .collect();
    let mut by_instance: std::collections::BTreeMap<Option<&str>, Vec<u64>> = Default::default();
    for k in records {
        if let Some(sequence) = k.value.get("event.sequence").and_then(Value::as_u64) {
            let instance = super::instances::node_name(&k.value);
            by_instance.entry(instance).or_default().push(sequence);
        }
    }
    if files.is_empty() || by_instance.is_empty() {
        return Ok(Vec::new());
    }
    // Records of a proxy outside a fleet name no instance: every file given is their chain.
    // Otherwise each file is read for whose it is (a fleet's records all name it, so its first
    // line tells).
    let several = by_instance.len() > 1;
    let named = by_instance.keys().any(Option::is_some);
    let file_instances: Vec<Option<String>> =
        if named { files.iter().map(|f| file_instance(f)).collect() } else { Vec::new() };
    let mut missing = Vec::new();
    for (instance, sequences) in &by_instance {
        let own: Vec<PathBuf> = if named {
            files
                .iter()
                .zip(&file_instances)
                .filter(|(_, of)| of.as_deref() == *instance)
                .map(|(f, _)| f.clone())
                .collect()
        } else {
            files.clone()
        };
        let proofs = crate::audit::proof::prove_many(&own, sequences)
            .map_err(|e| EvidenceError::Export(format!("cannot prove the records: {e}")))?;
        for (&sequence, proof) in sequences.iter().zip(proofs) {
            let name = proof_path(sequence, instance.filter(|_| several));
            match proof {
                Ok(proof) => {
                    let path = out.join(&name);
                    if let Some(dir) = path.parent() {
                        std::fs::create_dir_all(dir).map_err(|e| {
                            EvidenceError::Export(format!("cannot write {}: {e}", dir.display()))
                        })?;
                    }
                    let text = serde_json::to_vec_pretty(&proof).unwrap_or_default();
                    put(name, &text)?;
                }
                Err(e) => missing.push(json!({
                    "sequence": sequence,
                    "instance": instance,
                    "why": e.to_string(),
                })),
            }
        }
    }
    Ok(missing)
}

/// Where an export keeps a record's proof: `proofs/<sequence>.json`, or under its instance's
/// directory when the export holds the records of several instances (`instance`): the name
/// itself when it is a plain file name (letters, digits, `.`, `_`, `-`, not starting with a
/// dot, nor with `x-`), else `x-` and its bytes in hex, so no name reaches outside `proofs/`
/// and no two names share a directory.
pub(super) fn proof_path(sequence: u64, instance: Option<&str>) -> String {
    match instance {
        None => format!("proofs/{sequence}.json"),
        Some(name) => {
            let plain = !name.is_empty()
                && !name.starts_with('.')
                && !name.starts_with("x-")
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
            let dir = if plain {
                name.to_owned()
            } else {
                let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
                format!("x-{hex}")
            };
            format!("proofs/{dir}/{sequence}.json")
        }
    }
}

/// The instance whose records an audit file holds: the `service.node.name` of its first record
/// that has one (`None` for the file of a proxy outside a fleet, or one that cannot be read).
fn file_instance(path: &Path) -> Option<String> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).ok()?;
    for line in std::io::BufReader::new(file).split(b'\n').map_while(Result::ok) {
        if let Ok(value) = serde_json::from_slice::<Value>(&line) {
            if let Some(name) = super::instances::node_name(&value) {
                return Some(name.to_owned());
            }
        }
    }
    None
}

/// Refuses an `--out` that exists and is not an empty directory.
fn refuse_non_empty(out: &Path) -> Result<(), EvidenceError> {
    match std::fs::read_dir(out) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(EvidenceError::Export(format!(
                    "--out {} is not empty: give a new or empty directory (nothing is overwritten)",
                    out.display()
                )));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(EvidenceError::Export(format!(
            "--out {}: {e} (give a new or empty directory)",
            out.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::proof_path;

    /// An instance's proofs stay under `proofs/`, each instance in a directory of its own:
    /// a name the audit log gives (whoever wrote it) is used as it is only when it is a plain
    /// file name, else hex-encoded, and the encoded form cannot be named directly.
    #[test]
    fn proof_paths_stay_under_proofs_one_directory_per_instance() {
        assert_eq!(proof_path(7, None), "proofs/7.json");
        assert_eq!(proof_path(7, Some("instance-1")), "proofs/instance-1/7.json");
        assert_eq!(proof_path(7, Some("..")), "proofs/x-2e2e/7.json");
        assert_eq!(proof_path(7, Some("../../etc")), "proofs/x-2e2e2f2e2e2f657463/7.json");
        assert_eq!(proof_path(7, Some("a/b")), "proofs/x-612f62/7.json");
        assert_eq!(proof_path(7, Some(".hidden")), "proofs/x-2e68696464656e/7.json");
        assert_eq!(proof_path(7, Some("")), "proofs/x-/7.json");
        // A plain name that looks like an encoded one is encoded too: it cannot take the
        // directory of `..`.
        assert_eq!(proof_path(7, Some("x-2e2e")), "proofs/x-782d32653265/7.json");
        let names = ["..", "x-2e2e", "a/b", "x-612f62", "instance-1"];
        let dirs: std::collections::HashSet<_> =
            names.iter().map(|n| proof_path(1, Some(n))).collect();
        assert_eq!(dirs.len(), names.len());
    }
}
