//! `[fleet]`: sharing robots.txt and the pace with other instances through Redis (or Valkey).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `[fleet]`
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct FleetSection {
    /// `redis://[user:password@]host:port/db` or `rediss://…`; empty: this instance alone.
    pub redis: RedisUrl,
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
}

impl Default for FleetSection {
    fn default() -> Self {
        FleetSection {
            redis: RedisUrl::default(),
            key_prefix: "robots-proxy:".to_owned(),
            on_redis_error: OnRedisError::Local,
            instance: String::new(),
            timeout: Duration::from_millis(500),
        }
    }
}

impl FleetSection {
    /// Whether this instance is part of a fleet.
    pub fn is_enabled(&self) -> bool {
        self.redis.client.is_some()
    }

    /// What serde cannot say: the key and the problem, one per problem.
    pub fn check(&self) -> Vec<(&'static str, String)> {
        let mut bad = Vec::new();
        if self.is_enabled() && self.key_prefix.is_empty() {
            bad.push((
                "fleet.key_prefix",
                "must not be empty (it keeps the fleet's keys apart)".into(),
            ));
        }
        // fleet.timeout's range is in the table of bounds (src/config/bounds.rs).
        if self.instance.chars().any(|c| c.is_control()) {
            bad.push(("fleet.instance", "must not contain control characters".into()));
        }
        bad
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

/// `fleet.redis`: a Redis URL, parsed when the configuration is read; its password never
/// appears in logs.
#[derive(Clone, Default)]
pub struct RedisUrl {
    text: String,
    pub(crate) client: Option<redis::Client>,
}

impl RedisUrl {
    /// The URL with any password replaced by `***`.
    pub fn redacted(&self) -> String {
        match url::Url::parse(&self.text) {
            Ok(mut u) if u.password().is_some() => {
                let _ = u.set_password(Some("***"));
                u.to_string()
            }
            _ => self.text.clone(),
        }
    }
}

impl PartialEq for RedisUrl {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
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
                RedisUrl { text: trimmed.to_owned(), client: None }.redacted()
            ));
        }
        let client = redis::Client::open(trimmed).map_err(|e| format!("bad Redis URL: {e}"))?;
        Ok(RedisUrl { text: trimmed.to_owned(), client: Some(client) })
    }
}

/// Written with the password hidden: `robots-proxy config` never shows it.
impl Serialize for RedisUrl {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.redacted())
    }
}

impl<'de> Deserialize<'de> for RedisUrl {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        RedisUrl::try_from(text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
