//! Which `Host` the admin listener answers (DNS rebinding).
//!
//! A web page an operator opens can rebind its own name to 127.0.0.1: the browser then sends
//! the page's requests to the admin listener, with the page's name in `Host` and `Origin`, and
//! lets the page read the answers. The listener answers only requests that name it: `localhost`,
//! the address the client connected to (with or without the port), or a name of
//! `admin.hosts`. Anything else gets `421 Misdirected Request` (RFC 9110 §15.5.20: this server
//! does not answer for that authority).

use std::net::{IpAddr, SocketAddr};

/// Whether `host` (a `Host` field, or an absolute-form target's authority) names the admin
/// listener reached at `local`, given the extra `names` of `admin.hosts`.
pub(crate) fn names_listener(host: &str, local: SocketAddr, names: &[String]) -> bool {
    let Ok(authority) = host.parse::<http::uri::Authority>() else { return false };
    if authority.as_str().contains('@') {
        return false;
    }
    if authority.port_u16().is_some_and(|port| port != local.port()) {
        return false;
    }
    let name = authority.host();
    let name = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(name);
    if let Ok(ip) = name.parse::<IpAddr>() {
        return ip.to_canonical() == local.ip().to_canonical()
            || names.iter().any(|n| n.parse::<IpAddr>().is_ok_and(|n| n == ip));
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    name.eq_ignore_ascii_case("localhost") || names.iter().any(|n| n.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_listeners_own_names_pass() {
        let local: SocketAddr = "127.0.0.1:9090".parse().unwrap();
        let names = vec!["gateway.internal".to_owned(), "10.1.2.3".to_owned()];
        for ok in [
            "localhost",
            "LocalHost:9090",
            "localhost.",
            "127.0.0.1",
            "127.0.0.1:9090",
            "gateway.internal",
            "Gateway.Internal:9090",
            "10.1.2.3:9090",
        ] {
            assert!(names_listener(ok, local, &names), "{ok}");
        }
        for bad in [
            "rebind.evil.example:9090",
            "rebind.evil.example",
            "localhost:9091",
            "127.0.0.2:9090",
            "localhost.evil.example",
            "user@localhost",
            "",
            "[::1]:9090",
            "gateway.internal.evil.example",
        ] {
            assert!(!names_listener(bad, local, &names), "{bad}");
        }
        let v6: SocketAddr = "[::1]:9090".parse().unwrap();
        assert!(names_listener("[::1]:9090", v6, &[]));
        assert!(names_listener("[::1]", v6, &[]));
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:9090".parse().unwrap();
        assert!(names_listener("127.0.0.1:9090", mapped, &[]));
    }
}
