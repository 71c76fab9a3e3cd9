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
/// listener reached at `local`, given the extra `names` of `admin.hosts`. A name of
/// `admin.hosts` without a port passes with no port or the listener's; one with a port
/// (`localhost:9091`, `127.0.0.1:32771`: a port published by Docker or compose that differs
/// from the listener's) passes with exactly that port.
pub(crate) fn names_listener(host: &str, local: SocketAddr, names: &[String]) -> bool {
    let Some((name, port)) = robots_proxy_authority::host_and_port(host) else { return false };
    let own_port = port.is_none_or(|port| port == local.port());
    if own_port {
        if let Ok(ip) = name.parse::<IpAddr>() {
            if ip.to_canonical() == local.ip().to_canonical() {
                return true;
            }
        } else if name.eq_ignore_ascii_case("localhost") {
            return true;
        }
    }
    names.iter().filter_map(|n| robots_proxy_authority::host_and_port(n)).any(|(n, p)| {
        let port_ok = match p {
            Some(p) => port == Some(p),
            None => own_port,
        };
        port_ok && same_name(&n, &name)
    })
}

/// Two hosts are the same: equal IP addresses, or names equal but for case.
fn same_name(a: &str, b: &str) -> bool {
    match (a.parse::<IpAddr>(), b.parse::<IpAddr>()) {
        (Ok(a), Ok(b)) => a.to_canonical() == b.to_canonical(),
        (Err(_), Err(_)) => a.eq_ignore_ascii_case(b),
        _ => false,
    }
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
        // Published ports (docker run -p, compose): configured with their port, and only so.
        let published = vec!["localhost:9091".to_owned(), "127.0.0.1:32771".to_owned()];
        let container: SocketAddr = "172.17.0.2:9090".parse().unwrap();
        for ok in ["localhost:9091", "127.0.0.1:32771", "localhost:9090", "localhost"] {
            assert!(names_listener(ok, container, &published), "{ok}");
        }
        for bad in ["localhost:9092", "127.0.0.1:9091", "127.0.0.1", "127.0.0.1:9090", "x:9091"] {
            assert!(!names_listener(bad, container, &published), "{bad}");
        }
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:9090".parse().unwrap();
        assert!(names_listener("127.0.0.1:9090", mapped, &[]));
    }
}
