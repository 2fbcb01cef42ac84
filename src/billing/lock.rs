//! The serve lock: one `postal serve` per database file, so that one process alone
//! charges it (`<db>.serve-lock`, an exclusive flock held while the server runs).

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
    path: PathBuf,
}

impl ServeLock {
    pub fn acquire(db: &Path) -> anyhow::Result<ServeLock> {
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
            Ok(()) => Ok(ServeLock { _file: file, path }),
            Err(std::fs::TryLockError::WouldBlock) => Err(anyhow!(
                "another `postal serve` is already running on {} (it holds {}); \
                 stop it first: two servers must not charge one file",
                db.display(),
                path.display()
            )),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(e).with_context(|| format!("locking {}", path.display()))
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// `<db>.serve-lock`.
pub fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".serve-lock");
    PathBuf::from(name)
}
