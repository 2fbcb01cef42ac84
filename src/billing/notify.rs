//! How a CLI change holds from the next request: the CLI announces its commit to the
//! running server, which reloads accounts and keys before it confirms. And how `postal
//! backup` makes the running server write its charges before it copies the file.
//!
//! The server listens on a Unix socket beside the file (`<db>.serve-notify`). After
//! committing, a CLI command connects, writes one line, and waits for the server's `ok`,
//! sent once the books in memory hold the change (`Billing::reload_now`); so every
//! request that starts after the command returned sees it. The hot path pays nothing
//! (no per-request `PRAGMA data_version` or counter read). Without a server there is no
//! socket and the command returns at once; a change made by other means (an SQL shell)
//! is still noticed by the writer's `PRAGMA data_version` check after every flush.
//!
//! The lines, one per connection: `changed` (answered `ok` once reloaded) and `flush`
//! (answered `ok` once every charge decided before the server read the line is
//! committed, `error <why>` when that flush failed: `Billing::flush_now`); anything else
//! (or more than 64 bytes without a newline) is answered `error unknown request`. A
//! server older than `flush` reloads on any line, which also flushes, and answers `ok`.
//!
//! Who may speak: the socket is created with mode 0600 (bound under a temporary name,
//! made 0600, then renamed into place, so it is never open to others), and the server
//! answers only a peer of its own uid or root (`SO_PEERCRED`); another peer's connection
//! is closed unanswered. The CLI trusts a socket only when the database's owner, the CLI's
//! own user or root owns it and no other user may write it: an impostor socket made first
//! by another user is not told of changes, and `postal backup` refuses it.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use rusqlite::Connection;

use super::Billing;

/// How long a CLI command waits for the server's confirmation.
const CONFIRM_WAIT: Duration = Duration::from_secs(10);

/// `<db>.serve-notify`, from the file's absolute path (the CLI and the server may name
/// the file differently).
pub fn socket_path(db: &Path) -> PathBuf {
    let absolute = std::fs::canonicalize(db).unwrap_or_else(|_| db.to_path_buf());
    let mut name = absolute.into_os_string();
    name.push(".serve-notify");
    PathBuf::from(name)
}

/// The longest request line read (`changed`, `flush`).
const MAX_LINE: u64 = 64;

/// Why the socket beside `db` is not trusted: another user owns it, or others may write
/// it. `None` when it is the database owner's own (or there is none).
fn untrusted(db: &Path, socket: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let (Ok(file), Ok(sock)) = (std::fs::metadata(db), std::fs::symlink_metadata(socket)) else {
        return None;
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let own = unsafe { libc::geteuid() };
    if ![file.uid(), own, 0].contains(&sock.uid()) {
        return Some(format!(
            "its socket {} is owned by uid {}, not by the database's owner (uid {}), \
             this user or root",
            socket.display(),
            sock.uid(),
            file.uid()
        ));
    }
    if sock.mode() & 0o022 != 0 {
        return Some(format!(
            "its socket {} may be written by other users (mode {:o})",
            socket.display(),
            sock.mode() & 0o777
        ));
    }
    None
}

/// Why the server at the other end of `stream` is not trusted: its process runs as another
/// user than the database's owner, this user or root (checked on the connection itself,
/// after the socket file's own check: nothing can be swapped in between).
fn untrusted_peer(db: &Path, stream: &UnixStream) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(db).ok()?.uid();
    // SAFETY: geteuid has no preconditions and cannot fail.
    let own = unsafe { libc::geteuid() };
    match peer_uid(stream) {
        Some(uid) if [owner, own, 0].contains(&uid) => None,
        peer => Some(format!(
            "the process on its socket runs as uid {peer:?}, not as the database's owner \
             (uid {owner}), this user or root"
        )),
    }
}

/// Tells the server running on `conn`'s file (if any) that accounts or keys changed, and
/// waits until it holds the change. Never fails: the change is committed either way.
pub fn announce(conn: &Connection) {
    let Some(db) = conn.path().filter(|p| !p.is_empty()) else {
        return;
    };
    let socket = socket_path(Path::new(db));
    if let Some(why) = untrusted(Path::new(db), &socket) {
        eprintln!(
            "warning: not telling the server of the change: {why}; it holds after its next flush"
        );
        return;
    }
    let Ok(mut stream) = UnixStream::connect(socket) else {
        return; // no server running
    };
    if let Some(why) = untrusted_peer(Path::new(db), &stream) {
        eprintln!(
            "warning: not telling the server of the change: {why}; it holds after its next flush"
        );
        return;
    }
    let _ = stream.set_read_timeout(Some(CONFIRM_WAIT));
    let confirmed = stream.write_all(b"changed\n").is_ok() && {
        let mut line = String::new();
        BufReader::new(&stream).read_line(&mut line).is_ok() && line == "ok\n"
    };
    if !confirmed {
        eprintln!(
            "warning: the running server did not confirm the change; it holds after its next flush"
        );
    }
}

/// What the server running on a file answered to `flush`.
#[derive(Debug, PartialEq, Eq)]
pub enum Flushed {
    /// No server answers on the file's socket: no charges are held in memory, unless a
    /// server runs without its socket (the caller checks the serve lock).
    NoServer,
    /// The server committed every charge it had decided before it read the request.
    Committed,
}

/// Why the running server did not confirm a flush.
#[derive(Debug, thiserror::Error)]
#[error("the server running on {db} did not flush its charges: {why}")]
pub struct FlushRefused {
    pub db: String,
    pub why: String,
}

/// Asks the server running on `db` (if any) to commit its charges now, and waits for
/// its answer.
pub fn flush(db: &Path) -> Result<Flushed, FlushRefused> {
    let refused = |why: String| FlushRefused {
        db: db.display().to_string(),
        why,
    };
    let socket = socket_path(db);
    if let Some(why) = untrusted(db, &socket) {
        return Err(refused(why));
    }
    let Ok(mut stream) = UnixStream::connect(socket) else {
        return Ok(Flushed::NoServer);
    };
    if let Some(why) = untrusted_peer(db, &stream) {
        return Err(refused(why));
    }
    let _ = stream.set_read_timeout(Some(CONFIRM_WAIT + Duration::from_secs(1)));
    stream
        .write_all(b"flush\n")
        .map_err(|e| refused(format!("writing to its socket: {e}")))?;
    let mut line = String::new();
    BufReader::new(&stream)
        .read_line(&mut line)
        .map_err(|e| refused(format!("no answer on its socket: {e}")))?;
    match line.strip_suffix('\n') {
        Some("ok") => Ok(Flushed::Committed),
        Some(answer) => Err(refused(
            answer.strip_prefix("error ").unwrap_or(answer).to_owned(),
        )),
        None => Err(refused("it closed its socket without an answer".to_owned())),
    }
}

/// The server's end: answers each announcement once the books are reloaded. Stops and
/// removes its socket when dropped.
pub struct Listener {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Listener {
    /// `None` (logged) when the socket cannot be created, e.g. a path over the 108 bytes
    /// of a socket address: changes then hold after the next flush.
    pub fn start(db: &Path, billing: Billing) -> Option<Listener> {
        let path = socket_path(db);
        // The serve lock is held: a socket file left here is a dead server's.
        let _ = std::fs::remove_file(&path);
        let listener = match bind_private(&path) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(
                    "no change socket at {} ({e}): CLI changes hold after the next flush",
                    path.display()
                );
                return None;
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = thread::Builder::new()
            .name("postal-changes".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if flag.load(Ordering::Relaxed) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let billing = billing.clone();
                    let _ = thread::Builder::new()
                        .name("postal-change".into())
                        .spawn(move || confirm(stream, &billing));
                }
            })
            .ok()?;
        Some(Listener {
            path,
            stop,
            thread: Some(thread),
        })
    }
}

/// A listening socket at `path` that only its owner may connect to: bound under a
/// temporary name beside it, made 0600, then renamed into place.
fn bind_private(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    // Shorter than the socket's own name (`<db>.serve-notify`), so that a path that fits a
    // socket address fits this one too; one per listener of this process.
    static LISTENERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = LISTENERS.fetch_add(1, Ordering::Relaxed) % 100;
    let temporary = path.with_file_name(format!(".pn{}-{n}", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    let listener = UnixListener::bind(&temporary)?;
    let placed = std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&temporary, path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&temporary);
        return Err(e);
    }
    Ok(listener)
}

/// The uid of the process at the other end of `stream` (`SO_PEERCRED`).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn peer_uid(stream: &UnixStream) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of their sizes for the call, and the
    // descriptor is open for the stream's lifetime.
    let done = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (done == 0).then_some(cred.uid)
}

/// The uid of the process at the other end of `stream` (`getpeereid`: the BSDs and
/// macOS, which have no `SO_PEERCRED`).
#[cfg(any(
    target_vendor = "apple",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "netbsd",
    target_os = "dragonfly"
))]
fn peer_uid(stream: &UnixStream) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let (mut uid, mut gid) = (0, 0);
    // SAFETY: `uid` and `gid` are valid for writes for the call, and the descriptor is
    // open for the stream's lifetime.
    let done = unsafe { libc::getpeereid(stream.as_raw_fd(), &mut uid, &mut gid) };
    (done == 0).then_some(uid)
}

/// Elsewhere the peer is not known: every connection is refused.
#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_vendor = "apple",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "netbsd",
    target_os = "dragonfly"
)))]
fn peer_uid(_stream: &UnixStream) -> Option<u32> {
    None
}

fn confirm(stream: UnixStream, billing: &Billing) {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let own = unsafe { libc::geteuid() };
    match peer_uid(&stream) {
        Some(uid) if uid == own || uid == 0 => {}
        peer => {
            tracing::warn!("change socket: a connection of uid {peer:?} refused");
            return;
        }
    }
    let _ = stream.set_read_timeout(Some(CONFIRM_WAIT));
    let mut line = Vec::new();
    if BufReader::new((&stream).take(MAX_LINE))
        .read_until(b'\n', &mut line)
        .is_err()
    {
        return;
    }
    if line != b"flush\n" && line != b"changed\n" {
        let _ = (&stream).write_all(b"error unknown request\n");
        return;
    }
    if line == b"flush\n" {
        let answer = match billing.flush_now(CONFIRM_WAIT) {
            Ok(()) => "ok\n".to_owned(),
            Err(e) => format!("error {}\n", e.to_string().replace('\n', " ")),
        };
        let _ = (&stream).write_all(answer.as_bytes());
        return;
    }
    if billing.reload_now(CONFIRM_WAIT) {
        let _ = (&stream).write_all(b"ok\n");
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = UnixStream::connect(&self.path); // wakes the accept loop
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}
