//! `config check` fails where `serve` would (issue 27 §10, §12): files that must exist and parse,
//! directories that must be creatable. Each case runs both commands of the real binary.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use super::support::run;

const SERVE: &[&str] = &["serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"];

/// `config check` and `serve` with the file `toml` both exit 1, and `config check` names `key`
/// and says `why`.
fn both_refuse(dir: &Path, toml: &str, key: &str, why: &str) {
    let file = dir.join("c.toml");
    std::fs::write(&file, toml).unwrap();
    let file = file.to_str().unwrap();
    let check = run(&["config", "check", "--config", file], &[]);
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert_eq!(check.status.code(), Some(1), "config check accepted:\n{toml}\n{stderr}");
    assert!(stderr.contains(key) && stderr.contains(why), "{key} / {why}:\n{stderr}");
    let serve = run(&[SERVE, &["--config", file]].concat(), &[]);
    let stderr = String::from_utf8_lossy(&serve.stderr);
    assert_eq!(serve.status.code(), Some(1), "serve started with:\n{toml}\n{stderr}");
    assert!(stderr.contains(key) && stderr.contains(why), "serve: {key} / {why}:\n{stderr}");
}

#[test]
fn config_check_refuses_what_serve_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let state = d.join("state");
    let base = format!("state_dir = {:?}\n", state.to_str().unwrap());
    std::fs::write(d.join("plain-file"), "x").unwrap();

    both_refuse(
        d,
        &format!(
            "{base}[https]\nmode = \"reject\"\n[access]\nusers_file = \"/nonexistent/users\"\n"
        ),
        "access.users_file",
        "No such file",
    );
    let under_file = d.join("plain-file").join("state");
    both_refuse(
        d,
        &format!("state_dir = {:?}\n[https]\nmode = \"reject\"\n", under_file.to_str().unwrap()),
        "state_dir",
        "plain-file",
    );
    both_refuse(
        d,
        &format!("{base}[https]\nmode = \"reject\"\n[audit]\npath = \"/\"\n"),
        "audit.path",
        "is a directory",
    );
    both_refuse(
        d,
        &format!("{base}[https]\nmode = \"reject\"\n[[signing.keys]]\nname = \"missing\"\n"),
        "signing.keys",
        "missing",
    );
    both_refuse(
        d,
        &format!(
            "{base}[https]\nmode = \"reject\"\n[proxy]\ntls_listen = \"127.0.0.1:0\"\n\
             tls_certificate = \"/nonexistent/proxy.pem\"\ntls_key = \"/nonexistent/proxy-key.pem\"\n"
        ),
        "proxy.tls_listen",
        "/nonexistent/proxy.pem",
    );
    assert!(!state.join("audit.jsonl").exists(), "config check creates nothing");
    assert!(!state.exists(), "config check creates nothing");
}

/// A CA the operator named is never generated (issue 27 §12): both commands refuse naming the
/// missing files, and nothing is written. Both keys on one path is said so.
#[test]
fn a_configured_ca_whose_files_are_missing_is_refused_not_generated() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (cert, key) = (d.join("newca/c.pem"), d.join("newca/k.pem"));
    let toml = format!(
        "state_dir = {:?}\n[https]\nmode = \"intercept\"\nca_cert = {:?}\nca_key = {:?}\n",
        d.join("state").to_str().unwrap(),
        cert.to_str().unwrap(),
        key.to_str().unwrap()
    );
    both_refuse(d, &toml, "https.ca_cert", &format!("{} and {}", cert.display(), key.display()));
    assert!(!cert.exists() && !key.exists(), "no CA was generated");

    let same = d.join("same.pem");
    let toml = format!(
        "state_dir = {:?}\n[https]\nca_cert = {:?}\nca_key = {:?}\n",
        d.join("state").to_str().unwrap(),
        same.to_str().unwrap(),
        same.to_str().unwrap()
    );
    both_refuse(d, &toml, "https.ca_key", "names the same file as https.ca_cert");
    assert!(!same.exists());
}

/// `ca init` writes where `serve` looks (issue 27 §11): `ca/` under the state directory of the
/// configuration (`--config`, `ROBOTS_PROXY_CONFIG`) or of `ROBOTS_PROXY_STATE_DIR`, or the files
/// `https.ca_cert`/`https.ca_key` name; `serve` then loads that CA instead of making another.
#[test]
fn ca_init_writes_where_serve_looks() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cwd = d.join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let in_cwd = |args: &[&str], env: &[(&str, &str)]| {
        Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
            .args(args)
            .current_dir(&cwd)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let ok = |out: &Output| {
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    };

    // ROBOTS_PROXY_STATE_DIR.
    let env_state = d.join("env-state");
    ok(&in_cwd(&["ca", "init"], &[("ROBOTS_PROXY_STATE_DIR", env_state.to_str().unwrap())]));
    assert!(env_state.join("ca/ca.pem").exists() && env_state.join("ca/ca-key.pem").exists());

    // ROBOTS_PROXY_CONFIG, and --config: the file's state_dir.
    for (n, by_env) in [(1, true), (2, false)] {
        let state = d.join(format!("cfg-state-{n}"));
        let file = d.join(format!("c{n}.toml"));
        std::fs::write(&file, format!("state_dir = {:?}\n", state.to_str().unwrap())).unwrap();
        let file = file.to_str().unwrap();
        let out = if by_env {
            in_cwd(&["ca", "init"], &[("ROBOTS_PROXY_CONFIG", file)])
        } else {
            in_cwd(&["ca", "init", "--config", file], &[])
        };
        ok(&out);
        assert!(state.join("ca/ca.pem").exists(), "{n}");
    }

    // https.ca_cert and https.ca_key name the files.
    let (cert, key) = (d.join("named/c.pem"), d.join("named/k.pem"));
    let named = d.join("named.toml");
    std::fs::write(
        &named,
        format!(
            "state_dir = {:?}\n[https]\nca_cert = {:?}\nca_key = {:?}\n",
            d.join("named-state").to_str().unwrap(),
            cert.to_str().unwrap(),
            key.to_str().unwrap()
        ),
    )
    .unwrap();
    ok(&in_cwd(&["ca", "init", "--config", named.to_str().unwrap()], &[]));
    assert!(cert.exists() && key.exists());
    assert!(!cwd.join("state").exists(), "nothing is written under the working directory");

    // serve loads the CA ca init made, and says which.
    let env_file = d.join("env.toml");
    std::fs::write(&env_file, format!("state_dir = {:?}\n", env_state.to_str().unwrap())).unwrap();
    let proxy = super::support::ProxyProcess::start(&["--config", env_file.to_str().unwrap()], &[]);
    let log = proxy.stderr();
    assert!(log.contains(&env_state.join("ca/ca.pem").display().to_string()), "{log}");
    assert!(!log.contains("created a new CA"), "{log}");

    // An existing CA is never overwritten.
    let again = in_cwd(&["ca", "init"], &[("ROBOTS_PROXY_STATE_DIR", env_state.to_str().unwrap())]);
    assert_eq!(again.status.code(), Some(1));
}

/// A CA creation that stopped after the key was in place (issue 26 §19) does not block later
/// starts: `config check` accepts the key and `serve` makes its certificate, for the same key.
#[test]
fn a_ca_key_left_without_its_certificate_does_not_block_serve() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let state_env = [("ROBOTS_PROXY_STATE_DIR", state.to_str().unwrap())];
    let made = super::support::run(&["ca", "init"], &state_env);
    assert_eq!(made.status.code(), Some(0), "{}", String::from_utf8_lossy(&made.stderr));
    let (cert, key) = (state.join("ca/ca.pem"), state.join("ca/ca-key.pem"));
    std::fs::remove_file(&cert).unwrap();
    let key_pem = std::fs::read(&key).unwrap();
    let check = super::support::run(&["config", "check"], &state_env);
    assert_eq!(check.status.code(), Some(0), "{}", String::from_utf8_lossy(&check.stderr));
    let proxy = super::support::ProxyProcess::start(&[], &state_env);
    let log = proxy.stderr();
    assert!(log.contains("making its certificate"), "{log}");
    assert!(cert.exists(), "{log}");
    assert_eq!(std::fs::read(&key).unwrap(), key_pem, "the same key");
}
