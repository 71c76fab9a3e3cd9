//! `[fleet]`: sharing robots.txt and the pace with other instances through Redis (or Valkey).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use robots_proxy_units::bounds::{count, duration, size, Bound, MIB, MINUTE, POSITIVE, YEAR};
use robots_proxy_units::{raw_section, ByteSize, Problems};

/// `[fleet]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(remote = "Self", default, deny_unknown_fields)]
pub struct FleetSection {
    /// `redis://[user:password@]host:port/db` or `rediss://…`; empty: this instance alone. A
    /// list of node URLs for `topology = "cluster"` (any of its nodes) and `"sentinel"` (the
    /// sentinels).
    pub redis: RedisUrl,
    /// What `redis` names: one server (`server`, also a primary behind a fixed address), a
    /// Redis Cluster (`cluster`) or the sentinels of a monitored primary (`sentinel`).
    pub topology: Topology,
    /// With `topology = "sentinel"`: the name the sentinels monitor the primary under.
    pub sentinel_service: String,
    /// Prefix of every key and channel the fleet uses, so several fleets can share a Redis.
    pub key_prefix: String,
    /// What to do while Redis cannot be reached.
    pub on_redis_error: OnRedisError,
    /// This instance's name in the fleet view and the audit log (`service.node.name`); empty:
    /// `hostname:listen-port`.
    pub instance: String,
    /// Longest wait for one Redis round trip; past it Redis counts as out of reach.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Longest a robots.txt record lives in Redis after it was last stored (each fetch of the
    /// site stores it again): what bounds Redis's memory over time.
    #[serde(with = "humantime_serde")]
    pub robots_ttl: Duration,
    /// Largest robots.txt body shared through Redis; a larger one is kept only by the instance
    /// that fetched it (each instance then fetches it for itself).
    pub max_shared_body: ByteSize,
    /// Records are stored only while Redis's used memory is below this percentage of its
    /// `maxmemory`, so that records never take the room the pace, slot and lease keys need
    /// (with `maxmemory-policy noeviction`, nothing is evicted). No limit while `maxmemory`
    /// is 0.
    pub records_memory_percent: u8,
    /// The fleet's key (`robots-proxy fleet key new FILE` writes one): every robots.txt,
    /// tdmrep.json and purge record written to Redis is sealed with it (HMAC-SHA-256), and only
    /// records that verify are used. Unset: records are not sealed and Redis is trusted.
    pub key_file: Option<PathBuf>,
    /// The key before the current one, accepted (never used to seal) while keys change.
    pub previous_key_file: Option<PathBuf>,
}

impl Default for FleetSection {
    fn default() -> Self {
        FleetSection {
            redis: RedisUrl::default(),
            topology: Topology::Server,
            sentinel_service: String::new(),
            key_prefix: "robots-proxy:".to_owned(),
            on_redis_error: OnRedisError::Local,
            instance: String::new(),
            timeout: Duration::from_millis(500),
            robots_ttl: Duration::from_secs(2 * 24 * 3600),
            max_shared_body: ByteSize(64 * 1024),
            records_memory_percent: 75,
            key_file: None,
            previous_key_file: None,
        }
    }
}

raw_section!(FleetSection, RawFleetSection, "fleet");

/// The bounds of `[fleet]`.
pub const FLEET_BOUNDS: &[Bound<FleetSection>] = &[
    duration("fleet.timeout", |c| c.timeout, POSITIVE, MINUTE),
    duration("fleet.robots_ttl", |c| c.robots_ttl, MINUTE, YEAR),
    size("fleet.max_shared_body", |c| c.max_shared_body, 0, 64 * MIB),
    count("fleet.records_memory_percent", |c| u64::from(c.records_memory_percent), 1, 100),
];

impl TryFrom<RawFleetSection> for FleetSection {
    type Error = Problems;

    /// The bounds, the key prefix and files, the instance name, and the topology with the
    /// shape of `fleet.redis`.
    fn try_from(raw: RawFleetSection) -> Result<Self, Problems> {
        let section = raw.0;
        let mut problems = Problems::new();
        problems.bounds(FLEET_BOUNDS, &section);
        problems.absorb(section.rules().into_iter().collect());
        problems.or_build(|| section)
    }
}

impl FleetSection {
    /// Whether this instance is part of a fleet.
    pub fn is_enabled(&self) -> bool {
        self.redis.client.is_some()
    }

    /// What serde cannot say, besides the bounds: the key and the problem, one per problem.
    fn rules(&self) -> Vec<(&'static str, String)> {
        let mut bad = Vec::new();
        if self.is_enabled() && self.key_prefix.is_empty() {
            bad.push((
                "fleet.key_prefix",
                "must not be empty (it keeps the fleet's keys apart)".into(),
            ));
        }
        if self.previous_key_file.is_some() && self.key_file.is_none() {
            bad.push((
                "fleet.previous_key_file",
                "needs fleet.key_file: the previous key only verifies while keys change".into(),
            ));
        }
        if self.instance.chars().any(|c| c.is_control()) {
            bad.push(("fleet.instance", "must not contain control characters".into()));
        }
        bad.extend(self.check_topology());
        bad
    }

    /// `fleet.redis`, `fleet.topology` and `fleet.sentinel_service` together.
    fn check_topology(&self) -> Vec<(&'static str, String)> {
        let mut bad = Vec::new();
        let urls = self.redis.urls();
        match self.topology {
            Topology::Server if self.redis.listed => bad.push((
                "fleet.redis",
                format!(
                    "is a list of {} URLs, but fleet.topology is \"server\", which takes one URL \
                     (a string); a list names the nodes of fleet.topology = \"cluster\" or the \
                     sentinels of fleet.topology = \"sentinel\"",
                    urls.len()
                ),
            )),
            Topology::Cluster | Topology::Sentinel if self.is_enabled() => {
                if let Some(unix) = urls.iter().find(|u| u.contains("unix://")) {
                    bad.push((
                        "fleet.redis",
                        format!(
                            "{} is a unix socket; fleet.topology = \"{}\" needs TCP addresses \
                             (redis://host:port or rediss://host:port)",
                            mask_redis_url(unix),
                            self.topology.as_str()
                        ),
                    ));
                }
            }
            _ => {}
        }
        if self.topology == Topology::Sentinel && self.is_enabled() {
            if self.sentinel_service.trim().is_empty() {
                bad.push((
                    "fleet.sentinel_service",
                    "must name the primary the sentinels monitor (their `sentinel monitor NAME …`) \
                     when fleet.topology is \"sentinel\""
                        .into(),
                ));
            }
        } else if !self.sentinel_service.is_empty() {
            bad.push((
                "fleet.sentinel_service",
                format!(
                    "is used only with fleet.topology = \"sentinel\" (it is \"{}\")",
                    self.topology.as_str()
                ),
            ));
        }
        if self.topology == Topology::Cluster && self.key_prefix.contains(['{', '}']) {
            bad.push((
                "fleet.key_prefix",
                "must not contain { or } with fleet.topology = \"cluster\": the fleet's keys \
                 carry their own hash tags (README \"Running a fleet\", Redis Cluster)"
                    .into(),
            ));
        }
        bad
    }
}

/// `fleet.topology`: how the fleet's Redis (or Valkey) is deployed.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Topology {
    /// One server at `fleet.redis` (a single URL).
    #[default]
    Server,
    /// A Redis Cluster: `fleet.redis` lists nodes to learn the cluster from (one is enough).
    Cluster,
    /// A primary monitored by Redis Sentinel: `fleet.redis` lists the sentinels,
    /// `fleet.sentinel_service` the primary's name; the primary is asked of them at each
    /// (re)connection, so a failover is followed.
    Sentinel,
}

impl Topology {
    /// As written in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Topology::Server => "server",
            Topology::Cluster => "cluster",
            Topology::Sentinel => "sentinel",
        }
    }
}

/// `fleet.on_redis_error`
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum OnRedisError {
    /// Go on with this instance's own robots.txt cache and pace until Redis is back.
    #[default]
    Local,
    /// Answer 503 to requests that need the shared state.
    Refuse,
}

/// `fleet.redis`: a Redis URL, or a list of them (the nodes of a cluster, the sentinels),
/// parsed when the configuration is read; no password ever appears in logs.
#[derive(Clone, Default)]
pub struct RedisUrl {
    text: String,
    /// The client of the first URL; `None` when there is none (this instance alone).
    pub(crate) client: Option<redis::Client>,
    /// Every URL, as written (the first is `text`), with its client.
    pub(crate) all: Vec<(String, redis::Client)>,
    /// Whether it was written as a list (TOML array), even of one.
    listed: bool,
}

impl RedisUrl {
    /// The URL as it may be shown (logs, `/api/summary`, `config check`, errors): see
    /// [`mask_redis_url`]; a list as its URLs joined with `, `.
    pub(crate) fn redacted(&self) -> String {
        if self.all.len() > 1 {
            let shown: Vec<String> = self.all.iter().map(|(t, _)| mask_redis_url(t)).collect();
            return shown.join(", ");
        }
        mask_redis_url(&self.text)
    }

    /// Every URL as written.
    pub(crate) fn urls(&self) -> Vec<&str> {
        self.all.iter().map(|(t, _)| t.as_str()).collect()
    }

    /// A list of URLs, each parsed as [`RedisUrl::try_from`] does; empty URLs are left out.
    pub(crate) fn try_from_list(texts: Vec<String>) -> Result<Self, String> {
        let mut all = Vec::new();
        for (i, text) in texts.into_iter().enumerate() {
            let one = RedisUrl::try_from(text).map_err(|e| format!("[{i}]: {e}"))?;
            all.extend(one.all);
        }
        let (text, client) = match all.first() {
            Some((t, c)) => (t.clone(), Some(c.clone())),
            None => (String::new(), None),
        };
        Ok(RedisUrl { text, client, all, listed: true })
    }
}

/// Query parameters that carry a secret: redis reads `pass` (and the unix-socket forms
/// carry their credentials nowhere else); `password` is masked too, should a later version
/// read it.
const SECRET_PARAMS: [&str; 2] = ["pass", "password"];

/// `text`, a Redis URL as written, with every password replaced by `***`: the userinfo's
/// (`redis://user:***@host`), a `pass=` query parameter's (`unix:///run/redis.sock?pass=***`),
/// and, when the text does not parse as a URL, all of the userinfo (everything from `//` to the
/// last `@`) as well as any `pass=` value. The one way a Redis URL is shown.
pub(crate) fn mask_redis_url(text: &str) -> String {
    // `app:pw@host` parses too, as a scheme `app` and a path: a URL without `//` is no
    // Redis URL, and is masked as text.
    let mut url = match url::Url::parse(text) {
        Ok(url) if !url.cannot_be_a_base() => url,
        _ => return mask_unparsed(text),
    };
    if url.password().is_some() {
        let _ = url.set_password(Some("***"));
    }
    let secret = |name: &str| SECRET_PARAMS.iter().any(|s| name.eq_ignore_ascii_case(s));
    if url.query_pairs().any(|(name, _)| secret(&name)) {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(n, v)| {
                let v = if secret(&n) { "***".to_owned() } else { v.into_owned() };
                (n.into_owned(), v)
            })
            .collect();
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    url.to_string()
}

/// [`mask_redis_url`] of a text that is no URL: the userinfo and `pass=` values masked by text.
fn mask_unparsed(text: &str) -> String {
    let mut out = match (text.find("//"), text.rfind('@')) {
        (Some(start), Some(at)) if at > start + 2 => {
            format!("{}***{}", &text[..start + 2], &text[at..])
        }
        (None, Some(at)) => format!("***{}", &text[at..]),
        _ => text.to_owned(),
    };
    for name in SECRET_PARAMS {
        let mut from = 0;
        while let Some(found) = out[from..].to_ascii_lowercase().find(&format!("{name}=")) {
            let value = from + found + name.len() + 1;
            let before = out[..from + found].chars().next_back();
            let end = out[value..].find(['&', '#']).map_or(out.len(), |e| value + e);
            if matches!(before, Some('?' | '&' | ';')) {
                out.replace_range(value..end, "***");
                from = value + 3;
            } else {
                from = value;
            }
        }
    }
    out
}

impl PartialEq for RedisUrl {
    fn eq(&self, other: &Self) -> bool {
        self.listed == other.listed && self.urls() == other.urls()
    }
}

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.redacted())
    }
}

impl TryFrom<String> for RedisUrl {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Ok(RedisUrl::default());
        }
        let scheme_ok = [
            "redis://",
            "rediss://",
            "valkey://",
            "valkeys://",
            "unix://",
            "redis+unix://",
            "valkey+unix://",
        ]
        .iter()
        .any(|s| trimmed.starts_with(s));
        if !scheme_ok {
            return Err(format!(
                "not a Redis URL: expected redis://[user:password@]host:port/db or rediss://…, \
                 got {:?}",
                mask_redis_url(trimmed)
            ));
        }
        let client = redis::Client::open(trimmed).map_err(|e| format!("bad Redis URL: {e}"))?;
        Ok(RedisUrl {
            text: trimmed.to_owned(),
            client: Some(client.clone()),
            all: vec![(trimmed.to_owned(), client)],
            listed: false,
        })
    }
}

/// Written with the password hidden: `robots-proxy config` never shows it. A list stays a
/// list.
impl Serialize for RedisUrl {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.listed {
            let shown: Vec<String> = self.all.iter().map(|(t, _)| mask_redis_url(t)).collect();
            return shown.serialize(s);
        }
        s.serialize_str(&self.redacted())
    }
}

/// A list written as text (an environment variable, `ROBOTS_PROXY_FLEET__REDIS`), as every list
/// of the configuration may be: `[a, b]`, or `a, b` when each item is a URL (`scheme://`; a
/// comma inside a URL is percent-encoded).
fn as_list(text: &str) -> Option<Vec<String>> {
    let trimmed = text.trim();
    let bracketed = trimmed.starts_with('[') && trimmed.ends_with(']');
    if !bracketed && !trimmed.contains(',') {
        return None;
    }
    let items: Vec<String> = trimmed
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(|item| item.trim().trim_matches('"').to_owned())
        .filter(|item| !item.is_empty())
        .collect();
    (bracketed || items.iter().all(|i| i.contains("://"))).then_some(items)
}

/// One URL, or a list of them.
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl<'de> Deserialize<'de> for RedisUrl {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match OneOrMany::deserialize(d) {
            Ok(OneOrMany::One(text)) => match as_list(&text) {
                Some(list) => RedisUrl::try_from_list(list),
                None => RedisUrl::try_from(text),
            },
            Ok(OneOrMany::Many(texts)) => RedisUrl::try_from_list(texts),
            Err(_) => Err("expected a Redis URL (a string) or a list of them".to_owned()),
        }
        .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(s: &FleetSection) -> Vec<(String, String)> {
        FleetSection::try_from(RawFleetSection(s.clone()))
            .err()
            .map(Problems::into_vec)
            .unwrap_or_default()
    }

    #[test]
    fn urls_are_parsed_and_passwords_hidden() {
        let url = RedisUrl::try_from("redis://app:s3cret@127.0.0.1:6379/2".to_owned()).unwrap();
        assert!(url.client.is_some());
        assert_eq!(url.redacted(), "redis://app:***@127.0.0.1:6379/2");
        assert!(!format!("{url:?}").contains("s3cret"));
        assert!(RedisUrl::try_from(String::new()).unwrap().client.is_none());
        let err = RedisUrl::try_from("http://x:pw@h".to_owned()).unwrap_err();
        assert!(err.contains("not a Redis URL") && !err.contains("pw@"), "{err}");
    }

    #[test]
    fn a_list_is_read_from_toml_and_from_text() {
        #[derive(Deserialize)]
        struct T {
            redis: RedisUrl,
        }
        let t: T = toml::from_str(r#"redis = ["redis://a:1", "redis://:pw@b:2"]"#).unwrap();
        assert_eq!(t.redis.urls(), ["redis://a:1", "redis://:pw@b:2"]);
        assert_eq!(t.redis.redacted(), "redis://a:1, redis://:***@b:2");
        assert!(!serde_json::to_string(&t.redis).unwrap().contains("pw@"));
        let t: T = toml::from_str(r#"redis = "[redis://a:1, redis://b:2]""#).unwrap();
        assert_eq!(t.redis.urls(), ["redis://a:1", "redis://b:2"]);
        let t: T = toml::from_str(r#"redis = "redis://a:1,redis://b:2""#).unwrap();
        assert_eq!(t.redis.urls(), ["redis://a:1", "redis://b:2"]);
        let t: T = toml::from_str(r#"redis = "redis://a:1""#).unwrap();
        assert_eq!((t.redis.urls(), t.redis.listed), (vec!["redis://a:1"], false));
        let e = toml::from_str::<T>(r#"redis = ["redis://a:1", "http://b"]"#).err().unwrap();
        assert!(e.to_string().contains("[1]: not a Redis URL"), "{e}");
    }

    #[test]
    fn topology_and_the_shape_of_redis_are_checked_together() {
        let list = RedisUrl::try_from_list(vec!["redis://a:1".into(), "redis://b:2".into()]);
        let mut s = FleetSection { redis: list.unwrap(), ..FleetSection::default() };
        let bad = check(&s);
        assert!(bad.iter().any(|(k, m)| k == "fleet.redis" && m.contains("cluster")), "{bad:?}");
        s.topology = Topology::Cluster;
        assert!(check(&s).is_empty(), "{:?}", check(&s));
        s.key_prefix = "{x}:".into();
        assert!(check(&s).iter().any(|(k, _)| k == "fleet.key_prefix"));
        s.key_prefix = "x:".into();
        s.topology = Topology::Sentinel;
        assert!(check(&s).iter().any(|(k, _)| k == "fleet.sentinel_service"));
        s.sentinel_service = "mymaster".into();
        assert!(check(&s).is_empty(), "{:?}", check(&s));
        s.topology = Topology::Server;
        s.redis = RedisUrl::try_from("redis://a:1".to_owned()).unwrap();
        let bad = check(&s);
        assert!(bad.iter().any(|(k, _)| k == "fleet.sentinel_service"), "{bad:?}");
        s.sentinel_service.clear();
        assert!(check(&s).is_empty());
        s.topology = Topology::Cluster;
        s.redis = RedisUrl::try_from("unix:///run/r.sock".to_owned()).unwrap();
        assert!(check(&s).iter().any(|(k, m)| k == "fleet.redis" && m.contains("unix")));
    }

    #[test]
    fn every_form_of_password_is_masked() {
        let cases = [
            ("redis://app:s3cretPW@10.0.0.5:6379/2", "redis://app:***@10.0.0.5:6379/2"),
            ("rediss://app:s3cretPW@redis.internal:6380", "rediss://app:***@redis.internal:6380"),
            ("redis://:s3cretPW@h", "redis://:***@h"),
            ("unix:///run/redis.sock?pass=s3cretPW", "unix:///run/redis.sock?pass=***"),
            (
                "redis+unix:///run/redis.sock?db=1&pass=s3cretPW",
                "redis+unix:///run/redis.sock?db=1&pass=***",
            ),
            (
                "valkey+unix:///run/v.sock?user=app&pass=s3c%26retPW&db=2",
                "valkey+unix:///run/v.sock?user=app&pass=***&db=2",
            ),
            // Does not parse (no `:` after the scheme): all of the userinfo goes.
            ("rediss//app:s3cretPW@redis.internal:6379", "rediss//***@redis.internal:6379"),
            ("redis://app:s3cret PW@[bad/x?pass=s3cretPW", "redis://***@[bad/x?pass=***"),
            ("app:s3cretPW@redis.internal", "***@redis.internal"),
            ("redis://h:6379", "redis://h:6379"),
        ];
        for (written, shown) in cases {
            let masked = mask_redis_url(written);
            assert_eq!(masked, shown, "{written}");
            assert!(!masked.contains("s3c"), "{masked}");
        }
        let unix = RedisUrl::try_from("redis+unix:///run/r.sock?db=1&pass=s3cretPW".to_owned());
        let unix = unix.unwrap();
        assert!(unix.client.is_some());
        assert!(!format!("{unix:?}").contains("s3cret"));
        assert!(!serde_json::to_string(&unix).unwrap().contains("s3cret"));
        let err = RedisUrl::try_from("rediss//app:s3cretPW@redis.internal:6379".to_owned());
        assert!(!err.unwrap_err().contains("s3cret"));
    }
}
