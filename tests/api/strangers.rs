//! Strangers cost nothing: a Stripe webhook delivery without a well-formed
//! `Stripe-Signature` and a session cookie that is not the shape of one are refused without
//! a call of the account store, and the sign-in page reads its providers once; a delivery signed with another secret rereads the payment
//! settings at most once a second; `postal_account_store_calls_total` (and
//! `postal_billing_reloads_total`) in /metrics say so.

use std::time::Instant;

use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};
use crate::payments::{deliver, enable_payments};

/// `postal_<name>_total` of the app's /metrics.
fn counter(app: &TestApp, name: &str) -> u64 {
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
