//! What the account tables share (`accounts`, `keys`, `ledger`, `reports`): the ids of a
//! caller, the admin operations' error, and how times, money and counts are stored.

use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension};

use crate::domain::api_key::Publishable;
use crate::domain::money::{MIN_TOPUP, Micros};
use crate::domain::origin::OriginPattern;

/// An authenticated caller: the account and the key (row ids) a request came with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Caller {
    pub account_id: i64,
    pub key_id: i64,
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

pub(crate) fn count(stored: i64) -> u64 {
    u64::try_from(stored).unwrap_or(0)
}

/// The row id and balance of the account `public_id`.
pub(crate) fn find_account(
    conn: &Connection,
    public_id: &str,
) -> Result<(i64, Micros), AccountError> {
    conn.query_row(
        "SELECT id, balance FROM accounts WHERE public_id = ?1",
        [public_id],
        |r| Ok((r.get(0)?, micros(r.get(1)?)?)),
    )
    .optional()?
    .ok_or_else(|| AccountError::UnknownAccount(public_id.to_owned()))
}

/// A publishable key's stored origins (one canonical pattern per line) and limit.
pub(crate) fn publishable_rules(
    origins: Option<String>,
    per_ip_minute: Option<u32>,
) -> rusqlite::Result<Publishable> {
    let origins = origins
        .as_deref()
        .unwrap_or("")
        .lines()
        .map(OriginPattern::parse)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| corrupt(4, e.to_string()))?;
    match (origins.is_empty(), per_ip_minute) {
        (false, Some(per_ip_minute)) => Ok(Publishable {
            origins,
            per_ip_minute,
        }),
        _ => Err(corrupt(
            4,
            "a publishable key without origins or per-IP limit".to_owned(),
        )),
    }
}

pub(crate) fn corrupt(column: usize, why: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, why.into())
}
