//! Connections, both ways, below every listener and every fetch:
//!
//! * [`server`]: the one way a connection is served (`serve_connection`), HTTP/1.1 or HTTP/2,
//!   with one [`server::ConnectionTimeouts`] per listener;
//! * [`limits`]: the connection gate, head sizes, write timeouts and the I/O wrappers that
//!   enforce them;
//! * [`guard`]: the destination guard (where the proxy may connect) and its connector;
//! * [`tls`]: the one crypto provider, the proxy's CA, the verified client for origins and the
//!   TLS listener.
//!
//! It never reads the configuration: the root crate hands each part its section.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod error;
pub mod guard;
pub mod limits;
pub mod server;
pub mod tls;
