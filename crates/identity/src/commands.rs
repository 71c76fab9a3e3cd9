//! `robots-proxy keys`: make a signing key, list the configured ones, export the directory.
//! The command line parses arguments and loads the configuration; these do the work and
//! return what to print.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::directory;
use super::keys::{KeyError, KeyName, SigningKey};
use super::section::MAX_LIFETIME;
use super::{Signer, SigningError, SigningSection};

/// `keys new NAME`: writes a new key `NAME.pem` in `dir` (mode 0600, never over an existing
/// file) and says what was made and how to use it.
pub fn new_key(dir: &Path, name: &str) -> Result<String, KeyError> {
    let name: KeyName = name.parse().map_err(KeyError::Name)?;
    let path = name.file_in(dir);
    let key = SigningKey::create(&name, &path)?;
    Ok(format!(
        "signing key: {} (mode 0600)\nkeyid:       {}\n\nUse it in the configuration:\n\n\
         [signing]\nkeys = [{{ name = \"{name}\" }}]\n\
         identities = [{{ token = \"ExampleBot\", keys = [\"{name}\"], agent = \"https://bots.example.com\" }}]\n",
        path.display(),
        key.keyid(),
    ))
}

/// `keys list`: every configured key, its key id and windows, and whether it signs and is
/// published now.
pub fn list(section: &SigningSection, keys_dir: &Path, now: SystemTime) -> String {
    let mut out = String::new();
    if section.keys.is_empty() {
        let _ = writeln!(out, "no keys in signing.keys (keys directory: {})", keys_dir.display());
        let on_disk = key_files(keys_dir);
        if !on_disk.is_empty() {
            let _ = writeln!(
                out,
                "{} holds {} key file(s) that signing.keys does not name: {}
                 Keys are listed from the configuration: if it is in a file, pass it with                  --config (or ROBOTS_PROXY_CONFIG).",
                keys_dir.display(),
                on_disk.len(),
                on_disk.join(", "),
            );
        }
        return out;
    }
    for entry in &section.keys {
        let path = entry.name.file_in(keys_dir);
        let keyid = match SigningKey::load(&entry.name, &path) {
            Ok(key) => key.keyid().to_owned(),
            Err(e) => format!("UNUSABLE: {e}"),
        };
        let window = |t: Option<super::section::Timestamp>, none: &str| {
            t.map_or_else(|| none.to_owned(), |t| t.to_string())
        };
        let _ = writeln!(
            out,
            "{}  keyid={}  signs={}  published={}  sign_from={} sign_until={} publish_until={}",
            entry.name,
            keyid,
            if entry.signs_at(now) { "yes" } else { "no" },
            if entry.published_at(now) { "yes" } else { "no" },
            window(entry.sign_from, "-"),
            window(entry.sign_until, "-"),
            window(entry.publish_until, "-"),
        );
    }
    out
}

/// The names of the `NAME.pem` files in `dir` that are valid key names, sorted.
fn key_files(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| f.strip_suffix(".pem").map(str::to_owned))
        .filter(|n| n.parse::<KeyName>().is_ok())
        .collect();
    names.sort();
    names
}

/// What `keys export` writes: the directory's body, and for an authority the response fields
/// that sign it.
#[derive(Debug)]
pub struct Export {
    /// The JWK Set.
    pub body: String,
    /// `Content-Type`, `Cache-Control`, `Signature-Input` and `Signature` lines, when an
    /// authority was given.
    pub headers: Option<String>,
}

/// `keys export`: the directory as `signer` publishes it at `now`; with `authority`, signed
/// for it and valid for `lifetime`.
pub fn export(
    signer: &Signer,
    authority: Option<&str>,
    lifetime: Duration,
    now: SystemTime,
) -> Result<Export, SigningError> {
    let keys: Vec<&SigningKey> = signer.published(now).collect();
    let body = directory::body(keys.iter().copied());
    let headers = match authority {
        None => None,
        Some(authority) => {
            let created = now.duration_since(UNIX_EPOCH).map_err(|_| SigningError::Clock)?;
            let Some(authority) = signer.directory_authority(authority) else {
                let agents = signer.agent_authorities().join(", ");
                let agents = if agents.is_empty() { "none configured".to_owned() } else { agents };
                return Err(SigningError::NotAnAgent(authority.to_owned(), agents));
            };
            let fields = directory::signature_fields(
                &keys,
                &authority,
                body.as_bytes(),
                created.as_secs(),
                lifetime,
            )?;
            Some(format!(
                "Content-Type: {}\nCache-Control: max-age={}\nAccess-Control-Allow-Origin: *\n\
                 Content-Digest: {}\nSignature-Input: {}\nSignature: {}\n",
                directory::MEDIA_TYPE,
                lifetime.as_secs(),
                fields.content_digest,
                fields.input,
                fields.signature
            ))
        }
    };
    Ok(Export { body, headers })
}

/// `robots-proxy keys …`
#[derive(Debug, clap::Subcommand)]
#[non_exhaustive]
pub enum KeysCommand {
    /// Write a new Ed25519 key NAME.pem (mode 0600) in `signing.keys_dir`; an existing key is
    /// never overwritten.
    New {
        /// The key's name (letters, digits, '.', '_', '-').
        name: String,
        /// Configuration file (TOML), for `state_dir` and `signing.keys_dir`.
        #[arg(long, value_name = "FILE", env = "ROBOTS_PROXY_CONFIG")]
        config: Option<std::path::PathBuf>,
        /// Directory to write into (default: `signing.keys_dir` under the state directory).
        #[arg(long, value_name = "DIR")]
        dir: Option<std::path::PathBuf>,
    },
    /// List the keys of `signing.keys`: key id, windows, whether each signs and is published.
    List {
        /// Configuration file (TOML).
        #[arg(long, value_name = "FILE", env = "ROBOTS_PROXY_CONFIG")]
        config: Option<std::path::PathBuf>,
    },
    /// Write the key directory (JWK Set of the published keys) for hosting elsewhere, at
    /// /.well-known/http-message-signatures-directory.
    Export {
        /// Configuration file (TOML).
        #[arg(long, value_name = "FILE", env = "ROBOTS_PROXY_CONFIG")]
        config: Option<std::path::PathBuf>,
        /// Write the JSON here instead of standard output.
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
        /// Also sign it for this authority (the host the directory is served from: an `agent`
        /// URL's, normalised, the default port left out) and print the response header
        /// fields to serve it with on standard error.
        #[arg(long, value_name = "HOST")]
        authority: Option<String>,
        /// How long those signatures stay valid ("24h" at most).
        #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = humantime::parse_duration)]
        valid: std::time::Duration,
    },
}

/// Runs `robots-proxy keys …`: prints the report and gives the exit status, as every
/// subcommand does (docs/check.md, "Exit status"): 0, 1 when the work failed or the configuration is
/// invalid, 2 for a bad argument. `load` reads the layered
/// configuration (the file given, the environment) and gives its `[signing]` section and
/// `state_dir`, or says why it cannot.
pub fn run(
    command: KeysCommand,
    load: &dyn Fn(
        Option<std::path::PathBuf>,
    ) -> Result<(SigningSection, std::path::PathBuf), String>,
) -> ExitCode {
    match command {
        KeysCommand::New { name, config, dir } => {
            let dir = match dir {
                Some(dir) => dir,
                None => match load(config) {
                    Ok((section, state_dir)) => state_dir.join(&section.keys_dir),
                    Err(e) => return fail("new", &e, 1),
                },
            };
            match new_key(&dir, &name) {
                Ok(report) => {
                    print!("{report}");
                    ExitCode::SUCCESS
                }
                // A bad name is a bad argument; the rest is work that failed.
                Err(e @ KeyError::Name(_)) => fail("new", &e.to_string(), 2),
                Err(e) => fail("new", &e.to_string(), 1),
            }
        }
        KeysCommand::List { config } => match load(config) {
            Ok((section, state_dir)) => {
                let dir = state_dir.join(&section.keys_dir);
                print!("{}", list(&section, &dir, SystemTime::now()));
                ExitCode::SUCCESS
            }
            Err(e) => fail("list", &e, 1),
        },
        KeysCommand::Export { config, out, authority, valid } => {
            let (section, state_dir) = match load(config) {
                Ok(loaded) => loaded,
                Err(e) => return fail("export", &e, 1),
            };
            if valid.is_zero() || valid > MAX_LIFETIME {
                return fail("export", "--valid must be longer than zero and at most 24h", 2);
            }
            let signer = match Signer::new(&section, &state_dir) {
                Ok(Some(signer)) => signer,
                Ok(None) => return fail("export", "signing.keys is empty: nothing to export", 1),
                Err(e) => return fail("export", &e.to_string(), 1),
            };
            let export = match export(&signer, authority.as_deref(), valid, SystemTime::now()) {
                Ok(export) => export,
                Err(e) => return fail("export", &e.to_string(), 1),
            };
            let written = match &out {
                // Exactly the bytes digested and signed: Content-Digest covers the body as it
                // is, so a newline added here would fail the possession proof (issue 41).
                Some(path) => std::fs::write(path, export.body.as_bytes())
                    .map_err(|e| format!("cannot write {}: {e}", path.display())),
                None => {
                    println!("{}", export.body);
                    Ok(())
                }
            };
            if let Err(e) = written {
                return fail("export", &e, 1);
            }
            if let Some(headers) = export.headers {
                eprint!("{headers}");
            }
            ExitCode::SUCCESS
        }
    }
}

fn fail(command: &str, message: &str, code: u8) -> ExitCode {
    eprintln!("robots-proxy keys {command}: {message}");
    ExitCode::from(code)
}
