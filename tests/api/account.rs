//! The account dashboard (docs/account.md) against three real OpenID Providers
//! (`tests/oidc/providers.mjs`: oidc-provider, OpenID Certified, each its own issuer, port
//! and keys), driven over HTTP as a browser would: redirects followed by hand, cookies
//! kept per host, the provider's login and consent forms submitted.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app, spawn_app_with};

pub(crate) const OIDC_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oidc");

/// The providers, running until dropped.
pub(crate) struct Providers {
    child: Child,
    pub(crate) issuers: Vec<String>,
}

impl Drop for Providers {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Node.js and `tests/oidc`'s packages (installed once per run, from the lock file: the
/// tests run side by side); `false` when Node.js is missing (skipped).
pub(crate) fn node_modules() -> bool {
    if !testkit::require("node", "Node.js 20 or later, with npm") {
        return false;
    }
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let installed = std::path::Path::new(OIDC_DIR).join("node_modules/oidc-provider");
        if !installed.exists() {
            let status = Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund"])
                .current_dir(OIDC_DIR)
                .status()
                .expect("running npm ci in tests/oidc");
            assert!(status.success(), "npm ci in tests/oidc");
        }
    });
    true
}

/// Three providers whose client `postal` may redirect to `app`'s callbacks `p1`..`p3`
/// (and `other`, a second client of each: a token for another audience), each added to
/// `app` with `postal provider add`. `None` when Node.js is missing (skipped).
pub(crate) fn providers(app: &TestApp) -> Option<Providers> {
    let db = app.db.to_string_lossy().into_owned();
    providers_for(&[&app.address], &["--db", &db])
}

/// As `providers`, for servers at `bases` that share the ledger `postal` reaches with
/// `target` (`--db FILE`, or `--ledger URL`).
pub(crate) fn providers_for(bases: &[&str], target: &[&str]) -> Option<Providers> {
    if !node_modules() {
        return None;
    }
    let redirects: Vec<String> = bases
        .iter()
        .flat_map(|base| {
            ["p1", "p2", "p3", "mixed"].map(|name| format!("{base}/account/callback/{name}"))
        })
        .collect();
    let config = json!({
        "count": 3,
        "redirectUris": redirects,
        "clients": [
            {"client_id": "postal", "client_secret": "secret-of-postal"},
            {"client_id": "other", "client_secret": "secret-of-other"},
        ],
    });
    let providers = start_providers(&config);
    assert_eq!(providers.issuers.len(), 3, "three issuers");
    for (i, issuer) in providers.issuers.iter().enumerate() {
        add_provider_to(
            target,
            &format!("p{}", i + 1),
            issuer,
            "postal",
            "secret-of-postal",
        );
    }
    Some(providers)
}

/// `tests/oidc/providers.mjs` with `config` (Node.js and its packages must be there:
/// `node_modules`), once it is ready; none added to a server.
pub(crate) fn start_providers(config: &Value) -> Providers {
    let mut child = Command::new("node")
        .arg("providers.mjs")
        .arg(config.to_string())
        .current_dir(OIDC_DIR)
        .env("OIDC_KEY_CACHE", testkit::scratch().join("oidc-keys"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the OpenID providers");
    let mut issuers = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.expect("a line of the providers");
        if line == "ready" {
            break;
        }
        if let Some(issuer) = line.strip_prefix("issuer ") {
            issuers.push(issuer.to_owned());
        }
    }
    Providers { child, issuers }
}

pub(crate) fn add_provider(app: &TestApp, name: &str, issuer: &str, client: &str, secret: &str) {
    let db = app.db.to_string_lossy().into_owned();
    add_provider_to(&["--db", &db], name, issuer, client, secret);
}

pub(crate) fn add_provider_to(
    target: &[&str],
    name: &str,
    issuer: &str,
    client: &str,
    secret: &str,
) {
    let output = Command::new(env!("CARGO_BIN_EXE_postal"))
        .args(target)
        .args([
            "provider",
            "add",
            name,
            "--issuer",
            issuer,
            "--client-id",
            client,
        ])
        .args(["--client-secret-env", "TEST_CLIENT_SECRET"])
        .env("TEST_CLIENT_SECRET", secret)
        .output()
        .expect("postal provider add");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let added: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(added["redirectPath"], format!("/account/callback/{name}"));
    // The secret is never printed.
    assert!(!String::from_utf8_lossy(&output.stdout).contains(secret));
}

/// Two nodes serving copies of the tiny fixture (their tests look up 90210 only) over one
/// throwaway PostgreSQL ledger, the three providers added for both; `None` when PostgreSQL or Node.js is missing (skipped).
/// Dropped in order: providers, nodes, then PostgreSQL.
pub(crate) struct TwoNodes {
    pub(crate) a: String,
    pub(crate) b: String,
    /// The ledger's URL (`--ledger`).
    pub(crate) url: String,
    _providers: Providers,
    _nodes: Vec<testkit::Serve>,
    _dir: tempfile::TempDir,
    pub(crate) pg: testkit::pg::PgCluster,
}

pub(crate) fn two_nodes() -> Option<TwoNodes> {
    two_nodes_with(&[])
}

/// As `two_nodes`, each node served with `serve_args` too.
pub(crate) fn two_nodes_with(serve_args: &[&str]) -> Option<TwoNodes> {
    let pg = testkit::pg::PgCluster::start()?;
    let url = pg.url();
    let dir = testkit::tempdir();
    let nodes: Vec<testkit::Serve> = (0..2)
        .map(|i| {
            let db = testkit::template::copy(
                crate::helpers::tiny_template(),
                &dir.path().join(format!("node{i}.db")),
            );
            let args: Vec<&str> = ["--ledger", url.as_str()]
                .into_iter()
                .chain(serve_args.iter().copied())
                .collect();
            testkit::Serve::start(env!("CARGO_BIN_EXE_postal"), &db, &args)
        })
        .collect();
    let (a, b) = (nodes[0].address.clone(), nodes[1].address.clone());
    let providers = providers_for(&[&a, &b], &["--ledger", &url])?;
    Some(TwoNodes {
        a,
        b,
        url,
        _providers: providers,
        _nodes: nodes,
        _dir: dir,
        pg,
    })
}

/// A browser: cookies per host:port (every path), redirects followed one at a time.
pub(crate) struct Browser {
    agent: ureq::Agent,
    pub(crate) cookies: HashMap<String, HashMap<String, String>>,
}

pub(crate) struct Page {
    pub(crate) status: u16,
    pub(crate) url: String,
    pub(crate) location: Option<String>,
    pub(crate) body: String,
}

pub(crate) fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split('/').next().unwrap_or("").to_owned()
}

pub(crate) fn absolute(base: &str, location: &str) -> String {
    if location.starts_with("http://") || location.starts_with("https://") {
        return location.to_owned();
    }
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let origin_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    format!("{}{location}", &base[..origin_end])
}

impl Browser {
    pub(crate) fn new() -> Browser {
        Browser {
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .max_redirects(0)
                .build()
                .into(),
            cookies: HashMap::new(),
        }
    }

    pub(crate) fn cookie_header(&self, url: &str) -> String {
        self.cookies
            .get(&host_of(url))
            .map(|jar| {
                jar.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default()
    }

    pub(crate) fn keep(&mut self, url: &str, response: &ureq::http::Response<ureq::Body>) {
        let jar = self.cookies.entry(host_of(url)).or_default();
        for value in response.headers().get_all("set-cookie") {
            let text = value.to_str().unwrap_or("");
            let pair = text.split(';').next().unwrap_or("");
            if let Some((name, value)) = pair.split_once('=') {
                let expired = text.to_ascii_lowercase().contains("max-age=0");
                if value.is_empty() || expired {
                    jar.remove(name.trim());
                } else {
                    jar.insert(name.trim().to_owned(), value.to_owned());
                }
            }
        }
    }

    /// Sends the session cookie of the server at `from` to the server at `to` as well
    /// (two nodes of one cluster).
    pub(crate) fn share_session(&mut self, from: &str, to: &str) {
        let cookie = self.cookie(from, "postal_session").unwrap();
        self.cookies
            .entry(host_of(to))
            .or_default()
            .insert("postal_session".into(), cookie);
    }

    pub(crate) fn cookie(&self, url: &str, name: &str) -> Option<String> {
        self.cookies.get(&host_of(url))?.get(name).cloned()
    }

    pub(crate) fn request(
        &mut self,
        method: &str,
        url: &str,
        body: Option<(&str, String)>,
        headers: &[(&str, &str)],
    ) -> Page {
        let cookies = self.cookie_header(url);
        let mut builder = ureq::http::Request::builder().method(method).uri(url);
        if !cookies.is_empty() {
            builder = builder.header("cookie", cookies);
        }
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        let response = match body {
            Some((content_type, text)) => self.agent.run(
                builder
                    .header("content-type", content_type)
                    .body(text)
                    .unwrap(),
            ),
            None => self.agent.run(builder.body(()).unwrap()),
        }
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        self.keep(url, &response);
        let status = response.status().as_u16();
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(|l| absolute(url, l));
        let body = response.into_body().read_to_string().unwrap_or_default();
        Page {
            status,
            url: url.to_owned(),
            location,
            body,
        }
    }

    pub(crate) fn get(&mut self, url: &str) -> Page {
        self.request("GET", url, None, &[])
    }

    /// Follows redirects from `url`, signing in at a provider as `user` (any password)
    /// and consenting; the first page that is not a redirect nor a provider's form.
    pub(crate) fn follow(&mut self, url: &str, user: &str) -> Page {
        let mut page = self.get(url);
        for _ in 0..20 {
            if let Some(next) = page.location.clone() {
                page = self.get(&next);
                continue;
            }
            let action = form_action(&page);
            let form = if page.body.contains(r#"name="prompt" value="login""#) {
                format!("prompt=login&login={user}&password=any")
            } else if page.body.contains(r#"name="prompt" value="consent""#) {
                "prompt=consent".to_owned()
            } else if page.body.contains("/session/end/confirm") {
                // Another person signs in where one is signed in at the provider: it ends
                // that one's session there first (its page submits itself), then goes on.
                hidden_fields(&page)
            } else {
                return page;
            };
            let action = action.expect("the provider's form has an action");
            page = self.request(
                "POST",
                &action,
                Some(("application/x-www-form-urlencoded", form)),
                &[],
            );
        }
        panic!("too many redirects from {url}");
    }

    /// Signs in at `app` with provider `name` as `user`; the dashboard page.
    pub(crate) fn sign_in(&mut self, app: &TestApp, name: &str, user: &str) -> Page {
        self.sign_in_at(&app.address, name, user)
    }

    pub(crate) fn sign_in_at(&mut self, address: &str, name: &str, user: &str) -> Page {
        let page = self.follow(&format!("{address}/account/signin/{name}"), user);
        assert_eq!(page.status, 200, "{}", page.body);
        assert!(page.body.contains("Your account"), "{}", page.body);
        page
    }

    /// A JSON call of `/account/api/*` with the session's CSRF token and the app's Origin.
    pub(crate) fn api(
        &mut self,
        app: &TestApp,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        self.api_at(&app.address, method, path, body)
    }

    /// The same at the server at `address`.
    pub(crate) fn api_at(
        &mut self,
        address: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let csrf = match method {
            "GET" => String::new(),
            _ => self.api_at(address, "GET", "/me", None).1["csrfToken"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
        };
        self.api_with_at(
            address,
            method,
            path,
            body,
            &[("x-csrf-token", &csrf), ("origin", address)],
        )
    }

    pub(crate) fn api_with(
        &mut self,
        app: &TestApp,
        method: &str,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        self.api_with_at(&app.address, method, path, body, headers)
    }

    pub(crate) fn api_with_at(
        &mut self,
        address: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let url = format!("{address}/account/api{path}");
        let page = self.request(
            method,
            &url,
            body.map(|b| ("application/json", b.to_string())),
            headers,
        );
        (
            page.status,
            serde_json::from_str(&page.body).unwrap_or(Value::Null),
        )
    }
}

/// Where the provider's form on `page` posts to.
pub(crate) fn form_action(page: &Page) -> Option<String> {
    static ACTION: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r#"action="([^"]+)""#).unwrap());
    ACTION
        .captures(&page.body)
        .map(|c| absolute(&page.url, &c[1]))
}

/// The hidden fields of the page's form, as a form body.
fn hidden_fields(page: &Page) -> String {
    static HIDDEN: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r#"type="hidden" name="([^"]+)" value="([^"]*)""#).unwrap()
    });
    HIDDEN
        .captures_iter(&page.body)
        .map(|c| format!("{}={}", &c[1], &c[2]))
        .collect::<Vec<_>>()
        .join("&")
}

pub(crate) fn lookup(app: &TestApp, key: &str) -> u16 {
    app.post("/api/lookup", &json!({"apiKey": key, "zipcode": "90210"}))
        .status
}

#[test]
fn a_customer_signs_in_makes_a_key_uses_it_limits_it_revokes_it_and_signs_out() {
    let app = spawn_app();
    let Some(providers) = providers(&app) else {
        return;
    };
    // Without a session: the sign-in page offers every provider; the API says 401.
    let mut browser = Browser::new();
    let page = browser.get(&format!("{}/account", app.address));
    assert_eq!(page.status, 200);
    for name in ["p1", "p2", "p3"] {
        assert!(
            page.body.contains(&format!("/account/signin/{name}")),
            "{}",
            page.body
        );
    }
    assert_eq!(
        browser.api(&app, "GET", "/me", None),
        (401, json!({"error": "Not signed in"}))
    );

    // Sign in with provider 2: a new account with the free allowance, no key yet.
    browser.sign_in(&app, "p2", "alice");
    let (status, me) = browser.api(&app, "GET", "/me", None);
    assert_eq!(status, 200, "{me}");
    let account = me["accountId"].as_str().unwrap().to_owned();
    assert_eq!(me["balance"], json!(0.028));
    assert_eq!(me["queriesLeft"], 1000);
    assert_eq!(me["identities"][0]["provider"], "p2");
    assert_eq!(me["identities"][0]["subject"], "alice");
    assert_eq!(me["identities"][0]["email"], "alice@provider2.test");
    assert_eq!(
        me["limits"],
        json!({"perMinute": null, "perHour": null, "perDay": null})
    );
    assert_eq!(
        browser.api(&app, "GET", "/keys", None),
        (200, json!({"keys": []}))
    );

    // A key, shown once; it answers at once and is charged one query.
    let (status, created) = browser.api(&app, "POST", "/keys", Some(json!({"name": "server"})));
    assert_eq!(status, 201, "{created}");
    let key = created["apiKey"].as_str().unwrap().to_owned();
    assert!(key.starts_with("sk_"));
    assert_eq!(created["name"], "server");
    assert_eq!(created["kind"], "secret");
    assert_eq!(created["hint"], json!(&key[..7]));
    assert_eq!(lookup(&app, &key), 200);
    assert_eq!(app.balance_micros(&account), 28_000 - 28);

    // Listed again: never the key, only its first characters.
    let (_, keys) = browser.api(&app, "GET", "/keys", None);
    let listed = &keys["keys"][0];
    assert_eq!(listed["keyId"], created["keyId"]);
    assert_eq!(listed["hint"], json!(&key[..7]));
    assert!(!keys.to_string().contains(&key));

    // A limit of 2 a minute: the third lookup of the minute is 429.
    crate::browser::with_seconds_left_in_the_minute(15);
    let (status, limits) = browser.api(
        &app,
        "PUT",
        "/limits",
        Some(json!({"perMinute": 2, "perHour": null, "perDay": null})),
    );
    assert_eq!(status, 200, "{limits}");
    assert_eq!(limits["limits"]["perMinute"], 2);
    let statuses: Vec<u16> = (0..3).map(|_| lookup(&app, &key)).collect();
    assert!(statuses.contains(&429), "{statuses:?}");
    let (status, refused) = browser.api(&app, "PUT", "/limits", Some(json!({"perMinute": 0})));
    assert_eq!(status, 400, "{refused}");

    // Renamed, then revoked: 401 from the next request on.
    let key_id = created["keyId"].as_str().unwrap();
    let (status, renamed) = browser.api(
        &app,
        "PATCH",
        &format!("/keys/{key_id}"),
        Some(json!({"name": "old server"})),
    );
    assert_eq!((status, &renamed["name"]), (200, &json!("old server")));
    let (status, revoked) = browser.api(&app, "DELETE", &format!("/keys/{key_id}"), None);
    assert_eq!(
        (status, revoked),
        (200, json!({"keyId": key_id, "revoked": true}))
    );
    assert_eq!(lookup(&app, &key), 401);

    // The operator tops the account up with the CLI; the audit log has every change,
    // whose it was, newest first, also as CSV.
    app.cli(&["account", "topup", &account, "--usd", "5"]);
    let (_, audit) = browser.api(&app, "GET", "/audit", None);
    let lines: Vec<(String, String)> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["actor"].as_str().unwrap().to_owned(),
                e["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let session = format!("customer (session {})", me["sessionId"].as_str().unwrap());
    let who = |actor: &str, action: &str| (actor.to_owned(), action.to_owned());
    assert_eq!(
        lines,
        [
            who("operator (CLI)", "topup"),
            who(&session, "key.revoke"),
            who(&session, "key.rename"),
            who(&session, "limits.set"),
            who(&session, "key.create"),
            who("customer (sign-in)", "session.start"),
            who("customer (sign-in)", "account.create"),
        ],
        "{audit}"
    );
    // The sign-in's own line: the session, the identity, the address and the browser.
    let signed_in = format!(
        "{} signed in with p2 ({}, subject alice) from 127.0.0.1, ureq/",
        me["sessionId"].as_str().unwrap(),
        providers.issuers[1]
    );
    let start = audit["entries"][5]["detail"].as_str().unwrap();
    assert!(start.starts_with(&signed_in), "{start}");
    let csv = browser.get(&format!("{}/account/api/audit?format=csv", app.address));
    assert_eq!(csv.status, 200);
    assert!(
        csv.body.starts_with("at,actor,action,detail\n"),
        "{}",
        csv.body
    );
    assert_eq!(csv.body.lines().count(), 8, "{}", csv.body);

    // Usage and ledger of the account: the charged lookups.
    let (_, usage) = browser.api(&app, "GET", "/usage?days=7", None);
    assert_eq!(usage["accountId"], json!(account));
    let (_, ledger) = browser.api(&app, "GET", "/ledger", None);
    let kinds: Vec<&str> = ledger["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.last(), Some(&"grant"));

    // Sign out: the session ends; signing in again finds the same account, with no
    // second allowance.
    let (status, _) = browser.api(&app, "POST", "/signout", Some(json!({})));
    assert_eq!(status, 200);
    assert_eq!(browser.api(&app, "GET", "/me", None).0, 401);
    browser.sign_in(&app, "p2", "alice");
    let (_, again) = browser.api(&app, "GET", "/me", None);
    assert_eq!(again["accountId"], json!(account));
    let accounts = app.cli(&["account", "list"]);
    assert_eq!(
        accounts["accounts"].as_array().unwrap().len(),
        1,
        "{accounts}"
    );

    // Linking provider 3 to this account; then provider 3 signs in to it.
    let linked = browser.link_at(&app.address, "p3", "alice-at-3");
    assert_eq!(linked.status, 200, "{}", linked.body);
    let (_, me) = browser.api(&app, "GET", "/me", None);
    assert_eq!(me["identities"].as_array().unwrap().len(), 2, "{me}");
    let mut other = Browser::new();
    other.sign_in(&app, "p3", "alice-at-3");
    assert_eq!(
        other.api(&app, "GET", "/me", None).1["accountId"],
        json!(account)
    );

    // Provider 1, a new identity: a second account.
    let mut bob = Browser::new();
    bob.sign_in(&app, "p1", "bob");
    let (_, bob_me) = bob.api(&app, "GET", "/me", None);
    assert_ne!(bob_me["accountId"], json!(account));
    assert_eq!(bob_me["balance"], json!(0.028));
}

#[test]
fn attacks_on_the_sign_in_and_the_dashboard_are_refused() {
    let app = spawn_app();
    let Some(providers) = providers(&app) else {
        return;
    };
    // A callback with another browser's state: refused, no session.
    let mut victim = Browser::new();
    let mut attacker = Browser::new();
    let start = attacker.get(&format!("{}/account/signin/p1", app.address));
    let to_provider = start.location.clone().unwrap();
    let mut page = attacker.get(&to_provider);
    // The attacker completes the provider's part, then hands the callback to the victim.
    let callback = loop {
        if let Some(next) = page.location.clone() {
            if next.starts_with(&app.address) {
                break next;
            }
            page = attacker.get(&next);
            continue;
        }
        let action = form_action(&page).unwrap();
        let form = if page.body.contains(r#"value="login""#) {
            "prompt=login&login=mallory&password=x".to_owned()
        } else {
            "prompt=consent".to_owned()
        };
        page = attacker.request(
            "POST",
            &action,
            Some(("application/x-www-form-urlencoded", form)),
            &[],
        );
    };
    let refused = victim.get(&callback);
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(
        refused.body.contains("its state does not match"),
        "{}",
        refused.body
    );
    assert_eq!(victim.api(&app, "GET", "/me", None).0, 401);

    // The attacker's own browser completes it once; the same callback again is refused
    // (the state served once), and so is the code under a fresh state (a replayed code).
    let first = attacker.get(&callback);
    assert_eq!(first.status, 303, "{}", first.body);
    // (The callback deleted the state's cookie; it is put back, as a replay would.)
    let used_state = regex::Regex::new(r"state=([^&]+)")
        .unwrap()
        .captures(&callback)
        .unwrap()[1]
        .to_owned();
    attacker
        .cookies
        .entry(host_of(&app.address))
        .or_default()
        .insert("postal_signin".into(), used_state);
    let again = attacker.get(&callback);
    assert_eq!(again.status, 400, "{}", again.body);
    assert!(
        again.body.contains("expired or was already used"),
        "{}",
        again.body
    );
    let code = regex::Regex::new(r"code=([^&]+)")
        .unwrap()
        .captures(&callback)
        .unwrap()[1]
        .to_owned();
    let fresh = attacker.get(&format!("{}/account/signin/p1", app.address));
    let state = regex::Regex::new(r"state=([^&]+)")
        .unwrap()
        .captures(fresh.location.as_deref().unwrap())
        .unwrap()[1]
        .to_owned();
    let replayed = attacker.get(&format!(
        "{}/account/callback/p1?code={code}&state={state}",
        app.address
    ));
    assert_eq!(replayed.status, 400, "{}", replayed.body);
    assert!(
        replayed.body.contains("could not be verified"),
        "{}",
        replayed.body
    );

    // A provider configured with a client secret the provider does not accept: the code
    // exchange is refused, nobody is signed in.
    add_provider(
        &app,
        "mixed",
        &providers.issuers[1],
        "other",
        "secret-of-postal",
    );
    let mut mixed = Browser::new();
    let page = mixed.follow(&format!("{}/account/signin/mixed", app.address), "carol");
    assert_eq!(page.status, 400, "{}", page.body);
    assert_eq!(mixed.api(&app, "GET", "/me", None).0, 401);

    // A change without the CSRF token, or from another Origin: 403, nothing changed.
    let mut alice = Browser::new();
    alice.sign_in(&app, "p2", "alice");
    let (_, me) = alice.api(&app, "GET", "/me", None);
    let csrf = me["csrfToken"].as_str().unwrap().to_owned();
    let (status, body) = alice.api_with(
        &app,
        "POST",
        "/keys",
        Some(json!({})),
        &[("origin", &app.address)],
    );
    assert_eq!(
        (status, body),
        (403, json!({"error": "Missing or wrong X-CSRF-Token"}))
    );
    let (status, body) = alice.api_with(
        &app,
        "POST",
        "/keys",
        Some(json!({})),
        &[("origin", "https://evil.example"), ("x-csrf-token", &csrf)],
    );
    assert_eq!(
        (status, body),
        (
            403,
            json!({"error": "Origin not allowed for the dashboard"})
        )
    );
    assert_eq!(alice.api(&app, "GET", "/keys", None).1, json!({"keys": []}));

    // Another account's key: 404, nothing leaked, still working.
    let (_, other_key) = app.create_account();
    let other_id = app.cli(&["account", "list"])["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "test")
        .unwrap()["accountId"]
        .as_str()
        .unwrap()
        .to_owned();
    let other_key_id = app.cli(&["key", "list", &other_id])["keys"][0]["keyId"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, body) = alice.api(&app, "DELETE", &format!("/keys/{other_key_id}"), None);
    assert_eq!(
        (status, body),
        (404, json!({"error": format!("no key {other_key_id:?}")}))
    );
    assert_eq!(lookup(&app, &other_key), 200);

    // A session after sign-out is refused, even with its old cookie.
    let cookie = alice.cookie(&app.address, "postal_session").unwrap();
    assert_eq!(alice.api(&app, "POST", "/signout", Some(json!({}))).0, 200);
    let mut replay = Browser::new();
    replay
        .cookies
        .entry(host_of(&app.address))
        .or_default()
        .insert("postal_session".into(), cookie);
    assert_eq!(replay.api(&app, "GET", "/me", None).0, 401);

    // Every answer under /account carries the security headers.
    let index = ureq::get(format!("{}/account", app.address))
        .call()
        .unwrap();
    let csp = index
        .headers()
        .get("content-security-policy")
        .unwrap()
        .to_str()
        .unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(
        index.headers().get("x-content-type-options").unwrap(),
        "nosniff"
    );
}

#[test]
fn with_signups_closed_a_new_identity_is_refused() {
    let mut settings = postal::api::Settings::default();
    settings.dashboard.signups_closed = true;
    let app = spawn_app_with(settings);
    let Some(_providers) = providers(&app) else {
        return;
    };
    let accounts_before = app.cli(&["account", "list"])["accounts"]
        .as_array()
        .unwrap()
        .len();
    let mut browser = Browser::new();
    let page = browser.follow(&format!("{}/account/signin/p1", app.address), "newcomer");
    assert_eq!(page.status, 403, "{}", page.body);
    assert!(
        page.body.contains("new accounts are closed on this server"),
        "{}",
        page.body
    );
    assert_eq!(browser.api(&app, "GET", "/me", None).0, 401);
    let accounts_after = app.cli(&["account", "list"])["accounts"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(accounts_after, accounts_before);
}
