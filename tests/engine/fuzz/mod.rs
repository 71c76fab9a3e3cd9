//! The fuzz targets' invariants as ordinary tests (review-tests F13): each target of `fuzz/`
//! is one line that calls `check` in a file of this folder, and the tests below call the same
//! `check` on a corpus, so the invariants run in every `cargo test` (and so in `.ci/run`), not
//! only under `cargo +nightly fuzz`.
//!
//! The corpus of each target: the seeds written here (the inputs each invariant is about), the
//! robots.txt files of `tests/fixtures/robots/` and lines of them, a bounded number of
//! deterministic mutations of both (bytes flipped, inserted, cut, spliced: the same on every
//! run), and, when present, the files of `fuzz/corpus/<target>/` that a local `cargo fuzz run`
//! left (the first `LOCAL_CORPUS_MAX` in name order).

mod normalize_path;
mod parse_decide;
mod readings;
mod request_path;
mod user_agent;
mod user_agent_token;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use super::util::{fixtures, Rng};

/// Mutations made of each seed and fixture line.
const MUTATIONS: usize = 6;
/// Files read from a local `fuzz/corpus/<target>/`, at most.
const LOCAL_CORPUS_MAX: usize = 2_000;

/// Request-targets and paths: the readings' tricks (escapes, dot-segments, `//`, `\`, `;`,
/// case), queries and fragments, non-ASCII and invalid UTF-8, and hostile shapes.
const PATHS: &[&[u8]] = &[
    b"",
    b"/",
    b"*",
    b"/p",
    b"/private/x",
    b"/a/b?c=d",
    b"/a/b?c=d#frag",
    b"#only-a-fragment",
    b"noslash",
    b"/%70rivate",
    b"/%2570",
    b"/%2e%2e/p",
    b"/x/../p/y",
    b"/x/%2E%2E/p",
    b"/./p",
    b"//p",
    b"/a//b///c",
    b"/x\\..\\p",
    b"/p;jsessionid=1/x",
    b"/P/X",
    b"/p%3Bx",
    b"/p%3fq=1",
    b"/p%23x",
    b"/%",
    b"/%%",
    b"/%G1",
    b"/%e2%82%ac",
    b"/\xe2\x82\xac",
    b"/\xff\xfe",
    b"/p?",
    b"/p?#",
    b"/..",
    b"/../..",
    b"/.%2e/p",
    b"/p/.",
    b"/a/./b/../../p/",
    b"/robots.txt",
    b"/ p",
    b"/p\t\r\n",
    b"http://example.com/p",
    b"example.com:80",
    b"[::1]:8080",
    b"EXAMPLE.com.:443",
    b"xn--bcher-kva.example",
    b"b\xc3\xbccher.example:99999",
    b"user@host:1/p",
];

/// User-Agent values: real crawlers', browsers', and malformed ones.
const USER_AGENTS: &[&[u8]] = &[
    b"",
    b"ExampleBot/1.0",
    b"Mozilla/5.0 (compatible; ExampleBot/0.1; +https://example.com/bot)",
    b"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/120 Safari/537.36",
    b"python-requests/2.31.0",
    b"Scrapy/2.11 (+https://scrapy.org)",
    b"curl/8.5.0",
    b"Googlebot-Image/1.0",
    b"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; +http://www.google.com/bot.html) Chrome/W.X.Y.Z Safari/537.36",
    b"Mediapartners-Google",
    b"Facebot Twitterbot/1.0",
    b"Common Crawl CCBot/2.0",
    b"(compatible)",
    b"/1.0",
    b"  spaced   bot  /2",
    b"bot\x00bot",
    b"\xff\xfe\xfd",
    b"Bot/1.0 (\xe2\x82\xac)",
    b"a.b-c_d/1",
    b";;;;",
    b"((((((((((((((((((((",
];

/// robots.txt bodies: groups, rules with `*` and `$`, escapes, odd line ends and BOMs.
const ROBOTS: &[&[u8]] = &[
    b"",
    b"User-agent: *\nDisallow: /p\n",
    b"User-agent: *\nAllow: /p/ok\nDisallow: /p\n",
    b"User-agent: FooBot\nDisallow: /\n\nUser-agent: *\nAllow: /\n",
    b"User-agent: *\nDisallow: /*.php$\nDisallow: /a*b*c\nAllow: /a*b*c$\n",
    b"User-agent: *\r\nDisallow: /%70rivate\r\n",
    b"\xef\xbb\xbfUser-agent: *\nDisallow: /\xe2\x82\xac\n",
    b"User-agent: *\rDisallow: /cr\r",
    b"Disallow: /orphan\nUser-agent: *\n",
    b"User-agent: a\nUser-agent: b\nCrawl-delay: 3\nDisallow: /x\nSitemap: /s.xml\n",
    b"User-agent: *\nDisallow: /$\nAllow: /$\n",
    b"User-agent: *\nDisallow:\nAllow:\n",
    b"User-agent: *\nDisallow: *\n",
    b"User-agent: *\nDisallow: /a/**/b$$\n",
    b"user-agent:*\ndisallow:/P\nALLOW:/p\n",
    b"User-agent: *\nContent-Usage: train-ai=n\nContent-Usage: /p train-ai=y\n",
    b"<html><body>Not found</body></html>",
    b"User-agent: *\nDisallow: /\xff\xfe\n",
];

/// The inputs of a target: its seeds, every fixture whole and line by line, mutations of
/// both, and the local corpus if there is one.
fn corpus(target: &str, seeds: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut base: Vec<Vec<u8>> = seeds.iter().map(|s| s.to_vec()).collect();
    for (_, body) in fixtures() {
        for line in body.split(|&b| b == b'\n').take(64) {
            let value = line.splitn(2, |&b| b == b':').nth(1).unwrap_or(line);
            base.push(value.trim_ascii().to_vec());
        }
        base.push(body);
    }
    let mut rng = Rng::new(0x9309 ^ target.len() as u64);
    let mut out = base.clone();
    for input in &base {
        for _ in 0..MUTATIONS {
            out.push(mutate(input, &base, &mut rng));
        }
    }
    let local = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    if let Ok(dir) = std::fs::read_dir(&local) {
        let mut files: Vec<PathBuf> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        out.extend(files.iter().take(LOCAL_CORPUS_MAX).filter_map(|p| std::fs::read(p).ok()));
    }
    out
}

/// One mutation of `input`, at most a few bytes away (or spliced with another input).
fn mutate(input: &[u8], all: &[Vec<u8>], rng: &mut Rng) -> Vec<u8> {
    const INTERESTING: &[u8] = b"/%.\\;?#*$:\n\r \t\x00\xff\xc3Aa9-_";
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = if out.is_empty() { 0 } else { rng.below(out.len() + 1) };
        match rng.below(5) {
            0 if at < out.len() => out[at] ^= 1 << rng.below(8),
            1 => out.insert(at, *rng.pick(INTERESTING)),
            2 if at < out.len() => {
                out.remove(at);
            }
            3 => out.truncate(at),
            _ => {
                let other = rng.pick(all);
                let from = if other.is_empty() { 0 } else { rng.below(other.len()) };
                let to = (from + 1 + rng.below(32)).min(other.len());
                out.splice(at.min(out.len())..at.min(out.len()), other[from..to].iter().copied());
            }
        }
    }
    out
}

/// Runs `check` on every input of `target`'s corpus; a failure names the input (escaped), so
/// it can be written to a file and given to `cargo fuzz run <target> <file>`.
fn run(target: &str, seeds: &[&[u8]], check: fn(&[u8])) {
    let inputs = corpus(target, seeds);
    assert!(inputs.len() > 100, "{target}: a corpus of {} inputs", inputs.len());
    for input in &inputs {
        if catch_unwind(AssertUnwindSafe(|| check(input))).is_err() {
            panic!("{target}: the invariants fail on {:?}", input.escape_ascii().to_string());
        }
    }
}

#[test]
fn parse_decide_holds_on_its_corpus() {
    run("parse_decide", ROBOTS, parse_decide::check);
}

#[test]
fn readings_holds_on_its_corpus() {
    run("readings", PATHS, readings::check);
}

#[test]
fn request_path_holds_on_its_corpus() {
    run("request_path", PATHS, request_path::check);
}

#[test]
fn normalize_path_holds_on_its_corpus() {
    run("normalize_path", PATHS, normalize_path::check);
}

#[test]
fn user_agent_holds_on_its_corpus() {
    run("user_agent", USER_AGENTS, user_agent::check);
}

#[test]
fn user_agent_token_holds_on_its_corpus() {
    run("user_agent_token", USER_AGENTS, user_agent_token::check);
}
