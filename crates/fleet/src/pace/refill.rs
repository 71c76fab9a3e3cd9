//! A request's side of its site's share ([`super::share`]): taking a place before any future
//! is made ([`RedisPace::prelude`]), keeping the places a request's `RESERVE` brought,
//! refilling ahead of need off any request's path, and emptying every share when the store
//! was lost.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::share::SiteKeys;
use super::{micros, millis, share, slots, with_margin, Keys, RedisPace, ReserveArgs, Spacing};
use crate::Fleet;
use robots_proxy_authority::Authority;
use robots_proxy_pace::{Admission, PaceAsk};

impl RedisPace {
    /// What every request's pace starts with, done at once (no future yet): its keys and
    /// spacings, and a place of its share if it finds one ([`share`]); most requests of a busy
    /// site finer than the tick end here.
    pub(super) fn prelude(&self, ask: &PaceAsk<'_>) -> Began {
        let PaceAsk { authority, lane, limits } = *ask;
        let arrival = Instant::now();
        let slots = limits.concurrency.unwrap_or(0);
        let one_way = self.fleet.round_trip().min(self.fleet.timeout) / 2;
        let spacing = Spacing {
            interval: limits.interval.map_or(0, |i| micros(with_margin(i, one_way))),
            line: lane.map_or(0, |l| l.line),
            delay: lane.map_or(0, |l| micros(with_margin(l.delay, one_way))),
        };
        let mut taken = None;
        if spacing.shares(slots) {
            let site = self.shares.of(authority, || self.site_keys(authority));
            match self.take_place(authority, &site, (spacing, slots), 0) {
                Ok(admission) => return Began::Admitted(admission),
                Err(said) => taken = Some((site, said)),
            }
        }
        let (pace, slots_key) = match &taken {
            Some((site, _)) => (site.keys.pace.to_string(), site.keys.slots.to_string()),
            None => {
                let keys = self.site_keys(authority);
                (keys.pace.to_string(), keys.slots.to_string())
            }
        };
        Began::Next(Prelude { arrival, pace, slots_key, spacing, slots, one_way, taken })
    }

    /// A request that found its share empty while a refill is under way: waits for it (at
    /// most [`share::MOST_LOOKS`] of them) and looks again; its pace goes on from the prelude
    /// only when it still finds no place. A small future of its own, so that the many requests
    /// waiting for a refill at once do not each make the whole pace's.
    pub(super) async fn wait_for_share(
        &self,
        ask: PaceAsk<'_>,
        mut prelude: Prelude,
    ) -> Result<Admission, robots_proxy_pace::Held> {
        let mut looked = 0;
        while let Some((site, share::Taken::Wait { refilled, .. })) = prelude.taken.take() {
            share::refilled(refilled, self.fleet.timeout).await;
            looked += 1;
            match self.take_place(ask.authority, &site, (prelude.spacing, prelude.slots), looked) {
                Ok(admission) => return Ok(admission),
                Err(again) => prelude.taken = Some((site, again)),
            }
        }
        Box::pin(self.admit_shared(ask, prelude)).await
    }

    /// The slots key and pace key of `authority`.
    pub(super) fn site_keys(&self, authority: &Authority) -> SiteKeys {
        let site = &self.fleet.keys;
        SiteKeys {
            slots: site.site("slots", authority, "").into(),
            pace: site.site("pace", authority, "").into(),
        }
    }

    /// A place of the share of `site`: the request's admission, or what the share said
    /// instead.
    pub(super) fn take_place(
        &self,
        authority: &Authority,
        site: &Arc<share::Site>,
        (spacing, slots): (Spacing, usize),
        looked: u32,
    ) -> Result<Admission, share::Taken> {
        let mut taken = site.take((spacing.interval, slots), looked);
        self.slots.unused(&site.keys, taken.expired());
        let share::Taken::Place { slot, ahead, .. } = taken else { return Err(taken) };
        let slot = slot
            .map(|pooled| Box::new(self.slots.hold_in(site, (pooled.member, pooled.renewed))) as _);
        if let Some((ask, refill)) = ahead {
            self.refill_ahead(refill, authority, &site.keys, (spacing, slots, ask));
        }
        Ok(Admission { waited: false, slot })
    }

    /// Keeps what the `RESERVE` of `refill` brought beside its request's own start and slot,
    /// for this instance's next requests; a task gives back, at the end of their life, the
    /// pooled slots nobody used.
    pub(super) fn keep_share(&self, refill: share::Refill, brought: share::Brought) {
        if let Some(site) = self.shares.put(refill, brought) {
            self.slots.sweep(site);
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
        site_keys: &SiteKeys,
        (spacing, slots, ask): (Spacing, usize, share::Ask),
    ) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let member = self.unique();
        let (pace, slots_key) = (site_keys.pace.to_string(), site_keys.slots.to_string());
        let keys = Keys::new(&self.fleet.keys, authority, None, (pace, slots_key), &member);
        let (starts, more) = (ask.starts.saturating_sub(1), ask.slots.saturating_sub(1));
        let args = ReserveArgs {
            // Waits for nothing (under a tick) and queues nowhere.
            waits: (micros(robots_proxy_pace::TICK) - 1, 0),
            keep: millis(self.keep.get()).max(1000),
            slots,
            lease: micros(self.lease),
            floors: (self.ledger.floors(&keys.pace, &spacing).0, 0),
            ask: share::Ask { starts, slots: more },
        };
        let (fleet, script, shares) =
            (self.fleet.clone(), self.reserve.clone(), self.shares.clone());
        let (ledger, held) = (self.ledger.clone(), self.slots.clone());
        let forgetting = (self.fleet.clone(), self.give_back.clone(), self.lease);
        let one_way = self.fleet.round_trip().min(self.fleet.timeout) / 2;
        runtime.spawn(async move {
            let invocation = args.invocation(&script, &keys, &spacing, &member);
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
                members.extend(share::members(&member, taken));
            }
            let brought =
                share::Brought { starts: extra + 1, slots: members, received, room: room == 1 };
            if let Some(site) = shares.put(refill, brought) {
                held.sweep(site);
            }
        });
    }
}

/// What [`RedisPace::prelude`] came to: the request is admitted (a place of its share), or
/// its pace goes on from the prelude.
pub(super) enum Began {
    Admitted(Admission),
    Next(Prelude),
}

impl Prelude {
    /// Whether the request's share is being refilled, to wait for ([`RedisPace::wait_for_share`]).
    pub(super) fn waits(&self) -> bool {
        matches!(self.taken, Some((_, share::Taken::Wait { .. })))
    }
}

/// What a request's pace starts from ([`RedisPace::prelude`]): when it arrived, its site's
/// pace and slots keys, its spacings, its site's limit, half the round trip to Redis, and
/// what its share said when it found no place.
pub(super) struct Prelude {
    pub(super) arrival: Instant,
    pub(super) pace: String,
    pub(super) slots_key: String,
    pub(super) spacing: Spacing,
    pub(super) slots: usize,
    pub(super) one_way: Duration,
    pub(super) taken: Option<(Arc<share::Site>, share::Taken)>,
}

/// Each time the heartbeat finds the store lost or back ([`Fleet::losses`]), empties every
/// share ([`share::Shares::empty_all`]) and gives its pooled slots back (they may be in Redis
/// still); ends when the pace is dropped.
pub(super) async fn empty_shares_on_loss(
    fleet: Arc<Fleet>,
    shares: Weak<share::Shares>,
    held: Weak<slots::Slots>,
) {
    let mut losses = fleet.losses();
    while losses.changed().await.is_ok() {
        let (Some(shares), Some(held)) = (shares.upgrade(), held.upgrade()) else { return };
        for (keys, members) in shares.empty_all() {
            held.unused(&keys, members);
        }
    }
}
