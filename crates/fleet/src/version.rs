//! The server's version, checked when the link is made (the first call on a connection).
//!
//! The fleet's scripts read Redis's clock (`TIME`) and then write. Redis replicates a script by
//! its effects, which allows that, by default only since 5.0: on 3.2 and 4.x every such script
//! fails ("Write commands not allowed after non deterministic commands"). An older server is
//! therefore not used at all: the link stays down (`robots_proxy_fleet_up 0`, and
//! `fleet.on_redis_error` applies) and the log names the version found and the one needed.
//! Valkey (every release) and other servers that report a `redis_version` of 5.0 or later fit.

/// The oldest Redis the fleet can use (major, minor).
pub(crate) const MINIMUM: (u32, u32) = (5, 0);

/// What `INFO server` tells of the server.
#[derive(Debug, PartialEq, Eq)]
pub enum Fit {
    /// The scripts run on it.
    Fits,
    /// Too old: the sentence for the log, naming the version found and the minimum.
    TooOld(String),
    /// It does not say its version (a server of another kind, or an `INFO` it shapes
    /// otherwise): used, since it may well fit.
    Unknown,
}

/// Whether the server that answered `info` (the text of `INFO server`) can run the scripts.
pub fn fit(info: &str) -> Fit {
    let field = |name: &str| {
        info.lines().find_map(|line| line.trim().strip_prefix(name)?.strip_prefix(':'))
    };
    // Valkey forked from Redis 7.2 and reports `redis_version:7.2.4` besides its own.
    if field("valkey_version").is_some() {
        return Fit::Fits;
    }
    let Some(version) = field("redis_version").map(str::trim) else { return Fit::Unknown };
    let mut numbers = version.split('.').map(|n| n.parse::<u32>().ok());
    let (Some(Some(major)), Some(Some(minor))) = (numbers.next(), numbers.next()) else {
        return Fit::Unknown;
    };
    if (major, minor) >= MINIMUM {
        return Fit::Fits;
    }
    Fit::TooOld(format!(
        "the Redis server is version {version}; the fleet needs Redis {}.{} or later (or \
         Valkey): its scripts write after reading Redis's clock, which older versions refuse",
        MINIMUM.0, MINIMUM.1
    ))
}

#[cfg(test)]
mod tests {
    use super::{fit, Fit};

    fn info(lines: &[&str]) -> String {
        let mut text = "# Server\r\n".to_owned();
        for line in lines {
            text.push_str(line);
            text.push_str("\r\n");
        }
        text
    }

    #[test]
    fn redis_five_and_later_fit() {
        for v in ["5.0.0", "5.0.14", "6.2.6", "7.0.15", "7.4.1", "8.0.0", "10.1.2"] {
            let text = info(&["redis_git_sha1:00000000", &format!("redis_version:{v}")]);
            assert_eq!(fit(&text), Fit::Fits, "{v}");
        }
    }

    #[test]
    fn older_redis_is_refused_naming_the_version_and_the_minimum() {
        for v in ["4.0.14", "3.2.12", "2.8.24", "4.9.999"] {
            let Fit::TooOld(why) = fit(&info(&[&format!("redis_version:{v}"), "redis_mode:x"]))
            else {
                panic!("{v} fits");
            };
            assert!(why.contains(v) && why.contains("Redis 5.0 or later"), "{why}");
        }
    }

    #[test]
    fn valkey_fits_whatever_redis_version_it_reports() {
        let text = info(&["redis_version:7.2.4", "server_name:valkey", "valkey_version:8.0.1"]);
        assert_eq!(fit(&text), Fit::Fits);
        assert_eq!(fit(&info(&["valkey_version:7.2.5"])), Fit::Fits);
    }

    #[test]
    fn a_server_that_does_not_say_is_used() {
        assert_eq!(fit(""), Fit::Unknown);
        assert_eq!(fit(&info(&["redis_version:unknown"])), Fit::Unknown);
        assert_eq!(fit(&info(&["redis_version:7"])), Fit::Unknown);
        // A field whose name only starts like it is not it.
        assert_eq!(fit(&info(&["redis_version_extra:1.0.0"])), Fit::Unknown);
    }
}
