//! The callback's error (issue 50 item 7; security review 2026-11-28, L6): the state is
//! checked before anything else of the URL is read, a provider's `error` shows a fixed
//! text per code, and `error_description` never reaches the page. A GitHub provider
//! serves: its sign-in starts without calling it, so no stand-in is needed.

use crate::account::{Browser, host_of};
use crate::helpers::{TestApp, spawn_app};
use crate::outside::alert;

const SPOOF: &str = "error_description=Your+account+is+suspended.+Call+%2B1-555-0100";

fn app_with_github() -> TestApp {
    let app = spawn_app();
    add_github(&app);
    app
}

/// Adds the GitHub provider `gh` (at a closed loopback port: its sign-in starts without
/// calling it) to `app`.
pub(crate) fn add_github(app: &TestApp) {
    let added = std::process::Command::new(env!("CARGO_BIN_EXE_postal"))
        .arg("--db")
        .arg(&app.db)
        .args(["provider", "add", "gh", "--kind", "github"])
        .args([
            "--github-url",
            "http://127.0.0.1:9",
            "--client-id",
            "postal",
        ])
        .args(["--client-secret-env", "TEST_CLIENT_SECRET"])
        .env("TEST_CLIENT_SECRET", "secret-of-postal")
        .output()
        .unwrap();
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
}

/// Starts a sign-in with `gh` in `browser`: its state (the cookie is kept).
fn started(browser: &mut Browser, app: &TestApp) -> String {
    let start = browser.get(&format!("{}/account/signin/gh", app.address));
    assert_eq!(start.status, 303, "{}", start.body);
    let to = start.location.unwrap();
    url::Url::parse(&to)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned())
        .unwrap()
}

/// The status and alert text of `GET /account/callback/gh?QUERY` in `browser`; the body
/// never holds a word of the description.
fn callback(browser: &mut Browser, app: &TestApp, query: &str) -> (u16, String) {
    let page = browser.get(&format!("{}/account/callback/gh?{query}", app.address));
    for word in ["555", "suspended", "Call"] {
        assert!(!page.body.contains(word), "{word} in {}", page.body);
    }
    (page.status, alert(&page.body))
}

#[test]
fn a_callback_error_without_this_browsers_sign_in_shows_nothing_of_the_url() {
    let app = app_with_github();
    let mut stranger = Browser::new();
    // The review's probe: no state at all.
    assert_eq!(
        callback(&mut stranger, &app, &format!("error=x&{SPOOF}")),
        (
            400,
            "The provider's answer lacks its code or state.".to_owned()
        )
    );
    // A state this browser did not start with.
    assert_eq!(
        callback(
            &mut stranger,
            &app,
            &format!("error=access_denied&{SPOOF}&state=abc")
        ),
        (
            400,
            "This sign-in was not started in this browser (its state does not match); start again."
                .to_owned()
        )
    );
    // Its cookie and the state agree, but no such sign-in is pending.
    stranger
        .cookies
        .entry(host_of(&app.address))
        .or_default()
        .insert("postal_signin".into(), "abc".into());
    assert_eq!(
        callback(
            &mut stranger,
            &app,
            &format!("error=access_denied&{SPOOF}&state=abc")
        ),
        (
            400,
            "This sign-in expired or was already used; start again.".to_owned()
        )
    );
    // Another browser's pending sign-in is not this one's either.
    let mut victim = Browser::new();
    let state = started(&mut victim, &app);
    assert_eq!(
        callback(
            &mut stranger,
            &app,
            &format!("error=x&{SPOOF}&state={state}")
        )
        .0,
        400
    );
}

#[test]
fn a_providers_error_shows_a_fixed_text_per_code_once() {
    let app = app_with_github();
    let cases = [
        (
            "access_denied",
            403,
            "The sign-in was declined at the provider; nothing was changed.",
        ),
        (
            "server_error",
            502,
            "The provider failed while signing you in; try again later.",
        ),
        (
            "invalid_scope",
            502,
            "The provider refused the access this service asks for; tell the operator of this service.",
        ),
        (
            "%3Cb%3ECall+%2B1-555-0100%3C%2Fb%3E",
            400,
            "The provider refused the sign-in; start again.",
        ),
    ];
    for (code, status, text) in cases {
        let mut browser = Browser::new();
        let state = started(&mut browser, &app);
        let query = format!("error={code}&{SPOOF}&state={state}");
        assert_eq!(
            callback(&mut browser, &app, &query),
            (status, text.to_owned()),
            "{code}"
        );
        assert_eq!(browser.api(&app, "GET", "/me", None).0, 401);
        // The sign-in was taken: the same answer again (its cookie put back) is refused.
        browser
            .cookies
            .entry(host_of(&app.address))
            .or_default()
            .insert("postal_signin".into(), state.clone());
        assert_eq!(
            callback(&mut browser, &app, &query),
            (
                400,
                "This sign-in expired or was already used; start again.".to_owned()
            ),
            "{code}"
        );
    }
}

#[test]
fn a_sign_in_ends_the_session_the_browser_had_with_an_audit_line_of_each() {
    let app = spawn_app();
    let Some(_providers) = crate::account::providers(&app) else {
        return;
    };
    let mut browser = Browser::new();
    browser.sign_in(&app, "p1", "alice");
    let (_, alice) = browser.api(&app, "GET", "/me", None);
    // The same browser signs in as someone else: alice's session ends.
    browser.sign_in(&app, "p2", "bob");
    let (_, bob) = browser.api(&app, "GET", "/me", None);
    assert_ne!(bob["accountId"], alice["accountId"]);

    let mut other = Browser::new();
    other.sign_in(&app, "p1", "alice");
    let (_, sessions) = other.api(&app, "GET", "/sessions", None);
    let live: Vec<&serde_json::Value> = sessions["sessions"].as_array().unwrap().iter().collect();
    assert_eq!(live.len(), 1, "{sessions}");
    assert_eq!(live[0]["current"], serde_json::json!(true), "{sessions}");
    let (_, audit) = other.api(&app, "GET", "/audit", None);
    let lines: Vec<(String, String)> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_owned(),
                e["detail"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let first = alice["sessionId"].as_str().unwrap();
    let actions: Vec<&str> = lines.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(
        actions,
        [
            "session.start",
            "session.end",
            "session.start",
            "account.create"
        ],
        "{audit}"
    );
    assert_eq!(lines[1].1, first, "{audit}");
    assert!(
        lines[2]
            .1
            .starts_with(&format!("{first} signed in with p1 (")),
        "{audit}"
    );
}
