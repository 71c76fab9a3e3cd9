//! A real nginx (Debian's package; `.ci/run` installs it) behind the proxy, serving a file
//! robots.txt disallows: no trick brings its content back through the proxy.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::support::{raw_get, TestProxy};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\nAllow: /private/open\n";
const SECRET: &str = "the secret nobody may crawl";

fn nginx_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/sbin")])
        .map(|dir| dir.join("nginx"))
        .find(|p| p.is_file())
}

/// nginx in the foreground, in its own directory, stopped on drop.
struct Nginx {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

impl Nginx {
    fn start(binary: &Path) -> Nginx {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let www = root.join("www");
        write(&www.join("robots.txt"), ROBOTS);
        write(&www.join("private/secret.html"), SECRET);
        write(&www.join("private/open/index.html"), "open");
        write(&www.join("public/index.html"), "public");
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let run = root.display();
        let conf = format!(
            "daemon off;\nmaster_process off;\npid {run}/nginx.pid;\nerror_log {run}/error.log warn;\n\
             events {{ worker_connections 64; }}\n\
             http {{\n  access_log {run}/access.log;\n  client_body_temp_path {run}/tmp-body;\n\
               proxy_temp_path {run}/tmp-proxy;\n  fastcgi_temp_path {run}/tmp-fastcgi;\n\
               uwsgi_temp_path {run}/tmp-uwsgi;\n  scgi_temp_path {run}/tmp-scgi;\n\
               default_type text/html;\n\
               server {{ listen 127.0.0.1:{port}; root {www}; }}\n}}\n",
            www = www.display()
        );
        write(&root.join("nginx.conf"), &conf);
        let child = Command::new(binary)
            .args(["-p", &run.to_string(), "-e", &format!("{run}/error.log"), "-c"])
            .arg(root.join("nginx.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(addr).is_err() {
            let log = std::fs::read_to_string(root.join("error.log")).unwrap_or_default();
            assert!(Instant::now() < deadline, "nginx did not start listening: {log}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Nginx { child, addr, _dir: dir }
    }
}

/// Paths nginx resolves to `/private/secret.html` (or under `/private`), although the path as
/// sent does not start with `/private`.
const TRICKS: &[&str] = &[
    "/public/..%2fprivate/secret.html",
    "/public/..%2Fprivate/secret.html",
    "/%2fprivate/secret.html",
    "/public/%2e%2e%2fprivate/secret.html",
    "/public/%2E%2E/private/secret.html",
    "/private/open%2f..%2fsecret.html",
    "/private/open/..%2fsecret.html",
    "/private/open/%2e%2e/secret.html",
    "//private/secret.html",
    "/./private/secret.html",
    "/public/../private/secret.html",
    "/%70rivate/secret.html",
    "/public/x/..%2f..%2fprivate/secret.html",
    "/private%2fsecret.html",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_trick_brings_a_disallowed_file_back_from_nginx() {
    let Some(binary) = nginx_binary() else {
        crate::skip::missing("nginx", "apt-get install nginx");
        return;
    };
    let nginx = Nginx::start(&binary);
    let proxy = TestProxy::start().await;
    let base = format!("http://{}", nginx.addr);
    let host = nginx.addr.to_string();
    // The tricks are real: straight to nginx, each serves the secret file.
    for trick in TRICKS {
        let direct = super::support::raw(
            nginx.addr,
            &format!("GET {trick} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert!(direct.body.contains(SECRET), "nginx does not serve the secret for {trick}");
    }
    // Through the proxy none of them does.
    for trick in TRICKS {
        let resp = raw_get(proxy.addr, &format!("{base}{trick}"), &host, "").await;
        assert_eq!(resp.status, 403, "{trick}: {resp:?}");
        assert!(!resp.body.contains(SECRET), "{trick} brought the secret back");
    }
    // What may be fetched is fetched, and forwarded as sent.
    for (path, body) in [
        ("/public/index.html", "public"),
        ("/public//index.html", "public"),
        ("/private/open/index.html", "open"),
        ("/private/open//index.html", "open"),
    ] {
        let resp = raw_get(proxy.addr, &format!("{base}{path}"), &host, "").await;
        assert_eq!(resp.status, 200, "{path}: {resp:?}");
        assert_eq!(resp.body, body, "{path}");
    }
    // nginx logged the allowed requests as sent, and the only requests for the secret it saw
    // are the direct ones above.
    let log = std::fs::read_to_string(nginx._dir.path().join("access.log")).unwrap_or_default();
    assert!(log.contains("\"GET /public//index.html HTTP/1.1\" 200"), "{log}");
    assert_eq!(log.lines().filter(|l| l.contains("secret")).count(), TRICKS.len(), "{log}");
}
