//! `postal ledger migrate`: a single-file deployment with customers of every kind moved into
//! a cluster's PostgreSQL ledger, then served by a node: the same identities sign in to the
//! same accounts, every key answers as before, nothing of the dashboard is lost.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::account::{Browser, providers_for};
use crate::payments::{Stripe, enable_payments};

const POSTAL: &str = env!("CARGO_BIN_EXE_postal");
const SHOP: &str = "https://shop.example";

/// `postal TARGET... args...`: its JSON answer (the command must succeed).
pub(crate) fn cli(target: &[&str], args: &[&str]) -> Value {
    serde_json::from_str(&cli_text(target, args)).unwrap()
}

/// `postal TARGET... args...`: its answer as printed.
pub(crate) fn cli_text(target: &[&str], args: &[&str]) -> String {
    let out = Command::new(POSTAL)
        .args(target)
        .args(args)
        .env_remove("POSTAL_DB")
        .env_remove("POSTAL_LEDGER")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "postal {target:?} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `postal --db FILE serve --listen ADDRESS --ledger...` on a port chosen beforehand (the
/// providers must know the callback before the server runs).
fn serve_on(db: &Path, port: u16, extra: &[&str]) -> testkit::Serve {
    let mut args: Vec<std::ffi::OsString> = vec!["--db".into(), db.into(), "serve".into()];
    args.extend(["--listen".into(), format!("127.0.0.1:{port}").into()]);
    args.extend(extra.iter().map(Into::into));
    testkit::Serve::spawn(testkit::serve::command(POSTAL, &args))
}

/// The rows of each moved table in the file, as `ledger migrate` should count them.
fn file_counts(file: &Path) -> Value {
    let conn = rusqlite::Connection::open(file).unwrap();
    let mut counts = serde_json::Map::new();
    for (table, _) in postal::db::pg::from_file::moved_tables() {
        let rows: i64 = conn
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap();
        counts.insert(table.to_owned(), json!(rows));
    }
    Value::Object(counts)
}

/// Before: a file deployment (its server stopped before the move) where Alice signed in
/// with provider 1 and linked provider 2, named a key, rolled it (in its 2-hour grace),
/// made a publishable key with a budget, paid a 5.00 top-up by card, 2.00 of it refunded;
/// Bob signed in with provider 3 and has a key; the operator made an account with the CLI,
/// topped it up and limited it; and a key was revoked. After `ledger migrate` into an
/// empty PostgreSQL, on a node of that ledger: each identity signs in to its account with
/// its balance (no second free allowance), the providers are offered, the keys list as
/// before (the rolled key's grace ends at the same instant), every live key answers, the
/// audit log and the top-ups are all there, a refund delivered after the move is taken
/// back, new rows get new ids, and `ledger verify` holds. Sessions end with the move.
#[test]
fn a_file_deployment_moves_to_a_ledger_with_its_customers_signed_in_as_before() {
    let _heavy = crate::helpers::timing_sensitive();
    let Some(pg) = testkit::pg::PgCluster::start() else {
        return;
    };
    let url = pg.url();
    let dir = testkit::tempdir();
    let file =
        testkit::template::copy(crate::helpers::tiny_template(), &dir.path().join("file.db"));
    let node_db =
        testkit::template::copy(crate::helpers::tiny_template(), &dir.path().join("node.db"));
    let on_file = ["--db", file.to_str().unwrap()];
    let on_ledger = ["--ledger", url.as_str()];
    let (file_port, node_port) = (testkit::free_port(), testkit::free_port());
    let (before_at, after_at) = (
        format!("http://127.0.0.1:{file_port}"),
        format!("http://127.0.0.1:{node_port}"),
    );
    let Some(_providers) = providers_for(&[&before_at, &after_at], &on_file) else {
        return;
    };
    let mut server = serve_on(&file, file_port, &[]);
    let Some(stripe) = Stripe::start(&format!("{before_at}/account/stripe/webhook")) else {
        return;
    };
    enable_payments(&on_file, &stripe.base);

    // Alice: provider 1, then provider 2 linked.
    let mut alice = Browser::new();
    alice.sign_in_at(&before_at, "p1", "alice");
    let linked = alice.link_at(&before_at, "p2", "alice-at-2");
    assert_eq!(linked.status, 200, "{}", linked.body);
    let (_, created) = alice.api_at(&before_at, "POST", "/keys", Some(json!({"name": "web"})));
    let old_key = created["apiKey"].as_str().unwrap().to_owned();
    let roll = format!("/keys/{}/roll", created["keyId"].as_str().unwrap());
    let (status, rolled) = alice.api_at(&before_at, "POST", &roll, Some(json!({"graceHours": 2})));
    assert_eq!(status, 201, "{rolled}");
    let new_key = rolled["apiKey"].as_str().unwrap().to_owned();
    let (status, publishable) = alice.api_at(
        &before_at,
        "POST",
        "/keys",
        Some(
            json!({"name": "shop", "kind": "publishable", "origins": [SHOP],
                    "perIpMinute": 30, "maxPerMinute": 50, "maxPerDay": 5000}),
        ),
    );
    assert_eq!(status, 201, "{publishable}");
    let shop_key = publishable["apiKey"].as_str().unwrap().to_owned();
    // A paid top-up of 5.00, 2.00 refunded.
    let (status, started) = alice.api_at(
        &before_at,
        "POST",
        "/topups",
        Some(json!({"amount": "5.00"})),
    );
    assert_eq!(status, 201, "{started}");
    let session = started["sessionId"].as_str().unwrap().to_owned();
    let paid = alice.request(
        "POST",
        started["url"].as_str().unwrap(),
        Some(("application/x-www-form-urlencoded", String::new())),
        &[],
    );
    assert_eq!(paid.status, 303);
    let refunded = stripe.post("/test/refund", json!({"session": session, "amount": 200}));
    assert_eq!(refunded["status"], 200, "{refunded}");
    let (_, alice_me) = alice.api_at(&before_at, "GET", "/me", None);
    assert_eq!(alice_me["balance"], json!(3.028), "{alice_me}");
    assert_eq!(alice_me["identities"].as_array().unwrap().len(), 2);

    // Bob: provider 3, one key, a key revoked.
    let mut bob = Browser::new();
    bob.sign_in_at(&before_at, "p3", "bob");
    let (_, bob_key) = bob.api_at(&before_at, "POST", "/keys", Some(json!({"name": "bob"})));
    let bob_key = bob_key["apiKey"].as_str().unwrap().to_owned();
    let (_, gone) = bob.api_at(&before_at, "POST", "/keys", Some(json!({"name": "gone"})));
    let (status, _) = bob.api_at(
        &before_at,
        "DELETE",
        &format!("/keys/{}", gone["keyId"].as_str().unwrap()),
        None,
    );
    assert_eq!(status, 200);
    let gone_key = gone["apiKey"].as_str().unwrap().to_owned();

    // The operator's customer, made with the CLI.
    let carol = cli(&on_file, &["account", "create", "--name", "carol"]);
    let carol_id = carol["accountId"].as_str().unwrap();
    cli(&on_file, &["account", "topup", carol_id, "--usd", "7"]);
    cli(
        &on_file,
        &["account", "limits", carol_id, "--per-day", "500"],
    );

    // Alice's keys used: the old one 3 times, the new one 5 (a lookup and a bulk of 4).
    let client = server.client();
    for _ in 0..3 {
        assert_eq!(client.lookup(&old_key).0, 200);
    }
    assert_eq!(client.lookup(&new_key).0, 200);
    let bulk = json!({"apiKey": new_key, "records": [
        {"postalCode": "90210", "countryCode": "US"}, {"postalCode": "10001", "countryCode": "US"},
        {"postalCode": "99999", "countryCode": "US"}, {"postalCode": "10115", "countryCode": "DE"},
    ]});
    assert_eq!(client.post_with("/api/validate-bulk", &bulk, &[]).0, 200);
    crate::usage_per_key::keys_counting(&mut alice, &before_at, &[3, 5, 0]);

    // What each customer sees before the move.
    let seen = |browser: &mut Browser, at: &str| -> Vec<Value> {
        ["/me", "/keys", "/audit", "/topups", "/ledger", "/usage"]
            .iter()
            .map(|path| {
                let (status, body) = browser.api_at(at, "GET", path, None);
                assert_eq!(status, 200, "{path}: {body}");
                body
            })
            .collect()
    };
    let alice_before = seen(&mut alice, &before_at);
    let bob_before = seen(&mut bob, &before_at);
    server.stop("TERM");
    // Alice's, Bob's, Carol's and the account `postal serve` made on the new file.
    let listed = cli(&on_file, &["account", "list"]);
    assert_eq!(listed["accounts"].as_array().unwrap().len(), 4, "{listed}");
    let expected_tables = file_counts(&file);

    // The move.
    let printed = cli_text(
        &on_ledger,
        &["ledger", "migrate", "--from", file.to_str().unwrap()],
    );
    eprintln!("ledger migrate: {printed}");
    let migrated: Value = serde_json::from_str(&printed).unwrap();
    assert_eq!(migrated["tables"], expected_tables);
    assert_eq!(
        (
            &migrated["accounts"],
            &migrated["keys"],
            &migrated["fileOk"],
            &migrated["ledgerOk"]
        ),
        (&json!(4), &json!(7), &json!(true), &json!(true)),
        "{migrated}"
    );
    assert_eq!(migrated["entries"], expected_tables["ledger"]);
    for (table, rows) in [
        ("oidc_providers", 3),
        ("identities", 3),
        ("payment_settings", 1),
        ("topups", 1),
    ] {
        assert_eq!(migrated["tables"][table], rows, "{table}: {migrated}");
    }
    assert_eq!(cli(&on_ledger, &["account", "list"]), listed);

    // A node on the ledger, where the file's server was.
    let node = serve_on(&node_db, node_port, &["--ledger", &url]);
    stripe.post(
        "/test/config",
        json!({"webhook": format!("{after_at}/account/stripe/webhook")}),
    );
    // The providers are offered; sessions did not move: signed out.
    let page = Browser::new().get(&format!("{after_at}/account"));
    for name in ["p1", "p2", "p3"] {
        assert!(
            page.body.contains(&format!("/account/signin/{name}")),
            "{}",
            page.body
        );
    }
    alice.share_session(&before_at, &after_at);
    assert_eq!(alice.api_at(&after_at, "GET", "/me", None).0, 401);

    // The same identities sign in to the same accounts, which hold what they held.
    let mut alice = Browser::new();
    alice.sign_in_at(&after_at, "p2", "alice-at-2");
    let alice_after = seen(&mut alice, &after_at);
    let mut bob = Browser::new();
    bob.sign_in_at(&after_at, "p3", "bob");
    let bob_after = seen(&mut bob, &after_at);
    for (before, after) in [(&alice_before, &alice_after), (&bob_before, &bob_after)] {
        let (me_before, me_after) = (&before[0], &after[0]);
        for field in ["accountId", "balance", "identities", "limits"] {
            assert_eq!(me_after[field], me_before[field], "{field}: {me_after}");
        }
        // Keys (the rolled key's `expiresAt` too, each key's last use and queries),
        // top-ups, ledger and usage as before.
        assert_eq!(after[1], before[1]);
        assert_eq!(after[3], before[3]);
        assert_eq!(after[4], before[4]);
        assert_eq!(after[5], before[5]);
        // Every line of the audit log, with the new sign-in's lines (if any) above them.
        let (lines_before, lines_after) = (
            before[2]["entries"].as_array().unwrap(),
            after[2]["entries"].as_array().unwrap(),
        );
        assert!(
            lines_after.ends_with(lines_before),
            "{lines_before:?} {lines_after:?}"
        );
    }
    assert!(alice_before[3]["topups"][0]["status"] == "paid");
    let mut alice_first = Browser::new();
    alice_first.sign_in_at(&after_at, "p1", "alice");
    assert_eq!(
        alice_first.api_at(&after_at, "GET", "/me", None).1["accountId"],
        alice_before[0]["accountId"]
    );
    // No account was made by signing in again.
    assert_eq!(cli(&on_ledger, &["account", "list"]), listed);

    // Every live key answers (the publishable one from its origin); the revoked one not.
    let client = node.client();
    for key in [
        &old_key,
        &new_key,
        &bob_key,
        carol["apiKey"].as_str().unwrap(),
    ] {
        assert_eq!(client.lookup(key).0, 200, "{}", node.log());
    }
    let from_shop = client.post_with(
        "/api/lookup",
        &json!({"apiKey": shop_key, "zipcode": "90210"}),
        &[("origin", SHOP)],
    );
    assert_eq!(from_shop.0, 200, "{}", from_shop.2);
    assert_eq!(client.lookup(&gone_key).0, 401);

    // A refund delivered after the move finds its top-up on the ledger.
    let refunded = stripe.post("/test/refund", json!({"session": session, "amount": 100}));
    assert_eq!(
        serde_json::from_str::<Value>(refunded["body"].as_str().unwrap()).unwrap(),
        json!({"received": true, "outcome": "refund taken back: 1 USD, shortfall 0 USD"})
    );

    // New rows get new ids: a new customer, a key, a top-up, audit lines.
    let mut dave = Browser::new();
    dave.sign_in_at(&after_at, "p1", "dave");
    let (_, dave_me) = dave.api_at(&after_at, "GET", "/me", None);
    assert_eq!(dave_me["balance"], json!(0.028));
    let (status, dave_key) = dave.api_at(&after_at, "POST", "/keys", Some(json!({"name": "d"})));
    assert_eq!(status, 201, "{dave_key}");
    let (status, topup) = dave.api_at(
        &after_at,
        "POST",
        "/topups",
        Some(json!({"amount": "5.00"})),
    );
    assert_eq!(status, 201, "{topup}");
    assert_eq!(client.lookup(dave_key["apiKey"].as_str().unwrap()).0, 200);
    drop(node);
    let verified = cli(&on_ledger, &["ledger", "verify"]);
    assert_eq!(verified["ok"], true, "{verified}");
}
