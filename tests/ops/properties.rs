//! The property of issue 27 ("How to keep it fixed") through the real binary: whatever
//! `config check` accepts, `serve` starts with and serves one request through a real origin;
//! whatever it refuses, it refuses naming the key. Values at and beyond every key's bounds come
//! from the generator of `config::bounds`. Each case starts processes: few cases, bounded time.

use std::process::{Command, Stdio};
use std::time::Duration;

use proptest::test_runner::{Config as ProptestConfig, TestRunner};

use super::support::{proxied_client, Origin, ProxyProcess};
use crate::config::bounds::{settings, Setting};

/// `robots-proxy config check` with `env` only: whether it accepted, and its stderr.
fn config_check(env: &[(String, String)]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
        .args(["config", "check"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("ROBOTS_PROXY_ACCESS__ALLOW_DESTINATIONS", "127.0.0.0/8")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(matches!(out.status.code(), Some(0 | 1)), "config check: {:?} {stderr}", out.status);
    (out.status.success(), stderr)
}

#[test]
fn what_config_check_accepts_serve_runs_and_what_it_refuses_it_names() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let origin = runtime.block_on(Origin::start("User-agent: *\nDisallow: /private\n"));
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 24,
        max_shrink_iters: 16,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&settings(), |settings: Vec<Setting>| {
            let state = tempfile::tempdir().unwrap();
            let mut env = vec![
                ("ROBOTS_PROXY_STATE_DIR".to_owned(), state.path().to_str().unwrap().to_owned()),
                ("ROBOTS_PROXY_HTTPS__MODE".to_owned(), "reject".to_owned()),
            ];
            env.extend(settings.iter().map(|s| (s.var(), s.value.clone())));
            let (accepted, stderr) = config_check(&env);
            if !accepted {
                assert!(stderr.contains("invalid configuration"), "{settings:?}: {stderr}");
                for s in settings.iter().filter(|s| !s.place.in_bounds()) {
                    assert!(stderr.contains(s.key), "{} not named: {stderr}", s.key);
                }
                return Ok(());
            }
            let env: Vec<(&str, &str)> =
                env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let proxy = ProxyProcess::start(&[], &env);
            let url = format!("{}/page", origin.base());
            let answer = runtime.block_on(async {
                let client = proxied_client(proxy.proxy_addr);
                tokio::time::timeout(Duration::from_secs(30), client.get(&url).send()).await
            });
            let status = match answer {
                Ok(Ok(resp)) => resp.status().as_u16(),
                other => panic!("{settings:?}: no answer ({other:?}); stderr:\n{}", proxy.stderr()),
            };
            assert!((200..600).contains(&status), "{settings:?}: {status}");
            assert!(!proxy.stderr().contains("panicked"), "{settings:?}:\n{}", proxy.stderr());
            Ok(())
        })
        .unwrap();
}
