//! What the admin commands (`postal account|key|ledger|usage --ledger URL`) do in the
//! PostgreSQL ledger: the same operations and answers as the SQLite file's (`accounts`,
//! `keys`, `ledger`, `reports`), plus what a cluster needs: every change bumps
//! `changes.version` and notifies the nodes in its transaction, and the command then waits
//! until every live node holds it (`wait_for_nodes`); `migrate_from_file` moves a
//! single-file installation's accounts, keys and ledger in.

use std::time::{Duration, Instant, SystemTime};

use rusqlite::Connection;
use tokio_postgres::{Client, GenericClient, Transaction};

use crate::db::accounts::{AccountView, KeyView, LimitsChange, NewAccount};
use crate::db::keys::NewKey;
use crate::db::ledger::{LedgerReport, Mismatch};
use crate::db::reports::{AccountLine, KeyLine, LedgerEntry, UsageLine, day_start};
use crate::db::rows::{AccountError, unix_secs};
use crate::domain::api_key::{self, ApiKey, KeyKind, Publishable};
use crate::domain::money::{FREE_GRANT, MIN_TOPUP, Micros};
use crate::domain::rate_limit::Limits;

use super::CHANGES_CHANNEL;
use super::node::publishable_rules;

impl From<tokio_postgres::Error> for AccountError {
    fn from(e: tokio_postgres::Error) -> Self {
        AccountError::Unexpected(e.into())
    }
}

/// A node is live when its heartbeat is younger than this.
const LIVE: &str = "3 seconds";
const DAY: i64 = 86_400;
const UTC_SECONDS: &str = r#"'YYYY-MM-DD"T"HH24:MI:SS"Z"'"#;

fn micros(stored: i64) -> Result<Micros, AccountError> {
    Micros::new(stored).ok_or_else(|| {
        AccountError::Unexpected(anyhow::anyhow!("a stored amount out of range: {stored}"))
    })
}

fn count(stored: i64) -> u64 {
    u64::try_from(stored).unwrap_or(0)
}

fn limits_of(row: &tokio_postgres::Row, first: usize) -> Limits {
    let limit = |i: usize| row.get::<_, Option<i64>>(first + i).map(count);
    Limits {
        per_minute: limit(0),
        per_hour: limit(1),
        per_day: limit(2),
    }
}

/// Bumps the version of accounts and keys and notifies the nodes, in `tx`: the nodes hear
/// of it only if it commits.
async fn bump(tx: &Transaction<'_>) -> Result<i64, AccountError> {
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

/// The row id, balance and leased amount of `public_id`, locked.
async fn lock_account(
    tx: &Transaction<'_>,
    public_id: &str,
) -> Result<(i64, Micros, Micros), AccountError> {
    let row = tx
        .query_opt(
            "SELECT id, balance, leased FROM accounts WHERE public_id = $1 FOR UPDATE",
            &[&public_id],
        )
        .await?
        .ok_or_else(|| AccountError::UnknownAccount(public_id.to_owned()))?;
    Ok((row.get(0), micros(row.get(1))?, micros(row.get(2))?))
}

async fn insert_key(
    tx: &Transaction<'_>,
    account_rowid: i64,
    publishable: Option<&Publishable>,
    at: i64,
) -> Result<(String, ApiKey), AccountError> {
    let key_id = api_key::new_key_id();
    let kind = match publishable {
        Some(_) => KeyKind::Publishable,
        None => KeyKind::Secret,
    };
    let api_key = ApiKey::generate(kind);
    let origins = publishable.map(|p| {
        p.origins
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    });
    let per_ip = publishable.map(|p| i32::try_from(p.per_ip_minute).unwrap_or(i32::MAX));
    tx.execute(
        "INSERT INTO api_keys (public_id, key_hash, account_id, created_at, kind, origins,
                               per_ip_minute)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[
            &key_id,
            &&api_key.hash()[..],
            &account_rowid,
            &at,
            &kind.as_str(),
            &origins,
            &per_ip,
        ],
    )
    .await?;
    Ok((key_id, api_key))
}

/// A new account with the free grant and a first key; and the version to wait for.
pub async fn create_account(
    client: &mut Client,
    name: Option<&str>,
    now: SystemTime,
) -> Result<(NewAccount, i64), AccountError> {
    let at = unix_secs(now);
    let account_id = api_key::new_account_id();
    let tx = client.transaction().await?;
    let rowid: i64 = tx
        .query_one(
            "INSERT INTO accounts (public_id, name, balance, created_at) VALUES ($1, $2, $3, $4)
             RETURNING id",
            &[&account_id, &name, &FREE_GRANT.get(), &at],
        )
        .await?
        .get(0);
    tx.execute(
        "INSERT INTO ledger (account_id, at, kind, amount, balance_after, note)
         VALUES ($1, $2, 'grant', $3, $3, 'free 1,000 queries')",
        &[&rowid, &at, &FREE_GRANT.get()],
    )
    .await?;
    let (key_id, api_key) = insert_key(&tx, rowid, None, at).await?;
    let version = bump(&tx).await?;
    tx.commit().await?;
    Ok((
        NewAccount {
            account_id,
            key_id,
            api_key,
            balance: FREE_GRANT,
        },
        version,
    ))
}

/// The account as stored (its balance holds every flushed charge; a node flushes an
/// account's charges within 500 ms).
pub async fn show(client: &Client, public_id: &str) -> Result<AccountView, AccountError> {
    let row = client
        .query_opt(
            "SELECT id, name, balance, limit_per_minute, limit_per_hour, limit_per_day
             FROM accounts WHERE public_id = $1",
            &[&public_id],
        )
        .await?
        .ok_or_else(|| AccountError::UnknownAccount(public_id.to_owned()))?;
    let rowid: i64 = row.get(0);
    let keys = client
        .query(
            &format!(
                "SELECT public_id, to_char(to_timestamp(created_at) AT TIME ZONE 'UTC', {UTC_SECONDS}),
                        revoked_at IS NOT NULL
                 FROM api_keys WHERE account_id = $1 ORDER BY id"
            ),
            &[&rowid],
        )
        .await?
        .iter()
        .map(|r| KeyView {
            key_id: r.get(0),
            created_at: r.get(1),
            revoked: r.get(2),
        })
        .collect();
    Ok(AccountView {
        account_id: public_id.to_owned(),
        name: row.get(1),
        balance: micros(row.get(2))?,
        keys,
        limits: limits_of(&row, 3),
    })
}

/// Credits `amount` (at least [`MIN_TOPUP`]); the new balance and the version.
pub async fn topup(
    client: &mut Client,
    public_id: &str,
    amount: Micros,
    now: SystemTime,
) -> Result<(Micros, i64), AccountError> {
    if amount < MIN_TOPUP {
        return Err(AccountError::TopupBelowMinimum(amount));
    }
    change_balance(client, public_id, amount, "topup", None, now).await
}

/// Adds the signed `amount` with its `reason`. A negative one can take only what no node
/// holds a grant of (the rest is being spent); the new balance and the version.
pub async fn adjust(
    client: &mut Client,
    public_id: &str,
    amount: Micros,
    reason: &str,
    now: SystemTime,
) -> Result<(Micros, i64), AccountError> {
    if amount == Micros::ZERO {
        return Err(AccountError::Invalid(
            "an adjustment of 0 changes nothing".into(),
        ));
    }
    if reason.trim().is_empty() {
        return Err(AccountError::Invalid("an adjustment needs a reason".into()));
    }
    change_balance(client, public_id, amount, "adjustment", Some(reason), now).await
}

async fn change_balance(
    client: &mut Client,
    public_id: &str,
    amount: Micros,
    kind: &str,
    note: Option<&str>,
    now: SystemTime,
) -> Result<(Micros, i64), AccountError> {
    let tx = client.transaction().await?;
    let (rowid, balance, leased) = lock_account(&tx, public_id).await?;
    let new_balance = balance
        .checked_add(amount)
        .ok_or(AccountError::BalanceTooLarge)?;
    if new_balance < leased {
        let free = balance.checked_sub(leased).unwrap_or(Micros::ZERO);
        return Err(AccountError::WouldGoNegative {
            balance: free,
            amount,
        });
    }
    tx.execute(
        "UPDATE accounts SET balance = $2 WHERE id = $1",
        &[&rowid, &new_balance.get()],
    )
    .await?;
    tx.execute(
        "INSERT INTO ledger (account_id, at, kind, amount, balance_after, note)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &rowid,
            &unix_secs(now),
            &kind,
            &amount.get(),
            &new_balance.get(),
            &note,
        ],
    )
    .await?;
    let version = bump(&tx).await?;
    tx.commit().await?;
    Ok((new_balance, version))
}

/// Applies `change`; the limits in force and the version.
pub async fn set_limits(
    client: &mut Client,
    public_id: &str,
    change: LimitsChange,
) -> Result<(Limits, i64), AccountError> {
    if let LimitsChange::Set {
        per_minute,
        per_hour,
        per_day,
    } = change
        && [per_minute, per_hour, per_day].contains(&Some(0))
    {
        return Err(AccountError::Invalid(
            "a limit must be at least 1 (use --off to remove limits)".into(),
        ));
    }
    let sql = |l: Option<u64>| l.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
    let tx = client.transaction().await?;
    let (rowid, _, _) = lock_account(&tx, public_id).await?;
    match change {
        LimitsChange::Keep => {}
        LimitsChange::Off => {
            tx.execute(
                "UPDATE accounts SET limit_per_minute = NULL, limit_per_hour = NULL,
                 limit_per_day = NULL WHERE id = $1",
                &[&rowid],
            )
            .await?;
        }
        LimitsChange::Set {
            per_minute,
            per_hour,
            per_day,
        } => {
            tx.execute(
                "UPDATE accounts SET limit_per_minute = coalesce($2, limit_per_minute),
                 limit_per_hour = coalesce($3, limit_per_hour),
                 limit_per_day = coalesce($4, limit_per_day) WHERE id = $1",
                &[&rowid, &sql(per_minute), &sql(per_hour), &sql(per_day)],
            )
            .await?;
        }
    }
    let row = tx
        .query_one(
            "SELECT limit_per_minute, limit_per_hour, limit_per_day FROM accounts WHERE id = $1",
            &[&rowid],
        )
        .await?;
    let limits = limits_of(&row, 0);
    let version = bump(&tx).await?;
    tx.commit().await?;
    Ok((limits, version))
}

/// A new key of the account; and the version.
pub async fn create_key(
    client: &mut Client,
    account_public_id: &str,
    publishable: Option<&Publishable>,
    now: SystemTime,
) -> Result<(NewKey, i64), AccountError> {
    let tx = client.transaction().await?;
    let (rowid, _, _) = lock_account(&tx, account_public_id).await?;
    let (key_id, api_key) = insert_key(&tx, rowid, publishable, unix_secs(now)).await?;
    let version = bump(&tx).await?;
    tx.commit().await?;
    Ok((NewKey { key_id, api_key }, version))
}

/// Revokes the key (again: no error, the first time stays); the version.
pub async fn revoke_key(
    client: &mut Client,
    key_public_id: &str,
    now: SystemTime,
) -> Result<i64, AccountError> {
    let tx = client.transaction().await?;
    let found = tx
        .execute(
            "UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2) WHERE public_id = $1",
            &[&key_public_id, &unix_secs(now)],
        )
        .await?;
    if found == 0 {
        return Err(AccountError::UnknownKey(key_public_id.to_owned()));
    }
    let version = bump(&tx).await?;
    tx.commit().await?;
    Ok(version)
}

/// `postal account list`.
pub async fn account_lines(client: &Client, now: i64) -> anyhow::Result<Vec<AccountLine>> {
    let rows = client
        .query(
            "SELECT a.public_id, a.name, a.balance,
                    a.limit_per_minute, a.limit_per_hour, a.limit_per_day,
                    (SELECT count(*) FROM api_keys k
                      WHERE k.account_id = a.id AND k.revoked_at IS NULL),
                    coalesce((SELECT sum(query_count) FROM ledger l
                      WHERE l.account_id = a.id AND l.kind = 'charge' AND l.at >= $1), 0)::bigint
             FROM accounts a ORDER BY a.id",
            &[&day_start(now)],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(AccountLine {
                account_id: r.get(0),
                name: r.get(1),
                balance: micros(r.get(2))?,
                limits: limits_of(r, 3),
                active_keys: count(r.get(6)),
                queries_today: count(r.get(7)),
            })
        })
        .collect()
}

async fn account_rowid(client: &impl GenericClient, public_id: &str) -> Result<i64, AccountError> {
    Ok(client
        .query_opt(
            "SELECT id FROM accounts WHERE public_id = $1",
            &[&public_id],
        )
        .await?
        .ok_or_else(|| AccountError::UnknownAccount(public_id.to_owned()))?
        .get(0))
}

/// `postal ledger show`.
pub async fn ledger_entries(
    client: &Client,
    public_id: &str,
    since: Option<i64>,
) -> Result<Vec<LedgerEntry>, AccountError> {
    let rowid = account_rowid(client, public_id).await?;
    let rows = client
        .query(
            &format!(
                "SELECT to_char(to_timestamp(at) AT TIME ZONE 'UTC', {UTC_SECONDS}), kind, amount,
                        balance_after, query_count, endpoint, note
                 FROM ledger WHERE account_id = $1 AND at >= $2 ORDER BY id"
            ),
            &[&rowid, &since.unwrap_or(i64::MIN)],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(LedgerEntry {
                at: r.get(0),
                kind: r.get(1),
                amount: micros(r.get(2))?,
                balance_after: micros(r.get(3))?,
                queries: count(r.get(4)),
                endpoint: r.get(5),
                note: r.get(6),
            })
        })
        .collect()
}

/// `postal usage`.
pub async fn usage(client: &Client, days: u32, now: i64) -> anyhow::Result<Vec<UsageLine>> {
    let from = day_start(now) - (i64::from(days.max(1)) - 1) * DAY;
    let rows = client
        .query(
            "SELECT to_char(to_timestamp(l.at - l.at % 86400) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
                    a.public_id, l.endpoint, sum(l.query_count)::bigint, (-sum(l.amount))::bigint
             FROM ledger l JOIN accounts a ON a.id = l.account_id
             WHERE l.kind = 'charge' AND l.at >= $1
             GROUP BY day, l.account_id, a.public_id, l.endpoint
             ORDER BY day, l.account_id, l.endpoint",
            &[&from],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            Ok::<_, AccountError>(UsageLine {
                date: r.get(0),
                account_id: r.get(1),
                endpoint: r.get(2),
                queries: count(r.get(3)),
                charged: micros(r.get(4))?,
            })
        })
        .collect::<Result<_, _>>()?)
}

/// `postal key list`.
pub async fn keys(client: &Client, public_id: &str) -> Result<Vec<KeyLine>, AccountError> {
    let rowid = account_rowid(client, public_id).await?;
    let rows = client
        .query(
            &format!(
                "SELECT public_id, to_char(to_timestamp(created_at) AT TIME ZONE 'UTC', {UTC_SECONDS}),
                        to_char(to_timestamp(revoked_at) AT TIME ZONE 'UTC', {UTC_SECONDS}),
                        kind = 'publishable', origins, per_ip_minute
                 FROM api_keys WHERE account_id = $1 ORDER BY id"
            ),
            &[&rowid],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let publishable: bool = r.get(3);
            Ok(KeyLine {
                key_id: r.get(0),
                created_at: r.get(1),
                revoked_at: r.get(2),
                publishable: match publishable {
                    true => Some(publishable_rules(
                        r.get(4),
                        r.get::<_, Option<i32>>(5).map(|n| n.max(0) as u32),
                    )?),
                    false => None,
                },
            })
        })
        .collect()
}

/// The ledger's check in one snapshot: every balance against the sum of its ledger, and
/// every account's `leased` against the sum of its grants (accounts whose grants do not
/// add up).
pub async fn verify(client: &mut Client) -> anyhow::Result<(LedgerReport, Vec<String>)> {
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let totals = tx
        .query_one(
            "SELECT (SELECT count(*) FROM accounts), (SELECT count(*) FROM ledger)",
            &[],
        )
        .await?;
    let mismatches = tx
        .query(
            "SELECT a.public_id, a.balance, coalesce(l.total, 0)::bigint
             FROM accounts a
             LEFT JOIN (SELECT account_id, sum(amount) AS total FROM ledger GROUP BY account_id) l
               ON l.account_id = a.id
             WHERE a.balance IS DISTINCT FROM coalesce(l.total, 0)
             ORDER BY a.id",
            &[],
        )
        .await?
        .iter()
        .map(|r| Mismatch {
            account_id: r.get(0),
            balance: r.get(1),
            ledger_sum: r.get(2),
        })
        .collect();
    let leases = tx
        .query(
            "SELECT a.public_id FROM accounts a
             LEFT JOIN (SELECT account_id, sum(remaining) AS total FROM leases GROUP BY account_id) l
               ON l.account_id = a.id
             WHERE a.leased IS DISTINCT FROM coalesce(l.total, 0)::bigint
             ORDER BY a.id",
            &[],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    tx.commit().await?;
    Ok((
        LedgerReport {
            accounts: count(totals.get(0)),
            entries: count(totals.get(1)),
            mismatches,
        },
        leases,
    ))
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
                per_ip_minute FROM api_keys ORDER BY id",
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
            ))
        })?
        .collect::<rusqlite::Result<_>>()?;
    for k in &keys {
        tx.execute(
            "INSERT INTO api_keys (id, public_id, key_hash, account_id, created_at, revoked_at,
                                   kind, origins, per_ip_minute)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[&k.0, &k.1, &k.2, &k.3, &k.4, &k.5, &k.6, &k.7, &k.8],
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
