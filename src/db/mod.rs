//! SQLite access: the only code with SQL. One file holds postal data, accounts, keys,
//! ledger and rate-limit counters (`schema.sql`).
//!
//! Why it is built this way:
//! - **WAL journal.** Readers never block the writer and the writer never blocks readers:
//!   the server answers lookups from a consistent snapshot while `postal-import` replaces
//!   the dataset in one transaction, or while the billing writer commits.
//! - **One writer per process, short transactions.** SQLite admits one writer per file at
//!   a time. Within the server all charges go through one thread (`billing`), which
//!   commits many waiting charges per transaction (group commit), so the file lock is taken
//!   once per batch instead of once per request. Other processes (the admin CLI, the
//!   import) take the same lock; `busy_timeout` makes each side wait for the other rather
//!   than fail.
//! - **Exact money.** A balance and its ledger rows change in the same transaction, and
//!   every transaction that changes money is `BEGIN IMMEDIATE`: it holds the write lock
//!   from its first read, so the balance it checks is the balance it updates, whatever
//!   other processes do. The `CHECK (balance >= 0)` in `schema.sql` backs this up, and
//!   `postal ledger verify` checks balance = sum of ledger for every account.
//! - **Durable when answered.** `synchronous=FULL`: a commit returns after the WAL is
//!   fsynced, and the billing writer answers callers only after the commit returns. The
//!   price is one fsync per batch, which is why charges are batched (`billing`).
//! - **Schema once.** `open` applies `schema.sql` to a new file (user_version 0) inside an
//!   IMMEDIATE transaction, so concurrent first opens cannot race.

pub mod accounts;
pub mod billing;
pub mod city_index;
pub mod dataset;
pub mod postal;
pub mod postal_index;

pub use accounts::{AccountStatus, Caller};
pub use billing::{Billing, BillingStats, Charge, Charged, Refusal};

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

/// The schema of a new file; its last statement sets `user_version` to [`SCHEMA_VERSION`].
pub const SCHEMA: &str = include_str!("../../schema.sql");
pub const SCHEMA_VERSION: i64 = 1;

/// How long a statement waits for another connection's write lock before failing. An
/// import holds it for the few seconds of its final write; the admin CLI for milliseconds.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(120);

/// A pool of connections for readers (and short writers) of the server.
pub type Pool = r2d2::Pool<SqliteConnectionManager>;

/// Opens (creating if needed) the database at `path` with the service's settings and
/// makes sure its schema is current.
pub fn open(path: &Path) -> Result<Connection> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
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
    migrate(&mut conn)?;
    Ok(conn)
}

/// Runs `read` inside one read transaction of `conn`: one consistent view for all its
/// statements.
pub fn in_read_transaction<R>(
    conn: &Connection,
    read: impl FnOnce(&Connection) -> Result<R>,
) -> Result<R> {
    let tx = conn.unchecked_transaction()?;
    let result = read(&tx)?;
    tx.finish()?;
    Ok(result)
}

/// A connection pool over `path` (opened once with [`open`] first, so the schema exists).
pub fn pool(path: &Path, size: u32) -> Result<Pool> {
    open(path)?;
    let manager = SqliteConnectionManager::file(path).with_init(|c| configure(c));
    r2d2::Pool::builder()
        .max_size(size)
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

fn migrate(conn: &mut Connection) -> Result<()> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let version: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    match version {
        0 => tx.execute_batch(SCHEMA).context("applying schema.sql")?,
        SCHEMA_VERSION => {}
        other => {
            bail!("database schema version {other} is newer than this program's ({SCHEMA_VERSION})")
        }
    }
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_gets_the_schema_and_its_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/p.db");
        let conn = open(&path).unwrap();
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        drop(conn);
        // Opening again leaves it as it is.
        open(&path).unwrap();
    }
}
