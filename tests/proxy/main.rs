//! Integration tests of the proxy: real origins on 127.0.0.1, the proxy, and real clients.

mod support;
mod tls_support;

mod blocking;
mod forwarding;
mod https;
mod streaming;
