//! Integration tests of the robots cache against real origins on 127.0.0.1: the status table
//! (RFC 9309 §2.3.1), lifetimes and back-off (§2.4, §2.3.1.4), and one fetch per authority.

mod coalescing;
mod encoding;
mod fetch_table;
mod lifetime;
mod persist;
mod slots;
/// Also the raw origin of the proxy and ops tests.
pub(crate) mod support;
