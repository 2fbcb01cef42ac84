//! Sign-in with the provider kinds that are not a plain OpenID issuer (issue 49): GitHub's
//! OAuth web flow and REST API, and Microsoft's multi-tenant issuer, against local
//! stand-ins of both (`tests/oidc/kinds.mjs`), driven as a browser would.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::account::{Browser, OIDC_DIR, form_action, node_modules};
use crate::helpers::{TestApp, spawn_app};

const SECRET: &str = "secret-of-postal";
/// Two tenants of the Microsoft stand-in (a login `name@<tenant>` is of that tenant).
const TENANT_A: &str = "aaaaaaaa-0000-4000-8000-00000000000a";
const TENANT_B: &str = "bbbbbbbb-0000-4000-8000-00000000000b";

/// The stand-ins, running until dropped.
struct Standins {
    child: Child,
    github: String,
    microsoft: String,
}

impl Drop for Standins {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// GitHub's users: octocat (a verified primary e-mail, in the org `acme`), hubot (an
/// unverified primary e-mail, in no org).
fn users() -> Value {
    json!({
        "octocat": {"id": 101, "orgs": ["acme"], "emails": [
            {"email": "old@example.com", "primary": false, "verified": true},
            {"email": "octocat@example.com", "primary": true, "verified": true},
        ]},
        "hubot": {"id": 202, "orgs": [], "emails": [
            {"email": "hubot@example.com", "primary": true, "verified": false},
        ]},
    })
}

fn standins(app: &TestApp) -> Option<Standins> {
    if !node_modules() {
        return None;
    }
    let config = json!({
        "clientId": "postal",
        "clientSecret": SECRET,
        "redirectBase": app.address,
        "users": users(),
    });
    let mut child = Command::new("node")
        .arg("kinds.mjs")
        .arg(config.to_string())
        .current_dir(OIDC_DIR)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting the stand-ins");
    let (mut github, mut microsoft) = (String::new(), String::new());
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.expect("a line of the stand-ins");
        if line == "ready" {
            break;
        }
        if let Some(url) = line.strip_prefix("github ") {
            github = url.to_owned();
        }
        if let Some(url) = line.strip_prefix("microsoft ") {
            microsoft = url.to_owned();
        }
    }
    assert!(
        !github.is_empty() && !microsoft.is_empty(),
        "both stand-ins"
    );
    Some(Standins {
        child,
        github,
        microsoft,
    })
}

/// `postal --db <app's> ARGS` with the client secret in `TEST_CLIENT_SECRET`: exit code,
/// stdout, stderr.
fn postal(app: &TestApp, args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_postal"))
        .arg("--db")
        .arg(&app.db)
        .args(args)
        .env("TEST_CLIENT_SECRET", SECRET)
        .output()
        .expect("running postal");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `postal provider add NAME --client-id postal ... EXTRA`, which must succeed.
fn add(app: &TestApp, name: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "provider",
        "add",
        name,
        "--client-id",
        "postal",
        "--client-secret-env",
        "TEST_CLIENT_SECRET",
    ];
    args.extend_from_slice(extra);
    let (code, out, err) = postal(app, &args);
    assert_eq!(code, Some(0), "{err}");
    assert!(!out.contains(SECRET), "{out}");
    serde_json::from_str(&out).unwrap()
}

/// Starts a sign-in with `provider` and signs in at the stand-in as `user`: the callback
/// URL the stand-in sends the browser to (not followed).
fn to_callback(browser: &mut Browser, app: &TestApp, provider: &str, user: &str) -> String {
    let start = browser.get(&format!("{}/account/signin/{provider}", app.address));
    assert_eq!(start.status, 303, "{}", start.body);
    let form = browser.get(&start.location.unwrap());
    assert_eq!(form.status, 200, "{}", form.body);
    let action = form_action(&form).expect("the stand-in's login form");
    let done = browser.request(
        "POST",
        &action,
        Some((
            "application/x-www-form-urlencoded",
            format!("prompt=login&login={user}&password=any"),
        )),
        &[],
    );
    assert_eq!(done.status, 302, "{}", done.body);
    let callback = done.location.unwrap();
    assert!(callback.starts_with(&app.address), "{callback}");
    callback
}

fn me(browser: &mut Browser, app: &TestApp) -> Value {
    let (status, me) = browser.api(app, "GET", "/me", None);
    assert_eq!(status, 200, "{me}");
    me
}

pub(crate) fn query_value(url: &str, name: &str) -> String {
    url::Url::parse(url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| panic!("{name} in {url}"))
}

#[test]
fn github_signs_in_by_its_numeric_id_with_pkce_and_never_a_token_in_a_url() {
    let app = spawn_app();
    let Some(standins) = standins(&app) else {
        return;
    };
    let added = add(
        &app,
        "gh",
        &["--kind", "github", "--github-url", &standins.github],
    );
    assert_eq!(
        added,
        json!({"name": "gh", "kind": "github", "issuer": standins.github, "clientId": "postal",
               "redirectPath": "/account/callback/gh"})
    );
    let page = Browser::new().get(&format!("{}/account", app.address));
    assert!(
        page.body
            .contains(r#"href="/account/signin/gh">Sign in with GitHub</a>"#),
        "{}",
        page.body
    );

    // The first sign-in: PKCE S256 and state in the authorize URL, a new account with the
    // free allowance, named by the verified primary e-mail, the identity by the numeric id.
    let mut octocat = Browser::new();
    let start = octocat.get(&format!("{}/account/signin/gh", app.address));
    let authorize = start.location.clone().unwrap();
    assert!(
        authorize.starts_with(&format!("{}/login/oauth/authorize?", standins.github)),
        "{authorize}"
    );
    assert_eq!(query_value(&authorize, "code_challenge_method"), "S256");
    assert_eq!(query_value(&authorize, "scope"), "read:user user:email");
    let page = octocat.follow(&authorize, "octocat");
    assert!(page.body.contains("Your account"), "{}", page.body);
    let first = me(&mut octocat, &app);
    let account = first["accountId"].as_str().unwrap().to_owned();
    assert_eq!(first["name"], "octocat@example.com");
    assert_eq!(first["balance"], json!(0.028));
    assert_eq!(first["identities"].as_array().unwrap().len(), 1);
    assert_eq!(first["identities"][0]["provider"], "gh");
    assert_eq!(first["identities"][0]["issuer"], standins.github);
    assert_eq!(first["identities"][0]["subject"], "101");
    assert_eq!(first["identities"][0]["email"], "octocat@example.com");

    // What GitHub was asked, in order: the token by a form asking for JSON, then the user
    // and the e-mails with the token as a bearer, never in a URL.
    let agent = ureq::Agent::new_with_defaults();
    let calls: Value = serde_json::from_str(
        &agent
            .get(format!("{}/_standin/calls", standins.github))
            .call()
            .unwrap()
            .into_body()
            .read_to_string()
            .unwrap(),
    )
    .unwrap();
    println!("GitHub stand-in's calls of one sign-in: {calls:#}");
    let seen: Vec<(String, String, bool)> = calls
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["method"].as_str().unwrap().to_owned(),
                c["path"].as_str().unwrap().to_owned(),
                c["bearer"].as_bool().unwrap(),
            )
        })
        .collect();
    let expected = [
        ("GET", "/login/oauth/authorize", false),
        ("POST", "/login/oauth/authorize/done", false),
        ("POST", "/login/oauth/access_token", false),
        ("GET", "/api/v3/user", true),
        ("GET", "/api/v3/user/emails", true),
    ]
    .map(|(m, p, b)| (m.to_owned(), p.to_owned(), b));
    assert_eq!(seen, expected);
    assert_eq!(calls[2]["accept"], "application/json");
    assert!(
        calls
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["tokenInUrl"] == false),
        "{calls}"
    );

    // octocat renames itself to octocat2, and hubot takes the login octocat: the id signs
    // in to the same account, the new holder of the login to a new one.
    let mut renamed = users();
    let old = renamed["octocat"].take();
    renamed["octocat2"] = old;
    renamed["octocat"] = json!({"id": 303, "orgs": [], "emails": []});
    agent
        .post(format!("{}/_standin/users", standins.github))
        .header("content-type", "application/json")
        .send(renamed.to_string())
        .unwrap();
    let mut again = Browser::new();
    again.sign_in(&app, "gh", "octocat2");
    assert_eq!(me(&mut again, &app)["accountId"], account.as_str());
    let mut taker = Browser::new();
    taker.sign_in(&app, "gh", "octocat");
    let taken = me(&mut taker, &app);
    assert_ne!(taken["accountId"], account.as_str());
    assert_eq!(taken["identities"][0]["subject"], "303");
    // Without a verified e-mail: none shown, the account named after the login.
    let mut hubot = Browser::new();
    hubot.sign_in(&app, "gh", "hubot");
    let hubot_me = me(&mut hubot, &app);
    assert_eq!(hubot_me["name"], "hubot");
    assert_eq!(hubot_me["identities"][0]["email"], Value::Null);
    assert_eq!(hubot_me["balance"], json!(0.028));

    // A code replayed under a fresh state: GitHub answers 200 with an error, the page
    // says so, and no session is made.
    let mut first_try = Browser::new();
    let used = to_callback(&mut first_try, &app, "gh", "hubot");
    assert_eq!(first_try.get(&used).status, 303);
    let mut replay = Browser::new();
    let fresh = to_callback(&mut replay, &app, "gh", "hubot");
    let forged = fresh.replace(
        &format!("code={}", query_value(&fresh, "code")),
        &format!("code={}", query_value(&used, "code")),
    );
    let refused = replay.get(&forged);
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(
        refused.body.contains("could not be verified"),
        "{}",
        refused.body
    );
    assert_eq!(replay.cookie(&app.address, "postal_session"), None);
    assert_eq!(
        replay.api(&app, "GET", "/me", None),
        (401, json!({"error": "Not signed in"}))
    );
}

#[test]
fn github_with_allowed_orgs_lets_members_in_and_links_to_an_openid_account() {
    let app = spawn_app();
    let Some(standins) = standins(&app) else {
        return;
    };
    let added = add(
        &app,
        "acme",
        &[
            "--kind",
            "github",
            "--github-url",
            &standins.github,
            "--allowed-org",
            "acme",
            "--allowed-org",
            "other-org",
        ],
    );
    assert_eq!(added["allowed"], json!(["acme", "other-org"]));
    add(
        &app,
        "ms",
        &["--kind", "microsoft", "--issuer", &standins.microsoft],
    );

    // A member signs in (read:org asked); a non-member gets a page that says why.
    let mut member = Browser::new();
    let start = member.get(&format!("{}/account/signin/acme", app.address));
    assert_eq!(
        query_value(start.location.as_deref().unwrap(), "scope"),
        "read:user user:email read:org"
    );
    member.sign_in(&app, "acme", "octocat");
    let mut outsider = Browser::new();
    let page = outsider.follow(&format!("{}/account/signin/acme", app.address), "hubot");
    assert_eq!(page.status, 403, "{}", page.body);
    assert!(
        page.body
            .contains("Your GitHub account hubot is not a member of acme, other-org"),
        "{}",
        page.body
    );
    assert_eq!(outsider.cookie(&app.address, "postal_session"), None);

    // An account made through an OpenID provider (Microsoft) links hubot's GitHub
    // identity (through a GitHub provider without an org rule), then GitHub signs in to it.
    add(
        &app,
        "gh",
        &["--kind", "github", "--github-url", &standins.github],
    );
    let mut customer = Browser::new();
    customer.sign_in(&app, "ms", &format!("carol@{TENANT_A}"));
    let account = me(&mut customer, &app)["accountId"].clone();
    let linked = customer.link_at(&app.address, "gh", "hubot");
    assert!(linked.body.contains("Your account"), "{}", linked.body);
    let identities = me(&mut customer, &app)["identities"].clone();
    assert_eq!(identities.as_array().unwrap().len(), 2, "{identities}");
    let mut later = Browser::new();
    later.sign_in(&app, "gh", "hubot");
    assert_eq!(me(&mut later, &app)["accountId"], account);
}

#[test]
fn microsoft_signs_in_any_tenant_or_the_allowed_ones_checking_the_token_s_own_issuer() {
    let app = spawn_app();
    let Some(standins) = standins(&app) else {
        return;
    };
    let common = add(
        &app,
        "ms",
        &["--kind", "microsoft", "--issuer", &standins.microsoft],
    );
    assert_eq!(
        common["issuer"],
        format!("{}/common/v2.0", standins.microsoft)
    );
    add(
        &app,
        "ms-a",
        &[
            "--kind",
            "microsoft",
            "--issuer",
            &standins.microsoft,
            "--tenant",
            "organizations",
            "--allowed-tenant",
            &TENANT_A.to_uppercase(),
        ],
    );
    let page = Browser::new().get(&format!("{}/account", app.address));
    for label in [
        r#"href="/account/signin/ms">Sign in with Microsoft (ms)</a>"#,
        r#"href="/account/signin/ms-a">Sign in with Microsoft (ms-a)</a>"#,
    ] {
        assert!(page.body.contains(label), "{label}: {}", page.body);
    }

    // `common`: accounts of two tenants sign in, each an identity of its tenant's issuer;
    // Microsoft's e-mail claim is not verified, so it is not shown.
    let mut alice = Browser::new();
    alice.sign_in(&app, "ms", &format!("alice@{TENANT_A}"));
    let alice_me = me(&mut alice, &app);
    assert_eq!(
        alice_me["identities"][0]["issuer"],
        format!("{}/{TENANT_A}/v2.0", standins.microsoft)
    );
    assert_eq!(alice_me["identities"][0]["subject"], "sub-of-alice");
    assert_eq!(alice_me["identities"][0]["email"], Value::Null);
    // Named after its subject: `preferred_username` is not verified.
    assert_eq!(alice_me["name"], "sub-of-alice");
    let mut bob = Browser::new();
    bob.sign_in(&app, "ms", &format!("bob@{TENANT_B}"));
    let bob_me = me(&mut bob, &app);
    assert_eq!(
        bob_me["identities"][0]["issuer"],
        format!("{}/{TENANT_B}/v2.0", standins.microsoft)
    );
    assert_ne!(bob_me["accountId"], alice_me["accountId"]);

    // `--allowed-tenant` tenant A (given in capitals, as a portal may show it): alice signs in (to her account: the same identity), bob
    // is refused with a page that says why.
    let mut alice_a = Browser::new();
    alice_a.sign_in(&app, "ms-a", &format!("alice@{TENANT_A}"));
    assert_eq!(me(&mut alice_a, &app)["accountId"], alice_me["accountId"]);
    let mut bob_a = Browser::new();
    let page = bob_a.follow(
        &format!("{}/account/signin/ms-a", app.address),
        &format!("bob@{TENANT_B}"),
    );
    assert_eq!(page.status, 403, "{}", page.body);
    assert!(page.body.contains("may not sign in here"), "{}", page.body);
    assert_eq!(bob_a.cookie(&app.address, "postal_session"), None);

    // One tenant's own endpoint: its account signs in, another tenant's is refused (its
    // token's issuer is not the metadata's).
    add(
        &app,
        "ms-own",
        &[
            "--kind",
            "microsoft",
            "--issuer",
            &standins.microsoft,
            "--tenant",
            TENANT_A,
        ],
    );
    let mut own = Browser::new();
    own.sign_in(&app, "ms-own", &format!("alice@{TENANT_A}"));
    assert_eq!(me(&mut own, &app)["accountId"], alice_me["accountId"]);
    let mut stranger = Browser::new();
    let page = stranger.follow(
        &format!("{}/account/signin/ms-own", app.address),
        &format!("bob@{TENANT_B}"),
    );
    assert_eq!(page.status, 400, "{}", page.body);
    assert_eq!(stranger.cookie(&app.address, "postal_session"), None);

    // A token whose `iss` names another tenant than its `tid` is refused.
    let mut liar = Browser::new();
    let page = liar.follow(
        &format!("{}/account/signin/ms", app.address),
        &format!("liar@{TENANT_A}"),
    );
    assert_eq!(page.status, 400, "{}", page.body);
    assert!(page.body.contains("could not be verified"), "{}", page.body);
    assert_eq!(liar.cookie(&app.address, "postal_session"), None);
}

#[test]
fn the_operator_adds_each_kind_with_its_own_options_only() {
    let app = spawn_app();
    let google = add(&app, "google", &["--kind", "google"]);
    assert_eq!(google["issuer"], "https://accounts.google.com");
    let github = add(&app, "github", &["--kind", "github"]);
    assert_eq!(github["issuer"], "https://github.com");
    let microsoft = add(
        &app,
        "microsoft",
        &["--kind", "microsoft", "--tenant", "consumers"],
    );
    assert_eq!(
        microsoft["issuer"],
        "https://login.microsoftonline.com/consumers/v2.0"
    );
    let (code, out, _) = postal(&app, &["provider", "list"]);
    assert_eq!(code, Some(0));
    let listed: Value = serde_json::from_str(&out).unwrap();
    let kinds: Vec<&str> = listed["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["github", "google", "microsoft"]);
    let page = Browser::new().get(&format!("{}/account", app.address));
    for label in [
        "Sign in with GitHub",
        "Sign in with Google",
        "Sign in with Microsoft",
    ] {
        assert!(page.body.contains(label), "{label}: {}", page.body);
    }
    assert!(!page.body.contains("<img") && !page.body.contains("<script"));

    // Each refusal: exit 2, its reason, nothing added.
    let secret = [
        "--client-id",
        "c",
        "--client-secret-env",
        "TEST_CLIENT_SECRET",
    ];
    for (args, said) in [
        (vec!["--kind", "oidc"], "--kind oidc needs --issuer URL"),
        (
            vec!["--kind", "gitlab"],
            "one of oidc, google, github, microsoft",
        ),
        (
            vec!["--kind", "google", "--issuer", "https://x.example"],
            "--issuer is not an option of --kind google",
        ),
        (
            vec!["--kind", "github", "--tenant", "common"],
            "--tenant is not an option of --kind github",
        ),
        (
            vec!["--kind", "microsoft", "--allowed-org", "acme"],
            "--allowed-org is not an option of --kind microsoft",
        ),
        (
            vec!["--kind", "github", "--github-url", "github.example"],
            "--github-url must be https, or http only to a loopback host (127.0.0.0/8, [::1], localhost): \"github.example\"",
        ),
        (
            vec!["--kind", "github", "--allowed-org", "a b"],
            "--allowed-org must be 1 to 100 of",
        ),
        (
            vec!["--kind", "microsoft", "--tenant", "x/y"],
            "--tenant is not a tenant",
        ),
        (
            vec!["--kind", "microsoft", "--tenant", ".."],
            "--tenant is not a tenant",
        ),
        (
            vec!["--kind", "microsoft", "--allowed-tenant", "contoso.com"],
            "--allowed-tenant must be a tenant id (a GUID)",
        ),
    ] {
        let mut full = vec!["provider", "add", "other"];
        full.extend_from_slice(&secret);
        full.extend(args.iter().copied());
        let (code, _, err) = postal(&app, &full);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
    }
    let (_, out, _) = postal(&app, &["provider", "list"]);
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed["providers"].as_array().unwrap().len(), 3);
}

/// In Chromium: the sign-in page offers GitHub, Google and Microsoft; a customer signs in
/// with the GitHub stand-in, makes a key, uses it, and the keys list shows its last use
/// (to the minute) and its one query. Screenshots of the sign-in page and of the keys
/// list, and the stand-in's calls of the sign-in, are kept in cargo's scratch directory
/// (`target/tmp/signin-kinds.png`, `keys-last-used.png`, `github-calls.json`).
#[test]
fn in_a_browser_a_github_customer_makes_a_key_uses_it_and_sees_its_last_use() {
    let _heavy = crate::helpers::timing_sensitive();
    use fantoccini::Locator;

    let Some((chromium, chromedriver)) = crate::swagger_ui::browser() else {
        return;
    };
    let app = spawn_app();
    let Some(standins) = standins(&app) else {
        return;
    };
    add(
        &app,
        "gh",
        &["--kind", "github", "--github-url", &standins.github],
    );
    add(&app, "google", &["--kind", "google"]);
    add(
        &app,
        "ms",
        &["--kind", "microsoft", "--issuer", &standins.microsoft],
    );
    let dir = testkit::tempdir();
    let driver = crate::swagger_ui::Driver::start(&chromedriver, &dir.path().join("driver.log"));
    let profile = dir.path().join("profile");
    let scratch = |name: &str| testkit::scratch().join(name);
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
        client
            .goto(&format!("{}/account", app.address))
            .await
            .unwrap();
        let page = find("main").await.text().await.unwrap();
        for label in [
            "Sign in with GitHub",
            "Sign in with Google",
            "Sign in with Microsoft",
        ] {
            assert!(page.contains(label), "{label}: {page}");
        }
        std::fs::write(
            scratch("signin-kinds.png"),
            client.screenshot().await.unwrap(),
        )
        .unwrap();

        // GitHub's authorize page (the stand-in's login form), then back signed in.
        find("a[href='/account/signin/gh']")
            .await
            .click()
            .await
            .unwrap();
        find("input[name=login]")
            .await
            .send_keys("octocat")
            .await
            .unwrap();
        find("input[name=password]")
            .await
            .send_keys("any")
            .await
            .unwrap();
        find("form button").await.click().await.unwrap();
        assert_eq!(find("#balance").await.text().await.unwrap(), "0.028 USD");

        find("#key-name").await.send_keys("checkout").await.unwrap();
        find("#create-key").await.click().await.unwrap();
        let key = find("#new-key").await.text().await.unwrap();
        assert!(key.starts_with("sk_"), "{key}");
        // Made, not yet used.
        assert_eq!(
            find("#keys .last-used").await.text().await.unwrap(),
            "never"
        );
        let used = app.post("/api/lookup", &json!({"apiKey": key, "zipcode": "90210"}));
        assert_eq!(used.status, 200);

        // Reloaded until the flush has written the use (within a second).
        let deadline = std::time::Instant::now() + wait;
        let last_used = loop {
            client.refresh().await.unwrap();
            let shown = find("#keys .last-used").await.text().await.unwrap();
            if shown != "never" {
                break shown;
            }
            assert!(std::time::Instant::now() < deadline, "never used");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        };
        let minute = |secs: u64| {
            let out = Command::new("date")
                .args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%d %H:%M UTC"])
                .output()
                .unwrap();
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(
            [minute(now), minute(now - 60)].contains(&last_used),
            "{last_used}"
        );
        assert_eq!(find("#keys .queries-30").await.text().await.unwrap(), "1");
        std::fs::write(
            scratch("keys-last-used.png"),
            client.screenshot().await.unwrap(),
        )
        .unwrap();
        client.close().await.ok();
    });

    // The stand-in's record of the sign-in: authorize, token, user, emails.
    let calls = ureq::get(format!("{}/_standin/calls", standins.github))
        .call()
        .unwrap()
        .into_body()
        .read_to_string()
        .unwrap();
    std::fs::write(testkit::scratch().join("github-calls.json"), &calls).unwrap();
    let calls: Value = serde_json::from_str(&calls).unwrap();
    let paths: Vec<&str> = calls
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .filter(|path| *path != "/favicon.ico") // the browser's own ask
        .collect();
    assert_eq!(
        paths,
        [
            "/login/oauth/authorize",
            "/login/oauth/authorize/done",
            "/login/oauth/access_token",
            "/api/v3/user",
            "/api/v3/user/emails"
        ],
        "{calls:#}"
    );
}
