//! The Linux relay: each direction moves its bytes socket → pipe → socket with `splice(2)`, so
//! they stay in the kernel (no copy into and out of a user-space buffer). The calls are
//! rustix's safe wrappers; the sockets stay registered with tokio, whose readiness says when
//! to try.
//!
//! A direction fills its pipe only when the pipe is empty. So a `splice` from the socket that
//! would block can only mean the socket has nothing (not that the pipe is full), and clearing
//! the socket's readiness then is right.

use std::future::{poll_fn, Future};
use std::io;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use rustix::pipe::{pipe_with, PipeFlags, SpliceFlags};
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::time::Sleep;

use robots_proxy_net::limits::{Activity, ClientIo};

/// Most bytes one `splice` from a socket moves: the default pipe size (16 pages).
const CHUNK: usize = 64 * 1024;

const FLAGS: SpliceFlags = SpliceFlags::MOVE.union(SpliceFlags::NONBLOCK);

/// One pipe per direction: two more file descriptors each, for as long as the tunnel lives.
pub(super) struct Pipes {
    up: Pipe,
    down: Pipe,
}

struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        let (read, write) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        Ok(Pipe { read, write })
    }
}

impl Pipes {
    /// Two pipes, or the error (typically no file descriptor left).
    pub(super) fn new() -> io::Result<Pipes> {
        Ok(Pipes { up: Pipe::new()?, down: Pipe::new()? })
    }
}

/// Relays between `client` and `upstream` through `pipes` until both directions are done, one
/// fails, or nothing moved for `idle`.
pub(super) async fn relay(client: ClientIo, upstream: TcpStream, pipes: Pipes, idle: Duration) {
    let activity = Activity::new();
    let mut up = Direction::new(pipes.up, None);
    // Writes to the client are bounded as on every client connection.
    let mut down = Direction::new(pipes.down, Some(client.write_timeout()));
    let (c, u) = (client.get_ref(), &upstream);
    let both = poll_fn(|cx| {
        let to_upstream = up.poll_pump(cx, c, u, &activity);
        let to_client = down.poll_pump(cx, u, c, &activity);
        match (to_upstream, to_client) {
            (Poll::Ready(Err(e)), _) | (_, Poll::Ready(Err(e))) => Poll::Ready(Err(e)),
            (Poll::Ready(Ok(())), Poll::Ready(Ok(()))) => Poll::Ready(Ok(())),
            _ => Poll::Pending,
        }
    });
    tokio::select! {
        relayed = both => if let Err(e) = relayed {
            tracing::debug!(error = %e, "tunnel ended with an error");
        },
        () = activity.quiet(idle) => tracing::debug!("tunnel closed: idle limit reached"),
    }
}

/// One direction of the relay: from a source socket, through its pipe, to a destination.
struct Direction {
    pipe: Pipe,
    /// Bytes in the pipe, read from the source and not yet written.
    in_pipe: usize,
    /// The source has ended.
    eof: bool,
    /// The destination's sending half is shut down: this direction is done.
    done: bool,
    /// How long a write may wait for the destination (`limits.client_write_timeout` toward the
    /// client), and its timer, armed while a write waits.
    write_timeout: Option<Duration>,
    stall: Option<Pin<Box<Sleep>>>,
    stalled: bool,
}

impl Direction {
    fn new(pipe: Pipe, write_timeout: Option<Duration>) -> Self {
        Direction {
            pipe,
            in_pipe: 0,
            eof: false,
            done: false,
            write_timeout,
            stall: None,
            stalled: false,
        }
    }

    /// Moves what can be moved now; `Ready(Ok)` once the source ended and everything it sent
    /// was written, and the destination's sending half is shut down.
    fn poll_pump(
        &mut self,
        cx: &mut Context<'_>,
        src: &TcpStream,
        dst: &TcpStream,
        activity: &Activity,
    ) -> Poll<io::Result<()>> {
        if self.done {
            return Poll::Ready(Ok(()));
        }
        loop {
            if self.in_pipe == 0 {
                if self.eof {
                    // Half-close: the other direction goes on. A peer that is gone already
                    // makes this fail, which changes nothing.
                    let _ = rustix::net::shutdown(dst, rustix::net::Shutdown::Write);
                    self.done = true;
                    return Poll::Ready(Ok(()));
                }
                ready!(src.poll_read_ready(cx))?;
                let pipe = &self.pipe.write;
                let fill = || -> io::Result<usize> {
                    Ok(rustix::pipe::splice(src, None, pipe, None, CHUNK, FLAGS)?)
                };
                match src.try_io(Interest::READABLE, fill) {
                    Ok(0) => self.eof = true,
                    Ok(n) => {
                        self.in_pipe = n;
                        activity.touch();
                    }
                    // Readiness cleared: the next poll registers for more.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Poll::Ready(Err(e)),
                }
                continue;
            }
            match dst.poll_write_ready(cx) {
                Poll::Ready(r) => r?,
                Poll::Pending => return self.poll_stall(cx),
            }
            let len = self.in_pipe;
            let pipe = &self.pipe.read;
            let drain = || -> io::Result<usize> {
                Ok(rustix::pipe::splice(pipe, None, dst, None, len, FLAGS)?)
            };
            match dst.try_io(Interest::WRITABLE, drain) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    self.in_pipe -= n;
                    self.stalled = false;
                    activity.touch();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// The destination cannot take more now: `Pending`, or the write timeout's error once it
    /// has waited that long since it last took something.
    fn poll_stall(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(timeout) = self.write_timeout else { return Poll::Pending };
        let deadline = tokio::time::Instant::now() + timeout;
        let timer = self.stall.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if !self.stalled {
            self.stalled = true;
            timer.as_mut().reset(deadline);
        }
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client read nothing for {} (limits.client_write_timeout)",
                    humantime::format_duration(timeout)
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}
