use std::process::Command;

use serde_json::{Value, json};

use crate::helpers::{Node, PgCluster, assert_ledger_ok, one_at_a_time, postal};

/// `postal --db FILE args...` (single-file mode).
fn postal_file(file: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_postal"))
        .arg("--db")
        .arg(file)
        .args(args)
        .env_remove("POSTAL_LEDGER")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn ledger_migrate_moves_a_single_file_installation_and_both_sides_verify() {
    let _one = one_at_a_time();
    let Some(pg) = PgCluster::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("postal.db");
    let first = postal_file(&file, &["account", "create", "--name", "first"]);
    let second = postal_file(&file, &["account", "create"]);
    let account_id = first["accountId"].as_str().unwrap();
    postal_file(&file, &["account", "topup", account_id, "--usd", "5"]);
    postal_file(
        &file,
        &["account", "limits", account_id, "--per-minute", "100"],
    );
    let revoked = postal_file(&file, &["key", "create", account_id]);
    postal_file(
        &file,
        &["key", "revoke", revoked["keyId"].as_str().unwrap()],
    );
    let listed = postal_file(&file, &["account", "list"]);

    let migrated = postal(
        &pg.url(),
        &["ledger", "migrate", "--from", file.to_str().unwrap()],
    )
    .json();
    assert_eq!(migrated["accounts"], 2);
    assert_eq!(migrated["keys"], 3);
    assert_eq!(migrated["entries"], 3);
    assert_eq!(migrated["ledgerOk"], true);
    assert_eq!(postal_file(&file, &["ledger", "verify"])["ok"], true);
    assert_ledger_ok(&pg);
    assert_eq!(postal(&pg.url(), &["account", "list"]).json(), listed);

    // Into a ledger that holds accounts: refused.
    let again = postal(
        &pg.url(),
        &["ledger", "migrate", "--from", file.to_str().unwrap()],
    );
    assert_eq!(again.code, 2, "{}", again.stderr);

    // The moved keys answer on a node; the revoked one does not; new accounts get new ids.
    let node = Node::start(&pg.url());
    let client = node.client();
    assert_eq!(client.lookup(first["apiKey"].as_str().unwrap()).0, 200);
    assert_eq!(client.lookup(second["apiKey"].as_str().unwrap()).0, 200);
    assert_eq!(client.lookup(revoked["apiKey"].as_str().unwrap()).0, 401);
    let third = postal(&pg.url(), &["account", "create"]).json();
    assert_eq!(client.lookup(third["apiKey"].as_str().unwrap()).0, 200);
    drop(node);
    assert_ledger_ok(&pg);
}

#[test]
fn a_publishable_keys_budget_moves_to_the_ledger_and_each_node_holds_it() {
    let _one = one_at_a_time();
    let Some(pg) = PgCluster::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("postal.db");
    let shop = "https://shop.example";
    let created = postal_file(&file, &["account", "create"]);
    let account_id = created["accountId"].as_str().unwrap();
    let publishable = ["--publishable", "--origin", shop];
    let moved = postal_file(
        &file,
        &[
            &["key", "create", account_id][..],
            &publishable,
            &["--max-per-minute", "2"],
        ]
        .concat(),
    );
    let migrated = postal(
        &pg.url(),
        &["ledger", "migrate", "--from", file.to_str().unwrap()],
    )
    .json();
    assert_eq!(migrated["keys"], 2);
    // Moved from the file, or made on the ledger: each keeps its budget.
    let made = postal(
        &pg.url(),
        &[
            &["key", "create", account_id][..],
            &publishable,
            &["--max-per-day", "1"],
        ]
        .concat(),
    )
    .json();
    assert_eq!(made["maxPerDay"], 1);
    let listed = postal(&pg.url(), &["key", "list", account_id]).json();
    let budgets: Vec<(Value, Value)> = listed["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["maxPerMinute"].clone(), k["maxPerDay"].clone()))
        .collect();
    assert_eq!(
        budgets,
        [
            (Value::Null, Value::Null),
            (json!(2), Value::Null),
            (Value::Null, json!(1))
        ]
    );

    // A node loads them: the third request of the minute and the second of the day are
    // refused with the per-IP limit's text.
    let node = Node::start(&pg.url());
    let client = node.client();
    let lookup = |key: &Value| {
        let body = json!({"apiKey": key, "zipcode": "90210"});
        let (status, _, text) = client.post_with("/api/lookup", &body, &[("origin", shop)]);
        (
            status,
            serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
        )
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    if 60 - now % 60 < 10 {
        std::thread::sleep(std::time::Duration::from_secs(11));
    }
    assert_eq!(lookup(&moved["apiKey"]).0, 200, "{}", node.log());
    assert_eq!(lookup(&moved["apiKey"]).0, 200);
    let (status, refused) = lookup(&moved["apiKey"]);
    assert_eq!(
        (status, &refused["error"]),
        (429, &json!("Rate limit exceeded"))
    );
    assert_eq!(lookup(&made["apiKey"]).0, 200);
    assert_eq!(lookup(&made["apiKey"]).0, 429);
    drop(node);
    assert_ledger_ok(&pg);
}
