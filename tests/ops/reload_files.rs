//! A reload compares file contents, not paths (ops H1): in the real binary, the TLS listener's
//! certificate, key and client CA and the interception CA rewritten at the same paths are in
//! force for new handshakes after a reload, with real clients (curl through an `https://`
//! proxy, curl with `--cacert`), and a start-only file rewritten in place
//! (`https.upstream_ca_file`) is reported under `restart_required` by the reload's report and
//! by `config check --against-running`.

use std::path::Path;

use serde_json::Value;

use super::support::{post_json, run, write_atomically, Origin, ProxyProcess};
use crate::proxy::tls_listener::{cert_args, curl, curl_has_https_proxy};
use crate::proxy::tls_support::{TestCa, TlsOrigin};

/// The address the TLS listener says it bound.
fn tls_addr(proxy: &ProxyProcess) -> String {
    let log = proxy.stderr();
    let line = log.lines().find_map(|l| l.strip_prefix("robots-proxy TLS listening on "));
    line.expect("the TLS listener runs").trim().to_owned()
}

/// `POST /api/reload`: its report, which must say applied.
async fn reload(proxy: &ProxyProcess) -> Value {
    let (status, report) = post_json(&format!("{}/api/reload", proxy.admin())).await;
    assert_eq!(status, 200, "{report:#}");
    assert_eq!(report["outcome"], "applied", "{report:#}");
    report
}

fn keys(report: &Value, part: &str) -> Vec<String> {
    let list = report[part].as_array().cloned().unwrap_or_default();
    list.iter().filter_map(|c| c["key"].as_str().map(str::to_owned)).collect()
}

fn write(path: &Path, text: &str) {
    write_atomically(path, text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_listener_certificate_and_a_new_client_ca_take_effect_on_reload() {
    if !curl_has_https_proxy() {
        return;
    }
    let origin = Origin::start("User-agent: *\nDisallow: /private\n").await;
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name);
    let (listener_a, listener_b) = (TestCa::new("listener CA A"), TestCa::new("listener CA B"));
    let (clients_1, clients_2) = (TestCa::new("clients CA 1"), TestCa::new("clients CA 2"));
    let (cert, key) = listener_a.leaf_pem(&["127.0.0.1", "localhost"]);
    write(&at("proxy.pem"), &cert);
    write(&at("proxy-key.pem"), &key);
    write(&at("clients-ca.pem"), &clients_1.pem);
    write(&at("ca-a.pem"), &listener_a.pem);
    write(&at("ca-b.pem"), &listener_b.pem);
    for (name, ca) in [("alice", &clients_1), ("bob", &clients_2)] {
        let (cert, key) = ca.client_pem(Some(name), &[]);
        write(&at(&format!("{name}.pem")), &cert);
        write(&at(&format!("{name}-key.pem")), &key);
    }
    let config = at("robots-proxy.toml");
    let state = at("state");
    write(
        &config,
        &format!(
            "state_dir = {state:?}\n[proxy]\ntls_listen = \"127.0.0.1:0\"\n\
             tls_certificate = {:?}\ntls_key = {:?}\n[access]\nclient_ca = {:?}\n\
             client_certificate = \"required\"\n[https]\nmode = \"reject\"\n",
            at("proxy.pem"),
            at("proxy-key.pem"),
            at("clients-ca.pem")
        ),
    );
    let proxy = ProxyProcess::start(&["--config", config.to_str().unwrap()], &[]);
    let tls = tls_addr(&proxy);
    let url = format!("{}/page", origin.base());
    let get = |trust: &str, client: &str| {
        let mut args = vec![
            "--proxy".to_owned(),
            format!("https://{tls}"),
            "--proxy-cacert".to_owned(),
            at(trust).display().to_string(),
            "-A".to_owned(),
            "ExampleBot/1.0".to_owned(),
        ];
        args.extend(cert_args(&at(&format!("{client}.pem")), &at(&format!("{client}-key.pem"))));
        args.push(url.clone());
        curl(args)
    };
    assert_eq!(get("ca-a.pem", "alice").await.status, 200);
    assert_eq!(get("ca-a.pem", "bob").await.status, 0, "bob's CA is not trusted yet");

    // Renewed in place: a certificate from another CA, and the client CA bundle with alice's
    // CA taken out (revoked) and bob's put in.
    let (cert, key) = listener_b.leaf_pem(&["127.0.0.1", "localhost"]);
    write(&at("proxy.pem"), &cert);
    write(&at("proxy-key.pem"), &key);
    write(&at("clients-ca.pem"), &clients_2.pem);
    let (code, said) = against_running(&proxy.admin());
    assert_eq!(code, 0, "{said}");
    for key in ["access.client_ca", "proxy.tls_certificate", "proxy.tls_key"] {
        assert!(said.contains(key), "{key} not in the preview:\n{said}");
    }
    let report = reload(&proxy).await;
    let changed = keys(&report, "changed");
    for key in ["access.client_ca", "proxy.tls_certificate", "proxy.tls_key"] {
        assert!(changed.iter().any(|k| k == key), "{key} not in {report:#}");
    }
    assert!(keys(&report, "restart_required").is_empty(), "{report:#}");
    let old = get("ca-a.pem", "bob").await;
    assert_eq!(old.status, 0, "the old certificate is still served: {old:?}");
    let revoked = get("ca-b.pem", "alice").await;
    assert_eq!(revoked.status, 0, "a client of the removed CA is still admitted: {revoked:?}");
    let served = get("ca-b.pem", "bob").await;
    assert_eq!(served.status, 200, "{served:?}");
    assert!(served.body.contains("/page"), "{served:?}");
}

/// `robots-proxy config check --against-running --admin URL`: exit code, stdout and stderr.
fn against_running(admin: &str) -> (i32, String) {
    let out = run(&["config", "check", "--against-running", "--admin", admin], &[]);
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_interception_ca_is_in_force_after_reload_and_a_start_only_file_is_reported() {
    let origin = TlsOrigin::start("User-agent: *\nDisallow: /private\n").await;
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name);
    for ca in ["ca-a", "ca-b"] {
        let made = run(&["ca", "init", "--dir", at(ca).to_str().unwrap()], &[]);
        assert!(made.status.success(), "{made:?}");
    }
    std::fs::create_dir(at("ca")).unwrap();
    let rotate = |from: &str| {
        for file in ["ca.pem", "ca-key.pem"] {
            std::fs::copy(at(from).join(file), at("ca").join(file)).unwrap();
        }
    };
    rotate("ca-a");
    write(&at("origins.pem"), &origin.ca.pem);
    let config = at("robots-proxy.toml");
    write(
        &config,
        &format!(
            "state_dir = {:?}\n[https]\nmode = \"intercept\"\nca_cert = {:?}\nca_key = {:?}\n\
             upstream_ca_file = {:?}\nconnect_ports = [{}]\n",
            at("state"),
            at("ca").join("ca.pem"),
            at("ca").join("ca-key.pem"),
            at("origins.pem"),
            origin.port()
        ),
    );
    let proxy = ProxyProcess::start(&["--config", config.to_str().unwrap()], &[]);
    let url = format!("{}/page", origin.ip_base());
    let get = |trust: &str| {
        let trust = at(trust).join("ca.pem").display().to_string();
        let proxy = format!("http://{}", proxy.proxy_addr);
        let args = ["-x", &proxy, "--cacert", &trust, "-A", "ExampleBot/1.0", &url];
        curl(args.iter().map(|s| (*s).to_owned()).collect())
    };
    let first = get("ca-a").await;
    assert_eq!(first.status, 200, "{first:?}\n{}", proxy.stderr());
    assert_eq!(get("ca-b").await.status, 0);

    rotate("ca-b");
    // The origins' roots rewritten in place (one more CA): read at start only.
    let more = TestCa::new("another origin CA");
    write(&at("origins.pem"), &format!("{}{}", origin.ca.pem, more.pem));
    let (code, said) = against_running(&proxy.admin());
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("https.ca_cert") && said.contains("https.upstream_ca_file"), "{said}");
    assert!(said.contains("file changed on disk"), "{said}");
    let report = reload(&proxy).await;
    let changed = keys(&report, "changed");
    assert!(changed.iter().any(|k| k == "https.ca_cert"), "{report:#}");
    assert!(changed.iter().any(|k| k == "https.ca_key"), "{report:#}");
    let pending = &report["restart_required"];
    let upstream =
        pending.as_array().unwrap().iter().find(|p| p["key"] == "https.upstream_ca_file");
    let upstream = upstream.unwrap_or_else(|| panic!("no upstream_ca_file in {report:#}"));
    assert!(upstream["reason"].as_str().unwrap().contains("file changed on disk"), "{report:#}");
    let fresh = get("ca-b").await;
    assert_eq!(fresh.status, 200, "the rotated CA is not in use: {fresh:?}");
    assert_eq!(get("ca-a").await.status, 0, "the old CA still signs");
    // A reload with nothing new on disk changes nothing and keeps the start-only file pending.
    let again = reload(&proxy).await;
    assert!(keys(&again, "changed").is_empty(), "{again:#}");
    assert_eq!(keys(&again, "restart_required"), vec!["https.upstream_ca_file"], "{again:#}");
}

/// `robots-proxy reload` (ops Low 2): what `systemctl reload` runs. Exit 0 and "reloaded" when
/// the configuration is applied; exit 1 with every error when it is refused, and the running
/// configuration stays (a `kill -HUP` exits 0 either way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reload_command_exits_non_zero_on_a_refused_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("robots-proxy.toml");
    let state = dir.path().join("state");
    let good = format!("state_dir = {state:?}\n[https]\nmode = \"reject\"\n");
    write(&config, &good);
    let proxy = ProxyProcess::start(&["--config", config.to_str().unwrap()], &[]);
    let admin = proxy.admin();
    let reload = |json: bool| {
        let mut args = vec!["reload", "--admin", admin.as_str()];
        if json {
            args.push("--json");
        }
        let out = run(&args, &[]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    };
    write(&config, &format!("{good}[policy]\ndefault_token = \"OtherBot\"\n"));
    let (code, said) = reload(false);
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains("The configuration was reloaded") && said.contains("policy.default_token"),
        "{said}"
    );
    write(&config, &format!("{good}[policy]\ndefault_token = \"Bad Bot\"\n[nope]\nx = 1\n"));
    let (code, said) = reload(false);
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("refused") && said.contains("nope"), "{said}");
    let (code, said) = reload(true);
    assert_eq!(code, 1, "{said}");
    let report: Value = serde_json::from_str(said.trim()).unwrap();
    assert_eq!(report["outcome"], "refused", "{report:#}");
    let (_, metrics) = super::support::get(&format!("{admin}/metrics")).await;
    let last = super::support::sample(&metrics, "robots_proxy_config_last_reload_successful");
    assert_eq!(last, 0.0, "{metrics}");
    // Nobody listening: exit 1, saying so.
    drop(proxy);
    let (code, said) = reload(false);
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("cannot connect"), "{said}");
}
