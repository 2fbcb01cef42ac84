//! The `api_keys` table of the ledger: create and revoke keys, each in one transaction
//! that bumps the version (`changes::bump`). The twin of `db::sqlite::keys`; what a node
//! loads is `node`'s.

use std::time::SystemTime;

use tokio_postgres::{Client, Transaction};

use crate::db::admin::{self, AccountError, NewKey, key_room, successor_rules};
use crate::db::rows::unix_secs;
use crate::domain::api_key::{self, ApiKey, Publishable};
use crate::domain::ids::{AccountId, KeyId};

use super::changes::bump;
use super::decode::{lock_account, publishable_rules, stored_rule};

/// Inserts a key of the account: secret, or publishable with its rules.
pub(super) async fn insert_key(
    tx: &Transaction<'_>,
    account_rowid: i64,
    publishable: Option<&Publishable>,
    name: Option<&str>,
    at: i64,
) -> Result<(KeyId, ApiKey), AccountError> {
    let (key_id, kind, api_key) = api_key::fresh_key(publishable);
    let origins = publishable.map(Publishable::stored_origins);
    let per_ip = publishable.map(|p| stored_rule(p.per_ip_minute));
    let max_per_minute = publishable.and_then(|p| p.budget.per_minute.map(stored_rule));
    let max_per_day = publishable.and_then(|p| p.budget.per_day.map(stored_rule));
    tx.execute(
        "INSERT INTO api_keys (public_id, key_hash, account_id, created_at, kind, origins,
                               per_ip_minute, name, hint, max_per_minute, max_per_day)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        &[
            &key_id,
            &&api_key.hash()[..],
            &account_rowid,
            &at,
            &kind,
            &origins,
            &per_ip,
            &name,
            &api_key.hint(),
            &max_per_minute,
            &max_per_day,
        ],
    )
    .await?;
    Ok((key_id, api_key))
}

/// A new key of the account (at most `MAX_LIVE_KEYS` live: `key_room`); and the version.
pub async fn create_key(
    client: &mut Client,
    account_public_id: &AccountId,
    publishable: Option<&Publishable>,
    name: Option<&str>,
    now: SystemTime,
) -> Result<(NewKey, i64), AccountError> {
    let at = unix_secs(now);
    let tx = client.transaction().await?;
    let (rowid, _, _) = lock_account(&tx, account_public_id).await?;
    key_room(live_keys(&tx, rowid, at).await?, false)?;
    let (key_id, api_key) = insert_key(&tx, rowid, publishable, name, at).await?;
    let version = bump(&tx).await?;
    tx.commit().await?;
    Ok((NewKey { key_id, api_key }, version))
}

/// As `db::sqlite::keys`'s: the account's live keys at `at`, its rolled keys past their
/// end revoked first; under the account's lock.
async fn live_keys(tx: &Transaction<'_>, account: i64, at: i64) -> Result<u64, AccountError> {
    tx.execute(&admin::end_rolled_keys("$1", "$2"), &[&account, &at])
        .await?;
    let live: i64 = tx
        .query_one(
            &format!(
                "SELECT count(*) FROM api_keys WHERE account_id = $1 AND {}",
                admin::live_keys("$2")
            ),
            &[&account, &at],
        )
        .await?
        .get(0);
    Ok(u64::try_from(live).unwrap_or(0))
}

/// As `db::sqlite::keys::roll_key`; and the version.
pub async fn roll_key(
    client: &mut Client,
    account_public_id: &AccountId,
    key_public_id: &KeyId,
    ends: i64,
    now: SystemTime,
) -> Result<(NewKey, i64), AccountError> {
    let at = unix_secs(now);
    let tx = client.transaction().await?;
    let (rowid, _, _) = lock_account(&tx, account_public_id).await?;
    let old = tx
        .query_opt(
            "SELECT kind, origins, per_ip_minute, name,
                    revoked_at IS NOT NULL OR coalesce(expires_at <= $3, false),
                    max_per_minute, max_per_day, expires_at IS NOT NULL
             FROM api_keys WHERE account_id = $1 AND public_id = $2",
            &[&rowid, &key_public_id, &at],
        )
        .await?
        .ok_or_else(|| AccountError::UnknownKey(key_public_id.clone()))?;
    let publishable = successor_rules(old.get(4), old.get(7), old.try_get(0)?, || {
        publishable_rules(old.get(1), old.get(2), (old.get(5), old.get(6)))
            .map_err(|why| AccountError::Unexpected(anyhow::anyhow!("{why}")))
    })?;
    key_room(live_keys(&tx, rowid, at).await?, true)?;
    let name: Option<String> = old.get(3);
    let (key_id, api_key) =
        insert_key(&tx, rowid, publishable.as_ref(), name.as_deref(), at).await?;
    tx.execute(
        "UPDATE api_keys SET expires_at = least(coalesce(expires_at, $2), $2) WHERE public_id = $1",
        &[&key_public_id, &ends],
    )
    .await?;
    let version = bump(&tx).await?;
    tx.commit().await?;
    Ok((NewKey { key_id, api_key }, version))
}

/// Revokes the key (again: no error, the first time stays); the version.
pub async fn revoke_key(
    client: &mut Client,
    key_public_id: &KeyId,
    now: SystemTime,
) -> Result<i64, AccountError> {
    let tx = client.transaction().await?;
    let found = tx
        .execute(
            "UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2) WHERE public_id = $1",
            &[&key_public_id, &unix_secs(now)],
        )
        .await?;
    if found == 0 {
        return Err(AccountError::UnknownKey(key_public_id.clone()));
    }
    let version = bump(&tx).await?;
    tx.commit().await?;
    Ok(version)
}
