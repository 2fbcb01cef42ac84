//! Secrets at rest (issue 50 item 6; security review 2026-11-28, L5): the client secret and
//! Stripe's secrets from private files (`--client-secret-file`, `--secret-key-file`,
//! `--webhook-secret-file`, refused unless mode 0600 or stricter, as
//! `--ledger-password-file`) or the environment, exactly one of each; a full Stripe key
//! (`sk_`) warned about, a restricted one (`rk_`) not.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::account::{Browser, node_modules, start_providers};
use crate::helpers::{TestApp, spawn_app};
use crate::payments::deliver;

/// `postal --db <app's> ARGS` with `env` set (and the tests' own variables unset): exit
/// code, stdout, stderr.
fn postal(app: &TestApp, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_postal"))
        .arg("--db")
        .arg(&app.db)
        .args(args)
        .env_remove("TEST_CLIENT_SECRET")
        .env_remove("TEST_STRIPE_KEY")
        .env_remove("TEST_STRIPE_WHSEC")
        .envs(env.iter().copied())
        .output()
        .expect("running postal");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `secret` in the file `name` of `dir`, of `mode`.
fn secret_file(dir: &Path, name: &str, secret: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, secret).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// What postal says of a secret file open to others: exit 2, nothing on stdout.
fn open_to_others(what: &str, path: &Path, mode: &str) -> (Option<i32>, String, String) {
    let shown = path.display();
    (
        Some(2),
        String::new(),
        format!(
            "error: {what} {shown} is open to group or others (mode {mode}); allow its owner \
             only: chmod 600 {shown}\n"
        ),
    )
}

/// The first line of clap's complaint, and its exit code.
fn usage_error((code, out, err): (Option<i32>, String, String)) -> (Option<i32>, String, String) {
    (
        code,
        out,
        err.lines().take(2).collect::<Vec<_>>().join("\n"),
    )
}

#[test]
fn a_client_secret_file_open_to_others_is_refused_and_a_private_one_signs_customers_in() {
    let app = spawn_app();
    if !node_modules() {
        return;
    }
    let redirects = ["filed", "wrong"].map(|n| format!("{}/account/callback/{n}", app.address));
    let providers = start_providers(&json!({
        "count": 1,
        "redirectUris": redirects,
        "clients": [{"client_id": "postal", "client_secret": "secret-of-postal"}],
    }));
    let issuer = providers.issuers[0].as_str();
    let dir = tempfile::tempdir().unwrap();
    let add = |name: &'static str, flags: &[&str]| -> Vec<String> {
        [
            "provider",
            "add",
            name,
            "--issuer",
            issuer,
            "--client-id",
            "postal",
        ]
        .iter()
        .chain(flags)
        .map(|s| s.to_string())
        .collect()
    };
    let run = |args: Vec<String>, env: &[(&str, &str)]| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        postal(&app, &args, env)
    };

    // Open to group or others, empty: refused (exit 2), nothing stored.
    let file = secret_file(dir.path(), "client.secret", "secret-of-postal\n", 0o644);
    let path = file.to_str().unwrap();
    assert_eq!(
        run(add("filed", &["--client-secret-file", path]), &[]),
        open_to_others("the client secret file", &file, "0644")
    );
    let empty = secret_file(dir.path(), "empty.secret", "\n", 0o600);
    assert_eq!(
        run(
            add("filed", &["--client-secret-file", empty.to_str().unwrap()]),
            &[]
        ),
        (
            Some(2),
            String::new(),
            format!(
                "error: the client secret file {} is empty\n",
                empty.display()
            )
        )
    );
    // Exactly one of the file and the variable.
    assert_eq!(
        usage_error(run(
            add(
                "filed",
                &[
                    "--client-secret-file",
                    path,
                    "--client-secret-env",
                    "TEST_CLIENT_SECRET"
                ]
            ),
            &[("TEST_CLIENT_SECRET", "secret-of-postal")],
        )),
        (
            Some(2),
            String::new(),
            "error: the argument '--client-secret-file <PATH>' cannot be used with \
             '--client-secret-env <VAR>'\n"
                .to_owned()
        )
    );
    assert_eq!(
        usage_error(run(add("filed", &[]), &[])),
        (
            Some(2),
            String::new(),
            "error: the following required arguments were not provided:\n  \
             <--client-secret-file <PATH>|--client-secret-env <VAR>>"
                .to_owned()
        )
    );
    assert_eq!(app.cli(&["provider", "list"]), json!({"providers": []}));

    // Mode 0600: taken, never printed, and it is the secret the token endpoint gets.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (code, out, err) = run(add("filed", &["--client-secret-file", path]), &[]);
    assert_eq!((code, err.as_str()), (Some(0), ""), "{out}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["redirectPath"],
        "/account/callback/filed"
    );
    assert!(!out.contains("secret-of-postal"), "{out}");
    let listed = serde_json::to_string(&app.cli(&["provider", "list"])).unwrap();
    assert!(!listed.contains("secret-of-postal"), "{listed}");
    let mut alice = Browser::new();
    alice.sign_in(&app, "filed", "alice");
    assert_eq!(alice.api(&app, "GET", "/me", None).0, 200);

    // A wrong secret in a private file (0400) is taken, and the provider refuses it.
    let wrong = secret_file(dir.path(), "wrong.secret", "not-the-secret", 0o400);
    let (code, _, err) = run(
        add("wrong", &["--client-secret-file", wrong.to_str().unwrap()]),
        &[],
    );
    assert_eq!(code, Some(0), "{err}");
    let mut mallory = Browser::new();
    let page = mallory.follow(&format!("{}/account/signin/wrong", app.address), "mallory");
    assert_ne!(page.status, 200, "{}", page.body);
    assert_eq!(mallory.api(&app, "GET", "/me", None).0, 401);
}

/// A stand-in of Stripe's API that answers every Checkout Session creation with one
/// session, and records each request's `Authorization` header.
fn stripe_stand_in() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let page = format!("{base}/pay/cs_test_filed");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            let mut authorization = String::new();
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) <= 2 {
                    break;
                }
                let (name, value) = header.split_once(':').unwrap_or((&header, ""));
                match name.to_ascii_lowercase().as_str() {
                    "content-length" => length = value.trim().parse().unwrap_or(0),
                    "authorization" => authorization = value.trim().to_owned(),
                    _ => {}
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            record.lock().unwrap().push(authorization);
            let session =
                json!({"id": "cs_test_filed", "url": page, "payment_status": "unpaid"}).to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{session}",
                session.len()
            );
        }
    });
    (base, seen)
}

/// The full-key warning, for the key read from `source`.
fn full_key_warning(source: &str) -> String {
    format!(
        "warning: {source} holds a full secret key (sk_…), which can do anything on the \
         Stripe account; use a restricted key (rk_…) allowed only Checkout Sessions: Write \
         (Stripe's Dashboard, Developers → API keys → Create restricted key)\n"
    )
}

#[test]
fn stripe_secrets_from_private_files_are_used_and_a_full_key_is_warned_about() {
    let app = spawn_app();
    let dir = tempfile::tempdir().unwrap();
    let (stripe, seen) = stripe_stand_in();
    let key = secret_file(dir.path(), "stripe.key", "rk_test_from_file\n", 0o644);
    let whsec = secret_file(dir.path(), "stripe.whsec", "whsec_from_file\n", 0o640);
    let (key_path, whsec_path) = (key.to_str().unwrap(), whsec.to_str().unwrap());
    let files = [
        "payments",
        "stripe",
        "--secret-key-file",
        key_path,
        "--webhook-secret-file",
        whsec_path,
        "--api-base",
        &stripe,
    ];

    // Open to group or others: refused (exit 2), nothing stored; the key's file first.
    assert_eq!(
        postal(&app, &files, &[]),
        open_to_others("the Stripe secret key file", &key, "0644")
    );
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(
        postal(&app, &files, &[]),
        open_to_others("the Stripe webhook secret file", &whsec, "0640")
    );
    std::fs::set_permissions(&whsec, std::fs::Permissions::from_mode(0o600)).unwrap();
    // Exactly one form of each.
    assert_eq!(
        usage_error(postal(
            &app,
            &[&files[..], &["--secret-key-env", "TEST_STRIPE_KEY"]].concat(),
            &[("TEST_STRIPE_KEY", "rk_test_x")],
        )),
        (
            Some(2),
            String::new(),
            "error: the argument '--secret-key-file <PATH>' cannot be used with \
             '--secret-key-env <VAR>'\n"
                .to_owned()
        )
    );
    assert_eq!(
        usage_error(postal(
            &app,
            &["payments", "stripe", "--secret-key-file", key_path],
            &[]
        )),
        (
            Some(2),
            String::new(),
            "error: the following required arguments were not provided:\n  \
             <--webhook-secret-file <PATH>|--webhook-secret-env <VAR>>"
                .to_owned()
        )
    );
    assert_eq!(app.cli(&["payments", "show"]), json!({"enabled": false}));

    // A publishable key is no secret key: refused, its file named.
    let publishable = secret_file(dir.path(), "pk.key", "pk_test_x\n", 0o600);
    assert_eq!(
        postal(
            &app,
            &[
                "payments",
                "stripe",
                "--secret-key-file",
                publishable.to_str().unwrap(),
                "--webhook-secret-file",
                whsec_path,
            ],
            &[],
        ),
        (
            Some(2),
            String::new(),
            format!(
                "error: {} does not hold a Stripe secret or restricted key (sk_… or rk_…)\n",
                publishable.display()
            )
        )
    );

    // A full key is taken with a warning naming where it came from, file or variable.
    let full = secret_file(dir.path(), "full.key", "sk_live_full\n", 0o600);
    let (code, out, err) = postal(
        &app,
        &[
            "payments",
            "stripe",
            "--secret-key-file",
            full.to_str().unwrap(),
            "--webhook-secret-env",
            "TEST_STRIPE_WHSEC",
        ],
        &[("TEST_STRIPE_WHSEC", "whsec_x")],
    );
    assert_eq!(
        (code, err),
        (Some(0), full_key_warning(&full.display().to_string()))
    );
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["mode"], "live");
    let (code, _, err) = postal(
        &app,
        &[
            "payments",
            "stripe",
            "--secret-key-env",
            "TEST_STRIPE_KEY",
            "--webhook-secret-env",
            "TEST_STRIPE_WHSEC",
        ],
        &[
            ("TEST_STRIPE_KEY", "sk_test_x"),
            ("TEST_STRIPE_WHSEC", "whsec_x"),
        ],
    );
    assert_eq!((code, err), (Some(0), full_key_warning("TEST_STRIPE_KEY")));

    // Private files and a restricted key: taken without a word on stderr, never printed.
    let (code, out, err) = postal(&app, &files, &[]);
    assert_eq!((code, err.as_str()), (Some(0), ""), "{out}");
    let shown = json!({"enabled": true, "processor": "stripe", "apiBase": stripe,
                       "maxTopup": 1000.0, "webhookPath": "/account/stripe/webhook",
                       "mode": "test"});
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), shown);
    assert_eq!(app.cli(&["payments", "show"]), shown);

    // The webhook secret of the file is the one signatures are checked against.
    let event = r#"{"id":"evt_filed","type":"customer.created","data":{"object":{}}}"#;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let signed =
        |secret: &str| postal::domain::payments::signature_header(event.as_bytes(), secret, now);
    assert_eq!(
        deliver(&app.address, event, Some(&signed("whsec_x"))),
        (
            400,
            json!({"error": "No v1 signature of Stripe-Signature matches the webhook secret"})
        )
    );
    assert_eq!(
        deliver(&app.address, event, Some(&signed("whsec_from_file"))),
        (200, json!({"received": true, "outcome": "ignored"}))
    );

    // The secret key of the file is the one Stripe's API gets (a customer's top-up).
    if !node_modules() {
        return;
    }
    let providers = start_providers(&json!({
        "count": 1,
        "redirectUris": [format!("{}/account/callback/p1", app.address)],
        "clients": [{"client_id": "postal", "client_secret": "secret-of-postal"}],
    }));
    let db = app.db.to_string_lossy().into_owned();
    crate::account::add_provider_to(
        &["--db", &db],
        "p1",
        &providers.issuers[0],
        "postal",
        "secret-of-postal",
    );
    let mut payer = Browser::new();
    payer.sign_in(&app, "p1", "payer");
    let (status, started) = payer.api(&app, "POST", "/topups", Some(json!({"amount": "5.00"})));
    assert_eq!(status, 201, "{started}");
    assert_eq!(
        *seen.lock().unwrap(),
        vec!["Bearer rk_test_from_file".to_owned()]
    );
}
