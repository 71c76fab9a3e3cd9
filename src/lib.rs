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
//! * [`robots`]: the robots.txt engine. Pure: parse once, decide many times, no I/O.
//! * [`check`]: the offline `robots-proxy check` command built on the engine.
//! * [`authority`]: the key robots.txt is cached under.
//! * [`cache`]: the robots cache and its fetcher.
//! * [`proxy`]: the listener and forwarding.
//! * [`policy`]: product token and decision.
//! * [`pacing`]: politeness: Crawl-delay and a pace per site across every crawler.
//! * [`audit`]: the audit log of blocked requests.
//! * [`config`]: layered configuration.
//! * [`logging`]: operational logs (tracing), separate from the audit log.
//! * [`clock`]: time behind a seam, for tests.
//! * [`usage`]: AI usage preferences for each crawler's purpose.
//! * [`tls`]: the crypto provider, the proxy's CA, the verified client for origins.
//! * [`metrics`]: Prometheus metrics and the recent blocks, for operators.
//! * [`admin`]: the admin listener (metrics, health, live decisions, cache purges, status page).
//! * [`notify`]: readiness and status for systemd (`sd_notify`).
//! * [`access`]: who may use the proxy (client access list, proxy authentication).
//! * [`guard`]: where the proxy may connect (the SSRF guard and its connector).
//! * [`units`]: units the configuration is written in (sizes).
//! * [`sync`]: locks that outlive a panic (the one place a poisoned lock is taken as it is).
//! * [`limits`]: connection and request limits. [`framing`]: request smuggling checks.
//! * [`signing`]: Web Bot Auth signatures on forwarded requests, and the key directory.
//! * [`owner_only`]: the mode check of private keys and of the directories that hold them.
//! * [`robots_version`]: a robots.txt version (the bytes as parsed, their SHA-256, when fetched).
//! * [`archive`]: every robots.txt version decided with, and when each was in force, on disk.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod access;
pub mod admin;
pub mod archive;
pub mod audit;
pub mod authority;
pub mod cache;
pub mod check;
pub mod clock;
pub mod config;
pub mod disclosure;
mod error;
pub mod evidence;
pub mod fleet;
pub mod framing;
pub mod guard;
pub mod limits;
pub mod logging;
pub mod metrics;
pub mod notify;
pub mod on_disk;
pub mod output;
pub mod owner_only;
pub mod pacing;
pub mod policy;
pub mod preflight;
pub mod proxy;
pub mod reload;
pub mod robots;
pub mod robots_version;
pub(crate) mod server;
pub mod signing;
pub mod sync;
pub mod tls;
pub mod units;
pub mod usage;
