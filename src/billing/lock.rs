//! The serve lock: one `postal serve` per database file, so that one process alone
//! charges it (`<db>.serve-lock`, an exclusive flock held while the server runs). `postal
//! restore` holds it too while it replaces the file, so no server starts on it meanwhile.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, anyhow};

/// How often, and how far apart, a held serve lock is tried again (2 s in all).
const LOCK_RETRIES: u32 = 100;
const LOCK_RETRY_PAUSE: Duration = Duration::from_millis(20);

/// The exclusive lock of a database file's server: `<db>.serve-lock`, held (flock) while
/// `postal serve` runs, so that a second server on the same file refuses to start.
pub struct ServeLock {
    _file: std::fs::File,
}

impl ServeLock {
    pub fn acquire(db: &Path) -> anyhow::Result<ServeLock> {
        ServeLock::try_acquire(db)?.ok_or_else(|| {
            anyhow!(
                "another `postal serve` is already running on {} (it holds {}); \
                 stop it first: two servers must not charge one file",
                db.display(),
                lock_path(db).display()
            )
        })
    }

    /// The lock, or `None` when another process holds it (after retrying for 2 s).
    pub fn try_acquire(db: &Path) -> anyhow::Result<Option<ServeLock>> {
        let path = lock_path(db);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening the lock file {}", path.display()))?;
        // A flock belongs to the open file, and a child process forked by another thread
        // holds a copy of every descriptor until it execs: a lock released a moment ago
        // can still look held. So a held lock is retried for a while before refusing.
        let mut attempt = 0;
        let locked = loop {
            match file.try_lock() {
                Err(std::fs::TryLockError::WouldBlock) if attempt < LOCK_RETRIES => {
                    attempt += 1;
                    std::thread::sleep(LOCK_RETRY_PAUSE);
                }
                other => break other,
            }
        };
        match locked {
            Ok(()) => Ok(Some(ServeLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(e).with_context(|| format!("locking {}", path.display()))
            }
        }
    }
}

/// `<db>.serve-lock`.
pub fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".serve-lock");
    PathBuf::from(name)
}

/// Whether a process holds `db`'s serve lock now (one try, no retry, nothing created):
/// a server runs on the file, or a `postal restore` replaces it.
pub fn is_held(db: &Path) -> anyhow::Result<bool> {
    let path = lock_path(db);
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            return Err(e).with_context(|| format!("opening the lock file {}", path.display()));
        }
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(false), // released when `file` closes
        Err(std::fs::TryLockError::WouldBlock) => Ok(true),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("testing the lock {}", path.display()))
        }
    }
}
