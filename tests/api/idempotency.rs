//! `Idempotency-Key` on /api/validate-bulk and /api/nearest-bulk (docs/money.md,
//! "Idempotent bulk requests"): a retry replays the first answer, uncharged; a reused key
//! is refused; errors are not kept; answers outlive a restart and expire after 24 hours.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{Raw, TestApp, error, spawn_app, spawn_app_with, usd_to_micros};

const OTHER_BODY: &str = "Idempotency-Key already used with a different request body";
const INVALID_KEY: &str = "Invalid Idempotency-Key: 1 to 255 visible ASCII characters";
const IN_PROGRESS: &str = "A request with this Idempotency-Key is still in progress; retry shortly";
const NOT_KEPT: &str = "The answer to this Idempotency-Key was too large to keep and cannot be replayed; send the request with a new key to run it again";

fn records() -> Value {
    json!([
        {"postalCode": "90210", "countryCode": "US"},
        {"postalCode": "SW1A 1AA", "countryCode": "GB"},
        {"postalCode": "ABCDE", "countryCode": "US"},
    ])
}

fn validate(app: &TestApp, body: &Value, idempotency_key: Option<&str>) -> Raw {
    let headers: Vec<(&str, &str)> = idempotency_key
        .map(|k| ("Idempotency-Key", k))
        .into_iter()
        .collect();
    app.post_with("/api/validate-bulk", body, &headers)
}

fn json(answer: &Raw) -> Value {
    serde_json::from_str(&answer.text).expect("a JSON body")
}

/// Queries of the account's charge rows in the ledger (`postal ledger show`).
fn charged_queries(app: &TestApp, account: &str) -> u64 {
    app.balance_micros(account); // announces itself: the server flushes first
    app.cli(&["ledger", "show", account])["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["kind"] == "charge")
        .map(|e| e["queries"].as_u64().expect("queries"))
        .sum()
}

#[test]
fn a_retry_with_the_same_key_and_body_replays_the_first_answer_uncharged() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let body = json!({"apiKey": key, "records": records()});
    let first = validate(&app, &body, Some("order-1138"));
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(first.header("idempotent-replayed"), None);
    assert_eq!(usd_to_micros(&json(&first)["balance"]), 28_000 - 84);
    assert_eq!(app.balance_micros(&account), 28_000 - 84);
    // The same request, its key moved to a header and its fields reordered.
    let moved = json!({"records": records()});
    for retry in 0..3 {
        let replay = app.post_with(
            "/api/validate-bulk",
            &moved,
            &[("Idempotency-Key", "order-1138"), ("X-Api-Key", &key)],
        );
        assert_eq!(replay.status, 200, "retry {retry}: {}", replay.text);
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(replay.text, first.text, "byte for byte");
        assert_eq!(replay.header("content-type"), first.header("content-type"));
    }
    assert_eq!(app.balance_micros(&account), 28_000 - 84);
    assert_eq!(charged_queries(&app, &account), 3);
    assert_eq!(app.cli(&["ledger", "verify"])["ok"], true);
}

#[test]
fn the_same_key_with_another_body_or_operation_is_a_422_that_charges_nothing() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let body = json!({"apiKey": key, "records": records()});
    assert_eq!(validate(&app, &body, Some("k")).status, 200);
    let mut other = body.clone();
    other["records"][0]["postalCode"] = json!("90211");
    let refused = validate(&app, &other, Some("k"));
    assert_eq!((refused.status, json(&refused)), (422, error(OTHER_BODY)));
    assert_eq!(refused.header("idempotent-replayed"), None);
    let points = json!({"apiKey": key, "records": [{"latitude": 34.09, "longitude": -118.41}]});
    let elsewhere = app.post_with("/api/nearest-bulk", &points, &[("Idempotency-Key", "k")]);
    assert_eq!(
        (elsewhere.status, json(&elsewhere)),
        (
            422,
            error("Idempotency-Key already used on /api/validate-bulk")
        )
    );
    assert_eq!(app.balance_micros(&account), 28_000 - 84);
    // A new key is a new request.
    assert_eq!(validate(&app, &other, Some("k2")).status, 200);
    assert_eq!(app.balance_micros(&account), 28_000 - 2 * 84);
}

#[test]
fn another_account_with_the_same_key_and_body_is_another_request() {
    let app = spawn_app();
    let (first_account, first_key) = app.create_account();
    let (second_account, second_key) = app.create_account();
    let first = validate(
        &app,
        &json!({"apiKey": first_key, "records": records()}),
        Some("shared"),
    );
    let second = validate(
        &app,
        &json!({"apiKey": second_key, "records": records()}),
        Some("shared"),
    );
    assert_eq!((first.status, second.status), (200, 200));
    assert_eq!(second.header("idempotent-replayed"), None);
    assert_eq!(app.balance_micros(&first_account), 28_000 - 84);
    assert_eq!(app.balance_micros(&second_account), 28_000 - 84);
}

#[test]
fn nearest_bulk_replays_its_answer_uncharged_too() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let body = json!({"apiKey": key, "limit": 3, "records": [
        {"latitude": 34.09, "longitude": -118.41, "id": "a"},
        {"latitude": 52.52, "longitude": 13.40, "id": 7},
    ]});
    let first = app.post_with("/api/nearest-bulk", &body, &[("Idempotency-Key", "n-1")]);
    assert_eq!(first.status, 200, "{}", first.text);
    let replay = app.post_with("/api/nearest-bulk", &body, &[("Idempotency-Key", "n-1")]);
    assert_eq!(replay.status, 200);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.text, first.text);
    assert_eq!(app.balance_micros(&account), 28_000 - 56);
    let mut wider = body.clone();
    wider["limit"] = json!(4);
    let refused = app.post_with("/api/nearest-bulk", &wider, &[("Idempotency-Key", "n-1")]);
    assert_eq!((refused.status, json(&refused)), (422, error(OTHER_BODY)));
}

#[test]
fn a_malformed_key_is_a_400_after_the_api_key_and_charges_nothing() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let body = json!({"apiKey": key, "records": records()});
    let long = "k".repeat(256);
    for bad in ["with space", "", long.as_str()] {
        let refused = validate(&app, &body, Some(bad));
        assert_eq!(
            (refused.status, json(&refused)),
            (400, error(INVALID_KEY)),
            "{bad:?}"
        );
    }
    let twice = app.post_with(
        "/api/validate-bulk",
        &body,
        &[("Idempotency-Key", "a"), ("Idempotency-Key", "b")],
    );
    assert_eq!((twice.status, json(&twice)), (400, error(INVALID_KEY)));
    // The API key is checked first; a body error of a lower rank (records) after the key.
    let unknown = json!({"apiKey": "sk_unknown", "records": records()});
    assert_eq!(validate(&app, &unknown, Some("with space")).status, 401);
    let empty = json!({"apiKey": key, "records": []});
    let refused = validate(&app, &empty, Some("with space"));
    assert_eq!((refused.status, json(&refused)), (400, error(INVALID_KEY)));
    assert_eq!(app.balance_micros(&account), 28_000);
    // 255 characters is a key.
    assert_eq!(validate(&app, &body, Some(&"k".repeat(255))).status, 200);
}

#[test]
fn an_error_is_not_kept_so_its_retry_runs_and_is_charged_once() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let body = json!({"apiKey": key, "records": records()});
    app.set_balance(&account, 83);
    let refused = validate(&app, &body, Some("retry-me"));
    assert_eq!(
        (refused.status, json(&refused)),
        (402, error("Insufficient balance for bulk request"))
    );
    app.set_balance(&account, 84);
    let answered = validate(&app, &body, Some("retry-me"));
    assert_eq!(answered.status, 200);
    assert_eq!(answered.header("idempotent-replayed"), None);
    assert_eq!(usd_to_micros(&json(&answered)["balance"]), 0);
    // Replayed with a balance of 0: a replay charges nothing, so nothing refuses it.
    let replay = validate(&app, &body, Some("retry-me"));
    assert_eq!((replay.status, replay.text), (200, answered.text));
    assert_eq!(app.balance_micros(&account), 0);
}

#[test]
fn a_replay_is_uncharged_but_counted_in_the_rate_windows() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    app.cli(&["account", "limits", &account, "--per-minute", "7"]);
    // The minute's count must not be cut by the minute's end.
    crate::browser::with_seconds_left_in_the_minute(20);
    let body = json!({"apiKey": key, "records": records()});
    let first = validate(&app, &body, Some("windowed"));
    assert_eq!(first.status, 200);
    assert_eq!(json(&first)["rateLimit"]["perMinute"]["current"], 3);
    // The replay is the stored answer (its window as then), its 3 queries counted now:
    // 6 of 7 used, so one single record still passes and then the window is full.
    let replay = validate(&app, &body, Some("windowed"));
    assert_eq!(replay.header("ratelimit"), None);
    assert_eq!((replay.status, &replay.text), (200, &first.text));
    let single = json!({"apiKey": key, "records": [records()[0]]});
    let last = validate(&app, &single, None);
    assert_eq!(json(&last)["rateLimit"]["perMinute"]["current"], 7);
    // Full: a replay is refused as a new request would be, and charges nothing.
    let refused = validate(&app, &body, Some("windowed"));
    assert_eq!(refused.status, 429, "{}", refused.text);
    assert_eq!(
        json(&refused)["error"],
        "Rate limit would be exceeded by this bulk request"
    );
    assert_eq!(charged_queries(&app, &account), 4);
    assert_eq!(app.balance_micros(&account), 28_000 - 4 * 28);
}

#[test]
fn an_answer_too_large_to_keep_is_sent_once_and_its_retry_is_a_422() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    // 200 points x 100 neighbours: over 2 MiB of JSON.
    let points: Vec<Value> = (0..200)
        .map(|i| json!({"latitude": 40.0 + f64::from(i) * 0.01, "longitude": -100.0}))
        .collect();
    let body = json!({"apiKey": key, "records": points, "limit": 100});
    let first = app.post_with("/api/nearest-bulk", &body, &[("Idempotency-Key", "big")]);
    assert_eq!(
        first.status,
        200,
        "{}",
        &first.text[..first.text.len().min(300)]
    );
    assert!(first.text.len() > 2 * 1024 * 1024, "{}", first.text.len());
    assert_eq!(app.balance_micros(&account), 28_000 - 200 * 28);
    for _ in 0..2 {
        let retry = app.post_with("/api/nearest-bulk", &body, &[("Idempotency-Key", "big")]);
        assert_eq!(
            (retry.status, json(&retry)),
            (422, error(NOT_KEPT)),
            "the retry is told, not run"
        );
    }
    // Not kept, but still the key's: another body is refused as ever.
    let mut other = body.clone();
    other["limit"] = json!(99);
    let refused = app.post_with("/api/nearest-bulk", &other, &[("Idempotency-Key", "big")]);
    assert_eq!((refused.status, json(&refused)), (422, error(OTHER_BODY)));
    assert_eq!(app.balance_micros(&account), 28_000 - 200 * 28);
    assert_eq!(charged_queries(&app, &account), 200);
    // A new key runs it again, charged again.
    let again = app.post_with("/api/nearest-bulk", &body, &[("Idempotency-Key", "big-2")]);
    assert_eq!(again.status, 200);
    assert_eq!(app.balance_micros(&account), 28_000 - 400 * 28);
}

#[test]
fn concurrent_retries_run_the_work_once_and_charge_once() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    app.cli(&["account", "topup", &account, "--usd", "5"]);
    let before = app.balance_micros(&account);
    let points: Vec<Value> = (0..1000)
        .map(|i| json!({"latitude": -60.0 + f64::from(i) * 0.12, "longitude": f64::from(i % 360) - 180.0}))
        .collect();
    let body = json!({"apiKey": key, "records": points, "limit": 10});
    let answers: Vec<Raw> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..6)
            .map(|_| {
                scope.spawn(|| {
                    app.post_with("/api/nearest-bulk", &body, &[("Idempotency-Key", "race")])
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let fresh: Vec<&Raw> = answers
        .iter()
        .filter(|a| a.status == 200 && a.header("idempotent-replayed").is_none())
        .collect();
    assert_eq!(fresh.len(), 1, "exactly one request ran");
    for answer in &answers {
        match answer.status {
            200 => assert_eq!(answer.text, fresh[0].text),
            409 => assert_eq!(json(answer), error(IN_PROGRESS)),
            other => panic!("{other}: {}", answer.text),
        }
    }
    assert_eq!(before - app.balance_micros(&account), 28_000);
}

#[test]
fn a_replay_outlives_a_restart_of_the_server() {
    let mut app = spawn_app();
    let (account, key) = app.create_account();
    let body = json!({"apiKey": key, "records": records()});
    let first = validate(&app, &body, Some("before-restart"));
    assert_eq!(first.status, 200);
    app.restart_after(|_| {});
    let replay = validate(&app, &body, Some("before-restart"));
    assert_eq!(replay.status, 200, "{}", replay.text);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.text, first.text);
    let mut other = body.clone();
    other["records"][1]["countryCode"] = json!("gb");
    assert_eq!(validate(&app, &other, Some("before-restart")).status, 422);
    assert_eq!(app.balance_micros(&account), 28_000 - 84);
    assert_eq!(app.cli(&["ledger", "verify"])["ok"], true);
}

#[test]
fn an_answer_older_than_24_hours_is_not_replayed_and_its_row_is_purged() {
    let mut app = spawn_app();
    let (account, key) = app.create_account();
    let body = json!({"apiKey": key, "records": records()});
    let first = validate(&app, &body, Some("old"));
    assert_eq!(first.status, 200);
    assert_eq!(validate(&app, &body, Some("older")).status, 200);
    let age = |db: &std::path::Path, key: &str, seconds: i64| {
        let conn = rusqlite::Connection::open(db).unwrap();
        let changed = conn
            .execute(
                "UPDATE idempotent_answers SET created_at = created_at - ?1 WHERE idempotency_key = ?2",
                rusqlite::params![seconds, key],
            )
            .unwrap();
        assert_eq!(changed, 1);
    };
    // Answered 24 hours ago: expired, kept a minute more; 25 hours ago: purged.
    app.restart_after(|db| {
        age(db, "old", 24 * 3600);
        age(db, "older", 25 * 3600);
    });
    let rows = |app: &TestApp| -> Vec<String> {
        let conn = rusqlite::Connection::open(&app.db).unwrap();
        let mut stmt = conn
            .prepare("SELECT idempotency_key FROM idempotent_answers ORDER BY idempotency_key")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while rows(&app) != ["old"] {
        assert!(std::time::Instant::now() < deadline, "{:?}", rows(&app));
        std::thread::sleep(Duration::from_millis(50));
    }
    let again = validate(&app, &body, Some("old"));
    assert_eq!(again.status, 200);
    assert_eq!(again.header("idempotent-replayed"), None);
    assert_eq!(usd_to_micros(&json(&again)["balance"]), 28_000 - 3 * 84);
    // Its new answer replaces the expired one, and replays.
    let replay = validate(&app, &body, Some("old"));
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.text, again.text);
    assert_eq!(app.balance_micros(&account), 28_000 - 3 * 84);
}

#[test]
fn with_durable_charges_the_answer_is_kept_and_replayed_uncharged_too() {
    let app = spawn_app_with(postal::api::Settings {
        billing: postal::billing::BillingOptions {
            durable: true,
            ..Default::default()
        },
        ..Default::default()
    });
    let (account, key) = app.create_account();
    let body = json!({"apiKey": key, "records": records()});
    let first = validate(&app, &body, Some("durable"));
    assert_eq!(first.status, 200);
    let replay = validate(&app, &body, Some("durable"));
    assert_eq!((replay.status, &replay.text), (200, &first.text));
    assert_eq!(app.balance_micros(&account), 28_000 - 84);
}

#[test]
fn without_a_key_each_request_runs_and_is_charged() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let body = json!({"apiKey": key, "records": records()});
    for _ in 0..2 {
        let answer = validate(&app, &body, None);
        assert_eq!(answer.status, 200);
        assert_eq!(answer.header("idempotent-replayed"), None);
    }
    assert_eq!(app.balance_micros(&account), 28_000 - 2 * 84);
    // Other operations ignore the header.
    let lookup = json!({"apiKey": key, "zipcode": "90210"});
    for _ in 0..2 {
        let answer = app.post_with("/api/lookup", &lookup, &[("Idempotency-Key", "x")]);
        assert_eq!(answer.status, 200);
    }
    assert_eq!(app.balance_micros(&account), 28_000 - 2 * 84 - 56);
}
