//! The ladder's tests: a file of each older version, opened, is a new file's.

use std::path::Path;

use rusqlite::Connection;

use super::super::{SCHEMA_VERSION, dataset, open, sqlite};
use crate::domain::api_key::Budget;

/// The schema of version 2 (before city search v3).
const SCHEMA_2: &str = include_str!("../../../tests/fixtures/schema-v2.sql");

#[test]
fn a_version_1_file_gets_the_dataset_generation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    // The version 1 schema: version 2's without its `dataset` table.
    Connection::open(&path)
        .unwrap()
        .execute_batch(&format!(
            "{SCHEMA_2}; DROP TABLE dataset; PRAGMA user_version = 1;"
        ))
        .unwrap();
    let conn = open(&path).unwrap();
    assert_eq!(dataset::generation(&conn).unwrap(), 0);
    assert_eq!(version(&conn), SCHEMA_VERSION);
}

/// Every row `sql` selects, each read by `row`.
fn rows<T>(
    conn: &Connection,
    sql: &str,
    row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Vec<T> {
    conn.prepare(sql)
        .unwrap()
        .query_map([], row)
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// The first column of every row `sql` selects.
fn names(conn: &Connection, sql: &str) -> Vec<String> {
    rows(conn, sql, |r| r.get(0))
}

/// The schema version `conn`'s file says it is.
fn version(conn: &Connection) -> i64 {
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

/// A new file at `path` taken back to an older version by `sql`, then opened (so
/// migrated) as a server would.
fn reopened(path: &Path, sql: &str) -> Connection {
    open(path).unwrap().execute_batch(sql).unwrap();
    open(path).unwrap()
}

/// A file of schema version 2 with `rows` in it, opened (so migrated) as a server would.
fn open_version_2(dir: &tempfile::TempDir, rows: &str) -> Connection {
    let path = dir.path().join("p.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch(&format!("{SCHEMA_2}; {rows}"))
        .unwrap();
    open(&path).unwrap()
}

#[test]
fn a_version_2_file_loses_the_unused_key_index_of_every_generation() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open_version_2(
        &dir,
        "CREATE INDEX postal_codes_by_key_g7 ON postal_codes (country, compact_key);
         INSERT INTO countries (code, name, postal_format, postal_regex, place_first, place_last)
             VALUES ('DE', 'Germany', '#####', '', 1, 2);",
    );
    let indexes = names(
        &conn,
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'postal_codes' ORDER BY name",
    );
    assert_eq!(indexes, ["postal_codes_by_place"]);
    assert_eq!(version(&conn), SCHEMA_VERSION);
    // The FTS5 index and its bounds are gone, the gazetteer is there, rows are kept.
    let tables = names(
        &conn,
        "SELECT name FROM sqlite_master WHERE name LIKE 'places%' OR name = 'gazetteer'",
    );
    assert_eq!(tables, ["gazetteer"]);
    let name: String = conn
        .query_row("SELECT name FROM countries WHERE code = 'DE'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(name, "Germany");
    // The same tables, indexes and triggers as a new file's.
    let schema = |conn: &Connection| -> Vec<(String, String)> {
        rows(
            conn,
            "SELECT type, name FROM sqlite_master ORDER BY type, name",
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    };
    let fresh = open(&dir.path().join("fresh.db")).unwrap();
    assert_eq!(schema(&conn), schema(&fresh));
}

#[test]
fn an_older_file_keeps_its_keys_as_secret_keys_with_the_columns_of_a_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open_version_2(
        &dir,
        "INSERT INTO accounts (id, public_id, balance, created_at) VALUES (1, 'acct_x', 5, 0);
         INSERT INTO api_keys (public_id, key_hash, account_id, created_at)
             VALUES ('key_x', zeroblob(32), 1, 0);",
    );
    let key: (String, Option<String>, Option<i64>) = conn
        .query_row(
            "SELECT kind, origins, per_ip_minute FROM api_keys WHERE public_id = 'key_x'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(key, ("secret".to_owned(), None, None));
    let columns = |conn: &Connection| -> Vec<(String, String, bool, Option<String>)> {
        rows(
            conn,
            "SELECT name, type, \"notnull\", dflt_value FROM pragma_table_info('api_keys')",
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
    };
    let fresh = open(&dir.path().join("fresh.db")).unwrap();
    assert_eq!(columns(&conn), columns(&fresh));
    // The migrated columns refuse what the new file's refuse.
    assert!(
        conn.execute("UPDATE api_keys SET kind = 'other'", [])
            .is_err()
    );
    assert!(
        conn.execute("UPDATE api_keys SET per_ip_minute = 0", [])
            .is_err()
    );
    assert!(
        conn.execute("UPDATE api_keys SET origins = ''", [])
            .is_err()
    );
}

/// What turns a new file into a version 12 file.
const WITHOUT_13: &str = "ALTER TABLE sessions DROP COLUMN provider; ALTER TABLE sessions DROP COLUMN issuer; ALTER TABLE sessions DROP COLUMN subject; ALTER TABLE sessions DROP COLUMN authenticated_at; ALTER TABLE sessions DROP COLUMN link_offer;
    ALTER TABLE signins DROP COLUMN purpose; ALTER TABLE signins DROP COLUMN session_hash;
    DROP TABLE disputes; DROP INDEX accounts_by_origin;
    ALTER TABLE accounts DROP COLUMN topups_frozen; ALTER TABLE accounts DROP COLUMN created_from;";

/// What turns a version 14 file into a version 13 file.
const WITHOUT_14: &str = "DROP TRIGGER alert_events_deliveries; DROP TRIGGER alerts_on_balance;
    DROP TRIGGER alerts_on_windows; DROP TRIGGER alerts_on_topup; DROP TRIGGER alerts_on_key;
    DROP TABLE alert_deliveries; DROP TABLE alert_events; DROP TABLE alert_settings;
    DROP TABLE mail_settings;";

#[test]
fn a_version_13_file_gets_the_alerts_of_a_new_file_and_decides_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v13.db");
    open(&path)
        .unwrap()
        .execute_batch(&format!(
            "{WITHOUT_14} PRAGMA user_version = 13;
             INSERT INTO accounts (id, public_id, balance, created_at) VALUES (1, 'acct_1', 5, 0);"
        ))
        .unwrap();
    let conn = open(&path).unwrap();
    assert_eq!(version(&conn), SCHEMA_VERSION);
    let fresh = open(&dir.path().join("fresh.db")).unwrap();
    let objects = "SELECT type, name, tbl_name, sql FROM sqlite_schema
                   WHERE name LIKE 'alert%' OR name LIKE 'mail%' ORDER BY name";
    let schema = |conn: &Connection| -> Vec<(String, String, String, Option<String>)> {
        rows(conn, objects, |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
    };
    assert_eq!(schema(&conn), schema(&fresh));
    assert_eq!(schema(&conn).len(), 12);
    // Its triggers decide: a threshold crossed by a charge is one event, the next charge
    // below it none, and a webhook gets a delivery of it.
    conn.execute_batch(
        "INSERT INTO alert_settings (account_id, balance_below, webhook_url, webhook_secret,
                                     updated_at)
             VALUES (1, 4, 'https://example.com/hook', 'whsec_x', 0);
         UPDATE accounts SET balance = 3 WHERE id = 1;
         UPDATE accounts SET balance = 2 WHERE id = 1;",
    )
    .unwrap();
    let events = rows(
        &conn,
        "SELECT e.type, e.balance, e.amount, d.channel, d.status FROM alert_events e
         JOIN alert_deliveries d ON d.event_id = e.id",
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
            ))
        },
    );
    assert_eq!(
        events,
        [(
            "balance.low".to_owned(),
            3,
            4,
            "webhook".to_owned(),
            "pending".to_owned()
        )]
    );
}

/// What turns a version 12 file into a version 11 file.
const WITHOUT_12: &str = "DROP TRIGGER accounts_inserted; DROP TRIGGER accounts_updated; DROP TRIGGER accounts_deleted; DROP TRIGGER api_keys_inserted; DROP TRIGGER api_keys_updated; DROP TRIGGER api_keys_deleted; DROP TRIGGER oidc_providers_inserted; DROP TRIGGER oidc_providers_updated; DROP TRIGGER oidc_providers_deleted; DROP TRIGGER payment_settings_inserted; DROP TRIGGER payment_settings_updated; DROP TRIGGER payment_settings_deleted;
    DROP TABLE books_version; DROP INDEX ledger_by_account;";

/// What turns a version 11 file into a version 10 file.
const WITHOUT_11: &str = "DROP TABLE usage_days; ALTER TABLE ledger DROP COLUMN key_id;";

/// What turns a version 10 file into a version 9 file.
const WITHOUT_10: &str = "ALTER TABLE oidc_providers DROP COLUMN kind;
    ALTER TABLE oidc_providers DROP COLUMN allowed;";

/// What turns a version 9 file into a version 8 file.
const WITHOUT_9: &str = "ALTER TABLE api_keys DROP COLUMN max_per_minute;
    ALTER TABLE api_keys DROP COLUMN max_per_day;";

/// What turns a version 8 file into a version 7 file.
const WITHOUT_8: &str = "DROP TABLE topups; DROP TABLE payment_settings;";

/// What turns a version 7 file into a version 6 file.
const WITHOUT_7: &str = "DROP TABLE oidc_providers; DROP TABLE identities; DROP TABLE sessions;
    DROP TABLE signins; DROP TABLE audit_log; ALTER TABLE api_keys DROP COLUMN name;
    ALTER TABLE api_keys DROP COLUMN hint;
    ALTER TABLE api_keys DROP COLUMN expires_at;";

#[test]
fn a_version_6_file_gets_the_dashboard_tables_and_key_names_of_a_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let old = reopened(
        &dir.path().join("old.db"),
        &format!(
            "{WITHOUT_14} {WITHOUT_13} {WITHOUT_12} {WITHOUT_11} {WITHOUT_10} {WITHOUT_9} {WITHOUT_8} {WITHOUT_7} PRAGMA user_version = 6;"
        ),
    );
    let new = open(&dir.path().join("new.db")).unwrap();
    let shape = |conn: &Connection| {
        names(
            conn,
            "SELECT m.name || ' ' || p.name || ' ' || p.type || ' ' || p.\"notnull\" || ' ' || p.pk
             FROM sqlite_master m, pragma_table_info(m.name) p
             WHERE m.type = 'table' ORDER BY 1",
        )
    };
    let migrated = shape(&old);
    assert_eq!(migrated, shape(&new));
    assert!(
        migrated.iter().any(|c| c == "sessions id_hash BLOB 1 1"),
        "{migrated:?}"
    );
    assert!(
        migrated.iter().any(|c| c == "api_keys hint TEXT 0 0"),
        "{migrated:?}"
    );
}

#[test]
fn a_version_7_file_gets_the_payment_tables_of_a_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let old = reopened(
        &dir.path().join("old.db"),
        &format!(
            "{WITHOUT_14} {WITHOUT_13} {WITHOUT_12} {WITHOUT_11} {WITHOUT_10} {WITHOUT_9} {WITHOUT_8} PRAGMA user_version = 7;"
        ),
    );
    let new = open(&dir.path().join("new.db")).unwrap();
    let schema = |conn: &Connection| -> Vec<(String, String)> {
        rows(
            conn,
            "SELECT name, sql FROM sqlite_master
             WHERE tbl_name IN ('topups', 'payment_settings') ORDER BY name",
            |r| {
                Ok((
                    r.get(0)?,
                    r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                ))
            },
        )
    };
    let migrated = schema(&old);
    // The same tables, indexes and constraints, written alike (the migration's text
    // is schema.sql's, indented).
    let squeezed = |entries: Vec<(String, String)>| -> Vec<(String, String)> {
        entries
            .into_iter()
            .map(|(n, sql)| (n, sql.split_whitespace().collect::<Vec<_>>().join(" ")))
            .collect()
    };
    // Two tables, four indexes, and the three triggers of version 12.
    assert_eq!(migrated.len(), 9, "{migrated:?}");
    assert_eq!(squeezed(migrated), squeezed(schema(&new)));
}

#[test]
fn a_version_10_file_gets_its_charges_summed_per_day_under_key_0_and_a_new_files_tables() {
    let dir = tempfile::tempdir().unwrap();
    // Two charges of account 1 on one day and one the next, a top-up, account 2's
    // charge: three days' rows of (account, day, endpoint), the top-up in none.
    let day = 20_000 * 86_400;
    let conn = reopened(
        &dir.path().join("v10.db"),
        &format!(
            "{WITHOUT_14} {WITHOUT_13} {WITHOUT_12} {WITHOUT_11} PRAGMA user_version = 10;
             INSERT INTO accounts (id, public_id, balance, created_at)
                 VALUES (1, 'acct_a', 1000, 0), (2, 'acct_b', 1000, 0);
             INSERT INTO ledger (account_id, at, kind, amount, balance_after, query_count,
                                 endpoint)
                 VALUES (1, {day}, 'topup', 1196, 1196, 0, NULL),
                        (1, {day} + 10, 'charge', -84, 1112, 3, 'lookup'),
                        (1, {day} + 99, 'charge', -28, 1084, 1, 'lookup'),
                        (1, {day} + 86400, 'charge', -84, 1000, 3, 'city'),
                        (2, {day} + 5, 'charge', -28, 972, 1, 'lookup');"
        ),
    );
    assert_eq!(version(&conn), SCHEMA_VERSION);
    let usage = rows(
        &conn,
        "SELECT account_id, day, key_id, endpoint, queries, charged, last_at
         FROM usage_days ORDER BY account_id, day",
        |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, i64>(5)?,
                r.get::<_, i64>(6)?,
            ))
        },
    );
    assert_eq!(
        usage,
        [
            (1, day, 0, "lookup".to_owned(), 4, 112, day + 99),
            (1, day + 86_400, 0, "city".to_owned(), 3, 84, day + 86_400),
            (2, day, 0, "lookup".to_owned(), 1, 28, day + 5),
        ]
    );
    // The ledger's columns and foreign keys, and usage_days written alike.
    let shape = |conn: &Connection| {
        names(
            conn,
            "SELECT 'column ' || name || ' ' || type || ' ' || \"notnull\" || ' ' || pk
                 FROM pragma_table_info('ledger')
             UNION ALL SELECT 'references ' || \"from\" || ' ' || \"table\"
                 FROM pragma_foreign_key_list('ledger')
             UNION ALL SELECT 'usage_days ' || sql FROM sqlite_master
                 WHERE tbl_name = 'usage_days'",
        )
        .into_iter()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
    };
    let fresh = open(&dir.path().join("fresh.db")).unwrap();
    let migrated = shape(&conn);
    assert!(
        migrated.iter().any(|l| l == "references key_id api_keys"),
        "{migrated:?}"
    );
    assert_eq!(migrated, shape(&fresh));
}

#[test]
fn a_version_11_file_counts_the_changes_of_what_the_server_holds_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v11.db");
    let conn = reopened(
        &path,
        &format!("{WITHOUT_14} {WITHOUT_13} {WITHOUT_12} PRAGMA user_version = 11;"),
    );
    assert_eq!(version(&conn), SCHEMA_VERSION);
    let count = || -> i64 {
        conn.query_row("SELECT version FROM books_version", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count(), 0);
    let plan: String = conn
        .query_row(
            "EXPLAIN QUERY PLAN SELECT id FROM ledger WHERE account_id = 1 AND id < 9
             ORDER BY id DESC LIMIT 10",
            [],
            |r| r.get(3),
        )
        .unwrap();
    assert!(plan.contains("ledger_by_account"), "{plan}");
    // Each change of an account, a key, a provider or the payment settings counts.
    conn.execute_batch(
        "INSERT INTO accounts (public_id, balance, created_at) VALUES ('acct_1', 0, 0);
         UPDATE accounts SET balance = 28;
         INSERT INTO oidc_providers (name, issuer, client_id, client_secret, created_at)
             VALUES ('p', 'https://id.example', 'c', 's', 0);
         DELETE FROM oidc_providers;",
    )
    .unwrap();
    assert_eq!(count(), 4);
    // A session, a sign-in or an audit line does not.
    conn.execute_batch(
        "INSERT INTO sessions (id_hash, public_id, account_id, csrf, created_at, seen_at)
             VALUES (zeroblob(32), 'ses_1', 1, 'c', 0, 0);
         UPDATE sessions SET seen_at = 60;
         INSERT INTO audit_log (account_id, at, actor, action, detail)
             VALUES (1, 0, 'a', 'topup', '');",
    )
    .unwrap();
    assert_eq!(count(), 4);
}

#[test]
fn a_version_12_file_keeps_its_sessions_asking_them_to_sign_in_again_before_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v12.db");
    open(&path)
        .unwrap()
        .execute_batch(&format!(
            "{WITHOUT_14} {WITHOUT_13} PRAGMA user_version = 12;
             INSERT INTO accounts (id, public_id, balance, created_at) VALUES (1, 'acct_1', 0, 0);
             INSERT INTO sessions (id_hash, public_id, account_id, csrf, created_at, seen_at)
                 VALUES (zeroblob(32), 'ses_1', 1, 'c', 100, 100);
             INSERT INTO signins (state_hash, provider, nonce, verifier, created_at)
                 VALUES (zeroblob(32), 'p', 'n', 'v', 100);"
        ))
        .unwrap();
    let conn = open(&path).unwrap();
    assert_eq!(version(&conn), SCHEMA_VERSION);
    // The session is kept, of no known identity and never proved: a change asks it to
    // sign in again. The sign-in under way is a sign-in.
    let session: (Option<String>, i64, Option<String>) = conn
        .query_row(
            "SELECT issuer, authenticated_at, link_offer FROM sessions WHERE public_id = 'ses_1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(session, (None, 0, None));
    let purpose: String = conn
        .query_row("SELECT purpose FROM signins", [], |r| r.get(0))
        .unwrap();
    assert_eq!(purpose, "signin");
    assert!(
        conn.execute("UPDATE signins SET purpose = 'other'", [])
            .is_err()
    );
    // The same columns as a new file's.
    let columns = |conn: &Connection, table: &str| -> Vec<(String, String, bool, Option<String>)> {
        rows(
            conn,
            &format!(
                "SELECT name, type, \"notnull\", dflt_value FROM pragma_table_info('{table}')"
            ),
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
    };
    let fresh = open(&dir.path().join("fresh.db")).unwrap();
    for table in ["sessions", "signins", "accounts", "disputes"] {
        assert_eq!(columns(&conn, table), columns(&fresh, table), "{table}");
    }
    // Its account is not frozen and was made from no counted address; new accounts
    // are counted by address and day through an index.
    let account: (Option<String>, Option<String>) = conn
        .query_row(
            "SELECT topups_frozen, created_from FROM accounts WHERE public_id = 'acct_1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(account, (None, None));
    let plan: String = conn
        .query_row(
            "EXPLAIN QUERY PLAN SELECT count(*) FROM accounts
             WHERE created_from = '127.0.0.1' AND created_at >= 0",
            [],
            |r| r.get(3),
        )
        .unwrap();
    assert!(plan.contains("accounts_by_origin"), "{plan}");
}

#[test]
fn a_version_9_file_keeps_its_providers_as_openid_ones_open_to_anyone() {
    let dir = tempfile::tempdir().unwrap();
    let conn = reopened(
        &dir.path().join("v9.db"),
        &format!(
            "{WITHOUT_14} {WITHOUT_13} {WITHOUT_12} {WITHOUT_11} {WITHOUT_10} PRAGMA user_version = 9;
             INSERT INTO oidc_providers (name, issuer, client_id, client_secret, created_at)
                 VALUES ('p1', 'https://id.example', 'postal', 'secret', 0);"
        ),
    );
    assert_eq!(version(&conn), SCHEMA_VERSION);
    let columns = |conn: &Connection| {
        names(
            conn,
            "SELECT name || ' ' || type || ' ' || \"notnull\" || ' ' || ifnull(dflt_value, '')
             FROM pragma_table_info('oidc_providers')",
        )
    };
    let fresh = open(&dir.path().join("fresh.db")).unwrap();
    assert_eq!(columns(&conn), columns(&fresh));
    let providers = sqlite::dashboard::providers(&conn).unwrap();
    assert_eq!(providers.len(), 1);
    assert_eq!(
        (providers[0].kind, providers[0].allowed.len()),
        (crate::domain::dashboard::ProviderKind::Oidc, 0)
    );
    // The migrated column refuses what the new file's refuses.
    assert!(
        conn.execute("UPDATE oidc_providers SET kind = 'gitlab'", [])
            .is_err()
    );
}

#[test]
fn a_version_8_file_keeps_its_publishable_keys_unbounded_with_the_budget_columns() {
    let dir = tempfile::tempdir().unwrap();
    let conn = reopened(
        &dir.path().join("v8.db"),
        &format!(
            "{WITHOUT_14} {WITHOUT_13} {WITHOUT_12} {WITHOUT_11} {WITHOUT_10} {WITHOUT_9} PRAGMA user_version = 8;
             INSERT INTO accounts (id, public_id, balance, created_at) VALUES (1, 'acct_x', 5, 0);
             INSERT INTO api_keys (public_id, key_hash, account_id, created_at, kind, origins,
                                   per_ip_minute)
                 VALUES ('key_p', zeroblob(32), 1, 0, 'publishable', 'https://shop.example', 7);"
        ),
    );
    assert_eq!(version(&conn), SCHEMA_VERSION);
    let columns = |conn: &Connection| -> Vec<(String, String, bool)> {
        rows(
            conn,
            "SELECT name, type, \"notnull\" FROM pragma_table_info('api_keys')",
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
    };
    let fresh = open(&dir.path().join("fresh.db")).unwrap();
    assert_eq!(columns(&conn), columns(&fresh));
    let keys = sqlite::keys::load_active(&conn).unwrap();
    let rules = keys[0].publishable.as_ref().unwrap();
    assert_eq!((rules.per_ip_minute, rules.budget), (7, Budget::UNLIMITED));
    // The migrated columns refuse what the new file's refuse.
    for column in ["max_per_minute", "max_per_day"] {
        let set = |n: i64| conn.execute(&format!("UPDATE api_keys SET {column} = ?1"), [n]);
        assert!(set(0).is_err(), "{column}");
        assert_eq!(set(100).unwrap(), 1);
    }
    let keys = sqlite::keys::load_active(&conn).unwrap();
    let rules = keys[0].publishable.as_ref().unwrap();
    assert_eq!(
        rules.budget,
        Budget {
            per_minute: Some(100),
            per_day: Some(100)
        }
    );
}

#[test]
fn a_version_5_file_gets_the_idempotent_answers_table_of_a_new_file() {
    let dir = tempfile::tempdir().unwrap();
    // A version 5 file: a new file without the version 6 table.
    let conn = reopened(
        &dir.path().join("p.db"),
        &format!(
            "{WITHOUT_14} {WITHOUT_13} {WITHOUT_12} {WITHOUT_11} {WITHOUT_10} {WITHOUT_9} {WITHOUT_8} {WITHOUT_7} DROP TABLE idempotent_answers; PRAGMA user_version = 5;
             INSERT INTO accounts (id, public_id, balance, created_at) VALUES (1, 'acct_x', 5, 0);"
        ),
    );
    assert_eq!(version(&conn), SCHEMA_VERSION);
    let shape = |conn: &Connection| {
        names(
            conn,
            "SELECT 'column ' || name || ' ' || type || ' ' || \"notnull\" || ' ' || pk
                 FROM pragma_table_info('idempotent_answers')
             UNION ALL
             SELECT 'index ' || il.name || ' ' || il.\"unique\" || ' ' || ii.name
                 FROM pragma_index_list('idempotent_answers') il,
                      pragma_index_info(il.name) ii
             ORDER BY 1",
        )
    };
    let fresh = open(&dir.path().join("fresh.db")).unwrap();
    assert_eq!(shape(&conn), shape(&fresh));
    assert_eq!(shape(&conn).len(), 7 + 3, "{:?}", shape(&conn));
    // The migrated table refuses what the new file's refuses.
    let insert = |key: &str, fingerprint_len: usize| {
        conn.execute(
            "INSERT INTO idempotent_answers
                 (account_id, idempotency_key, endpoint, fingerprint, body, created_at)
             VALUES (1, ?1, 'validate-bulk', zeroblob(?2), x'7b7d', 0)",
            rusqlite::params![key, fingerprint_len as i64],
        )
    };
    assert!(insert("k", 31).is_err());
    assert!(insert("", 32).is_err());
    insert("k", 32).unwrap();
    assert!(insert("k", 32).is_err());
}
