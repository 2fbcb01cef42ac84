//! The promise of docs/money.md against the real `postal serve` process: a clean stop
//! loses nothing, kill -9 loses at most the last flush interval, CLI changes hold from
//! the next request under load, one server per file, exact charges under races in both
//! modes, a failing flush answers 503 and recovers, and a flush kept waiting is logged
//! as slow.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::{Client, TestDb, join, load};

#[test]
fn sigterm_under_load_keeps_every_answered_charge() {
    let db = TestDb::with_postal_data();
    let account = db.funded_account();
    let mut server = db.serve(&[]);
    let (stop, threads) = load(&server, &account.api_key, 8);
    thread::sleep(Duration::from_millis(700));
    let status = server.stop("TERM");
    stop.store(true, Ordering::Relaxed);
    let answered = join(threads);
    assert!(status.success(), "{}", server.log());
    assert!(answered.len() > 50, "too little load: {}", answered.len());
    assert_eq!(db.charged_queries(), answered.len() as i64);
    db.assert_ledger_ok();
}

#[test]
fn kill_9_under_load_loses_at_most_the_last_flush_interval() {
    let db = TestDb::with_postal_data();
    let account = db.funded_account();
    // A long interval makes the window of loss visible.
    let interval = Duration::from_millis(300);
    let mut server = db.serve(&["--flush-interval-ms", "300"]);
    let (stop, threads) = load(&server, &account.api_key, 8);
    thread::sleep(Duration::from_millis(1000));
    let killed = Instant::now();
    server.stop("KILL");
    stop.store(true, Ordering::Relaxed);
    let answered = join(threads);
    db.assert_ledger_ok();
    let recorded = db.charged_queries();
    let answered_total = answered.len() as i64;
    assert!(recorded <= answered_total, "{recorded} > {answered_total}");
    // Lost: at most what was answered since the last flush began (one interval, plus
    // the flush's own time and scheduling on a busy machine).
    let recent = answered
        .iter()
        .filter(|at| killed.duration_since(**at) <= interval * 2)
        .count() as i64;
    assert!(
        answered_total - recorded <= recent,
        "lost {} of {answered_total}, but only {recent} answered in the last interval",
        answered_total - recorded
    );
    assert!(recorded > 0, "nothing flushed in a second");
    // The file is not left locked: a new server starts and charges.
    let server = db.serve(&[]);
    assert_eq!(server.lookup(&account.api_key).0, 200);
}

#[test]
fn cli_top_up_limits_new_key_and_revoke_hold_from_the_next_request_under_load() {
    let db = TestDb::with_postal_data();
    let busy = db.create_account();
    db.postal(&["account", "topup", &busy.account_id, "--usd", "5"]);
    let server = db.serve(&[]);
    let (stop, threads) = load(&server, &busy.api_key, 4);

    let account = db.account_worth(1);
    assert_eq!(server.lookup(&account.api_key).0, 200);
    assert_eq!(server.lookup(&account.api_key).0, 402);
    let run = db.postal(&["account", "topup", &account.account_id, "--usd", "5"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let (status, body) = server.lookup(&account.api_key);
    assert_eq!((status, body["balance"].clone()), (200, json!(4.999972)));

    let run = db.postal(&[
        "account",
        "limits",
        &account.account_id,
        "--per-minute",
        "3",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(server.lookup(&account.api_key).0, 200); // 3rd query this minute
    assert_eq!(server.lookup(&account.api_key).0, 429);
    db.postal(&["account", "limits", &account.account_id, "--off"]);
    assert_eq!(server.lookup(&account.api_key).0, 200);

    let key = db.postal(&["key", "create", &account.account_id]).json();
    let new_key = key["apiKey"].as_str().unwrap();
    assert_eq!(server.lookup(new_key).0, 200);
    let run = db.postal(&["key", "revoke", &account.key_id]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(server.lookup(&account.api_key).0, 401);
    assert_eq!(server.lookup(new_key).0, 200);

    stop.store(true, Ordering::Relaxed);
    join(threads);
    drop(server);
    db.assert_ledger_ok();
}

#[test]
fn a_second_serve_on_the_same_file_is_refused() {
    let db = TestDb::with_postal_data();
    db.create_account();
    let server = db.serve(&[]);
    let second = db.postal(&["serve", "--listen", "127.0.0.1:0"]);
    assert_ne!(second.code, 0);
    assert!(
        second
            .stderr
            .contains("another `postal serve` is already running on"),
        "{}",
        second.stderr
    );
    drop(server);
}

/// 200 concurrent lookups (or bulks of 3) on a balance of exactly 50 queries.
fn race(durable: bool, bulk: bool) {
    let db = TestDb::with_postal_data();
    let account = db.account_worth(50);
    let args: &[&str] = if durable { &["--durable-charges"] } else { &[] };
    let mut server = db.serve(args);
    let start = Arc::new(Barrier::new(200));
    let statuses = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..200)
        .map(|_| {
            let (client, key, start, statuses): (Client, String, _, _) = (
                server.client(),
                account.api_key.clone(),
                start.clone(),
                statuses.clone(),
            );
            thread::spawn(move || {
                start.wait();
                let status = if bulk {
                    let records = vec![json!({"postalCode": "90210", "countryCode": "US"}); 3];
                    client
                        .post(
                            "/api/validate-bulk",
                            &json!({"apiKey": key, "records": records}),
                        )
                        .0
                } else {
                    client.lookup(&key).0
                };
                statuses.lock().unwrap().push(status);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert!(server.stop("TERM").success());
    let statuses = statuses.lock().unwrap();
    let ok = statuses.iter().filter(|s| **s == 200).count() as i64;
    let payment = statuses.iter().filter(|s| **s == 402).count() as i64;
    let (expected_ok, queries) = if bulk { (16, 3) } else { (50, 1) };
    assert_eq!(
        (ok, payment),
        (expected_ok, 200 - expected_ok),
        "{statuses:?}"
    );
    assert_eq!(db.charged_queries(), expected_ok * queries);
    assert_eq!(
        db.balance(&account.account_id).get(),
        (50 - expected_ok * queries) * 28
    );
    db.assert_ledger_ok();
}

#[test]
fn two_hundred_racing_requests_on_fifty_queries_charge_exactly_fifty_written_behind() {
    race(false, false);
}

#[test]
fn two_hundred_racing_requests_on_fifty_queries_charge_exactly_fifty_durably() {
    race(true, false);
}

#[test]
fn racing_bulk_batches_on_fifty_queries_charge_whole_batches_only() {
    race(false, true);
    race(true, true);
}

#[test]
fn a_failing_flush_answers_503_never_a_free_200_and_recovers() {
    let db = TestDb::with_postal_data();
    let account = db.funded_account();
    // The file-size limit (RLIMIT_FSIZE) makes every write of the database fail like a
    // full disk; SIGXFSZ is ignored so the write returns EFBIG instead of killing.
    let mut server = db.serve_wrapped(Some("trap '' XFSZ;"), &[]);
    assert_eq!(server.lookup(&account.api_key).0, 200);
    let mut answered = 1;
    let limit = |value: &str| {
        let status = std::process::Command::new("prlimit")
            .args(["--pid", &server.pid(), &format!("--fsize={value}")])
            .status()
            .unwrap();
        assert!(status.success());
    };
    limit("1:unlimited");
    // Charges answered before the failing flush are kept; then 503s.
    let mut unavailable = None;
    for _ in 0..500 {
        match server.lookup(&account.api_key) {
            (200, _) => answered += 1,
            (503, body) => {
                unavailable = Some(body);
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
        thread::sleep(Duration::from_millis(5));
    }
    let body = unavailable.unwrap_or_else(|| panic!("no 503: {}", server.log()));
    assert_eq!(
        body,
        json!({"error": "Billing temporarily unavailable, retry shortly"})
    );
    // Still failing: still 503, nothing answered for free.
    thread::sleep(Duration::from_millis(100));
    assert_eq!(server.lookup(&account.api_key).0, 503);
    assert!(
        server.log().contains("billing flush failed"),
        "{}",
        server.log()
    );

    limit("unlimited:unlimited");
    let mut recovered = false;
    for _ in 0..400 {
        match server.lookup(&account.api_key).0 {
            200 => {
                answered += 1;
                recovered = true;
                break;
            }
            503 => thread::sleep(Duration::from_millis(10)),
            other => panic!("unexpected {other}"),
        }
    }
    assert!(recovered, "{}", server.log());
    assert!(server.stop("TERM").success());
    assert_eq!(db.charged_queries(), answered);
    db.assert_ledger_ok();
}

#[test]
fn in_durable_mode_a_replay_is_sent_only_once_its_answer_has_committed() {
    let db = TestDb::with_postal_data();
    let account = db.funded_account();
    let mut server = db.serve_wrapped(Some("trap '' XFSZ;"), &["--durable-charges"]);
    let limit = |value: &str| {
        let status = std::process::Command::new("prlimit")
            .args(["--pid", &server.pid(), &format!("--fsize={value}")])
            .status()
            .unwrap();
        assert!(status.success());
    };
    let body = json!({
        "apiKey": account.api_key,
        "records": [{"postalCode": "90210", "countryCode": "US"}],
    });
    // Flushes fail: the first request is answered 503, its charge and answer pending.
    limit("1:unlimited");
    let first = server.post_keyed("/api/validate-bulk", &body, "order-1");
    assert_eq!(first.0, 503, "{first:?} {}", server.log());
    // Its retry finds the answer in memory only: 503 again, not a 200 the file may
    // never hold.
    thread::sleep(Duration::from_millis(50));
    let retry = server.post_keyed("/api/validate-bulk", &body, "order-1");
    assert_eq!(
        retry,
        (
            503,
            None,
            json!({"error": "Billing temporarily unavailable, retry shortly"})
        )
    );
    // Writes work again: the pending flush commits, and the retry replays the answer.
    limit("unlimited:unlimited");
    let mut replay = None;
    for _ in 0..400 {
        match server.post_keyed("/api/validate-bulk", &body, "order-1") {
            (503, ..) => thread::sleep(Duration::from_millis(10)),
            other => {
                replay = Some(other);
                break;
            }
        }
    }
    let (status, replayed, answer) = replay.unwrap_or_else(|| panic!("{}", server.log()));
    assert_eq!(
        (status, replayed.as_deref()),
        (200, Some("true")),
        "{answer}"
    );
    assert_eq!(answer["results"][0]["valid"], json!(true));
    assert!(server.stop("TERM").success());
    // Charged once, for the one answer given (by replay).
    assert_eq!(db.charged_queries(), 1);
    db.assert_ledger_ok();
}

#[test]
fn a_flush_kept_waiting_is_logged_as_slow_and_still_writes_its_charges() {
    let db = TestDb::with_postal_data();
    let account = db.funded_account();
    let mut server = db.serve(&[]);
    assert_eq!(server.lookup(&account.api_key).0, 200);
    // Another writer holds the database's write lock for 300 ms; the server answers
    // meanwhile, and its next flush waits for the lock.
    let writer = db.conn();
    writer.execute_batch("BEGIN IMMEDIATE").unwrap();
    assert_eq!(server.lookup(&account.api_key).0, 200);
    thread::sleep(Duration::from_millis(300));
    writer.execute_batch("COMMIT").unwrap();
    let logged = (0..500).any(|_| {
        thread::sleep(Duration::from_millis(10));
        server.log().contains("slow billing flush: ")
    });
    assert!(logged, "{}", server.log());
    assert!(server.stop("TERM").success());
    assert_eq!(db.charged_queries(), 2);
    db.assert_ledger_ok();
}
