//! Signing key files with the real binary (issue 24 §18): a key file others may read, or a
//! keys directory others may write, is refused by `keys new`, `config check` and `serve`,
//! naming the path, its mode and the `chmod` that fixes it; a key write that fails leaves
//! nothing that blocks the key's name.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::support::run;

const SERVE: &[&str] = &["serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"];

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `config check` and `serve` with `config` both exit 1 and say every one of `said`.
fn both_refuse(config: &Path, state: &Path, said: &[&str]) {
    let env = [("ROBOTS_PROXY_STATE_DIR", state.to_str().unwrap())];
    let config = config.to_str().unwrap();
    for args in
        [&["config", "check", "--config", config][..], &[SERVE, &["--config", config]].concat()]
    {
        let out = run(args, &env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?} accepted it:\n{stderr}");
        for s in said {
            assert!(stderr.contains(s), "{args:?}: no {s:?} in:\n{stderr}");
        }
    }
}

#[test]
fn a_key_others_can_read_or_a_keys_dir_others_can_write_is_refused() {
    let state = tempfile::tempdir().unwrap();
    let env = [("ROBOTS_PROXY_STATE_DIR", state.path().to_str().unwrap())];
    let made = run(&["keys", "new", "k1"], &env);
    assert!(made.status.success(), "{made:?}");
    let keys = state.path().join("keys");
    let key = keys.join("k1.pem");
    let config = state.path().join("c.toml");
    std::fs::write(
        &config,
        "[signing]\nkeys = [{ name = \"k1\" }]\n\
         identities = [{ token = \"ExampleBot\", keys = [\"k1\"], agent = \"https://bots.example.com\" }]\n",
    )
    .unwrap();
    let check = || run(&["config", "check", "--config", config.to_str().unwrap()], &env);
    assert!(check().status.success(), "{:?}", check());

    // A directory others may write: they could replace k1.pem with a key they know.
    let dir_text = keys.to_str().unwrap();
    for mode in [0o777, 0o770, 0o702] {
        chmod(&keys, mode);
        let shown = format!("{mode:04o}");
        both_refuse(&config, state.path(), &[dir_text, &shown, "chmod go-w"]);
        let another = run(&["keys", "new", "k2"], &env);
        let stderr = String::from_utf8_lossy(&another.stderr);
        assert_eq!(another.status.code(), Some(1), "keys new in a {mode:o} directory: {stderr}");
        assert!(stderr.contains(dir_text) && stderr.contains("chmod go-w"), "{stderr}");
        assert!(!keys.join("k2.pem").exists());
    }
    chmod(&keys, 0o750);
    assert!(check().status.success(), "a directory others may read but not write: {:?}", check());

    // A key file others may read or write.
    let key_text = key.to_str().unwrap();
    for mode in [0o644, 0o640, 0o666, 0o604] {
        chmod(&key, mode);
        let shown = format!("{mode:04o}");
        both_refuse(&config, state.path(), &[key_text, &shown, "chmod 600"]);
    }
    chmod(&key, 0o400);
    assert!(check().status.success(), "{:?}", check());
}

#[test]
fn a_key_write_that_fails_leaves_nothing_that_blocks_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::create_dir(&keys).unwrap();
    chmod(&keys, 0o700);
    // No byte may be written (RLIMIT_FSIZE 0): the write fails as on a full disk, and the
    // process is killed by SIGXFSZ in the middle of it.
    let failed = std::process::Command::new("sh")
        .args(["-c", "ulimit -f 0; exec \"$0\" keys new k1 --dir \"$1\""])
        .arg(env!("CARGO_BIN_EXE_robots-proxy"))
        .arg(&keys)
        .env_clear()
        .output()
        .unwrap();
    assert!(!failed.status.success(), "{failed:?}");
    assert!(!keys.join("k1.pem").exists(), "a partial k1.pem was left behind");

    // The name is free: the key is made, and it loads.
    let made = run(&["keys", "new", "k1", "--dir", keys.to_str().unwrap()], &[]);
    assert!(made.status.success(), "{made:?}");
    let state = dir.path().to_str().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(&config, "[signing]\nkeys = [{ name = \"k1\" }]\n").unwrap();
    let env = [("ROBOTS_PROXY_STATE_DIR", state)];
    let listed = run(&["keys", "list", "--config", config.to_str().unwrap()], &env);
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success() && !stdout.contains("UNUSABLE"), "{listed:?}");

    // A key file cut short some other way is named, not silently skipped.
    let pem = std::fs::read_to_string(keys.join("k1.pem")).unwrap();
    std::fs::write(keys.join("k1.pem"), &pem[..pem.len() / 2]).unwrap();
    let key_text = keys.join("k1.pem");
    both_refuse(&config, dir.path(), &[key_text.to_str().unwrap(), "not a PEM PRIVATE KEY"]);
}
