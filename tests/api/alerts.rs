//! Alerts (issue 51, docs/alerts.md) end to end: a customer signed in through the OpenID
//! stand-in sets a threshold, e-mail and a webhook; the server's relay is a local SMTP
//! sink and the webhook a local receiver whose every request is verified with the
//! Standard Webhooks library (`testkit::webhooks`). A crossing is one e-mail and one
//! webhook, charges below it nothing more, a top-up arms it again; a receiver answering
//! 500 twice gets the same `webhook-id` a third time; a server killed right after a
//! crossing delivers it once after its restart; two cluster nodes spending one account
//! across the threshold make one event; private addresses are refused without
//! `--allow-private-webhooks`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::account::{Browser, providers, two_nodes_with};
use crate::helpers::{TestApp, spawn_app_with};
use testkit::smtp::SmtpSink;
use testkit::webhooks::{Receiver, verify_with_standardwebhooks};

/// What a lookup costs, in micro-USD.
const LOOKUP: i64 = 28;

/// A server whose webhooks may go to loopback, retried 200 ms after a failure.
fn app() -> TestApp {
    spawn_app_with(postal::api::Settings {
        dashboard: postal::api::account::DashboardSettings {
            allow_private_webhooks: true,
            alert_retry_base_ms: Some(200),
            ..Default::default()
        },
        ..Default::default()
    })
}

/// The relay of the server at `target` (`--db FILE` or `--ledger URL`): the sink.
fn set_relay(target: &[&str], sink: &SmtpSink) {
    let url = format!("smtp://127.0.0.1:{}", sink.port());
    crate::migrate::cli_text(
        target,
        &[
            "mail",
            "smtp",
            "--url",
            &url,
            "--from",
            "Postal <billing@postal.test>",
        ],
    );
}

/// A signed-in customer of `address` with a secret key: (browser, account, key).
fn customer(address: &str, user: &str) -> (Browser, String, String) {
    let mut browser = Browser::new();
    browser.sign_in_at(address, "p1", user);
    let account = browser.api_at(address, "GET", "/me", None).1["accountId"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, key) = browser.api_at(address, "POST", "/keys", Some(json!({"name": "k"})));
    assert_eq!(status, 201, "{key}");
    (browser, account, key["apiKey"].as_str().unwrap().to_owned())
}

fn lookup_at(address: &str, key: &str) -> u16 {
    ureq::post(format!("{address}/api/lookup"))
        .config()
        .http_status_as_error(false)
        .build()
        .content_type("application/json")
        .send(json!({"apiKey": key, "zipcode": "90210"}).to_string())
        .unwrap()
        .status()
        .as_u16()
}

/// Sets the account's balance to `micros` through the CLI at `target`.
fn set_balance(target: &[&str], account: &str, micros: i64) {
    let shown = crate::migrate::cli(target, &["account", "show", account]);
    let delta = micros - crate::helpers::usd_to_micros(&shown["balance"]);
    if delta != 0 {
        let usd = crate::helpers::micros_to_usd(delta);
        crate::migrate::cli(
            target,
            &[
                "account", "adjust", account, "--usd", &usd, "--reason", "test",
            ],
        );
    }
}

/// The received webhooks' bodies, parsed.
fn bodies(receiver: &Receiver) -> Vec<Value> {
    receiver
        .requests()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

/// Waits until `ready` holds of the account's alerts (GET), at most `secs` seconds.
fn alerts_when(
    browser: &mut Browser,
    address: &str,
    secs: u64,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let (status, alerts) = browser.api_at(address, "GET", "/alerts", None);
        assert_eq!(status, 200, "{alerts}");
        if ready(&alerts) {
            return alerts;
        }
        assert!(
            Instant::now() < deadline,
            "not ready in {secs} s: {alerts:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The deliveries of events of `kind`, oldest first: (channel, attempt, status, result).
fn attempts(alerts: &Value, kind: &str) -> Vec<(String, u64, String, String)> {
    let mut found: Vec<_> = alerts["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["type"] == kind)
        .map(|d| {
            (
                d["channel"].as_str().unwrap().to_owned(),
                d["attempt"].as_u64().unwrap(),
                d["status"].as_str().unwrap().to_owned(),
                d["result"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    found.reverse();
    found
}

#[test]
fn settings_default_to_email_only_and_bad_ones_change_nothing() {
    let app = app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let mut browser = Browser::new();
    browser.sign_in(&app, "p1", "settler");
    let (status, alerts) = browser.api(&app, "GET", "/alerts", None);
    assert_eq!(status, 200);
    assert_eq!(
        alerts,
        json!({"settings": {"balanceBelow": null, "limitPercent": null, "email": true,
                            "webhookUrl": null},
               "mailAvailable": false, "emailAddress": true, "deliveries": []})
    );
    let put = |browser: &mut Browser, body: Value| browser.api(&app, "PUT", "/alerts", Some(body));
    for (body, error) in [
        (
            json!({"balanceBelow": "abc", "email": true}),
            "balanceBelow must be a positive USD amount such as \"1.00\": got \"abc\"",
        ),
        (
            json!({"balanceBelow": "0", "email": true}),
            "balanceBelow must be a positive USD amount such as \"1.00\": got \"0\"",
        ),
        (
            json!({"limitPercent": 0, "email": true}),
            "Invalid 'limitPercent'",
        ),
        (
            json!({"limitPercent": 101, "email": true}),
            "Invalid 'limitPercent'",
        ),
        (json!({"balanceBelow": "1.00"}), "Invalid 'email'"),
        (
            json!({"email": true, "webhookUrl": "ftp://example.com/x"}),
            "webhookUrl must be an http or https URL",
        ),
    ] {
        assert_eq!(
            put(&mut browser, body.clone()),
            (400, json!({"error": error})),
            "{body}"
        );
    }
    // Nothing changed; without a webhook there is no secret to roll.
    assert_eq!(browser.api(&app, "GET", "/alerts", None).1, alerts);
    assert_eq!(
        browser.api(&app, "POST", "/alerts/roll-secret", None),
        (409, json!({"error": "No webhookUrl is set: set one first"}))
    );
    // A change without the session's CSRF token is refused.
    assert_eq!(
        browser
            .api_with(
                &app,
                "PUT",
                "/alerts",
                Some(json!({"email": false})),
                &[("origin", &app.address)]
            )
            .0,
        403
    );
    let (status, saved) = put(
        &mut browser,
        json!({"balanceBelow": "1.50", "limitPercent": 80, "email": false}),
    );
    assert_eq!(status, 200, "{saved}");
    assert_eq!(
        saved,
        json!({"settings": {"balanceBelow": "1.5", "limitPercent": 80, "email": false,
                            "webhookUrl": null}})
    );
    // A test with no channel goes nowhere, and says so.
    let (status, tested) = browser.api(&app, "POST", "/alerts/test", None);
    assert_eq!(status, 200);
    assert_eq!(tested["channels"], json!([]));
    assert!(tested["event"].as_str().unwrap().starts_with("msg_"));
}

/// The whole story on one server: a crossing by a charge is one e-mail and one signed
/// webhook; charges below it and the 402 after send only `balance.empty`; a top-up sends
/// `topup.succeeded` and arms the threshold again; the next crossing sends again. The key
/// made at sign-up was an e-mail notice (`key.created`), never a webhook.
#[test]
fn a_crossing_is_one_email_and_one_signed_webhook_and_a_top_up_arms_it_again() {
    let app = app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let (sink, receiver) = (SmtpSink::start(), Receiver::start(&[]));
    let db = app.db.to_string_lossy().into_owned();
    let target = ["--db", db.as_str()];
    set_relay(&target, &sink);
    let (mut browser, account, key) = customer(&app.address, "crosser");
    let (status, saved) = browser.api(
        &app,
        "PUT",
        "/alerts",
        Some(json!({"balanceBelow": "0.0001", "email": true, "webhookUrl": receiver.url()})),
    );
    assert_eq!(status, 200, "{saved}");
    let secret = saved["webhookSecret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    // The same URL again keeps the secret, shown no more.
    let (_, again) = browser.api(
        &app,
        "PUT",
        "/alerts",
        Some(json!({"balanceBelow": "0.0001", "email": true, "webhookUrl": receiver.url()})),
    );
    assert_eq!(again.get("webhookSecret"), None, "{again}");

    // 140 micros: the 2nd lookup leaves 84, below 100 (flushed before the next: a flush
    // settles its charges at once, and the event says the balance it left); the 6th is
    // 402.
    set_balance(&target, &account, 5 * LOOKUP);
    let mut statuses: Vec<u16> = (0..2).map(|_| lookup_at(&app.address, &key)).collect();
    std::thread::sleep(Duration::from_millis(300));
    statuses.extend((0..4).map(|_| lookup_at(&app.address, &key)));
    assert_eq!(statuses, [200, 200, 200, 200, 200, 402]);
    let mails = sink.wait_for(3, Duration::from_secs(15));
    let webhooks = receiver.wait_for(2, Duration::from_secs(15));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        sink.messages().len(),
        3,
        "key.created, balance.low, balance.empty"
    );
    assert_eq!(receiver.requests().len(), 2, "balance.low, balance.empty");
    // Deliveries run side by side: no order between events is promised.
    let of_type = |kind: &str| -> Vec<Value> {
        bodies(&receiver)
            .into_iter()
            .filter(|b| b["type"] == kind)
            .collect()
    };
    let low = &of_type("balance.low")[0];
    assert_eq!(
        low["data"],
        json!({"account": account, "balance": "0.000084", "threshold": "0.0001"})
    );
    assert!(low["timestamp"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        of_type("balance.empty")[0]["data"],
        json!({"account": account, "balance": "0"})
    );
    verify_with_standardwebhooks(&secret, &webhooks).unwrap();
    let mut subjects: Vec<String> = mails.iter().map(|m| m.header("Subject").unwrap()).collect();
    subjects.sort();
    assert_eq!(
        subjects,
        [
            "Postal: a new API key was made",
            "Postal: your balance is low",
            "Postal: your balance is spent"
        ]
    );
    for mail in &mails {
        assert_eq!(mail.to, ["crosser@provider1.test"]);
        assert_eq!(mail.header("From").unwrap(), "Postal <billing@postal.test>");
    }
    let low_mail = mails
        .iter()
        .find(|m| m.header("Subject").unwrap() == "Postal: your balance is low")
        .unwrap();
    if std::env::var_os("POSTAL_SHOW_ALERTS").is_some() {
        // What a crossing sends, as received (issue 51's closing note).
        for r in receiver.requests() {
            let headers: Vec<String> = r.headers.iter().map(|(n, v)| format!("{n}: {v}")).collect();
            let body = String::from_utf8_lossy(&r.body);
            eprintln!(
                "{} {}\n{}\n\n{body}\n",
                r.method,
                r.path,
                headers.join("\n")
            );
        }
        eprintln!("{}", low_mail.data);
    }
    let text = low_mail.body().replace("=\r\n", "").replace("\r\n", " ");
    assert!(
        text.contains(&format!(
            "The balance of account {account} fell below 0.0001 USD: 0.000084 USD is left."
        )),
        "{text}"
    );
    // The webhook's id is the event's, as the dashboard lists it.
    let alerts = alerts_when(&mut browser, &app.address, 5, |a| {
        attempts(a, "balance.empty").len() == 2
    });
    let id = receiver.requests()[0]
        .header("webhook-id")
        .unwrap()
        .to_owned();
    assert!(
        alerts["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["event"] == id.as_str() && d["channel"] == "webhook")
    );
    assert_eq!(
        attempts(&alerts, "balance.low"),
        [
            (
                "email".into(),
                1,
                "delivered".into(),
                attempts(&alerts, "balance.low")[0].3.clone()
            ),
            ("webhook".into(), 1, "delivered".into(), "HTTP 200".into()),
        ]
    );

    // A top-up: topup.succeeded on both channels, and the threshold armed again.
    crate::migrate::cli(&target, &["account", "topup", &account, "--usd", "5"]);
    receiver.wait_for(3, Duration::from_secs(15));
    assert_eq!(bodies(&receiver)[2]["type"], "topup.succeeded");
    assert_eq!(
        bodies(&receiver)[2]["data"],
        json!({"account": account, "amount": "5", "balance": "5"})
    );
    set_balance(&target, &account, 4 * LOOKUP);
    assert_eq!(lookup_at(&app.address, &key), 200);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(lookup_at(&app.address, &key), 200);
    let webhooks = receiver.wait_for(4, Duration::from_secs(15));
    assert_eq!(bodies(&receiver)[3]["type"], "balance.low");
    assert_eq!(bodies(&receiver)[3]["data"]["balance"], "0.000084");
    verify_with_standardwebhooks(&secret, &webhooks).unwrap();
    assert_eq!(sink.wait_for(5, Duration::from_secs(15)).len(), 5);
}

/// A receiver answering 500 twice gets the same `webhook-id` and body a third time, and
/// the deliveries list shows the three attempts.
#[test]
fn a_failing_receiver_gets_the_same_event_again_until_it_answers_2xx() {
    let app = app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let receiver = Receiver::start(&[500, 500]);
    let mut browser = Browser::new();
    browser.sign_in(&app, "p1", "retrier");
    let (_, saved) = browser.api(
        &app,
        "PUT",
        "/alerts",
        Some(json!({"email": true, "webhookUrl": receiver.url()})),
    );
    let secret = saved["webhookSecret"].as_str().unwrap().to_owned();
    let (status, tested) = browser.api(&app, "POST", "/alerts/test", None);
    assert_eq!(status, 200);
    assert_eq!(tested["channels"], json!(["webhook"]));
    let requests = receiver.wait_for(3, Duration::from_secs(20));
    let ids: Vec<&str> = requests
        .iter()
        .map(|r| r.header("webhook-id").unwrap())
        .collect();
    assert_eq!(ids, [tested["event"].as_str().unwrap(); 3]);
    assert!(requests.windows(2).all(|w| w[0].body == w[1].body));
    verify_with_standardwebhooks(&secret, &requests).unwrap();
    let alerts = alerts_when(&mut browser, &app.address, 5, |a| {
        attempts(a, "test")
            .last()
            .is_some_and(|t| t.2 == "delivered")
    });
    assert_eq!(
        attempts(&alerts, "test"),
        [
            ("webhook".into(), 1, "retrying".into(), "HTTP 500".into()),
            ("webhook".into(), 2, "retrying".into(), "HTTP 500".into()),
            ("webhook".into(), 3, "delivered".into(), "HTTP 200".into()),
        ]
    );
    // A new secret signs from now on; the old one no longer verifies.
    let (status, rolled) = browser.api(&app, "POST", "/alerts/roll-secret", None);
    assert_eq!(status, 200);
    let new_secret = rolled["webhookSecret"].as_str().unwrap().to_owned();
    assert_ne!(new_secret, secret);
    browser.api(&app, "POST", "/alerts/test", None);
    let requests = receiver.wait_for(4, Duration::from_secs(10));
    verify_with_standardwebhooks(&new_secret, &requests[3..]).unwrap();
    assert!(verify_with_standardwebhooks(&secret, &requests[3..]).is_err());
}

/// `limit.near` once per window: 80% of 10 a minute is the 8th query, and the 9th and
/// 10th send nothing more.
#[test]
fn a_window_near_its_limit_alerts_once() {
    let app = app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let receiver = Receiver::start(&[]);
    crate::browser::with_seconds_left_in_the_minute(20);
    let (mut browser, _account, key) = customer(&app.address, "limiter");
    assert_eq!(
        browser
            .api(&app, "PUT", "/limits", Some(json!({"perMinute": 10})))
            .0,
        200
    );
    browser.api(
        &app,
        "PUT",
        "/alerts",
        Some(json!({"limitPercent": 80, "email": false, "webhookUrl": receiver.url()})),
    );
    let statuses: Vec<u16> = (0..11).map(|_| lookup_at(&app.address, &key)).collect();
    assert_eq!(statuses[..10], [200; 10]);
    assert_eq!(statuses[10], 429);
    receiver.wait_for(1, Duration::from_secs(10));
    std::thread::sleep(Duration::from_secs(2));
    let received = bodies(&receiver);
    assert_eq!(received.len(), 1, "{received:?}");
    let data = &received[0]["data"];
    assert_eq!(received[0]["type"], "limit.near");
    assert_eq!(
        (&data["window"], &data["limit"], &data["percent"]),
        (
            &json!("minute"),
            &json!(10),
            &json!(data["queries"].as_u64().unwrap() * 10)
        )
    );
    assert!(data["queries"].as_u64().unwrap() >= 8);
}

/// Without `--allow-private-webhooks`: loopback, private and metadata addresses and plain
/// http are refused, and nothing is stored.
#[test]
fn private_webhook_addresses_are_refused_without_the_flag() {
    let app = crate::helpers::spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let mut browser = Browser::new();
    browser.sign_in(&app, "p1", "prober");
    for url in [
        "http://127.0.0.1:9/hook",
        "https://127.0.0.1:9/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://10.1.2.3/hook",
        "https://[::1]/hook",
        "https://localhost/hook",
    ] {
        let (status, refused) = browser.api(
            &app,
            "PUT",
            "/alerts",
            Some(json!({"email": true, "webhookUrl": url})),
        );
        assert_eq!(status, 400, "{url}: {refused}");
        let text = refused["error"].as_str().unwrap();
        assert!(text.starts_with("webhookUrl "), "{url}: {text}");
    }
    assert_eq!(
        browser.api(&app, "GET", "/alerts", None).1["settings"]["webhookUrl"],
        Value::Null
    );
}

/// Killed (SIGKILL) right after a crossing whose webhook could not be delivered yet (its
/// receiver is down): restarted, the server delivers the event once.
#[test]
fn a_crossing_before_a_kill_is_delivered_once_after_the_restart() {
    let dir = testkit::tempdir();
    let db = testkit::template::copy(crate::helpers::tiny_template(), &dir.path().join("k.db"));
    let flags = [
        "--allow-private-webhooks",
        "--alert-retry-base-ms",
        "200",
        "--durable-charges",
    ];
    let mut server = testkit::Serve::start(env!("CARGO_BIN_EXE_postal"), &db, &flags);
    let address = format!("http://{}", server.host_port());
    let db_text = db.to_string_lossy().into_owned();
    let target = ["--db", db_text.as_str()];
    let Some(_providers) = crate::account::providers_for(&[&address], &target) else {
        return;
    };
    // The receiver's port, closed while the crossing is made.
    let port = Receiver::start(&[]).port();
    let url = format!("http://127.0.0.1:{port}/hook");
    let (mut browser, account, key) = customer(&address, "killed");
    let (_, saved) = browser.api_at(
        &address,
        "PUT",
        "/alerts",
        Some(json!({"balanceBelow": "0.0001", "email": false, "webhookUrl": url})),
    );
    let secret = saved["webhookSecret"].as_str().unwrap().to_owned();
    set_balance(&target, &account, 4 * LOOKUP);
    assert_eq!(lookup_at(&address, &key), 200);
    assert_eq!(lookup_at(&address, &key), 200);
    // Its first attempt failed (nothing listens): no claim is held when it is killed.
    alerts_when(&mut browser, &address, 10, |a| {
        attempts(a, "balance.low")
            .first()
            .is_some_and(|first| first.2 == "retrying")
    });
    server.stop("KILL");
    let receiver = Receiver::start_on(port, &[]);
    let _restarted = testkit::Serve::start(env!("CARGO_BIN_EXE_postal"), &db, &flags);
    let requests = receiver.wait_for(1, Duration::from_secs(20));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(receiver.requests().len(), 1);
    assert_eq!(bodies(&receiver)[0]["type"], "balance.low");
    verify_with_standardwebhooks(&secret, &requests).unwrap();
}

/// Two nodes of a cluster spending one account across its threshold and to 402: one
/// `balance.low` and one `balance.empty`, decided where the balance is settled.
#[test]
fn two_nodes_spending_one_account_across_the_threshold_make_one_event() {
    let Some(nodes) = two_nodes_with(&["--allow-private-webhooks", "--alert-retry-base-ms", "200"])
    else {
        return;
    };
    let receiver = Receiver::start(&[]);
    let target = ["--ledger", nodes.url.as_str()];
    let (mut browser, account, key) = customer(&nodes.a, "cluster");
    browser.api_at(
        &nodes.a,
        "PUT",
        "/alerts",
        Some(json!({"balanceBelow": "0.0005", "email": false, "webhookUrl": receiver.url()})),
    );
    // A day's limit near i64::MAX with a percent set: the window trigger must not
    // overflow (a failing trigger would fail every flush of the node).
    crate::migrate::cli_text(
        &target,
        &[
            "account",
            "limits",
            &account,
            "--per-day",
            "9000000000000000000",
        ],
    );
    browser.api_at(
        &nodes.a,
        "PUT",
        "/alerts",
        Some(
            json!({"balanceBelow": "0.0005", "limitPercent": 50, "email": false,
                    "webhookUrl": receiver.url()}),
        ),
    );
    // 40 lookups' worth; the threshold is crossed after about 22, on whichever node.
    set_balance(&target, &account, 40 * LOOKUP);
    let mut statuses = Vec::new();
    for i in 0..60 {
        let node = if i % 2 == 0 { &nodes.a } else { &nodes.b };
        statuses.push(lookup_at(node, &key));
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        40,
        "{statuses:?}"
    );
    receiver.wait_for(2, Duration::from_secs(20));
    std::thread::sleep(Duration::from_secs(3));
    let mut kinds: Vec<String> = bodies(&receiver)
        .iter()
        .map(|b| b["type"].as_str().unwrap().to_owned())
        .collect();
    kinds.sort();
    assert_eq!(kinds, ["balance.empty", "balance.low"]);
}

/// At most 4 deliveries of one account in flight: six test events to a receiver that
/// answers each after 2 s reach it 4 at once, the other 2 only as those end.
#[test]
fn an_account_has_at_most_four_deliveries_in_flight() {
    let app = app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let receiver = Receiver::start_slow(&[], Duration::from_secs(2));
    let mut browser = Browser::new();
    browser.sign_in(&app, "p1", "busy");
    browser.api(
        &app,
        "PUT",
        "/alerts",
        Some(json!({"email": false, "webhookUrl": receiver.url()})),
    );
    for _ in 0..6 {
        assert_eq!(browser.api(&app, "POST", "/alerts/test", None).0, 200);
    }
    let requests = receiver.wait_for(6, Duration::from_secs(20));
    let first = requests[0].at;
    let after = |r: &testkit::webhooks::Received| r.at.duration_since(first).unwrap();
    assert!(
        requests[..4]
            .iter()
            .all(|r| after(r) < Duration::from_millis(1500)),
        "{:?}",
        requests.iter().map(after).collect::<Vec<_>>()
    );
    assert!(
        requests[4..]
            .iter()
            .all(|r| after(r) >= Duration::from_millis(1500)),
        "{:?}",
        requests.iter().map(after).collect::<Vec<_>>()
    );
}
