//! Web Bot Auth signing costs per request: a fresh signature per request (the default: a
//! nonce, the signature base, one Ed25519 signature and the structured fields), and choosing
//! the identity.
//!
//! `cargo bench --profile release --bench signing`. The proxy-level comparison (signing every
//! request against not signing) is `../shared/bench/run.sh` with the configuration in the
//! docs/signing.md.

use std::time::SystemTime;

use criterion::{criterion_group, criterion_main, Criterion};
use http::HeaderMap;

use robots_proxy::signing::keys::{KeyName, SigningKey};
use robots_proxy::signing::{Requester, Signer, SigningSection, Target};

fn signer(dir: &std::path::Path) -> Signer {
    let name: KeyName = "bench".parse().unwrap();
    SigningKey::create(&name, &name.file_in(dir)).unwrap();
    let section: SigningSection = toml::from_str(&format!(
        "keys_dir = {:?}\nkeys = [{{ name = \"bench\" }}]\n\
         identities = [{{ token = \"*\", keys = [\"bench\"], agent = \"https://bots.example.com\" }}]\n",
        dir.display().to_string()
    ))
    .unwrap();
    Signer::new(&section, std::path::Path::new("/")).unwrap().unwrap()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let signer = signer(dir.path());
    let now = SystemTime::now();
    let empty = HeaderMap::new();
    let mut group = c.benchmark_group("signing");
    let who = Requester { token: Some("ExampleBot"), ..Requester::default() };
    group.bench_function("plan (choose the identity)", |b| {
        b.iter(|| signer.plan(&who, &empty).signing.is_some())
    });
    let plan = signer.plan(&who, &empty).signing.unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("host", "www.example.com".parse().unwrap());
    headers.insert("user-agent", "ExampleBot/1.0".parse().unwrap());
    let target = Target {
        method: "GET",
        scheme: "https",
        authority: "www.example.com",
        path_and_query: "/articles/2026/11/some-page.html?ref=feed",
    };
    group.bench_function("sign, per request (the default: nonce, Ed25519, fields)", |b| {
        b.iter(|| plan.sign(&target, &mut headers, now).unwrap())
    });
    group.bench_function("sign, uncached (no header map)", |b| {
        b.iter(|| plan.sign_uncached(&target, now).unwrap())
    });
    // The Ed25519 signature alone, over a base of the size a request's is: what the rest of
    // the per-request path (nonce, base, fields) costs is the difference.
    let key_dir = tempfile::tempdir().unwrap();
    let name: KeyName = "alone".parse().unwrap();
    let key = SigningKey::create(&name, &name.file_in(key_dir.path())).unwrap();
    let base = "x".repeat(330);
    group.bench_function("Ed25519 alone (a 330-byte base)", |b| {
        b.iter(|| key.sign(base.as_bytes()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
