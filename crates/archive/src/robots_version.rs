//! A robots.txt version: the exact bytes a decision used, their SHA-256, and when they were
//! fetched (issue 19, "every decision names its version").
//!
//! Made once per fetch that produced a body (by the robots store, `crate::cache`) and shared by
//! every snapshot, decision and audit record that uses those bytes (an `Arc`), so the request
//! path never hashes or formats anything: it copies a pointer.
//!
//! The bytes are the body **as parsed**: after the content coding (gzip, deflate) and a UTF-16
//! body have been undone, and capped as the fetcher caps them (`robots.max_body`, plus the one
//! byte that tells the parser the file goes on). Parsing these bytes again gives the same rules.
//! A fetch that produced no file (4xx: allow all; 429, 5xx, network: disallow all) has no
//! version.
//!
//! Reaches nothing else of the crate: the store makes versions, the policy and the audit log
//! read them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use sha2::{Digest, Sha256};

/// One robots.txt version (see the [module documentation](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RobotsVersion {
    authority: Box<str>,
    url: Box<str>,
    sha256: Box<str>,
    fetched_at: SystemTime,
    fetched_at_text: Box<str>,
    status: Option<u16>,
    body: Bytes,
}

impl RobotsVersion {
    /// The version of `body` (the bytes as parsed), fetched from `url` (the robots.txt of
    /// `authority`, `scheme://host[:port]`) at `fetched_at` with HTTP `status` (`None` when
    /// not known, as in a record kept by an older version of the proxy). Hashes the body: call
    /// it once per fetch.
    pub fn new(
        authority: &str,
        url: &str,
        body: Bytes,
        fetched_at: SystemTime,
        status: Option<u16>,
    ) -> Self {
        RobotsVersion {
            authority: authority.into(),
            url: url.into(),
            sha256: sha256_hex(&body).into_boxed_str(),
            fetched_at,
            fetched_at_text: rfc3339_millis(fetched_at).into_boxed_str(),
            status,
            body,
        }
    }

    /// The authority whose robots.txt this is, `scheme://host[:port]`.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// The robots.txt URL fetched.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The lowercase hex SHA-256 of the body (64 characters).
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// When the body was fetched.
    pub fn fetched_at(&self) -> SystemTime {
        self.fetched_at
    }

    /// [`Self::fetched_at`] as RFC 3339 UTC with milliseconds, as the audit log's `@timestamp`.
    pub fn fetched_at_text(&self) -> &str {
        &self.fetched_at_text
    }

    /// The HTTP status of the fetch that gave the body (after redirects), if known.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// The body, as parsed.
    pub fn body(&self) -> &Bytes {
        &self.body
    }
}

/// The lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let mut out = [0u8; 64];
    hex_into(&Sha256::digest(bytes), &mut out);
    // Only ASCII hex digits were written.
    String::from_utf8_lossy(&out).into_owned()
}

/// `bytes` as lowercase hex into `out` (which holds twice as many), without allocating: the
/// audit log's hash chain writes its hashes with it.
pub fn hex_into(bytes: &[u8], out: &mut [u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, byte) in bytes.iter().enumerate() {
        out[2 * i] = HEX[usize::from(byte >> 4)];
        out[2 * i + 1] = HEX[usize::from(byte & 15)];
    }
}

/// `at` as RFC 3339 UTC with milliseconds (`2026-11-22T04:33:16.123Z`), clamped to what RFC
/// 3339 can show (1970 to 9999).
pub fn rfc3339_millis(at: SystemTime) -> String {
    // The last millisecond of 9999-12-31.
    let last = UNIX_EPOCH + Duration::from_millis(253_402_300_799_999);
    let at = at.clamp(UNIX_EPOCH, last);
    humantime::format_rfc3339_millis(at).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_is_lowercase_hex_sha256_of_the_body() {
        let t = UNIX_EPOCH + Duration::from_millis(1_795_321_996_123);
        let v = RobotsVersion::new(
            "http://a.test",
            "http://a.test/robots.txt",
            Bytes::from_static(b"abc"),
            t,
            Some(200),
        );
        assert_eq!(v.sha256(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(v.fetched_at_text(), "2026-11-22T04:33:16.123Z");
        assert_eq!(v.status(), Some(200));
    }
}
