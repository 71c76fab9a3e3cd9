//! Invariants of the fuzz target `readings` (`fuzz/fuzz_targets/readings.rs` calls [`check`], and
//! `tests/engine/fuzz/mod.rs` runs it on a corpus as an ordinary test): the readings of a request-
//! target's path (`robots_proxy::policy::Readings`), what the proxy forwards and decides on.
//!
//! For any input it must: never panic; forward the input exactly, less a fragment, with `/`
//! before an empty path; read what it forwards the same way again (what was decided is what
//! is sent); write every other reading as an ASCII path that starts with `/` and holds no
//! dot-segment and no `//`; and agree with a model origin written here: the `decoded` reading,
//! decoded once, is what nginx resolves the path to. Under `Disallow: /p`, a path that the
//! model resolves under `/p` is refused.

use robots_proxy::policy::{Reading, Readings};
use robots_proxy::robots::RobotsTxt;

fn decode(path: &[u8]) -> Vec<u8> {
    percent_encoding::percent_decode(path).collect()
}

/// nginx: decode every escape once, then resolve `.` and `..` and merge slashes.
fn nginx(path: &[u8]) -> Vec<u8> {
    let decoded = decode(path);
    let mut stack: Vec<&[u8]> = Vec::new();
    let mut trailing = false;
    for seg in decoded.split(|&b| b == b'/') {
        trailing = matches!(seg, b"" | b"." | b"..");
        match seg {
            b"" | b"." => {}
            b".." => {
                stack.pop();
            }
            name => stack.push(name),
        }
    }
    let mut out = Vec::new();
    for s in &stack {
        out.push(b'/');
        out.extend_from_slice(s);
    }
    if trailing || out.is_empty() {
        out.push(b'/');
    }
    out
}

/// Panics when `data` breaks one of the invariants above.
pub fn check(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let readings = Readings::of(&text);
    let sent = readings.as_sent();
    let without_fragment = text.split('#').next().unwrap_or("");
    assert!(sent == without_fragment || sent == format!("/{without_fragment}"), "{sent:?}");
    assert!(sent.starts_with('/'));
    assert_eq!(Readings::of(sent), readings, "what is sent reads differently");

    let path_of = |s: &str| s.split('?').next().unwrap_or("").to_owned();
    for (reading, read) in readings.iter().skip(1) {
        assert_ne!(read, sent);
        let path = path_of(read);
        assert!(path.starts_with('/') && path.is_ascii(), "{reading}: {read:?}");
        assert!(!path.contains("//"), "{reading}: {read:?}");
        assert!(path.split('/').all(|s| s != "." && s != ".."), "{reading}: {read:?}");
        assert_eq!(read[path.len()..], sent[path_of(sent).len()..], "the query is kept");
    }

    // The decoded reading, decoded once more, is what nginx resolves the path to (with `%`,
    // `?` and `#` kept as the octets they decoded to).
    let model = nginx(path_of(sent).as_bytes());
    let decoded_reading = readings
        .iter()
        .find(|(r, _)| *r == Reading::Decoded)
        .map(|(_, p)| path_of(p))
        .unwrap_or_else(|| path_of(sent));
    assert_eq!(decode(decoded_reading.as_bytes()), model, "{sent:?}");

    // Whatever nginx resolves under /p is refused.
    let robots = RobotsTxt::parse(b"User-agent: *\nDisallow: /p\n");
    if model.starts_with(b"/p") {
        let refused = readings.iter().any(|(_, p)| !robots.decide(None, p).is_allowed());
        assert!(refused, "{sent:?} reaches {:?} under /p", String::from_utf8_lossy(&model));
    }
}
