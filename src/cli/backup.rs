//! `postal backup DEST` and `postal restore SRC`: a consistent copy of the live file
//! holding every charge answered before the command started, and putting a checked copy
//! back in place of the file.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::anyhow;
use clap::Args;
use serde::Serialize;

use crate::billing::{ServeLock, lock, notify};
use crate::db::backup::{self, Journal};
use crate::db::{SCHEMA_VERSION, sqlite};

use super::{BadInput, Verdict, print, usd_or_raw};

#[derive(Args)]
pub(super) struct BackupArgs {
    /// Where the copy goes (one self-contained SQLite file).
    #[arg(value_name = "DEST")]
    destination: PathBuf,
    /// Replace DEST when it exists.
    #[arg(long)]
    force: bool,
}

#[derive(Args)]
pub(super) struct RestoreArgs {
    /// A copy written by `postal backup` (or any postal database file).
    #[arg(value_name = "SRC")]
    source: PathBuf,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BackedUp {
    backup: String,
    bytes: u64,
    /// A server ran on the file and committed its charges before the copy began.
    server_flushed: bool,
    seconds: f64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Restored {
    restored: String,
    from: String,
    bytes: u64,
    accounts: u64,
    entries: u64,
    seconds: f64,
}

/// Asks the running server (if any) to commit its charges, then copies the file as of
/// one commit after that into DEST (written beside it, synced, renamed).
pub(super) fn backup(db_path: &Path, args: BackupArgs) -> anyhow::Result<Verdict> {
    let started = Instant::now();
    let destination = args.destination;
    if !db_path.is_file() {
        return Err(BadInput(format!("no database at {}", db_path.display())).into());
    }
    if destination.exists() {
        if same_file(db_path, &destination) {
            return Err(BadInput(format!(
                "{} is the database itself; back it up to another path",
                destination.display()
            ))
            .into());
        }
        if !args.force {
            return Err(BadInput(format!(
                "{} exists; pass --force to replace it",
                destination.display()
            ))
            .into());
        }
        if lock::is_held(&destination)? {
            return Err(BadInput(format!(
                "a `postal serve` runs on {}; it cannot be replaced by a backup",
                destination.display()
            ))
            .into());
        }
    }
    if !parent_exists(&destination) {
        return Err(BadInput(format!(
            "the directory of {} does not exist",
            destination.display()
        ))
        .into());
    }

    // Every charge answered before this line is committed once the server says so.
    let server_flushed = match notify::flush(db_path)? {
        notify::Flushed::Committed => true,
        notify::Flushed::NoServer if lock::is_held(db_path)? => {
            return Err(anyhow!(
                "{} is held (a `postal serve` or `postal restore` runs on {}) but no \
                 server answers on {}: its charges in memory cannot be flushed; no backup \
                 written",
                lock::lock_path(db_path).display(),
                db_path.display(),
                notify::socket_path(db_path).display()
            ));
        }
        notify::Flushed::NoServer => false,
    };

    let source = backup::open_existing(db_path, false)?;
    let temporary = backup::temporary_beside(&destination, "backup")?;
    backup::copy_database(&source, temporary.path(), Journal::Rollback)?;
    drop(source);
    let bytes = std::fs::metadata(temporary.path())?.len();
    if args.force {
        // A `-wal` left beside DEST would be read as part of the copy.
        backup::retire(&destination)?;
    }
    backup::install(temporary, &destination, args.force)?;
    print(&BackedUp {
        backup: destination.display().to_string(),
        bytes,
        server_flushed,
        seconds: seconds_since(started),
    })?;
    Ok(Verdict::Success)
}

/// Refuses while a server runs on the file; copies SRC beside the file, checks the copy
/// (integrity, schema, every balance = sum of its ledger) and only then, holding the
/// file's serve lock, puts it in the file's place.
pub(super) fn restore(db_path: &Path, args: RestoreArgs) -> anyhow::Result<Verdict> {
    let started = Instant::now();
    let source = args.source;
    if !source.is_file() {
        return Err(BadInput(format!("no database at {}", source.display())).into());
    }
    if !backup::is_sqlite_file(&source)? {
        return Err(BadInput(format!("{} is not an SQLite database", source.display())).into());
    }
    if db_path.exists() {
        if same_file(db_path, &source) {
            return Err(BadInput(format!(
                "{} is the database itself; nothing to restore",
                source.display()
            ))
            .into());
        }
        if !backup::is_sqlite_file(db_path)? {
            return Err(BadInput(format!(
                "{} is not an SQLite database; refusing to replace it",
                db_path.display()
            ))
            .into());
        }
    }
    if !parent_exists(db_path) {
        return Err(BadInput(format!(
            "the directory of {} does not exist",
            db_path.display()
        ))
        .into());
    }
    let server_running = || {
        anyhow!(
            "a `postal serve` is running on {} (it holds {}); stop it before restoring",
            db_path.display(),
            lock::lock_path(db_path).display()
        )
    };
    if lock::is_held(db_path)? {
        return Err(server_running());
    }

    let temporary = backup::temporary_beside(db_path, "restore")?;
    let unfit = |what: String| BadInput(format!("{what}; nothing restored"));
    // SQLite's own verdict on the file is the user's problem; any other error is ours.
    let corrupt = |e: anyhow::Error| -> anyhow::Error {
        if backup::is_corruption(&e) {
            unfit(format!("{} is corrupt: {e:#}", source.display())).into()
        } else {
            e
        }
    };
    {
        let from = backup::open_existing(&source, true)?;
        backup::copy_database(&from, temporary.path(), Journal::Wal).map_err(corrupt)?;
    }
    let mut copy = backup::open_existing(temporary.path(), false)?;
    let problems = backup::integrity_problems(&copy, 10).map_err(corrupt)?;
    if !problems.is_empty() {
        return Err(unfit(format!(
            "{} is corrupt (integrity_check: {})",
            source.display(),
            problems.join("; ")
        ))
        .into());
    }
    let (version, money) = backup::schema_of(&copy)?;
    if !money {
        return Err(unfit(format!(
            "{} is not a postal database (no accounts and ledger tables)",
            source.display()
        ))
        .into());
    }
    if version > SCHEMA_VERSION {
        return Err(unfit(format!(
            "{} has schema version {version}, newer than this program's ({SCHEMA_VERSION})",
            source.display()
        ))
        .into());
    }
    let report = sqlite::ledger::verify(&mut copy)?;
    if !report.mismatches.is_empty() {
        let shown: Vec<String> = report
            .mismatches
            .iter()
            .take(5)
            .map(|m| {
                format!(
                    "{} has a balance of {} and a ledger sum of {}",
                    m.account_id,
                    usd_or_raw(m.balance),
                    usd_or_raw(m.ledger_sum)
                )
            })
            .collect();
        let more = report.mismatches.len().saturating_sub(shown.len());
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        return Err(unfit(format!(
            "the ledger of {} does not verify: {}{more}",
            source.display(),
            shown.join(", ")
        ))
        .into());
    }
    drop(copy);

    // Held until the file is replaced: no server starts on the old file meanwhile.
    let Some(_serve_lock) = ServeLock::try_acquire(db_path)? else {
        return Err(server_running());
    };
    backup::retire(db_path)?;
    let bytes = std::fs::metadata(temporary.path())?.len();
    backup::install(temporary, db_path, true)?;
    print(&Restored {
        restored: db_path.display().to_string(),
        from: source.display().to_string(),
        bytes,
        accounts: report.accounts,
        entries: report.entries,
        seconds: seconds_since(started),
    })?;
    Ok(Verdict::Success)
}

/// Both paths name one existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn parent_exists(path: &Path) -> bool {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.is_dir(),
        _ => true,
    }
}

/// Elapsed seconds, to the millisecond.
fn seconds_since(started: Instant) -> f64 {
    started.elapsed().as_millis() as f64 / 1000.0
}
