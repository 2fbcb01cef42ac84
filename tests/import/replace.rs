//! Re-importing into a database in use: readers see the old data or the new, never an
//! empty or partial table; tables the import does not own keep their rows.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::helpers::{
    SAMPLE_ROWS, counts_by_country, fixture, geonames, import, import_with_country_info, number,
    open, spawn_import,
};

#[test]
fn a_reader_polling_during_a_reimport_sees_the_old_count_then_the_new_one_and_nothing_between() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    import_with_country_info(&db, &fixture("PL.txt")).assert_success();
    let old_rows = 4;

    let stop = Arc::new(AtomicBool::new(false));
    let polls = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (db, stop, polls) = (db.clone(), stop.clone(), polls.clone());
        thread::spawn(move || {
            let conn = open(&db);
            // Distinct consecutive observations: (rows in postal_codes, sum of the
            // per-country counts), both read from one snapshot.
            let mut seen: Vec<(i64, i64)> = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let now = conn
                    .query_row(
                        "SELECT (SELECT count(*) FROM postal_codes),
                                (SELECT coalesce(sum(record_count), 0) FROM countries)",
                        [],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .unwrap();
                if seen.last() != Some(&now) {
                    seen.push(now);
                }
                polls.fetch_add(1, Ordering::SeqCst);
            }
            seen
        })
    };
    let wait_for_polls = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while polls.load(Ordering::SeqCst) < n {
            assert!(Instant::now() < deadline, "the reader stopped polling");
            thread::sleep(Duration::from_millis(1));
        }
    };
    wait_for_polls(1);

    // The sample replaces PL: a shrink, allowed.
    let child = spawn_import(
        &db,
        [
            geonames("sample.zip").into_os_string(),
            "--allow-shrink".into(),
        ],
    );
    let before = polls.load(Ordering::SeqCst);
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let during = polls.load(Ordering::SeqCst) - before;
    wait_for_polls(polls.load(Ordering::SeqCst) + 3);
    stop.store(true, Ordering::SeqCst);
    let seen = reader.join().unwrap();

    assert!(
        during > 10,
        "the reader polled only {during} times during the import"
    );
    assert_eq!(
        seen,
        vec![(old_rows, old_rows), (SAMPLE_ROWS, SAMPLE_ROWS)],
        "the reader saw something other than the old data followed by the new"
    );
}

#[test]
fn a_table_the_import_does_not_own_keeps_its_rows_through_a_reimport() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    import_with_country_info(&db, &fixture("PL.txt")).assert_success();
    // schema.sql has no money tables yet; any table outside the postal part stands in.
    open(&db)
        .execute_batch(
            "CREATE TABLE operator_notes (id INTEGER PRIMARY KEY, note TEXT NOT NULL);
             INSERT INTO operator_notes (note) VALUES ('top-up by invoice'), ('key rotated');",
        )
        .unwrap();

    let run = import(
        &db,
        [
            geonames("sample.zip").into_os_string(),
            "--allow-shrink".into(),
        ],
    );
    run.assert_success();

    let conn = open(&db);
    let notes: Vec<(i64, String)> = conn
        .prepare("SELECT id, note FROM operator_notes ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(
        notes,
        vec![
            (1, "top-up by invoice".to_string()),
            (2, "key rotated".to_string())
        ]
    );
    assert_eq!(
        number(&conn, "SELECT count(*) FROM postal_codes"),
        SAMPLE_ROWS
    );
    assert!(
        !counts_by_country(&conn).iter().any(|(c, _)| c == "PL"),
        "the old data was replaced, not added to"
    );
}
