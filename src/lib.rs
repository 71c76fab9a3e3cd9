//! robots-proxy: a forward HTTP proxy that makes any crawler obey robots.txt.
//!
//! The crate is layered so that the data path stays short and visible:
//!
//! ```text
//! client ──▶ proxy (listener, forwarding)
//!               │ asks
//!               ▼
//!            policy (product token, decision, audit record)
//!               │ asks
//!               ▼
//!            cache (one fetch per authority, RFC 9309 status & lifetime rules) ──▶ fetcher
//!               │ holds
//!               ▼
//!            robots (parse once, compiled matcher; pure, no I/O)
//! ```
//!
//! Modules marked *(crate)* are workspace crates under `crates/`, re-exported here under the
//! same names, so Cargo holds their layering: each reaches only the crates its `Cargo.toml`
//! names (docs/architecture.md).
//!
//! * [`robots`] *(crate)*: the robots.txt engine. Pure: parse once, decide many times, no I/O.
//! * [`check`]: the offline `robots-proxy check` command built on the engine.
//! * [`authority`] *(crate)*: the key robots.txt is cached under.
//! * [`cache`]: the robots cache and its fetcher.
//! * [`proxy`]: the listener and forwarding.
//! * [`policy`]: product token and decision.
//! * [`pacing`] *(crate)*: politeness: Crawl-delay and a pace per site across every crawler.
//! * [`audit`]: the audit log of blocked requests.
//! * [`config`]: layered configuration.
//! * [`logging`]: operational logs (tracing), separate from the audit log.
//! * [`clock`] *(crate)*: time behind a seam, for tests.
//! * [`usage`]: AI usage preferences for each crawler's purpose.
//! * [`tls`]: the crypto provider, the proxy's CA, the verified client for origins.
//! * [`metrics`]: Prometheus metrics and the recent blocks, for operators.
//! * [`admin`]: the admin listener (metrics, health, live decisions, cache purges, status page).
//! * [`notify`]: readiness and status for systemd (`sd_notify`).
//! * [`access`]: who may use the proxy (client access list, proxy authentication).
//! * [`guard`]: where the proxy may connect (the SSRF guard and its connector).
//! * [`units`]: units the configuration is written in (sizes).
//! * [`limits`]: connection and request limits. [`framing`] *(crate)*: request smuggling checks.
//! * [`signing`]: Web Bot Auth signatures on forwarded requests, and the key directory.
//! * [`owner_only`]: the mode check of private keys and of the directories that hold them.
//! * [`robots_version`] *(crate)*: a robots.txt version (the bytes as parsed, their SHA-256, when fetched).
//! * [`archive`] *(crate)*: every robots.txt version decided with, and when each was in force, on disk.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod access;
pub mod admin;
pub use robots_proxy_archive as archive;
pub mod audit;
pub use robots_proxy_authority as authority;
pub mod cache;
pub mod check;
pub use robots_proxy_clock as clock;
pub mod config;
pub mod disclosure;
mod error;
pub mod evidence;
pub mod fleet;
pub use robots_proxy_framing as framing;
pub mod guard;
pub mod limits;
pub mod logging;
pub mod metrics;
pub mod notify;
pub mod on_disk;
pub use robots_proxy_output as output;
pub mod owner_only;
pub use robots_proxy_pace as pacing;
pub mod policy;
pub mod preflight;
pub mod proxy;
pub mod reload;
pub use robots_proxy_archive::robots_version;
pub use robots_proxy_engine as robots;
pub(crate) mod server;
pub mod signing;
pub mod tls;
pub use robots_proxy_units as units;
pub mod usage;
