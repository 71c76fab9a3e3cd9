//! robots.txt records in Redis: [`SharedRedis`] is the cache's [`SharedRobots`] for a fleet.
//!
//! Keys (after `fleet.key_prefix`): `robots:<authority>` holds the record (see
//! `cache::shared`), `lease:<authority>` the fetch lease (`SET NX PX`, so it expires by itself
//! when its holder dies; its value names the holder, `instance#nonce#n`, and only the holder
//! deletes it), and the channel `purge` carries purges to every instance.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::{AsyncCommands, Script};

use super::Fleet;
use crate::authority::{Authority, Scheme};
use crate::cache::{RobotsCache, SharedError, SharedRobots, StoreFuture};

/// The fleet's robots.txt records.
pub struct SharedRedis {
    fleet: Arc<Fleet>,
    /// The value of each lease this instance holds: it gives back only its own lease (one
    /// that ran out and was taken by another instance is that instance's).
    held: Mutex<HashMap<Authority, String>>,
    next_lease: AtomicU64,
    release: Script,
    store: Script,
}

impl SharedRedis {
    /// Records in the Redis of `fleet`.
    pub fn new(fleet: Arc<Fleet>) -> Self {
        SharedRedis {
            fleet,
            held: Mutex::default(),
            next_lease: AtomicU64::new(0),
            release: Script::new(RELEASE),
            store: Script::new(STORE),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<Authority, String>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value of this instance's lease of `authority`, forgotten (it is being given back);
    /// a value no lease has when this instance holds none.
    fn take_held(&self, authority: &Authority) -> String {
        self.held().remove(authority).unwrap_or_default()
    }
}

/// KEYS: lease. ARGV: the holder's value. Deletes the lease only if it is still the holder's.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
";

/// KEYS: record, lease. ARGV: record, ttl (ms), the holder's value. Stores the record, and
/// deletes the lease only if it is still the holder's.
const STORE: &str = r"
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if redis.call('GET', KEYS[2]) == ARGV[3] then redis.call('DEL', KEYS[2]) end
return 1
";

fn record_key(fleet: &Fleet, authority: &Authority) -> String {
    fleet.key(&format!("robots:{authority}"))
}

fn lease_key(fleet: &Fleet, authority: &Authority) -> String {
    fleet.key(&format!("lease:{authority}"))
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

impl SharedRobots for SharedRedis {
    fn load<'a>(
        &'a self,
        authority: &'a Authority,
    ) -> StoreFuture<'a, Result<Option<Vec<u8>>, SharedError>> {
        let key = record_key(&self.fleet, authority);
        Box::pin(self.fleet.call(move |mut c| async move { c.get(key).await }))
    }

    fn lease<'a>(
        &'a self,
        authority: &'a Authority,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<bool, SharedError>> {
        let key = lease_key(&self.fleet, authority);
        let n = self.next_lease.fetch_add(1, Ordering::Relaxed);
        let holder = format!("{}#{}#{n}", self.fleet.instance(), self.fleet.nonce());
        Box::pin(async move {
            let value = holder.clone();
            let taken = self
                .fleet
                .call(move |mut c| async move {
                    let set: Option<String> = redis::cmd("SET")
                        .arg(key)
                        .arg(value)
                        .arg("NX")
                        .arg("PX")
                        .arg(millis(ttl))
                        .query_async(&mut c)
                        .await?;
                    Ok(set.is_some())
                })
                .await?;
            if taken {
                self.held().insert(authority.clone(), holder);
            }
            Ok(taken)
        })
    }

    fn release<'a>(&'a self, authority: &'a Authority) -> StoreFuture<'a, Result<(), SharedError>> {
        let mut invocation = self.release.prepare_invoke();
        invocation.key(lease_key(&self.fleet, authority)).arg(self.take_held(authority));
        Box::pin(self.fleet.call(move |mut c| async move { invocation.invoke_async(&mut c).await }))
    }

    fn store<'a>(
        &'a self,
        authority: &'a Authority,
        record: Vec<u8>,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<(), SharedError>> {
        let mut invocation = self.store.prepare_invoke();
        invocation
            .key(record_key(&self.fleet, authority))
            .key(lease_key(&self.fleet, authority))
            .arg(record)
            .arg(millis(ttl))
            .arg(self.take_held(authority));
        Box::pin(self.fleet.call(move |mut c| async move { invocation.invoke_async(&mut c).await }))
    }

    fn purge<'a>(
        &'a self,
        authority: Option<&'a Authority>,
    ) -> StoreFuture<'a, Result<(), SharedError>> {
        let fleet = &self.fleet;
        let channel = fleet.key("purge");
        let message = purge_message(authority);
        Box::pin(async move {
            match authority {
                Some(a) => {
                    let key = record_key(fleet, a);
                    fleet.call(move |mut c| async move { c.del::<_, ()>(key).await }).await?;
                }
                None => {
                    let pattern = fleet.key_pattern("robots:*");
                    fleet
                        .call(move |mut c| async move { delete_matching(&mut c, &pattern).await })
                        .await?;
                }
            }
            fleet
                .call(move |mut c| async move { c.publish::<_, _, ()>(channel, message).await })
                .await
        })
    }

    fn required(&self) -> bool {
        self.fleet.refuses_when_down()
    }
}

/// Deletes every key matching `pattern`, a batch at a time (SCAN, not KEYS: Redis stays
/// responsive however many records there are).
async fn delete_matching(
    c: &mut redis::aio::ConnectionManager,
    pattern: &str,
) -> redis::RedisResult<()> {
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(500)
            .query_async(c)
            .await?;
        if !keys.is_empty() {
            redis::cmd("UNLINK").arg(&keys).query_async::<()>(c).await?;
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

/// Listens for purges from every instance (this one included) and drops the local copies
/// they name; runs until the process ends. After any gap in the subscription (Redis out of
/// reach, at start or later), every local copy is dropped, since purges may have been missed
/// and copies fetched meanwhile were this instance's own.
pub async fn follow_purges(fleet: Arc<Fleet>, cache: Arc<RobotsCache>) {
    let channel = fleet.key("purge");
    let mut first = true;
    loop {
        let pubsub = match fleet.subscribe(&channel).await {
            Ok(pubsub) => pubsub,
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
        let mut messages = pubsub.into_on_message();
        while let Some(message) = std::future::poll_fn(|cx| {
            futures_core::Stream::poll_next(std::pin::Pin::new(&mut messages), cx)
        })
        .await
        {
            let Ok(text) = message.get_payload::<String>() else { continue };
            match parse_purge(&text) {
                Some(Some(authority)) => cache.purge_local(&authority).await,
                Some(None) => cache.purge_all_local().await,
                None => tracing::debug!(message = %text, "fleet: unknown purge message"),
            }
        }
        tracing::debug!("fleet: purge subscription ended; subscribing again");
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
