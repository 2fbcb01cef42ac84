//! A publishable key's budget (`--max-per-minute`, `--max-per-day`, the dashboard's
//! `maxPerMinute`/`maxPerDay`): its requests over every client IP, refused with the
//! per-IP limit's 429 and uncharged once spent.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::account::{Browser, providers};
use crate::browser::with_seconds_left_in_the_minute;
use crate::helpers::{TestApp, spawn_app, spawn_app_with};

const SHOP: &str = "https://shop.example";

/// `postal key create ACCOUNT --publishable --origin SHOP` with `extra`; its output.
fn publishable(app: &TestApp, account: &str, extra: &[&str]) -> Value {
    let mut args = vec!["key", "create", account, "--publishable", "--origin", SHOP];
    args.extend_from_slice(extra);
    app.cli(&args)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A server that takes `X-Forwarded-For` from 127.0.0.1, so that a test is many clients.
fn behind_a_proxy() -> TestApp {
    spawn_app_with(postal::api::Settings {
        trusted_proxies: vec!["127.0.0.1/32".parse().unwrap()],
        ..Default::default()
    })
}

#[test]
fn a_publishable_keys_minute_budget_bounds_its_requests_over_every_ip() {
    let app = behind_a_proxy();
    let (account, _) = app.create_account();
    let created = publishable(&app, &account, &["--max-per-minute", "3"]);
    let key = created["apiKey"].as_str().unwrap();
    let request = json!({"apiKey": key, "zipcode": "90210"});
    let from = |client: &'static str| [("origin", SHOP), ("x-forwarded-for", client)];
    with_seconds_left_in_the_minute(20);
    for client in ["198.51.100.1", "198.51.100.2", "2001:db8:1::1"] {
        let reply = app.post_with("/api/lookup", &request, &from(client));
        assert_eq!(reply.status, 200, "{client}: {}", reply.text);
        // The visitor sees its own minute under the per-IP limit, never the key's total.
        let answer: Value = serde_json::from_str(&reply.text).unwrap();
        assert_eq!(
            answer["rateLimit"]["perMinute"],
            json!({"limit": 60, "current": 1, "approachingLimit": false}),
            "{client}"
        );
        assert_eq!(
            reply.header("ratelimit-policy"),
            Some("\"minute\";q=60;w=60")
        );
    }
    let before = app.balance_micros(&account);
    let refused = app.post_with("/api/lookup", &request, &from("203.0.113.4"));
    assert_eq!(refused.status, 429, "{}", refused.text);
    let retry_after: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    let left = 60 - now_secs() % 60;
    assert!((left..=left + 1).contains(&retry_after), "{retry_after}");
    assert_eq!(
        serde_json::from_str::<Value>(&refused.text).unwrap(),
        json!({"error": "Rate limit exceeded", "retryAfter": retry_after})
    );
    assert_eq!(refused.header("access-control-allow-origin"), Some(SHOP));
    assert_eq!(app.balance_micros(&account), before);
    // A client already seen is refused too: the budget is the key's, whoever asks.
    let again = app.post_with("/api/lookup", &request, &from("198.51.100.1"));
    assert_eq!(again.status, 429, "{}", again.text);
    // Another key of the account has its own budget; a key without one, none.
    let other = publishable(&app, &account, &[]);
    let other = json!({"apiKey": other["apiKey"], "zipcode": "90210"});
    for client in ["198.51.100.1", "198.51.100.2", "203.0.113.4", "203.0.113.5"] {
        let reply = app.post_with("/api/lookup", &other, &from(client));
        assert_eq!(reply.status, 200, "{client}: {}", reply.text);
    }
    assert_eq!(app.balance_micros(&account), before - 4 * 28);
}

#[test]
fn a_publishable_keys_day_budget_is_refused_until_midnight_utc() {
    // Not across midnight: the day's count would start again mid-test.
    let to_midnight = 86_400 - now_secs() % 86_400;
    if to_midnight < 30 {
        std::thread::sleep(Duration::from_secs(to_midnight + 1));
    }
    let app = spawn_app();
    let (account, _) = app.create_account();
    let created = publishable(
        &app,
        &account,
        &["--max-per-day", "2", "--max-per-minute", "5"],
    );
    assert_eq!(
        (
            created["maxPerMinute"].clone(),
            created["maxPerDay"].clone()
        ),
        (json!(5), json!(2))
    );
    let request = json!({"apiKey": created["apiKey"], "zipcode": "90210"});
    let origin = [("origin", SHOP)];
    for _ in 0..2 {
        let reply = app.post_with("/api/lookup", &request, &origin);
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    let before = app.balance_micros(&account);
    let refused = app.post_with("/api/lookup", &request, &origin);
    assert_eq!(refused.status, 429, "{}", refused.text);
    let retry_after: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    let left = 86_400 - now_secs() % 86_400;
    assert!((left..=left + 1).contains(&retry_after), "{retry_after}");
    assert_eq!(
        serde_json::from_str::<Value>(&refused.text).unwrap(),
        json!({"error": "Rate limit exceeded", "retryAfter": retry_after})
    );
    assert_eq!(app.balance_micros(&account), before);
}

#[test]
fn the_dashboard_makes_and_lists_a_publishable_key_with_a_budget() {
    let app = spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let mut browser = Browser::new();
    browser.sign_in(&app, "p1", "bob");
    let new_key = |budget: Value| {
        let mut body = json!({"kind": "publishable", "origins": [SHOP], "perIpMinute": 10});
        body.as_object_mut()
            .unwrap()
            .extend(budget.as_object().unwrap().clone());
        body
    };
    for (budget, error) in [
        (json!({"maxPerMinute": 0}), "Invalid 'maxPerMinute'"),
        (json!({"maxPerDay": -1}), "Invalid 'maxPerDay'"),
        (json!({"maxPerDay": "100"}), "Invalid 'maxPerDay'"),
        (
            json!({"maxPerMinute": 4_294_967_296u64}),
            "Invalid 'maxPerMinute'",
        ),
    ] {
        assert_eq!(
            browser.api(&app, "POST", "/keys", Some(new_key(budget.clone()))),
            (400, json!({"error": error})),
            "{budget}"
        );
    }
    assert_eq!(
        browser.api(&app, "GET", "/keys", None),
        (200, json!({"keys": []}))
    );

    let (status, created) = browser.api(
        &app,
        "POST",
        "/keys",
        Some(new_key(json!({"maxPerMinute": 100, "maxPerDay": 5000}))),
    );
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        (
            &created["perIpMinute"],
            &created["maxPerMinute"],
            &created["maxPerDay"]
        ),
        (&json!(10), &json!(100), &json!(5000))
    );
    let (status, plain) = browser.api(
        &app,
        "POST",
        "/keys",
        Some(new_key(json!({"maxPerDay": null}))),
    );
    assert_eq!(status, 201, "{plain}");
    let (_, keys) = browser.api(&app, "GET", "/keys", None);
    let listed = keys["keys"].as_array().unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["maxPerMinute"], 100);
    assert_eq!(listed[0]["maxPerDay"], 5000);
    // No budget: the fields are left out, as the CLI leaves them out.
    assert_eq!(listed[1].get("maxPerMinute"), None);
    assert_eq!(listed[1].get("maxPerDay"), None);
    // A rolled key keeps its budget.
    let roll = format!("/keys/{}/roll", created["keyId"].as_str().unwrap());
    let (status, rolled) = browser.api(&app, "POST", &roll, Some(json!({"graceHours": 1})));
    assert_eq!(status, 201, "{rolled}");
    assert_eq!(
        (&rolled["maxPerMinute"], &rolled["maxPerDay"]),
        (&json!(100), &json!(5000))
    );

    // The operator's `key list` shows the same budget.
    let (_, me) = browser.api(&app, "GET", "/me", None);
    let cli = app.cli(&["key", "list", me["accountId"].as_str().unwrap()]);
    assert_eq!(
        (
            &cli["keys"][0]["maxPerMinute"],
            &cli["keys"][0]["maxPerDay"]
        ),
        (&json!(100), &json!(5000))
    );
    assert_eq!(cli["keys"][1].get("maxPerMinute"), None);
}
