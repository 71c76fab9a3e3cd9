//! Telling systemd about the service's state (`sd_notify`), for `Type=notify` units: when it
//! is ready, what it is doing, when it is stopping.
//!
//! The protocol is one datagram of `KEY=VALUE` lines to the `AF_UNIX` socket named by
//! `NOTIFY_SOCKET` (a path, or an abstract name written with a leading `@`). Written here with
//! the standard library rather than libsystemd, so the crate needs no C library and no unsafe
//! code. Without `NOTIFY_SOCKET` (not under systemd) nothing is sent.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixDatagram;

/// The environment variable systemd sets for `Type=notify` services.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";

/// Sends `state` (`READY=1`, `STATUS=…`, `STOPPING=1`, lines joined with `\n`) to the socket in
/// `NOTIFY_SOCKET`. `Ok(false)` when the variable is not set.
pub fn notify(state: &str) -> io::Result<bool> {
    match std::env::var_os(NOTIFY_SOCKET) {
        Some(socket) if !socket.is_empty() => notify_to(&socket, state).map(|()| true),
        _ => Ok(false),
    }
}

/// Sends `state` to the notification socket `socket` (a path, or `@name` for an abstract one).
pub fn notify_to(socket: &OsStr, state: &str) -> io::Result<()> {
    let sender = UnixDatagram::unbound()?;
    let name = socket.as_bytes();
    let sent = if let Some(abstract_name) = name.strip_prefix(b"@") {
        send_abstract(&sender, abstract_name, state)?
    } else {
        sender.send_to(state.as_bytes(), socket)?
    };
    if sent != state.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("sent {sent} of {} bytes to {}", state.len(), socket.to_string_lossy()),
        ));
    }
    Ok(())
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn send_abstract(sender: &UnixDatagram, name: &[u8], state: &str) -> io::Result<usize> {
    #[cfg(target_os = "android")]
    use std::os::android::net::SocketAddrExt;
    #[cfg(target_os = "linux")]
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
    sender.send_to_addr(state.as_bytes(), &addr)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn send_abstract(_: &UnixDatagram, _: &[u8], _: &str) -> io::Result<usize> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "abstract sockets exist on Linux only"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_one_datagram_to_a_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let receiver = UnixDatagram::bind(&path).unwrap();
        notify_to(path.as_os_str(), "READY=1\nSTATUS=serving").unwrap();
        let mut buf = [0u8; 64];
        let n = receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=serving");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn sends_to_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("robots-proxy-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let receiver = UnixDatagram::bind_addr(&addr).unwrap();
        notify_to(OsStr::new(&format!("@{name}")), "STOPPING=1").unwrap();
        let mut buf = [0u8; 64];
        let n = receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");
    }

    #[test]
    fn a_missing_socket_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = notify_to(dir.path().join("none.sock").as_os_str(), "READY=1").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
