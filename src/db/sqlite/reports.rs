//! The admin's daily reads: accounts at a glance, one account's ledger, usage per day,
//! an account's keys. Read-only, each in one read snapshot.
//!
//! The ledger has no index by account (see `schema.sql`: it would cost the billing writer
//! a random page per account per commit), so these reports scan it; at one row per
//! account and endpoint per commit that is a few milliseconds per 100,000 rows, fine for
//! a command run by hand.

use anyhow::Result;
use rusqlite::{Connection, OptionalExtension, params};

use crate::db::admin::{
    AccountError, AccountLine, DAY, KeyLine, LedgerEntry, UsageLine, day_start,
};
use crate::db::sqlite::decode::{count, limits_at, publishable_rules};
use crate::domain::ids::AccountId;

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
             LEFT JOIN (SELECT account_id, sum(query_count) AS queries FROM ledger
                        WHERE kind = 'charge' AND at >= ?1 GROUP BY account_id) t
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

fn account_rowid(conn: &Connection, public_id: &AccountId) -> Result<i64, AccountError> {
    conn.query_row(
        "SELECT id FROM accounts WHERE public_id = ?1",
        [public_id],
        |r| r.get(0),
    )
    .optional()?
    .ok_or_else(|| AccountError::UnknownAccount(public_id.clone()))
}

/// The account's ledger in the order it was written, from `since` (unix seconds) on.
pub fn ledger_entries(
    conn: &mut Connection,
    public_id: &AccountId,
    since: Option<i64>,
) -> Result<Vec<LedgerEntry>, AccountError> {
    let tx = conn.transaction()?;
    let rowid = account_rowid(&tx, public_id)?;
    let entries = {
        let mut stmt = tx.prepare(
            "SELECT strftime('%Y-%m-%dT%H:%M:%SZ', at, 'unixepoch'), kind, amount,
                    balance_after, query_count, endpoint, note
             FROM ledger WHERE account_id = ?1 AND at >= ?2 ORDER BY id",
        )?;
        stmt.query_map(params![rowid, since.unwrap_or(i64::MIN)], |r| {
            Ok(LedgerEntry {
                at: r.get(0)?,
                kind: r.get(1)?,
                amount: r.get(2)?,
                balance_after: r.get(3)?,
                queries: count(r.get(4)?),
                endpoint: r.get(5)?,
                note: r.get(6)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?
    };
    Ok(entries)
}

/// Charges of the last `days` UTC days (today included), per day, account and endpoint;
/// by day, then account, then endpoint.
pub fn usage(conn: &mut Connection, days: u32, now: i64) -> Result<Vec<UsageLine>> {
    let from = day_start(now) - (i64::from(days.max(1)) - 1) * DAY;
    let tx = conn.transaction()?;
    let lines = {
        let mut stmt = tx.prepare(
            "SELECT strftime('%Y-%m-%d', l.at - l.at % 86400, 'unixepoch') AS day,
                    a.public_id, l.endpoint, sum(l.query_count), -sum(l.amount)
             FROM ledger l JOIN accounts a ON a.id = l.account_id
             WHERE l.kind = 'charge' AND l.at >= ?1
             GROUP BY day, l.account_id, l.endpoint
             ORDER BY day, l.account_id, l.endpoint",
        )?;
        stmt.query_map([from], |r| {
            Ok(UsageLine {
                date: r.get(0)?,
                account_id: r.get(1)?,
                endpoint: r.get(2)?,
                queries: count(r.get(3)?),
                charged: r.get(4)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?
    };
    Ok(lines)
}

/// The account's keys, oldest first.
pub fn keys(conn: &mut Connection, public_id: &AccountId) -> Result<Vec<KeyLine>, AccountError> {
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
                    max_per_minute, max_per_day
             FROM api_keys WHERE account_id = ?1 ORDER BY id",
        )?;
        stmt.query_map([rowid], |r| {
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
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?
    };
    Ok(keys)
}
