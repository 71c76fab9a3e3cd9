//! Filling a site's share ([`super::share`]): keeping the places a request's `RESERVE`
//! brought, giving back the slots of those that outlived their life unused, and refilling
//! ahead of need, off any request's path.

use std::sync::{Arc, Weak};

use tokio::time::Instant;

use super::{micros, millis, share, slots::Slots, Keys, RedisPace, Spacing};
use crate::authority::Authority;

impl RedisPace {
    /// Keeps the `extra` places the `RESERVE` (of `refill`) took beside its request's own, for
    /// this instance's next requests (its answer `received` then), and gives back, at the end
    /// of their life, the slots of those nobody used. `own`: the call's own member is a place
    /// too (a refill ahead, which no request made).
    pub(super) fn keep_share(
        &self,
        refill: share::Refill,
        (keys, member): (&Keys, &str),
        slots: usize,
        (extra, received): (u32, Instant),
        own: bool,
    ) {
        let mut members: Vec<String> = Vec::with_capacity(extra as usize + 1);
        if own {
            members.push(member.to_owned());
        }
        members.extend((1..=extra).map(|i| format!("{member}/{i}")));
        let until = received + share::SHARE_LIFE;
        let site = self.shares.put(refill, members, until);
        if slots > 0 && (extra > 0 || own) {
            let (held, key, pace) = (self.slots.clone(), keys.slots.clone(), keys.pace.clone());
            spawn(give_back_unused(until, site, held, (key, pace)));
        }
    }

    /// Refills the share of `authority` before it runs out: a `RESERVE` of its own, off any
    /// request's path, that takes places only if it may go at once (it waits for nothing and
    /// queues nowhere: a `max_wait` under a tick and a `queue_limit` of 0), `want` of them
    /// with its own. When it brings none, the share's next request refills as before.
    pub(super) fn refill_ahead(
        &self,
        refill: share::Refill,
        authority: &Authority,
        (pace, slots_key): (&str, &str),
        (spacing, slots, want): (Spacing, usize, u32),
    ) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let member = self.unique();
        let site = &self.fleet.keys;
        let keys = Keys {
            pace: pace.to_owned(),
            queue: site.site("queue", authority, ""),
            slots: slots_key.to_owned(),
            gone: site.site("gone", authority, &format!("|{member}")),
            slotq: site.site("slotq", authority, ""),
        };
        let (floor_rate, _) = self.ledger.floors(pace, &spacing);
        let tick = micros(crate::pacing::TICK);
        let keep = millis(self.keep.get()).max(1000);
        let (fleet, script, shares) =
            (self.fleet.clone(), self.reserve.clone(), self.shares.clone());
        let (ledger, held, lease) = (self.ledger.clone(), self.slots.clone(), self.lease);
        let forgetting = (self.fleet.clone(), self.give_back.clone(), self.lease);
        let one_way = self.fleet.round_trip().min(self.fleet.timeout) / 2;
        let asked = want.saturating_sub(1);
        runtime.spawn(async move {
            let mut invocation = spacing.invocation(&script, &keys);
            invocation
                .arg(tick - 1) // max_wait: under a tick
                .arg(0) // queue_limit: never queued
                .arg(&member)
                .arg(keep)
                .arg(slots)
                .arg(micros(lease))
                .arg(micros(super::QUEUE_LAPSE))
                .arg(floor_rate)
                .arg(0)
                .arg(tick)
                .arg(asked);
            let reserved: Result<(String, u64, String, u64, u64, u32), _> =
                fleet.call(|mut c| async move { invocation.invoke_async(&mut c).await }).await;
            let (verdict, _, _, _, now, extra) = match reserved {
                Ok(r) => r,
                Err(_) => {
                    drop(refill);
                    super::forget(forgetting, &keys, &member, asked);
                    return;
                }
            };
            let received = Instant::now();
            ledger.measured(now, received, one_way);
            if verdict != "go" {
                return;
            }
            let last = now.saturating_add(u64::from(extra).saturating_mul(spacing.interval));
            ledger.wrote(&keys.pace, &spacing, last, true);
            let mut members: Vec<String> = Vec::with_capacity(extra as usize + 1);
            members.push(member.clone());
            members.extend((1..=extra).map(|i| format!("{member}/{i}")));
            let until = received + share::SHARE_LIFE;
            let site = shares.put(refill, members, until);
            if slots > 0 {
                give_back_unused(until, site, held, (keys.slots, keys.pace)).await;
            }
        });
    }
}

fn spawn(task: impl std::future::Future<Output = ()> + Send + 'static) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(task);
    }
}

/// At `until`, gives back the slots of the places of `site`'s share that outlived their life.
async fn give_back_unused(
    until: Instant,
    site: Weak<share::Site>,
    held: Arc<Slots>,
    (key, pace): (String, String),
) {
    tokio::time::sleep_until(until).await;
    held.unused(&key, &pace, share::expired(&site));
}
