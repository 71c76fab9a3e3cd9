//! The proxy's own listen addresses, which are never a destination.
//!
//! A request to the proxy listener would loop; one to the admin listener would reach endpoints
//! that have no authentication (the audit summary, cache purges). So an address is refused
//! when a connection to it would arrive at one of this process's listeners:
//!
//! * the listener's own address and port;
//! * for a listener on a wildcard address (`0.0.0.0`, `[::]`): any loopback address
//!   (`127.0.0.0/8`, `::1`) and every address of a local interface, with that port;
//! * the unspecified address (`0.0.0.0`, `::`) with the port of any listener: connecting there
//!   reaches the local host.
//!
//! The interface addresses are asked from the system (`if-addrs`) when a destination has the
//! port of a wildcard listener, and kept for [`INTERFACES_TTL`], so that an address added to an
//! interface after start is recognised too.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// How long a list of the local interface addresses is used before it is asked for again.
const INTERFACES_TTL: Duration = Duration::from_secs(2);

/// The local interface addresses, or `None` when the system could not list them.
type Interfaces = Option<Arc<[IpAddr]>>;

/// The listen addresses of this process (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct OwnListeners {
    listeners: RwLock<Vec<SocketAddr>>,
    /// The local interface addresses (already [`super::canonical`]), or `None` when they could
    /// not be listed, and when they were asked for: a failure is kept as long as a list, so
    /// that a system that cannot tell (no AF_NETLINK under a systemd sandbox) is not asked on
    /// every request.
    interfaces: Mutex<Option<(Instant, Interfaces)>>,
    /// Whether the failure to list them was logged: once per process, not once per request.
    warned: std::sync::atomic::AtomicBool,
}

impl OwnListeners {
    /// `listeners` as the process's own.
    pub(super) fn new(listeners: &[SocketAddr]) -> Self {
        let own = OwnListeners::default();
        for &addr in listeners {
            own.add(addr);
        }
        own
    }

    /// Adds a listen address (once).
    pub(super) fn add(&self, addr: SocketAddr) {
        let mut listeners = robots_proxy_sync::write(&self.listeners);
        if !listeners.contains(&addr) {
            listeners.push(addr);
        }
    }

    /// The listen addresses known so far.
    pub(super) fn listeners(&self) -> Vec<SocketAddr> {
        robots_proxy_sync::read(&self.listeners).clone()
    }

    /// Whether a connection to `addr` would arrive at one of the listeners.
    pub(super) fn contains(&self, addr: SocketAddr) -> bool {
        let ip = super::canonical(addr.ip());
        let mut wildcard = false;
        {
            let listeners = robots_proxy_sync::read(&self.listeners);
            for listen in listeners.iter().filter(|l| l.port() == addr.port()) {
                let listen_ip = super::canonical(listen.ip());
                if listen_ip == ip || ip.is_unspecified() {
                    return true;
                }
                wildcard |= listen_ip.is_unspecified();
            }
        }
        if !wildcard {
            return false;
        }
        if ip.is_loopback() {
            return true;
        }
        match self.interface_addresses() {
            Some(local) => local.contains(&ip),
            // Not knowing the local addresses, refuse rather than risk reaching the listener.
            None => true,
        }
    }

    /// The local interface addresses, from the last [`INTERFACES_TTL`] or asked for now.
    /// `None` when the system cannot tell.
    fn interface_addresses(&self) -> Option<Arc<[IpAddr]>> {
        let mut cached = robots_proxy_sync::lock(&self.interfaces);
        if let Some((read, addrs)) = cached.as_ref() {
            if read.elapsed() < INTERFACES_TTL {
                return addrs.clone();
            }
        }
        let addrs = match if_addrs::get_if_addrs() {
            Ok(interfaces) => Some(interfaces.iter().map(|i| super::canonical(i.ip())).collect()),
            Err(e) => {
                if !self.warned.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    tracing::warn!(
                        error = %e,
                        "cannot list the local interface addresses (getifaddrs needs AF_NETLINK: \
                         systemd's RestrictAddressFamilies must allow it); destinations on the \
                         port of a wildcard listener are refused (logged once)"
                    );
                }
                None
            }
        };
        *cached = Some((Instant::now(), addrs.clone()));
        addrs
    }
}
