//! Only https to the outside, and ID tokens only in asymmetric algorithms (issue 50 item
//! 5; security review 2026-11-28, L3 and L4): `provider add` and `payments stripe` refuse
//! plain http off loopback (exit 2, nothing stored); a sign-in whose discovery document
//! names such an endpoint fails as a provider failure; an HS256 ID token is refused though
//! the provider lists HS256.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::account::{Browser, add_provider_to, node_modules, start_providers};
use crate::helpers::{TestApp, spawn_app};

const RULE: &str = "https, or http only to a loopback host (127.0.0.0/8, [::1], localhost)";

/// `postal --db <app's> ARGS`, the client secret and Stripe's secrets in the environment:
/// exit code, stdout, stderr.
fn postal(app: &TestApp, args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_postal"))
        .arg("--db")
        .arg(&app.db)
        .args(args)
        .env("TEST_CLIENT_SECRET", "secret-of-postal")
        .env("TEST_STRIPE_KEY", "rk_test_x")
        .env("TEST_STRIPE_WHSEC", "whsec_x")
        .output()
        .expect("running postal");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn add_args<'a>(name: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
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
    args
}

fn stripe_args(api_base: &str) -> Vec<&str> {
    vec![
        "payments",
        "stripe",
        "--secret-key-env",
        "TEST_STRIPE_KEY",
        "--webhook-secret-env",
        "TEST_STRIPE_WHSEC",
        "--api-base",
        api_base,
    ]
}

#[test]
fn plain_http_off_loopback_is_refused_at_provider_add_and_payments_stripe() {
    let app = spawn_app();
    let refusals = [
        (
            add_args("evil", &["--issuer", "http://idp.example.com"]),
            "--issuer",
            "http://idp.example.com",
        ),
        (
            add_args(
                "gh",
                &[
                    "--kind",
                    "github",
                    "--github-url",
                    "http://github.example.com",
                ],
            ),
            "--github-url",
            "http://github.example.com",
        ),
        (
            add_args(
                "ms",
                &[
                    "--kind",
                    "microsoft",
                    "--issuer",
                    "http://login.example.com",
                ],
            ),
            "--issuer",
            "http://login.example.com",
        ),
        (
            add_args("mapped", &["--issuer", "http://[::ffff:127.0.0.1]:8080"]),
            "--issuer",
            "http://[::ffff:127.0.0.1]:8080",
        ),
        (
            stripe_args("http://stripe-proxy.example.com"),
            "--api-base",
            "http://stripe-proxy.example.com",
        ),
    ];
    for (args, flag, url) in &refusals {
        let (code, out, err) = postal(&app, args);
        assert_eq!(
            (code, out.as_str(), err.as_str()),
            (
                Some(2),
                "",
                format!("error: {flag} must be {RULE}: \"{url}\"\n").as_str()
            ),
            "{args:?}"
        );
    }
    // Nothing was stored.
    assert_eq!(app.cli(&["provider", "list"]), json!({"providers": []}));
    assert_eq!(app.cli(&["payments", "show"]), json!({"enabled": false}));

    // https anywhere, and http to a loopback host (the tests' stand-ins), are taken.
    for (name, issuer) in [
        ("tls", "https://idp.example.com"),
        ("v4", "http://127.0.0.1:9"),
        ("v4-other", "http://127.0.0.2:9"),
        ("v6", "http://[::1]:9"),
        ("named", "http://localhost:9"),
    ] {
        let (code, _, err) = postal(&app, &add_args(name, &["--issuer", issuer]));
        assert_eq!(code, Some(0), "{issuer}: {err}");
    }
    let (code, _, err) = postal(
        &app,
        &add_args(
            "gh",
            &["--kind", "github", "--github-url", "http://127.0.0.1:9"],
        ),
    );
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = postal(&app, &stripe_args("http://127.0.0.1:9"));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["apiBase"],
        "http://127.0.0.1:9"
    );
}

/// A stand-in OpenID provider that serves only its discovery document (`document` with
/// `{base}` and `{port}` replaced by its own address and port) and an empty JWKS, and
/// records the paths asked.
struct Discovery {
    base: String,
    asked: Arc<Mutex<Vec<String>>>,
}

fn discovery(document: String) -> Discovery {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let document = document
        .replace("{base}", &base)
        .replace("{port}", &port.to_string());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let record = asked.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) <= 2 {
                    break;
                }
            }
            let path = request_line
                .split_whitespace()
                .nth(1)
                .unwrap_or("")
                .to_owned();
            record.lock().unwrap().push(path.clone());
            let body = match path.as_str() {
                "/.well-known/openid-configuration" => document.clone(),
                "/jwks" => r#"{"keys": []}"#.to_owned(),
                _ => String::new(),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    Discovery { base, asked }
}

/// A discovery document of the stand-in at `{base}`, `field` replaced by `url`.
fn document(field: Option<(&str, &str)>) -> String {
    let mut document = json!({
        "issuer": "{base}",
        "authorization_endpoint": "{base}/authorize",
        "token_endpoint": "{base}/token",
        "jwks_uri": "{base}/jwks",
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
    });
    if let Some((field, url)) = field {
        document[field] = json!(url);
    }
    document.to_string()
}

#[test]
fn a_sign_in_whose_discovery_names_plain_http_off_loopback_fails_as_the_provider_failing() {
    let app = spawn_app();
    let db = app.db.to_string_lossy().into_owned();

    // All on loopback: the browser is sent to the authorization endpoint.
    let fine = discovery(document(None));
    add_provider_to(
        &["--db", &db],
        "fine",
        &fine.base,
        "postal",
        "secret-of-postal",
    );
    let start = Browser::new().get(&format!("{}/account/signin/fine", app.address));
    assert_eq!(start.status, 303, "{}", start.body);
    let to = start.location.unwrap_or_default();
    assert!(to.starts_with(&format!("{}/authorize?", fine.base)), "{to}");

    // Each endpoint off the rule: 502, the page of a provider that failed, nobody sent
    // anywhere. The JWKS is named by an IPv4-mapped address of this very stand-in,
    // reachable but not a loopback host by the rule: refused, never fetched (the others'
    // JWKS, on loopback, is read with the document).
    let document_and_keys = ["/.well-known/openid-configuration", "/jwks"];
    for (name, field, url, asked) in [
        (
            "authz",
            "authorization_endpoint",
            "http://idp.example.com/authorize",
            &document_and_keys[..],
        ),
        (
            "token",
            "token_endpoint",
            "http://idp.example.com/token",
            &document_and_keys[..],
        ),
        (
            "keys",
            "jwks_uri",
            "http://[::ffff:127.0.0.1]:{port}/jwks",
            &document_and_keys[..1],
        ),
    ] {
        let stand_in = discovery(document(Some((field, url))));
        add_provider_to(
            &["--db", &db],
            name,
            &stand_in.base,
            "postal",
            "secret-of-postal",
        );
        let start = Browser::new().get(&format!("{}/account/signin/{name}", app.address));
        assert_eq!(
            (start.status, alert(&start.body), start.location),
            (
                502,
                format!("The provider {name} could not be reached; try again later."),
                None
            ),
            "{field}"
        );
        assert_eq!(*stand_in.asked.lock().unwrap(), asked, "{field}");
    }
}

/// The text of a page's `role="alert"` paragraph, unescaped.
pub(crate) fn alert(body: &str) -> String {
    let start = body.find(r#"<p role="alert">"#).map(|i| i + 16);
    let text = start
        .and_then(|s| body[s..].find("</p>").map(|e| &body[s..s + e]))
        .unwrap_or_else(|| panic!("no alert in {body}"));
    text.replace("&#39;", "'")
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

#[test]
fn an_hs256_id_token_is_refused_though_the_provider_lists_hs256() {
    let app = spawn_app();
    if !node_modules() {
        return;
    }
    let hs_secret = "a-client-secret-long-enough-for-hs256-0123456789";
    let redirects = ["hs", "rs"].map(|n| format!("{}/account/callback/{n}", app.address));
    let providers = start_providers(&json!({
        "count": 1,
        "redirectUris": redirects,
        "clients": [
            {"client_id": "hs", "client_secret": hs_secret, "id_token_signed_response_alg": "HS256"},
            {"client_id": "rs", "client_secret": "secret-of-rs"},
        ],
        "idTokenSigningAlgValues": ["RS256", "HS256"],
    }));
    let issuer = &providers.issuers[0];
    let db = app.db.to_string_lossy().into_owned();
    add_provider_to(&["--db", &db], "hs", issuer, "hs", hs_secret);
    add_provider_to(&["--db", &db], "rs", issuer, "rs", "secret-of-rs");
    let document: Value = serde_json::from_str(
        &ureq::get(format!("{issuer}/.well-known/openid-configuration"))
            .call()
            .unwrap()
            .into_body()
            .read_to_string()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        document["id_token_signing_alg_values_supported"],
        json!(["HS256", "RS256"])
    );

    // The provider signs this client's ID token with HS256 (its client secret): refused.
    let mut mallory = Browser::new();
    let page = mallory.follow(&format!("{}/account/signin/hs", app.address), "mallory");
    assert_eq!(
        (page.status, alert(&page.body)),
        (
            400,
            "The provider's answer could not be verified (an expired or used code, or a token not meant for this service); start again.".to_owned()
        )
    );
    assert_eq!(mallory.api(&app, "GET", "/me", None).0, 401);

    // The same provider's RS256 ID tokens sign in.
    let mut alice = Browser::new();
    alice.sign_in(&app, "rs", "alice");
    assert_eq!(alice.api(&app, "GET", "/me", None).0, 200);
}
