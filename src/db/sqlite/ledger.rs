//! The `ledger` table: append-only history of every balance change; charges appended by
//! the billing writer's flushes, and `postal ledger verify`.

use std::time::SystemTime;

use anyhow::Context;
use rusqlite::{Connection, OptionalExtension, params};

use crate::db::admin::{LedgerReport, Mismatch};
use crate::db::rows::{ChargeRow, unix_secs};
use crate::db::sqlite::decode::{count, stored_count};

/// A charge row counted in its account's, day's, key's and endpoint's row of `usage_days`
/// (?1 account, ?2 when, ?3 key, ?4 endpoint, ?5 queries, ?6 amount taken).
const USAGE_UPSERT: &str = "
    INSERT INTO usage_days (account_id, day, key_id, endpoint, queries, charged, last_at)
    VALUES (?1, ?2 - ?2 % 86400, ?3, ?4, ?5, ?6, ?2)
    ON CONFLICT (account_id, day, key_id, endpoint) DO UPDATE
        SET queries = queries + excluded.queries, charged = charged + excluded.charged,
            last_at = max(last_at, excluded.last_at)";

/// Applies charge rows as deltas: `balance = balance - amount` and a ledger row with the
/// balance after it, for each (account, key, endpoint), counted in `usage_days` too.
/// Inside the caller's transaction.
///
/// A row can only find a balance smaller than its amount when a negative adjustment by
/// the CLI landed between the charges and their flush (the CLI checks the stored
/// balance, which the unflushed charges have not reached yet). Then the balance goes to
/// 0 and the row records what was really taken: in the customer's favour, and the
/// ledger still sums to the balance.
pub fn append_charges(conn: &Connection, rows: &[ChargeRow], at: SystemTime) -> anyhow::Result<()> {
    let at = unix_secs(at);
    for row in rows {
        let wanted = row.amount.get();
        let after: Option<i64> = conn
            .prepare_cached(
                "UPDATE accounts SET balance = balance - ?2 WHERE id = ?1 AND balance >= ?2
                 RETURNING balance",
            )?
            .query_row(params![row.account_id, wanted], |r| r.get(0))
            .optional()?;
        let (amount, after) = match after {
            Some(after) => (wanted, after),
            None => {
                let Some(stored) = stored_balance(conn, row.account_id)? else {
                    tracing::error!("charges of a missing account {} dropped", row.account_id);
                    continue;
                };
                tracing::warn!(
                    "account {}: {} micros charged but only {stored} left after an adjustment",
                    row.account_id,
                    wanted
                );
                conn.prepare_cached("UPDATE accounts SET balance = 0 WHERE id = ?1")?
                    .execute([row.account_id])?;
                (stored, 0)
            }
        };
        conn.prepare_cached(
            "INSERT INTO ledger (account_id, at, kind, amount, balance_after, query_count, endpoint,
                                 key_id)
             VALUES (?1, ?2, 'charge', ?3, ?4, ?5, ?6, ?7)",
        )?
        .execute(params![
            row.account_id,
            at,
            -amount,
            after,
            stored_count(row.queries),
            row.endpoint.as_str(),
            row.key_id
        ])
        .context("appending a charge row")?;
        conn.prepare_cached(USAGE_UPSERT)?
            .execute(params![
                row.account_id,
                at,
                row.key_id,
                row.endpoint.as_str(),
                stored_count(row.queries),
                amount
            ])
            .context("counting a charge in usage_days")?;
    }
    Ok(())
}

/// Compares every account's balance with the sum of its ledger, in one snapshot.
pub fn verify(conn: &mut Connection) -> anyhow::Result<LedgerReport> {
    let tx = conn.transaction()?; // deferred: a read snapshot, no lock
    let (accounts, entries): (i64, i64) = tx.query_row(
        "SELECT (SELECT count(*) FROM accounts), (SELECT count(*) FROM ledger)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let mut stmt = tx.prepare(
        "SELECT a.public_id, a.balance, coalesce(l.total, 0)
         FROM accounts a
         LEFT JOIN (SELECT account_id, sum(amount) AS total FROM ledger GROUP BY account_id) l
           ON l.account_id = a.id
         WHERE a.balance IS NOT coalesce(l.total, 0)
         ORDER BY a.id",
    )?;
    let mismatches = stmt
        .query_map([], |r| {
            Ok(Mismatch {
                account_id: r.get(0)?,
                balance: r.get(1)?,
                ledger_sum: r.get(2)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()
        .context("summing the ledger")?;
    Ok(LedgerReport {
        accounts: count(accounts),
        entries: count(entries),
        mismatches,
    })
}

fn stored_balance(conn: &Connection, account_id: i64) -> rusqlite::Result<Option<i64>> {
    conn.prepare_cached("SELECT balance FROM accounts WHERE id = ?1")?
        .query_row([account_id], |r| r.get(0))
        .optional()
}
