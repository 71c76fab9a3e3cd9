//! Real origins on 127.0.0.1 for the cache tests, written on raw tokio sockets so they can
//! also misbehave (hang, reset, send garbage).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use robots_proxy::authority::{Authority, Scheme};
use robots_proxy::cache::{RobotsCache, RobotsRules, RobotsSnapshot};
use robots_proxy::clock::ManualClock;
use robots_proxy::config::RobotsSection;
use robots_proxy::robots::ProductToken;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// The User-Agent the test caches fetch with.
pub const TEST_AGENT: &str = "robots-proxy-test/1.0";

/// How an origin answers one path.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A well-formed HTTP/1.1 response, sent after `delay`, then the connection is closed.
    Http { status: u16, headers: Vec<(String, String)>, body: Vec<u8>, delay: Duration },
    /// These bytes as they are, then close.
    Raw(Vec<u8>),
    /// Read the request, never answer (the connection stays open until the test ends).
    Hang,
    /// Send these bytes, then reset the connection (RST, not FIN).
    ResetAfter(Vec<u8>),
}

impl Reply {
    /// 200 with `body`.
    pub fn ok(body: impl Into<Vec<u8>>) -> Self {
        Reply::Http { status: 200, headers: Vec::new(), body: body.into(), delay: Duration::ZERO }
    }

    /// `status` with a short body.
    pub fn status(status: u16) -> Self {
        Reply::Http {
            status,
            headers: Vec::new(),
            body: format!("status {status}\n").into_bytes(),
            delay: Duration::ZERO,
        }
    }

    /// A `status` redirect to `location`.
    pub fn redirect(status: u16, location: &str) -> Self {
        Reply::status(status).header("Location", location)
    }

    /// The same reply with one more header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        if let Reply::Http { headers, .. } = &mut self {
            headers.push((name.to_owned(), value.to_owned()));
        }
        self
    }

    /// The same reply, sent after `by`.
    pub fn delayed(mut self, by: Duration) -> Self {
        if let Reply::Http { delay, .. } = &mut self {
            *delay = by;
        }
        self
    }
}

#[derive(Default)]
struct State {
    routes: Mutex<HashMap<String, Reply>>,
    hits: Mutex<HashMap<String, usize>>,
    user_agents: Mutex<Vec<String>>,
}

/// An origin server on 127.0.0.1: answers each path as told, counts requests per path.
/// Unknown paths get 404. Stops when dropped.
pub struct Origin {
    addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl Origin {
    /// An origin listening on an ephemeral loopback port.
    pub async fn start() -> Origin {
        Origin::start_on("127.0.0.1").await
    }

    /// An origin listening on an ephemeral port of `ip`, a loopback address (another host
    /// than 127.0.0.1 for what is counted per host).
    pub async fn start_on(ip: &str) -> Origin {
        let listener = TcpListener::bind((ip, 0)).await.expect("bind a loopback address");
        let addr = listener.local_addr().expect("local_addr");
        let state = Arc::new(State::default());
        let serving = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(handle(socket, serving.clone()));
            }
        });
        Origin { addr, state, task }
    }

    /// An origin that answers `/robots.txt` with `reply`.
    pub async fn with_robots(reply: Reply) -> Origin {
        let origin = Origin::start().await;
        origin.route("/robots.txt", reply);
        origin
    }

    /// Answers `path` with `reply` from now on.
    pub fn route(&self, path: &str, reply: Reply) {
        self.state.routes.lock().unwrap().insert(path.to_owned(), reply);
    }

    /// Requests received for `path` so far.
    pub fn hits(&self, path: &str) -> usize {
        self.state.hits.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    /// Requests received for `/robots.txt` so far.
    pub fn robots_hits(&self) -> usize {
        self.hits("/robots.txt")
    }

    /// The User-Agent headers received, in order.
    pub fn user_agents(&self) -> Vec<String> {
        self.state.user_agents.lock().unwrap().clone()
    }

    /// `http://127.0.0.1:port`
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The origin's authority.
    pub fn authority(&self) -> Authority {
        Authority::new(Scheme::Http, &self.addr.ip().to_string(), self.addr.port())
            .expect("loopback authority")
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(mut socket: TcpStream, state: Arc<State>) {
    let Some(head) = read_head(&mut socket).await else { return };
    let mut lines = head.split("\r\n");
    let path = lines.next().and_then(|l| l.split(' ').nth(1)).unwrap_or("").to_owned();
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            if name.trim().eq_ignore_ascii_case("user-agent") {
                state.user_agents.lock().unwrap().push(value.trim().to_owned());
            }
        }
    }
    *state.hits.lock().unwrap().entry(path.clone()).or_default() += 1;
    let reply = state.routes.lock().unwrap().get(&path).cloned().unwrap_or(Reply::status(404));
    match reply {
        Reply::Http { status, headers, body, delay } => {
            tokio::time::sleep(delay).await;
            let mut out = format!(
                "HTTP/1.1 {status} Test\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                out.push_str(&format!("{name}: {value}\r\n"));
            }
            out.push_str("\r\n");
            let mut bytes = out.into_bytes();
            bytes.extend_from_slice(&body);
            // The client may stop reading early (size limit); a failed write is expected then.
            let _ = socket.write_all(&bytes).await;
            let _ = socket.shutdown().await;
        }
        Reply::Raw(bytes) => {
            let _ = socket.write_all(&bytes).await;
            let _ = socket.shutdown().await;
        }
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        Reply::ResetAfter(bytes) => {
            let _ = socket.write_all(&bytes).await;
            let _ = socket.set_zero_linger();
            drop(socket);
        }
    }
}

/// Reads a request head (up to the blank line), at most 64 KiB.
async fn read_head(socket: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        if buf.len() > 64 * 1024 {
            return None;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(String::from_utf8_lossy(&buf).into_owned())
}

/// Settings for tests: short timeouts, the rest as configured by default.
///
/// Refresh ahead is off: these tests pin what happens at a lifetime's end, moving the manual
/// clock to just before it (refresh ahead has its own tests: `crates/sitefiles/src/refresh.rs`,
/// `tests/ops/refresh_ahead.rs`).
pub fn settings() -> RobotsSection {
    RobotsSection {
        user_agent: TEST_AGENT.to_owned(),
        connect_timeout: Duration::from_secs(2),
        fetch_timeout: Duration::from_secs(5),
        refresh_ahead: 0.0,
        ..RobotsSection::default()
    }
}

/// A cache over `settings` and a manual clock standing at a fixed, arbitrary time.
pub fn cache_with(settings: RobotsSection) -> (Arc<RobotsCache>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1 << 30)));
    let cache = Arc::new(RobotsCache::new(settings, clock.clone()));
    (cache, clock)
}

/// A cache with [`settings`].
pub fn cache() -> (Arc<RobotsCache>, Arc<ManualClock>) {
    cache_with(settings())
}

/// Polls `condition` every 10 ms for at most `limit`; whether it became true.
pub async fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let rounds = (limit.as_millis() / 10).max(1);
    for _ in 0..rounds {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    condition()
}

/// Whether the rules in `snapshot` let `ExampleBot` fetch `path`.
pub fn allowed(snapshot: &RobotsSnapshot, path: &str) -> bool {
    let bot = ProductToken::new("ExampleBot").expect("valid token");
    match &snapshot.rules {
        RobotsRules::Parsed(robots) => robots.decide(Some(&bot), path).is_allowed(),
        RobotsRules::AllowAll => true,
        RobotsRules::DisallowAll => false,
    }
}

/// The entry for `authority` once no fetch of it is due: a failing origin's retry runs in the
/// background while its entry in force answers, so this asks until the retry's result is
/// stored (at most 5 s). Fetches nothing more than one `get` would.
pub async fn settled(
    cache: &RobotsCache,
    authority: &Authority,
    clock: &ManualClock,
) -> Arc<RobotsSnapshot> {
    use robots_proxy::clock::Clock;
    for _ in 0..500 {
        let snapshot = cache.get(authority).await;
        if snapshot.is_current(clock.now()) {
            return snapshot;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the robots.txt of {authority} never settled");
}
