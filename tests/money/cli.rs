use serde_json::{Value, json};

use crate::helpers::TestDb;

/// The object's keys, sorted.
fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .expect("a JSON object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    keys
}

#[test]
fn account_create_prints_ids_a_key_and_the_free_grant() {
    let db = TestDb::new();
    let run = db.postal(&["account", "create", "--name", "Acme GmbH"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let json = run.json();
    assert_eq!(keys(&json), ["accountId", "apiKey", "balance", "keyId"]);
    assert!(json["accountId"].as_str().unwrap().starts_with("acct_"));
    assert!(json["keyId"].as_str().unwrap().starts_with("key_"));
    assert!(json["apiKey"].as_str().unwrap().starts_with("sk_"));
    assert!(run.stdout.contains("\"balance\":0.028"), "{}", run.stdout);
    // The key is not stored, only its hash.
    let stored: i64 = db
        .conn()
        .query_row(
            "SELECT count(*) FROM api_keys WHERE key_hash = ?1",
            [&postal::domain::api_key::hash_presented_key(json["apiKey"].as_str().unwrap())[..]],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stored, 1);
}

#[test]
fn account_show_prints_name_balance_keys_and_limits() {
    let db = TestDb::new();
    let created = db.postal(&["account", "create", "--name", "Acme"]).json();
    let account_id = created["accountId"].as_str().unwrap();
    let run = db.postal(&["account", "show", account_id]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let json = run.json();
    assert_eq!(
        keys(&json),
        ["accountId", "balance", "keys", "name", "rateLimits"]
    );
    assert_eq!(json["accountId"], created["accountId"]);
    assert_eq!(json["name"], "Acme");
    assert_eq!(json["balance"], json!(0.028));
    assert_eq!(
        json["rateLimits"],
        json!({"perMinute": null, "perHour": null, "perDay": null})
    );
    let keys_shown = json["keys"].as_array().unwrap();
    assert_eq!(keys_shown.len(), 1);
    assert_eq!(keys(&keys_shown[0]), ["createdAt", "keyId", "revoked"]);
    assert_eq!(keys_shown[0]["keyId"], created["keyId"]);
    assert_eq!(keys_shown[0]["revoked"], false);
    let created_at = keys_shown[0]["createdAt"].as_str().unwrap();
    assert_eq!(
        created_at.len(),
        "2026-11-22T00:03:00Z".len(),
        "{created_at}"
    );
    assert!(created_at.ends_with('Z'));

    let unnamed = db.create_account();
    assert_eq!(
        db.postal(&["account", "show", &unnamed.account_id]).json()["name"],
        Value::Null
    );
}

#[test]
fn topup_credits_in_full_and_prints_the_exact_balance() {
    let db = TestDb::new();
    let account = db.create_account();
    let run = db.postal(&["account", "topup", &account.account_id, "--usd", "5.00"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        format!(
            "{{\"accountId\":\"{}\",\"balance\":5.028}}\n",
            account.account_id
        )
    );
    let run = db.postal(&[
        "account",
        "topup",
        &account.account_id,
        "--usd",
        "12.345678",
    ]);
    assert_eq!(run.json()["balance"], json!(17.373678));
}

#[test]
fn topup_below_five_dollars_is_a_usage_error() {
    let db = TestDb::new();
    let account = db.create_account();
    for amount in ["4.999999", "0", "-5", "abc", "5.0000001"] {
        let run = db.postal(&["account", "topup", &account.account_id, "--usd", amount]);
        assert_eq!(run.code, 2, "{amount}: {}", run.stderr);
        assert!(run.stdout.is_empty());
        assert!(!run.stderr.is_empty());
    }
    assert_eq!(db.balance(&account.account_id).get(), 28_000);
}

#[test]
fn adjust_moves_the_balance_both_ways_but_never_below_zero() {
    let db = TestDb::new();
    let account = db.create_account();
    let run = db.postal(&[
        "account",
        "adjust",
        &account.account_id,
        "--usd",
        "-0.000028",
        "--reason",
        "test",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(keys(&run.json()), ["accountId", "balance"]);
    assert_eq!(run.json()["balance"], json!(0.027972));
    let run = db.postal(&[
        "account",
        "adjust",
        &account.account_id,
        "--usd",
        "4.972028",
        "--reason",
        "goodwill",
    ]);
    // Whole dollars print as the API prints them: `5.0` (docs/money.md, Amounts).
    assert_eq!(run.json()["balance"], json!(5.0));
    assert!(run.stdout.contains("\"balance\":5.0}"), "{}", run.stdout);

    let run = db.postal(&[
        "account",
        "adjust",
        &account.account_id,
        "--usd=-5.000001",
        "--reason",
        "too much",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let run = db.postal(&["account", "adjust", &account.account_id, "--usd", "-1"]);
    assert_eq!(run.code, 2, "a reason is required");
    let run = db.postal(&[
        "account",
        "adjust",
        &account.account_id,
        "--usd",
        "-5",
        "--reason",
        "all of it",
    ]);
    assert_eq!(run.json()["balance"], json!(0.0));
    db.assert_ledger_ok();
}

#[test]
fn limits_set_keep_show_and_switch_off() {
    let db = TestDb::new();
    let account = db.create_account();
    let id = account.account_id.as_str();
    let run = db.postal(&[
        "account",
        "limits",
        id,
        "--per-minute",
        "60",
        "--per-day",
        "10000",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.json(),
        json!({"perMinute": 60, "perHour": null, "perDay": 10000})
    );
    // Windows not given keep their limits.
    let run = db.postal(&["account", "limits", id, "--per-hour", "1000"]);
    assert_eq!(
        run.json(),
        json!({"perMinute": 60, "perHour": 1000, "perDay": 10000})
    );
    let run = db.postal(&["account", "limits", id]);
    assert_eq!(
        run.json(),
        json!({"perMinute": 60, "perHour": 1000, "perDay": 10000})
    );
    assert_eq!(
        db.postal(&["account", "show", id]).json()["rateLimits"],
        run.json()
    );
    let run = db.postal(&["account", "limits", id, "--off"]);
    assert_eq!(
        run.json(),
        json!({"perMinute": null, "perHour": null, "perDay": null})
    );
    assert_eq!(
        db.postal(&["account", "limits", id, "--per-day", "0"]).code,
        2
    );
    assert_eq!(
        db.postal(&["account", "limits", id, "--off", "--per-day", "5"])
            .code,
        2
    );
}

#[test]
fn key_create_and_revoke() {
    let db = TestDb::new();
    let account = db.create_account();
    let run = db.postal(&["key", "create", &account.account_id]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let created = run.json();
    assert_eq!(keys(&created), ["apiKey", "keyId"]);
    assert!(created["apiKey"].as_str().unwrap().starts_with("sk_"));
    assert!(db.caller(created["apiKey"].as_str().unwrap()).is_some());

    let key_id = created["keyId"].as_str().unwrap();
    let run = db.postal(&["key", "revoke", key_id]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json(), json!({"keyId": key_id, "revoked": true}));
    assert!(db.caller(created["apiKey"].as_str().unwrap()).is_none());
    assert!(db.caller(&account.api_key).is_some());
    // Again: still revoked, not an error.
    assert_eq!(db.postal(&["key", "revoke", key_id]).code, 0);

    let shown = db.postal(&["account", "show", &account.account_id]).json();
    let revoked: Vec<bool> = shown["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["revoked"].as_bool().unwrap())
        .collect();
    assert_eq!(revoked, [false, true]);
}

#[test]
fn unknown_accounts_and_keys_are_usage_errors() {
    let db = TestDb::new();
    for args in [
        &["account", "show", "acct_nope"][..],
        &["account", "topup", "acct_nope", "--usd", "5"],
        &[
            "account",
            "adjust",
            "acct_nope",
            "--usd",
            "1",
            "--reason",
            "x",
        ],
        &["account", "limits", "acct_nope", "--per-day", "5"],
        &["key", "create", "acct_nope"],
        &["key", "revoke", "key_nope"],
        &["account", "frobnicate"],
    ] {
        let run = db.postal(args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}");
        assert!(!run.stderr.is_empty(), "{args:?}");
    }
}

#[test]
fn ledger_verify_counts_accounts_and_entries() {
    let db = TestDb::new();
    let run = db.postal(&["ledger", "verify"]);
    assert_eq!(run.json(), json!({"accounts": 0, "entries": 0, "ok": true}));
    let account = db.create_account();
    db.create_account();
    db.postal(&["account", "topup", &account.account_id, "--usd", "5"]);
    let run = db.postal(&["ledger", "verify"]);
    assert_eq!(run.code, 0);
    assert_eq!(run.json(), json!({"accounts": 2, "entries": 3, "ok": true}));
}

#[test]
fn the_database_defaults_to_the_postal_db_variable() {
    let db = TestDb::new();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_postal"))
        .args(["account", "create"])
        .env("POSTAL_DB", &db.path)
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(
        db.postal(&["ledger", "verify"]).json()["accounts"],
        json!(1)
    );
}

#[test]
fn a_publishable_key_is_created_with_its_origins_and_per_ip_limit() {
    let db = TestDb::new();
    let account = db.create_account();
    let run = db.postal(&[
        "key",
        "create",
        &account.account_id,
        "--publishable",
        "--origin",
        "https://Shop.Example:443",
        "--origin",
        "http://*.shop.example:8080",
        "--per-ip-minute",
        "30",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let created = run.json();
    assert_eq!(
        keys(&created),
        ["apiKey", "keyId", "kind", "origins", "perIpMinute"]
    );
    assert_eq!(created["kind"], "publishable");
    assert_eq!(
        created["origins"],
        json!(["https://shop.example", "http://*.shop.example:8080"])
    );
    assert_eq!(created["perIpMinute"], 30);
    let api_key = created["apiKey"].as_str().unwrap();
    assert!(
        api_key.starts_with("pub_") && api_key.len() == 4 + 32,
        "{api_key}"
    );
    assert!(db.caller(api_key).is_some());
    let stored: (String, String, i64) = db
        .conn()
        .query_row(
            "SELECT kind, origins, per_ip_minute FROM api_keys WHERE public_id = ?1",
            [created["keyId"].as_str().unwrap()],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(
        stored,
        (
            "publishable".to_owned(),
            "https://shop.example\nhttp://*.shop.example:8080".to_owned(),
            30
        )
    );

    // Without --per-ip-minute: 60. `key list` shows each key's kind and rules.
    let second = db
        .postal(&[
            "key",
            "create",
            &account.account_id,
            "--publishable",
            "--origin",
            "http://127.0.0.1:8000",
        ])
        .json();
    assert_eq!(second["perIpMinute"], 60);
    let listed = db.postal(&["key", "list", &account.account_id]).json();
    let listed = listed["keys"].as_array().unwrap();
    assert_eq!(listed.len(), 3);
    assert_eq!(
        keys(&listed[0]),
        [
            "createdAt",
            "keyId",
            "kind",
            "lastUsedAt",
            "queriesLast30Days",
            "revoked",
            "revokedAt"
        ]
    );
    assert_eq!(
        (&listed[0]["lastUsedAt"], &listed[0]["queriesLast30Days"]),
        (&Value::Null, &json!(0))
    );
    assert_eq!(listed[0]["kind"], "secret");
    assert_eq!(listed[1]["kind"], "publishable");
    assert_eq!(listed[1]["origins"], created["origins"]);
    assert_eq!(listed[1]["perIpMinute"], 30);
    assert_eq!(listed[2]["origins"], json!(["http://127.0.0.1:8000"]));
    assert_eq!(listed[2]["perIpMinute"], 60);
}

#[test]
fn a_publishable_key_without_valid_origins_is_refused_and_nothing_is_stored() {
    let db = TestDb::new();
    let account = db.create_account();
    let id = account.account_id.as_str();
    let cases: [(&[&str], &str); 6] = [
        (&["--publishable"], "--origin <ORIGIN>"),
        (&["--origin", "https://shop.example"], "--publishable"),
        (&["--per-ip-minute", "5"], "--publishable"),
        (
            &["--publishable", "--origin", "shop.example"],
            "invalid origin \"shop.example\": the scheme must be http:// or https://",
        ),
        (
            &["--publishable", "--origin", "https://shop.example/checkout"],
            "an origin has no path, query or fragment",
        ),
        (
            &[
                "--publishable",
                "--origin",
                "https://a.example",
                "--per-ip-minute",
                "0",
            ],
            "--per-ip-minute",
        ),
    ];
    refused_and_not_stored(&db, id, cases.map(|(extra, says)| (vec![extra], says)));
}

/// Each `key create ACCOUNT` with `args` (pieces joined) is exit 2 saying `says`, prints
/// nothing on stdout, and stores no key: the account keeps only its first one.
fn refused_and_not_stored<'a>(
    db: &TestDb,
    account: &'a str,
    cases: impl IntoIterator<Item = (Vec<&'a [&'a str]>, &'a str)>,
) {
    for (pieces, says) in cases {
        let mut args = vec!["key", "create", account];
        for piece in pieces {
            args.extend_from_slice(piece);
        }
        let run = db.postal(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
    }
    let stored: i64 = db
        .conn()
        .query_row("SELECT count(*) FROM api_keys", [], |r| r.get(0))
        .unwrap();
    assert_eq!(stored, 1, "only the account's first key");
}

#[test]
fn a_publishable_key_has_a_budget_over_every_ip_when_asked() {
    let db = TestDb::new();
    let account = db.create_account();
    let run = db.postal(&[
        "key",
        "create",
        &account.account_id,
        "--publishable",
        "--origin",
        "https://shop.example",
        "--max-per-minute",
        "100",
        "--max-per-day",
        "5000",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let created = run.json();
    assert_eq!(
        keys(&created),
        [
            "apiKey",
            "keyId",
            "kind",
            "maxPerDay",
            "maxPerMinute",
            "origins",
            "perIpMinute"
        ]
    );
    assert_eq!(
        (&created["maxPerMinute"], &created["maxPerDay"]),
        (&json!(100), &json!(5000))
    );
    let stored: (Option<i64>, Option<i64>) = db
        .conn()
        .query_row(
            "SELECT max_per_minute, max_per_day FROM api_keys WHERE public_id = ?1",
            [created["keyId"].as_str().unwrap()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(stored, (Some(100), Some(5000)));
    // One of the two; `key list` shows what is set.
    db.postal(&[
        "key",
        "create",
        &account.account_id,
        "--publishable",
        "--origin",
        "https://shop.example",
        "--max-per-day",
        "7",
    ])
    .json();
    let listed = db.postal(&["key", "list", &account.account_id]).json();
    let listed = listed["keys"].as_array().unwrap();
    assert_eq!(listed[1]["maxPerMinute"], 100);
    assert_eq!(listed[1]["maxPerDay"], 5000);
    assert_eq!(listed[2].get("maxPerMinute"), None);
    assert_eq!(listed[2]["maxPerDay"], 7);
}

#[test]
fn a_budget_of_zero_or_without_publishable_is_refused_and_nothing_is_stored() {
    let db = TestDb::new();
    let account = db.create_account();
    let id = account.account_id.as_str();
    let publishable = ["--publishable", "--origin", "https://a.example"];
    let cases: [(&[&str], &[&str], &str); 6] = [
        (&[], &["--max-per-minute", "5"], "--publishable"),
        (&[], &["--max-per-day", "5"], "--publishable"),
        (&publishable, &["--max-per-minute", "0"], "--max-per-minute"),
        (&publishable, &["--max-per-day", "0"], "--max-per-day"),
        (&publishable, &["--max-per-day=-3"], "--max-per-day"),
        (
            &publishable,
            &["--max-per-day", "2147483648"],
            "a publishable key's limits and budgets are at most 2147483647",
        ),
    ];
    refused_and_not_stored(
        &db,
        id,
        cases.map(|(first, extra, says)| (vec![first, extra], says)),
    );
}
