//! Times: RFC 3339 with a zone (`2026-03-03T10:00:00Z`, `2026-03-03T11:00:00+01:00`). A time
//! without one (`2026-03-03T10:00:00`) is refused: it could be any of 26 hours.

use std::time::SystemTime;

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Parses an RFC 3339 time; the error says what is wrong.
pub fn parse_time(text: &str) -> Result<SystemTime, String> {
    let text = text.trim();
    match OffsetDateTime::parse(text, &Rfc3339) {
        Ok(t) => Ok(SystemTime::from(t)),
        Err(_) if OffsetDateTime::parse(&format!("{text}Z"), &Rfc3339).is_ok() => {
            Err(format!("{text:?} has no time zone: give one, as in {text}Z (UTC) or {text}+01:00"))
        }
        Err(e) => {
            Err(format!("{text:?} is not an RFC 3339 time such as 2026-03-03T10:00:00Z ({e})"))
        }
    }
}

/// `at` as the audit log writes times (UTC, milliseconds).
pub(super) fn show(at: SystemTime) -> String {
    crate::robots_version::rfc3339_millis(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_zone_is_required() {
        let utc = parse_time("2026-03-03T10:00:00Z").unwrap();
        assert_eq!(parse_time("2026-03-03T11:00:00+01:00").unwrap(), utc);
        assert_eq!(
            parse_time("2026-03-03T10:00:00.250Z").unwrap(),
            utc + Duration::from_millis(250)
        );
        let e = parse_time("2026-03-03T10:00:00").unwrap_err();
        assert!(e.contains("no time zone"), "{e}");
        assert!(parse_time("yesterday").unwrap_err().contains("not an RFC 3339 time"));
        assert_eq!(show(utc), "2026-03-03T10:00:00.000Z");
    }
}
