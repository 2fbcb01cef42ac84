//! SQLite access: the only code with SQL. One file holds postal data, accounts, keys,
//! ledger and rate-limit counters (`schema.sql`).
//!
//! Why it is built this way:
//! - **WAL journal.** Readers never block the writer and the writer never blocks readers:
//!   the server answers lookups from a consistent snapshot while `postal-import` replaces
//!   the dataset in one transaction, or while the billing writer commits.
//! - **One server charges the file.** `postal serve` holds an exclusive lock file and
//!   decides charges in memory (`crate::billing`); one writer thread commits them behind,
//!   as deltas, at most every flush interval (`sqlite::ledger::append_charges`). Other processes (the admin CLI, the
//!   import) take SQLite's write lock for their own short transactions; `busy_timeout`
//!   makes each side wait for the other rather than fail.
//! - **Exact money.** A balance and its ledger rows change in the same transaction, and
//!   every transaction that changes money is `BEGIN IMMEDIATE`. The
//!   `CHECK (balance >= 0)` in `schema.sql` backs this up, and `postal ledger verify`
//!   checks balance = sum of ledger for every account at every commit.
//! - **Durability.** The CLI commits with `synchronous=FULL`. The server's flushes use
//!   `NORMAL` (write-behind: a crash of the process loses at most the last interval,
//!   a power cut possibly the last commits) or `FULL` with `--durable-charges`
//!   (docs/money.md).
//! - **Schema once.** `open` applies `schema.sql` to a new file (user_version 0) inside an
//!   IMMEDIATE transaction, so concurrent first opens cannot race; an older file gets the
//!   numbered migrations below.
//! - **Private files.** The file holds key hashes and balances: `open` creates it 0600
//!   (SQLite gives the `-wal` and `-shm` files the database file's permissions).

pub(crate) mod admin;
pub(crate) mod backup;
pub(crate) mod dataset;
pub(crate) mod gazetteer;
pub(crate) mod history;
mod migrations;
pub mod pg;
pub mod postal;
pub mod rows;
pub(crate) mod secret_file;
pub mod sqlite;

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::{Connection, OpenFlags};

/// The schema of a new file; its last statement sets `user_version` to [`SCHEMA_VERSION`].
pub const SCHEMA: &str = include_str!("../../schema.sql");
pub const SCHEMA_VERSION: i64 = 14;

/// How long a statement waits for another connection's write lock before failing. Every
/// writer holds it for milliseconds (the import too: `dataset`); this bounds the
/// pathological cases.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(120);

/// A pool of connections for readers (and short writers) of the server.
pub type Pool = r2d2::Pool<SqliteConnectionManager>;

/// Opens (creating if needed) the database at `path` with the service's settings and
/// makes sure its schema is current.
pub fn open(path: &Path) -> Result<Connection> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    create_private(path)?;
    let mut conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("opening database {}", path.display()))?;
    configure(&conn)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .context("switching the database to WAL")?;
    migrations::migrate(&mut conn)?;
    Ok(conn)
}

/// Creates `path` empty with mode 0600 unless it exists (SQLite would create it 0644, and
/// its `-wal` and `-shm` files take the mode of the database file).
fn create_private(path: &Path) -> Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating database {}", path.display())),
    }
}

/// Tries once to empty the WAL file (a TRUNCATE checkpoint), waiting at most `wait` for
/// the write lock and for readers to leave the WAL; `Ok(false)` when they did not.
///
/// Any connection can do it, but only at a moment when no read transaction uses the WAL,
/// and the checkpoint holds the write lock while it waits for that moment: so a short
/// `wait` (writers wait at most that long plus the copy of the frames committed since the
/// PASSIVE pass), and the caller tries again later. The server's
/// readers last microseconds except its reload of the postal data (seconds), which is
/// why the server tries after each reload and the import after its swap.
pub fn truncate_wal(conn: &Connection, wait: Duration) -> Result<bool> {
    // A TRUNCATE checkpoint copies what is left of the WAL into the file while it holds
    // the write lock (6 s for an import's WAL, every charge waiting); a PASSIVE one copies
    // without it. So PASSIVE first, and TRUNCATE has only the last few frames to copy.
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
    conn.busy_timeout(wait)?;
    let done = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        r.get::<_, i64>(0)
    });
    conn.busy_timeout(BUSY_TIMEOUT)?;
    match done {
        Ok(busy) => Ok(busy == 0),
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::DatabaseBusy =>
        {
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

/// `PRAGMA data_version`: changes when another connection commits to the file, never
/// for `conn`'s own commits.
pub fn data_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("PRAGMA data_version")?
        .query_row([], |r| r.get(0))
}

/// Gives back `conn`'s page cache (after a full scan nothing reads again).
pub fn shrink_memory(conn: &Connection) -> Result<()> {
    conn.execute_batch("PRAGMA shrink_memory")?;
    Ok(())
}

/// A connection pool over `path` (opened once with [`open`] first, so the schema exists),
/// its `size` connections opened at once.
pub fn pool(path: &Path, size: u32) -> Result<Pool> {
    build_pool(path, size, None)
}

/// As [`pool`], each connection opened when first wanted (the account store's: a server
/// whose dashboard nobody uses holds none).
pub fn pool_on_demand(path: &Path, size: u32) -> Result<Pool> {
    build_pool(path, size, Some(0))
}

fn build_pool(path: &Path, size: u32, min_idle: Option<u32>) -> Result<Pool> {
    open(path)?;
    let manager = SqliteConnectionManager::file(path).with_init(|c| configure(c));
    r2d2::Pool::builder()
        .max_size(size)
        .min_idle(min_idle)
        // r2d2 would run `SELECT 1` on every checkout; a SQLite connection does not go stale.
        .test_on_check_out(false)
        .build(manager)
        .context("building the connection pool")
}

/// Per-connection settings (they do not persist in the file).
fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // FULL: a commit is on disk when it returns (a charge is durable when answered).
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "cache_size", -64_000)?; // 64 MB per connection
    // After a checkpoint resets the WAL, truncate it back to this size.
    conn.pragma_update(None, "journal_size_limit", 16_i64 << 20)?;
    // No mmap: in WAL mode every read transaction that follows another connection's
    // commit drops and remaps the mapping (munmap, TLB shootdowns, page faults), which cost
    // more than the lookup itself under a steady stream of charges (perf, bench/api.sh).
    conn.pragma_update(None, "mmap_size", 0)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schema version `conn`'s file says it is.
    fn version(conn: &Connection) -> i64 {
        conn.pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_new_file_gets_the_schema_and_its_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/p.db");
        let conn = open(&path).unwrap();
        assert_eq!(version(&conn), SCHEMA_VERSION);
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        drop(conn);
        // Opening again leaves it as it is.
        open(&path).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn the_database_its_wal_and_its_shm_are_created_readable_by_their_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        let conn = open(&path).unwrap();
        conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .unwrap();
        for suffix in ["", "-wal", "-shm"] {
            let file = dir.path().join(format!("p.db{suffix}"));
            let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}: {mode:o}", file.display());
        }
    }
}
