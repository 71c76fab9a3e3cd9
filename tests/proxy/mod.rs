//! Integration tests of the proxy: real origins on 127.0.0.1, the proxy, and real clients.

pub mod support;
pub mod tls_support;

mod access;
mod blocking;
mod client_limits;
mod encoded_robots;
mod faults;
mod fetch_table;
mod forwarding;
mod framing;
mod guard;
mod https;
mod limits;
mod nginx;
mod optouts;
mod origin_framing;
mod pacing;
mod pool;
mod readings_model;
mod regression;
mod report;
mod restart;
mod signing;
mod signing_choice;
mod signing_cosign;
mod signing_directory;
mod signing_scope;
mod stalls;
mod streaming;
pub(crate) mod tls_listener;
mod tunnel_policy;
mod tunnel_relay;
mod usage;
mod usage_readings;
