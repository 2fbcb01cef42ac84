//! The payment gaps of review L8 (issue 50 item 9), against the Stripe stand-in: a
//! dispute takes back what is left of its top-up's credit (once per dispute) and freezes
//! the account's top-ups until `postal account unfreeze`; a paid session of another amount
//! or currency is not credited; a refund or dispute without the top-up's metadata finds
//! its top-up through its PaymentIntent's Checkout Session; a payment page that is not
//! https is never sent to the browser.

use serde_json::{Value, json};

use crate::account::{Browser, providers, two_nodes};
use crate::helpers::{TestApp, spawn_app};
use crate::payments::{Stripe, deliver, enable_payments};

const FROZEN: &str = "Top-ups by card are frozen for this account: one of its card payments \
                      was disputed. Ask the operator of this server to review it.";

/// A signed-in customer with card payments on, and the stand-in.
fn customer(app: &TestApp, user: &str) -> Option<(Browser, Stripe, String)> {
    let stripe = Stripe::start(&format!("{}/account/stripe/webhook", app.address))?;
    let db = app.db.to_string_lossy().into_owned();
    enable_payments(&["--db", &db], &stripe.base);
    let mut browser = Browser::new();
    browser.sign_in(app, "p1", user);
    let account = browser.api(app, "GET", "/me", None).1["accountId"]
        .as_str()
        .unwrap()
        .to_owned();
    Some((browser, stripe, account))
}

/// Starts a top-up of `usd`: its id and session.
fn start(browser: &mut Browser, app: &TestApp, usd: &str) -> (String, String) {
    let (status, started) = browser.api(app, "POST", "/topups", Some(json!({"amount": usd})));
    assert_eq!(status, 201, "{started}");
    (
        started["topupId"].as_str().unwrap().to_owned(),
        started["sessionId"].as_str().unwrap().to_owned(),
    )
}

/// Pays the session on the stand-in's page.
fn pay(browser: &mut Browser, stripe: &Stripe, session: &str) {
    let paid = browser.request(
        "POST",
        &format!("{}/pay/{session}", stripe.base),
        Some(("application/x-www-form-urlencoded", String::new())),
        &[],
    );
    assert_eq!(paid.status, 303);
}

/// The webhook's answer to the stand-in's last delivery.
fn last_answer(stripe: &Stripe) -> (Value, Value) {
    let deliveries = stripe.get("/test/deliveries");
    let last = deliveries.as_array().unwrap().last().unwrap().clone();
    (
        last["status"].clone(),
        serde_json::from_str(last["body"].as_str().unwrap()).unwrap(),
    )
}

fn answer(sent: &Value) -> (Value, Value) {
    (
        sent["status"].clone(),
        serde_json::from_str(sent["body"].as_str().unwrap()).unwrap(),
    )
}

fn balance(browser: &mut Browser, app: &TestApp) -> Value {
    browser.api(app, "GET", "/me", None).1["balance"].clone()
}

/// 5.00 paid, 2.00 refunded, 2.50 spent (an operator's adjustment): the dispute owes the
/// 3.00 left of the credit, takes the 0.528 the balance holds and records 2.472 short; the
/// same dispute again counts nothing. Top-ups are refused with 403 until the operator
/// unfreezes the account; the balance, the operator's top-ups and lookups keep working.
#[test]
fn a_dispute_takes_back_what_is_left_of_its_credit_once_and_freezes_top_ups_until_unfrozen() {
    let app = spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let Some((mut browser, stripe, account)) = customer(&app, "disputer") else {
        return;
    };
    let (topup, session) = start(&mut browser, &app, "5.00");
    pay(&mut browser, &stripe, &session);
    assert_eq!(balance(&mut browser, &app), json!(5.028));
    let refunded = stripe.post("/test/refund", json!({"session": session, "amount": 200}));
    assert_eq!(
        answer(&refunded),
        (
            json!(200),
            json!({"received": true, "outcome": "refund taken back: 2 USD, shortfall 0 USD"})
        )
    );
    app.cli(&[
        "account", "adjust", &account, "--usd", "-2.5", "--reason", "spent",
    ]);
    assert_eq!(balance(&mut browser, &app), json!(0.528));
    // A top-up started before the dispute, paid after it: see below.
    let (late, late_session) = start(&mut browser, &app, "5.00");

    let disputed = stripe.post("/test/dispute", json!({"session": session}));
    let dispute = disputed["dispute"].as_str().unwrap().to_owned();
    assert!(dispute.starts_with("dp_test_"), "{disputed}");
    assert_eq!(
        answer(&disputed),
        (
            json!(200),
            json!({"received": true,
                   "outcome": "dispute taken back: 0.528 USD, shortfall 2.472 USD"})
        )
    );
    assert_eq!(balance(&mut browser, &app), json!(0.0));
    let shown = app.cli(&["account", "show", &account]);
    let payment = shown["topups"][1]["payment"].as_str().unwrap().to_owned();
    let (_, ledger) = browser.api(&app, "GET", "/ledger", None);
    let newest = &ledger["entries"][0];
    assert_eq!(
        (&newest["kind"], &newest["amount"], &newest["balanceAfter"]),
        (&json!("adjustment"), &json!(-0.528), &json!(0.0))
    );
    assert_eq!(
        newest["note"],
        format!(
            "dispute {dispute} of card payment {payment}: 3 USD disputed, 2.472 USD could \
             not be taken back"
        )
    );
    // Stripe sends the event again: counted before, nothing changes.
    let again = stripe.post(
        "/test/dispute",
        json!({"session": session, "dispute": dispute}),
    );
    assert_eq!(
        answer(&again),
        (
            json!(200),
            json!({"received": true, "outcome": "dispute counted before"})
        )
    );
    assert_eq!(balance(&mut browser, &app), json!(0.0));
    let frozen_by = format!("dispute {dispute} of {topup} (card payment {payment})");
    let shown = app.cli(&["account", "show", &account]);
    assert_eq!(shown["topupsFrozen"], frozen_by, "{shown}");
    assert_eq!(
        (
            &shown["topups"][1]["refunded"],
            &shown["topups"][1]["refundShortfall"]
        ),
        (&json!(5.0), &json!(2.472))
    );
    let (_, audit) = browser.api(&app, "GET", "/audit", None);
    assert_eq!(audit["entries"][0]["action"], "dispute");
    assert_eq!(
        audit["entries"][0]["detail"],
        format!(
            "{topup}: 3 USD of card payment {payment} disputed ({dispute}); top-ups by card \
             frozen; 0.528 USD taken back, 2.472 USD could not be; balance 0 USD"
        )
    );
    assert_eq!(audit["entries"][1]["action"], "topup.start");
    assert_eq!(audit["entries"][2]["action"], "adjustment");

    // Frozen: no top-up by card; the rest works.
    let refused = browser.api(&app, "POST", "/topups", Some(json!({"amount": "5.00"})));
    assert_eq!(refused, (403, json!({"error": FROZEN})));
    let sessions_made = |stripe: &Stripe| {
        let requests = stripe.get("/test/requests");
        let made = requests.as_array().unwrap().iter();
        made.filter(|r| r["method"] == "POST").count()
    };
    assert_eq!(sessions_made(&stripe), 2);
    // The top-up started before the freeze, paid now: not credited, failed, audited.
    pay(&mut browser, &stripe, &late_session);
    assert_eq!(
        last_answer(&stripe),
        (
            json!(200),
            json!({"received": true, "outcome": format!(
                "not credited: top-ups of this account are frozen ({late})"
            )})
        )
    );
    assert_eq!(balance(&mut browser, &app), json!(0.0));
    let (_, topups) = browser.api(&app, "GET", "/topups", None);
    assert_eq!(topups["topups"][0]["status"], "failed");
    let (_, audit) = browser.api(&app, "GET", "/audit", None);
    assert_eq!(audit["entries"][0]["action"], "topup.frozen");
    assert_eq!(
        app.cli(&["account", "topup", &account, "--usd", "5"])["balance"],
        json!(5.0)
    );
    let (_, key) = browser.api(&app, "POST", "/keys", Some(json!({"name": "still"})));
    let looked_up = app.post(
        "/api/lookup",
        &json!({"apiKey": key["apiKey"], "zipcode": "90210"}),
    );
    assert_eq!(looked_up.status, 200);

    // The operator lifts it, once; audited.
    assert_eq!(
        app.cli(&["account", "unfreeze", &account]),
        json!({"accountId": account, "wasFrozen": true, "frozenBy": frozen_by})
    );
    assert_eq!(
        app.cli(&["account", "unfreeze", &account]),
        json!({"accountId": account, "wasFrozen": false})
    );
    let shown = app.cli(&["account", "show", &account]);
    assert!(shown.get("topupsFrozen").is_none(), "{shown}");
    let (_, audit) = browser.api(&app, "GET", "/audit", None);
    let lifted = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "topups.unfreeze")
        .unwrap();
    assert_eq!(
        lifted["detail"],
        format!("top-ups by card allowed again (frozen by {frozen_by})")
    );
    assert_eq!(lifted["actor"], "operator (CLI)");
    start(&mut browser, &app, "5.00");
    assert_eq!(app.cli(&["ledger", "verify"])["ok"], true);
}

/// A paid session that reports 6.00 for a 5.00 top-up, or 5.00 in EUR: nothing credited,
/// answered 200 (Stripe retrying would read the same session), an audit line.
#[test]
fn a_paid_session_of_another_amount_or_currency_credits_nothing_and_is_audited() {
    let app = spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let Some((mut browser, stripe, _account)) = customer(&app, "mismatched") else {
        return;
    };
    for (set, paid) in [
        (json!({"amount_total": 600}), "6 usd"),
        (json!({"currency": "eur"}), "5 eur"),
    ] {
        let (topup, session) = start(&mut browser, &app, "5.00");
        stripe.post("/test/session", json!({"session": session, "set": set}));
        pay(&mut browser, &stripe, &session);
        assert_eq!(
            last_answer(&stripe),
            (
                json!(200),
                json!({"received": true, "outcome": format!(
                    "not credited: amount mismatch, {paid} paid for a top-up of 5 USD ({topup})"
                )})
            )
        );
        assert_eq!(balance(&mut browser, &app), json!(0.028));
        let (_, audit) = browser.api(&app, "GET", "/audit", None);
        assert_eq!(audit["entries"][0]["action"], "topup.mismatch");
        assert_eq!(
            audit["entries"][0]["detail"],
            format!(
                "{topup}: Stripe Checkout {session} reports {paid} paid for a top-up of 5 USD; \
                 nothing credited"
            )
        );
        let (_, topups) = browser.api(&app, "GET", "/topups", None);
        assert_eq!(topups["topups"][0]["status"], "failed");
        // The operator refunds it in Stripe: nothing was credited, nothing is taken back,
        // and Stripe is not asked to deliver it again.
        let refunded = stripe.post("/test/refund", json!({"session": session, "amount": 500}));
        assert_eq!(
            answer(&refunded),
            (
                json!(200),
                json!({"received": true, "outcome": "ignored: no top-up paid by this payment"})
            )
        );
        assert_eq!(balance(&mut browser, &app), json!(0.028));
    }
    assert_eq!(app.cli(&["ledger", "verify"])["ok"], true);
}

/// A refund and a dispute of a paid but not yet credited top-up, their objects without
/// the top-up's metadata: the top-up is found through the PaymentIntent's Checkout
/// Session (503, for Stripe to deliver them again); once credited, the refund is taken
/// back by the payment the top-up holds.
#[test]
fn a_refund_or_dispute_without_metadata_before_its_credit_is_found_through_its_payment() {
    let app = spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let Some((mut browser, stripe, _account)) = customer(&app, "early") else {
        return;
    };
    stripe.post("/test/config", json!({"deliverOnPay": false}));
    let (topup, session) = start(&mut browser, &app, "5.00");
    pay(&mut browser, &stripe, &session);
    let early = stripe.post(
        "/test/refund",
        json!({"session": session, "amount": 200, "noMetadata": true}),
    );
    assert_eq!(
        answer(&early),
        (
            json!(503),
            json!({"error": "The refunded payment is not credited yet; deliver the refund again later"})
        )
    );
    let early = stripe.post("/test/dispute", json!({"session": session}));
    assert_eq!(
        answer(&early),
        (
            json!(503),
            json!({"error": "The disputed payment is not credited yet; deliver the dispute again later"})
        )
    );
    let listed = stripe.get("/test/requests");
    let lookups = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["path"]
                .as_str()
                .unwrap()
                .starts_with("/v1/checkout/sessions?payment_intent=pi_test_")
        })
        .count();
    assert_eq!(lookups, 2, "{listed}");
    let (payload, signature) = stripe.event(&session, "checkout.session.completed", json!({}));
    assert_eq!(
        deliver(&app.address, &payload, Some(&signature)),
        (
            200,
            json!({"received": true, "outcome": format!("credited 5 USD ({topup})")})
        )
    );
    let refunded = stripe.post(
        "/test/refund",
        json!({"session": session, "amount": 0, "noMetadata": true}),
    );
    assert_eq!(
        answer(&refunded),
        (
            json!(200),
            json!({"received": true, "outcome": "refund taken back: 2 USD, shortfall 0 USD"})
        )
    );
    assert_eq!(balance(&mut browser, &app), json!(3.028));
}

/// Stripe answering a payment page over plain http off loopback: 502, the top-up failed,
/// the page never sent; an https page is.
#[test]
fn a_payment_page_that_is_not_https_is_never_sent_to_the_browser() {
    let app = spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let Some((mut browser, stripe, _account)) = customer(&app, "redirected") else {
        return;
    };
    stripe.post(
        "/test/config",
        json!({"sessionUrl": "http://checkout.example.com/pay/cs_1"}),
    );
    assert_eq!(
        browser.api(&app, "POST", "/topups", Some(json!({"amount": "5.00"}))),
        (
            502,
            json!({"error": "The payment processor answered a payment page this server does \
                             not send browsers to"})
        )
    );
    let (_, topups) = browser.api(&app, "GET", "/topups", None);
    assert_eq!(
        (&topups["topups"][0]["status"], &topups["topups"][0]["url"]),
        (&json!("failed"), &Value::Null)
    );
    stripe.post(
        "/test/config",
        json!({"sessionUrl": "https://checkout.stripe.com/c/pay/cs_1"}),
    );
    let (status, started) = browser.api(&app, "POST", "/topups", Some(json!({"amount": "5.00"})));
    assert_eq!(
        (status, &started["url"]),
        (201, &json!("https://checkout.stripe.com/c/pay/cs_1"))
    );
}

/// Cluster mode: the same dispute delivered three times to each of two nodes at once is
/// taken back once; both nodes refuse the account's top-ups until `account unfreeze
/// --ledger`; `ledger verify` holds.
#[test]
fn over_a_cluster_ledger_a_dispute_delivered_to_both_nodes_at_once_is_taken_back_once() {
    let _heavy = crate::helpers::timing_sensitive();
    let Some(cluster) = two_nodes() else {
        return;
    };
    let (a, b, url) = (cluster.a.as_str(), cluster.b.as_str(), cluster.url.as_str());
    let Some(stripe) = Stripe::start(&format!("{a}/account/stripe/webhook")) else {
        return;
    };
    enable_payments(&["--ledger", url], &stripe.base);
    let mut browser = Browser::new();
    browser.sign_in_at(a, "p1", "chargeback");
    browser.share_session(a, b);
    let (_, me) = browser.api_at(a, "GET", "/me", None);
    let account = me["accountId"].as_str().unwrap().to_owned();
    let (status, started) = browser.api_at(b, "POST", "/topups", Some(json!({"amount": "5.00"})));
    assert_eq!(status, 201, "{started}");
    let session = started["sessionId"].as_str().unwrap().to_owned();
    pay(&mut browser, &stripe, &session);
    assert_eq!(
        browser.api_at(b, "GET", "/me", None).1["balance"],
        json!(5.028)
    );
    let signed = stripe.post(
        "/test/dispute",
        json!({"session": session, "signOnly": true}),
    );
    let (payload, signature) = (
        signed["payload"].as_str().unwrap(),
        signed["header"].as_str().unwrap(),
    );
    let barrier = std::sync::Barrier::new(6);
    let mut outcomes: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = [a, b, a, b, a, b]
            .into_iter()
            .map(|node| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    deliver(node, payload, Some(signature))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                let (status, body) = h.join().unwrap();
                assert_eq!(status, 200, "{body}");
                body["outcome"].as_str().unwrap().to_owned()
            })
            .collect()
    });
    outcomes.sort();
    let mut expected = vec!["dispute counted before".to_owned(); 5];
    expected.push("dispute taken back: 5 USD, shortfall 0 USD".to_owned());
    assert_eq!(outcomes, expected);
    for node in [a, b] {
        assert_eq!(
            browser.api_at(node, "GET", "/me", None).1["balance"],
            json!(0.028)
        );
        assert_eq!(
            browser.api_at(node, "POST", "/topups", Some(json!({"amount": "5.00"}))),
            (403, json!({"error": FROZEN}))
        );
    }
    let postal = |args: &[&str]| -> Value {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_postal"))
            .args(["--ledger", url])
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    };
    assert!(
        postal(&["account", "show", &account])["topupsFrozen"]
            .as_str()
            .unwrap()
            .starts_with("dispute dp_test_")
    );
    assert_eq!(
        postal(&["account", "unfreeze", &account])["wasFrozen"],
        true
    );
    let (status, _) = browser.api_at(a, "POST", "/topups", Some(json!({"amount": "5.00"})));
    assert_eq!(status, 201);
    assert_eq!(postal(&["ledger", "verify"])["ok"], true);
}
