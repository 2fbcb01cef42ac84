//! The `accounts` table: the admin operations of `postal account` (create, show, top-up,
//! adjust, limits), and what the server's books load and flush (states, window counters).
//!
//! Every write is one `BEGIN IMMEDIATE` transaction that reads the balance it changes and
//! inserts the matching ledger row; the CLI then announces it to a running server
//! (`billing::notify`), which adds the change to the balance it holds in memory (its
//! flushes write deltas, so they never overwrite it).

use std::time::SystemTime;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

pub use crate::db::rows::{AccountError, Caller};
use crate::db::rows::{count, find_account, micros, unix_secs};
use crate::domain::api_key::{self, ApiKey};
use crate::domain::charge::AccountState;
use crate::domain::money::{FREE_GRANT, MIN_TOPUP, Micros};
use crate::domain::rate_limit::{Counters, Limits, WindowCount};

/// A new account with its first key (shown once).
pub struct NewAccount {
    pub account_id: String,
    pub key_id: String,
    pub api_key: ApiKey,
    pub balance: Micros,
}

/// `postal account show`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountView {
    pub account_id: String,
    pub name: Option<String>,
    pub balance: Micros,
    pub keys: Vec<KeyView>,
    pub limits: Limits,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyView {
    pub key_id: String,
    /// RFC 3339, UTC, seconds: `2026-11-22T00:03:00Z`.
    pub created_at: String,
    pub revoked: bool,
}

/// A change of limits (`postal account limits`): `Set` changes only the windows given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitsChange {
    Keep,
    Off,
    Set {
        per_minute: Option<u64>,
        per_hour: Option<u64>,
        per_day: Option<u64>,
    },
}

fn limit_sql(limit: Option<u64>) -> Option<i64> {
    limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX))
}

pub fn create_account(
    conn: &mut Connection,
    name: Option<&str>,
    now: SystemTime,
) -> Result<NewAccount, AccountError> {
    let at = unix_secs(now);
    let account_id = api_key::new_account_id();
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute(
        "INSERT INTO accounts (public_id, name, balance, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![account_id, name, FREE_GRANT.get(), at],
    )?;
    let rowid = tx.last_insert_rowid();
    tx.execute(
        "INSERT INTO ledger (account_id, at, kind, amount, balance_after, note)
         VALUES (?1, ?2, 'grant', ?3, ?3, 'free 1,000 queries')",
        params![rowid, at, FREE_GRANT.get()],
    )?;
    let (key_id, api_key) = crate::db::keys::insert_key(&tx, rowid, None, at)?;
    tx.commit()?;
    Ok(NewAccount {
        account_id,
        key_id,
        api_key,
        balance: FREE_GRANT,
    })
}

/// The account as stored. The CLI announces itself first (`billing::notify`): a running
/// server then flushes what it has charged, so the balance shown includes every charge
/// answered before the command started.
pub fn show(conn: &Connection, public_id: &str) -> Result<AccountView, AccountError> {
    let row = conn
        .query_row(
            "SELECT id, name, balance, limit_per_minute, limit_per_hour, limit_per_day
             FROM accounts WHERE public_id = ?1",
            [public_id],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    micros(r.get(2)?)?,
                    Limits {
                        per_minute: r.get::<_, Option<i64>>(3)?.map(count),
                        per_hour: r.get::<_, Option<i64>>(4)?.map(count),
                        per_day: r.get::<_, Option<i64>>(5)?.map(count),
                    },
                ))
            },
        )
        .optional()?;
    let Some((rowid, name, balance, limits)) = row else {
        return Err(AccountError::UnknownAccount(public_id.to_owned()));
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
    Ok(AccountView {
        account_id: public_id.to_owned(),
        name,
        balance,
        keys,
        limits,
    })
}

/// Credits `amount` (at least [`MIN_TOPUP`]) in full; returns the new balance.
pub fn topup(
    conn: &mut Connection,
    public_id: &str,
    amount: Micros,
    now: SystemTime,
) -> Result<Micros, AccountError> {
    if amount < MIN_TOPUP {
        return Err(AccountError::TopupBelowMinimum(amount));
    }
    change_balance(conn, public_id, amount, "topup", None, now)
}

/// Adds the signed `amount` with its `reason`; refused when the balance would go below
/// zero. Returns the new balance.
pub fn adjust(
    conn: &mut Connection,
    public_id: &str,
    amount: Micros,
    reason: &str,
    now: SystemTime,
) -> Result<Micros, AccountError> {
    if amount == Micros::ZERO {
        return Err(AccountError::Invalid(
            "an adjustment of 0 changes nothing".into(),
        ));
    }
    if reason.trim().is_empty() {
        return Err(AccountError::Invalid("an adjustment needs a reason".into()));
    }
    change_balance(conn, public_id, amount, "adjustment", Some(reason), now)
}

fn change_balance(
    conn: &mut Connection,
    public_id: &str,
    amount: Micros,
    kind: &str,
    note: Option<&str>,
    now: SystemTime,
) -> Result<Micros, AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (rowid, balance) = find_account(&tx, public_id)?;
    let new_balance = balance
        .checked_add(amount)
        .ok_or(AccountError::BalanceTooLarge)?;
    if new_balance.is_negative() {
        return Err(AccountError::WouldGoNegative { balance, amount });
    }
    tx.execute(
        "UPDATE accounts SET balance = ?2 WHERE id = ?1",
        params![rowid, new_balance.get()],
    )?;
    tx.execute(
        "INSERT INTO ledger (account_id, at, kind, amount, balance_after, note)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            rowid,
            unix_secs(now),
            kind,
            amount.get(),
            new_balance.get(),
            note
        ],
    )?;
    tx.commit()?;
    Ok(new_balance)
}

/// Applies `change` and returns the limits now in force.
pub fn set_limits(
    conn: &mut Connection,
    public_id: &str,
    change: LimitsChange,
) -> Result<Limits, AccountError> {
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
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (rowid, _) = find_account(&tx, public_id)?;
    match change {
        LimitsChange::Keep => {}
        LimitsChange::Off => {
            tx.execute(
                "UPDATE accounts SET limit_per_minute = NULL, limit_per_hour = NULL,
                 limit_per_day = NULL WHERE id = ?1",
                [rowid],
            )?;
        }
        LimitsChange::Set {
            per_minute,
            per_hour,
            per_day,
        } => {
            tx.execute(
                "UPDATE accounts SET limit_per_minute = coalesce(?2, limit_per_minute),
                 limit_per_hour = coalesce(?3, limit_per_hour),
                 limit_per_day = coalesce(?4, limit_per_day) WHERE id = ?1",
                params![
                    rowid,
                    limit_sql(per_minute),
                    limit_sql(per_hour),
                    limit_sql(per_day)
                ],
            )?;
        }
    }
    let limits = tx.query_row(
        "SELECT limit_per_minute, limit_per_hour, limit_per_day FROM accounts WHERE id = ?1",
        [rowid],
        |r| {
            Ok(Limits {
                per_minute: r.get::<_, Option<i64>>(0)?.map(count),
                per_hour: r.get::<_, Option<i64>>(1)?.map(count),
                per_day: r.get::<_, Option<i64>>(2)?.map(count),
            })
        },
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
    let stored: Option<i64> = conn
        .query_row("SELECT balance FROM accounts WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .optional()?;
    Ok(stored.and_then(Micros::new))
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
    let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let mut stmt = conn.prepare_cached(
        "UPDATE accounts SET minute_start = ?2, minute_count = ?3, hour_start = ?4,
                hour_count = ?5, day_start = ?6, day_count = ?7 WHERE id = ?1",
    )?;
    for (id, c) in counters {
        stmt.execute(params![
            id,
            c.minute.start,
            n(c.minute.count),
            c.hour.start,
            n(c.hour.count),
            c.day.start,
            n(c.day.count)
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
        balance: micros(r.get(first)?)?,
        limits: Limits {
            per_minute: r.get::<_, Option<i64>>(first + 1)?.map(count),
            per_hour: r.get::<_, Option<i64>>(first + 2)?.map(count),
            per_day: r.get::<_, Option<i64>>(first + 3)?.map(count),
        },
        counters: Counters {
            minute: window(4)?,
            hour: window(6)?,
            day: window(8)?,
        },
    })
}
