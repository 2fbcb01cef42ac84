//! Strangers cost nothing: a Stripe webhook delivery without a well-formed
//! `Stripe-Signature` and a session cookie that is not the shape of one are refused without
//! a call of the account store, and the sign-in page reads its providers once; a delivery signed with another secret rereads the payment
//! settings at most once a second; `postal_account_store_calls_total` (and
//! `postal_billing_reloads_total`) in /metrics say so.

use std::time::Instant;

use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app, spawn_app_with};
use crate::payments::{deliver, enable_payments};

/// `postal_<name>_total` of the app's /metrics.
pub(crate) fn counter(app: &TestApp, name: &str) -> u64 {
    let scrape = app.get_with("/metrics", &[]).text;
    let line = format!("postal_{name}_total ");
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(&line))
        .unwrap_or_else(|| panic!("{line}in {scrape}"))
        .trim()
        .parse()
        .unwrap()
}

fn me_with_cookie(app: &TestApp, cookie: &str) -> (u16, Value) {
    let reply = app.get_with("/account/api/me", &[("cookie", cookie)]);
    (reply.status, serde_json::from_str(&reply.text).unwrap())
}

#[test]
fn unsigned_deliveries_and_junk_cookies_make_no_call_of_the_store() {
    let app = spawn_app();
    let before = counter(&app, "account_store_calls");
    for _ in 0..100 {
        assert_eq!(
            deliver(&app.address, "{}", None),
            (400, json!({"error": "Missing Stripe-Signature header"}))
        );
        assert_eq!(
            deliver(&app.address, "{}", Some("t=1")),
            (
                400,
                json!({"error": "Stripe-Signature has no timestamp or no v1 signature"})
            )
        );
        for cookie in [
            "postal_session=junk",
            &format!("postal_session={}", "!".repeat(43)),
        ] {
            assert_eq!(
                me_with_cookie(&app, cookie),
                (401, json!({"error": "Not signed in"}))
            );
        }
    }
    assert_eq!(counter(&app, "account_store_calls"), before);

    // The sign-in page: its providers read once, then held.
    for _ in 0..100 {
        assert_eq!(app.get_with("/account", &[]).status, 200);
    }
    let after_page = counter(&app, "account_store_calls");
    assert!(
        (before + 1..=before + 2).contains(&after_page),
        "{} reads for 100 pages (a second one only if the books reloaded meanwhile)",
        after_page - before
    );

    // A cookie of a session id's shape is looked up (the counter counts).
    let unknown = format!("postal_session={}", "A".repeat(43));
    assert_eq!(
        me_with_cookie(&app, &unknown),
        (401, json!({"error": "Not signed in"}))
    );
    assert_eq!(counter(&app, "account_store_calls"), after_page + 1);
}

#[test]
fn deliveries_signed_with_another_secret_read_the_settings_at_most_once_a_second() {
    let app = spawn_app();
    let db = app.db.to_str().unwrap().to_owned();
    enable_payments(&["--db", &db], "http://127.0.0.1:9");
    let reloads = counter(&app, "billing_reloads");
    assert!(reloads >= 1, "the CLI's change was held before it returned");
    let before = counter(&app, "account_store_calls");
    let started = Instant::now();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let forged = format!("t={now},v1={}", "00".repeat(32));
    for _ in 0..200 {
        assert_eq!(
            deliver(&app.address, "{}", Some(&forged)),
            (
                400,
                json!({"error": "No v1 signature of Stripe-Signature matches the webhook secret"})
            )
        );
    }
    let seconds = started.elapsed().as_secs();
    let calls = counter(&app, "account_store_calls") - before;
    assert!(
        (1..=2 + seconds).contains(&calls),
        "{calls} reads of the settings in {seconds} s"
    );
    assert_eq!(counter(&app, "billing_reloads"), reloads);

    // Off: the server holds it before the CLI returns.
    app.cli(&["payments", "off"]);
    assert_eq!(
        deliver(&app.address, "{}", Some(&forged)),
        (
            400,
            json!({"error": "Card payments are not set up on this server"})
        )
    );
}

/// `status`, the JSON `error` and `retryAfter`, and `Retry-After`, of a raw reply.
fn refusal(reply: &crate::helpers::Raw) -> (u16, Value, u64) {
    let body: Value = serde_json::from_str(&reply.text).unwrap_or(Value::Null);
    let header: u64 = reply
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(
        (1..=60).contains(&header),
        "{} {}",
        reply.status,
        reply.text
    );
    if let Some(seconds) = body.get("retryAfter") {
        assert_eq!(seconds, &json!(header), "{}", reply.text);
    }
    (reply.status, body["error"].clone(), header)
}

#[test]
fn every_account_path_counts_against_its_client_address_changes_a_quarter() {
    let app = spawn_app_with(postal::api::Settings {
        trusted_proxies: vec!["127.0.0.1/32".parse().unwrap()],
        dashboard: postal::api::account::DashboardSettings {
            requests_per_minute: Some(postal::api::account::REQUESTS_PER_MINUTE),
            ..Default::default()
        },
        ..Default::default()
    });
    let from = |ip: &'static str| [("x-forwarded-for", ip)];
    crate::browser::with_seconds_left_in_the_minute(20);
    let (client, other) = (from("192.0.2.7"), from("2001:db8:7::1"));

    // 30 changes (a quarter of 120) are answered; the 31st is refused, and not counted.
    for _ in 0..30 {
        let signout = app.post_with("/account/api/signout", &json!({}), &client);
        assert_eq!(signout.status, 401, "{}", signout.text);
    }
    let limited = "Too many requests to the dashboard from your address";
    let refused = app.post_with("/account/api/signout", &json!({}), &client);
    assert_eq!(
        (refusal(&refused).0, refusal(&refused).1),
        (429, json!(limited))
    );

    // Reads: 90 more make 120 in all; then every /account path is refused, the webhook
    // and the page too.
    for _ in 0..90 {
        let me = app.get_with("/account/api/me", &client);
        assert_eq!(me.status, 401, "{}", me.text);
    }
    let me = app.get_with("/account/api/me", &client);
    assert_eq!((refusal(&me).0, refusal(&me).1), (429, json!(limited)));
    let page = app.get_with("/account", &client);
    assert_eq!(refusal(&page).0, 429);
    assert!(page.text.contains(limited), "{}", page.text);
    let webhook = app.post_with("/account/stripe/webhook", &json!({}), &client);
    assert_eq!(
        (refusal(&webhook).0, refusal(&webhook).1),
        (429, json!(limited))
    );

    // Another address (an IPv6 /64 apart) is answered; the API itself is not limited.
    assert_eq!(app.get_with("/account/api/me", &other).status, 401);
    assert_eq!(app.get_with("/account", &other).status, 200);
    assert_eq!(app.get_with("/healthz", &client).status, 200);
}

#[test]
fn a_session_makes_at_most_its_requests_a_minute_from_any_address() {
    let app = spawn_app_with(postal::api::Settings {
        trusted_proxies: vec!["127.0.0.1/32".parse().unwrap()],
        dashboard: postal::api::account::DashboardSettings {
            requests_per_minute: Some(postal::api::account::REQUESTS_PER_MINUTE),
            ..Default::default()
        },
        ..Default::default()
    });
    let Some(_providers) = crate::account::providers(&app) else {
        return;
    };
    crate::browser::with_seconds_left_in_the_minute(30);
    let mut browser = crate::account::Browser::new();
    browser.sign_in(&app, "p1", "alice");
    // Each request from another address: the session's own count refuses the 121st of
    // the minute (the dashboard page after the sign-in was its first).
    let mut answered = 0;
    let refused = loop {
        let address = format!("198.51.100.{}", answered % 250 + 1);
        let (status, body) =
            browser.api_with(&app, "GET", "/me", None, &[("x-forwarded-for", &address)]);
        if status != 200 {
            break (status, body);
        }
        answered += 1;
        assert!(answered <= 120, "no limit after {answered} requests");
    };
    assert_eq!(answered, 119);
    assert_eq!(refused.0, 429);
    assert_eq!(
        refused.1["error"],
        json!("Too many requests in this session")
    );
    // Another session of the same account is answered.
    let mut other = crate::account::Browser::new();
    other.sign_in(&app, "p1", "alice");
    assert_eq!(other.api(&app, "GET", "/me", None).0, 200);
}
