//! robots-proxy: a forward HTTP proxy that makes any crawler obey robots.txt.
//!
//! The map of the crate's modules, each with its one job and the modules it may reach, is in
//! `docs/architecture.md` ("Rules of the house"). It is generated from the table in
//! `.ci/house.py`, which `.ci/run` checks against the `crate::` paths of the code, so it cannot
//! drift; this comment keeps no second copy.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub use robots_proxy_access as access;
pub use robots_proxy_admin as admin;
pub use robots_proxy_archive as archive;
pub use robots_proxy_audit as audit;
pub use robots_proxy_authority as authority;
pub use robots_proxy_sitefiles as cache;
pub mod check;
pub use robots_proxy_clock as clock;
pub use robots_proxy_config as config;
pub use robots_proxy_disclosure as disclosure;
pub mod evidence;
pub use robots_proxy_fleet as fleet;
pub use robots_proxy_framing as framing;
pub use robots_proxy_net::error;
pub use robots_proxy_net::guard;
pub use robots_proxy_net::limits;
pub mod logging;
pub use robots_proxy_metrics as metrics;
pub mod notify;
pub mod on_disk;
pub use robots_proxy_decide as policy;
pub use robots_proxy_output as output;
pub use robots_proxy_owner_only as owner_only;
pub use robots_proxy_pace as pacing;
pub mod preflight;
pub use robots_proxy_proxy as proxy;
pub mod reload;
pub use robots_proxy_archive::robots_version;
pub use robots_proxy_decide::usage;
pub use robots_proxy_engine as robots;
pub use robots_proxy_identity as signing;
pub use robots_proxy_net::server;
pub use robots_proxy_net::tls;
pub use robots_proxy_sync as sync;
pub use robots_proxy_units as units;
