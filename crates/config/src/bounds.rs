//! Every bound of the configuration, listed: each section keeps the bounds of its durations,
//! sizes and counts in a table of its own (`robots_proxy_units::bounds::Bound`), checked by its
//! `TryFrom`; this lists the tables, in the order of `config/robots-proxy.toml` ("Bounds"),
//! for tools and for the tests that keep that documentation and the schema in step.
//!
//! Relations between keys (`robots.min_age` ≤ `robots.max_age`, …) are checked by the
//! sections' `TryFrom` too, and those between sections in `super::across`; ranges only are
//! listed here. A unit test requires every duration, size and integer key of the schema to be
//! listed.

use robots_proxy_units::bounds::{Bound, BoundSpec};

fn specs<S>(table: &[Bound<S>]) -> impl Iterator<Item = BoundSpec> + '_ {
    table.iter().map(Bound::spec)
}

/// Every bounded key of the configuration with its range: every duration, size and count.
pub fn bounds() -> Vec<BoundSpec> {
    specs(super::PROXY_BOUNDS)
        .chain(specs(super::UPSTREAM_BOUNDS))
        .chain(specs(robots_proxy_sitefiles::ROBOTS_BOUNDS))
        .chain(specs(robots_proxy_audit::AUDIT_BOUNDS))
        .chain(specs(robots_proxy_net::tls::HTTPS_BOUNDS))
        .chain(specs(robots_proxy_archive::ARCHIVE_BOUNDS))
        .chain(specs(robots_proxy_pace::PACING_BOUNDS))
        .chain(specs(robots_proxy_net::limits::LIMITS_BOUNDS))
        .chain(specs(super::ADMIN_BOUNDS))
        .chain(specs(robots_proxy_fleet::FLEET_BOUNDS))
        .chain(specs(robots_proxy_identity::SIGNING_BOUNDS))
        .chain(specs(robots_proxy_disclosure::DISCLOSURE_BOUNDS))
        .collect()
}

/// The bound of `key`, if it has one.
#[cfg(test)]
pub(crate) fn bound(key: &str) -> Option<BoundSpec> {
    bounds().into_iter().find(|b| b.key == key)
}

/// The "Bounds" lines of `config/robots-proxy.toml`, one a key.
#[cfg(test)]
pub(crate) fn documentation() -> String {
    bounds().iter().map(|b| format!("#   {:<38} {}\n", b.key, b.describe())).collect()
}
