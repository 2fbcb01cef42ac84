//! The admin's daily reads: accounts at a glance, one account's ledger, usage per day,
//! an account's keys. Read-only, each in one read snapshot.
//!
//! The ledger has no index by account (see `schema.sql`: it would cost the billing writer
//! a random page per account per commit), so an account's ledger is a scan of it; at one
//! row per account, key and endpoint per commit that is a few milliseconds per 100,000
//! rows. Usage is read from `usage_days`, whose key starts with the account.

use anyhow::Result;
use rusqlite::{Connection, OptionalExtension, params};

use crate::db::admin::{
    AccountError, AccountLine, KeyLine, LedgerEntry, LedgerPage, LedgerQuery, UsageLine,
    UsageQuery, day_start, last_30_days,
};
use crate::db::sqlite::decode::{count, limits_at, publishable_rules};
use crate::domain::date::{UtcDate, rfc3339_minute};
use crate::domain::ids::{AccountId, KeyId};

/// Every account, oldest first. `now`: unix seconds (for "today").
pub fn account_lines(conn: &mut Connection, now: i64) -> Result<Vec<AccountLine>> {
    let tx = conn.transaction()?; // deferred: one read snapshot
    let lines = {
        let mut stmt = tx.prepare(
            "SELECT a.public_id, a.name, a.balance,
                    a.limit_per_minute, a.limit_per_hour, a.limit_per_day,
                    (SELECT count(*) FROM api_keys k
                      WHERE k.account_id = a.id AND k.revoked_at IS NULL),
                    coalesce(t.queries, 0)
             FROM accounts a
             LEFT JOIN (SELECT account_id, sum(queries) AS queries FROM usage_days
                        WHERE day = ?1 GROUP BY account_id) t
               ON t.account_id = a.id
             ORDER BY a.id",
        )?;
        stmt.query_map([day_start(now)], |r| {
            Ok(AccountLine {
                account_id: r.get(0)?,
                name: r.get(1)?,
                balance: r.get(2)?,
                limits: limits_at(r, 3)?,
                active_keys: count(r.get(6)?),
                queries_today: count(r.get(7)?),
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?
    };
    Ok(lines)
}

pub(super) fn account_rowid(conn: &Connection, public_id: &AccountId) -> Result<i64, AccountError> {
    conn.query_row(
        "SELECT id FROM accounts WHERE public_id = ?1",
        [public_id],
        |r| r.get(0),
    )
    .optional()?
    .ok_or_else(|| AccountError::UnknownAccount(public_id.clone()))
}

/// The account's ledger rows `query` asks for.
pub fn ledger_entries(
    conn: &mut Connection,
    public_id: &AccountId,
    query: &LedgerQuery,
) -> Result<LedgerPage, AccountError> {
    let tx = conn.transaction()?;
    let rowid = account_rowid(&tx, public_id)?;
    let rows = {
        let mut stmt = tx.prepare(&query.sql(|n| format!("?{n}")))?;
        let since = query.since.unwrap_or(i64::MIN);
        let (before, rows) = query.paging.bounds();
        let params = params![rowid, since, before, rows];
        let params = &params[..if query.paging.page.is_some() { 4 } else { 3 }];
        stmt.query_map(params, |r| {
            Ok((
                r.get(0)?,
                LedgerEntry {
                    at: crate::domain::date::rfc3339(r.get(1)?),
                    kind: r.get(2)?,
                    amount: r.get(3)?,
                    balance_after: r.get(4)?,
                    queries: count(r.get(5)?),
                    endpoint: r.get(6)?,
                    note: r.get(7)?,
                },
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?
    };
    Ok(query.paging.paged(rows))
}

/// The usage `query` asks for, from `usage_days` (an account's rows by its primary key).
pub fn usage(conn: &mut Connection, query: &UsageQuery) -> Result<Vec<UsageLine>, AccountError> {
    let tx = conn.transaction()?; // deferred: one read snapshot
    let account = query
        .account
        .as_ref()
        .map(|id| account_rowid(&tx, id))
        .transpose()?;
    let key = match (&query.key, account) {
        (Some(key), Some(account)) => Some(key_rowid(&tx, key, account)?),
        (Some(key), None) => return Err(AccountError::UnknownKey(key.clone())),
        (None, _) => None,
    };
    let lines = {
        let mut stmt = tx.prepare(&query.sql(|n| format!("?{n}")))?;
        // Parameters 1, then 2 and 3 when there (a key needs its account).
        let values = [Some(query.from()), account, key];
        let values = values.iter().map_while(|v| *v);
        stmt.query_map(rusqlite::params_from_iter(values), |r| {
            Ok(UsageLine {
                date: UtcDate::of_unix(r.get(0)?).to_string(),
                account_id: r.get(1)?,
                key_id: r.get(2)?,
                endpoint: r.get(3)?,
                queries: count(r.get(4)?),
                charged: r.get(5)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?
    };
    Ok(lines)
}

/// The row id of the account's key `public_id`.
fn key_rowid(conn: &Connection, public_id: &KeyId, account: i64) -> Result<i64, AccountError> {
    conn.query_row(
        "SELECT id FROM api_keys WHERE public_id = ?1 AND account_id = ?2",
        params![public_id, account],
        |r| r.get(0),
    )
    .optional()?
    .ok_or_else(|| AccountError::UnknownKey(public_id.clone()))
}

/// The account's keys, oldest first.
pub fn keys(
    conn: &mut Connection,
    public_id: &AccountId,
    now: i64,
) -> Result<Vec<KeyLine>, AccountError> {
    let tx = conn.transaction()?;
    let rowid = account_rowid(&tx, public_id)?;
    let keys = {
        let mut stmt = tx.prepare(
            "SELECT public_id, strftime('%Y-%m-%dT%H:%M:%SZ', created_at, 'unixepoch'),
                    strftime('%Y-%m-%dT%H:%M:%SZ', coalesce(revoked_at,
                        CASE WHEN expires_at <= unixepoch() THEN expires_at END), 'unixepoch'),
                    kind = 'publishable', origins, per_ip_minute, name, hint,
                    CASE WHEN revoked_at IS NULL AND expires_at > unixepoch()
                         THEN strftime('%Y-%m-%dT%H:%M:%SZ', expires_at, 'unixepoch') END,
                    max_per_minute, max_per_day, u.last_at, coalesce(u.queries, 0)
             FROM api_keys
             LEFT JOIN (SELECT key_id, max(last_at) AS last_at,
                               sum(CASE WHEN day >= ?2 THEN queries ELSE 0 END) AS queries
                        FROM usage_days WHERE account_id = ?1 GROUP BY key_id) u
               ON u.key_id = api_keys.id
             WHERE account_id = ?1 ORDER BY id",
        )?;
        stmt.query_map(params![rowid, last_30_days(now)], |r| {
            let publishable: bool = r.get(3)?;
            Ok(KeyLine {
                key_id: r.get(0)?,
                name: r.get(6)?,
                hint: r.get(7)?,
                expires_at: r.get(8)?,
                created_at: r.get(1)?,
                revoked_at: r.get(2)?,
                publishable: match publishable {
                    true => Some(publishable_rules(
                        r.get(4)?,
                        r.get(5)?,
                        (r.get(9)?, r.get(10)?),
                        4,
                    )?),
                    false => None,
                },
                last_used_at: r.get::<_, Option<i64>>(11)?.map(rfc3339_minute),
                queries_30d: count(r.get(12)?),
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?
    };
    Ok(keys)
}
