//! Helpers shared by the engine test modules.

use std::path::PathBuf;

use robots_proxy::robots::{ProductToken, Reason, RobotsTxt, RuleKind};

/// A product token that the test knows to be valid.
pub fn token(s: &str) -> ProductToken {
    ProductToken::new(s).unwrap_or_else(|e| panic!("test token {s:?}: {e}"))
}

/// Whether `agent` (a product token) may crawl `path` under `body`.
pub fn allowed(body: impl AsRef<[u8]>, agent: &str, path: &str) -> bool {
    RobotsTxt::parse(body.as_ref()).decide(Some(&token(agent)), path).is_allowed()
}

/// The deciding rule for `agent` and `path`, as `(kind, pattern, line)`, if a rule decided.
pub fn deciding_rule(
    robots: &RobotsTxt,
    agent: &str,
    path: &str,
) -> Option<(RuleKind, String, u32)> {
    match robots.decide(Some(&token(agent)), path).reason() {
        Reason::Rule(r) => Some((r.kind(), r.pattern().to_owned(), r.line())),
        _ => None,
    }
}

/// Every rule that applies to `agent` (its merged groups), as `(kind, pattern, line)` in file
/// order.
pub fn rules_for(robots: &RobotsTxt, agent: Option<&str>) -> Vec<(RuleKind, String, u32)> {
    let token = agent.map(token);
    robots
        .groups_for(token.as_ref())
        .into_iter()
        .flat_map(|g| robots.rules_of(g))
        .map(|r| (r.kind(), r.pattern().to_owned(), r.line()))
        .collect()
}

/// `rules_for` without line numbers, in a compact `allow:/x` / `disallow:/y` form.
pub fn rule_texts(robots: &RobotsTxt, agent: Option<&str>) -> Vec<String> {
    rules_for(robots, agent)
        .into_iter()
        .map(|(k, p, _)| match k {
            RuleKind::Allow => format!("allow:{p}"),
            _ => format!("disallow:{p}"),
        })
        .collect()
}

/// The directory of the real-world robots.txt fixtures.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/robots")
}

/// Every fixture body, by file name, in name order.
pub fn fixtures() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(fixtures_dir())
        .expect("tests/fixtures/robots exists")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .map(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy().into_owned();
            let body = std::fs::read(&p).expect("fixture readable");
            (name, body)
        })
        .collect();
    out.sort();
    out
}

/// One fixture body by file name.
pub fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixtures_dir().join(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

/// A small deterministic pseudo-random generator (xorshift64*), so that generated cases are the
/// same on every run without a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// True with probability `num / den`.
    pub fn chance(&mut self, num: usize, den: usize) -> bool {
        self.below(den) < num
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// An independent reference matcher for one pattern and one path, both in canonical form: `*`
/// is any sequence, a final `$` anchors, everything else is literal. Dynamic programming over
/// (pattern position, path position): slow and obviously right, for small inputs.
pub fn glob_matches(pattern: &[u8], path: &[u8]) -> bool {
    let (body, anchored) = match pattern.split_last() {
        Some((b'$', rest)) => (rest, true),
        _ => (pattern, false),
    };
    // reach[j]: the first i pattern bytes can consume exactly j path bytes.
    let mut reach = vec![false; path.len() + 1];
    reach[0] = true;
    for &p in body {
        let mut next = vec![false; path.len() + 1];
        if p == b'*' {
            let mut any = false;
            for j in 0..=path.len() {
                any |= reach[j];
                next[j] = any;
            }
        } else {
            for j in 0..path.len() {
                if reach[j] && path[j] == p {
                    next[j + 1] = true;
                }
            }
        }
        reach = next;
    }
    if anchored {
        reach[path.len()]
    } else {
        reach.iter().any(|&r| r)
    }
}
