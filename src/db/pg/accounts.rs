//! The `accounts` table of the ledger: the admin operations (create, show, change of
//! balance, limits), each in one transaction that bumps the version of accounts and keys
//! (`changes::bump`), returned for the command to wait on. The twin of
//! `db::sqlite::accounts`; what a node loads and flushes is `node`'s.

use std::time::SystemTime;

use tokio_postgres::{Client, Transaction};

use crate::db::admin::{AccountError, AccountView, KeyView, NewAccount};
use crate::db::rows::unix_secs;
use crate::domain::admin::{BalanceChange, LimitsChange};
use crate::domain::ids::AccountId;
use crate::domain::money::{FREE_GRANT, Micros};
use crate::domain::rate_limit::Limits;

use super::changes::{UTC_SECONDS, bump};
use super::decode::{limits_at, lock_account, stored_limits};
use super::keys::insert_key;

/// A new account with the free grant and a first key; and the version to wait for.
pub async fn create_account(
    client: &mut Client,
    name: Option<&str>,
    now: SystemTime,
) -> Result<(NewAccount, i64), AccountError> {
    let at = unix_secs(now);
    let tx = client.transaction().await?;
    let (rowid, account_id) = insert_account(&tx, name, at).await?;
    let (key_id, api_key) = insert_key(&tx, rowid, None, None, at).await?;
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

/// A new account with the free allowance and its ledger row: (row id, public id).
pub(super) async fn insert_account(
    tx: &Transaction<'_>,
    name: Option<&str>,
    at: i64,
) -> Result<(i64, AccountId), AccountError> {
    let account_id = AccountId::fresh();
    let rowid: i64 = tx
        .query_one(
            "INSERT INTO accounts (public_id, name, balance, created_at) VALUES ($1, $2, $3, $4)
             RETURNING id",
            &[&account_id, &name, &FREE_GRANT, &at],
        )
        .await?
        .get(0);
    tx.execute(
        "INSERT INTO ledger (account_id, at, kind, amount, balance_after, note)
         VALUES ($1, $2, 'grant', $3, $3, 'free 1,000 queries')",
        &[&rowid, &at, &FREE_GRANT],
    )
    .await?;
    Ok((rowid, account_id))
}

/// The account as stored (its balance holds every flushed charge; a node flushes an
/// account's charges within 500 ms).
pub async fn show(client: &Client, public_id: &AccountId) -> Result<AccountView, AccountError> {
    let row = client
        .query_opt(
            "SELECT id, name, balance, limit_per_minute, limit_per_hour, limit_per_day,
                    topups_frozen
             FROM accounts WHERE public_id = $1",
            &[&public_id],
        )
        .await?
        .ok_or_else(|| AccountError::UnknownAccount(public_id.clone()))?;
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
        balance: row.try_get(2)?,
        keys,
        limits: limits_at(&row, 3),
        topups_frozen: row.get(6),
    })
}

/// Applies the checked `change` with its ledger row. A negative one can take only what
/// no node holds a grant of (the rest is being spent); the new balance and the version.
pub async fn change_balance(
    client: &mut Client,
    public_id: &AccountId,
    change: &BalanceChange,
    now: SystemTime,
) -> Result<(Micros, i64), AccountError> {
    let tx = client.transaction().await?;
    let (rowid, balance, leased) = lock_account(&tx, public_id).await?;
    let after = write_change(&tx, rowid, (balance, leased), change, unix_secs(now)).await?;
    let version = bump(&tx).await?;
    tx.commit().await?;
    Ok((after, version))
}

/// Applies the checked `change` to the locked account of row `rowid` holding `balance`,
/// of which `leased` is leased to nodes: the new balance and its ledger row, in the
/// caller's transaction (every admin change of a balance). The twin of
/// `db::sqlite::accounts::write_change`.
pub(super) async fn write_change(
    tx: &Transaction<'_>,
    rowid: i64,
    (balance, leased): (Micros, Micros),
    change: &BalanceChange,
    at: i64,
) -> Result<Micros, AccountError> {
    let after = change.apply(balance, leased)?;
    tx.execute(
        "UPDATE accounts SET balance = $2 WHERE id = $1",
        &[&rowid, &after],
    )
    .await?;
    tx.execute(
        "INSERT INTO ledger (account_id, at, kind, amount, balance_after, note)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &rowid,
            &at,
            &change.kind(),
            &change.amount(),
            &after,
            &change.note(),
        ],
    )
    .await?;
    Ok(after)
}

/// Applies the checked `change`; the limits in force and the version.
pub async fn set_limits(
    client: &mut Client,
    public_id: &AccountId,
    change: LimitsChange,
) -> Result<(Limits, i64), AccountError> {
    let tx = client.transaction().await?;
    let row = tx
        .query_opt(
            "SELECT id, limit_per_minute, limit_per_hour, limit_per_day
             FROM accounts WHERE public_id = $1 FOR UPDATE",
            &[&public_id],
        )
        .await?
        .ok_or_else(|| AccountError::UnknownAccount(public_id.clone()))?;
    let rowid: i64 = row.get(0);
    let limits = change.apply(limits_at(&row, 1));
    let [per_minute, per_hour, per_day] = stored_limits(limits);
    tx.execute(
        "UPDATE accounts SET limit_per_minute = $2, limit_per_hour = $3, limit_per_day = $4
         WHERE id = $1",
        &[&rowid, &per_minute, &per_hour, &per_day],
    )
    .await?;
    let version = bump(&tx).await?;
    tx.commit().await?;
    Ok((limits, version))
}
