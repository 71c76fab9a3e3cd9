//! Logging set-up can be called more than once in a process.

use robots_proxy::config::{LogFormat, LogSection};
use robots_proxy::logging;

#[test]
fn init_twice_is_harmless_and_bad_levels_are_errors() {
    let quiet = LogSection { format: LogFormat::Json, level: "off".into() };
    logging::init_with(&quiet, None).expect("first init");
    logging::init_with(&LogSection::default(), None).expect("second init changes nothing");
    let bad = LogSection { level: "a=b=c".into(), ..LogSection::default() };
    let e = logging::init_with(&bad, None).unwrap_err();
    assert!(e.to_string().starts_with("log.level \"a=b=c\" is not a valid filter"), "{e}");
}
