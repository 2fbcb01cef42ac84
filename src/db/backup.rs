//! Copies of the database file: a consistent copy of a live file (`postal backup`), the
//! checks a copy passes before it may become the database, and replacing the file with
//! one (`postal restore`).
//!
//! Why SQLite's online backup API, in one step:
//! - **Consistent while the server bills.** `sqlite3_backup_step(-1)` copies every page
//!   inside one read transaction: the copy is the file as of one commit. In WAL mode the
//!   server's flushes go on meanwhile (readers never block the writer). Copying in
//!   slices (`step(100)`, as `Connection::backup` does) would restart from the first
//!   page whenever another process commits between two slices, which a server flushing
//!   every 10 ms does all the time.
//! - **Cheaper than `VACUUM INTO`.** Pages are copied as they are, where `VACUUM INTO`
//!   rebuilds every table and index: on the full dataset (272 MB) 1.7-1.8 s and 0.43 s
//!   of CPU against 2.3-2.6 s and 1.0 s, each with its fsync (docs/money.md, "Backup and
//!   restore"). `VACUUM INTO`'s file is 2% smaller (no free pages); not worth twice the
//!   CPU on two cores shared with the server.
//! - **One self-contained file.** The copy is switched to a rollback journal
//!   (`journal_mode=DELETE`), so it is one file: no `-wal` beside it, readable from
//!   read-only media. A restored file goes back to WAL.
//!
//! A copy is written beside its destination under a temporary name, synced, then renamed
//! over it: a reader of the destination sees the old file or the new one, never a part.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

/// The first 16 bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// How long a copy waits for a lock it cannot take at once (a WAL recovery, a
/// checkpoint), in all.
const BUSY_WAIT: Duration = Duration::from_secs(10);

/// The journal a copy is left in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Journal {
    /// One self-contained file (a backup).
    Rollback,
    /// The service's journal (a restored database).
    Wal,
}

/// Whether the file at `path` starts as an SQLite database does (an empty file does not:
/// SQLite would take it for an empty database).
pub fn is_sqlite_file(path: &Path) -> std::io::Result<bool> {
    use std::io::Read;
    let mut header = [0u8; 16];
    let mut file = std::fs::File::open(path)?;
    match file.read_exact(&mut header) {
        Ok(()) => Ok(&header == SQLITE_HEADER),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

/// Opens an existing database file as it is: nothing created, no schema applied or
/// migrated (a copy is checked as it was written).
pub fn open_existing(path: &Path, read_only: bool) -> Result<Connection> {
    let access = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
    };
    let conn = Connection::open_with_flags(path, access | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .with_context(|| format!("opening {}", path.display()))?;
    conn.busy_timeout(super::BUSY_TIMEOUT)?;
    Ok(conn)
}

/// Copies the database of `source` as of one commit into the new file `destination`
/// (which must not exist or be empty), left in `journal` mode. Returns the pages copied.
pub fn copy_database(source: &Connection, destination: &Path, journal: Journal) -> Result<u64> {
    let mut copy = Connection::open(destination)
        .with_context(|| format!("creating {}", destination.display()))?;
    // The copy is a temporary file until it is synced and renamed: no journal, no sync
    // of its own while it is written.
    copy.pragma_update(None, "journal_mode", "OFF")?;
    copy.pragma_update(None, "synchronous", "OFF")?;
    let pages = {
        let backup = Backup::new(source, &mut copy).context("starting the copy")?;
        let mut waited = Duration::ZERO;
        loop {
            // -1: every page in one step, in one read transaction of the source.
            match backup.step(-1).context("copying the pages")? {
                StepResult::Done => break,
                StepResult::More => {}
                StepResult::Busy | StepResult::Locked if waited < BUSY_WAIT => {
                    std::thread::sleep(Duration::from_millis(50));
                    waited += Duration::from_millis(50);
                }
                StepResult::Busy | StepResult::Locked => {
                    bail!("the database stayed locked for {BUSY_WAIT:?}")
                }
                _ => bail!("unexpected state of the copy"),
            }
        }
        backup.progress().pagecount
    };
    // Page 1 came from the source, so the copy says WAL when the source was; set the
    // journal the copy is for (a rollback copy leaves no `-wal` behind when closed).
    let mode = match journal {
        Journal::Rollback => "DELETE",
        Journal::Wal => "WAL",
    };
    copy.pragma_update(None, "journal_mode", mode)
        .with_context(|| format!("switching the copy to journal_mode={mode}"))?;
    copy.close()
        .map_err(|(_, e)| e)
        .context("closing the copy")?;
    Ok(u64::try_from(pages).unwrap_or(0))
}

/// SQLite found that a file is not a database, or a damaged one (somewhere in `e`'s
/// chain).
pub fn is_corruption(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<rusqlite::Error>(),
            Some(rusqlite::Error::SqliteFailure(f, _))
                if matches!(f.code, rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
        )
    })
}

/// What `PRAGMA integrity_check` finds wrong (at most `max` lines); empty when the file
/// is sound.
pub fn integrity_problems(conn: &Connection, max: u32) -> Result<Vec<String>> {
    let mut stmt = conn.prepare(&format!("PRAGMA integrity_check({max})"))?;
    let lines = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()
        .context("checking integrity")?;
    Ok(if lines == ["ok"] { Vec::new() } else { lines })
}

/// The schema version written in the file (`PRAGMA user_version`), and whether it holds
/// the money tables (`accounts`, `ledger`).
pub fn schema_of(conn: &Connection) -> Result<(i64, bool)> {
    let version = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let tables: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master
         WHERE type = 'table' AND name IN ('accounts', 'ledger')",
        [],
        |r| r.get(0),
    )?;
    Ok((version, tables == 2))
}

/// A temporary file beside `target` (same directory, so the rename is atomic), private
/// to its owner, removed when dropped unless persisted.
pub fn temporary_beside(target: &Path, purpose: &str) -> Result<tempfile::NamedTempFile> {
    let dir = parent_of(target);
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    tempfile::Builder::new()
        .prefix(&format!(".{name}.{purpose}-"))
        .tempfile_in(&dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))
}

/// Syncs the copy in `temporary`, renames it to `target` (replacing it only when
/// `replace`), and syncs the directory so the new name survives a power cut.
pub fn install(temporary: tempfile::NamedTempFile, target: &Path, replace: bool) -> Result<()> {
    temporary.as_file().sync_all().context("syncing the copy")?;
    let installed = if replace {
        temporary.persist(target).map(drop)
    } else {
        temporary.persist_noclobber(target).map(drop)
    };
    installed
        .map_err(|e| e.error)
        .with_context(|| format!("renaming the copy to {}", target.display()))?;
    sync_directory(&parent_of(target))
}

/// The `-wal` and `-shm` files of the database at `path`.
pub fn companions(path: &Path) -> [PathBuf; 2] {
    ["-wal", "-shm"].map(|suffix| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    })
}

/// Readies the file at `target` (if any) to be replaced by another: when it is a
/// database, its WAL is copied into it and emptied and the connection closed (SQLite
/// then removes `-wal` and `-shm`); any `-wal` or `-shm` still there (a crashed
/// process's) is removed. A `-wal` left beside the new file would be replayed into it:
/// pages of another database.
///
/// Refuses when another connection keeps the WAL busy: the file is in use. Emptying the
/// WAL first keeps the old file whole if the replacement then fails.
pub fn retire(target: &Path) -> Result<()> {
    if target.is_file() && is_sqlite_file(target)? {
        let conn = open_existing(target, false)?;
        if !super::truncate_wal(&conn, Duration::from_secs(2))? {
            bail!(
                "{} is in use by another process (its WAL could not be emptied); \
                 stop what uses it and try again",
                target.display()
            );
        }
        conn.close()
            .map_err(|(_, e)| e)
            .with_context(|| format!("closing {}", target.display()))?;
    }
    for companion in companions(target) {
        match std::fs::remove_file(&companion) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(e).with_context(|| format!("removing {}", companion.display()));
            }
        }
    }
    Ok(())
}

fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn sync_directory(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing the directory {}", dir.display()))
}
