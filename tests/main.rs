//! The integration tests: one binary (one link step), a module per area.
//!
//! * `engine`: the robots.txt engine and `robots-proxy check`;
//! * `cache`: the robots cache against real origins on 127.0.0.1;
//! * `config`: configuration loading, the audit writer and logging set-up;
//! * `proxy`: the proxy between real origins and real clients, with the `regression` module
//!   whose tests are named after what they stop;
//! * `ops`: the admin listener, the binary, reloads, shutdown and the health probe.

// A test binary is no library: its helpers are `pub` for the modules beside them, and no
// other crate could reach them (the workspace's `unreachable_pub` is for the crates).
#![allow(unreachable_pub)]

mod cache;
mod config;
mod engine;
mod fleet;
mod ops;
mod proxy;
mod skip;
