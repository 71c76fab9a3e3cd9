//! `GET /robots?url=URL&agent=TOKEN`: what the proxy would decide for `URL` now, and what it
//! holds about the authority's robots.txt, as JSON.
//!
//! It asks the same cache and the same policy as the proxy, so the answer is the live one: when
//! nothing is cached, or the copy is due, robots.txt is fetched first, exactly as a request
//! would cause.

use std::collections::HashMap;
use std::time::SystemTime;

use http::StatusCode;
use serde_json::{json, Value};

use super::{bad_request, json_response, Body};
use robots_proxy_authority::Authority;
use robots_proxy_decide::{
    outcome_text, Category, Claim, Decision, FetchOutcome, ProductToken, Readings, RobotsSnapshot,
    RobotsState, RobotsTxt, RuleKind,
};
use robots_proxy_proxy::Proxy;

pub(super) async fn explain(
    proxy: &Proxy,
    query: &HashMap<String, String>,
) -> http::Response<Body> {
    let Some(url) = query.get("url").map(|u| u.trim()) else {
        return bad_request(
            "missing the url parameter: GET /robots?url=http://host/path&agent=TOKEN",
        );
    };
    let uri: http::Uri = match url.parse() {
        Ok(uri) => uri,
        Err(e) => return bad_request(&format!("{url:?} is not a URL: {e}")),
    };
    let authority = match Authority::from_uri(&uri) {
        Ok(a) => a,
        Err(e) => return bad_request(&format!("{url:?}: {e}")),
    };
    // The proxy forwards the path as sent and decides on every reading of it.
    let readings = Readings::of(uri.path_and_query().map_or("/", |p| p.as_str()));
    let path = readings.as_sent();
    let policy = proxy.policy();
    // Without `agent`, the token the proxy would use for a request that names none: the
    // configured default, if any.
    let (token, token_source) = match query.get("agent").map(|a| a.trim()) {
        Some(agent) if !agent.is_empty() => match ProductToken::from_token_or_user_agent(agent) {
            Some(token) => (Some(token), "agent parameter"),
            None => {
                return bad_request(&format!(
                    "no product token found in agent {agent:?}; give a token like ExampleBot \
                     or a User-Agent that names one"
                ))
            }
        },
        _ => match policy.token_for(&http::HeaderMap::new()) {
            (Some(token), _) => (Some(token), "policy.default_token"),
            (None, _) => (None, "none: only the `*` groups apply"),
        },
    };
    let snapshot = policy.robots(&authority).await;
    let now = proxy.clock().now();
    // The proxy's one decision, for a crawler whose user is tied to the token (what would
    // decide for that crawler itself; a user is not known here); it counts no exception use.
    let decided = policy.decide(&snapshot, Claim::tied(token.as_ref(), None), &readings, now);
    let decision = decided.explain();
    let each: Vec<Value> = decided
        .each()
        .into_iter()
        .map(|d| {
            json!({
                "reading": d.reading.name(),
                "description": d.reading.description(),
                "path": d.read_path,
                "allowed": d.is_allowed(),
                "reason": d.reason,
                "rule": d.rule,
                "line": d.line,
            })
        })
        .collect();
    let body = json!({
        "url": format!("{authority}{path}"),
        "authority": authority.to_string(),
        "path": path,
        "product_token": token.as_ref().map(|t| t.as_str()),
        "token_source": token_source,
        "decision": {
            "allowed": decision.is_allowed(),
            "reason": decision.reason,
            "rule": decision.rule,
            "line": decision.line,
            "group": decision.group,
            "reading": decision.reading.name(),
            "read_path": decision.read_path,
        },
        "readings": each,
        "usage": usage_state(&snapshot, &decided),
        "robots": robots_state(&snapshot, token.as_ref(), now),
    });
    let mut body = body;
    // The robots.txt version decided with, as in the 403's JSON body and the audit record;
    // left out when no file is in force.
    if let (Some(version), Some(decision)) = (&decision.version, body["decision"].as_object_mut()) {
        decision.insert("robots_sha256".to_owned(), version.sha256().into());
        decision.insert("robots_fetched_at".to_owned(), version.fetched_at_text().into());
    }
    // The exception that would decide (`[[exceptions]]`, for a token; a user is not known
    // here): it overrides robots.txt's decision above.
    if let (Some(x), Some(map)) = (decided.exception(), body.as_object_mut()) {
        map.insert(
            "exception".to_owned(),
            json!({
                "id": &*x.id,
                "effect": x.effect.name(),
                "reference": &*x.reference,
                "allowed": x.effect == robots_proxy_decide::exceptions::Effect::Allow,
                "reason": x.reason(),
            }),
        );
    }
    json_response(StatusCode::OK, &body)
}

/// The AI usage preferences robots.txt states for this URL (`Content-Usage`,
/// `Content-Signal`): each category's value (`y`, `n`, `unknown`) and deciding line.
fn usage_state(snapshot: &RobotsSnapshot, decision: &Decision<'_>) -> Value {
    if snapshot.rules.parsed().is_none() {
        return json!({});
    }
    let prefs = decision.usage();
    let mut out = serde_json::Map::new();
    for c in Category::ALL {
        let s = prefs.get(c);
        out.insert(c.label().to_owned(), json!({ "value": s.preference.as_str(), "line": s.line }));
    }
    Value::Object(out)
}

/// The cached state of one authority's robots.txt.
fn robots_state(snapshot: &RobotsSnapshot, token: Option<&ProductToken>, now: SystemTime) -> Value {
    let rules = snapshot.rules.kind_word();
    let (groups, sitemaps) = match snapshot.rules.parsed() {
        Some(robots) => (groups(robots, token), sitemaps(robots)),
        None => (json!([]), json!([])),
    };
    let status = match &snapshot.last_outcome {
        FetchOutcome::Status(code) => json!(code),
        _ => Value::Null,
    };
    json!({
        "url": snapshot.robots_url,
        "state": snapshot.state,
        "stale": snapshot.state == RobotsState::Stale,
        "rules": rules,
        "status": status,
        "outcome": outcome_text(&snapshot.last_outcome),
        "fetched_at": robots_proxy_audit::timestamp(snapshot.fetched_at),
        "expires_at": robots_proxy_audit::timestamp(snapshot.expires_at),
        "age_seconds": snapshot.age(now).as_secs(),
        "current": snapshot.is_current(now),
        "failing_since": snapshot.failing_since.map(robots_proxy_audit::timestamp),
        "failures": snapshot.failures,
        "groups": groups,
        "sitemaps": sitemaps,
    })
}

/// Every group of the file, marking those that apply to `token`.
fn groups(robots: &RobotsTxt, token: Option<&ProductToken>) -> Value {
    let applying = robots.groups_for(token);
    let list: Vec<Value> = robots
        .groups()
        .iter()
        .map(|group| {
            let rules: Vec<Value> = robots
                .rules_of(group)
                .iter()
                .map(|rule| {
                    json!({
                        "kind": match rule.kind() {
                            RuleKind::Allow => "allow",
                            _ => "disallow",
                        },
                        "pattern": rule.pattern(),
                        "line": rule.line(),
                    })
                })
                .collect();
            json!({
                "user_agents": group.user_agents().iter().map(|u| u.value()).collect::<Vec<_>>(),
                "line": group.user_agents().first().map(|u| u.line()),
                "applies": applying.iter().any(|g| std::ptr::eq(*g, group)),
                "crawl_delay": group.crawl_delay().map(|d| d.seconds()),
                "rules": rules,
            })
        })
        .collect();
    Value::Array(list)
}

fn sitemaps(robots: &RobotsTxt) -> Value {
    Value::Array(
        robots.sitemaps().iter().map(|s| json!({ "url": s.url(), "line": s.line() })).collect(),
    )
}
