//! API keys as customers and the operator manage them: made, named, rolled (the old key
//! working through its grace), revoked, listed.

use std::time::SystemTime;

use crate::db::admin::{AccountError, Audited, KeyLine, NewKey};
use crate::db::{pg, sqlite};
use crate::domain::admin::AuditAction;
use crate::domain::api_key::Publishable;
use crate::domain::date::unix_secs;
use crate::domain::ids::{AccountId, KeyId};

use super::{Admin, Store};

impl Admin {
    pub async fn create_key(
        &mut self,
        account_id: &AccountId,
        publishable: Option<&Publishable>,
        name: Option<&str>,
        now: SystemTime,
    ) -> Result<NewKey, AccountError> {
        let (key, version) = match &mut self.store {
            Store::File(conn) => (
                sqlite::keys::create_key(conn, account_id, publishable, name, now)?,
                0,
            ),
            Store::Ledger(client) => {
                pg::keys::create_key(client, account_id, publishable, name, now).await?
            }
        };
        self.changed(version).await?;
        let detail = format!(
            "{} ({}{})",
            key.key_id,
            if publishable.is_some() {
                "publishable"
            } else {
                "secret"
            },
            name.map(|n| format!(", named {n:?}")).unwrap_or_default()
        );
        self.audit(
            Audited::Account(account_id),
            AuditAction::KeyCreate,
            &detail,
        )
        .await?;
        Ok(key)
    }

    pub async fn revoke_key(&mut self, key_id: &KeyId, now: SystemTime) -> anyhow::Result<()> {
        let version = match &mut self.store {
            Store::File(conn) => {
                sqlite::keys::revoke_key(conn, key_id, now)?;
                0
            }
            Store::Ledger(client) => pg::keys::revoke_key(client, key_id, now).await?,
        };
        self.changed(version).await?;
        self.audit(
            Audited::Key(key_id),
            AuditAction::KeyRevoke,
            key_id.as_str(),
        )
        .await?;
        Ok(())
    }

    /// The account's keys, oldest first, each with its last use and queries of the last
    /// 30 days.
    pub async fn keys(&mut self, account_id: &AccountId) -> Result<Vec<KeyLine>, AccountError> {
        let now = unix_secs(SystemTime::now());
        match &mut self.store {
            Store::File(conn) => sqlite::reports::keys(conn, account_id, now),
            Store::Ledger(client) => pg::reports::keys(client, account_id, now).await,
        }
    }

    pub async fn rename_key(
        &mut self,
        account_id: &AccountId,
        key_id: &KeyId,
        name: Option<&str>,
    ) -> Result<(), AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::rename_key(conn, account_id, key_id, name)?,
            Store::Ledger(client) => {
                pg::dashboard::rename_key(client, account_id, key_id, name).await?
            }
        }
        let detail = format!(
            "{key_id} named {}",
            name.map_or("nothing".to_owned(), |n| format!("{n:?}"))
        );
        self.audit(
            Audited::Account(account_id),
            AuditAction::KeyRename,
            &detail,
        )
        .await
    }

    /// Rolls a live key of the account: the new key (shown once); the old one works until
    /// `ends` (unix seconds), on every node.
    pub async fn roll_key(
        &mut self,
        account_id: &AccountId,
        key_id: &KeyId,
        ends: i64,
        now: SystemTime,
    ) -> Result<NewKey, AccountError> {
        let (key, version) = match &mut self.store {
            Store::File(conn) => (
                sqlite::keys::roll_key(conn, account_id, key_id, ends, now)?,
                0,
            ),
            Store::Ledger(client) => {
                pg::keys::roll_key(client, account_id, key_id, ends, now).await?
            }
        };
        self.changed(version).await?;
        let end = crate::domain::date::rfc3339(ends);
        let detail = format!("{key_id} to {}; {key_id} works until {end}", key.key_id);
        self.audit(Audited::Account(account_id), AuditAction::KeyRoll, &detail)
            .await?;
        Ok(key)
    }

    /// Revokes a key of this account (`UnknownKey` for a key of another account).
    pub async fn revoke_own_key(
        &mut self,
        account_id: &AccountId,
        key_id: &KeyId,
        now: SystemTime,
    ) -> Result<(), AccountError> {
        if !self
            .keys(account_id)
            .await?
            .iter()
            .any(|k| k.key_id == *key_id)
        {
            return Err(AccountError::UnknownKey(key_id.clone()));
        }
        Ok(self.revoke_key(key_id, now).await?)
    }
}
