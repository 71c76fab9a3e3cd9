//! What a configuration needs from the machine before the proxy can start on it: files that
//! must exist and parse, directories that must be creatable. One function, [`check`], run by
//! `config check`, by `serve` before it builds anything, and by a reload (SIGHUP), so that
//! `config check` fails exactly where `serve` would (issue 27 §10).
//!
//! Nothing is created or changed: files are read, and a directory's creatability is probed by
//! making and removing an empty directory in its nearest existing ancestor.

use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};

use crate::config::{Config, ConfigError, Problem};
use crate::tls::ca::{self, CaFiles, CertificateAuthority};
use crate::tls::HttpsMode;

/// The interception CA's files and whether the operator named them (`https.ca_cert`,
/// `https.ca_key`) rather than leaving the default `ca/` under `state_dir`.
pub fn ca_files(config: &Config) -> (CaFiles, bool) {
    let dir = config.state_dir.join("ca");
    let configured = config.https.ca_cert.is_some() || config.https.ca_key.is_some();
    let files = CaFiles {
        cert: config.https.ca_cert.clone().unwrap_or_else(|| dir.join(ca::CA_CERT_FILE)),
        key: config.https.ca_key.clone().unwrap_or_else(|| dir.join(ca::CA_KEY_FILE)),
    };
    (files, configured)
}

/// The files of the TLS listener as `config` names them; `None` without `proxy.tls_listen`
/// (validation has checked that the certificate and key are set with it).
pub fn listener_files(config: &Config) -> Option<crate::tls::listener::ListenerFiles<'_>> {
    config.proxy.tls_listen?;
    Some(crate::tls::listener::ListenerFiles {
        certificate: config.proxy.tls_certificate.as_deref()?,
        key: config.proxy.tls_key.as_deref()?,
        client_ca: config.access.client_ca.as_deref(),
        require_client_certificate: config.access.client_certificate
            == crate::access::ClientCertificate::Required,
    })
}

/// Every problem that would stop `serve` with `config` on this machine, each naming its key.
pub fn check(config: &Config) -> Result<(), ConfigError> {
    let mut problems = Vec::new();
    let mut bad = |key: &str, message: String| {
        problems.push(Problem { key: Some(key.to_owned()), origin: None, message });
    };
    if let Err(e) = creatable_dir(&config.state_dir) {
        bad("state_dir", e);
    }
    if let Err(e) = appendable_file(&config.audit_path()) {
        bad("audit.path", e);
    }
    if let Some(path) = &config.audit.checkpoint_key {
        if let Err(e) = crate::audit::checkpoint::load_key(path) {
            bad("audit.checkpoint_key", format!("cannot load the checkpoint key {e}"));
        }
    }
    if let Some(path) = &config.access.users_file {
        if let Err(e) = crate::access::Authenticator::load(path) {
            bad("access.users_file", e.to_string());
        }
    }
    if let Err(e) = crate::tls::client_config(config.https.upstream_ca_file.as_deref()) {
        bad("https.upstream_ca_file", e.to_string());
    }
    if let Some(files) = listener_files(config) {
        if let Err(e) = crate::tls::listener::listener_config(files) {
            bad("proxy.tls_listen", e.to_string());
        }
    }
    if let Err(e) = crate::signing::Signer::new(&config.signing, &config.state_dir) {
        bad("signing.keys", e.to_string());
    }
    for (key, path) in [
        ("fleet.key_file", &config.fleet.key_file),
        ("fleet.previous_key_file", &config.fleet.previous_key_file),
    ] {
        if let Some(Err(e)) = path.as_deref().map(crate::fleet::seal::FleetKey::load) {
            bad(key, format!("cannot load the fleet key: {e}"));
        }
    }
    if config.https.mode == HttpsMode::Intercept {
        if let Err((key, e)) = check_ca(config) {
            bad(key, e);
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ConfigError::Invalid(problems))
    }
}

/// The interception CA: files the operator named must exist and load; the default ones must
/// load when present, and may be missing together only (then `serve` creates them).
fn check_ca(config: &Config) -> Result<(), (&'static str, String)> {
    let (files, configured) = ca_files(config);
    let missing: Vec<&PathBuf> =
        [&files.cert, &files.key].into_iter().filter(|p| !p.exists()).collect();
    if configured && !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(|p| p.display().to_string()).collect();
        return Err((
            if missing[0] == &files.cert { "https.ca_cert" } else { "https.ca_key" },
            format!(
                "{} does not exist; a CA named in the configuration is never generated (run \
                 `robots-proxy ca init --dir DIR` and name its files, or unset https.ca_cert and \
                 https.ca_key to use ca/ under state_dir)",
                list.join(" and ")
            ),
        ));
    }
    if missing.len() == 2 {
        // The default location, empty: `serve` creates the CA under state_dir (checked above).
        return Ok(());
    }
    if missing == [&files.cert] {
        // The default location with a key only, left by a creation that stopped part way:
        // `serve` makes its certificate, if the key can be read.
        return crate::tls::ca::check_leftover_key(&files.key)
            .map_err(|e| ("https.ca_key", e.to_string()));
    }
    CertificateAuthority::load(&files).map(drop).map_err(|e| {
        let key = match e {
            crate::tls::ca::CaError::KeyMode { .. } => "https.ca_key",
            _ => "https.ca_cert",
        };
        (key, e.to_string())
    })
}

/// Whether `dir` exists as a directory or can be created: its nearest existing ancestor must be
/// a directory in which a directory can be made.
pub fn creatable_dir(dir: &Path) -> Result<(), String> {
    let mut existing = dir;
    loop {
        match std::fs::metadata(existing) {
            Ok(meta) if meta.is_dir() => break,
            Ok(_) => {
                return Err(format!(
                    "cannot create {}: {} is not a directory",
                    dir.display(),
                    existing.display()
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => match existing.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => existing = parent,
                _ => {
                    existing = Path::new(".");
                    break;
                }
            },
            Err(e) => {
                return Err(format!("cannot create {}: {}: {e}", dir.display(), existing.display()))
            }
        }
    }
    if existing == dir {
        // The directory exists; whether files can be made in it is the audit log's check.
        return Ok(());
    }
    writable_dir(existing).map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

/// Whether `path` can be opened for appending: an existing file is opened (not created, not
/// changed); a missing one needs a creatable directory whose nearest existing ancestor accepts
/// new entries.
pub fn appendable_file(path: &Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(format!("{} is a directory", path.display())),
        Ok(_) => OpenOptions::new()
            .append(true)
            .open(path)
            .map(drop)
            .map_err(|e| format!("cannot open {} for appending: {e}", path.display())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            match path.parent().filter(|p| !p.as_os_str().is_empty()) {
                None => Ok(()),
                Some(dir) => match std::fs::metadata(dir) {
                    Ok(meta) if meta.is_dir() => writable_dir(dir),
                    Ok(_) => Err(format!(
                        "cannot create {}: {} is not a directory",
                        path.display(),
                        dir.display()
                    )),
                    Err(_) => creatable_dir(dir),
                },
            }
        }
        Err(e) => Err(format!("cannot open {}: {e}", path.display())),
    }
}

/// Whether entries can be made in the existing directory `dir` (probed, then removed).
fn writable_dir(dir: &Path) -> Result<(), String> {
    let probe = dir.join(format!(".robots-proxy-check-{}", std::process::id()));
    match std::fs::create_dir(&probe) {
        Ok(()) => {
            let _ = std::fs::remove_dir(&probe);
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("cannot make entries in {}: {e}", dir.display())),
    }
}
