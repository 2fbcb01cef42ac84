//! Cookie tossing (issue 50 item 4; security review 2026-11-28, L1): on https the sign-in
//! state is a `__Host-` cookie of `Path=/` (no sibling host can set or shadow it), and a
//! link's callback completes only in the browser whose session started it.

use crate::account::{Browser, host_of, providers};
use crate::helpers::{TestApp, spawn_app, spawn_app_with};

/// The `Set-Cookie` of the sign-in state when `gh` (a GitHub provider: its start calls
/// nobody) starts a sign-in at `app`.
fn state_cookie(app: &TestApp) -> String {
    crate::callback::add_github(app);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    let start = agent
        .get(format!("{}/account/signin/gh", app.address))
        .call()
        .unwrap();
    assert_eq!(start.status().as_u16(), 303);
    let cookie = start.headers()["set-cookie"].to_str().unwrap().to_owned();
    // The state itself: 43 base64url characters.
    let value = cookie.split(';').next().unwrap().split_once('=').unwrap().1;
    assert_eq!(value.len(), 43, "{cookie}");
    cookie.replace(value, "STATE")
}

#[test]
fn on_https_the_sign_in_state_is_a_host_cookie_of_the_whole_site() {
    let https = spawn_app_with(postal::api::Settings {
        dashboard: postal::api::account::DashboardSettings {
            public_url: Some("https://postal.example".into()),
            ..Default::default()
        },
        ..Default::default()
    });
    assert_eq!(
        state_cookie(&https),
        "__Host-postal_signin=STATE; Path=/; Max-Age=600; HttpOnly; SameSite=Lax; Secure"
    );
    // Plain http (local use) cannot have a __Host- cookie: the callback's path only.
    assert_eq!(
        state_cookie(&spawn_app()),
        "postal_signin=STATE; Path=/account/callback; Max-Age=600; HttpOnly; SameSite=Lax"
    );
}

#[test]
fn a_link_started_in_one_session_completes_in_no_other_browser() {
    let app = spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let mut attacker = Browser::new();
    attacker.sign_in(&app, "p1", "mallory");

    // The attacker starts a link to p3; its state planted in a victim's browser, signed in to the victim's own account (and
    // in a browser signed in to none): the provider answers, postal links nothing.
    let text = "This link was started in another session; sign in and link again from your \
                dashboard.";
    for signed_in in [true, false] {
        let mut victim = Browser::new();
        if signed_in {
            victim.sign_in(&app, "p2", "victim");
        }
        let url = attacker.start_link_at(&app.address, "p3");
        let state = attacker.cookie(&app.address, "postal_signin").unwrap();
        victim
            .cookies
            .entry(host_of(&app.address))
            .or_default()
            .insert("postal_signin".into(), state);
        let page = victim.follow(&url, "victim-at-3");
        assert_eq!(page.status, 403, "{}", page.body);
        assert!(page.body.contains(text), "{}", page.body);
    }
    let (_, me) = attacker.api(&app, "GET", "/me", None);
    assert_eq!(me["identities"].as_array().unwrap().len(), 1, "{me}");

    // In the attacker's own browser the same kind of link completes.
    let linked = attacker.link_at(&app.address, "p3", "mallory-at-3");
    assert_eq!(linked.status, 200, "{}", linked.body);
    let (_, me) = attacker.api(&app, "GET", "/me", None);
    // Identities linked in the same second come in the order of their issuers: compare sets.
    let mut subjects: Vec<&str> = me["identities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["subject"].as_str().unwrap())
        .collect();
    subjects.sort();
    assert_eq!(subjects, ["mallory", "mallory-at-3"], "{me}");
}
