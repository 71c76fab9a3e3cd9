//! `robots-proxy audit …`: verify audit files, prove a record or a checkpoint's growth
//! (`proof.rs`), print the checkpoint key's public half.
//!
//! Exit status of `audit verify`: 0 when the files are intact and in order (a torn last line
//! after a crash included, reported as such); 1 when a line breaks the chain (named, with its
//! kind); 2 when a file cannot be read, a line is not JSON (and not a torn line), or an
//! argument or the configuration is bad.

use std::path::PathBuf;
use std::process::ExitCode;

use super::checkpoint::{load_key, PublicKey};
use super::keyset::KeySet;
use super::verify::{read_shipped, verify, Options, Status};
use super::AuditSection;
use robots_proxy_output::terminal;

/// `robots-proxy audit …`
#[derive(Debug, clap::Subcommand)]
#[non_exhaustive]
pub enum AuditCommand {
    /// Check the hash chain and signed checkpoints of audit files, given in the order they
    /// were written (oldest first). Exit 0: intact and in order; 1: tampering found (the first
    /// line that breaks the chain is named); 2: unreadable input or a line that is not JSON.
    Verify {
        /// The audit files, oldest first (rotated files, then the current one).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Configuration file (TOML): checkpoint signatures are checked with the public half
        /// of `audit.checkpoint_key`.
        #[arg(long, value_name = "FILE", env = "ROBOTS_PROXY_CONFIG")]
        config: Option<PathBuf>,
        /// Check checkpoint signatures with this public key (a JWK, as `audit public-key`
        /// prints it, or a PEM PUBLIC KEY), kept away from the machine that writes the log.
        /// Give it again for each key the log was signed with, or give a key set (a JWK Set,
        /// `{"keys": [...]}`); a JWK may carry `valid_from` and `valid_until` (RFC 3339), the
        /// window in which its checkpoints are accepted (docs/audit.md, "Key sets").
        #[arg(long, value_name = "FILE")]
        public_key: Vec<PathBuf>,
        /// Checkpoints kept away from the machine (any file of audit lines: its
        /// `audit_checkpoint` records): each one within the files' range must be in them, so a
        /// tail cut off after it, or records rewritten before it, are found.
        #[arg(long, value_name = "FILE")]
        checkpoints: Option<PathBuf>,
        /// Require cosignatures of this witness key (a C2SP vkey, `name+keyid+base64`, or a
        /// file holding one; repeatable): each of its cosignatures in the files must verify,
        /// and a checkpoint must be cosigned by `--witness-quorum` of the keys (else exit 3).
        #[arg(long, value_name = "VKEY")]
        witness_key: Vec<String>,
        /// How many of the `--witness-key` keys must cosign one checkpoint (default: all).
        #[arg(long, value_name = "N", requires = "witness_key")]
        witness_quorum: Option<usize>,
        /// Demand coverage from this time (RFC 3339) on: every record from then to `--to` is
        /// covered by a signed checkpoint, with no gap in their cadence beyond the interval
        /// plus 10 s (a break is exit 1). Needs a key.
        #[arg(long, value_name = "T1")]
        from: Option<String>,
        /// The end of the range `--from` starts (RFC 3339; default: now).
        #[arg(long, value_name = "T2")]
        to: Option<String>,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print an inclusion proof (JSON) of the record `--sequence N` against the first signed
    /// checkpoint whose Merkle tree covers it: the record's line, its leaf hash and index, the
    /// proof's hashes (base64) and the checkpoint (signed-note text). Exit 0; 2 when no
    /// checkpoint covers it yet or the files cannot be read; 1 when the log does not hash to
    /// the checkpoint's root.
    Prove {
        /// The record's `event.sequence`.
        #[arg(long, value_name = "N")]
        sequence: u64,
        /// The audit files, oldest first, from the one that holds the chain's first record.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// Check a proof that `audit prove` printed, alone, with the public key: exit 0 valid,
    /// 1 invalid (the record, the proof or the checkpoint changed, or another key), 2
    /// unreadable.
    CheckProof {
        /// The proof (JSON, as `audit prove` prints it).
        #[arg(value_name = "FILE")]
        proof: PathBuf,
        /// The checkpoint key's public half (JWK or PEM PUBLIC KEY).
        #[arg(long, value_name = "FILE")]
        public_key: PathBuf,
        /// Also require a cosignature of this witness key on the checkpoint (a C2SP vkey, or
        /// a file holding one; repeatable).
        #[arg(long, value_name = "VKEY")]
        witness_key: Vec<String>,
        /// How many of the `--witness-key` keys must have cosigned it (default: all).
        #[arg(long, value_name = "N", requires = "witness_key")]
        witness_quorum: Option<usize>,
    },
    /// Prove that the checkpoint NEW extends the checkpoint OLD (both signed-note text files,
    /// as `GET /audit/checkpoint` serves them or `audit.checkpoint.note` holds them), with the
    /// consistency proof computed from the log files (`--log`). Prints the proof (JSON).
    /// Exit 0: NEW extends OLD; 1: it does not (another log, or a rewritten one); 2: unreadable.
    Consistency {
        /// The earlier checkpoint (signed-note text).
        #[arg(value_name = "OLD")]
        old: PathBuf,
        /// The later checkpoint (signed-note text).
        #[arg(value_name = "NEW")]
        new: PathBuf,
        /// The audit files, oldest first, from the one that holds the chain's first record.
        #[arg(long = "log", required = true, num_args = 1.., value_name = "FILE")]
        log: Vec<PathBuf>,
        /// Check both checkpoints' signatures with this public key.
        #[arg(long, value_name = "FILE")]
        public_key: Option<PathBuf>,
    },
    /// Print the public key (JWK) of `audit.checkpoint_key`, to keep away from the machine
    /// and give to `audit verify --public-key`.
    PublicKey {
        /// Configuration file (TOML).
        #[arg(long, value_name = "FILE", env = "ROBOTS_PROXY_CONFIG")]
        config: Option<PathBuf>,
    },
}

/// Runs `robots-proxy audit …`. `load` reads the layered configuration and gives its
/// `[audit]` section, or says why it cannot.
pub fn run(
    command: AuditCommand,
    load: &dyn Fn(Option<PathBuf>) -> Result<AuditSection, String>,
) -> ExitCode {
    match command {
        AuditCommand::Verify {
            files,
            config,
            public_key,
            checkpoints,
            witness_key,
            witness_quorum,
            from,
            to,
            json,
        } => {
            let witnesses = match witness_keys(&witness_key, witness_quorum) {
                Ok(w) => w,
                Err(e) => return fail("verify", &e, 2),
            };
            let range = match range_of(from.as_deref(), to.as_deref()) {
                Ok(range) => range,
                Err(e) => return fail("verify", &e, 2),
            };
            let key = match (public_key.is_empty(), config) {
                (false, _) => match KeySet::read(&public_key) {
                    Ok(keys) => Some(keys),
                    Err(e) => return fail("verify", &format!("--public-key {e}"), 2),
                },
                (true, Some(config)) => match configured_key(load, Some(config)) {
                    Ok(key) => key.map(KeySet::single),
                    Err(e) => return fail("verify", &e, 2),
                },
                (true, None) => None,
            };
            if range.is_some() && key.is_none() {
                let why = "--from/--to demand signed checkpoints: give --public-key (or --config)";
                return fail("verify", why, 2);
            }
            let shipped = match &checkpoints {
                None => Vec::new(),
                Some(path) => match read_shipped(path, key.as_ref()) {
                    Ok(shipped) => shipped,
                    Err((problem, code)) => {
                        let at = match problem.line {
                            Some(line) => format!("{}:{line}", problem.file),
                            None => problem.file.clone(),
                        };
                        return fail(
                            "verify",
                            &format!("--checkpoints {at}: {}", problem.message),
                            code,
                        );
                    }
                },
            };
            let mut report =
                verify(&files, Options { keys: key.as_ref(), shipped: &shipped, range });
            super::witness::verify::apply(&mut report, &files, &witnesses.0, witnesses.1);
            if json {
                match serde_json::to_vec_pretty(&report) {
                    Ok(mut text) => {
                        robots_proxy_output::json_line(&mut text);
                        println!("{}", String::from_utf8_lossy(&text));
                    }
                    Err(e) => return fail("verify", &e.to_string(), 2),
                }
            } else if report.status == Status::Unreadable {
                // One clear line.
                if let Some(p) = &report.problem {
                    let at = match p.line {
                        Some(line) => format!("{}:{line}", p.file),
                        None => p.file.clone(),
                    };
                    eprintln!(
                        "robots-proxy audit verify: {}",
                        terminal(&format!("{at}: {}", p.message))
                    );
                }
            } else {
                print!("{}", robots_proxy_output::terminal_text(&report.render()));
            }
            ExitCode::from(report.exit_code())
        }
        AuditCommand::Prove { sequence, files } => match super::proof::prove(&files, sequence) {
            Ok(proof) => print_json("prove", &proof),
            Err(e) => fail("prove", &e.to_string(), e.exit_code()),
        },
        AuditCommand::CheckProof { proof, public_key, witness_key, witness_quorum } => {
            let (witnesses, quorum) = match witness_keys(&witness_key, witness_quorum) {
                Ok(w) => w,
                Err(e) => return fail("check-proof", &e, 2),
            };
            let key = match PublicKey::read(&public_key) {
                Ok(key) => key,
                Err(e) => return fail("check-proof", &format!("--public-key {e}"), 2),
            };
            let read = std::fs::read(&proof)
                .map_err(|e| format!("{}: cannot read: {e}", proof.display()))
                .and_then(|b| {
                    serde_json::from_slice::<super::proof::InclusionProof>(&b)
                        .map_err(|e| format!("{}: not a proof: {e}", proof.display()))
                });
            let parsed = match read {
                Ok(parsed) => parsed,
                Err(e) => return fail("check-proof", &e, 2),
            };
            let checked = super::proof::check(&parsed, &key).and_then(|c| {
                super::proof::check_cosigned(&parsed, &witnesses, quorum).map(|names| (c, names))
            });
            match checked {
                Ok((c, names)) => {
                    if !names.is_empty() {
                        println!("cosigned by witness(es) {}", terminal(&names.join(", ")));
                    }
                    println!(
                        "valid: record event.sequence {} is leaf {} of {} tree size {}, signed by key {}",
                        parsed.sequence, parsed.leaf_index, terminal(&c.origin), c.size, key.keyid()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => fail("check-proof", &format!("invalid: {e}"), e.exit_code()),
            }
        }
        AuditCommand::Consistency { old, new, log, public_key } => {
            let key = match public_key.map(|p| PublicKey::read(&p)).transpose() {
                Ok(key) => key,
                Err(e) => return fail("consistency", &format!("--public-key {e}"), 2),
            };
            let text = |p: &PathBuf| {
                std::fs::read_to_string(p).map_err(|e| format!("{}: cannot read: {e}", p.display()))
            };
            let (old, new) = match (text(&old), text(&new)) {
                (Ok(o), Ok(n)) => (o, n),
                (Err(e), _) | (_, Err(e)) => return fail("consistency", &e, 2),
            };
            match super::proof::consistency(&old, &new, &log, key.as_ref()) {
                Ok(proof) => print_json("consistency", &proof),
                Err(e) => fail("consistency", &e.to_string(), e.exit_code()),
            }
        }
        AuditCommand::PublicKey { config } => match configured_key(load, config) {
            Ok(Some(key)) => match serde_json::to_string(&key.jwk()) {
                Ok(text) => {
                    println!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => fail("public-key", &e.to_string(), 1),
            },
            Ok(None) => fail("public-key", "audit.checkpoint_key is not set", 1),
            Err(e) => fail("public-key", &e, 1),
        },
    }
}

/// The witness keys of `--witness-key` (each a vkey, or a file holding one) and the quorum.
fn witness_keys(
    given: &[String],
    quorum: Option<usize>,
) -> Result<(Vec<super::witness::WitnessKey>, usize), String> {
    let mut keys = Vec::new();
    for text in given {
        let key = match text.parse() {
            Ok(key) => key,
            Err(e) => match std::fs::read_to_string(text) {
                Ok(file) => {
                    file.trim().parse().map_err(|e| format!("--witness-key {text}: {e}"))?
                }
                Err(_) => return Err(format!("--witness-key {text:?}: {e}")),
            },
        };
        keys.push(key);
    }
    let quorum = quorum.unwrap_or(keys.len());
    if !keys.is_empty() && !(1..=keys.len()).contains(&quorum) {
        return Err(format!(
            "--witness-quorum {quorum}: from 1 to the {} key(s) given",
            keys.len()
        ));
    }
    Ok((keys, quorum))
}

/// `--from`, `--to` (RFC 3339): the range, from the epoch or to now when one is left out.
fn range_of(
    from: Option<&str>,
    to: Option<&str>,
) -> Result<Option<(std::time::SystemTime, std::time::SystemTime)>, String> {
    if from.is_none() && to.is_none() {
        return Ok(None);
    }
    let parse = |name: &str, text: Option<&str>, default| match text {
        None => Ok(default),
        Some(text) => super::verify::parse_time(text)
            .ok_or_else(|| format!("{name} {text:?} is not an RFC 3339 time with a zone")),
    };
    let from = parse("--from", from, std::time::UNIX_EPOCH)?;
    let to = parse("--to", to, std::time::SystemTime::now())?;
    if to < from {
        return Err("--to is before --from".to_owned());
    }
    Ok(Some((from, to)))
}

/// The public half of `audit.checkpoint_key`, when set.
fn configured_key(
    load: &dyn Fn(Option<PathBuf>) -> Result<AuditSection, String>,
    config: Option<PathBuf>,
) -> Result<Option<PublicKey>, String> {
    let section = load(config)?;
    match &section.checkpoint_key {
        None => Ok(None),
        Some(path) => load_key(path)
            .map(|key| Some(PublicKey::of(&key)))
            .map_err(|e| format!("audit.checkpoint_key: {e}")),
    }
}

fn print_json<T: serde::Serialize>(command: &str, value: &T) -> ExitCode {
    match serde_json::to_vec_pretty(value) {
        Ok(mut text) => {
            robots_proxy_output::json_line(&mut text);
            println!("{}", String::from_utf8_lossy(&text));
            ExitCode::SUCCESS
        }
        Err(e) => fail(command, &e.to_string(), 2),
    }
}

fn fail(command: &str, message: &str, code: u8) -> ExitCode {
    eprintln!("robots-proxy audit {command}: {}", terminal(message));
    ExitCode::from(code)
}
