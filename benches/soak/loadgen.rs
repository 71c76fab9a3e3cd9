//! Load client for the soak and idle-connection measurements (`benches/soak/`, issue #6).
//!
//! It talks to the proxy over raw TCP with hyper's client `conn::http1`, one hyper connection
//! per client connection, and sends absolute-form requests
//! (`GET http://127.0.0.1:18100/page/7?id=3-41 HTTP/1.1`, `Host` set to the authority, a crawler
//! User-Agent). Every request carries a unique `id=<connection>-<sequence>` query, so each
//! blocked request can be matched with its audit record.
//!
//! Accounting is exact: new requests stop at the deadline, every request in flight is allowed to
//! finish (up to `--request-timeout`), and every request issued ends as exactly one response
//! (counted by status) or one transport error (counted by kind). Errors are reported, never
//! panicked on.
//!
//! ```sh
//! cargo build --release --example loadgen
//! target/release/examples/loadgen --proxy 127.0.0.1:18130 soak \
//!     --origins 127.0.0.1:18100-18119 --conns 256 --duration 60 --blocked-ids /tmp/ids.txt
//! target/release/examples/loadgen --proxy 127.0.0.1:18141 idle \
//!     --origins 127.0.0.1:18140 --conns 10000 --hold 60 --rss-pid "$PROXY_PID"
//! ```
//!
//! Both modes print one JSON line (the summary) on standard output and progress on standard
//! error. The open-files limit is not raised here (that needs `unsafe`); run it under
//! `ulimit -n 65536` for many connections (the scripts in `benches/soak/` do).

use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::{Args, Parser, Subcommand};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HOST, USER_AGENT};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::{json, Map, Value};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Load client for robots-proxy: soak and idle-connection runs through the proxy.
#[derive(Parser)]
struct Cli {
    /// The proxy's listen address.
    #[arg(long, default_value = "127.0.0.1:8080")]
    proxy: SocketAddr,
    /// The User-Agent sent (its product token picks the robots.txt group).
    #[arg(
        long,
        default_value = "Mozilla/5.0 (compatible; SoakBot/1.0; +https://example.invalid/soak)"
    )]
    user_agent: String,
    /// Runtime worker threads (1: a single-threaded runtime, leaving cores to the proxy).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Talk TLS to the proxy (its `proxy.tls_listen`), trusting this PEM certificate (or CA):
    /// an `https://` proxy URL. Plain TCP without it.
    #[arg(long, value_name = "PEM")]
    proxy_tls: Option<std::path::PathBuf>,
    /// Longest wait for a response (head and body) before counting a `timeout` error.
    #[arg(long, default_value = "30", value_name = "SECONDS")]
    request_timeout: f64,
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Subcommand)]
enum Mode {
    /// Many keep-alive connections, each looping over the origins until the deadline.
    Soak(SoakArgs),
    /// Open many connections, one request each, hold them idle, then one more request each.
    Idle(IdleArgs),
}

#[derive(Args)]
struct SoakArgs {
    /// Origin authorities: `host:port`, `host:first-last` (a port range), comma-separated.
    #[arg(long, required = true)]
    origins: String,
    /// Client connections.
    #[arg(long, default_value_t = 256)]
    conns: u32,
    /// Number of the first connection (they are numbered from it on): several load clients
    /// given disjoint ranges send distinct `id=C-S` queries (the fleet soak runs one per
    /// instance).
    #[arg(long, default_value_t = 0)]
    first_conn: u32,
    /// Seconds during which new requests are issued.
    #[arg(long, default_value = "600", value_name = "SECONDS")]
    duration: f64,
    /// Fraction of requests sent to a disallowed path (`/private/<n>`).
    #[arg(long, default_value_t = 0.10)]
    disallow_fraction: f64,
    /// Total requests per second over all connections; 0 for as fast as the proxy answers.
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Order in which each connection takes the origins: `shuffle` (a fresh random order every
    /// round) or `rotate` (origins in turn, each connection starting at its own; connections
    /// held up together then stay in step and hit one origin at a time).
    #[arg(long, default_value = "shuffle", value_parser = ["shuffle", "rotate"])]
    order: String,
    /// Connections being opened (connected, first request not answered yet) at once; keep it
    /// below the proxy's listen backlog (`limits.max_connections`, at most 4096).
    #[arg(long, default_value_t = 100)]
    connect_concurrency: usize,
    /// Seed of the generator that picks disallowed requests.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Progress line on standard error every this many seconds (0: none).
    #[arg(long, default_value = "10", value_name = "SECONDS")]
    progress: f64,
    /// Writes the query (`id=C-S`) of every request answered 403 to this file, one a line.
    #[arg(long)]
    blocked_ids: Option<PathBuf>,
}

#[derive(Args)]
struct IdleArgs {
    /// Origin authorities (as for soak); connections take them in turn.
    #[arg(long, required = true)]
    origins: String,
    /// Connections to open and hold.
    #[arg(long, default_value_t = 10_000)]
    conns: u32,
    /// Seconds to hold the connections idle.
    #[arg(long, default_value = "60", value_name = "SECONDS")]
    hold: f64,
    /// Connections being opened (connected, first request not answered yet) at once; keep it
    /// below the proxy's listen backlog (`limits.max_connections`, at most 4096).
    #[arg(long, default_value_t = 100)]
    connect_concurrency: usize,
    /// Requests in flight at once (the first and the second request on each connection).
    #[arg(long, default_value_t = 16)]
    request_concurrency: usize,
    /// The proxy's process id: its VmRSS is read before, after opening and after holding.
    #[arg(long)]
    rss_pid: Option<u32>,
    /// Seconds between samples of the proxy's RSS while holding.
    #[arg(long, default_value = "10", value_name = "SECONDS")]
    sample_every: f64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = if cli.threads <= 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(cli.threads).enable_all().build()
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("loadgen: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let request_timeout = match Duration::try_from_secs_f64(cli.request_timeout) {
        Ok(d) if !d.is_zero() => d,
        _ => {
            eprintln!("loadgen: --request-timeout must be a positive number of seconds");
            return ExitCode::from(2);
        }
    };
    if let Some(pem) = &cli.proxy_tls {
        match tls_connector(pem) {
            Ok(tls) => {
                let _ = PROXY_TLS.set(tls);
            }
            Err(e) => {
                eprintln!("loadgen: --proxy-tls: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let common = Common { proxy: cli.proxy, user_agent: cli.user_agent, request_timeout };
    let result = match cli.mode {
        Mode::Soak(args) => runtime.block_on(soak(common, args)),
        Mode::Idle(args) => runtime.block_on(idle(common, args)),
    };
    match result {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("loadgen: {e}");
            ExitCode::from(2)
        }
    }
}

/// Settings both modes share.
struct Common {
    proxy: SocketAddr,
    user_agent: String,
    request_timeout: Duration,
}

// ---------------------------------------------------------------------------------------------
// Shared pieces: origins, connections, requests, error kinds, counts.

/// `host:port`, `host:first-last`, comma-separated → one authority per port.
fn parse_origins(spec: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (host, ports) =
            item.rsplit_once(':').ok_or_else(|| format!("origin {item:?}: expected host:port"))?;
        let port = |s: &str| {
            s.parse::<u16>().map_err(|_| format!("origin {item:?}: {s:?} is not a port number"))
        };
        match ports.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (port(a)?, port(b)?);
                if a > b {
                    return Err(format!("origin {item:?}: empty port range"));
                }
                out.extend((a..=b).map(|p| format!("{host}:{p}")));
            }
            None => out.push(format!("{host}:{}", port(ports)?)),
        }
    }
    if out.is_empty() {
        return Err("no origins given".into());
    }
    Ok(out)
}

type Sender = SendRequest<Empty<Bytes>>;

/// The TLS client configuration for `--proxy-tls`, set once in `main`.
static PROXY_TLS: std::sync::OnceLock<tokio_rustls::TlsConnector> = std::sync::OnceLock::new();

/// A TLS connector trusting the certificates in `pem`.
fn tls_connector(pem: &std::path::Path) -> Result<tokio_rustls::TlsConnector, String> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let certs = rustls::pki_types::CertificateDer::pem_file_iter(pem)
        .map_err(|e| format!("{}: {e}", pem.display()))?;
    for cert in certs {
        let cert = cert.map_err(|e| format!("{}: {e}", pem.display()))?;
        roots.add(cert).map_err(|e| format!("{}: {e}", pem.display()))?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)))
}

/// Opens a connection to the proxy (TLS with `--proxy-tls`) and starts its hyper connection
/// task.
async fn connect(proxy: SocketAddr) -> Result<Sender, String> {
    let tcp = match tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(proxy)).await {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(e)) => return Err(format!("connect:{:?}", e.kind())),
        Err(_) => return Err("connect:timeout".into()),
    };
    let _ = tcp.set_nodelay(true);
    if let Some(tls) = PROXY_TLS.get() {
        let name = rustls::pki_types::ServerName::IpAddress(proxy.ip().into());
        let stream = tls.connect(name, tcp).await.map_err(|e| format!("tls:{:?}", e.kind()))?;
        let (sender, conn) = http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake:{}", hyper_kind(&e)))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        return Ok(sender);
    }
    let (sender, conn) = http1::handshake::<_, Empty<Bytes>>(TokioIo::new(tcp))
        .await
        .map_err(|e| format!("handshake:{}", hyper_kind(&e)))?;
    // Errors of the connection show up on the request that was in flight.
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// What became of one request.
enum Outcome {
    /// The response head arrived; `body_error` when its body could not be read to the end.
    Response { status: u16, body_error: Option<String> },
    /// No response: the error kind.
    Error(String),
}

/// Sends `GET http://{authority}{path_and_query}` on `sender` and reads the whole response.
async fn send(
    sender: &mut Sender,
    authority: &str,
    path_and_query: &str,
    common: &Common,
) -> Outcome {
    let request = Request::get(format!("http://{authority}{path_and_query}"))
        .header(HOST, authority)
        .header(USER_AGENT, common.user_agent.as_str())
        .body(Empty::<Bytes>::new());
    let request = match request {
        Ok(r) => r,
        Err(e) => return Outcome::Error(format!("build:{e}")),
    };
    let exchange = async {
        let response = sender.send_request(request).await?;
        let status = response.status().as_u16();
        let body_error = response.into_body().collect().await.err().map(|e| hyper_kind(&e));
        Ok::<_, hyper::Error>(Outcome::Response { status, body_error })
    };
    match tokio::time::timeout(common.request_timeout, exchange).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(e)) => Outcome::Error(format!("send:{}", hyper_kind(&e))),
        Err(_) => Outcome::Error("timeout".into()),
    }
}

/// A short, stable name for a hyper error, with the I/O error kind underneath if any.
fn hyper_kind(e: &hyper::Error) -> String {
    let base = if e.is_timeout() {
        "timeout"
    } else if e.is_canceled() {
        "canceled"
    } else if e.is_closed() {
        "closed"
    } else if e.is_incomplete_message() {
        "incomplete_message"
    } else if e.is_parse() {
        "parse"
    } else if e.is_body_write_aborted() {
        "body_write_aborted"
    } else if e.is_user() {
        "user"
    } else {
        "other"
    };
    let mut source: Option<&(dyn StdError + 'static)> = e.source();
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return format!("{base}:io:{:?}", io.kind());
        }
        source = s.source();
    }
    base.to_string()
}

fn bump<K: Ord>(map: &mut BTreeMap<K, u64>, key: K) {
    *map.entry(key).or_insert(0) += 1;
}

fn merge_into<K: Ord + Clone>(into: &mut BTreeMap<K, u64>, from: &BTreeMap<K, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_insert(0) += v;
    }
}

fn counts_json<K: ToString>(map: &BTreeMap<K, u64>) -> Value {
    Value::Object(map.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<_, _>>())
}

/// Latency histogram: four buckets per power of two of microseconds (exact below 8 µs).
#[derive(Clone)]
struct Histogram {
    buckets: Vec<u64>,
    max_us: u64,
}

impl Histogram {
    fn new() -> Self {
        Histogram { buckets: vec![0; 256], max_us: 0 }
    }

    fn index(us: u64) -> usize {
        if us < 8 {
            return us as usize;
        }
        let log = 63 - us.leading_zeros() as usize;
        let sub = ((us >> (log - 2)) & 3) as usize;
        (log * 4 + sub).min(255)
    }

    /// The upper bound of bucket `i`, in microseconds.
    fn upper(i: usize) -> u64 {
        if i < 8 {
            return i as u64;
        }
        let (log, sub) = (i / 4, (i % 4) as u64);
        ((4 + sub + 1) << (log - 2)) - 1
    }

    fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.buckets[Self::index(us)] += 1;
        self.max_us = self.max_us.max(us);
    }

    fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.max_us = self.max_us.max(other.max_us);
    }

    fn percentile_ms(&self, p: f64) -> f64 {
        let total: u64 = self.buckets.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let rank = ((total as f64) * p).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return (Self::upper(i).min(self.max_us) as f64) / 1000.0;
            }
        }
        self.max_us as f64 / 1000.0
    }

    fn json(&self) -> Value {
        let r = |x: f64| (x * 1000.0).round() / 1000.0;
        json!({
            "p50": r(self.percentile_ms(0.50)),
            "p90": r(self.percentile_ms(0.90)),
            "p99": r(self.percentile_ms(0.99)),
            "p999": r(self.percentile_ms(0.999)),
            "max": r(self.max_us as f64 / 1000.0),
        })
    }
}

/// xorshift64*: enough to pick which requests go to a disallowed path and the order of the
/// origins, reproducibly.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        // splitmix64 of the seed, so that neighbouring seeds give unrelated streams.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Fisher-Yates.
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

/// VmRSS of a process, in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Fails early, with the fix, when the open-files limit cannot hold `needed` descriptors.
fn check_nofile(needed: u64) -> Result<(), String> {
    let Ok(limits) = std::fs::read_to_string("/proc/self/limits") else { return Ok(()) };
    let Some(line) = limits.lines().find(|l| l.starts_with("Max open files")) else {
        return Ok(());
    };
    let soft = line.split_whitespace().nth(3).and_then(|s| s.parse::<u64>().ok());
    match soft {
        Some(soft) if soft < needed => Err(format!(
            "the open-files limit is {soft}, {needed} are needed: run under `ulimit -n {}`",
            needed.next_power_of_two().max(65536)
        )),
        _ => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------------
// soak

/// What one client connection (slot) saw; merged at the end.
struct SoakStats {
    requests: u64,
    statuses: BTreeMap<u16, u64>,
    errors: BTreeMap<String, u64>,
    body_errors: BTreeMap<String, u64>,
    connect_errors: BTreeMap<String, u64>,
    /// `[allowed path, disallowed path]`, per origin: status → count.
    per_origin: Vec<[BTreeMap<u16, u64>; 2]>,
    /// Per origin: transport errors.
    origin_errors: Vec<u64>,
    connects: u64,
    reconnects: u64,
    /// Connections found closed before a request was sent on them.
    closed_idle: u64,
    blocked: Vec<(u32, u64)>,
    latency: Histogram,
    last_response: Option<Instant>,
}

impl SoakStats {
    fn new(origins: usize) -> Self {
        SoakStats {
            requests: 0,
            statuses: BTreeMap::new(),
            errors: BTreeMap::new(),
            body_errors: BTreeMap::new(),
            connect_errors: BTreeMap::new(),
            per_origin: (0..origins).map(|_| Default::default()).collect(),
            origin_errors: vec![0; origins],
            connects: 0,
            reconnects: 0,
            closed_idle: 0,
            blocked: Vec::new(),
            latency: Histogram::new(),
            last_response: None,
        }
    }

    fn merge(&mut self, o: SoakStats) {
        self.requests += o.requests;
        merge_into(&mut self.statuses, &o.statuses);
        merge_into(&mut self.errors, &o.errors);
        merge_into(&mut self.body_errors, &o.body_errors);
        merge_into(&mut self.connect_errors, &o.connect_errors);
        for (a, b) in self.per_origin.iter_mut().zip(&o.per_origin) {
            merge_into(&mut a[0], &b[0]);
            merge_into(&mut a[1], &b[1]);
        }
        for (a, b) in self.origin_errors.iter_mut().zip(&o.origin_errors) {
            *a += b;
        }
        self.connects += o.connects;
        self.reconnects += o.reconnects;
        self.closed_idle += o.closed_idle;
        self.blocked.extend(o.blocked);
        self.latency.merge(&o.latency);
        self.last_response = self.last_response.max(o.last_response);
    }
}

/// Counters read by the progress line.
#[derive(Default)]
struct Progress {
    requests: AtomicU64,
    responses: AtomicU64,
    blocked: AtomicU64,
    server_errors: AtomicU64,
    errors: AtomicU64,
}

struct SoakCtx {
    common: Common,
    origins: Vec<String>,
    deadline: Instant,
    disallow_fraction: f64,
    shuffle: bool,
    /// Connections being opened (connected, first request not answered yet).
    opening: Arc<Semaphore>,
    /// Time between two requests of one connection, when rate-limited.
    interval: Option<Duration>,
    seed: u64,
    progress: Progress,
}

async fn soak(common: Common, args: SoakArgs) -> Result<Value, String> {
    let origins = parse_origins(&args.origins)?;
    if args.conns == 0 {
        return Err("--conns must be at least 1".into());
    }
    if !(0.0..=1.0).contains(&args.disallow_fraction) {
        return Err("--disallow-fraction must be between 0 and 1".into());
    }
    let duration = Duration::try_from_secs_f64(args.duration)
        .map_err(|_| "--duration must be a number of seconds".to_string())?;
    check_nofile(u64::from(args.conns) + 64)?;
    let interval = if args.rate > 0.0 {
        Some(
            Duration::try_from_secs_f64(f64::from(args.conns) / args.rate)
                .map_err(|_| "--rate is out of range".to_string())?,
        )
    } else {
        None
    };
    let start = Instant::now();
    let ctx = Arc::new(SoakCtx {
        common,
        origins,
        deadline: start + duration,
        disallow_fraction: args.disallow_fraction,
        shuffle: args.order == "shuffle",
        opening: Arc::new(Semaphore::new(args.connect_concurrency.max(1))),
        interval,
        seed: args.seed,
        progress: Progress::default(),
    });
    eprintln!(
        "loadgen soak: {} connections to {} over {} origins for {:?}{}",
        args.conns,
        ctx.common.proxy,
        ctx.origins.len(),
        duration,
        interval.map(|_| format!(", {} requests/s in all", args.rate)).unwrap_or_default()
    );
    let mut tasks = JoinSet::new();
    let Some(last) = args.first_conn.checked_add(args.conns) else {
        return Err("--first-conn plus --conns is past the largest connection number".into());
    };
    for conn in args.first_conn..last {
        tasks.spawn(soak_connection(ctx.clone(), conn));
    }
    let reporter = (args.progress > 0.0).then(|| {
        let ctx = ctx.clone();
        let every = Duration::from_secs_f64(args.progress);
        tokio::spawn(async move { report_progress(ctx, start, every).await })
    });
    let mut total = SoakStats::new(ctx.origins.len());
    let mut task_failures = 0u64;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(stats) => total.merge(stats),
            Err(e) => {
                eprintln!("loadgen: a connection task failed: {e}");
                task_failures += 1;
            }
        }
    }
    if let Some(r) = reporter {
        r.abort();
    }
    let finished = Instant::now();
    if let Some(path) = &args.blocked_ids {
        total.blocked.sort_unstable();
        let written = std::fs::File::create(path).and_then(|f| {
            let mut out = std::io::BufWriter::new(f);
            for (conn, seq) in &total.blocked {
                writeln!(out, "id={conn}-{seq}")?;
            }
            out.flush()
        });
        if let Err(e) = written {
            return Err(format!("cannot write {}: {e}", path.display()));
        }
    }
    Ok(soak_summary(&ctx, &args, total, task_failures, start, finished))
}

fn soak_summary(
    ctx: &SoakCtx,
    args: &SoakArgs,
    total: SoakStats,
    task_failures: u64,
    start: Instant,
    finished: Instant,
) -> Value {
    let responses: u64 = total.statuses.values().sum();
    let errors: u64 = total.errors.values().sum();
    let mut allowed = BTreeMap::new();
    let mut disallowed = BTreeMap::new();
    let mut per_origin = Map::new();
    for (i, origin) in ctx.origins.iter().enumerate() {
        let [a, d] = &total.per_origin[i];
        merge_into(&mut allowed, a);
        merge_into(&mut disallowed, d);
        per_origin.insert(
            origin.clone(),
            json!({
                "allowed_path": counts_json(a),
                "disallowed_path": counts_json(d),
                "errors": total.origin_errors[i],
            }),
        );
    }
    let issuing = ctx.deadline.saturating_duration_since(start).as_secs_f64();
    let elapsed = finished.duration_since(start).as_secs_f64();
    let last = total.last_response.map_or(0.0, |t| t.duration_since(start).as_secs_f64());
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    json!({
        "mode": "soak",
        "proxy": ctx.common.proxy.to_string(),
        "conns": args.conns,
        "origins": ctx.origins.len(),
        "disallow_fraction": args.disallow_fraction,
        "order": args.order,
        "connect_concurrency": args.connect_concurrency,
        "rate_limit": args.rate,
        "duration_s": round(issuing),
        "elapsed_s": round(elapsed),
        "last_response_s": round(last),
        "requests": total.requests,
        "responses": responses,
        "errors_total": errors,
        "accounted": total.requests == responses + errors && task_failures == 0,
        "rps": round(responses as f64 / elapsed.max(1e-9)),
        "statuses": counts_json(&total.statuses),
        "errors": counts_json(&total.errors),
        "body_errors": counts_json(&total.body_errors),
        "connect_errors": counts_json(&total.connect_errors),
        "allowed_path": counts_json(&allowed),
        "disallowed_path": counts_json(&disallowed),
        "per_origin": per_origin,
        "blocked": total.blocked.len(),
        "connects": total.connects,
        "reconnects": total.reconnects,
        "closed_idle": total.closed_idle,
        "task_failures": task_failures,
        "latency_ms": total.latency.json(),
    })
}

async fn report_progress(ctx: Arc<SoakCtx>, start: Instant, every: Duration) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let mut last = 0u64;
    loop {
        tick.tick().await;
        let p = &ctx.progress;
        let responses = p.responses.load(Ordering::Relaxed);
        eprintln!(
            "loadgen soak: t={:>4.0}s requests={} responses={} ({:.0}/s) 403={} 5xx={} errors={}",
            start.elapsed().as_secs_f64(),
            p.requests.load(Ordering::Relaxed),
            responses,
            (responses - last) as f64 / every.as_secs_f64(),
            p.blocked.load(Ordering::Relaxed),
            p.server_errors.load(Ordering::Relaxed),
            p.errors.load(Ordering::Relaxed),
        );
        last = responses;
    }
}

/// One client connection slot: requests back to back (or at the configured pace) until the
/// deadline, reconnecting whenever the connection closes.
async fn soak_connection(ctx: Arc<SoakCtx>, conn: u32) -> SoakStats {
    let n = ctx.origins.len();
    let mut stats = SoakStats::new(n);
    let mut rng = Rng::new(ctx.seed.wrapping_mul(1_000_003).wrapping_add(u64::from(conn)));
    let mut sender: Option<Sender> = None;
    // Held from connecting until the first answer on the connection (see `IdleArgs`).
    let mut opening: Option<tokio::sync::OwnedSemaphorePermit> = None;
    let mut ever_connected = false;
    let mut seq = 0u64;
    // Each connection takes the origins in an order of its own, shuffled again every round:
    // every origin gets the same share, and connections that were held up together (say, by a
    // robots.txt fetch that hangs) do not stay in step afterwards, hitting one origin at a time.
    // (`--order rotate`: in turn, starting at an origin of its own.)
    let mut order: Vec<usize> = (0..n).map(|i| (i + conn as usize) % n).collect();
    let mut next = n;
    let deadline = tokio::time::Instant::from_std(ctx.deadline);
    let mut pace = ctx.interval.map(|every| {
        // Spread the connections' first requests over one interval.
        let offset = every.mul_f64(f64::from(conn % 1024) / 1024.0);
        let mut t = tokio::time::interval_at(tokio::time::Instant::now() + offset, every);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    });
    loop {
        if let Some(t) = pace.as_mut() {
            tokio::select! {
                _ = t.tick() => {}
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        if Instant::now() >= ctx.deadline {
            break;
        }
        let mut s = match sender.take() {
            Some(s) if !s.is_closed() => s,
            previous => {
                if previous.is_some() {
                    stats.closed_idle += 1;
                }
                let permit = tokio::select! {
                    permit = ctx.opening.clone().acquire_owned() => permit.ok(),
                    () = tokio::time::sleep_until(deadline) => break,
                };
                match connect(ctx.common.proxy).await {
                    Ok(s) => {
                        opening = permit;
                        stats.connects += 1;
                        if ever_connected {
                            stats.reconnects += 1;
                        }
                        ever_connected = true;
                        s
                    }
                    Err(kind) => {
                        bump(&mut stats.connect_errors, kind);
                        ctx.progress.errors.fetch_add(1, Ordering::Relaxed);
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_millis(100)) => {}
                            () = tokio::time::sleep_until(deadline) => break,
                        }
                        continue;
                    }
                }
            }
        };
        if s.ready().await.is_err() {
            // Closed between the last response and now: no request was sent on it.
            stats.closed_idle += 1;
            drop(opening.take());
            continue;
        }
        seq += 1;
        if next == n {
            if ctx.shuffle {
                rng.shuffle(&mut order);
            }
            next = 0;
        }
        let origin = order[next];
        next += 1;
        let disallowed = rng.next_f64() < ctx.disallow_fraction;
        let path = if disallowed {
            format!("/private/{}?id={conn}-{seq}", seq % 1000)
        } else {
            format!("/page/{}?id={conn}-{seq}", seq % 1000)
        };
        stats.requests += 1;
        ctx.progress.requests.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        match send(&mut s, &ctx.origins[origin], &path, &ctx.common).await {
            Outcome::Response { status, body_error } => {
                let now = Instant::now();
                stats.latency.record(now - started);
                stats.last_response = Some(now);
                bump(&mut stats.statuses, status);
                bump(&mut stats.per_origin[origin][usize::from(disallowed)], status);
                if let Some(kind) = body_error {
                    bump(&mut stats.body_errors, kind);
                }
                ctx.progress.responses.fetch_add(1, Ordering::Relaxed);
                if status == 403 {
                    stats.blocked.push((conn, seq));
                    ctx.progress.blocked.fetch_add(1, Ordering::Relaxed);
                }
                if status >= 500 {
                    ctx.progress.server_errors.fetch_add(1, Ordering::Relaxed);
                }
                // A connection the proxy closes after this response is replaced next round.
                sender = Some(s);
            }
            Outcome::Error(kind) => {
                bump(&mut stats.errors, kind);
                stats.origin_errors[origin] += 1;
                ctx.progress.errors.fetch_add(1, Ordering::Relaxed);
                // The connection is in an unknown state: drop it and open another.
            }
        }
        drop(opening.take());
    }
    stats
}

// ---------------------------------------------------------------------------------------------
// idle

async fn idle(common: Common, args: IdleArgs) -> Result<Value, String> {
    let origins = parse_origins(&args.origins)?;
    let hold = Duration::try_from_secs_f64(args.hold)
        .map_err(|_| "--hold must be a number of seconds".to_string())?;
    let sample_every = Duration::try_from_secs_f64(args.sample_every)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or("--sample-every must be a positive number of seconds")?;
    check_nofile(u64::from(args.conns) + 64)?;
    let common = Arc::new(common);
    let rss = |pid: Option<u32>| pid.and_then(rss_kib);
    let start = Instant::now();

    // Warm up: `request_concurrency` requests at once, each on a connection of its own, so that
    // robots.txt is fetched and cached, the proxy's lazily built state exists and its pool holds
    // as many origin connections as the requests below will need, before the baseline is read.
    let mut warmup = BTreeMap::new();
    let mut tasks = JoinSet::new();
    for i in 0..args.request_concurrency.max(1) {
        let common = common.clone();
        let origin = origins[i % origins.len()].clone();
        tasks.spawn(async move {
            match connect(common.proxy).await {
                Ok(mut s) => send(&mut s, &origin, "/page/warmup", &common).await,
                Err(kind) => Outcome::Error(kind),
            }
        });
    }
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Outcome::Response { status, .. }) => bump(&mut warmup, status.to_string()),
            Ok(Outcome::Error(kind)) => bump(&mut warmup, kind),
            Err(e) => bump(&mut warmup, format!("task:{e}")),
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_before = rss(args.rss_pid);
    eprintln!("loadgen idle: warm-up {warmup:?}, proxy RSS {rss_before:?} KiB");

    // Open: at most `connect_concurrency` connections being opened (connected, first request
    // not yet answered) at once, and at most `request_concurrency` requests in flight, so the
    // proxy needs only a few origin connections and the figure is about client connections.
    let open_started = Instant::now();
    let connects = Arc::new(Semaphore::new(args.connect_concurrency.max(1)));
    let requests = Arc::new(Semaphore::new(args.request_concurrency.max(1)));
    let mut tasks = JoinSet::new();
    for i in 0..args.conns {
        let (connects, requests) = (connects.clone(), requests.clone());
        let common = common.clone();
        let origin = origins[i as usize % origins.len()].clone();
        tasks.spawn(async move {
            // Held until the first response: the kernel completes a connect before the proxy
            // accepts it, so only an answer shows that the connection left the listen queue.
            // This keeps at most `connect_concurrency` connections in that queue.
            let Ok(_opening) = connects.acquire_owned().await else {
                return (i, Err("semaphore closed".to_string()), None);
            };
            let mut s = match connect(common.proxy).await {
                Ok(s) => s,
                Err(kind) => return (i, Err(kind), None),
            };
            let Ok(_request) = requests.acquire_owned().await else {
                return (i, Err("semaphore closed".to_string()), None);
            };
            let outcome = send(&mut s, &origin, &format!("/page/idle-{i}-1"), &common).await;
            (i, Ok(outcome), Some(s))
        });
    }
    let mut first = BTreeMap::new();
    let mut held: Vec<(u32, Sender)> = Vec::with_capacity(args.conns as usize);
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((i, Ok(Outcome::Response { status, .. }), Some(s))) => {
                bump(&mut first, status.to_string());
                if status == 200 {
                    held.push((i, s));
                }
            }
            Ok((_, Ok(Outcome::Response { status, .. }), None)) => {
                bump(&mut first, status.to_string());
            }
            Ok((_, Ok(Outcome::Error(kind)) | Err(kind), _)) => bump(&mut first, kind),
            Err(e) => bump(&mut first, format!("task:{e}")),
        }
    }
    let open_seconds = open_started.elapsed().as_secs_f64();
    let opened = held.len() as u64;
    // Let the proxy's connection tasks settle (buffers released after the response) first.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_open = rss(args.rss_pid);
    eprintln!(
        "loadgen idle: {opened} of {} connections open with one request answered 200 \
         ({open_seconds:.1}s, {first:?}), proxy RSS {rss_open:?} KiB; holding {hold:?}",
        args.conns
    );

    // Hold, sampling the proxy's RSS.
    let mut samples = vec![json!({"t": round1(start.elapsed()), "rss_kib": rss_open})];
    let hold_until = tokio::time::Instant::now() + hold;
    loop {
        let next = tokio::time::Instant::now() + sample_every;
        if next >= hold_until {
            tokio::time::sleep_until(hold_until).await;
            break;
        }
        tokio::time::sleep_until(next).await;
        let now_rss = rss(args.rss_pid);
        let closed = held.iter().filter(|(_, s)| s.is_closed()).count();
        eprintln!(
            "loadgen idle: t={:.0}s proxy RSS {now_rss:?} KiB, {closed} closed",
            start.elapsed().as_secs_f64()
        );
        samples.push(json!({"t": round1(start.elapsed()), "rss_kib": now_rss, "closed": closed}));
    }
    let rss_held = rss(args.rss_pid);
    let closed_during_hold = held.iter().filter(|(_, s)| s.is_closed()).count() as u64;
    samples.push(json!({"t": round1(start.elapsed()), "rss_kib": rss_held}));

    // A second request on every connection.
    let mut tasks = JoinSet::new();
    for (i, mut s) in held {
        let permits = requests.clone();
        let common = common.clone();
        let origin = origins[i as usize % origins.len()].clone();
        tasks.spawn(async move {
            let Ok(_permit) = permits.acquire_owned().await else {
                return Outcome::Error("semaphore closed".into());
            };
            if s.is_closed() {
                return Outcome::Error("closed_during_hold".into());
            }
            send(&mut s, &origin, &format!("/page/idle-{i}-2"), &common).await
        });
    }
    let mut second = BTreeMap::new();
    let mut usable = 0u64;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Outcome::Response { status, .. }) => {
                usable += u64::from(status == 200);
                bump(&mut second, status.to_string());
            }
            Ok(Outcome::Error(kind)) => bump(&mut second, kind),
            Err(e) => bump(&mut second, format!("task:{e}")),
        }
    }
    let rss_end = rss(args.rss_pid);
    let per_conn = |after: Option<u64>| match (rss_before, after) {
        (Some(b), Some(a)) if opened > 0 => json!(round1_f((a as f64 - b as f64) / opened as f64)),
        _ => Value::Null,
    };
    Ok(json!({
        "mode": "idle",
        "proxy": common.proxy.to_string(),
        "conns": args.conns,
        "hold_s": args.hold,
        "connect_concurrency": args.connect_concurrency,
        "request_concurrency": args.request_concurrency,
        "warmup": counts_json(&warmup),
        "first_request": counts_json(&first),
        "opened": opened,
        "open_seconds": round1_f(open_seconds),
        "closed_during_hold": closed_during_hold,
        "second_request": counts_json(&second),
        "usable_after_hold": usable,
        "rss_before_kib": rss_before,
        "rss_open_kib": rss_open,
        "rss_held_kib": rss_held,
        "rss_end_kib": rss_end,
        "kib_per_conn_open": per_conn(rss_open),
        "kib_per_conn_held": per_conn(rss_held),
        "rss_samples": samples,
        "loadgen_rss_kib": rss_kib(std::process::id()),
    }))
}

fn round1(d: Duration) -> f64 {
    round1_f(d.as_secs_f64())
}

fn round1_f(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_parse() {
        assert_eq!(
            parse_origins("127.0.0.1:18100-18102, localhost:80").unwrap(),
            ["127.0.0.1:18100", "127.0.0.1:18101", "127.0.0.1:18102", "localhost:80"]
        );
        assert!(parse_origins("127.0.0.1").is_err());
        assert!(parse_origins("127.0.0.1:9-8").is_err());
        assert!(parse_origins("").is_err());
    }

    #[test]
    fn histogram_buckets_bound_their_values() {
        for us in [0u64, 1, 3, 4, 5, 7, 8, 100, 1_000, 123_456, 10_000_000] {
            let i = Histogram::index(us);
            assert!(Histogram::upper(i) >= us, "{us} in bucket {i}");
            assert!(i == 0 || Histogram::upper(i - 1) < us, "{us} in bucket {i}");
        }
    }

    #[test]
    fn rng_fraction_is_about_right() {
        let mut rng = Rng::new(7);
        let hits = (0..100_000).filter(|_| rng.next_f64() < 0.1).count();
        assert!((9_000..11_000).contains(&hits), "{hits}");
        let mut items: Vec<usize> = (0..20).collect();
        rng.shuffle(&mut items);
        items.sort_unstable();
        assert_eq!(items, (0..20).collect::<Vec<_>>());
    }
}
