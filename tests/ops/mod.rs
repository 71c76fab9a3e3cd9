//! Integration tests for operating the proxy: the admin listener (metrics, health, live
//! decisions, purges, the status page in headless Chromium), configuration checks and reloads,
//! graceful shutdown and the health probe, against real loopback servers and the real binary.

pub mod support;

mod admin;
mod archive;
mod audit_chain;
mod audit_coverage;
mod audit_log;
mod audit_witness;
mod binary;
mod case_folding;
mod dashboards;
mod disclosure;
mod docs;
mod evidence;
mod exceptions;
mod hostile_text;
mod input;
mod key_files;
mod own_listeners;
mod page;
mod preflight;
mod properties;
mod quick_start;
mod rebinding;
pub(crate) mod refresh_ahead;
mod reload_all;
mod reload_every_key;
mod reload_files;
mod report_reload;
mod side_limits;
mod user_agents;
mod users_reload;
mod versions;
