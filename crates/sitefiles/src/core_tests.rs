//! The core driven directly: no runtime, no clock, no fetcher. Values come from the kind's own
//! state table ([`SiteFile::next`]); `W` is a number naming a place to wait.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::{Asked, Core, FetchJob, Output};
use crate::fetch::Fetched;
use crate::sitefile::{Robots, SiteFile};
use crate::{FetchOutcome, RobotsRules, RobotsSection, RobotsSnapshot, RobotsState};
use robots_proxy_authority::{Authority, Scheme};
use robots_proxy_engine::RobotsTxt;

type Store = Core<Robots, u32>;

fn a() -> Authority {
    Authority::new(Scheme::Http, "a.test", 80).unwrap()
}

fn t0() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1 << 30)
}

fn settings() -> RobotsSection {
    RobotsSection {
        max_age: Duration::from_secs(100),
        min_age: Duration::ZERO,
        retry_initial: Duration::from_secs(10),
        retry_max: Duration::from_secs(40),
        give_up_after: Duration::from_secs(60),
        ..RobotsSection::default()
    }
}

fn ok() -> Fetched {
    let body: &'static [u8] = b"User-agent: *\nDisallow: /x\n";
    Fetched::Robots {
        status: 200,
        robots: Arc::new(RobotsTxt::parse(body)),
        body: bytes::Bytes::from_static(body),
        max_age: None,
    }
}

fn fail() -> Fetched {
    Fetched::Unreachable { outcome: FetchOutcome::Status(503) }
}

fn value(
    prev: Option<&Arc<RobotsSnapshot>>,
    answer: Fetched,
    now: SystemTime,
) -> Arc<RobotsSnapshot> {
    Arc::new(Robots::next(prev.map(|p| &**p), &a(), answer, now, &settings()))
}

/// Every place to wait handed out, numbered from 1.
fn waits() -> impl FnMut() -> u32 {
    let mut n = 0;
    move || {
        n += 1;
        n
    }
}

fn jobs(core: &mut Store) -> Vec<FetchJob<u32>> {
    std::iter::from_fn(|| core.poll_fetch()).collect()
}

/// Runs the outputs as a driver would: the entry stored, the waiters answered.
fn drive(core: &mut Store, entry: &mut Option<Arc<RobotsSnapshot>>) -> Vec<u32> {
    let mut answered = Vec::new();
    while let Some(output) = core.poll_output() {
        match output {
            Output::Store { value, .. } => *entry = Some(value),
            Output::Archive { .. } => {}
            Output::Answer { wait, .. } => answered.push(wait),
        }
    }
    answered
}

fn waits_at(asked: Asked<RobotsSnapshot, u32>) -> u32 {
    match asked {
        Asked::Wait(w) => w,
        Asked::Use(_) => panic!("used an entry, expected to wait"),
    }
}

fn used(asked: Asked<RobotsSnapshot, u32>) -> Arc<RobotsSnapshot> {
    match asked {
        Asked::Use(v) => v,
        Asked::Wait(_) => panic!("waited, expected an entry"),
    }
}

#[test]
fn many_asks_start_one_fetch_and_share_its_wait() {
    let mut core = Store::default();
    let mut new_wait = waits();
    let first = waits_at(core.handle_ask(t0(), &a(), None, &mut new_wait));
    for _ in 0..50 {
        assert_eq!(waits_at(core.handle_ask(t0(), &a(), None, &mut new_wait)), first);
    }
    let started = jobs(&mut core);
    assert_eq!(started.len(), 1, "one fetch for 51 requests");
    assert_eq!((started[0].wait, started[0].ahead), (first, false));
    assert_eq!(core.fetches_started(), 1);
    // Another authority has its own fetch.
    let b = Authority::new(Scheme::Http, "b.test", 80).unwrap();
    assert_ne!(waits_at(core.handle_ask(t0(), &b, None, &mut new_wait)), first);
    assert_eq!(jobs(&mut core).len(), 1);
}

#[test]
fn a_waiter_that_leaves_cancels_nothing_and_the_result_is_stored() {
    let mut core = Store::default();
    let mut new_wait = waits();
    let mut entry = None;
    // The only waiter leaves (its client hung up): the core never hears of it.
    let _left = waits_at(core.handle_ask(t0(), &a(), None, &mut new_wait));
    let job = jobs(&mut core).pop().unwrap();
    let wait = job.wait;
    assert!(core.handle_fetched(job, value(None, ok(), t0()), true));
    assert_eq!(drive(&mut core, &mut entry), vec![wait]);
    let got = used(core.handle_ask(t0(), &a(), entry.as_ref(), &mut new_wait));
    assert_eq!(got.state, RobotsState::Fresh);
    assert!(jobs(&mut core).is_empty(), "the next request uses it, no second fetch");
}

#[test]
fn a_refresh_ahead_starts_once_and_requests_go_on_with_the_entry() {
    let mut core = Store::default();
    let mut new_wait = waits();
    let entry = Some(value(None, ok(), t0()));
    let later = t0() + Duration::from_secs(90);
    assert!(core.handle_refresh(&a(), true, &mut new_wait));
    assert!(!core.handle_refresh(&a(), true, &mut new_wait), "one refresh in flight");
    let started = jobs(&mut core);
    assert_eq!(started.len(), 1);
    assert!(started[0].ahead);
    // Requests meanwhile use the entry in force; none waits for the refresh.
    for _ in 0..10 {
        let got = used(core.handle_ask(later, &a(), entry.as_ref(), &mut new_wait));
        assert!(Arc::ptr_eq(&got, entry.as_ref().unwrap()));
    }
    assert!(jobs(&mut core).is_empty());
    // A refresh of an entry replaced or purged since it was found is not started.
    let mut other = Store::default();
    assert!(!other.handle_refresh(&a(), false, &mut new_wait));
    assert!(jobs(&mut other).is_empty());
}

#[test]
fn a_failing_origin_is_retried_after_its_back_off_while_requests_go_on() {
    let mut core = Store::default();
    let mut new_wait = waits();
    let mut entry = None;
    waits_at(core.handle_ask(t0(), &a(), None, &mut new_wait));
    let job = jobs(&mut core).pop().unwrap();
    core.handle_fetched(job, value(None, fail(), t0()), true);
    drive(&mut core, &mut entry);
    let failed = entry.clone().unwrap();
    assert_eq!((failed.state, failed.failures), (RobotsState::Unreachable, 1));
    // Within the back-off (retry_initial, 10 s): used, no fetch.
    let soon = t0() + Duration::from_secs(9);
    assert!(matches!(
        used(core.handle_ask(soon, &a(), entry.as_ref(), &mut new_wait)).rules,
        RobotsRules::DisallowAll
    ));
    assert!(jobs(&mut core).is_empty());
    // Past it: still in force (no request waits for the blackholed origin), one retry.
    let due = t0() + Duration::from_secs(10);
    for _ in 0..5 {
        let got = used(core.handle_ask(due, &a(), entry.as_ref(), &mut new_wait));
        assert_eq!(got.state, RobotsState::Unreachable);
    }
    let retry = jobs(&mut core);
    assert_eq!(retry.len(), 1, "one retry however many requests");
    // The retry fails again: the back-off doubles.
    let job = retry.into_iter().next().unwrap();
    core.handle_fetched(job, value(entry.as_ref(), fail(), due), true);
    drive(&mut core, &mut entry);
    let twice = entry.clone().unwrap();
    assert_eq!(twice.failures, 2);
    assert_eq!(twice.expires_at, due + Duration::from_secs(20));
}

#[test]
fn after_give_up_without_a_copy_everything_is_allowed_while_retries_go_on() {
    let mut core = Store::default();
    let mut new_wait = waits();
    let mut entry = None;
    let mut now = t0();
    waits_at(core.handle_ask(now, &a(), None, &mut new_wait));
    let mut job = jobs(&mut core).pop().unwrap();
    loop {
        core.handle_fetched(job, value(entry.as_ref(), fail(), now), true);
        drive(&mut core, &mut entry);
        let e = entry.clone().unwrap();
        if e.state == RobotsState::Unavailable {
            assert!(matches!(e.rules, RobotsRules::AllowAll));
            assert!(e.failing_since.is_some(), "told apart from a 4xx");
            break;
        }
        assert!(now < t0() + Duration::from_secs(200), "never gave up");
        now = e.expires_at;
        let got = used(core.handle_ask(now, &a(), entry.as_ref(), &mut new_wait));
        assert!(matches!(got.rules, RobotsRules::DisallowAll));
        job = jobs(&mut core).pop().expect("a retry");
    }
    // Still retried after the give-up, and a recovered origin is noticed.
    let due = entry.as_ref().unwrap().expires_at;
    let got = used(core.handle_ask(due, &a(), entry.as_ref(), &mut new_wait));
    assert!(matches!(got.rules, RobotsRules::AllowAll));
    let job = jobs(&mut core).pop().expect("a retry after the give-up");
    core.handle_fetched(job, value(entry.as_ref(), ok(), due), true);
    drive(&mut core, &mut entry);
    assert_eq!(entry.unwrap().state, RobotsState::Fresh);
}

#[test]
fn a_fresh_copy_whose_refresh_failed_is_served_stale_past_its_lifetime() {
    let mut core = Store::default();
    let mut new_wait = waits();
    let first = value(None, ok(), t0());
    let ahead = t0() + Duration::from_secs(90);
    let kept = value(Some(&first), fail(), ahead);
    assert_eq!((kept.state, kept.failures), (RobotsState::Fresh, 1), "kept in force");
    let expired = t0() + Duration::from_secs(100);
    let got = used(core.handle_ask(expired, &a(), Some(&kept), &mut new_wait));
    assert_eq!(got.state, RobotsState::Stale);
    assert_eq!(jobs(&mut core).len(), 1, "its retry");
}

#[test]
fn a_purge_during_a_fetch_answers_its_waiters_but_stores_nothing() {
    let mut core = Store::default();
    let mut new_wait = waits();
    let mut entry = None;
    let wait = waits_at(core.handle_ask(t0(), &a(), None, &mut new_wait));
    let job = jobs(&mut core).pop().unwrap();
    core.handle_purge(Some(&a()));
    assert!(!core.is_fetching(&a()));
    // A request after the purge starts a fetch of its own (the old one may predate it).
    let after = waits_at(core.handle_ask(t0(), &a(), None, &mut new_wait));
    assert_ne!(after, wait);
    let second = jobs(&mut core).pop().unwrap();
    assert!(!core.handle_fetched(job, value(None, ok(), t0()), true), "not stored");
    assert_eq!(drive(&mut core, &mut entry), vec![wait], "its waiters are answered");
    assert!(entry.is_none());
    assert!(core.is_fetching(&a()), "the purge's own fetch is still in flight");
    assert!(core.handle_fetched(second, value(None, ok(), t0()), true));
    assert_eq!(drive(&mut core, &mut entry), vec![after]);
    assert!(entry.is_some());
    // A purge of everything forgets every fetch.
    waits_at(core.handle_ask(t0() + Duration::from_secs(500), &a(), entry.as_ref(), &mut new_wait));
    let job = jobs(&mut core).pop().unwrap();
    core.handle_purge(None);
    assert!(!core.handle_fetched(job, value(None, ok(), t0()), true));
}

#[test]
fn a_fetch_that_ends_without_a_result_answers_and_lets_the_next_request_ask_again() {
    let mut core = Store::default();
    let mut new_wait = waits();
    let mut entry: Option<Arc<RobotsSnapshot>> = None;
    let wait = waits_at(core.handle_ask(t0(), &a(), None, &mut new_wait));
    let job = jobs(&mut core).pop().unwrap();
    let outcome = FetchOutcome::Fleet("fleet out of reach".into());
    core.handle_abandoned(job, Arc::new(RobotsSnapshot::unreachable_now(&a(), outcome, t0())));
    let mut archived = 0;
    let mut answered = Vec::new();
    while let Some(output) = core.poll_output() {
        match output {
            Output::Store { .. } => panic!("stored"),
            Output::Archive { .. } => archived += 1,
            Output::Answer { wait, .. } => answered.push(wait),
        }
    }
    assert_eq!((archived, answered), (0, vec![wait]));
    assert!(entry.take().is_none());
    waits_at(core.handle_ask(t0(), &a(), None, &mut new_wait));
    assert_eq!(jobs(&mut core).len(), 1, "asked again");
}
