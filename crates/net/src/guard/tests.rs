//! Unit tests of the destination guard.

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn reason(s: &str) -> Option<Reason> {
    prohibited_reason(canonical(ip(s)))
}

#[test]
fn default_prohibited_ranges() {
    for (addr, want) in [
        ("127.0.0.1", Reason::Loopback),
        ("127.255.255.254", Reason::Loopback),
        ("10.1.2.3", Reason::Private),
        ("172.16.0.1", Reason::Private),
        ("172.31.255.255", Reason::Private),
        ("192.168.1.1", Reason::Private),
        ("169.254.169.254", Reason::CloudMetadata),
        ("169.254.1.1", Reason::LinkLocal),
        ("100.64.0.1", Reason::SharedAddressSpace),
        ("100.127.255.255", Reason::SharedAddressSpace),
        ("224.0.0.1", Reason::Multicast),
        ("239.255.255.250", Reason::Multicast),
        ("0.0.0.0", Reason::Unspecified),
        ("0.1.2.3", Reason::Unspecified),
        ("255.255.255.255", Reason::Broadcast),
        ("240.0.0.1", Reason::Reserved),
        ("::1", Reason::Loopback),
        ("::", Reason::Unspecified),
        ("fc00::1", Reason::UniqueLocal),
        ("fd12:3456::1", Reason::UniqueLocal),
        ("fd00:ec2::254", Reason::CloudMetadata),
        ("fe80::1", Reason::LinkLocal),
        ("fec0::1", Reason::SiteLocal),
        ("ff02::1", Reason::Multicast),
        ("::ffff:127.0.0.1", Reason::Loopback),
        ("198.18.0.1", Reason::Benchmarking),
        ("198.19.255.254", Reason::Benchmarking),
        ("192.0.0.8", Reason::ProtocolAssignments),
        ("192.0.2.1", Reason::Documentation),
        ("198.51.100.7", Reason::Documentation),
        ("203.0.113.9", Reason::Documentation),
        ("64:ff9b:1::a00:1", Reason::LocalNat64),
        ("100::1", Reason::DiscardOnly),
        ("2001:db8::1", Reason::Documentation),
        ("3fff::1", Reason::Documentation),
        ("2002:7f00:1::", Reason::Loopback),
        ("2002:a00:1::1", Reason::Private),
        ("::127.0.0.1", Reason::Loopback),
        ("::10.1.2.3", Reason::Private),
        ("::ffff:10.0.0.1", Reason::Private),
        ("::ffff:169.254.169.254", Reason::CloudMetadata),
        ("64:ff9b::7f00:1", Reason::Loopback),
    ] {
        assert_eq!(reason(addr), Some(want), "{addr}");
    }
}

#[test]
fn public_addresses_pass() {
    for addr in [
        "1.1.1.1",
        "8.8.8.8",
        "172.15.255.255",
        "172.32.0.1",
        "100.63.255.255",
        "100.128.0.1",
        "192.169.0.1",
        "2606:4700::1111",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
        "::8.8.8.8",
        "198.17.255.255",
        "198.20.0.1",
        "192.0.1.1",
        "2001:db9::1",
        "3fff:1000::1",
    ] {
        assert_eq!(reason(addr), None, "{addr}");
    }
}

fn range(s: &str) -> IpRange {
    s.parse().unwrap()
}

#[test]
fn allow_list_reopens_ranges_but_never_the_own_listener() {
    let own: SocketAddr = "127.0.0.1:8080".parse().unwrap();
    let guard = DestinationGuard::new(&[range("127.0.0.0/8")], &[own]);
    assert_eq!(guard.check("127.0.0.1:9000".parse().unwrap()), Ok(()));
    assert_eq!(guard.check("[::ffff:127.0.0.1]:9000".parse().unwrap()), Ok(()));
    assert_eq!(guard.check(own), Err(Reason::OwnListener));
    assert_eq!(guard.check("[::1]:9000".parse().unwrap()), Err(Reason::Loopback));
    assert_eq!(guard.check("10.0.0.1:80".parse().unwrap()), Err(Reason::Private));
    guard.add_own_listener("127.0.0.1:9000".parse().unwrap());
    assert_eq!(guard.check("127.0.0.1:9000".parse().unwrap()), Err(Reason::OwnListener));
}

#[test]
fn listener_on_every_interface_is_reached_through_loopback() {
    let guard = DestinationGuard::new(
        &[range("127.0.0.0/8"), range("0.0.0.0/8")],
        &["0.0.0.0:3128".parse().unwrap()],
    );
    assert_eq!(guard.check("127.0.0.1:3128".parse().unwrap()), Err(Reason::OwnListener));
    assert_eq!(guard.check("0.0.0.0:3128".parse().unwrap()), Err(Reason::OwnListener));
    assert_eq!(guard.check("127.0.0.1:3129".parse().unwrap()), Ok(()));
    assert_eq!(guard.check("93.184.216.34:3128".parse().unwrap()), Ok(()));
}

#[test]
fn listener_on_every_interface_is_reached_through_every_local_address() {
    let everything = [range("0.0.0.0/0"), range("::/0")];
    let local: Vec<IpAddr> =
        if_addrs::get_if_addrs().unwrap().iter().map(|i| canonical(i.ip())).collect();
    for wildcard in ["0.0.0.0:3128", "[::]:3128"] {
        let guard = DestinationGuard::new(&everything, &[wildcard.parse().unwrap()]);
        for addr in local.iter().chain(&[ip("127.0.0.1"), ip("127.9.9.9"), ip("::1")]) {
            let own = SocketAddr::new(*addr, 3128);
            assert_eq!(guard.check(own), Err(Reason::OwnListener), "{wildcard}: {own}");
            assert_eq!(guard.check(SocketAddr::new(*addr, 3129)), Ok(()), "{wildcard}: {addr}");
        }
        assert_eq!(
            guard.check("[::ffff:127.0.0.1]:3128".parse().unwrap()),
            Err(Reason::OwnListener)
        );
        assert_eq!(guard.check("93.184.216.34:3128".parse().unwrap()), Ok(()), "{wildcard}");
    }
}

#[test]
fn the_unspecified_address_reaches_every_listener_on_its_port() {
    let guard = DestinationGuard::new(
        &[range("0.0.0.0/0"), range("::/0")],
        &["127.0.0.1:9090".parse().unwrap()],
    );
    assert_eq!(guard.check("0.0.0.0:9090".parse().unwrap()), Err(Reason::OwnListener));
    assert_eq!(guard.check("[::]:9090".parse().unwrap()), Err(Reason::OwnListener));
    assert_eq!(guard.check("127.0.0.2:9090".parse().unwrap()), Ok(()), "another address");
    assert_eq!(guard.own_listeners(), vec!["127.0.0.1:9090".parse::<SocketAddr>().unwrap()]);
}

#[test]
fn filter_keeps_allowed_addresses_and_names_the_refused_one() {
    let guard = DestinationGuard::new(&[], &[]);
    let public: SocketAddr = "93.184.216.34:80".parse().unwrap();
    let private: SocketAddr = "10.0.0.1:80".parse().unwrap();
    assert_eq!(guard.filter("a.test", vec![private, public]).unwrap(), vec![public]);
    let err = guard.filter("a.test", vec![private, "[fc00::1]:80".parse().unwrap()]);
    let Err(GuardError::Prohibited(p)) = err else { panic!("prohibited: {err:?}") };
    assert_eq!(p.addr, private);
    assert_eq!(p.reason, Reason::Private);
    assert_eq!(p.more, 1);
    let text = p.to_string();
    assert!(text.starts_with("a.test resolves to 10.0.0.1, a private address"), "{text}");
    assert!(text.contains("1 more"), "{text}");
    assert!(matches!(guard.filter("a.test", vec![]), Err(GuardError::NoAddress(_))));
}

#[tokio::test]
async fn literals_are_checked_without_resolving() {
    let guard = DestinationGuard::new(&[], &[]);
    let err = guard.resolve("[::1]", 80).await.unwrap_err();
    assert!(err.to_string().starts_with("::1 is a loopback address"), "{err}");
    let err = guard.resolve("169.254.169.254", 80).await.unwrap_err();
    assert!(err.to_string().contains("metadata"), "{err}");
    assert_eq!(
        guard.resolve("93.184.216.34", 8080).await.unwrap(),
        vec!["93.184.216.34:8080".parse::<SocketAddr>().unwrap()]
    );
}

#[tokio::test]
async fn names_are_checked_after_resolution() {
    // `localhost` resolves (from /etc/hosts) to loopback addresses only.
    let guard = DestinationGuard::new(&[], &[]);
    let err = guard.resolve("localhost", 80).await.unwrap_err();
    let GuardError::Prohibited(p) = &err else { panic!("prohibited: {err:?}") };
    assert_eq!(p.reason, Reason::Loopback);
    assert!(err.to_string().starts_with("localhost resolves to "), "{err}");
    let open = DestinationGuard::new(&[range("127.0.0.0/8")], &[]);
    let addrs = open.resolve("localhost", 80).await.unwrap();
    assert!(addrs.iter().all(|a| a.ip() == ip("127.0.0.1")), "{addrs:?}");
}

#[test]
fn prohibited_is_found_in_a_chain() {
    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] BoxError);
    let inner = GuardError::Prohibited(Prohibited {
        host: "x".into(),
        addr: "10.0.0.1:80".parse().unwrap(),
        reason: Reason::Private,
        more: 0,
    });
    let outer = Outer(Box::new(inner));
    assert_eq!(find_prohibited(&outer).map(|p| p.reason), Some(Reason::Private));
    let plain = Outer(Box::new(io::Error::other("no")));
    assert!(find_prohibited(&plain).is_none());
}

#[test]
fn the_own_listener_refusal_names_every_listener_key() {
    let text = Reason::OwnListener.range();
    for key in ["proxy.listen", "proxy.tls_listen", "admin.listen", "signing.directory_listen"] {
        assert!(text.contains(key), "{key} missing from {text:?}");
    }
}

/// Review-fleet N10: the fleet's admin listeners are refused whatever allow_destinations
/// re-opens; other ports of the same host are not.
#[test]
fn peers_admin_listeners_are_refused() {
    let guard = DestinationGuard::new(&[IpRange("10.0.0.0/8".parse().unwrap())], &[]);
    let peer: SocketAddr = "10.0.0.7:9090".parse().unwrap();
    assert_eq!(guard.check(peer), Ok(()));
    guard.set_peer_listeners(vec![peer, "[::ffff:10.0.0.8]:9090".parse().unwrap()]);
    assert_eq!(guard.check(peer), Err(Reason::PeerListener));
    assert_eq!(guard.check("10.0.0.8:9090".parse().unwrap()), Err(Reason::PeerListener));
    assert_eq!(guard.check("10.0.0.7:8080".parse().unwrap()), Ok(()));
    guard.set_peer_listeners(vec![]);
    assert_eq!(guard.check(peer), Ok(()));
}
