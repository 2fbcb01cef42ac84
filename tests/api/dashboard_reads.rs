//! A GET of the dashboard changes nothing (issue 50, M2): `/me`'s balance is the books'
//! (every charge answered, none flushed for it), no read makes the books reload or writes
//! a session's last use more than once a minute; the ledger comes a page at a time, the
//! audit log's CSV whole however many pages it is read in (on the file and the ledger).

use std::time::Duration;

use serde_json::{Value, json};

use crate::account::{Browser, providers, two_nodes};
use crate::helpers::{TestApp, spawn_app_with};
use crate::strangers::counter;

fn stored(app: &TestApp, sql: &str) -> i64 {
    let conn = rusqlite::Connection::open(&app.db).unwrap();
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

#[test]
fn reads_flush_nothing_reload_nothing_and_mark_a_session_once_a_minute() {
    // Charges are flushed at most every minute: what /me shows is the books' own.
    let app = spawn_app_with(postal::api::Settings {
        billing: postal::billing::BillingOptions {
            flush_interval: Duration::from_secs(60),
            durable: false,
        },
        ..Default::default()
    });
    let Some(_providers) = providers(&app) else {
        return;
    };
    let mut browser = Browser::new();
    browser.sign_in(&app, "p1", "alice");
    let (status, key) = browser.api(&app, "POST", "/keys", Some(json!({"name": "k"})));
    assert_eq!(status, 201, "{key}");
    let key = key["apiKey"].as_str().unwrap().to_owned();
    let (_, me) = browser.api(&app, "GET", "/me", None);
    let before = me["balance"].as_f64().unwrap();
    let stored_before = stored(&app, "SELECT sum(balance) FROM accounts");

    for _ in 0..3 {
        let reply = app.post("/api/lookup", &json!({"apiKey": key, "zipcode": "90210"}));
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    let reloads = counter(&app, "billing_reloads");
    let seen = "SELECT max(seen_at) FROM sessions";
    let seen_before = stored(&app, seen);
    for path in [
        "/me",
        "/keys",
        "/usage",
        "/ledger",
        "/sessions",
        "/audit",
        "/topups",
    ] {
        for _ in 0..5 {
            let (status, body) = browser.api(&app, "GET", path, None);
            assert_eq!(status, 200, "{path}: {body}");
        }
    }
    // Three charges of 28 micro-dollars, in /me to the micro-dollar, none flushed.
    let (_, me) = browser.api(&app, "GET", "/me", None);
    assert_eq!(
        (me["balance"].as_f64().unwrap() * 1e6).round() as i64,
        (before * 1e6).round() as i64 - 84,
        "{me}"
    );
    assert_eq!(
        stored(&app, "SELECT sum(balance) FROM accounts"),
        stored_before
    );
    assert_eq!(
        stored(&app, "SELECT count(*) FROM ledger WHERE kind = 'charge'"),
        0
    );
    // 36 reads: no reload of the books, and the session's last use written at most once.
    assert_eq!(counter(&app, "billing_reloads"), reloads);
    let seen_after = stored(&app, seen);
    assert!(
        seen_after - seen_before <= 60,
        "{seen_before} -> {seen_after}"
    );

    // A last use a minute old is written again, and still makes the books reload nothing.
    let conn = rusqlite::Connection::open(&app.db).unwrap();
    conn.execute("UPDATE sessions SET seen_at = seen_at - 61", [])
        .unwrap();
    let marked = stored(&app, seen);
    let reloads = counter(&app, "billing_reloads");
    assert_eq!(browser.api(&app, "GET", "/me", None).0, 200);
    assert!(stored(&app, seen) >= marked + 61);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(counter(&app, "billing_reloads"), reloads);
    // A change of what the books hold still reloads them.
    app.cli(&[
        "account",
        "topup",
        me["accountId"].as_str().unwrap(),
        "--usd",
        "5",
    ]);
    assert!(counter(&app, "billing_reloads") > reloads);
}

/// The `entries` of every page of `path` (`limit=3`), following `nextCursor`; the pages'
/// lengths.
fn pages(browser: &mut Browser, app: &TestApp, path: &str) -> (Vec<Value>, Vec<usize>) {
    let (mut all, mut lengths) = (Vec::new(), Vec::new());
    let mut cursor: Option<String> = None;
    loop {
        let asked = match &cursor {
            None => format!("{path}?limit=3"),
            Some(c) => format!("{path}?limit=3&cursor={c}"),
        };
        let (status, page) = browser.api(app, "GET", &asked, None);
        assert_eq!(status, 200, "{page}");
        let entries = page["entries"].as_array().unwrap();
        lengths.push(entries.len());
        all.extend(entries.iter().cloned());
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => {
                assert_eq!(page["nextCursor"], Value::Null);
                return (all, lengths);
            }
        }
    }
}

#[test]
fn the_audit_log_comes_newest_first_a_page_at_a_time_and_whole_as_csv() {
    let app = spawn_app_with(Default::default());
    let Some(_providers) = providers(&app) else {
        return;
    };
    let mut browser = Browser::new();
    browser.sign_in(&app, "p1", "carol");
    for name in ["a", "b", "c", "d", "e"] {
        let (status, _) = browser.api(&app, "POST", "/keys", Some(json!({"name": name})));
        assert_eq!(status, 201);
    }
    // account.create, session.start, five key.create: newest first, 3 + 3 + 1.
    let (lines, lengths) = pages(&mut browser, &app, "/audit");
    assert_eq!(lengths, [3, 3, 1]);
    let actions: Vec<&str> = lines
        .iter()
        .map(|l| l["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "key.create",
            "key.create",
            "key.create",
            "key.create",
            "key.create",
            "session.start",
            "account.create"
        ]
    );
    assert!(
        lines[0]["detail"].as_str().unwrap().contains("named \"e\""),
        "{}",
        lines[0]
    );
    // The CSV: every line, oldest first.
    let csv = browser.get(&format!("{}/account/api/audit?format=csv", app.address));
    assert_eq!(csv.status, 200);
    let csv_actions: Vec<&str> = csv
        .body
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(2).unwrap())
        .collect();
    let mut oldest_first = actions.clone();
    oldest_first.reverse();
    assert_eq!(csv_actions, oldest_first, "{}", csv.body);
    assert_eq!(
        browser.api(&app, "GET", "/audit?cursor=abc", None),
        (400, json!({"error": "Invalid 'cursor'"}))
    );
}

#[test]
fn the_ledger_comes_newest_first_a_page_at_a_time() {
    let app = spawn_app_with(Default::default());
    let Some(_providers) = providers(&app) else {
        return;
    };
    let mut browser = Browser::new();
    browser.sign_in(&app, "p1", "bob");
    let (_, me) = browser.api(&app, "GET", "/me", None);
    let account = me["accountId"].as_str().unwrap().to_owned();
    for cents in 1..=6 {
        let usd = format!("5.{cents:02}");
        app.cli(&["account", "topup", &account, "--usd", &usd]);
    }
    // The grant and six top-ups, the CLI's oldest first.
    let shown = app.cli(&["ledger", "show", &account]);
    let mut all: Vec<Value> = shown["entries"].as_array().unwrap().clone();
    assert_eq!(all.len(), 7, "{shown}");
    all.reverse();

    let (entries, lengths) = pages(&mut browser, &app, "/ledger");
    for (entry, expected) in entries.iter().zip(&all) {
        assert_eq!(entry["at"], expected["at"]);
        assert_eq!(entry["kind"], expected["kind"]);
        assert_eq!(
            entry["balanceAfter"].as_f64(),
            expected["balanceAfter"].as_f64(),
            "{entry} {expected}"
        );
    }
    assert_eq!(entries.len(), all.len());
    assert_eq!(lengths, [3, 3, 1]);
    // The default page holds all seven; bounds and cursors that are not answered ones.
    let (_, whole) = browser.api(&app, "GET", "/ledger", None);
    assert_eq!(whole["entries"].as_array().unwrap().len(), 7);
    assert_eq!(whole["nextCursor"], Value::Null);
    for bad in ["x", "0", "-5", "1e3"] {
        assert_eq!(
            browser.api(&app, "GET", &format!("/ledger?cursor={bad}"), None),
            (400, json!({"error": "Invalid 'cursor'"}))
        );
    }
    for limit in ["0", "501"] {
        let (status, _) = browser.api(&app, "GET", &format!("/ledger?limit={limit}"), None);
        assert_eq!(status, 400, "limit={limit}");
    }
}

/// SQL, for either store, that writes 1,234 lines more in `account`'s audit log: two
/// pages of the CSV's 500 and part of a third, each detail to be quoted (a comma, a quote,
/// a line break) and numbered.
fn many_audit_lines(account: &str) -> String {
    format!(
        "WITH RECURSIVE n (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 1233)
         INSERT INTO audit_log (account_id, at, actor, action, detail)
         SELECT a.id, 1796000000 + n.i, 'operator (CLI)', 'limits.set',
                'line ' || n.i || ', \"quoted\"\nand broken'
         FROM n, accounts a WHERE a.public_id = '{account}'"
    )
}

/// The audit log's CSV at `address` (the browser signed in there, the log made of a
/// sign-in and `many_audit_lines`): byte for byte the JSON pages, oldest first, written as
/// one CSV; every numbered line once, in order; streamed (chunked, no length).
fn the_csv_is_the_json_pages_oldest_first(browser: &mut Browser, address: &str) {
    let mut lines = Vec::new();
    let mut cursor = String::new();
    loop {
        let path = format!("/audit?limit=500{cursor}");
        let (status, page) = browser.api_at(address, "GET", &path, None);
        assert_eq!(status, 200, "{page}");
        lines.extend(page["entries"].as_array().unwrap().iter().cloned());
        match page["nextCursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    lines.reverse();
    assert_eq!(
        lines.len(),
        1234 + 2,
        "account.create and session.start first"
    );
    let fields = ["at", "actor", "action", "detail"];
    let mut expected = csv::Writer::from_writer(Vec::new());
    expected.write_record(fields).unwrap();
    for line in &lines {
        expected
            .write_record(fields.map(|f| line[f].as_str().unwrap()))
            .unwrap();
    }
    let expected = String::from_utf8(expected.into_inner().unwrap()).unwrap();

    let url = format!("{address}/account/api/audit?format=csv");
    let csv = browser.get(&url);
    assert_eq!(csv.status, 200);
    assert!(csv.body == expected, "the CSV differs from the JSON pages");
    let numbered: Vec<usize> = csv::Reader::from_reader(csv.body.as_bytes())
        .records()
        .skip(2)
        .map(|r| {
            r.unwrap()[3].split(',').next().unwrap()[5..]
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(numbered, (0..1234).collect::<Vec<_>>());

    let response = ureq::get(&url)
        .header("cookie", browser.cookie_header(&url))
        .header("accept-encoding", "identity")
        .call()
        .unwrap();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    assert_eq!(
        header("content-type").as_deref(),
        Some("text/csv; charset=utf-8")
    );
    assert_eq!(header("content-length"), None);
    assert_eq!(header("transfer-encoding").as_deref(), Some("chunked"));
}

#[test]
fn the_audit_logs_csv_of_many_pages_comes_whole_in_order_every_line_once() {
    let app = spawn_app_with(Default::default());
    let Some(_providers) = providers(&app) else {
        return;
    };
    let mut browser = Browser::new();
    browser.sign_in(&app, "p1", "dave");
    let (_, me) = browser.api(&app, "GET", "/me", None);
    let account = me["accountId"].as_str().unwrap();
    let conn = rusqlite::Connection::open(&app.db).unwrap();
    conn.execute_batch(&many_audit_lines(account)).unwrap();
    the_csv_is_the_json_pages_oldest_first(&mut browser, &app.address);
}

#[test]
fn on_the_ledger_the_audit_logs_csv_of_many_pages_comes_whole_in_order_too() {
    let Some(cluster) = two_nodes() else {
        return;
    };
    let mut browser = Browser::new();
    browser.sign_in_at(&cluster.a, "p1", "dave");
    let (_, me) = browser.api_at(&cluster.a, "GET", "/me", None);
    let account = me["accountId"].as_str().unwrap();
    cluster.pg.execute(&many_audit_lines(account));
    the_csv_is_the_json_pages_oldest_first(&mut browser, &cluster.a);
}
