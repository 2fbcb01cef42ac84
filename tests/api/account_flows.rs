//! The account dashboard, continued from `account.rs` (whose providers and browser it
//! uses): the operator's providers, a cluster's dashboard, rolled keys and the cap, the
//! page in Chromium, session timeouts, sign-ins started per address.

use std::process::Command;

use serde_json::{Value, json};

use crate::account::*;
use crate::helpers::spawn_app;

/// `postal provider add|list|remove`: the secret comes from the environment and is never
/// printed; bad input exits 2 and stores nothing.
#[test]
fn the_operator_adds_lists_and_removes_providers_without_printing_secrets() {
    let app = spawn_app();
    let postal = |args: &[&str], secret: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_postal"));
        command.arg("--db").arg(&app.db).args(args);
        command.env_remove("TEST_CLIENT_SECRET");
        if let Some(secret) = secret {
            command.env("TEST_CLIENT_SECRET", secret);
        }
        let output = command.output().expect("running postal");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    fn add<'a>(name: &'a str, issuer: &'a str) -> [&'a str; 9] {
        [
            "provider",
            "add",
            name,
            "--issuer",
            issuer,
            "--client-id",
            "postal-client",
            "--client-secret-env",
            "TEST_CLIENT_SECRET",
        ]
    }

    let google = add("google", "https://accounts.google.com/");
    let (code, out, err) = postal(&google, Some("s3cr3t-value"));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"name": "google", "kind": "oidc", "issuer": "https://accounts.google.com",
               "clientId": "postal-client", "redirectPath": "/account/callback/google"})
    );
    // The same name again, a bad name, a missing variable, a non-URL issuer: exit 2.
    let (code, _, err) = postal(&google, Some("other"));
    assert_eq!(code, Some(2));
    assert!(err.contains("a provider named \"google\" exists"), "{err}");
    let (code, _, err) = postal(&add("Bad Name", "https://x.example"), Some("s"));
    assert_eq!(code, Some(2));
    assert!(
        err.contains("provider name must be 1 to 32 characters"),
        "{err}"
    );
    let (code, _, err) = postal(&add("gitlab", "https://gitlab.com"), None);
    assert_eq!(code, Some(2));
    assert!(err.contains("TEST_CLIENT_SECRET is not set"), "{err}");
    let (code, _, err) = postal(&add("gitlab", "gitlab.com"), Some("s"));
    assert_eq!(code, Some(2), "{err}");

    let (code, out, _) = postal(&["provider", "list"], None);
    assert_eq!(code, Some(0));
    assert!(!out.contains("s3cr3t-value"), "{out}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed["providers"].as_array().unwrap().len(), 1, "{listed}");

    // The sign-in page offers it; removed, it is gone, and removing it again is exit 2.
    let page = Browser::new().get(&format!("{}/account", app.address));
    assert!(
        page.body.contains("/account/signin/google"),
        "{}",
        page.body
    );
    let (code, out, _) = postal(&["provider", "remove", "google"], None);
    assert_eq!(
        (code, out.trim()),
        (Some(0), r#"{"name":"google","removed":true}"#)
    );
    assert_eq!(postal(&["provider", "remove", "google"], None).0, Some(2));
    let page = Browser::new().get(&format!("{}/account", app.address));
    assert!(
        page.body.contains("No sign-in provider is configured"),
        "{}",
        page.body
    );
    assert_eq!(
        Browser::new()
            .get(&format!("{}/account/signin/google", app.address))
            .status,
        404
    );
}

/// Over a cluster's ledger (`--ledger postgres://`), two nodes: a customer signed in on one
/// is signed in on both (sessions in the ledger), a key made in the dashboard answers on
/// both, and its revocation holds on both from the next request.
#[test]
fn over_a_cluster_ledger_the_dashboard_holds_on_every_node() {
    let _heavy = crate::helpers::timing_sensitive();
    let Some(cluster) = two_nodes() else {
        return;
    };
    let (a, b, url) = (cluster.a.as_str(), cluster.b.as_str(), cluster.url.as_str());
    let postal = env!("CARGO_BIN_EXE_postal");
    let mut browser = Browser::new();
    browser.sign_in_at(a, "p1", "dora");
    let (status, me) = browser.api_at(a, "GET", "/me", None);
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["balance"], json!(0.028));
    // The same session cookie on the other node.
    browser.share_session(a, b);
    assert_eq!(
        browser.api_at(b, "GET", "/me", None).1["accountId"],
        me["accountId"]
    );

    let (status, created) = browser.api_at(a, "POST", "/keys", Some(json!({"name": "both"})));
    assert_eq!(status, 201, "{created}");
    let key = created["apiKey"].as_str().unwrap().to_owned();
    let look = |node: &str| {
        ureq::post(format!("{node}/api/lookup"))
            .config()
            .http_status_as_error(false)
            .build()
            .content_type("application/json")
            .send(json!({"apiKey": key, "zipcode": "90210"}).to_string())
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!((look(a), look(b)), (200, 200));
    let key_id = created["keyId"].as_str().unwrap();
    let (status, _) = browser.api_at(b, "DELETE", &format!("/keys/{key_id}"), None);
    assert_eq!(status, 200);
    assert_eq!((look(a), look(b)), (401, 401));
    // A link confirmed on one node, a sign-in again on the other, and an unlink that ends
    // the sessions the identity opened, wherever they were opened.
    browser.link_at(a, "p3", "dora-at-3");
    let mut other = Browser::new();
    other.sign_in_at(b, "p3", "dora-at-3");
    assert_eq!(
        other.api_at(b, "GET", "/me", None).1["accountId"],
        me["accountId"]
    );
    let (status, started) = browser.api_at(b, "POST", "/reauth", None);
    assert_eq!(status, 200, "{started}");
    let page = browser.follow(started["url"].as_str().unwrap(), "dora");
    assert!(page.body.contains("Your account"), "{}", page.body);
    let (_, me) = browser.api_at(a, "GET", "/me", None);
    let issuer = me["identities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["subject"] == "dora-at-3")
        .unwrap()["issuer"]
        .clone();
    let unlink = json!({"issuer": issuer, "subject": "dora-at-3"});
    let (status, _) = browser.api_at(a, "POST", "/identities/unlink", Some(unlink));
    assert_eq!(status, 200);
    assert_eq!(other.api_at(b, "GET", "/me", None).0, 401);
    assert_eq!(browser.api_at(b, "GET", "/me", None).0, 200);
    // Only one account: the identity's, made once.
    let listed = Command::new(postal)
        .args(["--ledger", url, "account", "list"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed["accounts"].as_array().unwrap().len(), 1, "{listed}");
}

/// Rolling a key: a new key of the same name at once, the old one working through its
/// grace and refused from its end on.
#[test]
fn a_rolled_key_keeps_working_through_its_grace_then_is_refused() {
    let app = spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let mut browser = Browser::new();
    browser.sign_in(&app, "p1", "erin");
    let (_, old) = browser.api(&app, "POST", "/keys", Some(json!({"name": "web"})));
    let (old_id, old_key) = (
        old["keyId"].as_str().unwrap(),
        old["apiKey"].as_str().unwrap(),
    );
    let roll = format!("/keys/{old_id}/roll");
    for (hours, text) in [
        (json!(0), "graceHours must be 1 to 168 (7 days)"),
        (json!(169), "graceHours must be 1 to 168 (7 days)"),
        (json!("1"), "Invalid 'graceHours'"),
    ] {
        let (status, body) = browser.api(&app, "POST", &roll, Some(json!({"graceHours": hours})));
        assert_eq!((status, body), (400, json!({"error": text})));
    }
    let (status, new) = browser.api(&app, "POST", &roll, Some(json!({"graceHours": 2})));
    assert_eq!(status, 201, "{new}");
    let new_key = new["apiKey"].as_str().unwrap();
    assert_ne!(new_key, old_key);
    assert_eq!(new["name"], "web");
    assert_eq!(new["kind"], "secret");
    assert_eq!((lookup(&app, old_key), lookup(&app, new_key)), (200, 200));
    let (_, keys) = browser.api(&app, "GET", "/keys", None);
    let listed_old = &keys["keys"][0];
    assert_eq!(listed_old["revoked"], false);
    let expires = listed_old["expiresAt"].as_str().expect("the old key's end");
    assert!(expires.ends_with('Z'), "{expires}");

    // Its grace over (the end moved into the past, the server told as by the CLI):
    // refused, listed as revoked; the new key answers; rolling it again is refused.
    rusqlite::Connection::open(&app.db)
        .unwrap()
        .execute(
            "UPDATE api_keys SET expires_at = unixepoch() - 1 WHERE public_id = ?1",
            [old_id],
        )
        .unwrap();
    app.cli(&[
        "account",
        "show",
        browser.api(&app, "GET", "/me", None).1["accountId"]
            .as_str()
            .unwrap(),
    ]);
    assert_eq!((lookup(&app, old_key), lookup(&app, new_key)), (401, 200));
    let (_, keys) = browser.api(&app, "GET", "/keys", None);
    assert_eq!(keys["keys"][0]["revoked"], true, "{keys}");
    assert_eq!(keys["keys"][0]["expiresAt"], Value::Null, "{keys}");
    let (status, body) = browser.api(&app, "POST", &roll, Some(json!({"graceHours": 1})));
    assert_eq!(
        (status, body),
        (400, json!({"error": "a revoked key cannot be rolled"}))
    );
}

/// Rolling keeps the cap of 20 live keys: a key in its grace is not rolled again (409), a
/// rolled key counts as live until its end, one roll goes at the cap; once their grace is
/// over, rolled keys are revoked at their end, leave the server's memory and free their
/// places.
#[test]
fn rolling_keeps_the_cap_and_ended_keys_free_their_places() {
    let app = spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let mut browser = Browser::new();
    browser.sign_in(&app, "p1", "gina");
    let account = browser.api(&app, "GET", "/me", None).1["accountId"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, first) = browser.api(&app, "POST", "/keys", Some(json!({"name": "r"})));
    let roll = |browser: &mut Browser, key: &Value| {
        let path = format!("/keys/{}/roll", key["keyId"].as_str().unwrap());
        browser.api(&app, "POST", &path, Some(json!({"graceHours": 168})))
    };
    let (status, mut current) = roll(&mut browser, &first);
    assert_eq!(status, 201, "{current}");
    assert_eq!(
        roll(&mut browser, &first),
        (
            409,
            json!({"error": "this key was already rolled: roll its successor"})
        )
    );
    // Chained rolls: 2 live keys, each roll one more, until 21 (one roll past the cap).
    let mut codes = Vec::new();
    for _ in 0..25 {
        let (status, next) = roll(&mut browser, &current);
        codes.push(status);
        if status == 201 {
            current = next;
        } else {
            assert_eq!(
                next,
                json!({"error": "an account holds at most 20 live keys; revoke one first"})
            );
        }
    }
    assert_eq!(codes, [[201; 19].as_slice(), &[400; 6]].concat());
    let live = |browser: &mut Browser| -> usize {
        let (_, keys) = browser.api(&app, "GET", "/keys", None);
        keys["keys"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|k| k["revoked"] == false)
            .count()
    };
    assert_eq!(live(&mut browser), 21);
    assert_eq!(
        browser.api(&app, "POST", "/keys", Some(json!({}))).0,
        400,
        "no new key at the cap"
    );
    // Every working key answers, the rolled ones in their grace too.
    assert_eq!(lookup(&app, first["apiKey"].as_str().unwrap()), 200);

    // Their grace over (the ends moved into the past, the server told as by the CLI):
    // the 20 rolled keys are refused and revoked at their end, and free their places.
    rusqlite::Connection::open(&app.db)
        .unwrap()
        .execute(
            "UPDATE api_keys SET expires_at = unixepoch() - 60 WHERE expires_at IS NOT NULL",
            [],
        )
        .unwrap();
    app.cli(&["account", "show", &account]);
    assert_eq!(lookup(&app, first["apiKey"].as_str().unwrap()), 401);
    assert_eq!(lookup(&app, current["apiKey"].as_str().unwrap()), 200);
    assert_eq!(live(&mut browser), 1);
    let codes: Vec<u16> = (0..20)
        .map(|_| browser.api(&app, "POST", "/keys", Some(json!({}))).0)
        .collect();
    assert_eq!(codes, [[201; 19].as_slice(), &[400]].concat());
    let ended: i64 = rusqlite::Connection::open(&app.db)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM api_keys WHERE revoked_at = expires_at",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(ended, 20, "revoked at their end");
}

/// The dashboard in headless Chromium (as the Swagger UI test): sign in with provider 2
/// through its login and consent pages, see the free balance, create a key (shown once),
/// use it, reload (only its first characters), limit it to 2 a minute (the third lookup is
/// 429), revoke it (401), sign out, sign in again to the same account. Screenshots of the
/// sign-in page, the key just shown and the usage chart are kept in cargo's scratch
/// directory (`target/tmp/account-*.png`).
#[test]
fn in_a_browser_a_customer_signs_in_makes_a_key_limits_and_revokes_it() {
    let _heavy = crate::helpers::timing_sensitive();
    use fantoccini::Locator;

    let Some((chromium, chromedriver)) = crate::swagger_ui::browser() else {
        return;
    };
    let app = spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let dir = testkit::tempdir();
    let driver = crate::swagger_ui::Driver::start(&chromedriver, &dir.path().join("driver.log"));
    let profile = dir.path().join("profile");
    let shot = |name: &str| testkit::scratch().join(format!("account-{name}.png"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = crate::swagger_ui::connect(&driver, &chromium, &profile).await;
        let wait = std::time::Duration::from_secs(20);
        let text_of = async |css: &str| -> String {
            client
                .wait()
                .at_most(wait)
                .for_element(Locator::Css(css))
                .await
                .unwrap_or_else(|e| panic!("{css}: {e}"))
                .text()
                .await
                .unwrap()
        };
        let sign_in = async |user: &str| browser_sign_in(&client, &app.address, user).await;

        client
            .goto(&format!("{}/account", app.address))
            .await
            .unwrap();
        text_of("a[href='/account/signin/p2']").await;
        std::fs::write(shot("signin"), client.screenshot().await.unwrap()).unwrap();

        sign_in("alice").await;
        assert_eq!(text_of("#balance").await, "0.028 USD");
        assert_eq!(text_of("#queries-left").await, "1,000");
        let account = text_of(".card code").await;

        client
            .find(Locator::Css("#key-name"))
            .await
            .unwrap()
            .send_keys("checkout")
            .await
            .unwrap();
        client
            .find(Locator::Css("#create-key"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        let key = text_of("#new-key").await;
        assert!(key.starts_with("sk_"), "{key}");
        std::fs::write(shot("key-shown"), client.screenshot().await.unwrap()).unwrap();
        assert_eq!(lookup(&app, &key), 200);

        // Reloaded: the key is gone from the page, its first characters stay.
        client.refresh().await.unwrap();
        let keys = text_of("#keys").await;
        assert!(keys.contains(&key[..7]) && !keys.contains(&key), "{keys}");
        assert_eq!(text_of("#balance").await, "0.027972 USD");

        crate::browser::with_seconds_left_in_the_minute(20);
        client
            .find(Locator::Css("#limit-minute"))
            .await
            .unwrap()
            .send_keys("2")
            .await
            .unwrap();
        client
            .find(Locator::Css("#save-limits"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        text_of("[role=status]").await;
        let statuses: Vec<u16> = (0..3).map(|_| lookup(&app, &key)).collect();
        assert!(statuses.contains(&429), "{statuses:?}");

        client.refresh().await.unwrap();
        text_of("#keys").await;
        client
            .find(Locator::Css("#keys button[aria-label^='Revoke']"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        client.accept_alert().await.unwrap();
        client
            .wait()
            .at_most(wait)
            .for_element(Locator::XPath(
                "//*[@id='keys']//td[starts-with(., 'revoked')]",
            ))
            .await
            .unwrap();
        assert_eq!(lookup(&app, &key), 401);
        let usage = client.find(Locator::Css("svg.chart")).await.unwrap();
        usage.click().await.ok();
        std::fs::write(shot("usage"), client.screenshot().await.unwrap()).unwrap();

        // Linking p3 from the page's button: the provider's sign-in, then our question.
        let click = async |xpath: &str| {
            client
                .wait()
                .at_most(wait)
                .for_element(Locator::XPath(xpath))
                .await
                .unwrap_or_else(|e| panic!("{xpath}: {e}"))
                .click()
                .await
                .unwrap();
        };
        click("//button[contains(@class, 'link') and . = 'p3']").await;
        at_the_provider(&client, "alice-at-3", "//button[@value='link']").await;
        std::fs::write(shot("link-confirm"), client.screenshot().await.unwrap()).unwrap();
        click("//button[@value='link']").await;
        assert!(text_of("#identities").await.contains("p3: alice-at-3"));

        // A sign-in 16 minutes old: the limits are not saved until the customer signs in
        // again from the page's button.
        rusqlite::Connection::open(&app.db)
            .unwrap()
            .execute(
                "UPDATE sessions SET authenticated_at = authenticated_at - 960",
                [],
            )
            .unwrap();
        client.refresh().await.unwrap();
        click("//*[@id='save-limits']").await;
        click("//button[@id='sign-in-again']").await;
        // Asked to sign in again, the provider shows its login form (the page it leaves
        // holds a balance too).
        text_of("input[name=login]").await;
        at_the_provider(&client, "alice", "//*[@id='balance']").await;
        click("//*[@id='save-limits']").await;
        assert_eq!(
            text_of("[role=status]").await,
            "Limits saved; in force from the next request."
        );

        // Alerts (issue 51): a threshold saved from the page, and a webhook URL the server
        // refuses shown with the server's words.
        let type_into = async |css: &str, text: &str| {
            let field = client.find(Locator::Css(css)).await.unwrap();
            field.clear().await.unwrap();
            field.send_keys(text).await.unwrap();
        };
        type_into("#alert-balance", "2.50").await;
        click("//*[@id='save-alerts']").await;
        assert_eq!(
            text_of("#h-alerts ~ form [role=status]").await,
            "Alerts saved."
        );
        type_into("#alert-webhook", "https://127.0.0.1/hook").await;
        click("//*[@id='save-alerts']").await;
        assert!(
            text_of("#h-alerts ~ form [role=alert]")
                .await
                .starts_with("webhookUrl resolves to 127.0.0.1"),
        );
        std::fs::write(shot("alerts"), client.screenshot().await.unwrap()).unwrap();

        client
            .find(Locator::Css("#signout"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        text_of("a[href='/account/signin/p2']").await;
        sign_in("alice").await;
        assert_eq!(text_of(".card code").await, account);
        let _ = client.close().await;
    });
    println!(
        "screenshots: {}",
        testkit::scratch().join("account-*.png").display()
    );
}

/// Signs in at `address`'s dashboard in the browser `client` with provider 2 as `user`,
/// through its login and consent pages (or straight back when the provider still knows
/// the browser); returns on the dashboard.
pub(crate) async fn browser_sign_in(client: &fantoccini::Client, address: &str, user: &str) {
    use fantoccini::Locator;
    let wait = std::time::Duration::from_secs(20);
    client.goto(&format!("{address}/account")).await.unwrap();
    client
        .wait()
        .at_most(wait)
        .for_element(Locator::Css("a[href='/account/signin/p2']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    at_the_provider(client, user, "//*[@id='balance']").await;
}

/// At a provider's pages in the browser `client`: its login form as `user` and its
/// consent page, when it shows them (it shows none when it still knows the browser), until
/// the page holds the element `back` (an XPath) names.
pub(crate) async fn at_the_provider(client: &fantoccini::Client, user: &str, back: &str) {
    use fantoccini::Locator;
    let wait = std::time::Duration::from_secs(20);
    let first = client
        .wait()
        .at_most(wait)
        .for_element(Locator::XPath(&format!("//input[@name='login'] | {back}")))
        .await
        .unwrap();
    if first.attr("name").await.unwrap().as_deref() != Some("login") {
        return;
    }
    first.send_keys(user).await.unwrap();
    client
        .find(Locator::Css("input[name=password]"))
        .await
        .unwrap()
        .send_keys("any")
        .await
        .unwrap();
    client
        .find(Locator::Css("button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // The consent page (the first time) or straight back: waited for by what only they
    // hold (the login page's own button would match a plain `button[type=submit]` until
    // it is gone).
    let next = client
        .wait()
        .at_most(wait)
        .for_element(Locator::XPath(&format!(
            "//input[@name='prompt' and @value='consent'] | {back}"
        )))
        .await
        .unwrap();
    if next.attr("name").await.unwrap().as_deref() == Some("prompt") {
        client
            .find(Locator::XPath(
                "//form[input[@name='prompt' and @value='consent']]//button",
            ))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        client
            .wait()
            .at_most(wait)
            .for_element(Locator::XPath(back))
            .await
            .unwrap();
    }
}

/// A session idle for 30 minutes, or signed in 12 hours ago, is over: 401, and its
/// cookie never works again.
#[test]
fn a_session_idle_30_minutes_or_12_hours_old_is_over() {
    let app = spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let mut idle = Browser::new();
    idle.sign_in(&app, "p1", "frank");
    let mut old = Browser::new();
    old.sign_in(&app, "p2", "grace");
    let session_of = |b: &mut Browser| {
        b.api(&app, "GET", "/me", None).1["sessionId"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (idle_id, old_id) = (session_of(&mut idle), session_of(&mut old));
    let conn = rusqlite::Connection::open(&app.db).unwrap();
    // 29 minutes idle: still on.
    conn.execute(
        "UPDATE sessions SET seen_at = unixepoch() - 29 * 60 WHERE public_id = ?1",
        [&idle_id],
    )
    .unwrap();
    assert_eq!(idle.api(&app, "GET", "/me", None).0, 200);
    // 30 minutes idle; signed in 12 hours ago though used a second ago: both over.
    conn.execute(
        "UPDATE sessions SET seen_at = unixepoch() - 30 * 60 WHERE public_id = ?1",
        [&idle_id],
    )
    .unwrap();
    conn.execute(
        "UPDATE sessions SET created_at = unixepoch() - 12 * 3600, seen_at = unixepoch() - 1
         WHERE public_id = ?1",
        [&old_id],
    )
    .unwrap();
    assert_eq!(
        idle.api(&app, "GET", "/me", None),
        (401, json!({"error": "Not signed in"}))
    );
    assert_eq!(old.api(&app, "GET", "/me", None).0, 401);
    // The dashboard page then offers the sign-in again.
    let page = idle.get(&format!("{}/account", app.address));
    assert!(page.body.contains("/account/signin/p1"), "{}", page.body);
}

/// Starting a sign-in writes a row and asks the provider for its metadata: at most 20 a
/// minute from one client address, then 429 with `Retry-After`.
#[test]
fn at_most_20_sign_ins_a_minute_start_from_one_address() {
    let app = spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    crate::browser::with_seconds_left_in_the_minute(20);
    let mut browser = Browser::new();
    let start = format!("{}/account/signin/p1", app.address);
    for i in 0..20 {
        assert_eq!(browser.get(&start).status, 303, "start {i}");
    }
    let refused = browser.request("GET", &start, None, &[]);
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(
        refused
            .body
            .contains("Too many sign-ins were started from your address"),
        "{}",
        refused.body
    );
    let retry = ureq::get(&start)
        .config()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .call()
        .unwrap();
    let seconds: u64 = retry.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&seconds), "{seconds}");
}
