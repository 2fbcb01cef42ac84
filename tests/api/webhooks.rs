//! One webhook delivery of an alert (`postal::alerts::webhook::deliver`) against a
//! local receiver (`testkit::webhooks`): signed as the official `standardwebhooks`
//! package verifies, 2xx only, no redirects, 10 s at most, and nothing sent to a
//! non-public address without `allow_private`.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use postal::alerts::webhook::{Attempt, Outcome, check_url, deliver, new_secret};
use testkit::webhooks::{Receiver, verify_with_standardwebhooks};

const ID: &str = "evt_balance_low_0001";

fn now() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(since.as_secs()).unwrap()
}

fn body(timestamp: i64) -> Vec<u8> {
    serde_json::json!({
        "type": "balance.low",
        "timestamp": timestamp,
        "data": {"accountId": "acc_1", "balance": "0.99", "threshold": "1.00"},
    })
    .to_string()
    .into_bytes()
}

/// One attempt at `url` signed with `secret`, now.
fn send(url: &str, secret: &str, allow_private: bool) -> Outcome {
    let timestamp = now();
    let body = body(timestamp);
    deliver(
        &Attempt {
            url,
            secret,
            id: ID,
            timestamp,
            body: &body,
        },
        allow_private,
    )
}

fn failed(result: &str) -> Outcome {
    Outcome {
        delivered: false,
        result: result.to_owned(),
    }
}

#[test]
fn a_200_is_delivered_signed_as_standardwebhooks_verifies() {
    let receiver = Receiver::start(&[]);
    let secret = new_secret();
    let timestamp = now();
    let sent = body(timestamp);
    let outcome = deliver(
        &Attempt {
            url: &receiver.url(),
            secret: &secret,
            id: ID,
            timestamp,
            body: &sent,
        },
        true,
    );
    assert_eq!(
        outcome,
        Outcome {
            delivered: true,
            result: "HTTP 200".to_owned()
        }
    );
    let requests = receiver.wait_for(1, Duration::from_secs(5));
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/hook")
    );
    assert_eq!(request.body, sent);
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(request.header("webhook-id"), Some(ID));
    assert_eq!(
        request.header("webhook-timestamp"),
        Some(&*timestamp.to_string())
    );
    assert!(
        request
            .header("webhook-signature")
            .unwrap()
            .starts_with("v1,")
    );
    assert!(request.header("user-agent").unwrap().starts_with("postal/"));
    verify_with_standardwebhooks(&secret, &requests).unwrap();
    // The check is a check: under another secret the signature is refused.
    if testkit::require("python3", "python3 with venv and pip") {
        let refused = verify_with_standardwebhooks(&new_secret(), &requests).unwrap_err();
        assert!(refused.contains("No matching signature found"), "{refused}");
    }
}

#[test]
fn a_500_is_not_delivered_and_the_retry_carries_the_same_id() {
    let receiver = Receiver::start(&[500, 500]);
    let secret = new_secret();
    assert_eq!(send(&receiver.url(), &secret, true), failed("HTTP 500"));
    assert_eq!(send(&receiver.url(), &secret, true), failed("HTTP 500"));
    assert!(send(&receiver.url(), &secret, true).delivered);
    let requests = receiver.wait_for(3, Duration::from_secs(5));
    assert!(requests.iter().all(|r| r.header("webhook-id") == Some(ID)));
    verify_with_standardwebhooks(&secret, &requests).unwrap();
}

#[test]
fn a_redirect_is_not_followed() {
    for status in [301, 302, 307, 308] {
        let receiver = Receiver::start(&[status]);
        assert_eq!(
            send(&receiver.url(), &new_secret(), true),
            failed(&format!("HTTP {status} (redirects are not followed)"))
        );
        std::thread::sleep(Duration::from_millis(200));
        let requests = receiver.requests();
        assert_eq!(requests.len(), 1, "{status}: nothing asked for /moved");
        assert_eq!(receiver.connections(), 1);
    }
}

#[test]
fn a_receiver_slower_than_10_s_times_out() {
    let receiver = Receiver::start_slow(&[], Duration::from_secs(12));
    let url = receiver.url();
    let started = Instant::now();
    let (sender, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(send(&url, &new_secret(), true));
    });
    let outcome = outcome
        .recv_timeout(Duration::from_secs(20))
        .expect("deliver returned within 20 s");
    let took = started.elapsed();
    assert_eq!(outcome, failed("timed out after 10 s"));
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(12),
        "{took:?}"
    );
    assert_eq!(receiver.requests().len(), 1);
}

#[test]
fn nothing_reaches_a_loopback_receiver_without_allow_private() {
    let receiver = Receiver::start(&[]);
    let port = receiver.port();
    // https passes the URL's rule: the resolver refuses the address, before any socket.
    for url in [
        format!("https://127.0.0.1:{port}/hook"),
        format!("https://localhost:{port}/hook"),
        format!("https://[::ffff:127.0.0.1]:{port}/hook"),
    ] {
        let outcome = send(&url, &new_secret(), false);
        assert!(!outcome.delivered);
        assert!(
            outcome
                .result
                .starts_with("refused: webhookUrl resolves to ")
                && outcome.result.contains("a loopback address"),
            "{url}: {}",
            outcome.result
        );
    }
    assert_eq!(
        send(&receiver.url(), &new_secret(), false),
        failed("refused: webhookUrl must be an https URL")
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(receiver.connections(), 0);
    assert!(receiver.requests().is_empty());
}

#[test]
fn a_closed_port_is_connection_refused() {
    let port = testkit::free_port();
    assert_eq!(
        send(
            &format!("http://127.0.0.1:{port}/hook"),
            &new_secret(),
            true
        ),
        failed("connection refused")
    );
}

#[test]
fn check_url_refuses_loopback_and_metadata_without_allow_private() {
    assert_eq!(
        check_url("http://127.0.0.1/x", false),
        Err("webhookUrl must be an https URL".to_owned())
    );
    assert_eq!(
        check_url("https://127.0.0.1/x", false),
        Err(
            "webhookUrl resolves to 127.0.0.1, a loopback address: alerts go only to public \
             addresses"
                .to_owned()
        )
    );
    assert_eq!(
        check_url("https://169.254.169.254/latest", false),
        Err(
            "webhookUrl resolves to 169.254.169.254, a link-local address (cloud metadata): \
             alerts go only to public addresses"
                .to_owned()
        )
    );
    assert_eq!(check_url("http://127.0.0.1/x", true), Ok(()));
    assert_eq!(check_url("https://169.254.169.254/latest", true), Ok(()));
}
