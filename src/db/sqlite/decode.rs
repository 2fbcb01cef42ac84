//! How the SQLite file's rows become values and back: money (`Micros` as `ToSql` and
//! `FromSql`), the closed sets of words (`domain::words`) as their text, counts, limits, a publishable key's rules, an account found by its public
//! id. The twin of `db::pg::decode`.

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use rusqlite::{Connection, OptionalExtension, Row};

use crate::db::admin::AccountError;
use crate::domain::admin::{AuditAction, LedgerKind};
use crate::domain::api_key::{Budget, KeyKind, Publishable};
use crate::domain::dashboard::ProviderKind;
use crate::domain::ids::TopupId;
use crate::domain::money::Micros;
use crate::domain::payments::TopupStatus;
use crate::domain::rate_limit::Limits;

impl ToSql for Micros {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.get()))
    }
}

/// A stored amount out of `Micros`' range is corrupt, not clamped.
impl FromSql for Micros {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let stored = i64::column_result(value)?;
        Micros::new(stored).ok_or(FromSqlError::OutOfRange(stored))
    }
}

/// Words stored as their text; a text no word has is corrupt.
macro_rules! stored_as_text {
    ($($word:ty => $what:literal),+ $(,)?) => {$(
        impl ToSql for $word {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::from(self.as_str()))
            }
        }

        impl FromSql for $word {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                let text = value.as_str()?;
                <$word>::from_stored(text)
                    .ok_or_else(|| FromSqlError::Other(format!("unknown {} {text:?}", $what).into()))
            }
        }
    )+};
}

stored_as_text!(
    KeyKind => "key kind",
    ProviderKind => "provider kind",
    TopupStatus => "top-up status",
    LedgerKind => "ledger entry kind",
    AuditAction => "audit action",
);

/// Public ids stored as their text.
macro_rules! stored_id {
    ($($id:ty),+ $(,)?) => {$(
        impl ToSql for $id {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::from(self.as_str()))
            }
        }

        impl FromSql for $id {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                Ok(<$id>::new(value.as_str()?))
            }
        }
    )+};
}

stored_id!(TopupId);

/// A stored count (never negative: a negative one reads as 0).
pub(crate) fn count(stored: i64) -> u64 {
    u64::try_from(stored).unwrap_or(0)
}

/// A count as stored (beyond `i64`: `i64::MAX`).
pub(crate) fn stored_count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The three limit columns (per minute, hour, day) starting at `first`.
pub(crate) fn limits_at(r: &Row<'_>, first: usize) -> rusqlite::Result<Limits> {
    let limit = |i: usize| -> rusqlite::Result<Option<u64>> {
        Ok(r.get::<_, Option<i64>>(first + i)?.map(count))
    };
    Ok(Limits {
        per_minute: limit(0)?,
        per_hour: limit(1)?,
        per_day: limit(2)?,
    })
}

/// The three limit columns as stored.
pub(crate) fn stored_limits(limits: Limits) -> [Option<i64>; 3] {
    [limits.per_minute, limits.per_hour, limits.per_day].map(|l| l.map(stored_count))
}

/// A publishable key's rules from its origins (column `column`), per-IP limit and
/// budget (`max_per_minute`, `max_per_day`).
pub(crate) fn publishable_rules(
    origins: Option<String>,
    per_ip_minute: Option<u32>,
    (max_per_minute, max_per_day): (Option<u32>, Option<u32>),
    column: usize,
) -> rusqlite::Result<Publishable> {
    let budget = Budget {
        per_minute: max_per_minute,
        per_day: max_per_day,
    };
    Publishable::from_stored(origins.as_deref(), per_ip_minute, budget)
        .map_err(|why| corrupt(column, why))
}

pub(crate) fn corrupt(column: usize, why: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(column, rusqlite::types::Type::Text, why.into())
}

/// The row id and balance of the account `public_id`.
pub(crate) fn find_account(
    conn: &Connection,
    public_id: &str,
) -> Result<(i64, Micros), AccountError> {
    conn.query_row(
        "SELECT id, balance FROM accounts WHERE public_id = ?1",
        [public_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()?
    .ok_or_else(|| AccountError::UnknownAccount(public_id.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_is_stored_as_its_text_and_an_unknown_text_is_corrupt() {
        let conn = Connection::open_in_memory().unwrap();
        let stored: String = conn
            .query_row("SELECT ?1", [TopupStatus::Expired], |r| r.get(0))
            .unwrap();
        assert_eq!(stored, "expired");
        let read: AuditAction = conn
            .query_row("SELECT 'key.roll'", [], |r| r.get(0))
            .unwrap();
        assert_eq!(read, AuditAction::KeyRoll);
        let unknown = conn.query_row("SELECT 'refunded'", [], |r| r.get::<_, TopupStatus>(0));
        assert!(
            unknown
                .unwrap_err()
                .to_string()
                .contains("unknown top-up status")
        );
    }
}
