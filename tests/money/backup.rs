//! `postal backup` and `postal restore` against the real binary: a backup taken while
//! the server bills holds every charge answered before it began, exact to the
//! micro-dollar, and restores into a sound database whose balances equal their ledgers;
//! each refusal says why, exits as the CLI's other errors do and changes nothing.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::{TestDb, join, load};

/// What a lookup costs (micro-dollars).
const LOOKUP: i64 = 28;

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The file's name and every name in its directory, sorted (leftover temporary files
/// show here).
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `PRAGMA integrity_check` of the file, opened as it is.
fn integrity(db: &Path) -> String {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap()
}

/// (queries, micro-dollars) of the charge rows of the file's ledger.
fn charges(db: &Path) -> (i64, i64) {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT coalesce(sum(query_count), 0), coalesce(-sum(amount), 0)
             FROM ledger WHERE kind = 'charge'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
}

fn balance_micros(db: &Path, account_id: &str) -> i64 {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT balance FROM accounts WHERE public_id = ?1",
            [account_id],
            |r| r.get(0),
        )
        .unwrap()
}

#[test]
fn a_backup_under_billed_load_holds_every_charge_answered_before_it_and_restores_sound() {
    let db = TestDb::with_postal_data();
    let account = db.funded_account();
    // Flushes a minute apart: only the backup's own flush request can put this test's
    // charges in the file before the copy.
    let server = db.serve(&["--flush-interval-ms", "60000"]);
    let (stop, threads) = load(&server, &account.api_key, 6);
    thread::sleep(Duration::from_millis(700));

    let copy_dir = tempfile::tempdir().unwrap();
    let copy = copy_dir.path().join("postal-backup.db");
    let backup_started = Instant::now();
    let run = db.postal(&["backup", path_str(&copy)]);
    let backup_returned = Instant::now();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let json = run.json();
    assert_eq!(json["backup"], path_str(&copy));
    assert_eq!(json["serverFlushed"], true);
    assert_eq!(json["bytes"], std::fs::metadata(&copy).unwrap().len());
    // One self-contained file: nothing beside it.
    assert_eq!(listing(copy_dir.path()), ["postal-backup.db"]);

    thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let answered = join(threads);
    let before = answered.iter().filter(|at| **at < backup_started).count() as i64;
    let by_return = answered.iter().filter(|at| **at < backup_returned).count() as i64;
    assert!(before > 50, "too little load: {before}");

    // Refused while a server runs on the target, which stays as it is.
    let live_listing = listing(db.dir());
    let run = db.postal(&["restore", path_str(&copy)]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!(
            "error: a `postal serve` is running on {db} (it holds {db}.serve-lock); \
             stop it before restoring\n",
            db = db.path.display()
        )
    );
    assert_eq!(listing(db.dir()), live_listing);
    drop(server);

    let restored = TestDb::at_new_path();
    let run = restored.postal(&["restore", path_str(&copy)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let json = run.json();
    assert_eq!(json["restored"], path_str(&restored.path));
    assert_eq!(json["from"], path_str(&copy));
    assert_eq!(json["accounts"], 1);
    assert_eq!(json["bytes"], std::fs::metadata(&copy).unwrap().len());

    assert_eq!(integrity(&restored.path), "ok");
    restored.assert_ledger_ok();
    // Every charge answered before the backup began is in the copy; none answered after
    // it returned (the next flush was a minute away).
    let (queries, spent) = charges(&restored.path);
    assert!(
        (before..=by_return).contains(&queries),
        "{queries} charged in the copy, {before} answered before the backup, {by_return} by its end"
    );
    assert_eq!(spent, queries * LOOKUP);
    assert_eq!(
        balance_micros(&restored.path, &account.account_id),
        5_028_000 - queries * LOOKUP
    );
    assert_eq!(
        json["entries"],
        rusqlite::Connection::open(&restored.path)
            .unwrap()
            .query_row("SELECT count(*) FROM ledger", [], |r| r.get::<_, i64>(0))
            .unwrap()
    );

    // The restored file serves and bills on from its balance.
    let server = restored.serve(&[]);
    let (status, body) = server.lookup(&account.api_key);
    assert_eq!(status, 200, "{body}");
    let expected = (5_028_000 - (queries + 1) * LOOKUP) as f64 / 1e6;
    assert_eq!(body["balance"], json!(expected));
}

#[test]
fn a_backup_without_a_server_copies_the_file_as_it_is() {
    let db = TestDb::new();
    let account = db.funded_account();
    let copy = db.dir().join("copy.db");
    let run = db.postal(&["backup", path_str(&copy)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json()["serverFlushed"], false);
    assert_eq!(integrity(&copy), "ok");
    assert_eq!(balance_micros(&copy, &account.account_id), 5_028_000);
}

#[test]
fn a_backup_onto_an_existing_file_is_refused_unless_forced() {
    let db = TestDb::new();
    let account = db.funded_account();
    let existing = db.dir().join("existing.db");
    std::fs::write(&existing, "keep me").unwrap();
    let run = db.postal(&["backup", path_str(&existing)]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!(
            "error: {} exists; pass --force to replace it\n",
            existing.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me");

    let run = db.postal(&["backup", "--force", path_str(&existing)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(balance_micros(&existing, &account.account_id), 5_028_000);

    let run = db.postal(&["backup", "--force", path_str(&db.path)]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!(
            "error: {} is the database itself; back it up to another path\n",
            db.path.display()
        )
    );
}

#[test]
fn a_backup_of_a_missing_database_is_refused_and_creates_nothing() {
    let missing = TestDb::at_new_path();
    let copy = missing.dir().join("copy.db");
    let run = missing.postal(&["backup", path_str(&copy)]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(
        run.stderr,
        format!("error: no database at {}\n", missing.path.display())
    );
    assert!(listing(missing.dir()).is_empty());
}

/// A target with two accounts, its bytes and its directory, to compare after a refusal.
struct Target {
    db: TestDb,
    bytes: Vec<u8>,
    listing: Vec<String>,
}

impl Target {
    fn new() -> Target {
        let db = TestDb::new();
        db.create_account();
        db.funded_account();
        // A clean file: its WAL in it (as after the last connection closed).
        drop(db.conn());
        let bytes = std::fs::read(&db.path).unwrap();
        let listing = listing(db.dir());
        Target { db, bytes, listing }
    }

    /// `postal restore SRC` onto it is refused with exit 2 and exactly `message`, and
    /// the target and its directory are as they were.
    fn refuses(&self, source: &Path, message: &str) {
        let run = self.db.postal(&["restore", path_str(source)]);
        assert_eq!((run.code, run.stderr.as_str()), (2, message));
        assert!(run.stdout.is_empty(), "{}", run.stdout);
        assert!(std::fs::read(&self.db.path).unwrap() == self.bytes);
        assert_eq!(listing(self.db.dir()), self.listing);
    }
}

#[test]
fn a_restore_from_a_missing_or_non_sqlite_file_is_refused() {
    let target = Target::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let missing = elsewhere.path().join("missing.db");
    target.refuses(
        &missing,
        &format!("error: no database at {}\n", missing.display()),
    );
    let text = elsewhere.path().join("notes.txt");
    std::fs::write(&text, "not a database, just some text long enough").unwrap();
    target.refuses(
        &text,
        &format!("error: {} is not an SQLite database\n", text.display()),
    );
    let empty = elsewhere.path().join("empty.db");
    std::fs::write(&empty, "").unwrap();
    target.refuses(
        &empty,
        &format!("error: {} is not an SQLite database\n", empty.display()),
    );
    let other = elsewhere.path().join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    target.refuses(
        &other,
        &format!(
            "error: {} is not a postal database (no accounts and ledger tables); \
             nothing restored\n",
            other.display()
        ),
    );
}

#[test]
fn a_restore_from_a_corrupt_copy_is_refused() {
    let target = Target::new();
    let source = TestDb::with_postal_data();
    source.funded_account();
    let copy = source.dir().join("copy.db");
    assert_eq!(source.postal(&["backup", path_str(&copy)]).code, 0);
    // Garbage over a page in the middle of the file (page 1, the header, stays whole).
    let mut bytes = std::fs::read(&copy).unwrap();
    let page = 4096;
    let middle = bytes.len() / 2 / page * page;
    bytes[middle..middle + page].fill(0xA5);
    std::fs::write(&copy, &bytes).unwrap();

    let run = target.db.postal(&["restore", path_str(&copy)]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let prefix = format!("error: {} is corrupt", copy.display());
    assert!(
        run.stderr.starts_with(&prefix) && run.stderr.ends_with("; nothing restored\n"),
        "{}",
        run.stderr
    );
    assert!(std::fs::read(&target.db.path).unwrap() == target.bytes);
    assert_eq!(listing(target.db.dir()), target.listing);
}

#[test]
fn a_restore_from_a_copy_whose_ledger_does_not_verify_is_refused() {
    let target = Target::new();
    let source = TestDb::new();
    source.create_account();
    let tampered = source.create_account();
    let copy = source.dir().join("copy.db");
    assert_eq!(source.postal(&["backup", path_str(&copy)]).code, 0);
    rusqlite::Connection::open(&copy)
        .unwrap()
        .execute(
            "UPDATE accounts SET balance = balance + 5000000 WHERE public_id = ?1",
            [&tampered.account_id],
        )
        .unwrap();
    target.refuses(
        &copy,
        &format!(
            "error: the ledger of {} does not verify: {} has a balance of 5.028 and a \
             ledger sum of 0.028; nothing restored\n",
            copy.display(),
            tampered.account_id
        ),
    );
}

#[test]
fn a_restore_replaces_a_file_a_killed_server_left_with_its_wal() {
    // The target: a server killed with charges in its WAL (-wal and -shm left behind).
    let target = TestDb::with_postal_data();
    let old = target.funded_account();
    let mut server = target.serve(&[]);
    for _ in 0..20 {
        assert_eq!(server.lookup(&old.api_key).0, 200);
    }
    thread::sleep(Duration::from_millis(100)); // flushed
    server.stop("KILL");
    drop(server);
    assert!(
        listing(target.dir()).contains(&"postal.db-wal".to_owned()),
        "{:?}",
        listing(target.dir())
    );

    // The source: another database with other accounts.
    let source = TestDb::new();
    let new = source.funded_account();
    let copy = source.dir().join("copy.db");
    assert_eq!(source.postal(&["backup", path_str(&copy)]).code, 0);

    let run = target.postal(&["restore", path_str(&copy)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(integrity(&target.path), "ok");
    target.assert_ledger_ok();
    let accounts: Vec<String> = target
        .conn()
        .prepare("SELECT public_id FROM accounts")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(accounts, [new.account_id.as_str()]);
    assert_eq!(target.balance(&new.account_id).get(), 5_028_000);
    // No temporary file is left.
    assert!(
        listing(target.dir())
            .iter()
            .all(|name| !name.contains("restore")),
        "{:?}",
        listing(target.dir())
    );
}

#[test]
fn a_backup_while_the_server_cannot_write_its_charges_is_refused_and_writes_nothing() {
    let db = TestDb::with_postal_data();
    let account = db.funded_account();
    // As in serve.rs: a file-size limit makes the server's flushes fail like a full disk.
    let server = db.serve_wrapped(Some("trap '' XFSZ;"), &[]);
    let status = std::process::Command::new("prlimit")
        .args(["--pid", &server.pid(), "--fsize=1:unlimited"])
        .status()
        .unwrap();
    assert!(status.success());
    // Charged, then refused 503 once a flush of the charge has failed.
    let failing = (0..500).any(|_| {
        thread::sleep(Duration::from_millis(5));
        server.lookup(&account.api_key).0 == 503
    });
    assert!(failing, "{}", server.log());

    let copy_dir = tempfile::tempdir().unwrap();
    let copy = copy_dir.path().join("copy.db");
    let run = db.postal(&["backup", path_str(&copy)]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let prefix = format!(
        "error: the server running on {} did not flush its charges: billing unavailable: ",
        db.path.display()
    );
    assert!(run.stderr.starts_with(&prefix), "{}", run.stderr);
    assert!(listing(copy_dir.path()).is_empty());
}
