//! The `api_keys` table: create and revoke keys (the CLI), load the active ones (the
//! server's books).

use std::time::SystemTime;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::db::admin::{self, AccountError, NewKey, key_room, successor_rules};
use crate::db::rows::{ActiveKey, unix_secs};
use crate::db::sqlite::decode::{count, find_account, publishable_rules};
use crate::domain::api_key::{self, ApiKey, KeyHash, KeyKind, Publishable};
use crate::domain::charge::Caller;
use crate::domain::ids::{AccountId, KeyId};

/// Inserts a key of the account: secret, or publishable with its rules.
pub(crate) fn insert_key(
    conn: &Connection,
    account_rowid: i64,
    publishable: Option<&Publishable>,
    name: Option<&str>,
    at: i64,
) -> rusqlite::Result<(KeyId, ApiKey)> {
    let (key_id, kind, api_key) = api_key::fresh_key(publishable);
    let origins = publishable.map(Publishable::stored_origins);
    conn.execute(
        "INSERT INTO api_keys (public_id, key_hash, account_id, created_at, kind, origins,
                               per_ip_minute, name, hint, max_per_minute, max_per_day)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![
            key_id,
            &api_key.hash()[..],
            account_rowid,
            at,
            kind,
            origins,
            publishable.map(|p| p.per_ip_minute),
            name,
            api_key.hint(),
            publishable.and_then(|p| p.budget.per_minute),
            publishable.and_then(|p| p.budget.per_day),
        ],
    )?;
    Ok((key_id, api_key))
}

/// A new key of the account: secret (`publishable` `None`) or publishable, named or not;
/// refused when the account holds `MAX_LIVE_KEYS` live keys already (`key_room`).
pub fn create_key(
    conn: &mut Connection,
    account_public_id: &AccountId,
    publishable: Option<&Publishable>,
    name: Option<&str>,
    now: SystemTime,
) -> Result<NewKey, AccountError> {
    let at = unix_secs(now);
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (rowid, _) = find_account(&tx, account_public_id)?;
    key_room(live_keys(&tx, rowid, at)?, false)?;
    let (key_id, api_key) = insert_key(&tx, rowid, publishable, name, at)?;
    tx.commit()?;
    Ok(NewKey { key_id, api_key })
}

/// The account's live keys at `at` (unix seconds), its rolled keys past their end revoked
/// first (`end_rolled_keys`); in the caller's write transaction.
fn live_keys(tx: &Connection, account: i64, at: i64) -> Result<u64, AccountError> {
    tx.execute(&admin::end_rolled_keys("?1", "?2"), params![account, at])?;
    let live: i64 = tx.query_row(
        &format!(
            "SELECT count(*) FROM api_keys WHERE account_id = ?1 AND {}",
            admin::live_keys("?2")
        ),
        params![account, at],
        |r| r.get(0),
    )?;
    Ok(count(live))
}

/// Rolls a live key of the account: a new key of the same kind, rules and name, shown
/// once; the old one keeps working until `ends` (unix seconds), then is refused. Not a key
/// in its grace (409); at the cap, one roll goes (`key_room`).
pub fn roll_key(
    conn: &mut Connection,
    account_public_id: &AccountId,
    key_public_id: &KeyId,
    ends: i64,
    now: SystemTime,
) -> Result<NewKey, AccountError> {
    let at = unix_secs(now);
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (rowid, _) = find_account(&tx, account_public_id)?;
    let old = tx
        .query_row(
            "SELECT kind, origins, per_ip_minute, name, revoked_at IS NOT NULL
                    OR coalesce(expires_at <= ?3, 0), max_per_minute, max_per_day,
                    expires_at IS NOT NULL
             FROM api_keys WHERE account_id = ?1 AND public_id = ?2",
            params![rowid, key_public_id, at],
            |r| {
                Ok((
                    r.get::<_, KeyKind>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, Option<u32>>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    (r.get::<_, bool>(4)?, r.get::<_, bool>(7)?),
                    (r.get::<_, Option<u32>>(5)?, r.get::<_, Option<u32>>(6)?),
                ))
            },
        )
        .optional()?
        .ok_or_else(|| AccountError::UnknownKey(key_public_id.clone()))?;
    let (kind, origins, per_ip, name, (revoked, in_grace), budget) = old;
    let publishable = successor_rules(revoked, in_grace, kind, || {
        publishable_rules(origins, per_ip, budget, 1)
            .map_err(|why| AccountError::Unexpected(anyhow::anyhow!(why)))
    })?;
    key_room(live_keys(&tx, rowid, at)?, true)?;
    let (key_id, api_key) = insert_key(&tx, rowid, publishable.as_ref(), name.as_deref(), at)?;
    tx.execute(
        "UPDATE api_keys SET expires_at = min(coalesce(expires_at, ?2), ?2) WHERE public_id = ?1",
        params![key_public_id, ends],
    )?;
    tx.commit()?;
    Ok(NewKey { key_id, api_key })
}

/// Revokes the key; revoking a revoked key again is not an error (its first revocation
/// time stays).
pub fn revoke_key(
    conn: &mut Connection,
    key_public_id: &KeyId,
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
        return Err(AccountError::UnknownKey(key_public_id.clone()));
    }
    tx.execute(
        "UPDATE api_keys SET revoked_at = ?2 WHERE public_id = ?1 AND revoked_at IS NULL",
        params![key_public_id, unix_secs(now)],
    )?;
    tx.commit()?;
    Ok(())
}

/// Every active key (the server's books).
pub fn load_active(conn: &Connection) -> rusqlite::Result<Vec<ActiveKey>> {
    let mut stmt = conn.prepare_cached(
        "SELECT key_hash, account_id, id, kind, origins, per_ip_minute, expires_at,
                max_per_minute, max_per_day
         FROM api_keys WHERE revoked_at IS NULL
           AND (expires_at IS NULL OR expires_at > unixepoch())",
    )?;
    stmt.query_map([], |r| {
        let hash: Vec<u8> = r.get(0)?;
        let hash: KeyHash = hash
            .try_into()
            .map_err(|_| rusqlite::Error::IntegralValueOutOfRange(0, 0))?;
        let publishable = match r.get::<_, KeyKind>(3)? {
            KeyKind::Secret => None,
            KeyKind::Publishable => Some(publishable_rules(
                r.get(4)?,
                r.get(5)?,
                (r.get(7)?, r.get(8)?),
                4,
            )?),
        };
        Ok(ActiveKey {
            hash,
            caller: Caller {
                account_id: r.get(1)?,
                key_id: r.get(2)?,
            },
            publishable,
            expires_at: r.get(6)?,
        })
    })?
    .collect()
}
