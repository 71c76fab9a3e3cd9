//! A real redis-server on a free loopback port, an origin that notes when each request
//! arrives, and the proxy binary in fleet mode.

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::ops::support::ProxyProcess;

/// `redis-server` on 127.0.0.1, no persistence; stopped (by PID) on drop.
pub struct Redis {
    pub port: u16,
    child: Option<Child>,
}

/// Whether Debian's redis-server is installed (`.ci/run` installs it).
pub fn have_redis() -> bool {
    Command::new("redis-server").arg("--version").output().is_ok_and(|o| o.status.success())
}

impl Redis {
    /// Starts a redis-server on a free port; `None` (the test says why) without one, on a
    /// developer's machine. Under CI (`CI` set) its absence fails the test: `.ci/run`
    /// installs it.
    pub async fn start() -> Option<Redis> {
        if !have_redis() {
            crate::skip::missing("redis-server", "apt-get install redis-server");
            return None;
        }
        let port = StdListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut redis = Redis { port, child: None };
        redis.restart().await;
        Some(redis)
    }

    /// `redis://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A connection of the test's own (not counted as any instance's).
    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url()).unwrap().get_connection().unwrap()
    }

    /// The commands this server has processed so far (`INFO stats`), the test's own
    /// `INFO` calls included.
    pub fn commands(&self) -> u64 {
        let info: String = redis::cmd("INFO").arg("stats").query(&mut self.connection()).unwrap();
        info.lines()
            .find_map(|l| l.strip_prefix("total_commands_processed:"))
            .and_then(|n| n.trim().parse().ok())
            .expect("INFO stats has total_commands_processed")
    }

    /// The scripts this server has run so far (`EVALSHA` and `EVAL`, `INFO commandstats`).
    pub fn script_calls(&self) -> u64 {
        let info: String =
            redis::cmd("INFO").arg("commandstats").query(&mut self.connection()).unwrap();
        info.lines()
            .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
            .filter_map(|l| l.split_once("calls=")?.1.split(',').next()?.parse::<u64>().ok())
            .sum()
    }

    /// How many times this server has run `command` so far (`INFO commandstats`).
    pub fn calls(&self, command: &str) -> u64 {
        let info: String =
            redis::cmd("INFO").arg("commandstats").query(&mut self.connection()).unwrap();
        let prefix = format!("cmdstat_{}:calls=", command.to_ascii_lowercase());
        info.lines()
            .find_map(|l| l.strip_prefix(&prefix)?.split(',').next()?.parse::<u64>().ok())
            .unwrap_or(0)
    }

    /// From now on, keeps every command this server runs in its slow log (`SLOWLOG`, a
    /// threshold of 0), up to 100,000.
    pub fn log_every_command(&self) {
        let mut c = self.connection();
        let mut set = |name: &str, value: i64| {
            redis::cmd("CONFIG").arg("SET").arg(name).arg(value).query::<()>(&mut c).unwrap();
        };
        set("slowlog-max-len", 100_000);
        set("slowlog-log-slower-than", -1);
        redis::cmd("SLOWLOG").arg("RESET").query::<()>(&mut self.connection()).unwrap();
        let mut c = self.connection();
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("slowlog-log-slower-than")
            .arg(0)
            .query::<()>(&mut c)
            .unwrap();
    }

    /// The scripts run since [`Redis::log_every_command`] whose first key starts with
    /// `first_key` (e.g. a site's pace key), oldest first: each one's arguments as the log kept
    /// them (at most 32, `EVALSHA` and the script's hash included).
    pub fn scripts_on(&self, first_key: &str) -> Vec<Vec<String>> {
        type Entry = (i64, i64, i64, Vec<String>, String, String);
        let log: Vec<Entry> =
            redis::cmd("SLOWLOG").arg("GET").arg(-1).query(&mut self.connection()).unwrap();
        log.into_iter()
            .rev()
            .map(|e| e.3)
            .filter(|args| args.first().is_some_and(|c| c.eq_ignore_ascii_case("evalsha")))
            .filter(|args| args.get(3).is_some_and(|k| k.starts_with(first_key)))
            .collect()
    }

    /// Starts it again on the same port (after [`Redis::stop`]), and waits until it answers.
    pub async fn restart(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--enable-debug-command", "local"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        for _ in 0..500 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("redis-server did not listen on {}", self.port);
    }

    /// Makes it answer nothing for `pause` (`DEBUG SLEEP`), from another thread; the handle
    /// ends when Redis answers again, and fails if it never did.
    pub fn pause(&self, pause: Duration) -> std::thread::JoinHandle<()> {
        let mut c = self.connection();
        std::thread::spawn(move || {
            redis::cmd("DEBUG").arg("SLEEP").arg(pause.as_secs_f64()).query::<()>(&mut c).unwrap();
        })
    }

    /// The members of the sorted set `key` with their scores, and Redis's clock, both in
    /// microseconds.
    pub fn scores(&self, key: &str) -> (Vec<(String, f64)>, f64) {
        let mut c = self.connection();
        let members: Vec<(String, f64)> =
            redis::cmd("ZRANGE").arg(key).arg(0).arg(-1).arg("WITHSCORES").query(&mut c).unwrap();
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut c).unwrap();
        (members, (secs * 1_000_000 + micros) as f64)
    }

    /// The keys matching `pattern`.
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        redis::cmd("KEYS").arg(pattern).query(&mut self.connection()).unwrap()
    }

    /// Stops it (kill by PID) and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// An origin that notes what arrives and when. `/robots.txt` answers `robots` (as it was when
/// the request arrived) after `robots_delay`; `/.well-known/tdmrep.json` after 300 ms (or as
/// set); `/hold` answers after 300 ms (to measure requests in flight), `/slow/MS`
/// after MS milliseconds; anything else at once.
pub struct TimedOrigin {
    pub addr: SocketAddr,
    arrivals: Arc<Mutex<Vec<(String, Instant)>>>,
    most_in_flight: Arc<AtomicUsize>,
    robots: Arc<Mutex<String>>,
    /// How long `/.well-known/tdmrep.json` takes, in ms (300 unless set).
    tdmrep_ms: Arc<AtomicUsize>,
}

impl TimedOrigin {
    pub async fn start(robots: &str, robots_delay: Duration) -> TimedOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let arrivals: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
        let most_in_flight = Arc::new(AtomicUsize::new(0));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let robots = Arc::new(Mutex::new(robots.to_owned()));
        let shared_robots = robots.clone();
        let tdmrep_ms = Arc::new(AtomicUsize::new(300));
        let shared_tdmrep_ms = tdmrep_ms.clone();
        let (a, m) = (arrivals.clone(), most_in_flight.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let (a, m, f, robots) = (a.clone(), m.clone(), in_flight.clone(), robots.clone());
                let tdmrep_ms = tdmrep_ms.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let (a, m, f, robots) = (a.clone(), m.clone(), f.clone(), robots.clone());
                        let tdmrep_ms = tdmrep_ms.load(Ordering::SeqCst) as u64;
                        async move {
                            let target = req.uri().path().to_owned();
                            a.lock().unwrap().push((target.clone(), Instant::now()));
                            let now = f.fetch_add(1, Ordering::SeqCst) + 1;
                            m.fetch_max(now, Ordering::SeqCst);
                            let body = match target.as_str() {
                                "/robots.txt" => {
                                    // As it was when the request came: a change meanwhile is
                                    // seen by the next fetch only.
                                    let robots = robots.lock().unwrap().clone();
                                    tokio::time::sleep(robots_delay).await;
                                    robots
                                }
                                // TDMRep: reserved under /reserved/ only.
                                "/.well-known/tdmrep.json" => {
                                    // Slow enough that instances asking together overlap.
                                    tokio::time::sleep(Duration::from_millis(tdmrep_ms)).await;
                                    r#"[{"location": "/reserved/", "tdm-reservation": 1}]"#
                                        .to_owned()
                                }
                                "/hold" => {
                                    tokio::time::sleep(Duration::from_millis(300)).await;
                                    "held".to_owned()
                                }
                                other => {
                                    let slow = other.strip_prefix("/slow/");
                                    if let Some(ms) = slow.and_then(|ms| ms.parse().ok()) {
                                        tokio::time::sleep(Duration::from_millis(ms)).await;
                                    }
                                    format!("hello from {other}")
                                }
                            };
                            f.fetch_sub(1, Ordering::SeqCst);
                            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(body))))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        TimedOrigin {
            addr,
            arrivals,
            most_in_flight,
            robots: shared_robots,
            tdmrep_ms: shared_tdmrep_ms,
        }
    }

    /// `/.well-known/tdmrep.json` takes `delay` from now on.
    pub fn set_tdmrep_delay(&self, delay: Duration) {
        self.tdmrep_ms.store(delay.as_millis() as usize, Ordering::SeqCst);
    }

    /// Serves `robots` as robots.txt from now on.
    pub fn set_robots(&self, robots: &str) {
        *self.robots.lock().unwrap() = robots.to_owned();
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// How many requests for `path` arrived.
    pub fn hits(&self, path: &str) -> usize {
        self.arrivals.lock().unwrap().iter().filter(|(t, _)| t == path).count()
    }

    /// When the requests for anything but robots.txt arrived, in order.
    pub fn content_arrivals(&self) -> Vec<Instant> {
        let mut times: Vec<Instant> = self
            .arrivals
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _)| t != "/robots.txt")
            .map(|(_, at)| *at)
            .collect();
        times.sort();
        times
    }

    /// When the requests whose path starts with `prefix` arrived, in order.
    pub fn arrivals(&self, prefix: &str) -> Vec<Instant> {
        let arrivals = self.arrivals.lock().unwrap();
        let mut times: Vec<Instant> =
            arrivals.iter().filter(|(t, _)| t.starts_with(prefix)).map(|(_, at)| *at).collect();
        times.sort();
        times
    }

    /// The paths that start with `prefix`, in the order they arrived.
    pub fn paths(&self, prefix: &str) -> Vec<String> {
        let arrivals = self.arrivals.lock().unwrap();
        let mut seen: Vec<(Instant, String)> = arrivals
            .iter()
            .filter(|(t, _)| t.starts_with(prefix))
            .map(|(t, at)| (*at, t.clone()))
            .collect();
        seen.sort();
        seen.into_iter().map(|(_, t)| t).collect()
    }

    /// Waits (up to 10 s) until a request for `path` has arrived.
    pub async fn until_arrived(&self, path: &str) {
        for _ in 0..1000 {
            if self.hits(path) > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{path} never arrived");
    }

    /// The most requests (robots.txt included) in flight at once.
    pub fn most_in_flight(&self) -> usize {
        self.most_in_flight.load(Ordering::SeqCst)
    }
}

/// Proxy processes of one fleet, each with a state directory of its own.
pub struct Fleet {
    pub instances: Vec<ProxyProcess>,
    _dirs: Vec<tempfile::TempDir>,
}

/// Starts `n` proxy processes sharing `redis` under a key prefix of the test's own, with
/// `env` added (`ROBOTS_PROXY_…`).
pub fn fleet(n: usize, redis: &Redis, prefix: &str, env: &[(&str, &str)]) -> Fleet {
    fleet_at(&vec![redis.url(); n], prefix, env)
}

/// [`fleet`], one instance per URL, each reaching Redis at its own.
pub fn fleet_at(urls: &[String], prefix: &str, env: &[(&str, &str)]) -> Fleet {
    fleet_each(urls, prefix, env, &vec![&[][..]; urls.len()])
}

/// [`fleet_at`], instance `i` with `each[i]` added to `env` (e.g. a clock of its own).
pub fn fleet_each(
    urls: &[String],
    prefix: &str,
    env: &[(&str, &str)],
    each: &[&[(&str, &str)]],
) -> Fleet {
    let n = urls.len();
    let prefix = format!("test-{prefix}:");
    let dirs: Vec<tempfile::TempDir> = (0..n).map(|_| tempfile::tempdir().unwrap()).collect();
    let instances = (0..n)
        .map(|i| {
            let name = format!("instance-{i}");
            let mut all: Vec<(&str, &str)> = vec![
                ("ROBOTS_PROXY_FLEET__REDIS", &urls[i]),
                ("ROBOTS_PROXY_FLEET__KEY_PREFIX", &prefix),
                ("ROBOTS_PROXY_FLEET__INSTANCE", &name),
            ];
            all.extend_from_slice(env);
            all.extend_from_slice(each.get(i).copied().unwrap_or_default());
            let state = dirs[i].path().to_string_lossy().into_owned();
            all.push(("ROBOTS_PROXY_STATE_DIR", &state));
            ProxyProcess::start(&[], &all)
        })
        .collect();
    Fleet { instances, _dirs: dirs }
}

impl Fleet {
    /// The state directory (audit log) of instance `i`.
    pub fn state_dir(&self, i: usize) -> &std::path::Path {
        self._dirs[i].path()
    }
}

/// One proxy process on its own (no fleet), with `env` added and a state directory.
pub fn alone(env: &[(&str, &str)]) -> (ProxyProcess, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().to_string_lossy().into_owned();
    let mut all = env.to_vec();
    all.push(("ROBOTS_PROXY_STATE_DIR", &state));
    (ProxyProcess::start(&[], &all), dir)
}

/// A client that goes through the proxy at `addr`.
pub fn client(addr: SocketAddr) -> reqwest::Client {
    crate::proxy::support::reqwest_builder()
        .proxy(reqwest::Proxy::all(format!("http://{addr}")).unwrap())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// A TCP relay on a free loopback port to the port `to`, connection by connection. One
/// relayed connection can be made silent ([`Relay::silence`]): nothing more crosses it either
/// way and neither end is closed, as when a NAT or a load balancer drops a connection or the
/// far host is cut off (a half-open path: no FIN, no RST).
pub struct Relay {
    pub port: u16,
    links: Links,
}

/// Per relayed connection: the local port of its side towards the relay's target, and its
/// silencer.
type Links = Arc<Mutex<Vec<(u16, tokio::sync::watch::Sender<bool>)>>>;

impl Relay {
    pub async fn start(to: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let links: Links = Arc::default();
        let all = links.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut near, _)) = listener.accept().await else { return };
                let Ok(mut far) = tokio::net::TcpStream::connect(("127.0.0.1", to)).await else {
                    continue;
                };
                let local = far.local_addr().unwrap().port();
                let (silence, mut silenced) = tokio::sync::watch::channel(false);
                all.lock().unwrap().push((local, silence));
                tokio::spawn(async move {
                    let silent = tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut near, &mut far) => false,
                        _ = silenced.wait_for(|s| *s) => true,
                    };
                    if silent {
                        // Both sockets stay open, and nothing is read or written any more.
                        std::future::pending::<()>().await;
                    }
                });
            }
        });
        Relay { port, links }
    }

    /// A relay to the port `to` that holds every chunk `delay` before passing it on, each way:
    /// a link whose round trip is twice `delay` (a far Redis, a cross-zone link).
    pub async fn start_delayed(to: u16, delay: Duration) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let Ok((near, _)) = listener.accept().await else { return };
                let Ok(far) = tokio::net::TcpStream::connect(("127.0.0.1", to)).await else {
                    continue;
                };
                let (near_read, near_write) = near.into_split();
                let (far_read, far_write) = far.into_split();
                tokio::spawn(delayed_copy(near_read, far_write, delay));
                tokio::spawn(delayed_copy(far_read, near_write, delay));
            }
        });
        Relay { port, links: Arc::default() }
    }

    /// `redis://127.0.0.1:PORT` of the relay.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Silences the relayed connection whose side towards `to` has the local port `port`:
    /// whether there was one.
    pub fn silence(&self, port: u16) -> bool {
        let links = self.links.lock().unwrap();
        let found = links.iter().find(|(p, _)| *p == port);
        found.is_some_and(|(_, silence)| silence.send(true).is_ok())
    }
}

/// Copies `from` to `to`, each chunk `delay` after it was read (chunks in order, bounded: a
/// closed side ends it).
async fn delayed_copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (send, mut chunks) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((due, chunk)) = chunks.recv().await {
            tokio::time::sleep_until(due.into()).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
    });
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 || send.send((Instant::now() + delay, buf[..n].to_vec())).is_err() {
            break;
        }
    }
    drop(send);
    let _ = writer.await;
}
