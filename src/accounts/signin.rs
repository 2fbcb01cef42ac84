//! Sign-in: the operator's providers, the sign-ins in flight (state, nonce, PKCE
//! verifier, once), the identities that sign in and the accounts they make or link.

use crate::db::admin::{AccountError, Audited, IdentityView, Provider, SignIn, SignedIn, Signups};
use crate::db::{pg, sqlite};
use crate::domain::admin::AuditAction;
use crate::domain::ids::{AccountId, ProviderName};

use super::{Admin, Store};

impl Admin {
    /// Adds a provider; every server offers it before this returns (the sign-in page's
    /// providers are held in memory: `api::account`).
    pub async fn add_provider(&mut self, p: &Provider, now: i64) -> Result<(), AccountError> {
        let version = match &mut self.store {
            Store::File(conn) => {
                sqlite::dashboard::add_provider(conn, p, now)?;
                0
            }
            Store::Ledger(client) => pg::dashboard::add_provider(client, p, now).await?,
        };
        Ok(self.changed(version).await?)
    }

    pub async fn providers(&mut self) -> Result<Vec<Provider>, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::providers(conn),
            Store::Ledger(client) => pg::dashboard::providers(client).await,
        }
    }

    /// Whether a provider of that name was there; no server offers it once this returns.
    /// The sessions opened with its identities end with it.
    pub async fn remove_provider(
        &mut self,
        name: &ProviderName,
        now: i64,
    ) -> Result<bool, AccountError> {
        let (removed, version) = match &mut self.store {
            Store::File(conn) => (sqlite::dashboard::remove_provider(conn, name, now)?, 0),
            Store::Ledger(client) => pg::dashboard::remove_provider(client, name, now).await?,
        };
        self.changed(version).await?;
        Ok(removed)
    }

    pub async fn put_signin(
        &mut self,
        state_hash: &[u8; 32],
        signin: &SignIn,
        now: i64,
    ) -> Result<(), AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::put_signin(conn, state_hash, signin, now),
            Store::Ledger(client) => {
                pg::dashboard::put_signin(client, state_hash, signin, now).await
            }
        }
    }

    /// The sign-in of this state, once: a second call, or one too late, finds none.
    pub async fn take_signin(
        &mut self,
        state_hash: &[u8; 32],
        now: i64,
    ) -> Result<Option<SignIn>, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::take_signin(conn, state_hash, now),
            Store::Ledger(client) => pg::dashboard::take_signin(client, state_hash, now).await,
        }
    }

    /// The account of an identity that signed in: found, or made with the free allowance
    /// (held by the server, every node, before this returns).
    pub async fn sign_in(
        &mut self,
        identity: &IdentityView,
        signups: &Signups,
        now: i64,
    ) -> Result<SignedIn, AccountError> {
        let (signed_in, version) = match &mut self.store {
            Store::File(conn) => {
                let signed_in = sqlite::dashboard::sign_in(conn, identity, signups, now)?;
                let created = signed_in.created.then_some(0);
                (signed_in, created)
            }
            Store::Ledger(client) => pg::dashboard::sign_in(client, identity, signups, now).await?,
        };
        if let Some(version) = version {
            self.changed(version).await?;
            let detail = format!(
                "first sign-in with {} from {}",
                identity.provider, signups.from
            );
            self.audit(
                Audited::Account(&signed_in.account_id),
                AuditAction::AccountCreate,
                &detail,
            )
            .await?;
        }
        Ok(signed_in)
    }

    pub async fn link(
        &mut self,
        account_id: &AccountId,
        identity: &IdentityView,
        now: i64,
    ) -> Result<(), AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::link(conn, account_id, identity, now)?,
            Store::Ledger(client) => pg::dashboard::link(client, account_id, identity, now).await?,
        }
        let detail = format!("{} ({})", identity.provider, identity.issuer);
        self.audit(
            Audited::Account(account_id),
            AuditAction::IdentityLink,
            &detail,
        )
        .await
    }

    pub async fn unlink(
        &mut self,
        account_id: &AccountId,
        issuer: &str,
        subject: &str,
        now: i64,
    ) -> Result<(), AccountError> {
        let ended = match &mut self.store {
            Store::File(conn) => sqlite::dashboard::unlink(conn, account_id, issuer, subject, now)?,
            Store::Ledger(client) => {
                pg::dashboard::unlink(client, account_id, issuer, subject, now).await?
            }
        };
        let detail = match ended {
            0 => issuer.to_owned(),
            n => format!("{issuer}; ended the {n} session(s) it opened"),
        };
        self.audit(
            Audited::Account(account_id),
            AuditAction::IdentityUnlink,
            &detail,
        )
        .await
    }

    pub async fn identities(
        &mut self,
        account_id: &AccountId,
    ) -> Result<Vec<IdentityView>, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::identities(conn, account_id),
            Store::Ledger(client) => pg::dashboard::identities(client, account_id).await,
        }
    }
}
