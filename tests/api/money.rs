//! What each endpoint charges (decisions.md, Money; postal-api.md 8): 28 micro-dollars a
//! query answered 200, nothing for errors; 402 and 429 before any work.

use serde_json::json;

use crate::helpers::{TestApp, code, error, spawn_app};

/// Runs `request` with a fresh account and returns the micro-dollars it cost.
fn cost_of(app: &TestApp, request: impl Fn(&str) -> u16, expected_status: u16) -> i64 {
    let (account, key) = app.create_account();
    let before = app.balance_micros(&account);
    assert_eq!(request(&key), expected_status);
    before - app.balance_micros(&account)
}

#[test]
fn every_answered_query_costs_28_micro_dollars_and_errors_cost_nothing() {
    let app = spawn_app();
    let cases: Vec<(&str, serde_json::Value, u16, i64)> = vec![
        ("/api/lookup", json!({"zipcode": "90210"}), 200, 28),
        ("/api/lookup", json!({"zipcode": "00000"}), 404, 0),
        (
            "/api/lookup",
            json!({"zipcode": "90210", "country": "XX"}),
            400,
            0,
        ),
        ("/api/metacode", json!({"zipcode": "90210"}), 200, 28),
        ("/api/metacode", json!({"zipcode": "00000"}), 404, 0),
        ("/api/metazip", json!({"zipcode": "90210"}), 200, 28),
        ("/api/validate", json!({"zipcode": "90210"}), 200, 28),
        ("/api/validate", json!({"zipcode": "00000"}), 200, 28),
        ("/api/validate", json!({}), 400, 0),
        ("/api/city", json!({"city": "Boston", "ST": "MA"}), 200, 28),
        ("/api/city", json!({"city": "Qwxzvbnm", "ST": "MA"}), 404, 0),
        ("/api/city", json!({"city": "Boston"}), 400, 0),
        (
            "/api/validate-bulk",
            json!({"records": [{"postalCode": "90210", "countryCode": "US"}, {"postalCode": "x", "countryCode": "US"}, {"postalCode": "1", "countryCode": "FR"}]}),
            200,
            84,
        ),
        ("/api/validate-bulk", json!({"records": []}), 400, 0),
        ("/api/aboutapi", json!({}), 200, 0),
    ];
    for (path, fields, status, micros) in cases {
        let cost = cost_of(
            &app,
            |key| {
                let mut body = fields.clone();
                body["apiKey"] = json!(key);
                app.post(path, &body).status
            },
            status,
        );
        assert_eq!(cost, micros, "{path} {fields}");
    }
}

#[test]
fn a_balance_below_one_query_is_a_402_before_the_work_and_charges_nothing() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    app.set_balance(&account, 27);
    for path in [
        "/api/lookup",
        "/api/metacode",
        "/api/metazip",
        "/api/validate",
    ] {
        let reply = app.post(path, &code(&key, json!("90210"), None));
        assert_eq!(
            (reply.status, reply.body),
            (402, error("Insufficient balance")),
            "{path}"
        );
        // 402 comes before 404 (decisions.md, order of checks).
        let reply = app.post(path, &code(&key, json!("00000"), None));
        assert_eq!(reply.status, 402, "{path}");
    }
    let reply = app.city(json!({"apiKey": key, "city": "Boston", "ST": "MA"}));
    assert_eq!(
        (reply.status, reply.body),
        (402, error("Insufficient balance"))
    );
    // The free endpoint still answers.
    assert_eq!(app.aboutapi(json!({"apiKey": key})).status, 200);
    assert_eq!(app.balance_micros(&account), 27);
}

#[test]
fn exactly_one_query_of_balance_pays_one_query_then_402() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    app.set_balance(&account, 28);
    let reply = app.lookup(code(&key, json!("90210"), None));
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["balance"], 0.0);
    assert_eq!(app.lookup(code(&key, json!("90210"), None)).status, 402);
    assert_eq!(app.balance_micros(&account), 0);
}

#[test]
fn a_bulk_the_balance_cannot_cover_is_rejected_whole_and_charges_nothing() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    app.set_balance(&account, 28 * 3 - 1);
    let records: Vec<_> = (0..3)
        .map(|_| json!({"postalCode": "90210", "countryCode": "US"}))
        .collect();
    let reply = app.validate_bulk(json!({"apiKey": key, "records": records}));
    assert_eq!(
        (reply.status, reply.body),
        (402, error("Insufficient balance for bulk request"))
    );
    assert_eq!(app.balance_micros(&account), 28 * 3 - 1);
    let reply = app.validate_bulk(json!({"apiKey": key, "records": &records[..2]}));
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["totalCost"], 0.000056);
    assert_eq!(reply.body["balance"], 0.000027);
}

#[test]
fn a_top_up_by_the_cli_holds_from_the_next_request() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    app.set_balance(&account, 0);
    assert_eq!(app.lookup(code(&key, json!("90210"), None)).status, 402);
    app.cli(&["account", "topup", &account, "--usd", "5.00"]);
    let reply = app.lookup(code(&key, json!("90210"), None));
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["balance"], 4.999972);
}

#[test]
fn a_revoked_key_is_a_401_while_its_sibling_works() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let sibling = app.cli(&["key", "create", &account]);
    let sibling_key = sibling["apiKey"].as_str().unwrap().to_string();
    let shown = app.cli(&["account", "show", &account]);
    let first_key_id = shown["keys"][0]["keyId"].as_str().unwrap().to_string();
    app.cli(&["key", "revoke", &first_key_id]);
    let reply = app.lookup(code(&key, json!("90210"), None));
    assert_eq!((reply.status, reply.body), (401, error("Invalid API key")));
    assert_eq!(
        app.lookup(code(&sibling_key, json!("90210"), None)).status,
        200
    );
}

#[test]
fn rate_limits_report_usage_and_answer_429_with_retry_after() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    app.cli(&[
        "account",
        "limits",
        &account,
        "--per-minute",
        "5",
        "--per-day",
        "1000",
    ]);
    let first = app.lookup(code(&key, json!("90210"), None));
    assert_eq!(first.status, 200);
    let rate = &first.body["rateLimit"];
    assert_eq!(rate["enabled"], true);
    assert_eq!(rate["perMinute"]["limit"], 5);
    assert_eq!(
        rate["perHour"],
        json!({"limit": null, "current": null, "approachingLimit": false})
    );
    assert_eq!(rate["perDay"]["limit"], 1000);
    let minute_used = rate["perMinute"]["current"].as_u64().unwrap();
    assert!((1..=5).contains(&minute_used));

    // Fill the minute (a new minute may start meanwhile; then the loop simply goes on).
    let mut last = first;
    for _ in 0..12 {
        last = app.lookup(code(&key, json!("90210"), None));
        if last.status == 429 {
            break;
        }
        let current = last.body["rateLimit"]["perMinute"]["current"]
            .as_u64()
            .unwrap();
        assert_eq!(
            last.body["rateLimit"]["perMinute"]["approachingLimit"],
            current >= 4
        );
    }
    assert_eq!(last.status, 429, "{:?}", last.body);
    assert_eq!(last.body["error"], "Rate limit exceeded");
    let retry_after = last.body["retryAfter"].as_u64().unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert_eq!(
        last.retry_after.as_deref(),
        Some(retry_after.to_string().as_str())
    );
    assert_eq!(
        last.body.as_object().unwrap().len(),
        2,
        "error and retryAfter only"
    );

    // A bulk that would overflow the window is refused whole, and counts nothing.
    let before = app.balance_micros(&account);
    let reply = app.validate_bulk(
        json!({"apiKey": key, "records": [{"postalCode": "90210", "countryCode": "US"}]}),
    );
    if reply.status == 429 {
        assert_eq!(
            reply.body["error"],
            "Rate limit would be exceeded by this bulk request"
        );
        assert_eq!(app.balance_micros(&account), before);
    }
    // The free endpoint is never rate-limited.
    assert_eq!(app.aboutapi(json!({"apiKey": key})).status, 200);
}

#[test]
fn a_bulk_larger_than_a_window_is_a_429_that_counts_nothing() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    app.cli(&["account", "limits", &account, "--per-hour", "3"]);
    let records: Vec<_> = (0..4)
        .map(|_| json!({"postalCode": "90210", "countryCode": "US"}))
        .collect();
    let reply = app.validate_bulk(json!({"apiKey": key, "records": records}));
    assert_eq!(reply.status, 429);
    assert_eq!(
        reply.body["error"],
        "Rate limit would be exceeded by this bulk request"
    );
    assert!(reply.body["retryAfter"].as_u64().unwrap() >= 1);
    let reply = app.validate_bulk(json!({"apiKey": key, "records": &records[..3]}));
    assert_eq!(reply.status, 200, "the refused bulk counted nothing");
    assert_eq!(
        reply.body["rateLimit"]["perHour"],
        json!({"limit": 3, "current": 3, "approachingLimit": true})
    );
}

#[test]
fn the_checks_come_in_the_contract_order() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    app.set_balance(&account, 0);
    // Parameters (400) before the balance (402).
    let reply = app.lookup(json!({"apiKey": key}));
    assert_eq!(
        (reply.status, reply.body),
        (400, error("Missing required field: zipcode"))
    );
    let reply = app.validate_bulk(json!({"apiKey": key, "records": []}));
    assert_eq!(reply.status, 400);

    // The balance (402) before the rate limits (429).
    let (account, key) = app.create_account();
    app.cli(&["account", "limits", &account, "--per-day", "1"]);
    assert_eq!(app.lookup(code(&key, json!("90210"), None)).status, 200);
    app.set_balance(&account, 0);
    assert_eq!(app.lookup(code(&key, json!("90210"), None)).status, 402);

    // The rate limits (429) before the work (404).
    app.cli(&["account", "topup", &account, "--usd", "5"]);
    let reply = app.lookup(code(&key, json!("00000"), None));
    assert_eq!(reply.status, 429, "{:?}", reply.body);
    assert_eq!(reply.body["error"], "Rate limit exceeded");
}

#[test]
fn a_404_counts_nothing_in_the_rate_windows() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    app.cli(&["account", "limits", &account, "--per-day", "2"]);
    for _ in 0..3 {
        assert_eq!(app.lookup(code(&key, json!("00000"), None)).status, 404);
    }
    let reply = app.lookup(code(&key, json!("90210"), None));
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.body["rateLimit"]["perDay"],
        json!({"limit": 2, "current": 1, "approachingLimit": false})
    );
    let reply = app.validate(code(&key, json!("90210"), None));
    assert_eq!(
        reply.body["rateLimit"]["perDay"],
        json!({"limit": 2, "current": 2, "approachingLimit": true})
    );
}

#[test]
fn a_bulk_of_a_thousand_records_is_one_charge_of_a_thousand_queries() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let records: Vec<_> = (0..1000)
        .map(|_| json!({"postalCode": "90210", "countryCode": "US"}))
        .collect();
    let reply = app.validate_bulk(json!({"apiKey": key, "records": records}));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["results"].as_array().unwrap().len(), 1000);
    assert_eq!(reply.body["totalCost"], 0.028);
    assert_eq!(reply.body["balance"], 0.0);
    assert_eq!(app.balance_micros(&account), 0);
    let reply = app.validate_bulk(
        json!({"apiKey": key, "records": [{"postalCode": "90210", "countryCode": "US"}]}),
    );
    assert_eq!(
        (reply.status, reply.body),
        (402, error("Insufficient balance for bulk request"))
    );
}
