//! The proxy's listeners: the plain one (`proxy.listen`) and the optional TLS one
//! (`proxy.tls_listen`, `https://` proxy URLs). Both admit connections the same way (access
//! list, connection limits), serve them with [`robots_proxy_net::server::serve_connection`] and hand every
//! request to the same pipeline, so whatever holds on one holds on the other.
//!
//! On the TLS listener the framing watch reads the decrypted stream (HTTP/1 only), ALPN picks
//! HTTP/2 or HTTP/1.1, and a verified client certificate (`access.client_ca`) names the user of
//! every request of the connection, as `Proxy-Authorization` does on the plain listener.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request};
use hyper::body::Incoming;
use hyper::service::service_fn;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;

use super::exchange::{answered_before, Phase};
use super::{pipeline, ConnectionMemory, Proxy, Shared};
use robots_proxy_access::AuthenticatedUser;
use robots_proxy_framing::{FramingWatch, Verdict, Verdicts, Watched};
use robots_proxy_net::limits::ClientIo;
use robots_proxy_net::server::{serve_connection, ConnectionTimeouts, Protocol};
use robots_proxy_net::tls::listener::{client_certificate_problem, client_name};

/// The TLS listener for clients (`proxy.tls_listen`) and its server configuration
/// ([`robots_proxy_net::tls::listener::listener_config`]).
pub struct TlsListener {
    /// The bound listener.
    pub listener: TcpListener,
    /// Its certificate, ALPN and client certificate verification: each handshake takes the
    /// one in force, which a reload replaces (the certificate, key and client CA read again).
    pub config: robots_proxy_net::tls::listener::ListenerTls,
}

impl Proxy {
    /// Serves connections from `listener` until `shutdown` completes, then stops accepting and
    /// lets open connections finish their current request for up to `grace`.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
        grace: Duration,
    ) {
        self.serve_with_tls(listener, None, shutdown, grace).await;
    }

    /// [`Proxy::serve`], with the TLS listener too when `tls` is given: both stop accepting
    /// when `shutdown` completes, and their connections share the grace period.
    pub async fn serve_with_tls(
        self,
        listener: TcpListener,
        tls: Option<TlsListener>,
        shutdown: impl Future<Output = ()>,
        grace: Duration,
    ) {
        // Connections watch `Shared::stop` to finish gracefully; each holds a clone of `alive`,
        // so `all_closed` completes when the last one ends. `quit` stops the accept loops.
        let (alive, mut all_closed) = mpsc::channel::<()>(1);
        let (quit, _) = watch::channel(false);
        // safety: a request to one of the proxy's own listeners must never loop back into it.
        for own in std::iter::once(&listener).chain(tls.as_ref().map(|t| &t.listener)) {
            if let Ok(local) = own.local_addr() {
                self.shared.safety.guard.add_own_listener(local);
            }
        }
        self.shared.metrics.set_listening(true);
        let plain = self.accept(listener, None, quit.subscribe(), &alive);
        let secure = async {
            if let Some(TlsListener { listener, config }) = tls {
                self.accept(listener, Some(config), quit.subscribe(), &alive).await;
            }
        };
        let quitting = async {
            shutdown.await;
            let _ = quit.send(true);
        };
        tokio::join!(plain, secure, quitting);
        self.shared.metrics.set_listening(false);
        drop(alive);
        self.shared.stop.send_replace(true);
        tokio::select! {
            _ = all_closed.recv() => tracing::info!("all connections closed"),
            () = tokio::time::sleep(grace) => tracing::warn!("grace period over; closing open connections"),
        }
    }

    /// Accepts connections from `listener` (over TLS with `tls`) until `quit` says so; the
    /// listener is closed when this returns.
    async fn accept(
        &self,
        listener: TcpListener,
        tls: Option<robots_proxy_net::tls::listener::ListenerTls>,
        mut quit: watch::Receiver<bool>,
        alive: &mpsc::Sender<()>,
    ) {
        let quitting = async move { drop(quit.wait_for(|quit| *quit).await) };
        tokio::pin!(quitting);
        loop {
            // safety: limits.max_connections with when_full = "wait" waits here, before accept.
            let slot = tokio::select! {
                slot = self.shared.safety.wait_for_slot() => slot,
                () = &mut quitting => break,
            };
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(conn) => conn,
                    Err(e) => {
                        // Out of file descriptors and the like: wait, don't die.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut quitting => break,
            };
            let _ = stream.set_nodelay(true);
            // What bounds the connection in time: those in force when it is accepted.
            let timeouts = self.shared.live.load().timeouts;
            // safety: access.allow_clients and limits.max_connections; refused ones are closed.
            let watch = tls.is_none();
            let admitted = self.shared.safety.admit(stream, peer, slot, watch, timeouts.write);
            let Some(io) = admitted else { continue };
            // The gauge counts the connection for as long as it holds its slot, through a
            // CONNECT too (review-house D3).
            let io = io.counted_by(self.shared.metrics.connection_opened());
            let shared = self.shared.clone();
            let stopping = self.shared.stopping();
            let alive = alive.clone();
            let tls = tls.clone();
            // Boxed apart, so a plain connection's task has no room for a TLS handshake.
            tokio::spawn(async move {
                let _alive = alive;
                let conn = Accepted { shared, peer, timeouts };
                match tls {
                    None => {
                        let verdicts = io.verdicts();
                        let (protocol, plain) = (Protocol::Http1, Listener::Plain);
                        let serving = serve_client(conn, io, verdicts, protocol, plain, stopping);
                        Box::pin(serving).await;
                    }
                    Some(config) => {
                        // The configuration in force when the client connects.
                        let acceptor = TlsAcceptor::from(config.load_full());
                        Box::pin(serve_tls_client(conn, io, acceptor, stopping)).await;
                    }
                }
            });
        }
    }
}

/// An accepted client connection: who it is and what bounds it in time.
struct Accepted {
    shared: Arc<Shared>,
    peer: SocketAddr,
    /// Those in force when it was accepted, for its whole life.
    timeouts: ConnectionTimeouts,
}

/// A client connection of the TLS listener: the handshake (bounded by
/// [`ConnectionTimeouts::first_bytes`]), the user its certificate names, then HTTP/2 or
/// HTTP/1.1 by ALPN. A handshake that fails for the client certificate is logged at WARN with
/// its cause (the client has had a TLS alert).
async fn serve_tls_client(
    conn: Accepted,
    io: ClientIo,
    acceptor: TlsAcceptor,
    stop: impl Future<Output = ()>,
) {
    let Accepted { ref shared, peer, ref timeouts } = conn;
    let handshake = timeouts.first_bytes(acceptor.accept(io));
    let tls = match handshake.await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            match client_certificate_problem(&e) {
                Some(cause) => tracing::warn!(client = %peer, cause, "TLS client refused"),
                None => {
                    tracing::debug!(client = %peer, error = %e, "TLS handshake with client failed")
                }
            }
            return;
        }
        Err(_) => {
            tracing::debug!(client = %peer, "TLS handshake with client timed out");
            return;
        }
    };
    let session = tls.get_ref().1;
    let protocol = Protocol::from_alpn(session.alpn_protocol());
    // Only verified certificates are here: rustls refused any other in the handshake.
    let user = match session.peer_certificates().and_then(|chain| chain.first()) {
        None => None,
        Some(cert) => match client_name(cert) {
            Some(name) => Some(shared.safety.certified_user(name)),
            None => {
                tracing::warn!(
                    client = %peer,
                    cause = "the client certificate has neither a subject common name nor a DNS \
                             name to name its user",
                    "TLS client refused"
                );
                return;
            }
        },
    };
    // safety: request smuggling checks on the decrypted HTTP/1 stream, as on the plain listener
    // (HTTP/2 frames its messages itself and forbids Transfer-Encoding).
    let max_head = shared.safety.limits.max_header_bytes();
    let watch = (protocol != Protocol::Http2).then(|| FramingWatch::new(max_head));
    let io = Watched::new(tls, watch);
    let verdicts = io.verdicts();
    serve_client(conn, io, verdicts, protocol, Listener::Tls(user), stop).await;
}

/// Which listener a client connection came through.
enum Listener {
    /// `proxy.listen`.
    Plain,
    /// `proxy.tls_listen`, with the user a verified client certificate named, if any.
    Tls(Option<Arc<AuthenticatedUser>>),
}

/// A client connection of a proxy listener, as its requests see it.
struct Connection {
    shared: Arc<Shared>,
    peer: SocketAddr,
    memory: ConnectionMemory,
    /// The framing watch's verdicts on its request heads (see `robots_proxy_framing`).
    verdicts: Verdicts,
    /// The user a verified client certificate named (TLS listener), for every request.
    user: Option<Arc<AuthenticatedUser>>,
}

/// Serves one client connection of a proxy listener: every request is checked for smuggling
/// and the request-target limit, then handled (`pipeline::handle`).
async fn serve_client<I>(
    conn: Accepted,
    io: I,
    verdicts: Verdicts,
    protocol: Protocol,
    listener: Listener,
    stop: impl Future<Output = ()>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Accepted { shared, peer, timeouts } = conn;
    let settings = shared.http.with_upgrades();
    let (user, over_tls) = match listener {
        Listener::Plain => (None, false),
        Listener::Tls(user) => (user, true),
    };
    // safety: with a users file, a connection that proves no user within limits.auth_timeout
    // is closed, so connections that never authenticate give their slot back soon.
    let deadline = shared.safety.auth_deadline(user.is_some());
    let memory = ConnectionMemory { over_tls, ..ConnectionMemory::default() };
    // One per connection: cloning it for each request touches only this connection's
    // counter, not one that every connection shares.
    let connection = Arc::new(Connection { shared, peer, memory, verdicts, user });
    let watching = connection.clone();
    let unauthenticated = async move {
        let Some(deadline) = deadline else { return std::future::pending().await };
        tokio::select! {
            () = watching.memory.authenticated.notified() => std::future::pending().await,
            () = tokio::time::sleep(deadline) => {}
        }
    };
    let service = service_fn(move |mut req: Request<Incoming>| {
        let connection = connection.clone();
        // safety: request smuggling checks, one verdict per HTTP/1 request head, in order
        // (HTTP/2 frames its messages itself and forbids Transfer-Encoding).
        let verdict = if req.version() < http::Version::HTTP_2 {
            connection.verdicts.next()
        } else {
            Verdict::Clean
        };
        if let Some(user) = &connection.user {
            req.extensions_mut().insert(user.clone());
        }
        async move {
            let Connection { shared, peer, memory, verdicts, .. } = &*connection;
            if let Some(refused) = shared.safety.check_request(*peer, &req, verdict) {
                return Ok::<_, Infallible>(answered_before(Phase::Admit, refused));
            }
            let connect = req.method() == Method::CONNECT;
            // Boxed: hyper keeps the service's future in the connection for as long
            // as the connection lives, idle or not, and moves it on every request;
            // a pointer is cheaper to move and to keep than the whole request state.
            // One exchange: it reads the reloadable state once.
            let handling =
                Box::pin(super::exchange_scope(pipeline::handle(shared, memory, *peer, req)));
            let resp = handling.await;
            if connect {
                // safety: a refused CONNECT leaves the connection in HTTP/1.1.
                verdicts.connect_answered(resp.status().is_success());
            }
            Ok::<_, Infallible>(resp)
        }
    });
    let serving = serve_connection(io, protocol, &settings, &timeouts, service, stop);
    tokio::select! {
        served = serving => if let Err(e) = served {
            tracing::debug!(client = %peer, error = %e, "client connection ended with an error");
        },
        () = unauthenticated => tracing::info!(
            client = %peer,
            "connection closed: no request with valid credentials within limits.auth_timeout"
        ),
    }
}
