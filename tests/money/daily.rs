//! The admin's daily commands: `account list`, `ledger show`, `usage`, `key list`.

use postal::domain::charge::Endpoint;
use serde_json::{Value, json};

use crate::helpers::{TestAccount, TestDb};

/// Charges `queries` on `endpoint` through the real billing writer.
fn charge(db: &TestDb, account: &TestAccount, endpoint: Endpoint, queries: u64) {
    let caller = db.caller(&account.api_key).unwrap();
    let billing = db.billing();
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(billing.charge(caller, queries, endpoint))
        .unwrap();
    billing.shutdown();
}

fn today() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let out = std::process::Command::new("date")
        .args(["-u", "-d", &format!("@{now}"), "+%Y-%m-%d"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn account_list_shows_every_account_with_keys_limits_and_queries_today() {
    let db = TestDb::new();
    let shop = db.create_account();
    let other = db.create_account();
    assert_eq!(db.postal(&["key", "create", &shop.account_id]).code, 0);
    assert_eq!(db.postal(&["key", "revoke", &other.key_id]).code, 0);
    assert_eq!(
        db.postal(&["account", "limits", &shop.account_id, "--per-day", "500"])
            .code,
        0
    );
    charge(&db, &shop, Endpoint::Lookup, 3);
    charge(&db, &shop, Endpoint::ValidateBulk, 10);

    let run = db.postal(&["account", "list"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.json(),
        json!({"accounts": [
            {"accountId": shop.account_id, "name": null, "balance": 0.027636, "activeKeys": 2,
             "rateLimits": {"perMinute": null, "perHour": null, "perDay": 500},
             "queriesToday": 13},
            {"accountId": other.account_id, "name": null, "balance": 0.028, "activeKeys": 0,
             "rateLimits": {"perMinute": null, "perHour": null, "perDay": null},
             "queriesToday": 0},
        ]})
    );
}

#[test]
fn account_list_of_an_empty_database_is_an_empty_list() {
    let db = TestDb::new();
    assert_eq!(
        db.postal(&["account", "list"]).json(),
        json!({"accounts": []})
    );
}

#[test]
fn ledger_show_lists_the_grant_charges_and_adjustments_in_order() {
    let db = TestDb::new();
    let account = db.create_account();
    charge(&db, &account, Endpoint::Lookup, 2);
    let run = db.postal(&[
        "account",
        "adjust",
        &account.account_id,
        "--usd",
        "-0.000944",
        "--reason",
        "refund reversal",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let run = db.postal(&["ledger", "show", &account.account_id]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let json = run.json();
    assert_eq!(json["accountId"], json!(account.account_id));
    let entries = json["entries"].as_array().unwrap();
    let without_time: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut e = e.clone();
            let at = e.as_object_mut().unwrap().remove("at").unwrap();
            assert!(at.as_str().unwrap().starts_with(&today()), "{at}");
            e
        })
        .collect();
    assert_eq!(
        without_time,
        vec![
            json!({"kind": "grant", "amount": 0.028, "balanceAfter": 0.028, "queries": 0,
                   "endpoint": null, "note": "free 1,000 queries"}),
            json!({"kind": "charge", "amount": -0.000056, "balanceAfter": 0.027944,
                   "queries": 2, "endpoint": "lookup", "note": null}),
            json!({"kind": "adjustment", "amount": -0.000944, "balanceAfter": 0.027,
                   "queries": 0, "endpoint": null, "note": "refund reversal"}),
        ]
    );

    let csv = db.postal(&["ledger", "show", &account.account_id, "--format", "csv"]);
    assert_eq!(csv.code, 0, "{}", csv.stderr);
    let lines: Vec<&str> = csv.stdout.lines().collect();
    assert_eq!(
        lines[0],
        "at,kind,amount,balanceAfter,queries,endpoint,note"
    );
    assert_eq!(lines.len(), 4, "{}", csv.stdout);
    assert!(
        lines[2].ends_with(",charge,-0.000056,0.027944,2,lookup,"),
        "{}",
        lines[2]
    );
    assert!(
        lines[3].ends_with(",adjustment,-0.000944,0.027,0,,refund reversal"),
        "{}",
        lines[3]
    );
}

#[test]
fn ledger_show_since_a_date_keeps_only_the_entries_from_that_day_on() {
    let db = TestDb::new();
    let account = db.create_account();
    let all = db.postal(&[
        "ledger",
        "show",
        &account.account_id,
        "--since",
        "2000-01-01",
    ]);
    assert_eq!(all.json()["entries"].as_array().unwrap().len(), 1);
    let future = db.postal(&[
        "ledger",
        "show",
        &account.account_id,
        "--since",
        "2999-12-31",
    ]);
    assert_eq!(future.json()["entries"], json!([]));
}

#[test]
fn ledger_show_rejects_an_unknown_account_or_a_bad_date_with_exit_2() {
    let db = TestDb::new();
    let account = db.create_account();
    let run = db.postal(&["ledger", "show", "acct_nope"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stdout.is_empty());
    for date in ["yesterday", "2026-02-30", "22/11/2026"] {
        let run = db.postal(&["ledger", "show", &account.account_id, "--since", date]);
        assert_eq!(run.code, 2, "{date}: {}", run.stderr);
        assert!(run.stderr.contains("YYYY-MM-DD"), "{}", run.stderr);
    }
}

#[test]
fn usage_sums_queries_and_usd_per_day_account_and_endpoint() {
    let db = TestDb::new();
    let a = db.create_account();
    let b = db.create_account();
    charge(&db, &a, Endpoint::Lookup, 3);
    charge(&db, &a, Endpoint::Lookup, 4);
    charge(&db, &a, Endpoint::City, 1);
    charge(&db, &b, Endpoint::ValidateBulk, 100);

    let run = db.postal(&["usage", "--days", "1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let day = today();
    assert_eq!(
        run.json(),
        json!({"days": 1, "usage": [
            {"date": day, "accountId": a.account_id, "endpoint": "city", "queries": 1, "usd": 0.000028},
            {"date": day, "accountId": a.account_id, "endpoint": "lookup", "queries": 7, "usd": 0.000196},
            {"date": day, "accountId": b.account_id, "endpoint": "validate-bulk", "queries": 100, "usd": 0.0028},
        ]})
    );

    let csv = db.postal(&["usage", "--format", "csv"]);
    assert_eq!(
        csv.stdout,
        format!(
            "date,accountId,endpoint,queries,usd\n\
             {day},{a},city,1,0.000028\n\
             {day},{a},lookup,7,0.000196\n\
             {day},{b},validate-bulk,100,0.0028\n",
            a = a.account_id,
            b = b.account_id
        )
    );
    assert_eq!(db.postal(&["usage", "--days", "0"]).code, 2);
}

#[test]
fn usage_by_key_sums_each_keys_queries_and_key_list_says_when_each_was_last_used() {
    let db = TestDb::new();
    let a = db.create_account();
    let second = db.postal(&["key", "create", &a.account_id]).json();
    let staging = TestAccount {
        account_id: a.account_id.clone(),
        api_key: second["apiKey"].as_str().unwrap().to_owned(),
        key_id: second["keyId"].as_str().unwrap().to_owned(),
    };
    let b = db.create_account();
    charge(&db, &a, Endpoint::Lookup, 1);
    charge(&db, &a, Endpoint::Lookup, 2);
    charge(&db, &staging, Endpoint::Lookup, 1);
    charge(&db, &staging, Endpoint::ValidateBulk, 4);
    charge(&db, &b, Endpoint::City, 1);

    let day = today();
    let csv = db.postal(&["usage", "--by", "key", "--format", "csv", "--days", "1"]);
    assert_eq!(csv.code, 0, "{}", csv.stderr);
    assert_eq!(
        csv.stdout,
        format!(
            "date,accountId,keyId,endpoint,queries,usd\n\
             {day},{a},{prod},lookup,3,0.000084\n\
             {day},{a},{staging},lookup,1,0.000028\n\
             {day},{a},{staging},validate-bulk,4,0.000112\n\
             {day},{b},{b_key},city,1,0.000028\n",
            a = a.account_id,
            prod = a.key_id,
            staging = staging.key_id,
            b = b.account_id,
            b_key = b.key_id,
        )
    );
    // One account's only; the plain lines stay per account and endpoint.
    let run = db.postal(&["usage", "--account", &b.account_id]);
    assert_eq!(
        run.json(),
        json!({"days": 7, "usage": [
            {"date": day, "accountId": b.account_id, "endpoint": "city", "queries": 1, "usd": 0.000028},
        ]})
    );
    assert_eq!(db.postal(&["usage", "--account", "acct_nope"]).code, 2);

    let listed = db.postal(&["key", "list", &a.account_id]).json();
    let keys = listed["keys"].as_array().unwrap();
    let figures: Vec<(&Value, &Value)> = keys
        .iter()
        .map(|k| (&k["keyId"], &k["queriesLast30Days"]))
        .collect();
    assert_eq!(
        figures,
        [
            (&json!(a.key_id), &json!(3)),
            (&json!(staging.key_id), &json!(5))
        ]
    );
    for key in keys {
        let used = key["lastUsedAt"].as_str().unwrap();
        assert!(used.starts_with(&day) && used.ends_with(":00Z"), "{used}");
    }
    let other = db.postal(&["key", "list", &b.account_id]).json();
    assert_eq!(other["keys"][0]["queriesLast30Days"], json!(1));
}

#[test]
fn key_list_shows_public_ids_and_revocations_never_a_secret() {
    let db = TestDb::new();
    let account = db.create_account();
    let second = db.postal(&["key", "create", &account.account_id]).json();
    assert_eq!(db.postal(&["key", "revoke", &account.key_id]).code, 0);

    let run = db.postal(&["key", "list", &account.account_id]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for secret in ["sk_", "pub_", "pk_"] {
        assert!(!run.stdout.contains(secret), "{}", run.stdout);
    }
    let json = run.json();
    assert_eq!(json["accountId"], json!(account.account_id));
    let keys = json["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0]["keyId"], json!(account.key_id));
    assert_eq!(keys[0]["revoked"], json!(true));
    assert!(keys[0]["revokedAt"].as_str().unwrap().starts_with(&today()));
    assert_eq!(keys[1]["keyId"], second["keyId"]);
    assert_eq!(keys[1]["revoked"], json!(false));
    assert_eq!(keys[1]["revokedAt"], Value::Null);
    assert!(keys[1]["createdAt"].as_str().unwrap().ends_with('Z'));

    assert_eq!(db.postal(&["key", "list", "acct_nope"]).code, 2);
}
