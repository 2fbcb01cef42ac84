//! The HTTP/1.1 server under the API: accept loop, connection cap, timeouts, and a JSON
//! body for every error, including those hyper answers by itself.
//!
//! poem 3.1.12's `Server` reads a request head with no deadline (it builds hyper without a
//! timer, and hyper then turns its header timeout off), reads bodies with none, caps no
//! connections, and retries a failing `accept` in a busy loop: 1,100 half-sent requests
//! under a 1,024-descriptor limit held a core at 100 % and starved real requests. So the
//! accept loop is ours, driving hyper's http1 connection with poem's endpoint:
//!
//! - **Threads**: one per core, each running its own single-threaded runtime and accepting
//!   from the one listening socket; a connection is served whole on the thread that
//!   accepted it ([`run`]).
//! - **Connection cap** ([`Limits::max_connections`]): a semaphore taken before `accept`,
//!   kept below the open-files limit. At the cap the loop stops accepting; new
//!   connections wait in the kernel's backlog until a slot frees (at the latest when the
//!   slow connections holding the slots time out), instead of failing with `EMFILE`.
//! - **Request head**: complete within [`Limits::header_timeout`] of the connection
//!   opening or of the previous response (hyper's `header_read_timeout`, with a timer).
//! - **Keep-alive idle**: no byte read or written for [`Limits::idle_timeout`] while no
//!   request is being handled closes the connection (`connection::Guarded`).
//! - **Body**: read whole, within [`Limits::body_timeout`], before the endpoint runs; a
//!   declared `Content-Length` over 1 MiB answers 413 at once, before any body byte.
//! - **Errors**: hyper answers a malformed head itself (400, 414, 431) with an empty
//!   body; `connection::Guarded` replaces those responses with the JSON error shape.
//!   After those and a 413, the connection lingers (reads and drops what the client
//!   still sends, 2 s at most) so that the client gets the answer, not a reset.
//! - **Compression**: every answer leaves through `gzip::encode`: over 1 KiB and to a
//!   client whose `Accept-Encoding` admits it, gzip-encoded (`gzip`: the rules).
//!
//! HTTP/2 is not served (poem's server offered h2c with prior knowledge); every client of
//! the contract speaks HTTP/1.1.

mod connection;
pub(crate) mod gzip;

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use poem::http::{HeaderValue, StatusCode, header};
use poem::listener::{Acceptor, TcpAcceptor};
use poem::web::{LocalAddr, RemoteAddr};
use poem::{Endpoint, Request, Response};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

use super::contract::MAX_BODY_BYTES;
use super::hot::{self, Hot};
use super::json_error;
use connection::{Guarded, InFlight, Linger};

/// Descriptors kept for everything but client connections: SQLite (two pools and the
/// billing writer, each connection holding the database and its WAL), the listener,
/// the caller runtime's epoll and event fds, stdio; each serving thread takes 8 more.
const RESERVED_FDS: u64 = 128;
/// The cap when the open-files limit is high: each connection costs buffers and a task.
const MAX_CONNECTIONS: usize = 4096;
/// Largest request head hyper buffers (its default is about 400 KiB); URIs up to hyper's
/// 65,534-byte limit fit, so a long path is still a 414 and not a 431.
const MAX_HEAD_BYTES: usize = 80 * 1024;

/// The server's timeouts and caps.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Open connections at most; more wait in the kernel's accept backlog.
    pub max_connections: usize,
    /// A request head must be complete this long after the connection opened or the
    /// previous response was sent.
    pub header_timeout: Duration,
    /// A request body must be complete this long after its head.
    pub body_timeout: Duration,
    /// A connection with no request in hand and no byte moving for this long is closed.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    /// 10 s for a head or a body, 5 s idle, and as many connections as the open-files
    /// limit leaves room for (4,096 at most): 880 under the usual 1,024 on two cores.
    fn default() -> Limits {
        let open_files = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .unwrap_or(u64::MAX);
        // Each serving thread holds a copy of the listener and its runtime's epoll and
        // event descriptors.
        let reserved = RESERVED_FDS + 8 * serving_threads() as u64;
        let room = open_files.saturating_sub(reserved).max(16);
        Limits {
            max_connections: usize::try_from(room)
                .map_or(MAX_CONNECTIONS, |room| room.min(MAX_CONNECTIONS)),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(5),
        }
    }
}

/// Serves `app` on `listener` until `shutdown` completes, then lets open requests finish
/// for `grace` at most.
///
/// One thread per core serves connections, each on a single-threaded runtime of its own
/// that accepts from the one listening socket (nginx's design): a connection lives on the
/// thread that accepted it, so a request wakes no other thread, and no task moves between
/// threads (tokio's shared scheduler did both, measured in issue 37). A thread busy with a
/// long answer does not accept; the idle one does. The cost: that long answer (a bulk of
/// 1,000) holds the other connections of its thread meanwhile (lookups' p99 beside a
/// stream of nearest-bulk requests was no worse than before, docs/performance.md). One
/// socket shared, not one per thread with `SO_REUSEPORT`: that would let a second server
/// bind the same port unnoticed. The caller's runtime keeps the background work
/// (billing, the loader, timers, blocking work: [`background`]); `run` ends with an
/// error when a serving thread cannot start or ends before it is told to.
pub async fn run<E: Endpoint + 'static>(
    listener: std::net::TcpListener,
    app: E,
    hot: Option<Hot>,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) -> io::Result<()> {
    let shared = Arc::new(Shared {
        app,
        hot,
        slots: Arc::new(Semaphore::new(limits.max_connections)),
        at_cap_logged: std::sync::atomic::AtomicBool::new(false),
        limits,
        grace,
    });
    let (stop, stopping) = watch::channel(false);
    let workers = serving_threads();
    tracing::info!(
        "{workers} serving threads; at most {} connections; head {:?}, body {:?}, idle {:?}",
        limits.max_connections,
        limits.header_timeout,
        limits.body_timeout,
        limits.idle_timeout
    );
    // A blocking listener would hold a serving thread in `accept` for good.
    listener.set_nonblocking(true)?;
    let background = tokio::runtime::Handle::current();
    let mut finished = Vec::with_capacity(workers);
    let mut started = Ok(());
    for i in 0..workers {
        let serving = listener.try_clone().and_then(|listener| {
            let (shared, stopping) = (shared.clone(), stopping.clone());
            let background = background.clone();
            let (ready, readiness) = tokio::sync::oneshot::channel::<io::Result<()>>();
            let (done, finish) = tokio::sync::oneshot::channel::<()>();
            std::thread::Builder::new()
                .name(format!("serve-{i}"))
                .spawn(move || serve_thread(listener, shared, stopping, background, ready, done))?;
            Ok((readiness, finish))
        });
        let (readiness, finish) = match serving {
            Ok(serving) => serving,
            Err(e) => {
                started = Err(e);
                break;
            }
        };
        finished.push(finish);
        if let Err(e) = readiness
            .await
            .unwrap_or_else(|_| Err(io::Error::other("panicked")))
        {
            started = Err(e);
            break;
        }
    }
    drop(listener);
    let ended = match started {
        Err(e) => Err(io::Error::other(format!("starting a serving thread: {e}"))),
        Ok(()) => {
            // A serving thread ends only when told to; one that ends before (a panic)
            // stops the server, which its supervisor restarts whole.
            tokio::pin!(shutdown);
            tokio::select! {
                _ = &mut shutdown => Ok(()),
                _ = futures_util::future::select_all(finished.iter_mut()) => {
                    Err(io::Error::other("a serving thread ended unexpectedly"))
                }
            }
        }
    };
    let _ = stop.send(true);
    for finish in finished {
        // An error is a thread that panicked: the others are still awaited.
        let _ = finish.await;
    }
    ended
}

/// How many threads serve connections: one per core this process may run on.
fn serving_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// A serving thread's life: its runtime built (`ready` says whether it could be), its
/// accept loop run to the end, then `done`.
fn serve_thread<E: Endpoint + 'static>(
    listener: std::net::TcpListener,
    shared: Arc<Shared<E>>,
    stopping: watch::Receiver<bool>,
    background: tokio::runtime::Handle,
    ready: tokio::sync::oneshot::Sender<io::Result<()>>,
    done: tokio::sync::oneshot::Sender<()>,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .and_then(|runtime| {
            // Registered with this thread's runtime, so that its events wake this thread.
            let acceptor = runtime.block_on(async { TcpAcceptor::from_std(listener) })?;
            Ok((runtime, acceptor))
        });
    let (runtime, acceptor) = match runtime {
        Ok(started) => started,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    BACKGROUND.with(|b| *b.borrow_mut() = Some(background));
    let _ = ready.send(Ok(()));
    runtime.block_on(accept_loop(acceptor, shared, stopping));
    let _ = done.send(());
}

thread_local! {
    /// On a serving thread, the runtime of `run`'s caller.
    static BACKGROUND: std::cell::RefCell<Option<tokio::runtime::Handle>> =
        const { std::cell::RefCell::new(None) };
}

/// The runtime that blocking work and work outliving a request run on: the caller's of
/// [`run`] (its blocking pool sized to SQLite's read pool, its workers driving what a
/// blocking task awaits), whichever thread asks; elsewhere the current one. A serving
/// thread's own runtime would give each thread a pool of its own, and stop driving a
/// task's I/O when the thread stops serving.
pub(crate) fn background() -> tokio::runtime::Handle {
    BACKGROUND
        .with(|b| b.borrow().clone())
        .unwrap_or_else(tokio::runtime::Handle::current)
}

/// `f` on the blocking pool of [`background`]'s runtime.
pub(crate) fn spawn_blocking<F, R>(f: F) -> tokio::task::JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    background().spawn_blocking(f)
}

/// What every serving thread shares.
struct Shared<E> {
    app: E,
    hot: Option<Hot>,
    /// One permit per open connection, over all threads.
    slots: Arc<Semaphore>,
    at_cap_logged: std::sync::atomic::AtomicBool,
    limits: Limits,
    grace: Duration,
}

/// One serving thread: accepts until `stopping`, serves what it accepted, then lets its
/// open requests finish for `grace` at most.
async fn accept_loop<E: Endpoint + 'static>(
    mut acceptor: TcpAcceptor,
    shared: Arc<Shared<E>>,
    stopping: watch::Receiver<bool>,
) {
    use std::sync::atomic::Ordering::Relaxed;
    let limits = shared.limits;
    let mut connections = JoinSet::new();
    let stop = stopping.clone();
    let stopped = async move {
        let mut stop = stop;
        let _ = stop.wait_for(|stop| *stop).await;
    };
    tokio::pin!(stopped);
    loop {
        while connections.try_join_next().is_some() {}
        let slot = match shared.slots.clone().try_acquire_owned() {
            Ok(slot) => {
                // Written only when set: a line of memory every thread reads.
                if shared.at_cap_logged.load(Relaxed) {
                    shared.at_cap_logged.store(false, Relaxed);
                }
                slot
            }
            Err(_) => {
                if !shared.at_cap_logged.swap(true, Relaxed) {
                    tracing::warn!(
                        "{} connections open (the cap): new ones wait in the backlog",
                        limits.max_connections
                    );
                }
                tokio::select! {
                    _ = &mut stopped => break,
                    slot = shared.slots.clone().acquire_owned() => match slot {
                        Ok(slot) => slot,
                        Err(_) => break,
                    },
                }
            }
        };
        let accepted = tokio::select! {
            _ = &mut stopped => break,
            accepted = acceptor.accept() => accepted,
        };
        let (socket, local, remote, _scheme) = match accepted {
            Ok(accepted) => accepted,
            Err(e) if is_out_of_descriptors(&e) => {
                // Something else holds descriptors (an import, a burst of SQLite files):
                // wait for some to close instead of spinning on accept.
                tracing::warn!("accepting a connection: {e}; retrying in 100 ms");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(e) => {
                tracing::debug!("accepting a connection: {e}");
                continue;
            }
        };
        let shared = shared.clone();
        let stopping = stopping.clone();
        connections.spawn(async move {
            serve_connection(socket, local, remote, shared, stopping).await;
            drop(slot);
        });
    }
    drop(acceptor);
    let grace = shared.grace;
    let drained = tokio::time::timeout(grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            "{} connections still open after {grace:?}: closing them",
            connections.len()
        );
        connections.shutdown().await;
    }
}

fn is_out_of_descriptors(e: &io::Error) -> bool {
    let raw = e.raw_os_error();
    raw == Some(rustix::io::Errno::MFILE.raw_os_error())
        || raw == Some(rustix::io::Errno::NFILE.raw_os_error())
}

async fn serve_connection<E: Endpoint + 'static>(
    socket: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    local: LocalAddr,
    remote: RemoteAddr,
    shared: Arc<Shared<E>>,
    mut stopping: watch::Receiver<bool>,
) {
    let limits = shared.limits;
    let in_flight = InFlight::default();
    let linger = Linger::default();
    let io = Guarded::new(
        socket,
        limits.idle_timeout,
        in_flight.clone(),
        linger.clone(),
    );
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let shared = shared.clone();
        let (local, remote) = (local.clone(), remote.clone());
        let handling = in_flight.start();
        let linger = linger.clone();
        let accepts_gzip = gzip::accepts_gzip(request.headers());
        async move {
            let (app, hot) = (&shared.app, shared.hot.as_ref());
            let response = respond(app, hot, request, local, remote, limits).await;
            // Answered before the body was read whole: the client may still be sending it.
            if response.status() == StatusCode::PAYLOAD_TOO_LARGE {
                linger.set();
            }
            let response = gzip::encode(hyper::Response::from(response), accepts_gzip).await;
            drop(handling);
            Ok::<_, Infallible>(response)
        }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEAD_BYTES)
        // One buffer per write, so that `Guarded` sees hyper's own error responses whole.
        .writev(false);
    let connection = http.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => return,
        _ = stopping.wait_for(|stop| *stop) => {}
    }
    connection.as_mut().graceful_shutdown();
    let _ = connection.await;
}

/// One request: the body read whole under its limits, then the endpoint.
async fn respond<E: Endpoint>(
    app: &E,
    hot: Option<&Hot>,
    request: hyper::Request<Incoming>,
    local: LocalAddr,
    remote: RemoteAddr,
    limits: Limits,
) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_BODY_BYTES as u64) {
        return closing(json_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Request body too large",
        ));
    }
    if let Some(hot) = hot
        && let Some(op) = hot::Op::of(request.method(), request.uri().path())
    {
        let (head, body) = request.into_parts();
        let read = tokio::time::timeout(
            limits.body_timeout,
            http_body_util::BodyExt::collect(http_body_util::Limited::new(body, MAX_BODY_BYTES)),
        )
        .await;
        let bytes = match read {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                return body_refused(BodyRefusal::TooLarge);
            }
            Ok(Err(_)) => return body_refused(BodyRefusal::Broken),
            Err(_) => return body_refused(BodyRefusal::Late),
        };
        let peer = remote.as_socket_addr().map(|a| a.ip());
        return match AssertUnwindSafe(boxed(|| hot.answer(op, &head, &bytes, peer)))
            .catch_unwind()
            .await
        {
            Ok(response) => response,
            Err(_) => panicked(),
        };
    }
    let scheme = poem::http::uri::Scheme::HTTP;
    let mut request = Request::from((request, local, remote, scheme));
    let body = request.take_body();
    match tokio::time::timeout(limits.body_timeout, body.into_bytes_limit(MAX_BODY_BYTES)).await {
        Ok(Ok(bytes)) => request.set_body(bytes),
        Ok(Err(poem::error::ReadBodyError::PayloadTooLarge)) => {
            return body_refused(BodyRefusal::TooLarge);
        }
        Ok(Err(_)) => return body_refused(BodyRefusal::Broken),
        Err(_) => return body_refused(BodyRefusal::Late),
    }
    match AssertUnwindSafe(boxed(|| app.get_response(request)))
        .catch_unwind()
        .await
    {
        Ok(response) => response,
        Err(_) => panicked(),
    }
}

/// The future `answer` makes, in a box allocated before it is made (`Box::write`), so
/// that it can be built there rather than moved in. Both answers' futures are boxed: inline, the request's
/// future that hyper moves into its connection was about 12 KB, and whether that move was
/// a copy changed with unrelated code (callgrind, bench/counts.sh: 11,869 instructions of
/// memcpy in hyper's `recv_msg` a request, issue 37). A box is one small allocation.
#[inline(always)]
fn boxed<F: Future>(answer: impl FnOnce() -> F) -> Pin<Box<F>> {
    let slot = Box::new_uninit();
    Box::into_pin(Box::write(slot, answer()))
}

/// Why a request's body was not read whole.
enum BodyRefusal {
    /// Over [`MAX_BODY_BYTES`].
    TooLarge,
    /// The connection failed or the framing was wrong.
    Broken,
    /// Not complete within the body timeout.
    Late,
}

/// The answer to a body not read whole; the connection closes after it.
fn body_refused(why: BodyRefusal) -> Response {
    closing(match why {
        BodyRefusal::TooLarge => {
            json_error(StatusCode::PAYLOAD_TOO_LARGE, "Request body too large")
        }
        BodyRefusal::Broken => json_error(StatusCode::BAD_REQUEST, super::contract::INVALID_JSON),
        BodyRefusal::Late => json_error(
            StatusCode::REQUEST_TIMEOUT,
            "Request body not received in time",
        ),
    })
}

fn panicked() -> Response {
    tracing::error!("internal error: a handler panicked");
    json_error(StatusCode::INTERNAL_SERVER_ERROR, "Internal server error")
}

/// The response, and the connection closed after it (its body was not read whole).
fn closing(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
