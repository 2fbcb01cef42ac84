//! `Guarded`: a client connection's socket with an idle deadline, JSON bodies on the
//! error responses hyper writes by itself, and a lingering close after an answer given
//! before the request was read whole.
//!
//! hyper answers a request head it cannot parse (bad request line, bad or duplicate
//! `Content-Length`, a URI over 65,534 bytes, too many or too large headers) without
//! calling the service: `400`, `414` or `431` with an empty body and no `Content-Type`,
//! then closes the connection. It offers no hook for that response, so `Guarded`
//! recognises it in the bytes written: the endpoint's own responses always carry a
//! `Content-Type`, while hyper's own is a bare 4xx head with `content-length: 0` at the
//! end of its last write (hyper is told not to use vectored writes, so a write holds
//! all the bytes hyper has buffered). That head is replaced with the same status and a
//! JSON body `{"error": ...}`.
//!
//! Those answers, and a 413 for a body over the limit, come before the request has been
//! read whole, and the connection closes after them. Closing a socket with unread bytes
//! makes the kernel send a reset: the client, still sending, fails with "broken pipe" or
//! "connection reset" and never reads the answer (ureq did, for a 2 MiB body). So such a
//! connection [lingers](Linger): after the answer and the FIN, what the client still
//! sends is read and dropped until it closes, for [`LINGER`] at most (nginx's
//! `lingering_close`).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// The longest a connection lingers after the answer (module doc).
pub(super) const LINGER: Duration = Duration::from_secs(2);
/// Reads of a lingering connection per poll, before it yields to other tasks.
const LINGER_READS_PER_POLL: usize = 32;

/// Whether the connection lingers when it closes: set when it answered before reading the
/// request whole.
#[derive(Clone, Default)]
pub(super) struct Linger(Arc<AtomicBool>);

impl Linger {
    pub(super) fn set(&self) {
        self.0.store(true, Ordering::Release);
    }

    fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// How many requests of one connection are in the endpoint (their body being read or
/// their answer being computed): the idle deadline does not run meanwhile.
#[derive(Clone, Default)]
pub(super) struct InFlight(Arc<AtomicUsize>);

/// One request in the endpoint; dropped when its response is ready.
pub(super) struct Handling(Arc<AtomicUsize>);

impl InFlight {
    pub(super) fn start(&self) -> Handling {
        self.0.fetch_add(1, Ordering::AcqRel);
        Handling(self.0.clone())
    }

    fn idle(&self) -> bool {
        self.0.load(Ordering::Acquire) == 0
    }
}

impl Drop for Handling {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

pub(super) struct Guarded<S> {
    socket: S,
    idle_timeout: Duration,
    in_flight: InFlight,
    /// When a byte last moved either way.
    last_activity: Instant,
    deadline: Pin<Box<Sleep>>,
    /// A rewritten error response not yet written to the socket.
    pending: Vec<u8>,
    linger: Linger,
    /// The write side is shut down (the FIN sent); lingering, if at all, since.
    shut: bool,
}

impl<S> Guarded<S> {
    pub(super) fn new(
        socket: S,
        idle_timeout: Duration,
        in_flight: InFlight,
        linger: Linger,
    ) -> Guarded<S> {
        let now = Instant::now();
        Guarded {
            socket,
            idle_timeout,
            in_flight,
            last_activity: now,
            deadline: Box::pin(tokio::time::sleep_until(now + idle_timeout)),
            pending: Vec::new(),
            linger,
            shut: false,
        }
    }

    /// `Err` once the connection has been idle too long; otherwise registers the waker.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if !self.in_flight.idle() {
            return Ok(());
        }
        let deadline = self.last_activity + self.idle_timeout;
        if self.deadline.deadline() != deadline {
            self.deadline.as_mut().reset(deadline);
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection idle too long",
            )),
            Poll::Pending => Ok(()),
        }
    }
}

impl<S: AsyncWrite + Unpin> Guarded<S> {
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.pending.is_empty() {
            let written = ready!(Pin::new(&mut self.socket).poll_write(cx, &self.pending))?;
            if written == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.pending.drain(..written);
            self.last_activity = Instant::now();
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.socket).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.last_activity = Instant::now();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => match this.poll_idle(cx) {
                Ok(()) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e)),
            },
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        if let Some(start) = automatic_error_head(buf) {
            this.pending.extend_from_slice(&buf[..start]);
            this.pending
                .extend_from_slice(&json_error_response(&buf[start..]));
            this.linger.set();
            // Written on this call or the flush that follows; hyper sees it all taken.
            if let Poll::Ready(Err(e)) = this.poll_pending(cx) {
                return Poll::Ready(Err(e));
            }
            return Poll::Ready(Ok(buf.len()));
        }
        match Pin::new(&mut this.socket).poll_write(cx, buf) {
            Poll::Ready(Ok(written)) => {
                this.last_activity = Instant::now();
                Poll::Ready(Ok(written))
            }
            // A client that takes no byte of its answer for the idle timeout is gone.
            Poll::Pending => match this.poll_idle(cx) {
                Ok(()) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e)),
            },
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.socket).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.shut {
            ready!(this.poll_pending(cx))?;
            ready!(Pin::new(&mut this.socket).poll_shutdown(cx))?;
            this.shut = true;
            if !this.linger.is_set() {
                return Poll::Ready(Ok(()));
            }
            this.deadline.as_mut().reset(Instant::now() + LINGER);
        }
        this.poll_linger(cx)
    }
}

impl<S: AsyncRead + Unpin> Guarded<S> {
    /// Reads and drops what the client still sends, until it closes (or fails) or the
    /// lingering deadline passes; the connection is then closed without a reset.
    fn poll_linger(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut scratch = [0u8; 8192];
        for _ in 0..LINGER_READS_PER_POLL {
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut self.socket).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                Poll::Pending => {
                    return match self.deadline.as_mut().poll(cx) {
                        Poll::Ready(()) => Poll::Ready(Ok(())),
                        Poll::Pending => Poll::Pending,
                    };
                }
            }
        }
        if self.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Ok(()));
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Where hyper's own error response starts in `written`, if `written` ends with one: an
/// `HTTP/1.x 4xx` head, last in the buffer, with `content-length: 0` and no
/// `content-type`.
fn automatic_error_head(written: &[u8]) -> Option<usize> {
    if !written.ends_with(b"\r\n\r\n") {
        return None;
    }
    let head_end = written.len() - 4;
    // The head has no blank line inside; it starts at the last status line after the
    // previous message's head (whose body, if any, comes before it).
    let after = written[..head_end]
        .windows(4)
        .rposition(|w| w == b"\r\n\r\n")
        .map_or(0, |i| i + 4);
    let start = after
        + written[after..head_end]
            .windows(7)
            .rposition(|w| w == b"HTTP/1.")?;
    let head = &written[start..];
    if head.len() < 13 || head[9] != b'4' {
        return None;
    }
    let lower = head.to_ascii_lowercase();
    let has = |needle: &[u8]| lower.windows(needle.len()).any(|w| w == needle);
    (has(b"\r\ncontent-length: 0\r\n") && !has(b"\r\ncontent-type:")).then_some(start)
}

/// The JSON response replacing hyper's bare error head (same status line).
fn json_error_response(head: &[u8]) -> Vec<u8> {
    let status_line = head
        .split(|&b| b == b'\n')
        .next()
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .unwrap_or_default();
    let code = status_line.get(9..12).unwrap_or_default();
    let text = match code {
        b"414" => "URI too long",
        b"431" => "Request header fields too large",
        _ => "Bad request",
    };
    let body = serde_json::json!({ "error": text }).to_string();
    let mut out = Vec::with_capacity(status_line.len() + body.len() + 128);
    out.extend_from_slice(status_line);
    out.extend_from_slice(
        format!(
            "\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    out.extend_from_slice(body.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYPER_400: &[u8] =
        b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: Sun, 22 Nov 2026 10:00:00 GMT\r\n\r\n";

    #[test]
    fn a_bare_error_head_from_hyper_is_recognised() {
        assert_eq!(automatic_error_head(HYPER_400), Some(0));
    }

    #[test]
    fn a_bare_error_head_after_an_earlier_response_is_recognised_at_its_start() {
        let earlier =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
        let written = [&earlier[..], HYPER_400].concat();
        assert_eq!(automatic_error_head(&written), Some(earlier.len()));
    }

    #[test]
    fn the_endpoints_own_json_errors_are_left_alone() {
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(automatic_error_head(ours), None);
        let body_last =
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 21\r\n\r\n{\"error\":\"Not found\"}";
        assert_eq!(automatic_error_head(body_last), None);
        let continue_head = b"HTTP/1.1 100 Continue\r\n\r\n";
        assert_eq!(automatic_error_head(continue_head), None);
    }

    #[test]
    fn the_replacement_keeps_the_status_and_carries_the_json_error() {
        let head = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n";
        let out = String::from_utf8(json_error_response(head)).unwrap();
        assert_eq!(
            out,
            "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json; charset=utf-8\r\n\
             content-length: 43\r\nconnection: close\r\n\r\n{\"error\":\"Request header fields too large\"}"
        );
    }
}
