//! robots-proxy: a forward HTTP proxy that makes any crawler obey robots.txt.
//!
//! The crate is layered so that the data path stays short and visible:
//!
//! * [`robots`]: the robots.txt engine. Pure: parse once, decide many times, no I/O.
//! * [`check`]: the offline `robots-proxy check` command built on the engine.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod check;
pub mod robots;
