//! What a cluster adds to the admin operations: every change bumps `changes.version` and
//! notifies the nodes in its transaction (`bump`), and the command then waits until every
//! live node holds it (`wait_for_nodes`); `migrate_from_file` moves a single-file
//! installation's accounts, keys and ledger in.

use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio_postgres::{Client, Transaction};

use crate::db::admin::AccountError;

use super::CHANGES_CHANNEL;

/// A node is live when its heartbeat is younger than this.
const LIVE: &str = "3 seconds";
/// A time as the reports show it: RFC 3339, UTC, seconds.
pub(super) const UTC_SECONDS: &str = r#"'YYYY-MM-DD"T"HH24:MI:SS"Z"'"#;

/// Bumps the version of accounts and keys and notifies the nodes, in `tx`: the nodes hear
/// of it only if it commits.
pub(super) async fn bump(tx: &Transaction<'_>) -> Result<i64, AccountError> {
    let version: i64 = tx
        .query_one(
            "UPDATE changes SET version = version + 1 RETURNING version",
            &[],
        )
        .await?
        .get(0);
    tx.execute(
        "SELECT pg_notify($1, $2)",
        &[&CHANGES_CHANNEL, &version.to_string()],
    )
    .await?;
    Ok(version)
}

/// Waits until every live node holds `version` (or `timeout`); the nodes that did not.
pub async fn wait_for_nodes(
    client: &Client,
    version: i64,
    timeout: Duration,
) -> anyhow::Result<Vec<i64>> {
    let until = Instant::now() + timeout;
    loop {
        let laggards: Vec<i64> = client
            .query(
                &format!(
                    "SELECT node_id FROM nodes WHERE seen_version < $1
                     AND heartbeat_at > now() - interval '{LIVE}' ORDER BY node_id"
                ),
                &[&version],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if laggards.is_empty() || Instant::now() >= until {
            return Ok(laggards);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// What `migrate_from_file` moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    pub accounts: u64,
    pub keys: u64,
    pub entries: u64,
}

/// Copies every account (balance, limits), key and ledger row of the SQLite file `file`
/// into an empty PostgreSQL ledger, row ids kept, in one transaction; refused when the
/// ledger already holds accounts. Window counters and idempotent answers are not moved.
pub async fn migrate_from_file(
    client: &mut Client,
    file: &Connection,
) -> Result<Migrated, AccountError> {
    let tx = client.transaction().await?;
    tx.execute("LOCK TABLE accounts IN EXCLUSIVE MODE", &[])
        .await?;
    let existing: i64 = tx
        .query_one("SELECT count(*) FROM accounts", &[])
        .await?
        .get(0);
    if existing > 0 {
        return Err(AccountError::Invalid(format!(
            "the ledger already holds {existing} accounts: migrate into an empty one"
        )));
    }
    let mut moved = Migrated {
        accounts: 0,
        keys: 0,
        entries: 0,
    };
    let mut stmt = file.prepare(
        "SELECT id, public_id, name, balance, created_at, limit_per_minute, limit_per_hour,
                limit_per_day FROM accounts ORDER BY id",
    )?;
    type AccountRow = (
        i64,
        String,
        Option<String>,
        i64,
        i64,
        Option<i64>,
        Option<i64>,
        Option<i64>,
    );
    let accounts: Vec<AccountRow> = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
            ))
        })?
        .collect::<rusqlite::Result<_>>()?;
    for a in &accounts {
        tx.execute(
            "INSERT INTO accounts (id, public_id, name, balance, created_at, limit_per_minute,
                                   limit_per_hour, limit_per_day)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[&a.0, &a.1, &a.2, &a.3, &a.4, &a.5, &a.6, &a.7],
        )
        .await?;
        moved.accounts += 1;
    }
    let mut stmt = file.prepare(
        "SELECT id, public_id, key_hash, account_id, created_at, revoked_at, kind, origins,
                per_ip_minute, max_per_minute, max_per_day FROM api_keys ORDER BY id",
    )?;
    type KeyRow = (
        i64,
        String,
        Vec<u8>,
        i64,
        i64,
        Option<i64>,
        String,
        Option<String>,
        Option<i32>,
        Option<i32>,
        Option<i32>,
    );
    let keys: Vec<KeyRow> = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
                r.get(9)?,
                r.get(10)?,
            ))
        })?
        .collect::<rusqlite::Result<_>>()?;
    for k in &keys {
        tx.execute(
            "INSERT INTO api_keys (id, public_id, key_hash, account_id, created_at, revoked_at,
                                   kind, origins, per_ip_minute, max_per_minute, max_per_day)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            &[
                &k.0, &k.1, &k.2, &k.3, &k.4, &k.5, &k.6, &k.7, &k.8, &k.9, &k.10,
            ],
        )
        .await?;
        moved.keys += 1;
    }
    let mut stmt = file.prepare(
        "SELECT id, account_id, at, kind, amount, balance_after, query_count, endpoint, note
         FROM ledger ORDER BY id",
    )?;
    let mut rows = stmt.query([])?;
    let insert = tx
        .prepare(
            "INSERT INTO ledger (id, account_id, at, kind, amount, balance_after, query_count,
                                 endpoint, note)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .await?;
    while let Some(r) = rows.next()? {
        let (id, account, at, kind, amount, after, queries, endpoint, note): (
            i64,
            i64,
            i64,
            String,
            i64,
            i64,
            i64,
            Option<String>,
            Option<String>,
        ) = (
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
            r.get(8)?,
        );
        tx.execute(
            &insert,
            &[
                &id, &account, &at, &kind, &amount, &after, &queries, &endpoint, &note,
            ],
        )
        .await?;
        moved.entries += 1;
    }
    // Ids go on after the ones moved.
    tx.batch_execute(
        "SELECT setval(pg_get_serial_sequence('accounts', 'id'), coalesce(max(id), 0) + 1, false) FROM accounts;
         SELECT setval(pg_get_serial_sequence('api_keys', 'id'), coalesce(max(id), 0) + 1, false) FROM api_keys;
         SELECT setval(pg_get_serial_sequence('ledger', 'id'), coalesce(max(id), 0) + 1, false) FROM ledger;",
    )
    .await?;
    bump(&tx).await?;
    tx.commit().await?;
    Ok(moved)
}
