//! Unit tests of the audit module's own functions.

#[test]
fn header_values_are_escaped_reversibly() {
    use super::escape_header_value as e;
    assert_eq!(e(b"ExampleBot/1.0 (+https://x.example)"), "ExampleBot/1.0 (+https://x.example)");
    assert_eq!(e(b"ExampleBot/1.0 caf\xe9"), "ExampleBot/1.0 caf\\xE9");
    assert_eq!(e("é".as_bytes()), "\\xC3\\xA9");
    assert_eq!(e(b"a\\b\tc\x7f\x00"), "a\\\\b\tc\\x7F\\x00");
}

use super::*;
use std::time::UNIX_EPOCH;

#[test]
fn host_of_authority() {
    assert_eq!(host_of("http://example.com"), "example.com");
    assert_eq!(host_of("https://example.com:8443"), "example.com");
    assert_eq!(host_of("http://[::1]:8080"), "[::1]");
    assert_eq!(host_of("http://[::1]"), "[::1]");
    assert_eq!(host_of("example.com:80"), "example.com");
}

#[test]
fn timestamp_is_rfc3339_utc_millis() {
    let at = UNIX_EPOCH + Duration::from_millis(1_795_321_996_123);
    assert_eq!(timestamp(at), "2026-11-22T04:33:16.123Z");
    assert_eq!(timestamp(UNIX_EPOCH - Duration::from_secs(5)), "1970-01-01T00:00:00.000Z");
    let far = UNIX_EPOCH + Duration::from_secs(400_000_000_000);
    assert_eq!(timestamp(far), "9999-12-31T23:59:59.999Z");
}
