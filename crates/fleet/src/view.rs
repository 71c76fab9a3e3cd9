//! The fleet as a whole: each instance announces itself with an expiring heartbeat, and every
//! instance lists the live ones (status page, `/api/summary`).
//!
//! Keys (after `fleet.key_prefix`): `instance:<name>`, a JSON [`Announcement`] that expires
//! after [`super::HEARTBEAT_TTL`] unless renewed, and `instances`, a sorted set of the names
//! that announced themselves, scored by when (Redis's clock, in milliseconds). The
//! view reads the set and then the announcements (`MGET`); a name whose announcement expired
//! is not listed, and leaves the set [`FORGET_AFTER`] after it last announced itself. No call
//! walks the keyspace (`SCAN`): the view costs the same however many keys Redis holds. On a
//! Redis Cluster both are in the fleet-wide slot ([`super::keys`]).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use super::{Fleet, HEARTBEAT, HEARTBEAT_TTL};

/// How long a name stays in the `instances` set after it last announced itself (on Redis's
/// clock): long past its announcement's expiry.
pub const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// The most instances the view lists (the latest to announce themselves).
const LIST_MAX: isize = 1000;

/// KEYS: the announcement, the `instances` set, the store's epoch. ARGV: the announcement
/// (JSON), its ttl (s), the name, how long a name stays in the set (ms), an epoch for a store
/// that has none. Announces the instance and returns the announcement it replaced (another
/// process of the same name, or this one's last) and the store's epoch. The set is scored by
/// Redis's clock (`TIME`), so instances whose clocks disagree keep one another in the view
/// (review-fleet N9).
///
/// The epoch is a random value the first instance to find none writes: a store that lost it
/// (restarted without persistence, flushed, a failover to a replica that never had it) lost
/// the fleet's pace with it, and every instance puts back what it knows
/// (`pace::ledger`, review-fleet N3).
const ANNOUNCE: &str = r"
local epoch = redis.call('GET', KEYS[3])
if not epoch then
  epoch = ARGV[5]
  redis.call('SET', KEYS[3], epoch)
end
local before = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local forget = tonumber(ARGV[4])
redis.call('ZADD', KEYS[2], now, ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. string.format('%d', now - forget))
redis.call('PEXPIRE', KEYS[2], forget)
return {before, epoch}
";

/// What an instance says about itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Announcement {
    /// `fleet.instance` (or `hostname:port`).
    pub name: String,
    /// The proxy listener's address.
    pub address: String,
    /// The robots-proxy version.
    pub version: String,
    /// When it started (RFC 3339).
    pub started: String,
    /// Requests it allowed since it started.
    pub allowed: u64,
    /// Requests it blocked (refused) since it started.
    pub blocked: u64,
    /// The process's random token ([`Fleet::nonce`]): two processes announcing the same name
    /// have different ones.
    #[serde(default)]
    pub nonce: String,
    /// The addresses its admin listener is reached at (a wildcard listener as every address
    /// of its host): every instance refuses them as destinations (review-fleet N10). Absent
    /// from older instances.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admin: Vec<String>,
}

/// The counters an instance announces: requests allowed and blocked.
pub type Counts = Arc<dyn Fn() -> (u64, u64) + Send + Sync>;

/// Announces this instance every [`HEARTBEAT`] and probes Redis (the round trip is the
/// `robots_proxy_fleet_redis_round_trip_seconds` gauge); runs until the process ends.
/// `admin`: where this instance's admin listener is reached ([`Announcement::admin`]).
pub async fn heartbeat(fleet: Arc<Fleet>, address: String, admin: Vec<String>, counts: Counts) {
    let key = fleet.keys.fleet_wide(&format!("instance:{}", fleet.instance()));
    let index = fleet.keys.fleet_wide("instances");
    let epoch_key = fleet.keys.fleet_wide("epoch");
    let forget = u64::try_from(FORGET_AFTER.as_millis()).unwrap_or(u64::MAX);
    // The store's epoch when last seen.
    let mut epoch: Option<String> = None;
    let started = humantime::format_rfc3339_seconds(fleet.started).to_string();
    let ttl = HEARTBEAT_TTL.as_secs();
    let announce = redis::Script::new(ANNOUNCE);
    // Other processes announcing this instance's name: how often each was seen.
    let mut namesakes = std::collections::HashMap::new();
    let mut tick = tokio::time::interval(HEARTBEAT);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (allowed, blocked) = counts();
        let me = Announcement {
            name: fleet.instance().to_owned(),
            address: address.clone(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            started: started.clone(),
            allowed,
            blocked,
            nonce: fleet.nonce().to_owned(),
            admin: admin.clone(),
        };
        let Ok(json) = serde_json::to_string(&me) else { continue };
        let mut invocation = announce.prepare_invoke();
        let fresh =
            format!("{}#{}", fleet.nonce(), humantime::format_rfc3339_nanos(SystemTime::now()));
        invocation.key(&key).key(&index).key(&epoch_key);
        invocation.arg(json).arg(ttl).arg(&me.name).arg(forget).arg(fresh);
        let was_down = !fleet.is_up();
        let began = Instant::now();
        // One round trip, which is also the probe (review-fleet N2: a PING before it made two,
        // and a link whose round trip exceeded half of fleet.timeout never came up).
        let announced: Result<(Option<String>, String), _> =
            fleet.attempt(|mut c| async move { invocation.invoke_async(&mut c).await }).await;
        if let Ok((_, now)) = &announced {
            let lost = epoch.as_ref().is_some_and(|e| e != now);
            if lost {
                tracing::warn!(
                    instance = %me.name,
                    "fleet: Redis lost the fleet's state (restarted without persistence, \
                     flushed, or failed over to a replica without it); putting back the slots \
                     this instance holds and the starts it made"
                );
            }
            // Back after an outage: what this instance admitted alone meanwhile, and what a
            // failover lost, go back too.
            if lost || (was_down && epoch.is_some()) {
                fleet.store_lost();
            }
            epoch = Some(now.clone());
        }
        if let Ok((Some(before), _)) = &announced {
            let other = serde_json::from_str::<Announcement>(before).ok();
            if let Some(other) = other.filter(|o| o.nonce != me.nonce) {
                // Seen once, it may be this instance's own before a restart, gone since; seen
                // again, it is alive.
                let seen = namesakes.entry(other.nonce.clone()).or_insert(0_u32);
                *seen += 1;
                if *seen == 2 {
                    tracing::warn!(
                        instance = %me.name, other_address = %other.address,
                        other_started = %other.started,
                        "fleet: another live instance has the same name; give every instance \
                         its own fleet.instance (the view shows only one of them)"
                    );
                }
            }
        }
        if announced.is_ok() {
            // One round trip (a little more on a new connection: see `Fleet::attempt`).
            let micros = u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX);
            fleet.rtt_micros.store(micros, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// The live instances of the fleet, by name; empty when Redis is out of reach. Two commands,
/// whatever else Redis holds: the names in the `instances` set, then their announcements.
pub async fn instances(fleet: &Fleet) -> Vec<Announcement> {
    let index = fleet.keys.fleet_wide("instances");
    let found = fleet
        .call(|mut c| async move {
            let names: Vec<String> = redis::cmd("ZREVRANGE")
                .arg(&index)
                .arg(0)
                .arg(LIST_MAX - 1)
                .query_async(&mut c)
                .await?;
            if names.is_empty() {
                return Ok(Vec::new());
            }
            let keys: Vec<String> =
                names.iter().map(|n| fleet.keys.fleet_wide(&format!("instance:{n}"))).collect();
            let values: Vec<Option<String>> =
                redis::cmd("MGET").arg(&keys).query_async(&mut c).await?;
            Ok(values)
        })
        .await
        .unwrap_or_default();
    let mut list: Vec<Announcement> =
        found.iter().flatten().filter_map(|v| serde_json::from_str(v).ok()).collect();
    list.sort_by(|a, b| a.name.cmp(&b.name));
    list
}

/// How often the admin listeners of the fleet's instances are read for the destination guard.
pub const PEERS_EVERY: Duration = Duration::from_secs(2);

/// Reads the fleet's view every [`PEERS_EVERY`] and hands every instance's announced admin
/// addresses to `refuse` (the destination guard), so that no proxy client reaches a peer's
/// admin listener through the proxy. While Redis is out of reach the last list stays in force
/// (the view is then empty, and this instance always lists itself when it is not). Runs until
/// the process ends.
pub async fn follow_peers(
    fleet: Arc<Fleet>,
    refuse: Arc<dyn Fn(Vec<std::net::SocketAddr>) + Send + Sync>,
) {
    let mut tick = tokio::time::interval(PEERS_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let list = instances(&fleet).await;
        if list.is_empty() {
            continue;
        }
        let addresses = list.iter().flat_map(|a| a.admin.iter()).filter_map(|a| a.parse().ok());
        refuse(addresses.collect());
    }
}

/// `hostname:port`, the default instance name.
pub fn default_name(port: u16) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}:{port}")
}
