//! Tests that need a tool a developer's machine may lack (nginx, Chromium, redis-server, curl,
//! python3's requests): one rule for all of them.
//!
//! * Under CI (`CI` set, as `.ci/run` runs it), `.ci/run` installs every tool, so a missing one
//!   fails the test: a test that would skip there proves nothing.
//! * Elsewhere the test skips, and says so on the real standard error, which `cargo test`'s
//!   output capture does not hide (it captures only the `print!` family), and in
//!   `target/tmp/skipped-tests.txt`, one line a skip, so a run's skips can be counted.

use std::io::Write;

/// Whether this run is CI's: `CI` set to anything but empty, `0` or `false`.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// `tool` is missing: fails the test under CI, otherwise reports the skip. The caller returns.
pub fn missing(tool: &str, install: &str) {
    assert!(!under_ci(), "{tool} is not available, and .ci/run installs it ({install})");
    report(&format!("{tool} is not available ({install})"));
}

/// Reports a skip whatever the run (for a capability no package of this Debian has, such as
/// curl's `--proxy-http2` before curl 8.1).
pub fn report(why: &str) {
    let current = std::thread::current();
    let test = current.name().unwrap_or("(unnamed test)");
    let line = format!("SKIPPED {test}: {why}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped-tests.txt");
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(file) {
        let _ = f.write_all(line.as_bytes());
    }
}
