//! The outcome classes of robots.txt fetches, for the `robots_proxy_robots_fetches_total`
//! metric.

use super::FetchOutcome;

/// The outcome classes counted by [`CacheStats`](super::CacheStats), for the `robots_proxy_robots_fetches_total`
/// metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FetchClass {
    /// A 2xx answer (after redirects).
    Success,
    /// A redirect without a usable `Location`, or a `304` (unreachable).
    Redirection,
    /// A 4xx answer other than 429.
    ClientError,
    /// 429 Too Many Requests.
    TooManyRequests,
    /// A 5xx answer.
    ServerError,
    /// DNS, connection, TLS, timeout or protocol failure.
    Network,
    /// More than `robots.max_redirects` redirects.
    RedirectLimit,
}

impl FetchClass {
    /// Every class, in the order metrics list them.
    pub const ALL: [FetchClass; 7] = [
        FetchClass::Success,
        FetchClass::Redirection,
        FetchClass::ClientError,
        FetchClass::TooManyRequests,
        FetchClass::ServerError,
        FetchClass::Network,
        FetchClass::RedirectLimit,
    ];

    /// The class of a fetch outcome.
    pub fn of(outcome: &FetchOutcome) -> FetchClass {
        match outcome {
            FetchOutcome::Status(429) => FetchClass::TooManyRequests,
            FetchOutcome::Status(200..=299) => FetchClass::Success,
            FetchOutcome::Status(300..=399) => FetchClass::Redirection,
            FetchOutcome::Status(400..=499) => FetchClass::ClientError,
            FetchOutcome::Status(500..=599) => FetchClass::ServerError,
            FetchOutcome::Status(_) | FetchOutcome::Network(_) => FetchClass::Network,
            // The destination guard refused the address: no connection was made.
            FetchOutcome::Prohibited(_) | FetchOutcome::Fleet(_) => FetchClass::Network,
            FetchOutcome::RedirectLimit => FetchClass::RedirectLimit,
        }
    }

    /// The metric label: `2xx`, `3xx`, `4xx`, `429`, `5xx`, `network`, `redirect_limit`.
    pub fn as_str(self) -> &'static str {
        match self {
            FetchClass::Success => "2xx",
            FetchClass::Redirection => "3xx",
            FetchClass::ClientError => "4xx",
            FetchClass::TooManyRequests => "429",
            FetchClass::ServerError => "5xx",
            FetchClass::Network => "network",
            FetchClass::RedirectLimit => "redirect_limit",
        }
    }
}
