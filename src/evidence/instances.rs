//! The instance dimension of `evidence URL --at TIME` (issue 39, L5): which instance's history
//! answers, and what each instance had in force.
//!
//! The audit records of a fleet name the instance that wrote them (`service.node.name`). Each
//! instance decides with its own copy of robots.txt: a body larger than `fleet.max_shared_body`
//! is fetched by each for itself, so one may still use version 1 while another has fetched
//! version 2. The answer is therefore given for one instance's records ([`choose`]):
//!
//! 1. the one `--instance NAME` names (an instance no record names is refused, naming those
//!    that are);
//! 2. else, when the files hold several instances, the one named by the records for the URL at
//!    exactly TIME (the request asked about), when they name one;
//! 3. else, when the instances that knew the authority disagree at TIME (different things in
//!    force, or one known and another not), nothing: the answer is refused as ambiguous
//!    ([`EvidenceError::Ambiguous`]), naming what each had, rather than give one instance's
//!    answer for another's request;
//! 4. else (one instance, or all agree) every source's merged history, as without a fleet.

use std::time::SystemTime;

use serde_json::{json, Value};

use super::audit_source::Kept;
use super::history::{History, InForce, Instances};
use super::time::show;
use super::EvidenceError;

/// Why the answer is for one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ChosenBy {
    /// `--instance NAME`.
    Flag,
    /// The record at TIME for the URL (its file and line) names it.
    Record(String),
}

/// The instance the answer is for.
#[derive(Debug, Clone)]
pub(super) struct Chosen {
    /// Its `service.node.name`.
    pub(super) name: String,
    /// Why.
    pub(super) by: ChosenBy,
}

/// `service.node.name` of a record.
pub(super) fn node_name(record: &Value) -> Option<&str> {
    record.get("service.node.name").and_then(Value::as_str)
}

/// How an instance is named to a person: its name, or that its records name none.
pub(super) fn label(instance: Option<&str>) -> String {
    match instance {
        Some(name) => format!("{name:?}"),
        None => "(records naming no instance)".to_owned(),
    }
}

/// What `what` says, for a person.
fn describe(what: Option<&InForce>) -> String {
    match what {
        Some(InForce::File(digest)) => format!("robots.txt sha256:{digest}"),
        Some(other) => other.kind().to_owned(),
        None => "nothing known".to_owned(),
    }
}

/// The instance whose history answers (see the module's documentation), or `None` for the
/// merged history; the refusals of an unknown `--instance` and of disagreeing instances.
pub(super) fn choose(
    flag: Option<&str>,
    history: &History,
    instances: &Instances,
    records: &[Kept],
    authority: &str,
    at: SystemTime,
) -> Result<Option<Chosen>, EvidenceError> {
    if let Some(name) = flag {
        named(history, name)?;
        return Ok(Some(Chosen { name: name.to_owned(), by: ChosenBy::Flag }));
    }
    if instances.each.len() < 2 {
        return Ok(None);
    }
    // The request asked about: the records for the URL at exactly TIME, when they all name one
    // instance.
    let at_time: Vec<&Kept> = records.iter().filter(|k| k.at == at).collect();
    let mut names: Vec<&str> = at_time.iter().filter_map(|k| node_name(&k.value)).collect();
    names.sort_unstable();
    names.dedup();
    if let ([name], Some(k)) = (&names[..], at_time.iter().find(|k| node_name(&k.value).is_some()))
    {
        let by = ChosenBy::Record(format!("{}:{}", k.file.display(), k.line));
        return Ok(Some(Chosen { name: (*name).to_owned(), by }));
    }
    if instances.disagree() {
        let each: Vec<String> = instances
            .each
            .iter()
            .map(|e| format!("{} had {}", label(e.instance.as_deref()), describe(e.what())))
            .collect();
        return Err(EvidenceError::Ambiguous(format!(
            "the instances disagree on what was in force for {authority} at {}: {}; the answer \
             depends on which one decided: give --instance NAME (or --at the time of a record \
             for the URL, which names its instance)",
            show(at),
            each.join(", ")
        )));
    }
    Ok(None)
}

/// Refuses `--instance NAME` when no record of the audit files names it, listing those that
/// are named.
pub(super) fn named(history: &History, name: &str) -> Result<(), EvidenceError> {
    let named = history.instances();
    if named.contains(&Some(name)) {
        return Ok(());
    }
    let known: Vec<String> = named.iter().flatten().map(|n| format!("{n:?}")).collect();
    let known = if known.is_empty() {
        "they name none (service.node.name is written only in a fleet, fleet.redis)".to_owned()
    } else {
        format!("they name {}", known.join(", "))
    };
    Err(EvidenceError::Unknown(format!(
        "--instance {name:?}: no record of the --audit files names this instance \
         (service.node.name); {known}"
    )))
}

/// One instance's entry in the answer: what it had in force and the decision on it.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    /// The instance.
    pub(super) instance: Option<String>,
    /// What it had in force, `None` when nothing is known.
    pub(super) what: Option<InForce>,
    /// When the bytes it had in force were fetched.
    pub(super) fetched_at: Option<SystemTime>,
    /// The decision on it (after exceptions and usage preferences) and why, when it could be
    /// replayed.
    pub(super) decision: Option<(bool, String)>,
}

/// The `instances` list of `--json`.
pub(super) fn json_list(entries: &[Entry]) -> Value {
    let each = entries.iter().map(|e| {
        json!({
            "instance": e.instance,
            "in_force": e.what.as_ref().map(InForce::kind),
            "sha256": match &e.what { Some(InForce::File(d)) => Some(d), _ => None },
            "fetched_at": e.fetched_at.map(show),
            "allowed": e.decision.as_ref().map(|d| d.0),
            "reason": e.decision.as_ref().map(|d| &d.1),
        })
    });
    Value::Array(each.collect())
}

/// The lines of the text form: which instance answered, and what each had when there are
/// several (one line, `INSTANCES DISAGREE: …` when they `disagree`).
pub(super) fn text(chosen: Option<&Chosen>, entries: &[Entry], disagree: bool) -> String {
    let mut out = String::new();
    if let Some(c) = chosen {
        let by = match &c.by {
            ChosenBy::Flag => "--instance".to_owned(),
            ChosenBy::Record(at) => format!("named by the record at TIME, {at}"),
        };
        out.push_str(&format!("instance:   {:?} ({by})\n", c.name));
    }
    if entries.len() > 1 {
        let each: Vec<String> = entries
            .iter()
            .map(|e| {
                let verdict = match &e.decision {
                    Some((true, _)) => ", allowed",
                    Some((false, _)) => ", disallowed",
                    None => "",
                };
                format!("{} {}{verdict}", label(e.instance.as_deref()), describe(e.what.as_ref()))
            })
            .collect();
        let head = if disagree { "  INSTANCES DISAGREE:" } else { "  instances agree:" };
        out.push_str(&format!("{head} {}\n", each.join("; ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;
    use crate::evidence::history::Observation;

    fn t(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(s)
    }

    /// A: v1 fetched at 100; B: v2 fetched at 200; both write records until 300.
    fn two() -> History {
        let mut h = History::default();
        for (name, at, v) in [("a", 100, "v1"), ("b", 200, "v2")] {
            let instance = h.audit_record_at(t(at), Some(name));
            h.audit_record_at(t(300), Some(name));
            let o = Observation {
                fetch_key: Some(t(at)),
                fetch: true,
                until: Some(t(1000)),
                from_audit: true,
                instance,
                ..Observation::at(t(at), InForce::File(v.to_owned()))
            };
            h.observe("http://a.test", o);
        }
        h
    }

    fn record(at: u64, instance: &str) -> Kept {
        let value = json!({ "service.node.name": instance });
        Kept { file: PathBuf::from("b.jsonl"), line: 7, raw: Vec::new(), value, at: t(at) }
    }

    fn choose_at(
        h: &History,
        flag: Option<&str>,
        records: &[Kept],
        at: u64,
    ) -> Result<Option<Chosen>, EvidenceError> {
        choose(flag, h, &h.instances_at("http://a.test", t(at)), records, "http://a.test", t(at))
    }

    #[test]
    fn disagreeing_instances_are_refused_unless_one_is_named() {
        let h = two();
        // At 250 A had v1, B v2: nothing says which decided.
        match choose_at(&h, None, &[], 250) {
            Err(e @ EvidenceError::Ambiguous(_)) => {
                let m = e.to_string();
                assert!(m.contains("\"a\" had robots.txt sha256:v1"), "{m}");
                assert!(m.contains("\"b\" had robots.txt sha256:v2"), "{m}");
                assert!(m.contains("--instance"), "{m}");
                assert_eq!(e.exit_status(), 1);
            }
            other => panic!("{other:?}"),
        }
        // Before B fetched, B knew nothing: a disagreement too.
        assert!(matches!(choose_at(&h, None, &[], 150), Err(EvidenceError::Ambiguous(_))));
        // --instance names one.
        let a = choose_at(&h, Some("a"), &[], 250).unwrap().unwrap();
        assert_eq!((a.name.as_str(), a.by), ("a", ChosenBy::Flag));
        // The record for the URL at exactly TIME names the one that decided.
        let b = choose_at(&h, None, &[record(250, "b"), record(260, "a")], 250).unwrap().unwrap();
        assert_eq!((b.name.as_str(), b.by), ("b", ChosenBy::Record("b.jsonl:7".to_owned())));
        // Records at TIME naming two instances name none.
        let both = [record(250, "b"), record(250, "a")];
        assert!(matches!(choose_at(&h, None, &both, 250), Err(EvidenceError::Ambiguous(_))));
    }

    #[test]
    fn an_unknown_instance_is_refused_naming_the_known_ones() {
        let h = two();
        let e = choose_at(&h, Some("c"), &[], 250).unwrap_err();
        assert!(matches!(e, EvidenceError::Unknown(_)), "{e:?}");
        let m = e.to_string();
        assert!(m.contains("--instance \"c\"") && m.contains("they name \"a\", \"b\""), "{m}");
        let none = choose_at(&History::default(), Some("c"), &[], 250).unwrap_err().to_string();
        assert!(none.contains("they name none"), "{none}");
    }

    #[test]
    fn one_instance_or_agreeing_ones_answer_from_every_source() {
        let seen = |h: &mut History, name: &str, at: u64, what: InForce| {
            let instance = h.audit_record_at(t(at), Some(name));
            let o = Observation { from_audit: true, instance, ..Observation::at(t(at), what) };
            h.observe("http://a.test", o);
        };
        let mut h = History::default();
        seen(&mut h, "a", 100, InForce::AllowAll);
        // One instance: the merged history, as outside a fleet.
        assert!(choose_at(&h, None, &[], 100).unwrap().is_none());
        // Two that had the same thing at TIME: the merged history too.
        seen(&mut h, "b", 100, InForce::AllowAll);
        assert!(choose_at(&h, None, &[], 100).unwrap().is_none());
        // A record at TIME still names the instance that decided: its records answer.
        let b = choose_at(&h, None, &[record(100, "b")], 100).unwrap().unwrap();
        assert_eq!(b.name, "b");
    }
}
