//! The destination guard: where the proxy may connect to (server-side request forgery, SSRF).
//!
//! A proxy open to a whole organisation would otherwise let any client reach what only the
//! proxy's host can reach: its own loopback services, the private network behind it, the cloud
//! provider's metadata service (`169.254.169.254`, which hands out credentials), or the proxy's
//! own listener (a request loop). So every connection the proxy opens, for a forwarded request,
//! a CONNECT tunnel, a robots.txt fetch or a redirect of one, goes through
//! [`GuardedConnector`] or [`DestinationGuard::connect_tcp`], which
//!
//! 1. resolve the host (or take the IP literal as it is),
//! 2. drop every address that is prohibited ([`DestinationGuard::check`]) unless
//!    `access.allow_destinations` re-opens its range, and
//! 3. connect to exactly the addresses that were checked, never resolving the name again, so a
//!    name whose DNS answer changes between the check and the connection (DNS rebinding) cannot
//!    slip through.
//!
//! When no address is left the connection fails with [`Prohibited`], which names the address
//! and why; the proxy answers it with `403` and `Proxy-Status: destination_ip_prohibited`
//! (RFC 9209 §2.3.2), and audits it.
//!
//! Prohibited by default (see [`Reason`]): unspecified, loopback, private (RFC 1918), shared
//! address space (CGNAT, RFC 6598), link-local (including the metadata address), multicast,
//! reserved and broadcast IPv4; unspecified, loopback, unique-local (RFC 4193), site-local,
//! link-local and multicast IPv6; IPv4-mapped and NAT64 IPv6 addresses by the IPv4 address they
//! carry; and the proxy's own listeners whatever the allow list says (see the `own` module: a wildcard
//! listener is reached through every local address, see `own.rs`).
//!
//! The process builds one guard (in `main`, its composition root) and shares it with every
//! component that connects out, so that the listeners it learns about apply everywhere.

mod own;

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use ipnet::IpNet;
use tokio::net::TcpStream;

use robots_proxy_access::IpRange;

/// Why an address is prohibited as a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reason {
    /// The IPv4 broadcast address `255.255.255.255`.
    Broadcast,
    /// A cloud provider's instance metadata service (`169.254.169.254`, `fd00:ec2::254`): it
    /// hands out the host's credentials to whoever asks.
    CloudMetadata,
    /// Link-local: `169.254.0.0/16`, `fe80::/10` (RFC 3927, RFC 4291).
    LinkLocal,
    /// Loopback: `127.0.0.0/8`, `::1` (the proxy's own host).
    Loopback,
    /// Multicast: `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// One of the proxy's own listeners: a request there would loop.
    OwnListener,
    /// The admin listener of another instance of the fleet (from the fleet's view): its
    /// endpoints (purges, reloads) are not for proxy clients.
    PeerListener,
    /// Private IPv4: `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16` (RFC 1918).
    Private,
    /// Reserved IPv4 `240.0.0.0/4` (RFC 1112), never a public host.
    Reserved,
    /// Shared address space (carrier-grade NAT) `100.64.0.0/10` (RFC 6598).
    SharedAddressSpace,
    /// Deprecated site-local IPv6 `fec0::/10` (RFC 3879).
    SiteLocal,
    /// Unique-local IPv6 `fc00::/7` (RFC 4193), the IPv6 private range.
    UniqueLocal,
    /// Unspecified: `0.0.0.0/8` ("this network", RFC 791), `::`.
    Unspecified,
    /// Benchmarking `198.18.0.0/15` (RFC 2544): lab networks, not globally reachable.
    Benchmarking,
    /// Documentation: `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24` (RFC 5737),
    /// `2001:db8::/32` (RFC 3849), `3fff::/20` (RFC 9637): never a real host.
    Documentation,
    /// IETF protocol assignments `192.0.0.0/24` (RFC 6890): not globally reachable.
    ProtocolAssignments,
    /// The local-use NAT64 prefix `64:ff9b:1::/48` (RFC 8215): the site's own translators, for
    /// any IPv4 address behind them.
    LocalNat64,
    /// The discard-only prefix `100::/64` (RFC 6666).
    DiscardOnly,
}

impl Reason {
    /// The range this reason covers, as written in `access.allow_destinations`.
    pub fn range(self) -> &'static str {
        match self {
            Reason::Broadcast => "255.255.255.255/32",
            Reason::CloudMetadata => "169.254.169.254/32, fd00:ec2::254/128",
            Reason::LinkLocal => "169.254.0.0/16, fe80::/10",
            Reason::Loopback => "127.0.0.0/8, ::1/128",
            Reason::Multicast => "224.0.0.0/4, ff00::/8",
            Reason::OwnListener => {
                "proxy.listen, proxy.tls_listen, admin.listen, signing.directory_listen"
            }
            Reason::PeerListener => "admin.listen of every instance of the fleet",
            Reason::Private => "10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16",
            Reason::Reserved => "240.0.0.0/4",
            Reason::SharedAddressSpace => "100.64.0.0/10",
            Reason::SiteLocal => "fec0::/10",
            Reason::UniqueLocal => "fc00::/7",
            Reason::Unspecified => "0.0.0.0/8, ::/128",
            Reason::Benchmarking => "198.18.0.0/15",
            Reason::Documentation => {
                "192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32, 3fff::/20"
            }
            Reason::ProtocolAssignments => "192.0.0.0/24",
            Reason::LocalNat64 => "64:ff9b:1::/48",
            Reason::DiscardOnly => "100::/64",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reason::Broadcast => "the broadcast address",
            Reason::CloudMetadata => "a cloud instance metadata address",
            Reason::LinkLocal => "a link-local address",
            Reason::Loopback => "a loopback address",
            Reason::Multicast => "a multicast address",
            Reason::OwnListener => "this proxy's own listener",
            Reason::PeerListener => "the admin listener of another instance of the fleet",
            Reason::Private => "a private address",
            Reason::Reserved => "a reserved address",
            Reason::SharedAddressSpace => "a shared (carrier-grade NAT) address",
            Reason::SiteLocal => "a site-local address",
            Reason::UniqueLocal => "a unique-local (private) address",
            Reason::Unspecified => "an unspecified address",
            Reason::Benchmarking => "a benchmarking address",
            Reason::Documentation => "a documentation address",
            Reason::ProtocolAssignments => "an IETF protocol assignment address",
            Reason::LocalNat64 => "a local-use NAT64 address",
            Reason::DiscardOnly => "a discard-only address",
        })
    }
}

/// A destination the guard refused: the host asked for, the address it came to, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prohibited {
    /// The host as requested (a name or an IP literal).
    pub host: String,
    /// The (first) refused address.
    pub addr: SocketAddr,
    /// Why it is refused.
    pub reason: Reason,
    /// How many more addresses of the host were refused too.
    pub more: usize,
}

impl fmt::Display for Prohibited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ip = self.addr.ip();
        if self.host.trim_start_matches('[').trim_end_matches(']') == ip.to_string() {
            write!(f, "{ip} is {} ({})", self.reason, self.reason.range())?;
        } else {
            write!(f, "{} resolves to {ip}, {} ({})", self.host, self.reason, self.reason.range())?;
        }
        if self.more > 0 {
            write!(f, " and {} more prohibited address(es)", self.more)?;
        }
        f.write_str(": destinations there are refused (see access.allow_destinations)")
    }
}

impl std::error::Error for Prohibited {}

/// Why the guard could not give a destination's addresses.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// Every address of the host is prohibited.
    #[error(transparent)]
    Prohibited(#[from] Prohibited),
    /// The name could not be resolved (the proxy reports it as `dns_error`, found by type).
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        /// The name.
        host: String,
        /// Why.
        source: io::Error,
    },
    /// The name resolved to no address at all.
    #[error("{0} has no address")]
    NoAddress(String),
    /// The URI names no host.
    #[error("the URI {0} has no host")]
    NoHost(String),
}

/// The addresses a connection to the listener bound at `listener` may be made to, as another
/// host names them: the address itself, or for a wildcard listener (`0.0.0.0`, `[::]`) every
/// address of this host's interfaces (loopback included) with its port. What an instance
/// announces to the fleet so that the others refuse it ([`DestinationGuard::set_peer_listeners`]).
pub fn reachable_at(listener: SocketAddr) -> Vec<SocketAddr> {
    if !listener.ip().is_unspecified() {
        return vec![listener];
    }
    let port = listener.port();
    match if_addrs::get_if_addrs() {
        Ok(interfaces) => interfaces.iter().map(|i| SocketAddr::new(i.ip(), port)).collect(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot list the local interface addresses to announce");
            vec![SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), port)]
        }
    }
}

/// Decides which destination addresses the proxy may connect to. Shared (`Arc`) by every
/// connector of one proxy, so that the listeners it learns about apply everywhere.
#[derive(Debug)]
pub struct DestinationGuard {
    /// `access.allow_destinations`, replaced whole on a reload ([`DestinationGuard::set_allowed`]).
    allow: arc_swap::ArcSwap<Vec<IpNet>>,
    /// The proxy's own listen addresses (learnt as they are bound).
    own: own::OwnListeners,
    /// The admin listeners of the fleet's other instances, as they announce them
    /// ([`DestinationGuard::set_peer_listeners`]).
    peers: arc_swap::ArcSwap<Vec<SocketAddr>>,
}

impl DestinationGuard {
    /// A guard that re-opens `allow` and refuses `own` (the proxy's listen addresses).
    pub fn new(allow: &[IpRange], own: &[SocketAddr]) -> Self {
        DestinationGuard {
            allow: arc_swap::ArcSwap::from_pointee(allow.iter().map(|r| r.0.trunc()).collect()),
            own: own::OwnListeners::new(own),
            peers: arc_swap::ArcSwap::from_pointee(Vec::new()),
        }
    }

    /// Puts `allow` (`access.allow_destinations`) in force for connections checked from now
    /// on (a reload). The own listeners stay refused whatever it says.
    pub fn set_allowed(&self, allow: &[IpRange]) {
        self.allow.store(Arc::new(allow.iter().map(|r| r.0.trunc()).collect()));
    }

    /// Adds a listen address of this process: the bound address of a listener, which is only
    /// known once bound with port 0. Every listener of the process must be added (the proxy's
    /// and the admin's), before it serves. A wildcard address (`0.0.0.0`, `[::]`) covers
    /// loopback and every local interface address with that port.
    pub fn add_own_listener(&self, addr: SocketAddr) {
        self.own.add(addr);
    }

    /// Puts `peers`, the admin listen addresses the fleet's instances announce (a wildcard
    /// listener announced as each of its host's addresses), in force as refused destinations,
    /// whatever `access.allow_destinations` says (review-fleet N10).
    pub fn set_peer_listeners(&self, peers: Vec<SocketAddr>) {
        let peers: Vec<SocketAddr> =
            peers.into_iter().map(|p| SocketAddr::new(canonical(p.ip()), p.port())).collect();
        self.peers.store(Arc::new(peers));
    }

    /// The listen addresses this guard refuses as the process's own.
    pub fn own_listeners(&self) -> Vec<SocketAddr> {
        self.own.listeners()
    }

    /// Whether the proxy may connect to `addr`. `Err` names the reason.
    pub fn check(&self, addr: SocketAddr) -> Result<(), Reason> {
        if self.own.contains(addr) {
            return Err(Reason::OwnListener);
        }
        let ip = canonical(addr.ip());
        if self.peers.load().iter().any(|p| p.ip() == ip && p.port() == addr.port()) {
            return Err(Reason::PeerListener);
        }
        let Some(reason) = prohibited_reason(ip) else { return Ok(()) };
        if self.allow.load().iter().any(|net| net.contains(&ip) || net.contains(&addr.ip())) {
            return Ok(());
        }
        Err(reason)
    }

    /// The addresses of `host:port` the proxy may connect to: the IP literal, or the name's
    /// addresses from the system resolver, without the prohibited ones. Fails with
    /// [`GuardError::Prohibited`] when none is left.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, GuardError> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let candidates: Vec<SocketAddr> = if let Ok(ip) = bare.parse::<IpAddr>() {
            vec![SocketAddr::new(ip, port)]
        } else {
            tokio::net::lookup_host((bare, port))
                .await
                .map_err(|source| GuardError::Resolve { host: bare.to_owned(), source })?
                .collect()
        };
        self.filter(host, candidates)
    }

    /// `candidates` without the prohibited addresses; [`Prohibited`] when none is left.
    pub fn filter(
        &self,
        host: &str,
        candidates: Vec<SocketAddr>,
    ) -> Result<Vec<SocketAddr>, GuardError> {
        if candidates.is_empty() {
            return Err(GuardError::NoAddress(host.to_owned()));
        }
        let mut first_refused = None;
        let mut refused = 0usize;
        let mut allowed = Vec::with_capacity(candidates.len());
        for addr in candidates {
            match self.check(addr) {
                Ok(()) => allowed.push(addr),
                Err(reason) => {
                    refused += 1;
                    first_refused.get_or_insert((addr, reason));
                }
            }
        }
        match first_refused {
            Some((addr, reason)) if allowed.is_empty() => Err(GuardError::Prohibited(Prohibited {
                host: host.to_owned(),
                addr,
                reason,
                more: refused - 1,
            })),
            _ => Ok(allowed),
        }
    }

    /// Opens a TCP connection to `host:port` (for a CONNECT tunnel), to the checked addresses
    /// only, each tried in turn within `timeout`.
    pub async fn connect_tcp(
        &self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<TcpStream, ConnectTcpError> {
        let addrs = self.resolve(host, port).await?;
        let mut last = None;
        for addr in addrs {
            match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => return Ok(stream),
                Ok(Err(e)) => last = Some(ConnectTcpError::Connect { addr, source: e }),
                Err(_) => last = Some(ConnectTcpError::Timeout { addr }),
            }
        }
        // `resolve` never returns an empty list.
        Err(last.unwrap_or(ConnectTcpError::Guard(GuardError::NoAddress(host.to_owned()))))
    }
}

/// Why a tunnel connection could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectTcpError {
    /// The guard refused the destination, or its name did not resolve.
    #[error(transparent)]
    Guard(#[from] GuardError),
    /// Connecting failed.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The address tried last.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// Connecting took too long.
    #[error("connecting to {addr} timed out")]
    Timeout {
        /// The address tried last.
        addr: SocketAddr,
    },
}

/// The IPv4 address an IPv6 address stands for, so that it is judged as that address:
/// IPv4-mapped `::ffff:a.b.c.d` (RFC 4291 §2.5.5.2), the well-known NAT64 prefix
/// `64:ff9b::a.b.c.d` (RFC 6052), 6to4 `2002:aabb:ccdd::/48` (RFC 3056, the IPv4 address in
/// bits 16–47) and the deprecated IPv4-compatible `::a.b.c.d` (RFC 4291 §2.5.5.1; `::` and
/// `::1` themselves excepted). So `::ffff:127.0.0.1` and `2002:7f00:1::` are judged as
/// `127.0.0.1`.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return IpAddr::V4(v4);
            }
            let s = v6.segments();
            let v4 = |hi: u16, lo: u16| {
                let [a, b] = hi.to_be_bytes();
                let [c, d] = lo.to_be_bytes();
                IpAddr::V4(Ipv4Addr::new(a, b, c, d))
            };
            if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return v4(s[6], s[7]);
            }
            if s[0] == 0x2002 {
                return v4(s[1], s[2]);
            }
            if s[..6] == [0; 6] && !v6.is_unspecified() && !v6.is_loopback() {
                return v4(s[6], s[7]);
            }
            ip
        }
        IpAddr::V4(_) => ip,
    }
}

/// Why the address range `net` is, or holds, space that is never a host's public address
/// (the guard's own ranges, [`Reason::range`]), or `None` for public space. IPv4-mapped IPv6
/// ranges (`::ffff:10.0.0.0/104`) are judged by their IPv4 range. Documentation ranges are
/// left to the caller (examples in a configuration), and so are the proxy's own listeners.
pub fn range_reason(net: &IpNet) -> Option<Reason> {
    const REASONS: &[Reason] = &[
        Reason::Broadcast,
        Reason::CloudMetadata,
        Reason::LinkLocal,
        Reason::Loopback,
        Reason::Multicast,
        Reason::Private,
        Reason::Reserved,
        Reason::SharedAddressSpace,
        Reason::SiteLocal,
        Reason::UniqueLocal,
        Reason::Unspecified,
        Reason::Benchmarking,
        Reason::ProtocolAssignments,
        Reason::LocalNat64,
        Reason::DiscardOnly,
    ];
    let net = match net {
        IpNet::V6(v6) => {
            let mapped =
                ipnet::Ipv6Net::new(Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0), 96).ok()?;
            if mapped.contains(v6) {
                let v4 = v6.network().to_ipv4_mapped()?;
                IpNet::V4(ipnet::Ipv4Net::new(v4, v6.prefix_len() - 96).ok()?)
            } else if v6.contains(&mapped) {
                // It holds every IPv4-mapped address, private ones among them.
                return Some(Reason::Private);
            } else {
                *net
            }
        }
        IpNet::V4(_) => *net,
    };
    REASONS.iter().copied().find(|reason| {
        reason
            .range()
            .split(", ")
            .filter_map(|r| r.parse::<IpNet>().ok())
            .any(|blocked| blocked.contains(&net) || net.contains(&blocked))
    })
}

/// Why `ip` (already canonical) is prohibited by default, or `None` for a public address.
pub(crate) fn prohibited_reason(ip: IpAddr) -> Option<Reason> {
    match ip {
        IpAddr::V4(v4) => v4_reason(v4),
        IpAddr::V6(v6) => v6_reason(v6),
    }
}

/// The IPv4 ranges the IANA IPv4 Special-Purpose Address Registry (RFC 6890 and updates)
/// marks not globally reachable, and the multicast and reserved blocks.
fn v4_reason(ip: Ipv4Addr) -> Option<Reason> {
    let [a, b, ..] = ip.octets();
    Some(match (a, b) {
        _ if ip == Ipv4Addr::new(169, 254, 169, 254) => Reason::CloudMetadata,
        _ if ip.is_broadcast() => Reason::Broadcast,
        (0, _) => Reason::Unspecified,
        (127, _) => Reason::Loopback,
        (10, _) | (192, 168) => Reason::Private,
        (172, 16..=31) => Reason::Private,
        (100, 64..=127) => Reason::SharedAddressSpace,
        (169, 254) => Reason::LinkLocal,
        (224..=239, _) => Reason::Multicast,
        (240..=255, _) => Reason::Reserved,
        (198, 18..=19) => Reason::Benchmarking,
        _ if matches!(ip.octets(), [192, 0, 2, _] | [198, 51, 100, _] | [203, 0, 113, _]) => {
            Reason::Documentation
        }
        _ if matches!(ip.octets(), [192, 0, 0, _]) => Reason::ProtocolAssignments,
        _ => return None,
    })
}

/// The IPv6 ranges the IANA IPv6 Special-Purpose Address Registry marks not globally
/// reachable (IPv4-mapped, NAT64, 6to4 and IPv4-compatible addresses are judged by their IPv4
/// address first, see [`canonical`]), and multicast.
fn v6_reason(ip: Ipv6Addr) -> Option<Reason> {
    let first = ip.segments()[0];
    Some(match first {
        _ if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) => Reason::CloudMetadata,
        _ if ip.is_unspecified() => Reason::Unspecified,
        _ if ip.is_loopback() => Reason::Loopback,
        0xfe80..=0xfebf => Reason::LinkLocal,
        0xfec0..=0xfeff => Reason::SiteLocal,
        0xfc00..=0xfdff => Reason::UniqueLocal,
        0xff00..=0xffff => Reason::Multicast,
        _ if ip.segments()[..3] == [0x64, 0xff9b, 1] => Reason::LocalNat64,
        _ if ip.segments()[..4] == [0x100, 0, 0, 0] => Reason::DiscardOnly,
        0x2001 if ip.segments()[1] == 0xdb8 => Reason::Documentation,
        0x3fff if ip.segments()[1] < 0x1000 => Reason::Documentation,
        _ => return None,
    })
}

/// A connector for the proxy's outgoing connections (forwarding and robots.txt fetches): the
/// destination is resolved and checked by the [`DestinationGuard`], then
/// [`HttpConnector`] connects to exactly the checked addresses (Happy Eyeballs among them).
///
/// `hyper_rustls::HttpsConnector` wraps it for TLS; it is `enforce_http(false)`, so it carries
/// `https` URIs too.
#[derive(Clone)]
pub struct GuardedConnector {
    guard: Arc<DestinationGuard>,
    settings: Arc<ConnectSettings>,
}

/// How the TCP connections of a [`GuardedConnector`] are made.
#[derive(Debug, Clone)]
pub struct ConnectSettings {
    /// Time allowed to connect (per attempt, as `HttpConnector` applies it).
    pub connect_timeout: Duration,
    /// TCP keepalive probes after this long idle.
    pub keepalive: Option<Duration>,
}

impl ConnectSettings {
    /// How the proxy connects to origins, for forwarding and for robots.txt: within
    /// `connect_timeout`, with TCP keepalive probes after a minute idle.
    pub fn origins(connect_timeout: Duration) -> Self {
        ConnectSettings { connect_timeout, keepalive: Some(Duration::from_secs(60)) }
    }
}

impl GuardedConnector {
    /// A connector that asks `guard` before every connection.
    pub fn new(guard: Arc<DestinationGuard>, settings: ConnectSettings) -> Self {
        GuardedConnector { guard, settings: Arc::new(settings) }
    }

    /// The guard it asks.
    pub fn guard(&self) -> &Arc<DestinationGuard> {
        &self.guard
    }

    async fn connect(
        guard: Arc<DestinationGuard>,
        settings: Arc<ConnectSettings>,
        dst: Uri,
    ) -> Result<TokioIo<TcpStream>, BoxError> {
        let host = dst.host().ok_or_else(|| GuardError::NoHost(dst.to_string()))?;
        let port =
            dst.port_u16().unwrap_or(if dst.scheme_str() == Some("https") { 443 } else { 80 });
        let addrs = guard.resolve(host, port).await?;
        // A connector per connection, resolving the name to the checked addresses only (an IP
        // literal is not resolved at all, and was checked above).
        let mut http = HttpConnector::new_with_resolver(Checked(addrs));
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(settings.connect_timeout));
        http.set_keepalive(settings.keepalive);
        let stream = tower_service::Service::call(&mut http, dst).await?;
        Ok(stream)
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<Uri> for GuardedConnector {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        Box::pin(Self::connect(self.guard.clone(), self.settings.clone(), dst))
    }
}

/// A resolver that answers with addresses the guard already checked.
#[derive(Clone)]
struct Checked(Vec<SocketAddr>);

impl tower_service::Service<Name> for Checked {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = io::Error;
    type Future = std::future::Ready<Result<Self::Response, io::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), io::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _name: Name) -> Self::Future {
        std::future::ready(Ok(self.0.clone().into_iter()))
    }
}

/// The first [`Prohibited`] in an error's chain of causes.
pub fn find_prohibited<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a Prohibited> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(p) = e.downcast_ref::<Prohibited>() {
            return Some(p);
        }
        if let Some(GuardError::Prohibited(p)) = e.downcast_ref::<GuardError>() {
            return Some(p);
        }
        source = e.source();
    }
    None
}

#[cfg(test)]
mod tests;
