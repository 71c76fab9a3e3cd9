//! The proxy's decision per request: the one [`decide`] (every reading, the exceptions, the
//! token's provenance), against what the proxy did before it (issue 38 item 3) on the same
//! inputs: a boolean "fast path" over the readings for allowed requests, and a second, explained
//! path for refusals. Run with `cargo bench --bench decision`.
//!
//! The inputs are the test fixtures' robots.txt files (`tests/fixtures/robots`), each asked for
//! a few tokens and a few paths: ordinary ones (one reading), and ones with `%`, `;`, `//` or
//! `..` (several readings).

use std::hint::black_box;
use std::path::PathBuf;
use std::time::SystemTime;

use criterion::{criterion_group, criterion_main, Criterion};
use robots_proxy::policy::{
    decide, decide_reading, Claim, Question, Readings, Rules, TokenOrigin, View,
};
use robots_proxy::robots::{ProductToken, RobotsTxt};

const TOKENS: &[Option<&str>] = &[None, Some("Googlebot"), Some("GPTBot"), Some("ExampleBot")];

const PATHS: &[&str] = &[
    "/",
    "/index.html",
    "/search?q=shoes&page=2",
    "/private/x",
    "/admin/",
    "/a/b/c/d.html",
    "/public/..%2fprivate/x",
    "/wiki/Special%3ARandom",
    "/a;jsessionid=1/b",
    "/img//index.html",
];

struct Case {
    robots: usize,
    token: Option<ProductToken>,
    readings: Readings,
}

fn corpus() -> Vec<RobotsTxt> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/robots");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/fixtures/robots")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files.iter().filter_map(|p| std::fs::read(p).ok()).map(|b| RobotsTxt::parse(&b)).collect()
}

fn cases(n: usize) -> Vec<Case> {
    let mut out = Vec::new();
    for robots in 0..n {
        for token in TOKENS {
            for path in PATHS {
                out.push(Case {
                    robots,
                    token: token.and_then(|t| ProductToken::new(t).ok()),
                    readings: Readings::of(path),
                });
            }
        }
    }
    out
}

/// The proxy's boolean path before issue 38: whether every reading is allowed.
fn old_fast_path(robots: &RobotsTxt, c: &Case) -> bool {
    c.readings
        .to_decide(robots.has_decoded_patterns(), false)
        .all(|(reading, path)| decide_reading(robots, c.token.as_ref(), reading, path).is_allowed())
}

fn benches(c: &mut Criterion) {
    let files = corpus();
    let cases = cases(files.len());
    let now = SystemTime::now();
    let denied = cases.iter().filter(|c| !old_fast_path(&files[c.robots], c)).count();
    println!("decision bench: {} cases, {denied} refused", cases.len());
    let mut g = c.benchmark_group("decision");
    g.measurement_time(std::time::Duration::from_secs(5));
    g.bench_function("before_fast_path_all_cases", |b| {
        b.iter(|| {
            for case in &cases {
                black_box(old_fast_path(&files[case.robots], case));
            }
        })
    });
    g.bench_function("decide_all_cases", |b| {
        b.iter(|| {
            for case in &cases {
                let view = View::offline(Rules::Parsed(&files[case.robots]), false);
                let claim = Claim {
                    token: case.token.as_ref(),
                    origin: TokenOrigin::UserAgent,
                    user: None,
                };
                let q = Question { claim, readings: &case.readings, now };
                black_box(decide(view, q).is_allowed());
            }
        })
    });
    g.bench_function("decide_and_explain_refused", |b| {
        b.iter(|| {
            for case in &cases {
                let view = View::offline(Rules::Parsed(&files[case.robots]), false);
                let claim = Claim {
                    token: case.token.as_ref(),
                    origin: TokenOrigin::UserAgent,
                    user: None,
                };
                let q = Question { claim, readings: &case.readings, now };
                let d = decide(view, q);
                if !d.is_allowed() {
                    black_box(d.explain());
                }
            }
        })
    });
    g.finish();
}

criterion_group!(decision, benches);
criterion_main!(decision);
