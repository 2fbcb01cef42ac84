use std::collections::BTreeSet;
use std::process::Command;

use postal::db::pg::{self, from_file::FILE_TABLES, from_file::Fate};
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

/// The tables and columns of a new file (as `db::open` makes it) against `ledger migrate`'s
/// list and a migrated ledger: every table of the file is moved or not moved with a reason,
/// every column of a moved table (but those it leaves with a reason) has a column in the
/// ledger of a type its values bind to, and the list names nothing the file lacks. So the
/// next table or column added to `schema.sql` fails here until it is given a place.
#[test]
fn ledger_migrate_leaves_no_table_or_column_of_the_file_behind() {
    let _one = one_at_a_time();
    let Some(pg) = PgCluster::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = postal::db::open(&dir.path().join("new.db")).unwrap();
    let file_columns: Vec<(String, String, String)> = file
        .prepare(
            "SELECT m.name, p.name, upper(p.type) FROM sqlite_master m, pragma_table_info(m.name) p
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
             ORDER BY m.name, p.cid",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    let file_tables: BTreeSet<&str> = file_columns.iter().map(|(t, _, _)| t.as_str()).collect();

    // The ledger as the CLI migrates it.
    postal(&pg.url(), &["ledger", "verify"]).json();
    let ledger_columns: Vec<(String, String, String)> =
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let ledger = pg::LedgerConfig::parse(&pg.url(), None).unwrap();
                let client = pg::connect(&ledger).await.unwrap();
                client
                    .query(
                        "SELECT table_name::text, column_name::text, data_type::text
                     FROM information_schema.columns WHERE table_schema = current_schema()",
                        &[],
                    )
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| (r.get(0), r.get(1), r.get(2)))
                    .collect()
            });

    let mut problems = Vec::new();
    for table in &file_tables {
        if !FILE_TABLES.iter().any(|(listed, _)| listed == table) {
            problems.push(format!(
                "the file's table {table} is neither moved nor not moved (from_file::FILE_TABLES)"
            ));
        }
    }
    for (table, fate) in FILE_TABLES {
        if !file_tables.contains(table) {
            problems.push(format!("FILE_TABLES names {table}, which a new file lacks"));
        }
        let Fate::Moved { except } = fate else {
            continue;
        };
        for (column, _) in *except {
            if !file_columns
                .iter()
                .any(|(t, c, _)| t == table && c == column)
            {
                problems.push(format!(
                    "{table}.{column} is left behind but a new file lacks it"
                ));
            }
        }
        for (_, column, file_type) in file_columns.iter().filter(|(t, _, _)| t == table) {
            if except.iter().any(|(c, _)| c == column) {
                continue;
            }
            let target = ledger_columns
                .iter()
                .find(|(t, c, _)| t == table && c == column)
                .map(|(_, _, ty)| ty.as_str());
            let fits = match (file_type.as_str(), target) {
                (_, None) => {
                    problems.push(format!(
                        "{table}.{column} is moved but the ledger has no such column \
                         (add a migration to db/pg/mod.rs MIGRATIONS)"
                    ));
                    continue;
                }
                ("INTEGER", Some(ty)) => ["bigint", "integer", "smallint", "boolean"].contains(&ty),
                ("TEXT", Some(ty)) => ty == "text",
                ("BLOB", Some(ty)) => ty == "bytea",
                ("REAL", Some(ty)) => ty == "double precision",
                _ => false,
            };
            if !fits {
                problems.push(format!(
                    "{table}.{column}: the file's {file_type} cannot go into the ledger's {target:?}"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
