//! The `accounts` table: the admin operations of `postal account` (create, show, top-up,
//! adjust, limits), and what the server's books load and flush (states, window counters).
//!
//! Every write is one `BEGIN IMMEDIATE` transaction that reads the balance it changes and
//! inserts the matching ledger row; the CLI then announces it to a running server
//! (`billing::notify`), which adds the change to the balance it holds in memory (its
//! flushes write deltas, so they never overwrite it).

use std::time::SystemTime;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::db::admin::{AccountError, AccountView, KeyView, NewAccount};
use crate::db::rows::unix_secs;
use crate::db::sqlite::decode::{count, find_account, limits_at, stored_count, stored_limits};
use crate::domain::admin::{BalanceChange, LimitsChange};
use crate::domain::charge::AccountState;
use crate::domain::ids::AccountId;
use crate::domain::money::{FREE_GRANT, Micros};
use crate::domain::rate_limit::{Counters, Limits, WindowCount};

pub fn create_account(
    conn: &mut Connection,
    name: Option<&str>,
    now: SystemTime,
) -> Result<NewAccount, AccountError> {
    let at = unix_secs(now);
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (rowid, account_id) = insert_account(&tx, name, at)?;
    let (key_id, api_key) = crate::db::sqlite::keys::insert_key(&tx, rowid, None, None, at)?;
    tx.commit()?;
    Ok(NewAccount {
        account_id,
        key_id,
        api_key,
        balance: FREE_GRANT,
    })
}

/// A new account with the free allowance and its ledger row: (row id, public id).
pub(crate) fn insert_account(
    conn: &Connection,
    name: Option<&str>,
    at: i64,
) -> rusqlite::Result<(i64, AccountId)> {
    let account_id = AccountId::fresh();
    conn.execute(
        "INSERT INTO accounts (public_id, name, balance, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![account_id, name, FREE_GRANT, at],
    )?;
    let rowid = conn.last_insert_rowid();
    conn.execute(
        "INSERT INTO ledger (account_id, at, kind, amount, balance_after, note)
         VALUES (?1, ?2, 'grant', ?3, ?3, 'free 1,000 queries')",
        params![rowid, at, FREE_GRANT],
    )?;
    Ok((rowid, account_id))
}

/// The account as stored. The CLI announces itself first (`billing::notify`): a running
/// server then flushes what it has charged, so the balance shown includes every charge
/// answered before the command started.
pub fn show(conn: &Connection, public_id: &AccountId) -> Result<AccountView, AccountError> {
    show_row(conn, public_id).map(|(_, view)| view)
}

/// `show`, with the account's row id (what the server's books know it by).
pub fn show_row(
    conn: &Connection,
    public_id: &AccountId,
) -> Result<(i64, AccountView), AccountError> {
    let row = conn
        .query_row(
            "SELECT id, name, balance, limit_per_minute, limit_per_hour, limit_per_day,
                    topups_frozen
             FROM accounts WHERE public_id = ?1",
            [public_id],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get(2)?,
                    limits_at(r, 3)?,
                    r.get::<_, Option<String>>(6)?,
                ))
            },
        )
        .optional()?;
    let Some((rowid, name, balance, limits, topups_frozen)) = row else {
        return Err(AccountError::UnknownAccount(public_id.clone()));
    };
    let mut stmt = conn.prepare(
        "SELECT public_id, strftime('%Y-%m-%dT%H:%M:%SZ', created_at, 'unixepoch'),
                revoked_at IS NOT NULL
         FROM api_keys WHERE account_id = ?1 ORDER BY id",
    )?;
    let keys = stmt
        .query_map([rowid], |r| {
            Ok(KeyView {
                key_id: r.get(0)?,
                created_at: r.get(1)?,
                revoked: r.get(2)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let view = AccountView {
        account_id: public_id.to_owned(),
        name,
        balance,
        keys,
        limits,
        topups_frozen,
    };
    Ok((rowid, view))
}

/// Applies the checked `change` (a negative one refused when the balance would go
/// below zero) with its ledger row; returns the new balance.
pub fn change_balance(
    conn: &mut Connection,
    public_id: &AccountId,
    change: &BalanceChange,
    now: SystemTime,
) -> Result<Micros, AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (rowid, balance) = find_account(&tx, public_id)?;
    let after = write_change(&tx, rowid, balance, change, unix_secs(now))?;
    tx.commit()?;
    Ok(after)
}

/// Applies the checked `change` to the account of row `rowid` holding `balance`: the new
/// balance and its ledger row, in the caller's transaction (every admin change of a
/// balance: a top-up, an adjustment, a card payment and its refund).
pub(crate) fn write_change(
    tx: &Connection,
    rowid: i64,
    balance: Micros,
    change: &BalanceChange,
    at: i64,
) -> Result<Micros, AccountError> {
    let after = change.apply(balance, Micros::ZERO)?;
    tx.execute(
        "UPDATE accounts SET balance = ?2 WHERE id = ?1",
        params![rowid, after],
    )?;
    tx.execute(
        "INSERT INTO ledger (account_id, at, kind, amount, balance_after, note)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            rowid,
            at,
            change.kind(),
            change.amount(),
            after,
            change.note()
        ],
    )?;
    Ok(after)
}

/// Applies the checked `change` and returns the limits now in force.
pub fn set_limits(
    conn: &mut Connection,
    public_id: &AccountId,
    change: LimitsChange,
) -> Result<Limits, AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (rowid, current) = tx
        .query_row(
            "SELECT id, limit_per_minute, limit_per_hour, limit_per_day
             FROM accounts WHERE public_id = ?1",
            [public_id],
            |r| Ok((r.get::<_, i64>(0)?, limits_at(r, 1)?)),
        )
        .optional()?
        .ok_or_else(|| AccountError::UnknownAccount(public_id.clone()))?;
    let limits = change.apply(current);
    let [per_minute, per_hour, per_day] = stored_limits(limits);
    tx.execute(
        "UPDATE accounts SET limit_per_minute = ?2, limit_per_hour = ?3, limit_per_day = ?4
         WHERE id = ?1",
        params![rowid, per_minute, per_hour, per_day],
    )?;
    tx.commit()?;
    Ok(limits)
}

/// How many accounts exist (`postal serve` creates the first one).
pub fn account_count(conn: &Connection) -> anyhow::Result<i64> {
    Ok(conn.query_row("SELECT count(*) FROM accounts", [], |r| r.get(0))?)
}

/// The stored balance of the account with row id `id`.
pub fn balance_of(conn: &Connection, id: i64) -> anyhow::Result<Option<Micros>> {
    Ok(conn
        .query_row("SELECT balance FROM accounts WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .optional()?)
}

/// Every account's row id and charge state (the server's books).
pub fn load_states(conn: &Connection) -> rusqlite::Result<Vec<(i64, AccountState)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, balance, limit_per_minute, limit_per_hour, limit_per_day,
                minute_start, minute_count, hour_start, hour_count, day_start, day_count
         FROM accounts",
    )?;
    stmt.query_map([], |r| Ok((r.get(0)?, charge_state_at(r, 1)?)))?
        .collect()
}

/// Writes window counters as the server holds them (it is their only writer).
pub fn store_counters(conn: &Connection, counters: &[(i64, Counters)]) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "UPDATE accounts SET minute_start = ?2, minute_count = ?3, hour_start = ?4,
                hour_count = ?5, day_start = ?6, day_count = ?7 WHERE id = ?1",
    )?;
    for (id, c) in counters {
        stmt.execute(params![
            id,
            c.minute.start,
            stored_count(c.minute.count),
            c.hour.start,
            stored_count(c.hour.count),
            c.day.start,
            stored_count(c.day.count)
        ])?;
    }
    Ok(())
}

/// An `AccountState` from the ten columns of a row starting at `first` (balance, three
/// limits, three window starts and counts).
fn charge_state_at(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<AccountState> {
    let window = |start: usize| -> rusqlite::Result<WindowCount> {
        Ok(WindowCount {
            start: r.get(first + start)?,
            count: count(r.get(first + start + 1)?),
        })
    };
    Ok(AccountState {
        balance: r.get(first)?,
        limits: limits_at(r, first + 1)?,
        counters: Counters {
            minute: window(4)?,
            hour: window(6)?,
            day: window(8)?,
        },
    })
}
