//! Redis set-ups that fail over, on loopback: a Redis Cluster of three primaries, each with a
//! replica, and a primary with a replica watched by a sentinel. Every process is a real
//! `redis-server` (`--sentinel` for the sentinel) on a free port, without persistence, stopped
//! by PID on drop. Every wait is bounded.

use std::net::TcpListener as StdListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One `redis-server` process, with a working directory of its own (a replica writes the
/// primary's snapshot there during a full sync; in the test's working directory it was left
/// behind as `dump.rdb`).
struct Node {
    port: u16,
    child: Option<Child>,
    _dir: tempfile::TempDir,
}

impl Node {
    fn spawn(args: &[&str]) -> Node {
        let port = free_port();
        Node::spawn_at(port, args)
    }

    fn spawn_at(port: u16, args: &[&str]) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new("redis-server")
            .args(args)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--dir", dir.path().to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        let node = Node { port, child: Some(child), _dir: dir };
        node.until_listening();
        node
    }

    fn until_listening(&self) {
        for _ in 0..500 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("redis-server did not listen on {}", self.port);
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `command` on the server at `port`, by the test's own connection; `None` if it failed.
fn ask<T: redis::FromRedisValue>(port: u16, command: &redis::Cmd) -> Option<T> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).ok()?;
    let mut c = client.get_connection_with_timeout(Duration::from_secs(1)).ok()?;
    command.query(&mut c).ok()
}

/// `INFO section` of the server at `port`, or empty.
fn info(port: u16, section: &str) -> String {
    ask(port, redis::cmd("INFO").arg(section)).unwrap_or_default()
}

/// Polls `done` every 50 ms until it holds, for at most `within`; panics naming `what`.
fn until(within: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + within;
    while Instant::now() < end {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what} within {within:?}");
}

/// A Redis Cluster of three primaries, each with one replica (`redis-cli --cluster create`).
pub struct Cluster {
    nodes: Vec<Node>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    /// Starts six nodes, makes the cluster and waits until every node says `cluster_state:ok`
    /// and every replica is in sync with its primary (so that it can be promoted).
    pub fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let nodes: Vec<Node> = (0..6)
            .map(|_| {
                let port = free_port();
                let conf = dir.path().join(format!("nodes-{port}.conf"));
                Node::spawn_at(
                    port,
                    &[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        conf.to_str().unwrap(),
                        "--cluster-node-timeout",
                        "1000",
                    ],
                )
            })
            .collect();
        let addresses: Vec<String> =
            nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        let made = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .expect("redis-cli runs");
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
        let cluster = Cluster { nodes, _dir: dir };
        cluster.until_ok(Duration::from_secs(30));
        until(Duration::from_secs(30), "every replica in sync", || {
            cluster.nodes.iter().all(|n| {
                let info = info(n.port, "replication");
                info.contains("role:master") || info.contains("master_link_status:up")
            })
        });
        cluster
    }

    /// Every node's URL (what `fleet.redis` lists).
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Node::url).collect()
    }

    /// Waits until every live node says `cluster_state:ok` with all 16384 slots served.
    pub fn until_ok(&self, within: Duration) {
        until(within, "cluster_state:ok on every node", || {
            self.nodes.iter().filter(|n| n.child.is_some()).all(|n| {
                let info: String =
                    ask(n.port, redis::cmd("CLUSTER").arg("INFO")).unwrap_or_default();
                info.contains("cluster_state:ok") && info.contains("cluster_slots_ok:16384")
            })
        });
    }

    /// The port of the primary that serves `key` now.
    pub fn primary_of(&self, key: &str) -> u16 {
        let live = self.nodes.iter().find(|n| n.child.is_some()).expect("a live node");
        let slot: u16 = ask(live.port, redis::cmd("CLUSTER").arg("KEYSLOT").arg(key)).unwrap();
        let nodes: String = ask(live.port, redis::cmd("CLUSTER").arg("NODES")).unwrap();
        for line in nodes.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            if fields.len() < 9 || !fields[2].contains("master") || fields[2].contains("fail") {
                continue;
            }
            let serves = fields[8..].iter().any(|range| {
                let (from, to) = range.split_once('-').unwrap_or((range, range));
                match (from.parse::<u16>(), to.parse::<u16>()) {
                    (Ok(from), Ok(to)) => (from..=to).contains(&slot),
                    _ => false,
                }
            });
            if serves {
                let address = fields[1].split('@').next().unwrap();
                return address.rsplit(':').next().unwrap().parse().unwrap();
            }
        }
        panic!("no primary serves slot {slot} of {key}");
    }

    /// Kills the node at `port` (SIGKILL): its replica is promoted once the cluster agrees it
    /// failed (`cluster-node-timeout` 1 s).
    pub fn kill(&mut self, port: u16) {
        let node = self.nodes.iter_mut().find(|n| n.port == port).expect("a node of the cluster");
        node.kill();
    }
}

/// A primary, its replica and a sentinel watching them (`mymaster`, quorum 1, down after 1 s).
pub struct Sentinels {
    primary: Node,
    replica: Node,
    sentinel: Node,
    _dir: tempfile::TempDir,
}

/// The name the sentinel monitors the primary under.
pub const SERVICE: &str = "mymaster";

impl Sentinels {
    /// Starts the three and waits until the sentinel knows the primary and its replica, and the
    /// replica is in sync.
    pub fn start() -> Sentinels {
        let dir = tempfile::tempdir().unwrap();
        let primary = Node::spawn(&[]);
        let replica = Node::spawn(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
        let port = free_port();
        let conf = dir.path().join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "sentinel monitor {SERVICE} 127.0.0.1 {} 1\n\
                 sentinel down-after-milliseconds {SERVICE} 1000\n\
                 sentinel failover-timeout {SERVICE} 10000\n\
                 sentinel parallel-syncs {SERVICE} 1\n",
                primary.port
            ),
        )
        .unwrap();
        let sentinel = Node::spawn_at(port, &[conf.to_str().unwrap(), "--sentinel"]);
        let set = Sentinels { primary, replica, sentinel, _dir: dir };
        until(Duration::from_secs(30), "the replica in sync", || {
            info(set.replica.port, "replication").contains("master_link_status:up")
        });
        until(Duration::from_secs(30), "the sentinel knows the replica", || {
            let replicas: Vec<redis::Value> =
                ask(set.sentinel.port, redis::cmd("SENTINEL").arg("REPLICAS").arg(SERVICE))
                    .unwrap_or_default();
            !replicas.is_empty()
        });
        set
    }

    /// The sentinel's URL.
    pub fn sentinel_url(&self) -> String {
        self.sentinel.url()
    }

    /// Kills the primary (SIGKILL): the sentinel promotes the replica.
    pub fn kill_primary(&mut self) {
        self.primary.kill();
    }

    /// Waits until the sentinel names the replica as the primary.
    pub fn until_promoted(&self, within: Duration) {
        let replica = self.replica.port.to_string();
        until(within, "the sentinel promoted the replica", || {
            let addr: Vec<String> = ask(
                self.sentinel.port,
                redis::cmd("SENTINEL").arg("GET-MASTER-ADDR-BY-NAME").arg(SERVICE),
            )
            .unwrap_or_default();
            addr.get(1) == Some(&replica)
                && info(self.replica.port, "replication").contains("role:master")
        });
    }
}
