//! Sealed shared records: every robots.txt, tdmrep.json and purge record an instance writes to
//! Redis carries an HMAC-SHA-256 made with the fleet's key (`fleet.key_file`), and an instance
//! uses only what verifies ([`Seal`], the one place every value read from the fleet's Redis is
//! judged).
//!
//! HMAC-SHA-256 rather than Ed25519: every instance both writes and reads the records, so each
//! would hold the signing key anyway and a public-key scheme would separate no one; a MAC is one
//! shared secret to distribute and rotate, and costs a microsecond or two where an Ed25519
//! verification costs tens.
//!
//! What is sealed (one MAC, fields length-prefixed so that none can run into the next): a
//! domain string, the record's kind (`robots`, `tdmrep`, `purge`, `generation`), its authority
//! (`*` for a purge of everything and for the purge generation), the purge generation it was written under, when it was sealed (Redis's
//! clock, `TIME`, in milliseconds) and the record itself. So a record sealed for another
//! authority or another kind does not verify, nor one whose generation tag was changed; and a
//! record older than one this instance already used for the same authority and kind (a replay
//! of an earlier, genuine record) is refused by the reader ([`Newest`]).
//!
//! The stored value: `s1 <generation> <sealed_at_ms> <mac, 64 hex digits>\n<record>`. Without a
//! key an instance writes the older form `g<generation>\n<record>` and reads both, trusting
//! Redis (docs/fleet.md: whoever can write to Redis then decides the robots.txt the
//! fleet enforces).
//!
//! Cost: one MAC per shared write (`SharedRedis::store` for every site file, `purge`) and one
//! verification per shared read (`SharedRedis::load` for every site file, a purge message):
//! never per request, since a request is decided on the local cache's parsed copy and reaches these only
//! when that copy is missing or due.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The length of a fleet key, in bytes (written as 64 hex digits).
pub(crate) const KEY_LEN: usize = 32;

/// What kind of record a seal is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A robots.txt record (`robots:<authority>`).
    Robots,
    /// A tdmrep.json record (`tdmrep:<authority>`).
    Tdmrep,
    /// A purge message (the `purge` channel).
    Purge,
    /// The purge generation (`purge-generation`), which a purge of everything moves on.
    Generation,
}

impl Kind {
    /// Every kind, in the order of [`Kind::index`].
    pub const ALL: [Kind; 4] = [Kind::Robots, Kind::Tdmrep, Kind::Purge, Kind::Generation];

    /// The kind's name (sealed, and the metric's `kind` label).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Robots => "robots",
            Kind::Tdmrep => "tdmrep",
            Kind::Purge => "purge",
            Kind::Generation => "generation",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Why a value read from Redis was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not sealed (or not a record at all: garbage bytes) while this instance has a key.
    Unsealed,
    /// Sealed, but the seal does not verify with `fleet.key_file` nor `fleet.previous_key_file`:
    /// forged, sealed for another authority or kind, changed since, or sealed with another key.
    BadSeal,
    /// Verified, but older than a record of the same authority and kind this instance already
    /// used: a replay.
    Older,
}

impl Refusal {
    /// Every reason, in the order of [`Refusal::index`].
    pub const ALL: [Refusal; 3] = [Refusal::Unsealed, Refusal::BadSeal, Refusal::Older];

    /// The reason's name (the metric's `reason` label).
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Unsealed => "unsealed",
            Refusal::BadSeal => "bad_seal",
            Refusal::Older => "older",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    fn describe(self) -> &'static str {
        match self {
            Refusal::Unsealed => {
                "it is not sealed (written without fleet.key_file, or not a record at all)"
            }
            Refusal::BadSeal => {
                "its seal does not verify with fleet.key_file or fleet.previous_key_file (forged, \
                 sealed for another authority or kind, changed since, or sealed with another key)"
            }
            Refusal::Older => {
                "it is older than a record of the same site and kind this instance already used \
                 (a replayed record)"
            }
        }
    }
}

/// A fleet key file could not be read, or written.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The key file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Its group or others may read or write it.
    #[error(
        "{path}: mode {mode:04o} lets others read the fleet key; run `chmod 600 {path}` (a key \
         `robots-proxy fleet key new` writes has mode 0600)",
        path = path.display()
    )]
    Mode {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// It does not hold one key.
    #[error(
        "{path}: not a fleet key (one line of 64 hex digits, as `robots-proxy fleet key new` \
         writes)",
        path = path.display()
    )]
    Format {
        /// The key file.
        path: PathBuf,
    },
    /// It exists already (`fleet key new` never overwrites a key).
    #[error("{path}: exists already; a new key is never written over one", path = path.display())]
    Exists {
        /// The key file.
        path: PathBuf,
    },
    /// The system's randomness failed.
    #[error("no randomness from the operating system for a new fleet key")]
    Random,
}

/// A fleet key: never shown (its `Debug` says only that it is one).
#[derive(Clone)]
pub struct FleetKey([u8; KEY_LEN]);

impl std::fmt::Debug for FleetKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FleetKey(…)")
    }
}

impl FleetKey {
    /// Reads the key in `path`, which must be its owner's alone ([`robots_proxy_owner_only`]).
    pub fn load(path: &Path) -> Result<FleetKey, KeyError> {
        let io = |source| KeyError::Io { path: path.to_owned(), source };
        match robots_proxy_owner_only::too_open(path, robots_proxy_owner_only::KEY_FILE) {
            Ok(None) => {}
            Ok(Some(mode)) => return Err(KeyError::Mode { path: path.to_owned(), mode }),
            Err(source) => return Err(io(source)),
        }
        let text = std::fs::read(path).map_err(io)?;
        let format = || KeyError::Format { path: path.to_owned() };
        let text = std::str::from_utf8(&text).map_err(|_| format())?.trim();
        if text.len() != KEY_LEN * 2 {
            return Err(format());
        }
        let mut key = [0u8; KEY_LEN];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(i * 2..i * 2 + 2).ok_or_else(format)?, 16)
                .map_err(|_| format())?;
        }
        Ok(FleetKey(key))
    }

    /// Writes a new random key to `path` (mode 0600, whole or not at all); never over an
    /// existing file.
    pub fn create(path: &Path) -> Result<(), KeyError> {
        use ring::rand::SecureRandom;
        let mut key = [0u8; KEY_LEN];
        ring::rand::SystemRandom::new().fill(&mut key).map_err(|_| KeyError::Random)?;
        let mut text = hex(&key);
        text.push('\n');
        robots_proxy_owner_only::write_new(path, text.as_bytes(), 0o600).map_err(|source| {
            match source.kind() {
                std::io::ErrorKind::AlreadyExists => KeyError::Exists { path: path.to_owned() },
                _ => KeyError::Io { path: path.to_owned(), source },
            }
        })
    }

    fn mac(&self, what: &What<'_>, sealed_at: u64, record: &[u8]) -> Hmac<Sha256> {
        // A key of any length is accepted by HMAC: this cannot fail.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes any key");
        mac.update(b"robots-proxy fleet seal v1\0");
        for field in [what.kind.as_str().as_bytes(), what.authority.as_bytes(), what.generation] {
            mac.update(&(field.len() as u64).to_be_bytes());
            mac.update(field);
        }
        mac.update(&sealed_at.to_be_bytes());
        mac.update(record);
        mac
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn unhex(text: &[u8]) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

/// What a record is, besides its bytes: all of it is sealed.
#[derive(Debug, Clone, Copy)]
pub struct What<'a> {
    /// The record's kind.
    pub kind: Kind,
    /// Its authority as the fleet writes it (`http://host:port`), or the purge's target.
    pub authority: &'a str,
    /// The purge generation it was written under (`"0"` before the first purge of everything).
    pub generation: &'a [u8],
}

/// A record opened: its bytes and, when it was sealed, when (Redis's clock, ms).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Opened {
    /// The record.
    pub record: Vec<u8>,
    /// When it was sealed; `None` for an unsealed record (read only without a key).
    pub sealed_at: Option<u64>,
}

/// The fleet's keys and what was refused: shared by every reader and writer of the fleet's
/// records (`Fleet::seal`).
pub struct Seal {
    /// `fleet.key_file`: seals and verifies. `None`: nothing is sealed, Redis is trusted.
    current: Option<FleetKey>,
    /// `fleet.previous_key_file`: verifies only, while keys change.
    previous: Option<FleetKey>,
    /// Refusals by kind and reason (`robots_proxy_fleet_records_refused_total`).
    refused: [[AtomicU64; 3]; 4],
    /// When a refusal was last logged: one line a minute at most.
    logged: Mutex<Option<Instant>>,
}

/// At most one log line about refused records per this interval (each says how many so far).
const LOG_EVERY: Duration = Duration::from_secs(60);

impl Seal {
    /// The seal of `key_file` and `previous_key_file` (each loaded and checked).
    pub(crate) fn load(key_file: Option<&Path>, previous: Option<&Path>) -> Result<Seal, KeyError> {
        let current = key_file.map(FleetKey::load).transpose()?;
        let previous = previous.map(FleetKey::load).transpose()?;
        Ok(Seal::with_keys(current, previous))
    }

    /// A seal of these keys.
    pub(crate) fn with_keys(current: Option<FleetKey>, previous: Option<FleetKey>) -> Seal {
        Seal { current, previous, refused: Default::default(), logged: Mutex::new(None) }
    }

    /// Whether records are sealed and only sealed records used.
    pub(crate) fn is_keyed(&self) -> bool {
        self.current.is_some()
    }

    /// The value to store for `record`: sealed at `sealed_at` (Redis's clock, ms) with the key
    /// when there is one, else only tagged with its generation.
    pub(crate) fn seal(&self, what: &What<'_>, sealed_at: u64, record: &[u8]) -> Vec<u8> {
        let generation = String::from_utf8_lossy(what.generation);
        let mut out = match &self.current {
            Some(key) => {
                let mac = key.mac(what, sealed_at, record).finalize().into_bytes();
                format!("s1 {generation} {sealed_at} {}\n", hex(&mac)).into_bytes()
            }
            None => format!("g{generation}\n").into_bytes(),
        };
        out.reserve(record.len());
        out.extend_from_slice(record);
        out
    }

    /// The record in `value` (as read from Redis) if it is of `what` (kind, authority and the
    /// current purge generation): `Ok(None)` for a record of another generation (purged), a
    /// [`Refusal`] for one that cannot be used (counted and logged here).
    pub(crate) fn open(&self, what: &What<'_>, value: Vec<u8>) -> Result<Option<Opened>, Refusal> {
        let opened = self.open_uncounted(what, value);
        if let Err(why) = opened {
            self.refuse(what, why);
        }
        opened
    }

    fn open_uncounted(
        &self,
        what: &What<'_>,
        mut value: Vec<u8>,
    ) -> Result<Option<Opened>, Refusal> {
        let Some(end) = memchr::memchr(b'\n', &value) else {
            return if self.is_keyed() { Err(Refusal::Unsealed) } else { Ok(None) };
        };
        let head = &value[..end];
        if let Some(sealed) = head.strip_prefix(b"s1 ") {
            let mut fields = sealed.split(|b| *b == b' ');
            let (Some(generation), Some(at), Some(mac), None) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                return Err(Refusal::BadSeal);
            };
            let at = std::str::from_utf8(at).ok().and_then(|t| t.parse::<u64>().ok());
            let (Some(sealed_at), Some(mac)) = (at, unhex(mac)) else {
                return Err(Refusal::BadSeal);
            };
            let generation = generation.to_vec();
            let record = &value[end + 1..];
            if let Some(current) = &self.current {
                let claimed = What { generation: &generation, ..*what };
                let verifies = |key: &FleetKey| {
                    key.mac(&claimed, sealed_at, record).verify_slice(&mac).is_ok()
                };
                if !verifies(current) && !self.previous.as_ref().is_some_and(verifies) {
                    return Err(Refusal::BadSeal);
                }
            }
            if generation != what.generation {
                return Ok(None);
            }
            value.drain(..=end);
            return Ok(Some(Opened { record: value, sealed_at: Some(sealed_at) }));
        }
        if self.is_keyed() {
            return Err(Refusal::Unsealed);
        }
        // Without a key: the older, unsealed form; a value without a tag is of generation 0.
        let Some(generation) = head.strip_prefix(b"g") else {
            return Ok(
                (what.generation == b"0").then_some(Opened { record: value, sealed_at: None })
            );
        };
        if generation != what.generation {
            return Ok(None);
        }
        value.drain(..=end);
        Ok(Some(Opened { record: value, sealed_at: None }))
    }

    /// Counts and (at most once a minute) logs a record not used.
    pub(crate) fn refuse(&self, what: &What<'_>, why: Refusal) {
        let n = self.refused[what.kind.index()][why.index()].fetch_add(1, Ordering::Relaxed) + 1;
        let mut logged = robots_proxy_sync::lock(&self.logged);
        if logged.is_some_and(|at| at.elapsed() < LOG_EVERY) {
            return;
        }
        *logged = Some(Instant::now());
        drop(logged);
        tracing::warn!(
            kind = what.kind.as_str(),
            authority = %robots_proxy_output::log(what.authority),
            reason = why.as_str(),
            times = n,
            "fleet: a shared record in Redis was not used: {}; this instance fetches for itself \
             (robots_proxy_fleet_records_refused_total counts every one; logged at most once a \
             minute)",
            why.describe()
        );
    }

    /// Records refused so far, of `kind` for `why`.
    pub(crate) fn refused(&self, kind: Kind, why: Refusal) -> u64 {
        self.refused[kind.index()][why.index()].load(Ordering::Relaxed)
    }
}

/// The newest seal this instance used per authority and kind, so that an older genuine record
/// put back into Redis (a replay) is refused. Bounded: past [`NEWEST_CAPACITY`] authorities the
/// least recently used are forgotten (their next record is judged only by its seal).
pub struct Newest {
    seen: moka::sync::Cache<(Kind, String), u64>,
}

/// How many authorities [`Newest`] remembers.
pub const NEWEST_CAPACITY: u64 = 100_000;

impl Default for Newest {
    fn default() -> Self {
        Newest {
            seen: moka::sync::Cache::builder()
                .max_capacity(NEWEST_CAPACITY)
                .eviction_policy(moka::policy::EvictionPolicy::lru())
                .build(),
        }
    }
}

impl Newest {
    /// The newest seal (or number) used of `kind` for `authority`, if any is remembered.
    pub fn get(&self, kind: Kind, authority: &str) -> Option<u64> {
        self.seen.get(&(kind, authority.to_owned()))
    }

    /// Whether a record of `kind` for `authority` sealed at `sealed_at` may be used (no newer
    /// one was): it then becomes the newest.
    pub fn admit(&self, kind: Kind, authority: &str, sealed_at: u64) -> bool {
        let entry = self.seen.entry((kind, authority.to_owned())).and_upsert_with(|old| match old
            .map(|e| e.into_value())
        {
            Some(newest) if newest > sealed_at => newest,
            _ => sealed_at,
        });
        *entry.value() == sealed_at
    }
}

/// The purge messages a subscriber used lately, so that a captured message published again is
/// refused: one already used, or one sealed more than [`PURGE_WINDOW_MS`] before the newest
/// used. (A replayed purge could only make instances drop their copies and load them again,
/// verified; this keeps even that from an attacker.)
#[derive(Default)]
pub(crate) struct PurgeReplays {
    newest: u64,
    recent: std::collections::VecDeque<(u64, Vec<u8>)>,
}

/// How far (ms, on Redis's clock) a purge message may be older than the newest one used.
pub(crate) const PURGE_WINDOW_MS: u64 = 60_000;

/// How many recent purge messages [`PurgeReplays`] remembers at most.
const PURGE_RECENT: usize = 4096;

impl PurgeReplays {
    /// Whether a message sealed at `at` with `nonce` may be used: it is then remembered.
    pub(crate) fn admit(&mut self, at: u64, nonce: &[u8]) -> bool {
        if at.saturating_add(PURGE_WINDOW_MS) < self.newest
            || self.recent.iter().any(|(_, seen)| seen == nonce)
        {
            return false;
        }
        self.newest = self.newest.max(at);
        self.recent.push_back((at, nonce.to_vec()));
        while self.recent.len() > PURGE_RECENT
            || self
                .recent
                .front()
                .is_some_and(|(t, _)| t.saturating_add(PURGE_WINDOW_MS) < self.newest)
        {
            self.recent.pop_front();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> FleetKey {
        FleetKey([b; KEY_LEN])
    }

    fn what<'a>(kind: Kind, authority: &'a str, generation: &'a [u8]) -> What<'a> {
        What { kind, authority, generation }
    }

    #[test]
    fn a_sealed_record_opens_only_as_what_it_was_sealed_for() {
        let seal = Seal::with_keys(Some(key(1)), None);
        let robots = what(Kind::Robots, "http://a.test:80", b"0");
        let value = seal.seal(&robots, 1_800_000_000_000, b"{}\nUser-agent: *\n");
        let opened = seal.open(&robots, value.clone()).unwrap().unwrap();
        assert_eq!(opened.record, b"{}\nUser-agent: *\n");
        assert_eq!(opened.sealed_at, Some(1_800_000_000_000));
        // Another authority, another kind: the seal does not verify.
        let other = what(Kind::Robots, "http://b.test:80", b"0");
        assert_eq!(seal.open(&other, value.clone()), Err(Refusal::BadSeal));
        let tdm = what(Kind::Tdmrep, "http://a.test:80", b"0");
        assert_eq!(seal.open(&tdm, value.clone()), Err(Refusal::BadSeal));
        // Another generation, genuine: purged, not refused.
        assert_eq!(
            seal.open(&what(Kind::Robots, "http://a.test:80", b"1"), value.clone()),
            Ok(None)
        );
        // The generation or the time changed by hand: refused.
        let text = String::from_utf8(value.clone()).unwrap();
        let regen = text.replacen("s1 0 ", "s1 1 ", 1).into_bytes();
        let robots1 = what(Kind::Robots, "http://a.test:80", b"1");
        assert_eq!(seal.open(&robots1, regen), Err(Refusal::BadSeal));
        let retimed = text.replacen(" 1800000000000 ", " 1900000000000 ", 1).into_bytes();
        assert_eq!(seal.open(&robots, retimed), Err(Refusal::BadSeal));
        // The body changed: refused.
        let forged = text.replace("User-agent: *", "User-agent: x").into_bytes();
        assert_eq!(seal.open(&robots, forged), Err(Refusal::BadSeal));
        // Garbage, and the unsealed form: refused with a key.
        assert_eq!(seal.open(&robots, b"garbage".to_vec()), Err(Refusal::Unsealed));
        assert_eq!(seal.open(&robots, b"g0\n{}\n".to_vec()), Err(Refusal::Unsealed));
        assert_eq!(seal.open(&robots, b"s1 0 x y\nz".to_vec()), Err(Refusal::BadSeal));
        assert_eq!(seal.open(&robots, b"s1 0 1 00 extra\nz".to_vec()), Err(Refusal::BadSeal));
        // Another key: refused.
        let stranger = Seal::with_keys(Some(key(2)), None);
        assert_eq!(stranger.open(&robots, value.clone()), Err(Refusal::BadSeal));
        assert_eq!(stranger.refused(Kind::Robots, Refusal::BadSeal), 1);
        assert_eq!(seal.refused(Kind::Robots, Refusal::BadSeal), 6);
        assert_eq!(seal.refused(Kind::Tdmrep, Refusal::BadSeal), 1);
        assert_eq!(seal.refused(Kind::Robots, Refusal::Unsealed), 2);
    }

    #[test]
    fn the_previous_key_verifies_while_keys_change() {
        let old = Seal::with_keys(Some(key(1)), None);
        let robots = what(Kind::Robots, "http://a.test:80", b"3");
        let value = old.seal(&robots, 5, b"x");
        let rotated = Seal::with_keys(Some(key(2)), Some(key(1)));
        assert_eq!(rotated.open(&robots, value).unwrap().unwrap().record, b"x");
        // What the rotated instance seals, an instance still on the old key alone refuses;
        // one that has the new key as previous accepts.
        let new = rotated.seal(&robots, 6, b"y");
        assert_eq!(old.open(&robots, new.clone()), Err(Refusal::BadSeal));
        let ahead = Seal::with_keys(Some(key(1)), Some(key(2)));
        assert!(ahead.open(&robots, new).unwrap().is_some());
    }

    #[test]
    fn without_a_key_both_forms_are_read_and_redis_is_trusted() {
        let open = Seal::with_keys(None, None);
        let robots = what(Kind::Robots, "http://a.test:80", b"7");
        let tagged = open.seal(&robots, 1, b"r");
        assert_eq!(tagged, b"g7\nr");
        assert_eq!(open.open(&robots, tagged).unwrap().unwrap().record, b"r");
        let sealed = Seal::with_keys(Some(key(1)), None).seal(&robots, 1, b"r");
        assert_eq!(open.open(&robots, sealed).unwrap().unwrap().record, b"r");
        assert_eq!(open.open(&robots, b"g6\nr".to_vec()), Ok(None));
        let zero = what(Kind::Robots, "http://a.test:80", b"0");
        assert_eq!(open.open(&zero, b"{}\nr".to_vec()).unwrap().unwrap().record, b"{}\nr");
    }

    #[test]
    fn an_older_record_than_one_used_is_refused() {
        let newest = Newest::default();
        assert!(newest.admit(Kind::Robots, "a", 10));
        assert!(newest.admit(Kind::Robots, "a", 10));
        assert!(newest.admit(Kind::Robots, "a", 12));
        assert!(!newest.admit(Kind::Robots, "a", 11));
        assert!(newest.admit(Kind::Tdmrep, "a", 11));
        assert!(newest.admit(Kind::Robots, "b", 1));
    }

    #[test]
    fn a_purge_message_is_used_once_and_not_long_after_a_newer_one() {
        let mut replays = PurgeReplays::default();
        assert!(replays.admit(100_000, b"a"));
        assert!(!replays.admit(100_000, b"a"));
        assert!(replays.admit(99_000, b"b"));
        assert!(replays.admit(200_000, b"c"));
        assert!(!replays.admit(100_000, b"d"));
        assert!(replays.admit(150_000, b"e"));
    }

    #[test]
    fn key_files_are_written_owner_only_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fleet.key");
        FleetKey::create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let key = FleetKey::load(&path).unwrap();
        assert!(!format!("{key:?}").contains(&hex(&key.0)));
        assert!(matches!(FleetKey::create(&path), Err(KeyError::Exists { .. })));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = FleetKey::load(&path).unwrap_err();
        assert!(err.to_string().contains("chmod 600"), "{err}");
        let bad = dir.path().join("bad.key");
        std::fs::write(&bad, "not a key\n").unwrap();
        std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(FleetKey::load(&bad), Err(KeyError::Format { .. })));
    }
}
