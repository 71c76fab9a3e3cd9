//! The concurrency slots this instance holds in Redis, off the request's path: given back in
//! batches by one task, and renewed by one task, rather than by two tasks of every request.
//!
//! * A slot is given back when its request's response headers arrive ([`Slot`] dropped). The
//!   drop only hands it to the give-back task, which sends every slot handed to it while its
//!   previous call was under way in one call per authority ([`scripts::RELEASE`]), the
//!   authorities' calls at once on the multiplexed connection (one round trip). Under load the
//!   batches grow by themselves; idle, a slot goes back at once.
//! * `RELEASE` announces the slots given back (pub/sub, `slot-freed`) only while a request of
//!   the authority waits for one somewhere in the fleet: `BEGIN` marks that in the authority's
//!   pace (`slot-waiters`, until the waiter's deadline) when it finds no slot free. A site
//!   whose limit never binds costs no message to every instance per request.
//! * One task renews every slot held longer than a quarter of its lease, at most half a lease
//!   after it was taken or last renewed, as each slot's own task did.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::Script;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::share::{Site, SiteKeys};
use super::{micros, scripts};
use crate::Fleet;

/// The most slots given back in one call (the script's arguments).
const MOST_PER_CALL: usize = 256;

/// A slot held by one of this instance's requests.
struct Held {
    key: Arc<str>,
    member: String,
    /// When it was taken or last renewed.
    renewed: Instant,
    /// Whether it is in Redis: taken there, or put back there ([`Slots::restore`]). A slot of a
    /// request this instance's own pace admitted while Redis was out of reach is not, until the
    /// store is back.
    shared: bool,
}

/// A slot handed to the give-back task.
struct Freed {
    keys: SiteKeys,
    member: String,
    /// No use trying to give it back after this: it has lapsed by itself.
    lapses: Instant,
}

/// The slots held by this instance's requests; see the [module documentation](self).
pub(super) struct Slots {
    lease: Duration,
    held: Arc<Mutex<HashMap<u64, Held>>>,
    next: AtomicU64,
    freed: mpsc::UnboundedSender<Freed>,
}

impl Slots {
    /// Starts the give-back and renewal tasks on the current runtime (none outside one: then
    /// slots lapse by themselves, as they do when their holder dies).
    pub(super) fn new(fleet: Arc<Fleet>, lease: Duration, channel: String) -> Arc<Self> {
        let (freed, given) = mpsc::unbounded_channel();
        let slots = Arc::new(Slots {
            lease,
            held: Arc::new(Mutex::new(HashMap::new())),
            next: AtomicU64::new(0),
            freed,
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(give_back_all(fleet.clone(), given, channel));
            runtime.spawn(renew_all(fleet, lease, Arc::downgrade(&slots.held)));
        }
        slots
    }

    /// The slot `member` of the site of `keys`, just taken: renewed while held, given back when
    /// dropped.
    pub(super) fn hold(self: &Arc<Self>, keys: SiteKeys, member: &str) -> Slot {
        self.held_in(keys, (member.to_owned(), Instant::now()), true, None)
    }

    /// A slot of the site of `keys` held by a request this instance's own pace admitted while
    /// Redis was out of reach: not in Redis, and put there when the store is back
    /// ([`Slots::restore`]), so the fleet's concurrency counts it from then on.
    pub(super) fn hold_alone(self: &Arc<Self>, keys: SiteKeys, member: &str) -> Slot {
        self.held_in(keys, (member.to_owned(), Instant::now()), false, None)
    }

    /// Gives back the slots `members` of the site of `keys` (places of a share nobody used,
    /// [`super::share`]), with the others of the moment.
    pub(super) fn unused(&self, keys: &SiteKeys, members: Vec<String>) {
        if members.is_empty() {
            return;
        }
        let lapses = Instant::now() + self.lease;
        for member in members {
            let keys = keys.clone();
            // Fails only once the task has ended (the runtime is going away): the slot lapses.
            let _ = self.freed.send(Freed { keys, member, lapses });
        }
    }

    /// The slot `member`, taken or last renewed in Redis at `renewed`, of a site with a share
    /// (`site`): when its request ends it goes back to the share's pool if the fleet had room
    /// lately ([`super::share::pool`]), to Redis otherwise.
    pub(super) fn hold_in(
        self: &Arc<Self>,
        site: &Arc<Site>,
        (member, renewed): (String, Instant),
    ) -> Slot {
        self.held_in(site.keys.clone(), (member, renewed), true, Some(Arc::downgrade(site)))
    }

    fn held_in(
        self: &Arc<Self>,
        SiteKeys { slots: key, pace }: SiteKeys,
        (member, renewed): (String, Instant),
        shared: bool,
        site: Option<Weak<Site>>,
    ) -> Slot {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let held = Held { key, member, renewed, shared };
        if let Ok(mut all) = self.held.lock() {
            all.insert(id, held);
        }
        Slot { slots: self.clone(), id, pace, site }
    }
}

/// A concurrency slot held in Redis: given back when dropped, and the fleet told if a request
/// waits for one.
pub(super) struct Slot {
    slots: Arc<Slots>,
    id: u64,
    /// The site's pace key.
    pace: Arc<str>,
    /// The site's share, whose pool it may go back to ([`super::share`]).
    site: Option<Weak<Site>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let held = self.slots.held.lock().ok().and_then(|mut all| all.remove(&self.id));
        // A slot that is not in Redis has nothing to give back there.
        let Some(held) = held.filter(|h| h.shared) else { return };
        let mut member = held.member;
        if let Some(site) = self.site.take() {
            // Back to the pool while its lease has more than half to run.
            let fresh = Instant::now().checked_sub(self.slots.lease / 2).unwrap_or(held.renewed);
            match super::share::pool(&site, member, held.renewed, fresh) {
                Ok(sweep) => {
                    if sweep {
                        self.slots.sweep(site);
                    }
                    return;
                }
                Err(back) => member = back,
            }
        }
        let lapses = held.renewed + self.slots.lease;
        // Fails only once the task has ended (the runtime is going away): the slot lapses.
        let keys = SiteKeys { slots: held.key, pace: self.pace.clone() };
        let _ = self.slots.freed.send(Freed { keys, member, lapses });
    }
}

impl Slots {
    /// Starts the task that gives back to Redis the slots of `site`'s pool that outlive their
    /// life, until the pool is empty ([`super::share::sweep`]).
    pub(super) fn sweep(self: &Arc<Self>, site: Weak<Site>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let Some(keys) = site.upgrade().map(|s| s.keys.clone()) else { return };
        let slots = self.clone();
        runtime.spawn(async move {
            loop {
                let (gone, done) = super::share::sweep(&site).await;
                slots.unused(&keys, gone);
                if done {
                    return;
                }
            }
        });
    }
}

/// Gives back the slots handed to it, in batches, until every sender is gone.
async fn give_back_all(
    fleet: Arc<Fleet>,
    mut given: mpsc::UnboundedReceiver<Freed>,
    channel: String,
) {
    let release = Arc::new(Script::new(scripts::RELEASE));
    let mut batch = Vec::new();
    while given.recv_many(&mut batch, MOST_PER_CALL).await > 0 {
        let mut by_site: HashMap<SiteKeys, (Vec<String>, Instant)> = HashMap::new();
        for freed in batch.drain(..) {
            let (members, lapses) = by_site.entry(freed.keys).or_insert((Vec::new(), freed.lapses));
            members.push(freed.member);
            *lapses = (*lapses).max(freed.lapses);
        }
        // One call per authority, all at once on the multiplexed connection.
        let mut calls = tokio::task::JoinSet::new();
        for (SiteKeys { slots: key, pace }, (members, lapses)) in by_site {
            let (fleet, release, channel) = (fleet.clone(), release.clone(), channel.clone());
            let (keys, members) = (Arc::new((key, pace, channel)), Arc::new(members));
            let make = move |mut c: crate::Conn| -> super::Try {
                let (release, keys, members) = (release.clone(), keys.clone(), members.clone());
                Box::pin(async move {
                    let mut invocation = release.prepare_invoke();
                    invocation.key(&*keys.0).key(&*keys.1).arg(&keys.2).arg(&*members);
                    invocation.invoke_async::<()>(&mut c).await
                })
            };
            calls.spawn(async move {
                if fleet.call(&make).await.is_err() {
                    // Redis out of reach: tried again in the background until it lapses.
                    super::give_back(fleet, lapses, make);
                }
            });
        }
        while calls.join_next().await.is_some() {}
    }
}

/// Renews, every quarter lease, each slot held for a quarter lease or more since it was taken
/// or last renewed; ends when the slots are dropped.
async fn renew_all(fleet: Arc<Fleet>, lease: Duration, held: Weak<Mutex<HashMap<u64, Held>>>) {
    let renew = Script::new(scripts::RENEW);
    let every = (lease / 4).max(Duration::from_millis(10));
    loop {
        tokio::time::sleep(every).await;
        let Some(all) = held.upgrade() else { return };
        let now = Instant::now();
        let due: Vec<(u64, Arc<str>, String)> = match all.lock() {
            Ok(all) => all
                .iter()
                .filter(|(_, h)| h.shared && now.saturating_duration_since(h.renewed) >= every)
                .map(|(id, h)| (*id, h.key.clone(), h.member.clone()))
                .collect(),
            Err(_) => return,
        };
        drop(all);
        for (id, key, member) in due {
            let mut invocation = renew.prepare_invoke();
            invocation.key(&*key).arg(&member).arg(micros(lease));
            let renewed: Result<(), _> =
                fleet.call(|mut c| async move { invocation.invoke_async(&mut c).await }).await;
            if renewed.is_ok() {
                let Some(all) = held.upgrade() else { return };
                if let Ok(mut all) = all.lock() {
                    if let Some(h) = all.get_mut(&id) {
                        h.renewed = now;
                    }
                };
            }
        }
    }
}

/// KEYS: slots. ARGV: lease, then the members. Puts back the slots an instance holds that the
/// store no longer has (a restart, a failover), each for a lease from now; one still there is
/// left as it is.
const RESTORE_SLOTS: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local lease = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'NX', now + lease, ARGV[i]) end
local ttl = math.floor(lease / 1000) + 1000
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
";

impl Slots {
    /// Puts every slot this instance holds back into Redis (review-fleet N3: a restart or a
    /// failover had forgotten them, and `concurrency` more requests could start meanwhile).
    /// A slot given back while this runs (its request answered) is taken out again. Returns how
    /// many were put back, or `Err` when Redis was out of reach (tried again at the next loss
    /// or return).
    pub(super) async fn restore(self: &Arc<Self>, fleet: &Arc<Fleet>) -> Result<usize, ()> {
        let mut by_key: HashMap<Arc<str>, Vec<(u64, String)>> = HashMap::new();
        for (id, held) in robots_proxy_sync::lock(&self.held).iter() {
            by_key.entry(held.key.clone()).or_default().push((*id, held.member.clone()));
        }
        let script = Script::new(RESTORE_SLOTS);
        let mut restored = 0;
        for (key, members) in by_key {
            for chunk in members.chunks(MOST_PER_CALL) {
                let mut invocation = script.prepare_invoke();
                invocation.key(&*key).arg(super::micros(self.lease));
                for (_, member) in chunk {
                    invocation.arg(member);
                }
                let put: Result<(), _> =
                    fleet.call(|mut c| async move { invocation.invoke_async(&mut c).await }).await;
                put.map_err(|_| ())?;
                // Those still held are in Redis now, renewed and given back as any other; those
                // given back meanwhile may have been put back after their RELEASE: out again.
                let mut gone = Vec::new();
                {
                    let mut all = robots_proxy_sync::lock(&self.held);
                    for (id, member) in chunk {
                        match all.get_mut(id) {
                            Some(held) => {
                                held.shared = true;
                                held.renewed = Instant::now();
                                restored += 1;
                            }
                            None => gone.push(member.clone()),
                        }
                    }
                }
                if !gone.is_empty() {
                    let (key, lapses) = (key.clone(), Instant::now() + self.lease);
                    super::give_back(fleet.clone(), lapses, move |mut c| {
                        let mut zrem = redis::cmd("ZREM");
                        zrem.arg(&*key).arg(&gone);
                        Box::pin(async move { zrem.query_async::<()>(&mut c).await })
                    });
                }
            }
        }
        Ok(restored)
    }
}
