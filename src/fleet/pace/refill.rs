//! Filling a site's share ([`super::share`]): keeping the places a request's `RESERVE`
//! brought, giving back the slots of those that outlived their life unused, and refilling
//! ahead of need, off any request's path.

use tokio::time::Instant;

use super::{micros, millis, share, Keys, RedisPace, Spacing};
use crate::authority::Authority;

impl RedisPace {
    /// Keeps what the `RESERVE` of `refill` brought beside its request's own start and slot,
    /// for this instance's next requests; a task gives back, at the end of their life, the
    /// pooled slots nobody used.
    pub(super) fn keep_share(&self, refill: share::Refill, keys: &Keys, brought: share::Brought) {
        if let Some(site) = self.shares.put(refill, brought) {
            self.slots.sweep(site, keys.slots.clone(), keys.pace.clone());
        }
    }

    /// Refills the share of `authority` before it runs out: a `RESERVE` of its own, off any
    /// request's path, that takes places only if it may go at once (it waits for nothing and
    /// queues nowhere: a `max_wait` under a tick and a `queue_limit` of 0): its own start and
    /// slot and `ask` less one of each. When it brings none, the share's next request refills
    /// as before.
    pub(super) fn refill_ahead(
        &self,
        refill: share::Refill,
        authority: &Authority,
        (pace, slots_key): (&str, &str),
        (spacing, slots, ask): (Spacing, usize, share::Ask),
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
        let (starts, more) = (ask.starts.saturating_sub(1), ask.slots.saturating_sub(1));
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
                .arg(starts)
                .arg(more);
            let reserved: Result<super::Reserved, _> =
                fleet.call(|mut c| async move { invocation.invoke_async(&mut c).await }).await;
            let (verdict, _, _, _, now, extra, taken, room) = match reserved {
                Ok(r) => r,
                Err(_) => {
                    drop(refill);
                    super::forget(forgetting, &keys, &member, more);
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
            let mut members: Vec<String> = Vec::new();
            if slots > 0 {
                members.push(member.clone());
                members.extend((1..=taken).map(|i| format!("{member}/{i}")));
            }
            let brought =
                share::Brought { starts: extra + 1, slots: members, received, room: room == 1 };
            if let Some(site) = shares.put(refill, brought) {
                held.sweep(site, keys.slots, keys.pace);
            }
        });
    }
}
