//! Linking and sessions that follow identities (issue 50 items 4 and 8; security review
//! 2026-11-28, L2 and L7): a link starts from a change of the page (CSRF), asks the
//! provider to sign in again and links only on the customer's confirmation; unlinking an
//! identity or removing its provider ends the sessions it opened; a roll, a revoke, a
//! limit change, an unlink and a top-up need a sign-in of the last 15 minutes.

use rusqlite::Connection;
use serde_json::{Value, json};

use crate::account::{Browser, Page, host_of, providers};
use crate::helpers::{TestApp, spawn_app};
use crate::signin_kinds::query_value;

const AGAIN: &str =
    "Sign in again to do this: this session's last sign-in is more than 15 minutes old";

fn subjects(me: &Value) -> Vec<String> {
    let mut subjects: Vec<String> = me["identities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["subject"].as_str().unwrap().to_owned())
        .collect();
    subjects.sort();
    subjects
}

impl Browser {
    /// Starts a link of provider `name` to the account signed in at `address`, as the
    /// page's button does (`POST /account/api/identities/link`): the provider's URL.
    pub(crate) fn start_link_at(&mut self, address: &str, name: &str) -> String {
        let (status, started) = self.api_at(
            address,
            "POST",
            "/identities/link",
            Some(json!({"provider": name})),
        );
        assert_eq!(status, 200, "{started}");
        started["url"].as_str().unwrap().to_owned()
    }

    /// Links provider `name`'s identity `user` to the account signed in at `address`, as
    /// a customer does: the link started, the provider's sign-in, the confirmation page
    /// and its Link button; the page it ends on.
    pub(crate) fn link_at(&mut self, address: &str, name: &str, user: &str) -> Page {
        let url = self.start_link_at(address, name);
        let offer = self.follow(&url, user);
        assert_eq!(offer.status, 200, "{}", offer.body);
        assert!(
            offer.body.contains("Link this identity to your account?"),
            "{}",
            offer.body
        );
        self.answer_link_at(address, "link")
    }

    /// Posts `decision` (`link`, `cancel`) on the link's confirmation page, with the
    /// session's CSRF token; the page it ends on.
    pub(crate) fn answer_link_at(&mut self, address: &str, decision: &str) -> Page {
        let csrf = self.api_at(address, "GET", "/me", None).1["csrfToken"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let posted = self.request(
            "POST",
            &format!("{address}/account/link"),
            Some((
                "application/x-www-form-urlencoded",
                format!("csrf={csrf}&decision={decision}"),
            )),
            &[("origin", address)],
        );
        match posted.location.clone() {
            Some(next) => self.follow(&next, ""),
            None => posted,
        }
    }
}

/// The account's audit lines of `action`, newest first.
fn audited(browser: &mut Browser, app: &TestApp, action: &str) -> Vec<String> {
    let (_, audit) = browser.api(app, "GET", "/audit", None);
    audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == action)
        .map(|e| e["detail"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_link_asks_the_provider_to_sign_in_again_and_links_only_on_confirmation() {
    let app = spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let mut alice = Browser::new();
    // A plain sign-in asks the provider to say when the person signed in there (`max_age`
    // as long as a session lives): a pass through its own session is not a new sign-in.
    let plain = alice.get(&format!("{}/account/signin/p1", app.address));
    assert_eq!(
        query_value(plain.location.as_deref().unwrap(), "max_age"),
        "43200"
    );
    alice.sign_in(&app, "p1", "alice");
    // A GET starts nothing: a link is a change of the page, with its CSRF token.
    assert_eq!(
        alice
            .get(&format!("{}/account/link/p3", app.address))
            .status,
        404
    );
    let (status, refused) = alice.api_with(
        &app,
        "POST",
        "/identities/link",
        Some(json!({"provider": "p3"})),
        &[("origin", &app.address)],
    );
    assert_eq!(
        (status, refused),
        (403, json!({"error": "Missing or wrong X-CSRF-Token"}))
    );
    let (status, unknown) = alice.api(
        &app,
        "POST",
        "/identities/link",
        Some(json!({"provider": "p9"})),
    );
    assert_eq!(
        (status, unknown),
        (404, json!({"error": "No such sign-in provider."}))
    );

    // The provider is asked to sign the person in again, whatever session it has.
    let url = alice.start_link_at(&app.address, "p3");
    assert_eq!(query_value(&url, "prompt"), "login");
    assert_eq!(query_value(&url, "max_age"), "0");
    let offer = alice.follow(&url, "alice-at-3");
    assert_eq!(offer.status, 200, "{}", offer.body);
    assert!(
        offer.body.contains("Link this identity to your account?"),
        "{}",
        offer.body
    );
    assert!(offer.body.contains("alice-at-3"), "{}", offer.body);
    // Nothing is linked before the customer says so.
    let (_, me) = alice.api(&app, "GET", "/me", None);
    assert_eq!(subjects(&me), ["alice"]);
    // A confirmation without the session's token (another site's form) links nothing.
    let forged = alice.request(
        "POST",
        &format!("{}/account/link", app.address),
        Some((
            "application/x-www-form-urlencoded",
            "csrf=forged&decision=link".into(),
        )),
        &[("origin", &app.address)],
    );
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert!(forged.body.contains("Missing or wrong X-CSRF-Token"));
    // Cancel: nothing linked, and nothing left to confirm.
    let cancelled = alice.answer_link_at(&app.address, "cancel");
    assert!(
        cancelled.body.contains("Your account"),
        "{}",
        cancelled.body
    );
    let nothing = alice.get(&format!("{}/account/link", app.address));
    assert_eq!(nothing.status, 404);
    assert!(
        nothing.body.contains(
            "No link is waiting for your confirmation (or it waited over 10 minutes); link again from your dashboard."
        ),
        "{}",
        nothing.body
    );
    let (_, me) = alice.api(&app, "GET", "/me", None);
    assert_eq!(subjects(&me), ["alice"]);

    // A confirmation 16 minutes after the last sign-in links nothing until the customer
    // signs in again; the identity waits meanwhile.
    let url = alice.start_link_at(&app.address, "p3");
    alice.follow(&url, "alice-at-3b");
    age_sign_ins(&app, 16 * 60);
    let stale = alice.answer_link_at(&app.address, "link");
    assert_eq!(stale.status, 403, "{}", stale.body);
    assert!(
        stale.body.contains("Sign in again to do this"),
        "{}",
        stale.body
    );
    let (_, again) = alice.api(&app, "POST", "/reauth", None);
    alice.follow(again["url"].as_str().unwrap(), "alice");
    let confirmed = alice.answer_link_at(&app.address, "link");
    assert!(
        confirmed.body.contains("Your account"),
        "{}",
        confirmed.body
    );
    let (_, me) = alice.api(&app, "GET", "/me", None);
    assert_eq!(subjects(&me), ["alice", "alice-at-3b"]);
    let issuer = me["identities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["subject"] == "alice-at-3b")
        .unwrap()["issuer"]
        .clone();
    let unlink = json!({"issuer": issuer, "subject": "alice-at-3b"});
    assert_eq!(
        alice
            .api(&app, "POST", "/identities/unlink", Some(unlink))
            .0,
        200
    );

    // Link: linked, audited, and the identity signs in to the account.
    let linked = alice.link_at(&app.address, "p3", "alice-at-3");
    assert!(linked.body.contains("Your account"), "{}", linked.body);
    let (_, me) = alice.api(&app, "GET", "/me", None);
    assert_eq!(subjects(&me), ["alice", "alice-at-3"]);
    assert_eq!(audited(&mut alice, &app, "identity.link").len(), 2);
    let mut again = Browser::new();
    again.sign_in(&app, "p3", "alice-at-3");
    assert_eq!(
        again.api(&app, "GET", "/me", None).1["accountId"],
        me["accountId"]
    );
}

#[test]
fn unlinking_an_identity_or_removing_its_provider_ends_the_sessions_it_opened() {
    let app = spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let mut first = Browser::new();
    first.sign_in(&app, "p1", "alice");
    first.link_at(&app.address, "p3", "alice-at-3");
    let mut second = Browser::new();
    second.sign_in(&app, "p3", "alice-at-3");
    assert_eq!(second.api(&app, "GET", "/me", None).0, 200);
    let (_, me) = first.api(&app, "GET", "/me", None);
    let issuer = me["identities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["subject"] == "alice-at-3")
        .unwrap()["issuer"]
        .clone();

    let (status, body) = first.api(
        &app,
        "POST",
        "/identities/unlink",
        Some(json!({"issuer": issuer, "subject": "alice-at-3"})),
    );
    assert_eq!((status, body), (200, json!({"unlinked": true})));
    // The session it opened is over; the one opened with p1 goes on.
    assert_eq!(
        second.api(&app, "GET", "/me", None),
        (401, json!({"error": "Not signed in"}))
    );
    assert_eq!(first.api(&app, "GET", "/me", None).0, 200);
    assert_eq!(
        audited(&mut first, &app, "identity.unlink"),
        [format!(
            "{}; ended the 1 session(s) it opened",
            issuer.as_str().unwrap()
        )]
    );

    // Removing a provider ends every session its identities opened.
    let mut bob = Browser::new();
    bob.sign_in(&app, "p2", "bob");
    assert_eq!(
        app.cli(&["provider", "remove", "p2"]),
        json!({"name": "p2", "removed": true})
    );
    assert_eq!(
        bob.api(&app, "GET", "/me", None),
        (401, json!({"error": "Not signed in"}))
    );
    assert_eq!(first.api(&app, "GET", "/me", None).0, 200);
}

/// Makes the last sign-in of every session of `app`'s file `secs` older.
fn age_sign_ins(app: &TestApp, secs: i64) {
    Connection::open(&app.db)
        .unwrap()
        .execute(
            "UPDATE sessions SET authenticated_at = authenticated_at - ?1",
            [secs],
        )
        .unwrap();
}

#[test]
fn a_change_of_keys_limits_identities_or_money_needs_a_sign_in_of_the_last_15_minutes() {
    let app = spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let mut alice = Browser::new();
    alice.sign_in(&app, "p1", "alice");
    alice.link_at(&app.address, "p3", "alice-at-3");
    let (status, key) = alice.api(&app, "POST", "/keys", Some(json!({"name": "web"})));
    assert_eq!(status, 201, "{key}");
    let key_path = format!("/keys/{}", key["keyId"].as_str().unwrap());
    // Fifteen minutes are recent enough.
    age_sign_ins(&app, 14 * 60);
    let (status, limits) = alice.api(&app, "PUT", "/limits", Some(json!({"perDay": 100})));
    assert_eq!(status, 200, "{limits}");

    age_sign_ins(&app, 2 * 60);
    let refused = json!({ "error": AGAIN });
    let changes = [
        (
            "POST",
            format!("{key_path}/roll"),
            Some(json!({"graceHours": 1})),
        ),
        ("DELETE", key_path.clone(), None),
        ("PUT", "/limits".to_owned(), Some(json!({"perDay": 5}))),
        (
            "POST",
            "/identities/unlink".to_owned(),
            Some(json!({"issuer": "x", "subject": "alice-at-3"})),
        ),
        (
            "POST",
            "/topups".to_owned(),
            Some(json!({"amount": "5.00"})),
        ),
        ("POST", "/keys".to_owned(), Some(json!({"name": "other"}))),
        (
            "POST",
            "/identities/link".to_owned(),
            Some(json!({"provider": "p2"})),
        ),
    ];
    for (method, path, body) in &changes {
        assert_eq!(
            alice.api(&app, method, path, body.clone()),
            (403, refused.clone()),
            "{method} {path}"
        );
    }
    // Nothing changed; renaming a key and reads go on.
    let (_, me) = alice.api(&app, "GET", "/me", None);
    assert_eq!(me["limits"]["perDay"], json!(100));
    assert_eq!(subjects(&me), ["alice", "alice-at-3"]);
    let (_, keys) = alice.api(&app, "GET", "/keys", None);
    assert_eq!(keys["keys"].as_array().unwrap().len(), 1);
    let (status, _) = alice.api(&app, "PATCH", &key_path, Some(json!({"name": "shop"})));
    assert_eq!(status, 200);

    // A sign-in again started in this session completes in no other browser.
    let (status, started) = alice.api(&app, "POST", "/reauth", None);
    assert_eq!(status, 200, "{started}");
    let url = started["url"].as_str().unwrap().to_owned();
    assert_eq!(query_value(&url, "prompt"), "login");
    let mut other = Browser::new();
    other.sign_in(&app, "p3", "alice-at-3");
    let state = alice.cookie(&app.address, "postal_signin").unwrap();
    other
        .cookies
        .entry(host_of(&app.address))
        .or_default()
        .insert("postal_signin".into(), state);
    let elsewhere = other.follow(&url, "alice");
    assert_eq!(elsewhere.status, 403, "{}", elsewhere.body);
    assert!(
        elsewhere.body.contains(
            "This sign-in again was started in another session; start it again from your dashboard."
        ),
        "{}",
        elsewhere.body
    );

    // As another person than the session's: refused, still not recent.
    let (_, started) = alice.api(&app, "POST", "/reauth", None);
    let page = alice.follow(started["url"].as_str().unwrap(), "mallory");
    assert_eq!(page.status, 403, "{}", page.body);
    assert!(
        page.body
            .contains("You signed in again as another identity than this session&#39;s"),
        "{}",
        page.body
    );
    let (status, _) = alice.api(&app, "DELETE", &key_path, None);
    assert_eq!(status, 403);

    // As the same person: the changes are open again, and the audit log says so.
    let (_, started) = alice.api(&app, "POST", "/reauth", None);
    let page = alice.follow(started["url"].as_str().unwrap(), "alice");
    assert!(page.body.contains("Your account"), "{}", page.body);
    for (method, path, body) in &changes[..3] {
        let (status, answer) = alice.api(&app, method, path, body.clone());
        assert!(status == 200 || status == 201, "{method} {path}: {answer}");
    }
    let lines = audited(&mut alice, &app, "session.reauth");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("signed in again with p1 ("),
        "{lines:?}"
    );
    assert!(lines[0].ends_with(", subject alice)"), "{lines:?}");
}
