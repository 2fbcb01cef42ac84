//! How the PostgreSQL ledger's rows become values and back: money (`Micros` as `ToSql`
//! and `FromSql`), the closed sets of words (`domain::words`) as their text, counts, limits, a publishable key's rules, an account locked by its
//! public id. The twin of `db::sqlite::decode`.

use std::error::Error;

use bytes::BytesMut;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{Row, Transaction};

use crate::db::admin::AccountError;
use crate::domain::admin::{AuditAction, LedgerKind};
use crate::domain::api_key::{Budget, KeyKind, Publishable};
use crate::domain::dashboard::ProviderKind;
use crate::domain::ids::TopupId;
use crate::domain::money::Micros;
use crate::domain::payments::TopupStatus;
use crate::domain::rate_limit::Limits;

type BoxError = Box<dyn Error + Sync + Send>;

impl ToSql for Micros {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        self.get().to_sql(ty, out)
    }

    fn accepts(ty: &Type) -> bool {
        <i64 as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}

/// A stored amount out of `Micros`' range is corrupt, not clamped.
impl<'a> FromSql<'a> for Micros {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Micros, BoxError> {
        let stored = i64::from_sql(ty, raw)?;
        Micros::new(stored).ok_or_else(|| format!("a stored amount out of range: {stored}").into())
    }

    fn accepts(ty: &Type) -> bool {
        <i64 as FromSql>::accepts(ty)
    }
}

/// Words stored as their text; a text no word has is corrupt.
macro_rules! stored_as_text {
    ($($word:ty => $what:literal),+ $(,)?) => {$(
        impl ToSql for $word {
            fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
                self.as_str().to_sql(ty, out)
            }

            fn accepts(ty: &Type) -> bool {
                <&str as ToSql>::accepts(ty)
            }

            to_sql_checked!();
        }

        impl<'a> FromSql<'a> for $word {
            fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<$word, BoxError> {
                let text = <&str as FromSql>::from_sql(ty, raw)?;
                <$word>::from_stored(text)
                    .ok_or_else(|| format!("unknown {} {text:?}", $what).into())
            }

            fn accepts(ty: &Type) -> bool {
                <&str as FromSql>::accepts(ty)
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
            fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
                self.as_str().to_sql(ty, out)
            }

            fn accepts(ty: &Type) -> bool {
                <&str as ToSql>::accepts(ty)
            }

            to_sql_checked!();
        }

        impl<'a> FromSql<'a> for $id {
            fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<$id, BoxError> {
                Ok(<$id>::new(<&str as FromSql>::from_sql(ty, raw)?))
            }

            fn accepts(ty: &Type) -> bool {
                <&str as FromSql>::accepts(ty)
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
pub(crate) fn limits_at(r: &Row, first: usize) -> Limits {
    let limit = |i: usize| r.get::<_, Option<i64>>(first + i).map(count);
    Limits {
        per_minute: limit(0),
        per_hour: limit(1),
        per_day: limit(2),
    }
}

/// The three limit columns as stored.
pub(crate) fn stored_limits(limits: Limits) -> [Option<i64>; 3] {
    [limits.per_minute, limits.per_hour, limits.per_day].map(|l| l.map(stored_count))
}

/// A publishable key's rules from its stored origins, per-IP limit and budget
/// (`max_per_minute`, `max_per_day`).
pub(crate) fn publishable_rules(
    origins: Option<String>,
    per_ip_minute: Option<i32>,
    (max_per_minute, max_per_day): (Option<i32>, Option<i32>),
) -> anyhow::Result<Publishable> {
    let stored = |n: Option<i32>| n.map(|n| u32::try_from(n).unwrap_or(0));
    let budget = Budget {
        per_minute: stored(max_per_minute),
        per_day: stored(max_per_day),
    };
    Publishable::from_stored(origins.as_deref(), stored(per_ip_minute), budget)
        .map_err(anyhow::Error::msg)
}

/// A count of a key's rules as the ledger stores it (`integer`).
pub(crate) fn stored_rule(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The row id, balance and leased amount of the account `public_id`, locked.
pub(crate) async fn lock_account(
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
    Ok((row.get(0), row.try_get(1)?, row.try_get(2)?))
}
