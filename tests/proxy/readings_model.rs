//! A property test with model origins: random paths built from the pieces that make servers
//! read a path differently (`..`, `.`, `%2e`, `%2f`, `%5c`, `;x`, `%3B`, `%25`, `//`, names in
//! either case, non-ASCII octets, a query), resolved by an nginx-like, an IIS-like (case
//! insensitive) and a servlet-like model written here from those servers' documented behaviour
//! (not from the proxy's code). Whenever a model resolves the path to a disallowed one, the
//! proxy refuses; an allowed request reaches the origin byte for byte as sent. The proxy runs
//! with `policy.fold_case = "all"`, as for an IIS origin.
//!
//! The seed is printed with a failure and can be given again in `READINGS_MODEL_SEED`; failing
//! cases are also kept in `tests/proptest-regressions/readings_model.txt` and tried first.

use proptest::prelude::*;
use proptest::test_runner::{
    Config as ProptestConfig, FileFailurePersistence, RngAlgorithm, TestRng, TestRunner,
};

use super::support::{raw_get, Origin, TestProxy};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\nAllow: /private/open\n";

/// What the rules say of a path an origin resolved (decoded octets): disallowed under
/// `/private` unless under the longer `/private/open`.
fn disallowed(resolved: &[u8]) -> bool {
    resolved.starts_with(b"/private") && !resolved.starts_with(b"/private/open")
}

fn decode_all(path: &[u8]) -> Vec<u8> {
    percent_encoding::percent_decode(path).collect()
}

/// Resolves `.` and `..` segments with a stack and drops empty segments.
fn resolve(path: &[u8]) -> Vec<u8> {
    let mut stack: Vec<&[u8]> = Vec::new();
    let parts: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
    let last = parts.len() - 1;
    let mut trailing = false;
    for (i, part) in parts.into_iter().enumerate() {
        match part {
            b"" | b"." => trailing = i == last,
            b".." => {
                stack.pop();
                trailing = i == last;
            }
            name => {
                stack.push(name);
                trailing = false;
            }
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

/// nginx (and Apache): decodes every escape, then merges slashes and resolves dot-segments.
fn nginx(path: &str) -> Vec<u8> {
    resolve(&decode_all(path.as_bytes()))
}

/// IIS: like nginx, with `\` a path separator, and names compared without regard to case.
fn iis(path: &str) -> Vec<u8> {
    let decoded: Vec<u8> = decode_all(path.as_bytes())
        .into_iter()
        .map(|b| if b == b'\\' { b'/' } else { b.to_ascii_lowercase() })
        .collect();
    resolve(&decoded)
}

/// Tomcat, Jetty, Spring: strip `;parameters` from each segment of the raw path, then decode and
/// normalise.
fn servlet(path: &str) -> Vec<u8> {
    let stripped: Vec<&str> =
        path.split('/').map(|segment| segment.split(';').next().unwrap_or("")).collect();
    resolve(&decode_all(stripped.join("/").as_bytes()))
}

/// Google's reading: the path as sent, with only escapes of unreserved characters decoded.
fn as_sent(path: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let bytes = path.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(v) = u8::from_str_radix(&path[i + 1..i + 3], 16) {
                if v.is_ascii_alphanumeric() || b"-._~".contains(&v) {
                    out.push(v);
                    i += 3;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

fn piece() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "/",
        "/",
        "/",
        "..",
        ".",
        "%2e",
        "%2E",
        "%2e%2e",
        "%2f",
        "%2F",
        "%5c",
        "%5C",
        "\\",
        ";x",
        ";",
        "private",
        "private",
        "public",
        "open",
        "secret",
        "p%72ivate",
        "x",
        "%252e",
        "%252f",
        "%3B",
        "%3bx",
        "PRIVATE",
        "Private",
        "%c3%a9",
        "%FF",
    ])
}

/// The seed of this run: `READINGS_MODEL_SEED` (decimal) when given, else the clock's.
fn seed() -> u64 {
    std::env::var("READINGS_MODEL_SEED").ok().and_then(|s| s.trim().parse().ok()).unwrap_or_else(
        || {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.map_or(9309, |d| d.as_nanos() as u64)
        },
    )
}

#[test]
fn whenever_a_model_origin_reads_a_disallowed_path_the_proxy_refuses() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (origin, proxy) = runtime.block_on(async {
        let proxy = TestProxy::start_with(|c| {
            c.policy.fold_case = robots_proxy::policy::FoldCase::All;
        });
        (Origin::start(ROBOTS).await, proxy.await)
    });
    let (base, host) = (origin.base(), origin.addr.to_string());
    let seed = seed();
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = ProptestConfig {
        cases: 400,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/proptest-regressions/readings_model.txt",
        ))),
        ..ProptestConfig::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    // Paths of 1 to 8 pieces, and sometimes a query (origins do not resolve it).
    let query = prop::sample::select(vec!["", "", "", "?q=1", "?a=%2e%2e/private"]);
    let paths = (prop::collection::vec(piece(), 1..9), query)
        .prop_map(|(pieces, query)| format!("/{}{query}", pieces.concat()));
    let (refused, forwarded) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
    runner
        .run(&paths, |path| {
            // Origins resolve the path, never the query.
            let only_path = path.split('?').next().unwrap_or_default();
            let models = [
                ("nginx", nginx(only_path)),
                ("iis", iis(only_path)),
                ("servlet", servlet(only_path)),
                ("as sent", as_sent(only_path)),
            ];
            let refusing: Vec<_> = models.iter().filter(|(_, p)| disallowed(p)).collect();
            let before = origin.hits(&path);
            let resp = runtime.block_on(raw_get(proxy.addr, &format!("{base}{path}"), &host, ""));
            if refusing.is_empty() {
                // No server reads it as a disallowed path: it goes through, unchanged.
                prop_assert_eq!(resp.status, 200, "{} was refused: {}", path, resp.body);
                prop_assert_eq!(
                    origin.hits(&path),
                    before + 1,
                    "{} was not forwarded as sent",
                    path
                );
                forwarded.set(forwarded.get() + 1);
            } else {
                prop_assert_eq!(
                    resp.status,
                    403,
                    "{} reached the origin although {:?} read it as disallowed",
                    path,
                    refusing
                );
                prop_assert_eq!(origin.hits(&path), before);
                refused.set(refused.get() + 1);
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}\n(seed {seed}: READINGS_MODEL_SEED={seed} reruns it)"));
    let seen_path = |s: &super::support::Seen| s.target.split('?').next().unwrap_or("").to_owned();
    assert_eq!(origin.seen().iter().filter(|s| disallowed(&nginx(&seen_path(s)))).count(), 0);
    // Both outcomes were exercised.
    let (refused, forwarded) = (refused.get(), forwarded.get());
    assert!(refused > 20 && forwarded > 20, "refused {refused}, forwarded {forwarded}");
}
