//! The name of every key and channel the fleet uses: [`Keyspace`] is the one place they are
//! made, so that on a Redis Cluster each script touches keys of one hash slot.
//!
//! Every name starts with `fleet.key_prefix` (an ACL's key pattern `~prefix*` covers them).
//!
//! * **Per site** (`pace:`, `queue:`, `slots:`, `slotq:`, `gone:`, `robots:`, `lease:`,
//!   `tdmrep:`, `lease:tdmrep:`): named after the authority. On a cluster the authority is
//!   the key's hash tag, `pace:{http://example.com:80}`, so all of one site's keys live in one
//!   slot (one node) and every script, which touches one site's keys only, runs there; the
//!   sites spread over the cluster's nodes. On one server (and a sentinel's primary) there is
//!   no slot to share and the names carry no tag: `pace:http://example.com:80`.
//! * **Fleet-wide** (`instances`, `instance:<name>`, `purge-generation`): on a cluster they
//!   share the tag `{fleet}`, `robots-proxy:{fleet}:instances`, so the view's `MGET` of the
//!   announcements and the heartbeat's script touch one slot. No script reads a fleet-wide key
//!   together with a site's key: the purge generation is read in a call of its own, after the
//!   record ([`super::robots`]).
//! * **Channels** (`purge`, `slot-freed`): pub/sub channels are not keys; on a cluster a
//!   message published on any node reaches the subscribers of every node, so they carry no
//!   tag. The instance subscribes on any reachable node ([`super::link`]).

use std::fmt::Display;

/// How the fleet's keys are named: see the [module documentation](self).
#[derive(Debug, Clone)]
pub(crate) struct Keyspace {
    prefix: String,
    /// Whether keys carry hash tags (a Redis Cluster).
    tagged: bool,
}

impl Keyspace {
    pub(crate) fn new(prefix: &str, tagged: bool) -> Self {
        Keyspace { prefix: prefix.to_owned(), tagged }
    }

    /// The key `kind` of the site `authority`, with `suffix` after it (a queue's lane, a
    /// member): in the site's hash slot on a cluster.
    pub(crate) fn site(&self, kind: &str, authority: impl Display, suffix: &str) -> String {
        if self.tagged {
            format!("{}{kind}:{{{authority}}}{suffix}", self.prefix)
        } else {
            format!("{}{kind}:{authority}{suffix}", self.prefix)
        }
    }

    /// The fleet-wide key `name`: all in one hash slot (`{fleet}`) on a cluster.
    pub(crate) fn fleet_wide(&self, name: &str) -> String {
        if self.tagged {
            format!("{}{{fleet}}:{name}", self.prefix)
        } else {
            format!("{}{name}", self.prefix)
        }
    }

    /// The pub/sub channel `name`.
    pub(crate) fn channel(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis Cluster's hash slot of `key` (CRC16/XMODEM of its hash tag, or of all of it).
    fn slot(key: &str) -> u16 {
        let bytes = key.as_bytes();
        let tagged = key.find('{').and_then(|open| {
            let close = key[open + 1..].find('}')?;
            (close > 0).then(|| &bytes[open + 1..open + 1 + close])
        });
        let mut crc: u16 = 0;
        for b in tagged.unwrap_or(bytes) {
            crc ^= u16::from(*b) << 8;
            for _ in 0..8 {
                crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            }
        }
        crc % 16384
    }

    #[test]
    fn the_slot_is_redis_clusters() {
        // CLUSTER KEYSLOT, from Redis's documentation.
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("{user1000}.following"), slot("{user1000}.followers"));
    }

    #[test]
    fn on_a_cluster_one_sites_keys_share_a_slot_and_so_do_the_fleet_wide_ones() {
        let keys = Keyspace::new("robots-proxy:", true);
        let a = "http://example.com:80";
        let site: Vec<String> = [
            keys.site("pace", a, ""),
            keys.site("queue", a, "#3"),
            keys.site("slots", a, ""),
            keys.site("slotq", a, ""),
            keys.site("gone", a, "|i#n#1"),
            keys.site("robots", a, ""),
            keys.site("lease", a, ""),
            keys.site("tdmrep", a, ""),
            keys.site("lease:tdmrep", a, ""),
        ]
        .into();
        assert!(site.iter().all(|k| slot(k) == slot(&site[0])), "{site:?}");
        assert_eq!(site[0], "robots-proxy:pace:{http://example.com:80}");
        let other = keys.site("pace", "https://example.org:443", "");
        assert_ne!(slot(&other), slot(&site[0]), "sites spread over the slots");
        let wide = [
            keys.fleet_wide("instances"),
            keys.fleet_wide("instance:a"),
            keys.fleet_wide("purge-generation"),
        ];
        assert!(wide.iter().all(|k| slot(k) == slot(&wide[0])), "{wide:?}");
        assert!(wide.iter().chain(&site).all(|k| k.starts_with("robots-proxy:")));
    }

    #[test]
    fn on_one_server_the_names_are_untagged() {
        let keys = Keyspace::new("p:", false);
        assert_eq!(keys.site("pace", "http://a:80", ""), "p:pace:http://a:80");
        assert_eq!(keys.site("queue", "http://a:80", "#1"), "p:queue:http://a:80#1");
        assert_eq!(keys.fleet_wide("purge-generation"), "p:purge-generation");
        assert_eq!(keys.channel("purge"), "p:purge");
    }
}
