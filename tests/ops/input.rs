//! Operator input the binary used to alter or misreport (issue 27 §14): non-UTF-8 environment
//! values, error causes said twice, an empty `ROBOTS_PROXY_CONFIG` or `ROBOTS_PROXY_LOG__LEVEL`,
//! and a robots.txt past the parsing limit in `check`.

use super::support::{run, run_with};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

#[test]
fn non_utf8_environment_values_are_refused_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let mut value = dir.path().as_os_str().as_bytes().to_vec();
    value.extend_from_slice(b"/state-\xff");
    let out = run_with(
        &["config", "check"],
        &[(os("ROBOTS_PROXY_STATE_DIR"), OsStr::from_bytes(&value))],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("ROBOTS_PROXY_STATE_DIR") && stderr.contains("not valid UTF-8"),
        "{stderr}"
    );

    let out =
        run_with(&["config", "check"], &[(OsStr::from_bytes(b"ROBOTS_PROXY_X\xff"), os("1"))]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not valid UTF-8"), "{stderr}");
}

#[test]
fn error_causes_are_said_once() {
    let out = run(&["config", "check", "--config", "/nonexistent/robots-proxy.toml"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.matches("No such file or directory").count(), 1, "{stderr}");
}

#[test]
fn an_empty_config_variable_means_no_file_and_an_empty_log_level_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let state = (os("ROBOTS_PROXY_STATE_DIR"), state.as_os_str());
    let out = run_with(&["config", "check"], &[(os("ROBOTS_PROXY_CONFIG"), os("")), state]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    let out = run_with(&["config", "check"], &[(os("ROBOTS_PROXY_LOG__LEVEL"), os("")), state]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("log.level (from environment variable ROBOTS_PROXY_LOG__LEVEL)"),
        "{stderr}"
    );
}

#[test]
fn check_says_when_a_robots_txt_passes_the_parsing_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.txt");
    let mut body = b"User-agent: *\n".to_vec();
    body.resize(600 * 1024, b'#');
    body.extend_from_slice(b"\nDisallow: /late\n");
    std::fs::write(&path, &body).unwrap();
    let out = run(&["check", "--robots", path.to_str().unwrap(), "http://a.test/late"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "the rule past the limit is ignored: {stderr}");
    assert!(stderr.contains("only its first 500 KiB are parsed"), "{stderr}");
}
