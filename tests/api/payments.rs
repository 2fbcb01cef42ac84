//! Top-ups by card (docs/payments.md) against a local stand-in of Stripe
//! (`tests/stripe/standin.py`): it takes the Checkout Session as Stripe's API documents it,
//! serves a checkout page, and posts events signed with Stripe's scheme, each signature
//! checked with the official `stripe` library (PyPI) before it is sent. Customers sign in
//! with the real OpenID providers of the dashboard's tests.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::account::{Browser, providers, two_nodes};
use crate::account_flows::browser_sign_in;
use crate::helpers::spawn_app;

const STRIPE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/stripe");
const STRIPE_VERSION: &str = "16.1.0";
const SECRET_KEY: &str = "sk_test_postal_stand_in";
const WEBHOOK_SECRET: &str = "whsec_postal_stand_in";

/// The stand-in, running until dropped.
pub(crate) struct Stripe {
    child: Child,
    pub(crate) base: String,
    agent: ureq::Agent,
}

impl Drop for Stripe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Python with the `stripe` library (`testkit::python`).
fn python() -> Option<PathBuf> {
    testkit::python::with_package("stripe-venv", "stripe", STRIPE_VERSION)
}

impl Stripe {
    /// The stand-in, posting events to `webhook`.
    pub(crate) fn start(webhook: &str) -> Option<Stripe> {
        let python = python()?;
        let config = json!({
            "secretKey": SECRET_KEY,
            "webhookSecret": WEBHOOK_SECRET,
            "webhook": webhook,
        });
        let mut child = Command::new(python)
            .arg("standin.py")
            .arg(config.to_string())
            .current_dir(STRIPE_DIR)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting the Stripe stand-in");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("the stand-in's first line");
        let base = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("the stand-in said {line:?}"))
            .to_owned();
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .build()
            .into();
        Some(Stripe { child, base, agent })
    }

    pub(crate) fn get(&self, path: &str) -> Value {
        let text = self
            .agent
            .get(format!("{}{path}", self.base))
            .call()
            .unwrap()
            .into_body()
            .read_to_string()
            .unwrap();
        serde_json::from_str(&text).unwrap()
    }

    pub(crate) fn post(&self, path: &str, body: Value) -> Value {
        let text = self
            .agent
            .post(format!("{}{path}", self.base))
            .send(body.to_string())
            .unwrap()
            .into_body()
            .read_to_string()
            .unwrap();
        serde_json::from_str(&text).unwrap()
    }

    /// A signed event of `kind` for `session`, as Stripe would post it (`extra`: the
    /// stand-in's `timestamp`, `secret`, `claimPaid`): (payload, Stripe-Signature).
    pub(crate) fn event(&self, session: &str, kind: &str, extra: Value) -> (String, String) {
        let mut ask = json!({"session": session, "type": kind});
        ask.as_object_mut()
            .unwrap()
            .extend(extra.as_object().cloned().unwrap_or_default());
        let signed = self.post("/test/event", ask);
        (
            signed["payload"].as_str().unwrap().to_owned(),
            signed["header"].as_str().unwrap().to_owned(),
        )
    }
}

/// `postal payments stripe` with the stand-in's secrets, on the ledger `target` names.
pub(crate) fn enable_payments(target: &[&str], api_base: &str) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_postal"))
        .args(target)
        .args(["payments", "stripe", "--api-base", api_base])
        .args(["--secret-key-env", "TEST_STRIPE_KEY"])
        .args(["--webhook-secret-env", "TEST_STRIPE_WHSEC"])
        .env("TEST_STRIPE_KEY", SECRET_KEY)
        .env("TEST_STRIPE_WHSEC", WEBHOOK_SECRET)
        .output()
        .expect("postal payments stripe");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!stdout.contains(SECRET_KEY) && !stdout.contains(WEBHOOK_SECRET));
    serde_json::from_str(&stdout).unwrap()
}

/// Posts an event to a server's webhook: status and JSON answer.
pub(crate) fn deliver(address: &str, payload: &str, signature: Option<&str>) -> (u16, Value) {
    let mut request = ureq::post(format!("{address}/account/stripe/webhook"))
        .config()
        .http_status_as_error(false)
        .build()
        .header("content-type", "application/json; charset=utf-8");
    if let Some(signature) = signature {
        request = request.header("stripe-signature", signature);
    }
    let response = request.send(payload).unwrap();
    let status = response.status().as_u16();
    let text = response.into_body().read_to_string().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The form fields of the stand-in's `n`th request.
fn form_of(request: &Value) -> Vec<(String, String)> {
    form_urlencoded::parse(request["form"].as_str().unwrap().as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// Without card payments the dashboard says how the operator tops up; with them, a
/// customer starts a top-up of 5.00 (4.99, fractions of a cent and more than the ceiling
/// refused, nothing sent to Stripe), Stripe gets exactly the documented Checkout Session,
/// the customer pays on its page and comes back, and the webhook credits exactly 5.00
/// once: three redeliveries, a tampered body, a stale timestamp, a wrong secret, a missing
/// signature and an event claiming an unpaid session is paid change nothing. Then 4.004 is
/// spent and 2.00 refunded: the balance gives 1.024 back and 0.976 is the shortfall the
/// operator is shown. A session whose id was never stored is credited by the top-up it
/// names; at most 10 unpaid top-ups a day. `ledger verify` holds at the end.
#[test]
fn a_customer_pays_a_topup_by_card_and_it_is_credited_exactly_once() {
    let app = spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let mut browser = Browser::new();
    browser.sign_in(&app, "p1", "payer");
    let account = browser.api(&app, "GET", "/me", None).1["accountId"]
        .as_str()
        .unwrap()
        .to_owned();
    let balance =
        |browser: &mut Browser| browser.api(&app, "GET", "/me", None).1["balance"].clone();

    // Not set up: the way to a top-up, and no top-up.
    let how_to = format!(
        "Top-ups by card are not set up on this server. The operator can top up this \
         account: postal account topup {account} --usd 5.00"
    );
    let (status, topups) = browser.api(&app, "GET", "/topups", None);
    assert_eq!(status, 200);
    assert_eq!(
        topups,
        json!({"enabled": false, "minimum": 5.0, "maximum": 0.0, "presets": [],
               "howTo": how_to, "topups": []})
    );
    let (status, body) = browser.api(&app, "POST", "/topups", Some(json!({"amount": "5.00"})));
    assert_eq!((status, body), (403, json!({"error": how_to})));
    assert_eq!(app.cli(&["payments", "show"]), json!({"enabled": false}));

    // The operator's command refuses what is not a Stripe setting, printing why (exit 2).
    let db = app.db.to_string_lossy().into_owned();
    for (env, error) in [
        (
            vec![("TEST_STRIPE_WHSEC", WEBHOOK_SECRET)],
            "the environment variable TEST_STRIPE_KEY is not set",
        ),
        (
            vec![
                ("TEST_STRIPE_KEY", "pk_test_1"),
                ("TEST_STRIPE_WHSEC", WEBHOOK_SECRET),
            ],
            "TEST_STRIPE_KEY does not hold a Stripe secret or restricted key (sk_… or rk_…)",
        ),
        (
            vec![
                ("TEST_STRIPE_KEY", SECRET_KEY),
                ("TEST_STRIPE_WHSEC", "secret"),
            ],
            "TEST_STRIPE_WHSEC does not hold a webhook signing secret (whsec_…)",
        ),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_postal"))
            .args(["--db", &db, "payments", "stripe"])
            .args(["--secret-key-env", "TEST_STRIPE_KEY"])
            .args(["--webhook-secret-env", "TEST_STRIPE_WHSEC"])
            .env_remove("TEST_STRIPE_KEY")
            .envs(env)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&output.stderr).contains(error),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    let Some(stripe) = Stripe::start(&format!("{}/account/stripe/webhook", app.address)) else {
        return;
    };
    let shown = json!({"enabled": true, "processor": "stripe", "apiBase": stripe.base,
                       "maxTopup": 1000.0, "webhookPath": "/account/stripe/webhook",
                       "mode": "test"});
    assert_eq!(enable_payments(&["--db", &db], &stripe.base), shown);
    assert_eq!(app.cli(&["payments", "show"]), shown);

    // Amounts refused before anything reaches Stripe.
    for (amount, error) in [
        (
            json!("4.99"),
            "a top-up must be at least 5 USD, got 4.99 USD",
        ),
        (
            json!("5.001"),
            "amount must be USD in whole cents, such as \"5.00\": got \"5.001\"",
        ),
        (
            json!("1000.01"),
            "a top-up can be at most 1000 USD on this server, got 1000.01 USD",
        ),
        (json!(5), "Invalid 'amount'"),
    ] {
        let (status, body) = browser.api(&app, "POST", "/topups", Some(json!({"amount": amount})));
        assert_eq!((status, body), (400, json!({"error": error})), "{amount}");
    }
    assert_eq!(stripe.get("/test/requests"), json!([]));

    // 5.00: a pending top-up and Stripe's page.
    let (status, started) = browser.api(&app, "POST", "/topups", Some(json!({"amount": "5.00"})));
    assert_eq!(status, 201, "{started}");
    let topup = started["topupId"].as_str().unwrap().to_owned();
    let session = started["sessionId"].as_str().unwrap().to_owned();
    let url = started["url"].as_str().unwrap().to_owned();
    assert!(topup.starts_with("top_") && session.starts_with("cs_test_"));
    assert_eq!(url, format!("{}/pay/{session}", stripe.base));
    let requests = stripe.get("/test/requests");
    assert_eq!(requests.as_array().unwrap().len(), 1, "{requests}");
    let created = &requests[0];
    assert_eq!(created["authorization"], format!("Bearer {SECRET_KEY}"));
    assert_eq!(created["contentType"], "application/x-www-form-urlencoded");
    assert_eq!(created["idempotencyKey"], topup);
    let back = format!("{}/account?topup={topup}", app.address);
    let expected: Vec<(String, String)> = [
        ("mode", "payment"),
        ("line_items[0][price_data][currency]", "usd"),
        ("line_items[0][price_data][unit_amount]", "500"),
        (
            "line_items[0][price_data][product_data][name]",
            "postal API credit (5 USD)",
        ),
        ("line_items[0][quantity]", "1"),
        ("client_reference_id", &account),
        ("metadata[topup_id]", &topup),
        ("metadata[account_id]", &account),
        ("payment_intent_data[metadata][topup_id]", &topup),
        ("payment_intent_data[metadata][account_id]", &account),
        ("success_url", &back),
        ("cancel_url", &format!("{back}&cancelled=1")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(form_of(created), expected);
    let (_, topups) = browser.api(&app, "GET", "/topups", None);
    assert_eq!(topups["enabled"], true);
    assert_eq!(topups["maximum"], 1000.0);
    assert_eq!(topups["presets"], json!([5.0, 20.0, 50.0, 100.0]));
    assert_eq!(topups["topups"][0]["status"], "pending");
    assert_eq!(topups["topups"][0]["url"], url);
    assert_eq!(balance(&mut browser), json!(0.028));

    // Paid on the stand-in's page; back on the dashboard; credited by the webhook.
    let page = browser.get(&url);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Pay 5.00 USD"), "{}", page.body);
    let paid = browser.request(
        "POST",
        &url,
        Some(("application/x-www-form-urlencoded", String::new())),
        &[],
    );
    assert_eq!(
        (paid.status, paid.location.as_deref()),
        (303, Some(&back[..]))
    );
    let deliveries = stripe.get("/test/deliveries");
    assert_eq!(deliveries.as_array().unwrap().len(), 1, "{deliveries}");
    assert_eq!(deliveries[0]["type"], "checkout.session.completed");
    assert_eq!(deliveries[0]["status"], 200);
    let credited = json!({"received": true, "outcome": format!("credited 5 USD ({topup})")});
    assert_eq!(
        serde_json::from_str::<Value>(deliveries[0]["body"].as_str().unwrap()).unwrap(),
        credited
    );
    assert_eq!(balance(&mut browser), json!(5.028));
    let shown = app.cli(&["account", "show", &account]);
    let payment = shown["topups"][0]["payment"].as_str().unwrap().to_owned();
    assert!(payment.starts_with("pi_test_"), "{shown}");
    let (_, ledger) = browser.api(&app, "GET", "/ledger", None);
    assert_eq!(
        ledger["entries"][0],
        json!({"at": ledger["entries"][0]["at"], "kind": "topup", "amount": 5.0,
               "balanceAfter": 5.028, "queries": 0, "endpoint": null,
               "note": format!("card payment {payment} (Stripe Checkout {session})")})
    );
    let (_, topups) = browser.api(&app, "GET", "/topups", None);
    assert_eq!(topups["topups"][0]["status"], "paid");
    assert_eq!(topups["topups"][0]["credited"], 5.0);
    assert_eq!(topups["topups"][0]["url"], Value::Null);

    // The same event again, three times: credited before, nothing changes.
    let (payload, signature) = stripe.event(&session, "checkout.session.completed", json!({}));
    for _ in 0..3 {
        assert_eq!(
            deliver(&app.address, &payload, Some(&signature)),
            (
                200,
                json!({"received": true, "outcome": format!("credited before ({topup})")})
            )
        );
    }
    // Forged or replayed deliveries: 400, nothing changes.
    let no_match = "No v1 signature of Stripe-Signature matches the webhook secret";
    let tampered = payload.replace("\"amount_total\":500", "\"amount_total\":50000");
    assert_ne!(tampered, payload);
    let (stale_payload, stale) = stripe.event(
        &session,
        "checkout.session.completed",
        json!({"timestamp": unix_now() - 600}),
    );
    let (other_payload, other) = stripe.event(
        &session,
        "checkout.session.completed",
        json!({"secret": "whsec_not_this_endpoint"}),
    );
    for (body, signature, error) in [
        (&tampered, Some(&signature), no_match),
        (
            &stale_payload,
            Some(&stale),
            "The Stripe-Signature timestamp is more than 300 s from now",
        ),
        (&other_payload, Some(&other), no_match),
        (&payload, None, "Missing Stripe-Signature header"),
        // Nothing is parsed before the signature is checked.
        (
            &"not json".to_owned(),
            None,
            "Missing Stripe-Signature header",
        ),
        (
            &payload,
            Some(&"t=1,v0=abc".to_owned()),
            "Stripe-Signature has no timestamp or no v1 signature",
        ),
    ] {
        assert_eq!(
            deliver(&app.address, body, signature.map(String::as_str)),
            (400, json!({"error": error}))
        );
    }
    // A signed event claiming a session is paid that Stripe's API says is not: read back,
    // not credited. An event of another kind: ignored.
    let (_, second) = browser.api(&app, "POST", "/topups", Some(json!({"amount": "7.00"})));
    let second_session = second["sessionId"].as_str().unwrap();
    let (claim, claim_signature) = stripe.event(
        second_session,
        "checkout.session.completed",
        json!({"claimPaid": true}),
    );
    assert_eq!(
        deliver(&app.address, &claim, Some(&claim_signature)),
        (
            200,
            json!({"received": true, "outcome": "not credited: payment_status is \"unpaid\""})
        )
    );
    let (other_kind, other_kind_signature) =
        stripe.event(second_session, "customer.created", json!({}));
    assert_eq!(
        deliver(&app.address, &other_kind, Some(&other_kind_signature)),
        (200, json!({"received": true, "outcome": "ignored"}))
    );
    assert_eq!(balance(&mut browser), json!(5.028));

    // 4.004 spent (143 bulk requests of 1,000), then 2.00 refunded: 1.024 taken back, the
    // balance 0, 0.976 short.
    let (_, key) = browser.api(&app, "POST", "/keys", Some(json!({"name": "spend"})));
    let key = key["apiKey"].as_str().unwrap();
    let records: Vec<Value> = (0..1000)
        .map(|_| json!({"postalCode": "90210", "countryCode": "US"}))
        .collect();
    let bulk = json!({"apiKey": key, "records": records});
    for _ in 0..143 {
        assert_eq!(app.post("/api/validate-bulk", &bulk).status, 200);
    }
    assert_eq!(balance(&mut browser), json!(1.024));
    let refunded = stripe.post("/test/refund", json!({"session": session, "amount": 200}));
    assert_eq!(refunded["status"], 200, "{refunded}");
    assert_eq!(
        serde_json::from_str::<Value>(refunded["body"].as_str().unwrap()).unwrap(),
        json!({"received": true,
               "outcome": "refund taken back: 1.024 USD, shortfall 0.976 USD"})
    );
    assert_eq!(balance(&mut browser), json!(0.0));
    let (_, ledger) = browser.api(&app, "GET", "/ledger", None);
    let newest = &ledger["entries"][0];
    assert_eq!(
        (
            &newest["kind"],
            &newest["amount"],
            &newest["balanceAfter"],
            &newest["note"]
        ),
        (
            &json!("adjustment"),
            &json!(-1.024),
            &json!(0.0),
            &json!(format!(
                "refund of card payment {payment}: 2 USD refunded, 0.976 USD could not be \
                 taken back"
            ))
        )
    );
    // The same refund total again: counted before.
    let again = stripe.post("/test/refund", json!({"session": session, "amount": 0}));
    assert_eq!(
        serde_json::from_str::<Value>(again["body"].as_str().unwrap()).unwrap(),
        json!({"received": true, "outcome": "refund counted before"})
    );
    // The operator is shown the shortfall; the customer's audit log has every step.
    let shown = app.cli(&["account", "show", &account]);
    let paid_topup = shown["topups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["topupId"] == topup)
        .unwrap();
    assert_eq!(
        (
            &paid_topup["status"],
            &paid_topup["credited"],
            &paid_topup["refunded"],
            &paid_topup["refundShortfall"]
        ),
        (&json!("paid"), &json!(5.0), &json!(2.0), &json!(0.976))
    );
    let (_, audit) = browser.api(&app, "GET", "/audit", None);
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions[..5],
        [
            "refund",
            "key.create",
            "topup.start",
            "topup",
            "topup.start"
        ]
    );
    assert_eq!(
        audit["entries"][0]["detail"],
        format!(
            "{topup}: 2 USD of card payment {payment} refunded; 1.024 USD taken back, \
             0.976 USD could not be; balance 0 USD"
        )
    );
    assert!(
        audit["entries"][0]["actor"]
            .as_str()
            .unwrap()
            .starts_with("Stripe (event evt_test_"),
        "{audit}"
    );
    // A crash after Stripe made a session and before its id was stored: the paid session
    // is found by the top-up its metadata names, and credited once.
    rusqlite::Connection::open(&app.db)
        .unwrap()
        .execute(
            "UPDATE topups SET session_id = NULL, url = NULL WHERE session_id = ?1",
            [second_session],
        )
        .unwrap();
    let second_url = second["url"].as_str().unwrap();
    let paid = browser.request(
        "POST",
        second_url,
        Some(("application/x-www-form-urlencoded", String::new())),
        &[],
    );
    assert_eq!(paid.status, 303);
    let second_topup = second["topupId"].as_str().unwrap();
    let last = stripe.get("/test/deliveries");
    let last = last.as_array().unwrap().last().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(last["body"].as_str().unwrap()).unwrap(),
        json!({"received": true, "outcome": format!("credited 7 USD ({second_topup})")})
    );
    assert_eq!(balance(&mut browser), json!(7.0));
    assert_eq!(app.cli(&["ledger", "verify"])["ok"], true);

    // At most 10 unpaid top-ups started in 24 hours.
    let start = |browser: &mut Browser| {
        browser.api(&app, "POST", "/topups", Some(json!({"amount": "5.00"})))
    };
    for _ in 0..10 {
        assert_eq!(start(&mut browser).0, 201);
    }
    let too_many = "10 top-ups started in the last 24 hours are unpaid: pay one of them (its \
                    link is in the list) or wait until it expires";
    assert_eq!(start(&mut browser), (400, json!({"error": too_many})));
    rusqlite::Connection::open(&app.db)
        .unwrap()
        .execute(
            "UPDATE topups SET created_at = created_at - 86400
             WHERE id = (SELECT min(id) FROM topups WHERE status = 'pending')",
            [],
        )
        .unwrap();
    assert_eq!(start(&mut browser).0, 201);

    // Stripe expired an unpaid session: the top-up is expired, once. A pending top-up
    // older than 25 hours is expired by the next start.
    let (_, listed) = browser.api(&app, "GET", "/topups", None);
    let newest = listed["topups"][0].clone();
    let expiring = newest["url"].as_str().unwrap().rsplit('/').next().unwrap();
    let (expired, expired_signature) =
        stripe.event(expiring, "checkout.session.expired", json!({}));
    for outcome in [
        "top-up expired",
        "ignored: no pending top-up of this session",
    ] {
        assert_eq!(
            deliver(&app.address, &expired, Some(&expired_signature)),
            (200, json!({"received": true, "outcome": outcome}))
        );
    }
    let (_, listed) = browser.api(&app, "GET", "/topups", None);
    assert_eq!(
        (
            &listed["topups"][0]["topupId"],
            &listed["topups"][0]["status"]
        ),
        (&newest["topupId"], &json!("expired"))
    );
    let stale: String = rusqlite::Connection::open(&app.db)
        .unwrap()
        .query_row(
            "UPDATE topups SET created_at = created_at - 100000
         WHERE id = (SELECT max(id) FROM topups WHERE status = 'pending')
         RETURNING public_id",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(start(&mut browser).0, 201);
    let (_, listed) = browser.api(&app, "GET", "/topups", None);
    let status_of = |id: &str| {
        listed["topups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["topupId"] == id)
            .unwrap()["status"]
            .clone()
    };
    assert_eq!(status_of(&stale), "expired");

    // Stripe refusing the session (a wrong key): 500, the cause in the log; Stripe not
    // reached: 503. Either way the top-up failed, nothing credited.
    let wrong_key = Command::new(env!("CARGO_BIN_EXE_postal"))
        .args([
            "--db",
            &db,
            "payments",
            "stripe",
            "--api-base",
            &stripe.base,
        ])
        .args(["--secret-key-env", "TEST_STRIPE_KEY"])
        .args(["--webhook-secret-env", "TEST_STRIPE_WHSEC"])
        .env("TEST_STRIPE_KEY", "sk_test_not_this_account")
        .env("TEST_STRIPE_WHSEC", WEBHOOK_SECRET)
        .output()
        .unwrap();
    assert!(wrong_key.status.success());
    assert_eq!(
        start(&mut browser),
        (500, json!({"error": "Internal server error"}))
    );
    assert_eq!(
        browser.api(&app, "GET", "/topups", None).1["topups"][0]["status"],
        "failed"
    );
    enable_payments(&["--db", &db], "http://127.0.0.1:9");
    assert_eq!(
        start(&mut browser),
        (
            503,
            json!({"error": "The payment processor could not be reached; try again in a minute"})
        )
    );
    assert_eq!(
        browser.api(&app, "GET", "/topups", None).1["topups"][0]["status"],
        "failed"
    );
    assert_eq!(balance(&mut browser), json!(7.0));

    // Off: the page says so again; a webhook can no longer be verified.
    assert_eq!(
        app.cli(&["payments", "off"]),
        json!({"enabled": false, "wasEnabled": true})
    );
    assert_eq!(
        browser.api(&app, "GET", "/topups", None).1["enabled"],
        false
    );
    assert_eq!(
        deliver(&app.address, &payload, Some(&signature)),
        (
            400,
            json!({"error": "Card payments are not set up on this server"})
        )
    );
}

/// Cluster mode: a refund that comes before its payment's credit is answered 503 (Stripe
/// delivers it again); the event of the paid session delivered three times to each of two
/// nodes, all at once, is credited once; the refund delivered again to the other node is
/// taken back; the balance holds on both nodes.
#[test]
fn over_a_cluster_ledger_a_payment_delivered_to_both_nodes_at_once_is_credited_once() {
    let _heavy = crate::helpers::timing_sensitive();
    let Some(cluster) = two_nodes() else {
        return;
    };
    let (a, b, url) = (cluster.a.as_str(), cluster.b.as_str(), cluster.url.as_str());
    let Some(stripe) = Stripe::start(&format!("{a}/account/stripe/webhook")) else {
        return;
    };
    enable_payments(&["--ledger", url], &stripe.base);
    stripe.post("/test/config", json!({"deliverOnPay": false}));

    let mut browser = Browser::new();
    browser.sign_in_at(a, "p1", "nodes");
    browser.share_session(a, b);
    let (status, started) = browser.api_at(b, "POST", "/topups", Some(json!({"amount": "5.00"})));
    assert_eq!(status, 201, "{started}");
    let (topup, session) = (
        started["topupId"].as_str().unwrap().to_owned(),
        started["sessionId"].as_str().unwrap().to_owned(),
    );
    let paid = browser.request(
        "POST",
        started["url"].as_str().unwrap(),
        Some(("application/x-www-form-urlencoded", String::new())),
        &[],
    );
    assert_eq!(paid.status, 303);
    // Refunded before its credit came (the credit's deliveries failing meanwhile): 503,
    // for Stripe to deliver it again after.
    let early = stripe.post("/test/refund", json!({"session": session, "amount": 200}));
    assert_eq!(
        (
            &early["status"],
            serde_json::from_str::<Value>(early["body"].as_str().unwrap()).unwrap()
        ),
        (
            &json!(503),
            json!({"error": "The refunded payment is not credited yet; deliver the refund again later"})
        )
    );
    let (payload, signature) = stripe.event(&session, "checkout.session.completed", json!({}));
    let barrier = std::sync::Barrier::new(6);
    let outcomes: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> = [&a, &b, &a, &b, &a, &b]
            .into_iter()
            .map(|node| {
                let (barrier, payload, signature) = (&barrier, &payload, &signature);
                scope.spawn(move || {
                    barrier.wait();
                    deliver(node, payload, Some(signature))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut texts: Vec<String> = outcomes
        .iter()
        .map(|(status, body)| {
            assert_eq!(*status, 200, "{body}");
            body["outcome"].as_str().unwrap().to_owned()
        })
        .collect();
    texts.sort();
    let mut expected = vec![format!("credited 5 USD ({topup})")];
    expected.extend(vec![format!("credited before ({topup})"); 5]);
    assert_eq!(texts, expected);
    for node in [&a, &b] {
        assert_eq!(
            browser.api_at(node, "GET", "/me", None).1["balance"],
            json!(5.028)
        );
    }
    // The refund of 2.00 delivered again, to the other node: taken back, on both.
    stripe.post(
        "/test/config",
        json!({"webhook": format!("{b}/account/stripe/webhook")}),
    );
    let refunded = stripe.post("/test/refund", json!({"session": session, "amount": 0}));
    assert_eq!(
        serde_json::from_str::<Value>(refunded["body"].as_str().unwrap()).unwrap(),
        json!({"received": true, "outcome": "refund taken back: 2 USD, shortfall 0 USD"})
    );
    for node in [&a, &b] {
        assert_eq!(
            browser.api_at(node, "GET", "/me", None).1["balance"],
            json!(3.028)
        );
    }
    let verified = Command::new(env!("CARGO_BIN_EXE_postal"))
        .args(["--ledger", url, "ledger", "verify"])
        .output()
        .unwrap();
    let verified: Value = serde_json::from_slice(&verified.stdout).unwrap();
    assert_eq!(verified["ok"], true, "{verified}");
}

/// In headless Chromium: sign in, 4.99 refused on the page, the 5 USD preset, Stripe's
/// (stand-in's) page, Pay, back on the dashboard: "Payment received" and the balance up by
/// exactly 5.00. Screenshots of the add-funds area and of the balance after payment are
/// kept in cargo's scratch directory (`target/tmp/payments-*.png`).
#[test]
fn in_a_browser_a_customer_adds_funds_pays_and_comes_back_credited() {
    let _heavy = crate::helpers::timing_sensitive();
    use fantoccini::Locator;

    let Some((chromium, chromedriver)) = crate::swagger_ui::browser() else {
        return;
    };
    let app = spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let Some(stripe) = Stripe::start(&format!("{}/account/stripe/webhook", app.address)) else {
        return;
    };
    let db = app.db.to_string_lossy().into_owned();
    enable_payments(&["--db", &db], &stripe.base);
    let dir = testkit::tempdir();
    let driver = crate::swagger_ui::Driver::start(&chromedriver, &dir.path().join("driver.log"));
    let profile = dir.path().join("profile");
    let shot = |name: &str| testkit::scratch().join(format!("payments-{name}.png"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = crate::swagger_ui::connect(&driver, &chromium, &profile).await;
        let wait = std::time::Duration::from_secs(20);
        let find = async |css: &str| {
            client
                .wait()
                .at_most(wait)
                .for_element(Locator::Css(css))
                .await
                .unwrap_or_else(|e| panic!("{css}: {e}"))
        };
        browser_sign_in(&client, &app.address, "buyer").await;
        assert_eq!(find("#balance").await.text().await.unwrap(), "0.028 USD");

        let amount = find("#topup-amount").await;
        amount.clear().await.unwrap();
        amount.send_keys("4.99").await.unwrap();
        find("#add-funds").await.click().await.unwrap();
        assert_eq!(
            find("#h-funds ~ form .error").await.text().await.unwrap(),
            "a top-up must be at least 5 USD, got 4.99 USD"
        );
        find("button.preset").await.click().await.unwrap();
        assert_eq!(amount.prop("value").await.unwrap().as_deref(), Some("5.00"));
        std::fs::write(shot("add-funds"), client.screenshot().await.unwrap()).unwrap();
        find("#add-funds").await.click().await.unwrap();

        // Stripe's page (the stand-in's), then back.
        let pay = find("#pay").await;
        assert_eq!(pay.text().await.unwrap(), "Pay 5.00 USD");
        pay.click().await.unwrap();
        let status = client
            .wait()
            .at_most(wait)
            .for_element(Locator::XPath(
                "//*[@id='topup-status' and starts-with(., 'Payment received')]",
            ))
            .await
            .unwrap();
        assert_eq!(
            status.text().await.unwrap(),
            "Payment received: 5.00 USD added to your balance."
        );
        assert_eq!(find("#balance").await.text().await.unwrap(), "5.028 USD");
        assert!(
            client
                .current_url()
                .await
                .unwrap()
                .as_str()
                .starts_with(&format!("{}/account?topup=top_", app.address))
        );
        std::fs::write(shot("paid"), client.screenshot().await.unwrap()).unwrap();
        client.close().await.unwrap();
    });
    println!(
        "screenshots: {}",
        testkit::scratch().join("payments-*.png").display()
    );
}
