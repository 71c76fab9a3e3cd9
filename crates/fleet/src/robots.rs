//! Site-file records in Redis: [`SharedRedis`] is the cache's [`Shared`] store for a fleet,
//! one implementation for every [`FileKind`] (robots.txt and `tdmrep.json`).
//!
//! Keys (after `fleet.key_prefix`; on a cluster the authority is the hash tag of a site's
//! keys and `purge-generation` is in the fleet-wide slot, [`super::keys`]): `robots:<authority>`
//! holds the record (see `cache::shared`; it expires `fleet.robots_ttl` after it was last
//! stored at the latest), `lease:<authority>` the fetch lease (`SET NX PX`, so it expires by
//! itself when its holder dies; its value names the holder, `instance#nonce#n`, and only the
//! holder deletes it); `tdmrep:<authority>` and `lease:tdmrep:<authority>` the same for
//! `tdmrep.json`, under the same rules; `purge-generation` counts purges of everything, and the channel `purge`
//! carries purges to every instance.
//!
//! Purge-all touches no record: it moves the counter `purge-generation` on (`INCR`, one
//! command however many records there are, all or nothing). A record is stored tagged with
//! the generation current when its fetch lease was taken, and sealed with the fleet's key when
//! there is one ([`super::seal`]: a record that does not verify is never used), and a record
//! of another generation is not read: the records of earlier generations are gone for the
//! fleet at once, and Redis drops them when they expire. No call walks the keyspace (`SCAN`),
//! whose length is not the fleet's to bound.
//!
//! No script touches the purge generation together with a site's keys (on a cluster they are
//! in different slots): the generation is read in a call of its own, always *after* the call
//! on the site's keys ([`SharedRedis::generation_after`]). As the counter only grows, that
//! order is what makes it safe: a record read and then found of the current generation was
//! of the current generation when it was read; a lease's generation read after the lease was
//! taken is that of a fetch that starts after it; a record stored under a generation that has
//! moved on since is never read (and the store reports it purged).
//!
//! A purge wins over a fetch that was in flight when it came: purging an authority deletes its
//! lease with its record, purging everything moves `purge-generation` on, and a record is
//! stored only while its fetcher still holds the lease (one script), and used only while the
//! generation is the one it took the lease under. So a result fetched before the purge never
//! comes back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::{AsyncCommands, Script};

use super::seal::{Kind, PurgeReplays, Refusal, What};
use super::Fleet;
use robots_proxy_authority::{Authority, Scheme};
use robots_proxy_clock::{Clock, StoreClock};
use robots_proxy_sitefiles::{FileKind, RobotsCache, Shared, SharedError, StoreFuture};

/// The fleet's robots.txt records.
pub struct SharedRedis {
    fleet: Arc<Fleet>,
    /// Each lease this instance holds: it gives back only its own lease (one that ran out and
    /// was taken by another instance is that instance's).
    held: Mutex<HashMap<(FileKind, Authority), Held>>,
    next_lease: AtomicU64,
    /// Records not stored because Redis's memory was at `fleet.records_memory_percent`.
    full: AtomicU64,
    lease: Script,
    release: Script,
    store: Script,
    stamp: Script,
    swap: Script,
    drop_own: Script,
    /// Purge messages sent, for their unique seal ([`super::seal`]).
    next_purge: AtomicU64,
    load: Script,
    /// This instance's clock, and Redis's as seen from it: measured on every answer that
    /// carries Redis's `TIME` (a load, a lease, a stamp). Records' times are on Redis's clock.
    clock: Arc<dyn Clock>,
    times: StoreClock,
}

/// A lease this instance holds: its value, `purge-generation` when it was taken, and Redis's
/// clock then (ms; what its record is sealed with, [`super::seal`]).
#[derive(Default)]
struct Held {
    holder: String,
    generation: String,
    at_ms: u64,
}

impl SharedRedis {
    /// Records in the Redis of `fleet`, on the system clock.
    pub fn new(fleet: Arc<Fleet>) -> Self {
        SharedRedis::with_clock(fleet, Arc::new(robots_proxy_clock::SystemClock))
    }

    /// Records in the Redis of `fleet`, for an instance whose clock is `clock` (the one its
    /// robots.txt cache runs on).
    pub fn with_clock(fleet: Arc<Fleet>, clock: Arc<dyn Clock>) -> Self {
        SharedRedis {
            load: Script::new(&[NOW_MS, LOAD].concat()),
            clock,
            times: StoreClock::new(),
            fleet,
            held: Mutex::default(),
            next_lease: AtomicU64::new(0),
            full: AtomicU64::new(0),
            next_purge: AtomicU64::new(0),
            lease: Script::new(&[NOW_MS, LEASE].concat()),
            release: Script::new(RELEASE),
            store: Script::new(STORE),
            stamp: Script::new(&[NOW_MS, STAMP].concat()),
            swap: Script::new(SWAP),
            drop_own: Script::new(DROP_OWN),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<(FileKind, Authority), Held>> {
        robots_proxy_sync::lock(&self.held)
    }

    /// This instance's lease of `kind` for `authority`, forgotten (it is being given back); a
    /// value no lease has when this instance holds none.
    fn take_held(&self, kind: FileKind, authority: &Authority) -> Held {
        self.held().remove(&(kind, authority.clone())).unwrap_or_default()
    }

    /// The record of `kind` for `authority` in `value` (as read, with the purge generation
    /// read with it), if it may be used: of the current generation, its seal verified, and
    /// not older than one this instance already used ([`super::seal`]). A refused record is
    /// counted and logged, and the caller fetches for itself as if there were none.
    fn open(
        &self,
        kind: Kind,
        authority: &Authority,
        generation: Option<Vec<u8>>,
        value: Option<Vec<u8>>,
    ) -> Option<Vec<u8>> {
        let value = value?;
        let authority = authority.to_string();
        let generation = generation.unwrap_or_else(|| b"0".to_vec());
        let what = What { kind, authority: &authority, generation: &generation };
        let opened = self.fleet.seal.open(&what, value).ok()??;
        if let Some(at) = opened.sealed_at.filter(|_| self.fleet.seal.is_keyed()) {
            if !self.fleet.newest.admit(kind, &authority, at) {
                self.fleet.seal.refuse(&what, Refusal::Older);
                return None;
            }
        }
        Some(opened.record)
    }

    /// Redis answered at `store_ms` (its clock): the offset of its clock from this instance's.
    fn observe(&self, store_ms: u64) {
        self.times.observe(store_ms, self.clock.now());
    }

    /// The purge generation and the record at `key`, with Redis's clock (observed).
    async fn load_at(
        &self,
        key: String,
    ) -> Result<(Option<Vec<u8>>, Option<Vec<u8>>), SharedError> {
        let mut invocation = self.load.prepare_invoke();
        invocation.key(key);
        let (value, at): (Option<Vec<u8>>, u64) = self
            .fleet
            .call(move |mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        self.observe(at);
        if value.is_none() {
            return Ok((None, None));
        }
        Ok((Some(self.generation_after().await?), value))
    }

    /// The purge generation now (`"0"` before the first purge of everything): read in a call
    /// of its own, after the call on a site's keys whose result it qualifies (see the
    /// [module documentation](self)), and judged by [`SharedRedis::generation_of`].
    async fn generation_after(&self) -> Result<Vec<u8>, SharedError> {
        let key = generation_key(&self.fleet);
        let raw = self.fleet.call(move |mut c| async move { c.get(key).await }).await?;
        self.judged(raw).await
    }

    /// [`SharedRedis::generation_of`], except that with a key a generation gone from Redis (a
    /// restart without persistence, a failover that lost it, a `DEL`) after this instance used
    /// a later one than `0` is put back, sealed, as the highest this instance used: the fleet
    /// goes on sharing under it (records of earlier generations are still not read), rather
    /// than every instance fetching for itself until the next purge of everything.
    async fn judged(&self, raw: Option<Vec<u8>>) -> Result<Vec<u8>, SharedError> {
        let highest = self.fleet.newest.get(Kind::Generation, "*").filter(|n| *n > 0);
        let (None, Some(highest), true) = (&raw, highest, self.fleet.seal.is_keyed()) else {
            return Ok(self.generation_of(raw));
        };
        let (now, at) = self.stamp_raw().await?;
        if now.is_some() {
            return Ok(self.generation_of(now));
        }
        let text = highest.to_string();
        let what = What { kind: Kind::Generation, authority: "*", generation: text.as_bytes() };
        let value = self.fleet.seal.seal(&what, at, text.as_bytes());
        let mut invocation = self.swap.prepare_invoke();
        invocation.key(generation_key(&self.fleet)).arg(Vec::<u8>::new()).arg(value);
        let swapped: u8 = self
            .fleet
            .call(move |mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        if swapped == 1 {
            tracing::warn!(
                instance = %self.fleet.instance(), generation = highest,
                "fleet: the purge generation was gone from Redis (restarted without \
                 persistence, failed over, or deleted); put back as the highest this instance \
                 used"
            );
        }
        Ok(text.into_bytes())
    }

    /// The purge generation the value `raw` of `purge-generation` says, if it may be used.
    /// With a key, only a sealed generation ([`Kind::Generation`]) not lower than the highest
    /// this instance used is: any other (written by hand, garbage, set back) is counted and
    /// logged, and stands for a generation of this process's own, which
    /// no other instance's record carries: the instance then uses no shared record and fetches
    /// for itself until a purge of everything writes a sealed one. Without a key Redis is
    /// trusted: the counter as it is.
    fn generation_of(&self, raw: Option<Vec<u8>>) -> Vec<u8> {
        let seal = &self.fleet.seal;
        let Some(raw) = raw else { return b"0".to_vec() };
        let claimed: Vec<u8> = raw
            .strip_prefix(b"s1 ")
            .and_then(|head| head.split(|b| *b == b' ').next())
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        if !seal.is_keyed() {
            // Trusting Redis; a sealed value (an instance with a key) holds the number too.
            return if claimed.is_empty() { raw } else { claimed };
        }
        let what = What { kind: Kind::Generation, authority: "*", generation: &claimed };
        let number = std::str::from_utf8(&claimed).ok().and_then(|n| n.parse::<u64>().ok());
        match (seal.open(&what, raw), number) {
            (Ok(Some(opened)), Some(n)) if opened.record == claimed => {
                if self.fleet.newest.admit(Kind::Generation, "*", n) {
                    return claimed;
                }
                seal.refuse(&what, Refusal::Older);
            }
            (Ok(_), _) => seal.refuse(&what, Refusal::BadSeal),
            // Counted and logged by `open`.
            (Err(_), _) => {}
        }
        self.unverified_generation()
    }

    /// A purge generation no record of another process carries ([`SharedRedis::generation_of`]).
    fn unverified_generation(&self) -> Vec<u8> {
        format!("unverified.{}", self.fleet.nonce()).into_bytes()
    }

    /// Purge of everything with a key: the purge generation moved on by one and sealed, written
    /// only if it is still the value read (compare and set; tried again a few times if another
    /// instance purged meanwhile). Never below the highest generation this instance used, so a
    /// generation rolled back by hand is moved past.
    async fn move_generation_on(&self) -> Result<(), SharedError> {
        for _ in 0..8 {
            let (raw, at) = self.stamp_raw().await?;
            let read = self.generation_of(raw.clone());
            let number = std::str::from_utf8(&read).ok().and_then(|n| n.parse::<u64>().ok());
            let highest = self.fleet.newest.get(Kind::Generation, "*").unwrap_or(0);
            let next = number.unwrap_or(0).max(highest).saturating_add(1).to_string();
            let what = What { kind: Kind::Generation, authority: "*", generation: next.as_bytes() };
            let value = self.fleet.seal.seal(&what, at, next.as_bytes());
            let mut invocation = self.swap.prepare_invoke();
            invocation.key(generation_key(&self.fleet)).arg(raw.unwrap_or_default()).arg(value);
            let swapped: u8 = self
                .fleet
                .call(move |mut c| async move { invocation.invoke_async(&mut c).await })
                .await?;
            if swapped == 1 {
                return Ok(());
            }
        }
        Err(SharedError(
            "the purge generation kept changing while this instance moved it on; try again".into(),
        ))
    }

    /// The purge generation and Redis's clock (ms), for a record or message sealed now.
    async fn stamp(&self) -> Result<(String, u64), SharedError> {
        let (raw, at) = self.stamp_raw().await?;
        Ok((String::from_utf8_lossy(&self.judged(raw).await?).into_owned(), at))
    }

    /// The value of `purge-generation` as it is (`None`: none) and Redis's clock (ms).
    async fn stamp_raw(&self) -> Result<(Option<Vec<u8>>, u64), SharedError> {
        let mut invocation = self.stamp.prepare_invoke();
        invocation.key(generation_key(&self.fleet));
        let (raw, at): (Option<Vec<u8>>, u64) = self
            .fleet
            .call(move |mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        self.observe(at);
        Ok((raw, at))
    }
}

/// What [`STORE`] answers when it stored nothing because the lease is no longer the holder's
/// or everything was purged since.
const PURGED: u8 = 0;
/// What [`STORE`] answers when Redis's memory is at `fleet.records_memory_percent`.
const FULL: u8 = 2;

/// Redis's clock in milliseconds, as text (a Lua number would lose digits): `now_ms()`.
const NOW_MS: &str = r"
local function now_ms()
  local t = redis.call('TIME')
  return t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))
end
";

/// KEYS: lease. ARGV: the holder's value, ttl (ms). Takes the lease if it is free: Redis's
/// clock (ms, what the record is sealed with), else `false`. (The purge generation is read
/// after it: [`SharedRedis::generation_after`].)
const LEASE: &str = r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return now_ms()
end
return false
";

/// KEYS: record. The record (`false` for none) and Redis's clock (ms): what records' times are
/// converted with ([`StoreClock`]).
const LOAD: &str = r"
return {redis.call('GET', KEYS[1]), now_ms()}
";

/// KEYS: purge generation. The purge generation's value as it is (`false` for none) and
/// Redis's clock (ms): what a tdmrep.json record, a purge message or a new generation is
/// sealed with.
const STAMP: &str = r"
return {redis.call('GET', KEYS[1]), now_ms()}
";

/// KEYS: record. ARGV: the value stored. Deletes the record if it is still that value.
const DROP_OWN: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
";

/// KEYS: purge generation. ARGV: the value read (empty for none), the new value. Writes the
/// new value only if the generation is still the value read: 1 if written, else 0.
const SWAP: &str = r"
if (redis.call('GET', KEYS[1]) or '') ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
";

/// KEYS: lease. ARGV: the holder's value. Deletes the lease only if it is still the holder's.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
";

/// KEYS: record, lease. ARGV: the value (the record sealed, or tagged, with its purge
/// generation: [`super::seal::Seal::seal`]), ttl (ms), the holder's value,
/// `fleet.records_memory_percent`. Only while the lease is still the holder's (else 0): gives
/// it back, and stores the value unless Redis's used memory has reached the percentage of its
/// `maxmemory` (2: not stored, kept by the fetcher; a user whose ACL denies INFO has no such
/// check). 1 when stored. A lease that is gone was purged with its record (or ran out, and
/// another instance fetches). Whether everything was purged since is asked after it
/// ([`SharedRedis::generation_after`]): such a record is of an old generation, and never read.
const STORE: &str = r"
if redis.call('GET', KEYS[2]) ~= ARGV[3] then return 0 end
redis.call('DEL', KEYS[2])
local memory = redis.pcall('INFO', 'memory')
if type(memory) ~= 'string' then memory = '' end
local used = tonumber(string.match(memory, 'used_memory:(%d+)')) or 0
local max = tonumber(string.match(memory, 'maxmemory:(%d+)')) or 0
if max > 0 and used * 100 >= max * tonumber(ARGV[4]) then return 2 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
";

/// The record of `kind` for `authority`: `robots:<authority>`, `tdmrep:<authority>`.
fn record_key(fleet: &Fleet, kind: FileKind, authority: &Authority) -> String {
    fleet.keys.site(kind.name(), authority, "")
}

/// The fetch lease of `kind` for `authority`: `lease:<authority>` for robots.txt (the first
/// kind, named before there were others), `lease:<name>:<authority>` for every other.
fn lease_key(fleet: &Fleet, kind: FileKind, authority: &Authority) -> String {
    match kind {
        FileKind::Robots => fleet.keys.site("lease", authority, ""),
        other => fleet.keys.site(&format!("lease:{}", other.name()), authority, ""),
    }
}

fn generation_key(fleet: &Fleet) -> String {
    fleet.keys.fleet_wide("purge-generation")
}

/// The seal's kind of the records of `kind`.
fn seal_kind(kind: FileKind) -> Kind {
    match kind {
        FileKind::Tdmrep => Kind::Tdmrep,
        _ => Kind::Robots,
    }
}

/// What a purge message asks, if it may be used: with a key, only a message sealed for its
/// target, not seen before and not older than [`PurgeReplays`] allows (a refused message is
/// counted and logged); without one, the plain target as well.
fn read_purge(
    fleet: &Fleet,
    replays: &mut PurgeReplays,
    payload: &[u8],
) -> Option<Option<Authority>> {
    let (target, nonce) = match memchr::memchr(b'\n', payload) {
        None if !fleet.seal.is_keyed() => (payload, None),
        None => (payload, Some(&b""[..])),
        Some(end) => {
            let nonce = payload[..end].split(|b| *b == b' ').nth(1).unwrap_or_default();
            (&payload[end + 1..], Some(nonce))
        }
    };
    let text = String::from_utf8_lossy(target);
    if let Some(nonce) = nonce {
        let what = What { kind: Kind::Purge, authority: &text, generation: nonce };
        let opened = fleet.seal.open(&what, payload.to_vec()).ok()??;
        if let Some(at) = opened.sealed_at.filter(|_| fleet.seal.is_keyed()) {
            if !replays.admit(at, nonce) {
                fleet.seal.refuse(&what, Refusal::Older);
                return None;
            }
        }
    }
    let asked = parse_purge(&text);
    if asked.is_none() {
        tracing::debug!(message = %robots_proxy_output::log(&text), "fleet: unknown purge message");
    }
    asked
}

/// A purge message: `*` for all, else `scheme host port`.
fn purge_message(authority: Option<&Authority>) -> String {
    match authority {
        None => "*".to_owned(),
        Some(a) => format!("{} {} {}", a.scheme().as_str(), a.host(), a.port()),
    }
}

/// What a purge message asks: `Some(None)` for all, `Some(Some(a))` for one authority.
fn parse_purge(message: &str) -> Option<Option<Authority>> {
    if message == "*" {
        return Some(None);
    }
    let mut parts = message.split(' ');
    let scheme = match parts.next()? {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        _ => return None,
    };
    let host = parts.next()?;
    let port = parts.next()?.parse().ok()?;
    Authority::new(scheme, host, port).ok().map(Some)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl Shared for SharedRedis {
    fn load<'a>(
        &'a self,
        kind: FileKind,
        authority: &'a Authority,
    ) -> StoreFuture<'a, Result<Option<Vec<u8>>, SharedError>> {
        Box::pin(async move {
            let (generation, value) =
                self.load_at(record_key(&self.fleet, kind, authority)).await?;
            Ok(self.open(seal_kind(kind), authority, generation, value))
        })
    }

    fn lease<'a>(
        &'a self,
        kind: FileKind,
        authority: &'a Authority,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<bool, SharedError>> {
        let n = self.next_lease.fetch_add(1, Ordering::Relaxed);
        let holder = format!("{}#{}#{n}", self.fleet.instance(), self.fleet.nonce());
        let mut invocation = self.lease.prepare_invoke();
        invocation.key(lease_key(&self.fleet, kind, authority)).arg(&holder).arg(millis(ttl));
        Box::pin(async move {
            let taken: Option<u64> = self
                .fleet
                .call(move |mut c| async move { invocation.invoke_async(&mut c).await })
                .await?;
            let Some(at_ms) = taken else { return Ok(false) };
            self.observe(at_ms);
            // Read after the lease is taken: the generation of a fetch that starts after it. If
            // it cannot be read, the lease lapses by itself and the caller fetches alone.
            let generation = String::from_utf8_lossy(&self.generation_after().await?).into_owned();
            self.held().insert((kind, authority.clone()), Held { holder, generation, at_ms });
            Ok(true)
        })
    }

    fn release<'a>(
        &'a self,
        kind: FileKind,
        authority: &'a Authority,
    ) -> StoreFuture<'a, Result<(), SharedError>> {
        let mut invocation = self.release.prepare_invoke();
        invocation
            .key(lease_key(&self.fleet, kind, authority))
            .arg(self.take_held(kind, authority).holder);
        Box::pin(self.fleet.call(move |mut c| async move { invocation.invoke_async(&mut c).await }))
    }

    fn store<'a>(
        &'a self,
        kind: FileKind,
        authority: &'a Authority,
        record: Vec<u8>,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<bool, SharedError>> {
        let held = self.take_held(kind, authority);
        let name = authority.to_string();
        let sealed = seal_kind(kind);
        let what = What { kind: sealed, authority: &name, generation: held.generation.as_bytes() };
        // One MAC per record stored (never per request).
        let value = self.fleet.seal.seal(&what, held.at_ms, &record);
        let kept = value.clone();
        let mut invocation = self.store.prepare_invoke();
        invocation
            .key(record_key(&self.fleet, kind, authority))
            .key(lease_key(&self.fleet, kind, authority))
            .arg(value)
            .arg(millis(ttl.min(self.fleet.robots_ttl)))
            .arg(held.holder)
            .arg(self.fleet.records_memory_percent);
        Box::pin(async move {
            let mut stored: u8 = self
                .fleet
                .call(move |mut c| async move { invocation.invoke_async(&mut c).await })
                .await?;
            if stored != PURGED && stored != FULL {
                // Everything purged since the lease was taken: the record is of an old
                // generation, never read; as if the purge had come first.
                if self.generation_after().await? != held.generation.as_bytes() {
                    stored = PURGED;
                    // Not left behind either (it would only take memory until it expires):
                    // deleted unless it was replaced meanwhile.
                    let mut invocation = self.drop_own.prepare_invoke();
                    invocation.key(record_key(&self.fleet, kind, authority)).arg(kept);
                    let _: Result<u8, _> = self
                        .fleet
                        .call(move |mut c| async move { invocation.invoke_async(&mut c).await })
                        .await;
                }
            }
            if stored != PURGED && stored != FULL && self.fleet.seal.is_keyed() {
                // This instance's own record is the newest it knows of.
                self.fleet.newest.admit(sealed, &name, held.at_ms);
            }
            if stored == FULL {
                let n = self.full.fetch_add(1, Ordering::Relaxed) + 1;
                if n == 1 || n.is_multiple_of(1000) {
                    tracing::warn!(
                        instance = %self.fleet.instance(), times = n,
                        "fleet: Redis's used memory has reached fleet.records_memory_percent of \
                         its maxmemory; site-file records (robots.txt, tdmrep.json) are not shared (each instance fetches \
                         for itself) until expired records make room"
                    );
                }
            }
            Ok(stored != PURGED)
        })
    }

    fn purge<'a>(
        &'a self,
        authority: Option<&'a Authority>,
    ) -> StoreFuture<'a, Result<(), SharedError>> {
        let fleet = &self.fleet;
        let channel = fleet.keys.channel("purge");
        let target = purge_message(authority);
        Box::pin(async move {
            // With a key, sealed with a nonce of its own and Redis's clock: a receiver refuses
            // a forged or replayed purge message ([`read_purge`]).
            let message = if fleet.seal.is_keyed() {
                let (_, at) = self.stamp().await?;
                let n = self.next_purge.fetch_add(1, Ordering::Relaxed);
                let nonce = format!("{}.{}.{n}", fleet.instance(), fleet.nonce());
                let what =
                    What { kind: Kind::Purge, authority: &target, generation: nonce.as_bytes() };
                fleet.seal.seal(&what, at, target.as_bytes())
            } else {
                target.into_bytes()
            };
            let dropped = match authority {
                Some(a) => {
                    // The lease goes with the record: a fetch in flight then stores nothing.
                    // The authority's tdmrep.json goes too.
                    let keys = [FileKind::Robots, FileKind::Tdmrep]
                        .into_iter()
                        .flat_map(|kind| [record_key(fleet, kind, a), lease_key(fleet, kind, a)])
                        .collect::<Vec<_>>();
                    fleet.call(move |mut c| async move { c.del::<_, ()>(&keys).await }).await
                }
                // A fetch in flight took its lease under the generation before: its record is
                // never read.
                None if fleet.seal.is_keyed() => self.move_generation_on().await,
                None => {
                    let key = generation_key(fleet);
                    fleet.call(move |mut c| async move { c.incr::<_, _, ()>(key, 1).await }).await
                }
            };
            // Told whatever happened to the record: the other instances drop their copies
            // even when the shared one could not be.
            let told = fleet
                .call(move |mut c| async move { c.publish::<_, _, ()>(channel, message).await })
                .await;
            match (dropped, told) {
                (Ok(()), Ok(())) => Ok(()),
                (Ok(()), Err(e)) => Err(SharedError(format!(
                    "the shared records were purged, but the other instances were not told to \
                     drop their own copies ({e}); they keep them until they expire"
                ))),
                (Err(e), Ok(())) => Err(SharedError(format!(
                    "the shared records were not purged ({e}); the other instances were told \
                     to drop their own copies, and may load the unpurged records again"
                ))),
                (Err(e), Err(_)) => Err(SharedError(format!(
                    "neither the shared records were purged nor the other instances told ({e})"
                ))),
            }
        })
    }

    fn required(&self) -> bool {
        self.fleet.refuses_when_down()
    }

    fn max_body(&self) -> usize {
        self.fleet.max_shared_body
    }

    fn store_clock(&self) -> &StoreClock {
        &self.times
    }
}

/// Listens for purges from every instance (this one included) and drops the local copies
/// they name; runs until the process ends. After any gap in the subscription (Redis out of
/// reach, at start or later; a subscription that ended, or that stopped answering its PING:
/// [`super::Subscription`]), every local copy is dropped, since purges may have been missed
/// and copies fetched meanwhile were this instance's own.
pub async fn follow_purges(fleet: Arc<Fleet>, cache: Arc<RobotsCache>) {
    use super::Heard;
    let channel = fleet.keys.channel("purge");
    let mut first = true;
    let mut replays = PurgeReplays::default();
    loop {
        let mut subscription = match fleet.follow(&channel).await {
            Ok(subscription) => subscription,
            Err(e) => {
                tracing::debug!(error = %e, "fleet: cannot subscribe to purges yet");
                // Copies fetched here meanwhile were not shared: drop them once subscribed.
                first = false;
                tokio::time::sleep(super::HEARTBEAT).await;
                continue;
            }
        };
        if !first {
            cache.purge_all_local().await;
        }
        first = false;
        let why = loop {
            match subscription.next().await {
                Heard::Message(message) => {
                    match read_purge(&fleet, &mut replays, message.get_payload_bytes()) {
                        Some(Some(authority)) => cache.purge_local(&authority).await,
                        Some(None) => cache.purge_all_local().await,
                        None => {}
                    }
                }
                Heard::Lost(why) => break why,
            }
        };
        drop(subscription);
        let gaps = fleet.purge_gaps.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::warn!(
            instance = %fleet.instance(), why, gaps,
            "fleet: the purge subscription was lost; subscribing again, and dropping every \
             local robots.txt copy then (purges may have been missed)"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_messages_round_trip() {
        let a = Authority::new(Scheme::Https, "xn--bcher-kva.example", 8443).unwrap();
        assert_eq!(parse_purge(&purge_message(Some(&a))), Some(Some(a)));
        assert_eq!(parse_purge(&purge_message(None)), Some(None));
        assert_eq!(parse_purge("ftp x 1"), None);
        assert_eq!(parse_purge("http x"), None);
    }
}
