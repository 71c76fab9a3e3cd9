//! The byte relay of a CONNECT tunnel that is not intercepted (`https.mode = "tunnel"`): both
//! ways at once, until both sides are done or nothing moved either way for
//! `https.tunnel_idle_timeout`.
//!
//! * A client of the plain listener is a TCP socket under hyper's `Upgraded`: on Linux the bytes
//!   go socket → pipe → socket with `splice(2)` and never enter user space ([`splice`]); the
//!   bytes hyper had read already after the CONNECT head go upstream first.
//! * Anything else (a client of the TLS listener, an HTTP/2 CONNECT stream, another system, or
//!   no pipe to be had) is copied through two buffers by tokio's `copy_bidirectional`.
//!
//! Either way one side's end of stream shuts down the other side's sending half and the other
//! direction goes on until it ends too (half-close); an error on either side ends both. The
//! idle limit is one timer, pushed back only when it fires and something moved since. A client
//! that reads nothing while the relay has bytes for it is disconnected after
//! `limits.client_write_timeout`, as on every client connection.

use std::time::Duration;

use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use robots_proxy_net::limits::{Activity, ClientIo, WatchedIo};

#[cfg(target_os = "linux")]
mod splice;

/// Each direction's buffer on the copying path. tokio's default is 8 KiB; a TLS record is up
/// to 16 KiB, and a bulk transfer makes a quarter of the system calls with 64 KiB.
const BUFFER: usize = 64 * 1024;

/// Relays between the client's upgraded connection and `upstream` until both are done, or
/// nothing moved for `idle`.
pub(super) async fn relay(upgraded: Upgraded, mut upstream: TcpStream, idle: Duration) {
    let parts = match upgraded.downcast::<TokioIo<ClientIo>>() {
        Ok(parts) => parts,
        Err(upgraded) => return copying(TokioIo::new(upgraded), upstream, idle).await,
    };
    let client = parts.io.into_inner();
    // What the client sent after the CONNECT head, read by hyper with it: first, in order.
    if !parts.read_buf.is_empty() {
        match tokio::time::timeout(idle, upstream.write_all(&parts.read_buf)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return tracing::debug!(error = %e, "tunnel: writing upstream failed"),
            Err(_) => return tracing::debug!("tunnel: upstream read nothing; idle limit reached"),
        }
    }
    #[cfg(target_os = "linux")]
    let client = match splice::Pipes::new() {
        Ok(pipes) => return splice::relay(client, upstream, pipes, idle).await,
        Err(e) => {
            tracing::debug!(error = %e, "tunnel: no pipe for splice(2); copying instead");
            client
        }
    };
    copying(client, upstream, idle).await
}

/// The portable relay: tokio's `copy_bidirectional`, with the idle limit.
async fn copying<A>(client: A, mut upstream: TcpStream, idle: Duration)
where
    A: AsyncRead + AsyncWrite + Unpin,
{
    let activity = Activity::new();
    // The client side: upstream bytes are the same bytes, written or read there too.
    let mut client = WatchedIo::both_ways(client, &activity);
    let copy = tokio::io::copy_bidirectional_with_sizes(&mut client, &mut upstream, BUFFER, BUFFER);
    tokio::select! {
        copied = copy => if let Err(e) = copied {
            tracing::debug!(error = %e, "tunnel ended with an error");
        },
        () = activity.quiet(idle) => tracing::debug!("tunnel closed: idle limit reached"),
    }
}
