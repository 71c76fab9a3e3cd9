//! Loopback servers and clients for the operations tests: an origin whose robots.txt can be
//! changed while it runs, the proxy and its admin listener in this process, the proxy binary as
//! a child process, and small HTTP helpers.

use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use robots_proxy::audit::AuditLog;
use robots_proxy::cache::RobotsCache;
use robots_proxy::clock::{Clock, ManualClock};
use robots_proxy::config::Config;
use robots_proxy::proxy::Proxy;

pub mod witness;

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Bytes in each chunk of `/slow/N`.
pub const SLOW_CHUNK: usize = 1000;
/// Time between chunks of `/slow/N`.
pub const SLOW_GAP: Duration = Duration::from_millis(100);

/// What the origin answers for `/robots.txt`: a status and a body.
#[derive(Clone)]
struct RobotsReply {
    status: u16,
    body: Bytes,
}

/// An origin on 127.0.0.1:
/// * `/robots.txt`: what [`Origin::set_robots`] last set;
/// * `/slow/N`: N chunks of [`SLOW_CHUNK`] bytes, [`SLOW_GAP`] apart;
/// * `/hangup`: closes the connection without an answer;
/// * anything else: `hello from <target>`.
pub struct Origin {
    pub addr: SocketAddr,
    robots: Arc<Mutex<RobotsReply>>,
    robots_hits: Arc<AtomicUsize>,
}

impl Origin {
    pub async fn start(robots: &str) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let robots =
            Arc::new(Mutex::new(RobotsReply { status: 200, body: Bytes::from(robots.to_owned()) }));
        let robots_hits = Arc::new(AtomicUsize::new(0));
        let (r, hits) = (robots.clone(), robots_hits.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let (r, hits) = (r.clone(), hits.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let (r, hits) = (r.clone(), hits.clone());
                        async move { answer(req, &r, &hits) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Origin { addr, robots, robots_hits }
    }

    /// `http://127.0.0.1:PORT`
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Changes what `/robots.txt` answers from now on.
    pub fn set_robots(&self, status: u16, body: &str) {
        self.set_robots_bytes(status, body.as_bytes());
    }

    /// Changes what `/robots.txt` answers from now on, byte for byte (not UTF-8, say).
    pub fn set_robots_bytes(&self, status: u16, body: &[u8]) {
        let body = Bytes::copy_from_slice(body);
        *self.robots.lock().unwrap() = RobotsReply { status, body };
    }

    /// How often `/robots.txt` was fetched.
    pub fn robots_hits(&self) -> usize {
        self.robots_hits.load(Ordering::SeqCst)
    }
}

fn answer(
    req: Request<Incoming>,
    robots: &Mutex<RobotsReply>,
    hits: &AtomicUsize,
) -> Result<Response<Body>, std::io::Error> {
    let target = req.uri().path().to_owned();
    if target == "/robots.txt" {
        hits.fetch_add(1, Ordering::SeqCst);
        let reply = robots.lock().unwrap().clone();
        let mut resp = Response::new(Full::new(reply.body).boxed_unsync());
        *resp.status_mut() = StatusCode::from_u16(reply.status).unwrap();
        return Ok(resp);
    }
    if target == "/hangup" {
        // An error from the service makes hyper close the connection without answering.
        return Err(std::io::Error::other("hanging up on purpose"));
    }
    if let Some(n) = target.strip_prefix("/slow/") {
        let chunks: usize = n.parse().unwrap_or(1);
        let stream = futures_util::stream::unfold(0usize, move |sent| async move {
            if sent == chunks {
                return None;
            }
            if sent > 0 {
                tokio::time::sleep(SLOW_GAP).await;
            }
            let frame = Frame::data(Bytes::from(vec![b'x'; SLOW_CHUNK]));
            Some((Ok::<_, Infallible>(frame), sent + 1))
        });
        let mut resp = Response::new(StreamBody::new(stream).boxed_unsync());
        let total = chunks * SLOW_CHUNK;
        resp.headers_mut().insert("content-length", total.to_string().parse().unwrap());
        return Ok(resp);
    }
    Ok(Response::new(Full::new(Bytes::from(format!("hello from {target}"))).boxed_unsync()))
}

/// The proxy and its admin listener, in this process, on ephemeral ports.
pub struct InProcess {
    pub proxy_addr: SocketAddr,
    pub admin_addr: SocketAddr,
    pub clock: Arc<ManualClock>,
    pub audit: AuditLog,
    pub audit_path: PathBuf,
    pub proxy: Proxy,
    _state: tempfile::TempDir,
    stop_proxy: Option<tokio::sync::oneshot::Sender<()>>,
    stop_admin: Option<tokio::sync::oneshot::Sender<()>>,
}

impl InProcess {
    pub async fn start() -> InProcess {
        let state = tempfile::tempdir().unwrap();
        let mut config = Config { state_dir: state.path().to_owned(), ..Config::default() };
        config.robots.retry_initial = Duration::from_secs(3600);
        // The test origins run on 127.0.0.1, which the destination guard prohibits by default.
        config.access.allow_destinations = vec!["127.0.0.0/8".parse().unwrap()];
        // 2027-01-15T08:00:00Z, so that times in answers can be checked exactly.
        let clock = Arc::new(ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_800_000_000)));
        let dyn_clock: Arc<dyn Clock> = clock.clone();
        // One guard and one TLS configuration, shared by the robots.txt fetcher and the proxy,
        // as `main` does: both listeners are refused as destinations by both.
        let tls = Arc::new(robots_proxy::tls::client_config(None).unwrap());
        let guard = Arc::new(config.destination_guard());
        let connector = robots_proxy::tls::https_connector(
            (*tls).clone(),
            config.robots.connect_timeout,
            guard.clone(),
        );
        let cache = Arc::new(RobotsCache::with_connector(
            config.robots.clone(),
            dyn_clock.clone(),
            connector,
        ));
        let audit_path = config.audit_path();
        let audit = AuditLog::open(audit_path.clone(), config.audit.clone()).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy_addr = listener.local_addr().unwrap();
        config.proxy.listen = proxy_addr;
        let pacer = Arc::new(robots_proxy::pacing::Pacer::new(&config.pacing).unwrap());
        let parts = robots_proxy::proxy::ProxyParts {
            store: cache,
            audit: audit.clone(),
            clock: dyn_clock,
            ca: None,
            guard,
            tls,
            pacer,
            fleet: None,
            signer: None,
        };
        let proxy = Proxy::new(&config, parts).unwrap();
        let admin_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let admin_addr = admin_listener.local_addr().unwrap();
        let (stop_proxy, proxy_stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(proxy.clone().serve(
            listener,
            async {
                let _ = proxy_stopped.await;
            },
            Duration::from_secs(1),
        ));
        let (stop_admin, admin_stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(robots_proxy::admin::serve(admin_listener, proxy.clone(), async {
            let _ = admin_stopped.await;
        }));
        let started = InProcess {
            proxy_addr,
            admin_addr,
            clock,
            audit,
            audit_path,
            proxy,
            _state: state,
            stop_proxy: Some(stop_proxy),
            stop_admin: Some(stop_admin),
        };
        // `serve` marks the proxy as listening once it runs.
        wait_until("the proxy listens", || started.proxy.metrics().is_listening()).await;
        started
    }

    /// `http://127.0.0.1:PORT` of the admin listener.
    pub fn admin(&self) -> String {
        format!("http://{}", self.admin_addr)
    }

    /// A client that sends everything through the proxy.
    pub fn client(&self) -> reqwest::Client {
        proxied_client(self.proxy_addr)
    }

    /// Stops the proxy listener (the admin listener stays).
    pub fn stop_proxy(&mut self) {
        if let Some(stop) = self.stop_proxy.take() {
            let _ = stop.send(());
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.stop_proxy();
        if let Some(stop) = self.stop_admin.take() {
            let _ = stop.send(());
        }
    }
}

/// Polls `check` every 20 ms until it holds; panics naming `what` after 10 s.
pub async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..500 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting until {what}");
}

/// A reqwest client that goes through the proxy at `proxy`.
pub fn proxied_client(proxy: SocketAddr) -> reqwest::Client {
    builder()
        .proxy(reqwest::Proxy::all(format!("http://{proxy}")).unwrap())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// A reqwest client that talks to its target directly, whatever `HTTP_PROXY` says.
pub fn direct_client() -> reqwest::Client {
    builder().no_proxy().timeout(Duration::from_secs(30)).build().unwrap()
}

/// A reqwest builder with the crate's TLS configuration: reqwest is built with rustls but no
/// crypto provider of its own (the crate links only ring), so it must be given one.
fn builder() -> reqwest::ClientBuilder {
    let tls = robots_proxy::tls::client_config(None).expect("web PKI roots");
    reqwest::Client::builder().use_preconfigured_tls(tls)
}

/// `GET url` directly: the status and the body.
pub async fn get(url: &str) -> (u16, String) {
    let resp = direct_client().get(url).send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap())
}

/// `GET url` directly, the body parsed as JSON.
pub async fn get_json(url: &str) -> (u16, serde_json::Value) {
    let (status, body) = get(url).await;
    let value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    (status, value)
}

/// `POST url` directly, the body parsed as JSON.
pub async fn post_json(url: &str) -> (u16, serde_json::Value) {
    let resp = direct_client().post(url).send().await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap();
    let value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    (status, value)
}

/// The value of the sample `series` (name and labels exactly as written, e.g.
/// `robots_proxy_requests_total{decision="allow",scheme="http"}`) in a metrics text.
pub fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no sample {series} in:\n{text}"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("sample {series} is not a number: {e}"))
}

/// An HTTP/1.1 connection kept open across requests, read by `Content-Length`.
pub struct KeepAlive {
    stream: TcpStream,
}

impl KeepAlive {
    pub async fn connect(addr: SocketAddr) -> KeepAlive {
        KeepAlive { stream: TcpStream::connect(addr).await.unwrap() }
    }

    /// Sends `GET url` through the proxy on this connection; the status and the body.
    pub async fn get(&mut self, url: &str) -> (u16, String) {
        self.get_with(url, "").await
    }

    /// [`KeepAlive::get`] with more header lines (`extra`, each ending in CRLF).
    pub async fn get_with(&mut self, url: &str, extra: &str) -> (u16, String) {
        let host = url.split('/').nth(2).unwrap_or_default();
        let request =
            format!("GET {url} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: test/1.0\r\n{extra}\r\n");
        self.stream.write_all(request.as_bytes()).await.unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            let n = tokio::time::timeout(Duration::from_secs(20), self.stream.read(&mut byte))
                .await
                .expect("the proxy answers within 20 s")
                .unwrap();
            assert_eq!(n, 1, "the connection closed before a response head; got {head:?}");
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse().ok())?
            })
            .unwrap_or_else(|| panic!("no Content-Length in {head}"));
        let mut body = vec![0u8; length];
        self.stream.read_exact(&mut body).await.unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }
}

/// The proxy binary as a child process, on ephemeral ports. Killed on drop.
pub struct ProxyProcess {
    child: Child,
    /// A state directory of its own, unless the caller gave one (env or `--config`): kept
    /// robots.txt state must not leak between tests whose origins reuse a port.
    _state: Option<tempfile::TempDir>,
    pub proxy_addr: SocketAddr,
    pub admin_addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

impl ProxyProcess {
    /// Starts `robots-proxy serve --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0` with `args`
    /// added and only `env` in its environment (no stray `ROBOTS_PROXY_*` from the caller).
    pub fn start(args: &[&str], env: &[(&str, &str)]) -> ProxyProcess {
        Self::start_listening("127.0.0.1:0", "127.0.0.1:0", args, env)
    }

    /// [`ProxyProcess::start`] with `serve --listen LISTEN --admin-listen ADMIN`. The addresses
    /// read back are the bound ones as the proxy prints them (`0.0.0.0:PORT` for a wildcard).
    pub fn start_listening(
        listen: &str,
        admin: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> ProxyProcess {
        Self::spawn(Command::new(env!("CARGO_BIN_EXE_robots-proxy")), listen, admin, args, env)
    }

    /// [`ProxyProcess::start`] under a shell that first runs `setup` (`ulimit -f 8`, say),
    /// then replaces itself with the binary, so the limits apply to the proxy's own process.
    pub fn start_under(setup: &str, args: &[&str], env: &[(&str, &str)]) -> ProxyProcess {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(format!("{setup}; exec \"$0\" \"$@\""))
            .arg(env!("CARGO_BIN_EXE_robots-proxy"));
        Self::spawn(command, "127.0.0.1:0", "127.0.0.1:0", args, env)
    }

    fn spawn(
        mut command: Command,
        listen: &str,
        admin: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> ProxyProcess {
        let own_state =
            !args.contains(&"--config") && !env.iter().any(|(k, _)| *k == "ROBOTS_PROXY_STATE_DIR");
        let state = own_state.then(|| tempfile::tempdir().unwrap());
        command
            .args(["serve", "--listen", listen, "--admin-listen", admin])
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            // The test origins run on 127.0.0.1, which the destination guard prohibits by
            // default (`env` may say otherwise).
            .env("ROBOTS_PROXY_ACCESS__ALLOW_DESTINATIONS", "127.0.0.0/8")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(state) = &state {
            command.env("ROBOTS_PROXY_STATE_DIR", state.path());
        }
        let mut child = command.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (addrs_tx, addrs_rx) = std::sync::mpsc::channel();
        let log2 = log.clone();
        // Reads stderr to the end, so the child never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut proxy = None;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                // With `log.format = "json"` the startup lines are JSON objects too.
                let said = serde_json::from_str::<serde_json::Value>(&line)
                    .ok()
                    .and_then(|v| v["message"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| line.clone());
                if let Some(a) = said.strip_prefix("robots-proxy listening on ") {
                    proxy = a.trim().parse::<SocketAddr>().ok();
                }
                if let Some(a) = said.strip_prefix("robots-proxy admin listening on ") {
                    if let (Some(p), Ok(a)) = (proxy, a.trim().parse::<SocketAddr>()) {
                        let _ = addrs_tx.send((p, a));
                    }
                }
                let mut log = log2.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let (proxy_addr, admin_addr) = match addrs_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(addrs) => addrs,
            Err(_) => {
                let _ = child.kill();
                panic!("the proxy did not start; stderr:\n{}", log.lock().unwrap());
            }
        };
        ProxyProcess { child, _state: state, proxy_addr, admin_addr, stderr: log }
    }

    /// `http://127.0.0.1:PORT` of the admin listener.
    pub fn admin(&self) -> String {
        format!("http://{}", self.admin_addr)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the process wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until stderr contains `text` `times` times; panics with stderr after 10 s.
    pub async fn wait_for_stderr(&self, text: &str, times: usize) {
        for _ in 0..500 {
            if self.stderr().matches(text).count() >= times {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("stderr never said {text:?} {times} time(s):\n{}", self.stderr());
    }

    /// Sends a signal by name (`HUP`, `TERM`) with `kill`.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Waits for the process to exit, up to `limit`.
    pub async fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(start.elapsed() < limit, "the proxy did not exit; stderr:\n{}", self.stderr());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `text` to `path`, replacing it in one step (so a reload never reads half a file).
pub fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Runs the binary with `args` and only `env` (plus PATH) in its environment, to the end.
pub fn run(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    run_with(args, env)
}

/// [`run`] with any environment names and values (not only UTF-8).
pub fn run_with<K: AsRef<std::ffi::OsStr>, V: AsRef<std::ffi::OsStr>>(
    args: &[&str],
    env: &[(K, V)],
) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The real binary with a key `k1` made by `keys new` (as an operator makes it) in `state`,
/// and its key directory listener for one identity whose `agent` is `agent`; with the
/// directory's bound address.
pub fn directory_proxy(state: &tempfile::TempDir, agent: &str) -> (ProxyProcess, SocketAddr) {
    let state_dir = state.path().to_str().unwrap();
    let made = Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
        .args(["keys", "new", "k1"])
        .env_clear()
        .env("ROBOTS_PROXY_STATE_DIR", state_dir)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let config = state.path().join("robots-proxy.toml");
    std::fs::write(
        &config,
        format!(
            "[signing]\ndirectory_listen = \"127.0.0.1:0\"\nkeys = [{{ name = \"k1\" }}]\n\
             identities = [{{ token = \"*\", keys = [\"k1\"], agent = \"{agent}\" }}]\n"
        ),
    )
    .unwrap();
    let p = ProxyProcess::start(
        &["--config", config.to_str().unwrap()],
        &[("ROBOTS_PROXY_STATE_DIR", state_dir)],
    );
    let line = p
        .stderr()
        .lines()
        .find_map(|l| l.strip_prefix("robots-proxy key directory listening on ").map(str::to_owned))
        .unwrap_or_else(|| panic!("no directory line:\n{}", p.stderr()));
    (p, line.trim().parse().unwrap())
}
