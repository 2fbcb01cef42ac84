//! Accounts, API keys and the ledger outside the charging path: the admin operations of
//! `postal account|key|ledger`, and the server's reads (authenticate, status, check).
//!
//! Every write is one `BEGIN IMMEDIATE` transaction that reads the balance it changes
//! and inserts the matching ledger row, so it is exact next to a running server: the
//! billing writer (`db::billing`) takes the same lock and re-reads the account in each of
//! its transactions.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, anyhow};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::db::billing::Refusal;
use crate::domain::api_key::{self, ApiKey, KeyHash};
use crate::domain::money::{FREE_GRANT, MIN_TOPUP, Micros, PRICE_PER_QUERY};
use crate::domain::rate_limit::{Counters, Limits, RateStatus, WindowCount};

/// An authenticated caller: the account and the key (row ids) a request came with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Caller {
    pub account_id: i64,
    pub key_id: i64,
}

/// What a response envelope shows of an account: its balance and `rateLimit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccountStatus {
    pub balance: Micros,
    pub rate: RateStatus,
}

/// Why an admin operation was refused. All but `Unexpected` are the caller's mistake
/// (the CLI exits 2 for them, 1 for `Unexpected`).
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("no account {0:?}")]
    UnknownAccount(String),
    #[error("no key {0:?}")]
    UnknownKey(String),
    #[error("a top-up must be at least {MIN_TOPUP} USD, got {0} USD")]
    TopupBelowMinimum(Micros),
    #[error("the adjustment of {amount} USD would make the balance of {balance} USD negative")]
    WouldGoNegative { balance: Micros, amount: Micros },
    #[error("the balance would exceed {} USD", Micros::MAX)]
    BalanceTooLarge,
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Unexpected(#[from] anyhow::Error),
}

impl From<rusqlite::Error> for AccountError {
    fn from(e: rusqlite::Error) -> Self {
        AccountError::Unexpected(e.into())
    }
}

/// A new account with its first key (shown once).
pub struct NewAccount {
    pub account_id: String,
    pub key_id: String,
    pub api_key: ApiKey,
    pub balance: Micros,
}

/// A new key (shown once).
pub struct NewKey {
    pub key_id: String,
    pub api_key: ApiKey,
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

/// `postal ledger verify`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerReport {
    pub accounts: u64,
    pub entries: u64,
    pub mismatches: Vec<Mismatch>,
}

/// An account whose balance is not the sum of its ledger (micro-dollars, raw: a tampered
/// value need not be a valid `Micros`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub account_id: String,
    pub balance: i64,
    pub ledger_sum: i64,
}

pub(crate) fn unix_secs(now: SystemTime) -> i64 {
    now.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

pub(crate) fn micros(stored: i64) -> rusqlite::Result<Micros> {
    Micros::new(stored).ok_or_else(|| {
        rusqlite::Error::IntegralValueOutOfRange(0, stored) // a corrupt amount
    })
}

fn count(stored: i64) -> u64 {
    u64::try_from(stored).unwrap_or(0)
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
    let (key_id, api_key) = insert_key(&tx, rowid, at)?;
    tx.commit()?;
    Ok(NewAccount {
        account_id,
        key_id,
        api_key,
        balance: FREE_GRANT,
    })
}

fn insert_key(
    conn: &Connection,
    account_rowid: i64,
    at: i64,
) -> rusqlite::Result<(String, ApiKey)> {
    let key_id = api_key::new_key_id();
    let api_key = ApiKey::generate();
    conn.execute(
        "INSERT INTO api_keys (public_id, key_hash, account_id, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![key_id, &api_key.hash()[..], account_rowid, at],
    )?;
    Ok((key_id, api_key))
}

/// The row id and balance of the account `public_id`.
fn find_account(conn: &Connection, public_id: &str) -> Result<(i64, Micros), AccountError> {
    conn.query_row(
        "SELECT id, balance FROM accounts WHERE public_id = ?1",
        [public_id],
        |r| Ok((r.get(0)?, micros(r.get(1)?)?)),
    )
    .optional()?
    .ok_or_else(|| AccountError::UnknownAccount(public_id.to_owned()))
}

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

pub fn create_key(
    conn: &mut Connection,
    account_public_id: &str,
    now: SystemTime,
) -> Result<NewKey, AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (rowid, _) = find_account(&tx, account_public_id)?;
    let (key_id, api_key) = insert_key(&tx, rowid, unix_secs(now))?;
    tx.commit()?;
    Ok(NewKey { key_id, api_key })
}

/// Revokes the key; revoking a revoked key again is not an error (its first revocation
/// time stays).
pub fn revoke_key(
    conn: &mut Connection,
    key_public_id: &str,
    now: SystemTime,
) -> Result<(), AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let exists = tx
        .query_row(
            "SELECT 1 FROM api_keys WHERE public_id = ?1",
            [key_public_id],
            |_| Ok(()),
        )
        .optional()?;
    if exists.is_none() {
        return Err(AccountError::UnknownKey(key_public_id.to_owned()));
    }
    tx.execute(
        "UPDATE api_keys SET revoked_at = ?2 WHERE public_id = ?1 AND revoked_at IS NULL",
        params![key_public_id, unix_secs(now)],
    )?;
    tx.commit()?;
    Ok(())
}

/// Compares every account's balance with the sum of its ledger, in one snapshot.
pub fn verify_ledger(conn: &mut Connection) -> anyhow::Result<LedgerReport> {
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

/// The caller behind a key's hash; `None` when no key has it or the key is revoked (the
/// same 401 either way).
/// How many accounts exist (`postal serve` creates the first one).
pub fn account_count(conn: &Connection) -> anyhow::Result<i64> {
    Ok(conn.query_row("SELECT count(*) FROM accounts", [], |r| r.get(0))?)
}

pub fn authenticate(conn: &Connection, key_hash: &KeyHash) -> anyhow::Result<Option<Caller>> {
    let caller = conn
        .prepare_cached(
            "SELECT account_id, id FROM api_keys WHERE key_hash = ?1 AND revoked_at IS NULL",
        )?
        .query_row([&key_hash[..]], |r| {
            Ok(Caller {
                account_id: r.get(0)?,
                key_id: r.get(1)?,
            })
        })
        .optional()?;
    Ok(caller)
}

/// Balance and `rateLimit` as they stand at `now`, changing nothing (for the free
/// `/api/aboutapi`).
pub fn status(
    conn: &Connection,
    account_id: i64,
    now: SystemTime,
) -> anyhow::Result<AccountStatus> {
    let state = charge_state(conn, account_id)?
        .ok_or_else(|| anyhow!("account {account_id} does not exist"))?;
    Ok(state.status(now))
}

/// Would a charge of `queries` pass at `now`? Changes nothing: for requests that are
/// answered without a charge (a 404) but must still be refused 401/402/429 first, in the
/// order of the contract. The status is as of now, not counting this request.
pub fn check(
    conn: &Connection,
    caller: &Caller,
    queries: u64,
    now: SystemTime,
) -> anyhow::Result<Result<AccountStatus, Refusal>> {
    if !key_is_active(conn, caller)? {
        return Ok(Err(Refusal::InvalidKey));
    }
    let Some(state) = charge_state(conn, caller.account_id)? else {
        return Ok(Err(Refusal::InvalidKey));
    };
    Ok(state.admits(queries, now).map(|_| state.status(now)))
}

/// What a charge decision needs of an account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChargeState {
    pub balance: Micros,
    pub limits: Limits,
    pub counters: Counters,
}

impl ChargeState {
    /// The contract's order: balance (402) before rate limits (429). `Ok` carries the cost.
    pub fn admits(&self, queries: u64, now: SystemTime) -> Result<Micros, Refusal> {
        let cost = PRICE_PER_QUERY
            .checked_mul(queries)
            .filter(|cost| *cost <= self.balance)
            .ok_or(Refusal::InsufficientBalance)?;
        self.counters
            .check(&self.limits, queries, now)
            .map_err(|retry_after_secs| Refusal::RateLimited { retry_after_secs })?;
        Ok(cost)
    }

    pub fn status(&self, now: SystemTime) -> AccountStatus {
        AccountStatus {
            balance: self.balance,
            rate: self.counters.status(&self.limits, now),
        }
    }
}

pub(crate) fn key_is_active(conn: &Connection, caller: &Caller) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT 1 FROM api_keys WHERE id = ?1 AND account_id = ?2 AND revoked_at IS NULL",
    )?
    .query_row([caller.key_id, caller.account_id], |_| Ok(()))
    .optional()
    .map(|row| row.is_some())
}

pub(crate) fn charge_state(
    conn: &Connection,
    account_id: i64,
) -> rusqlite::Result<Option<ChargeState>> {
    conn.prepare_cached(
        "SELECT balance, limit_per_minute, limit_per_hour, limit_per_day,
                minute_start, minute_count, hour_start, hour_count, day_start, day_count
         FROM accounts WHERE id = ?1",
    )?
    .query_row([account_id], |r| charge_state_at(r, 0))
    .optional()
}

/// The account behind an active key and its state as it stands, in one read: what a
/// request needs before its work (401 when `None`; 402 / 429 from `ChargeState::admits`).
/// The charge itself re-checks everything inside the writer's transaction.
pub fn authenticate_account(
    conn: &Connection,
    key_hash: &KeyHash,
) -> anyhow::Result<Option<(Caller, ChargeState)>> {
    let found = conn
        .prepare_cached(
            "SELECT k.account_id, k.id,
                    a.balance, a.limit_per_minute, a.limit_per_hour, a.limit_per_day,
                    a.minute_start, a.minute_count, a.hour_start, a.hour_count,
                    a.day_start, a.day_count
             FROM api_keys k JOIN accounts a ON a.id = k.account_id
             WHERE k.key_hash = ?1 AND k.revoked_at IS NULL",
        )?
        .query_row([&key_hash[..]], |r| {
            let caller = Caller {
                account_id: r.get(0)?,
                key_id: r.get(1)?,
            };
            Ok((caller, charge_state_at(r, 2)?))
        })
        .optional()?;
    Ok(found)
}

/// A `ChargeState` from the ten columns of a row starting at `first` (balance, three
/// limits, three window starts and counts).
fn charge_state_at(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<ChargeState> {
    let window = |start: usize| -> rusqlite::Result<WindowCount> {
        Ok(WindowCount {
            start: r.get(first + start)?,
            count: count(r.get(first + start + 1)?),
        })
    };
    Ok(ChargeState {
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
