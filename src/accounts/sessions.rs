//! The dashboard's sessions: made at sign-in, found (and marked seen) per request, listed
//! and ended by their customer.

use crate::db::admin::{
    AccountError, Audited, LinkOffer, SessionIdentity, SessionRow, SessionView,
};
use crate::db::{pg, sqlite};
use crate::domain::admin::AuditAction;
use crate::domain::ids::{AccountId, SessionId};

use super::{Admin, Store};

impl Admin {
    /// A session of a sign-in, with its audit line: `how`, who signed in with what from
    /// where.
    pub async fn create_session(
        &mut self,
        id_hash: &[u8; 32],
        session: &SessionRow,
        how: &str,
    ) -> Result<(), AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::create_session(conn, id_hash, session)?,
            Store::Ledger(client) => {
                pg::dashboard::create_session(client, id_hash, session).await?
            }
        }
        let detail = format!("{} {how}", session.public_id.as_str());
        self.audit(
            Audited::Account(&session.account_id),
            AuditAction::SessionStart,
            &detail,
        )
        .await
    }

    /// The live session of this id (marked seen now, at most once a minute), `None` when
    /// unknown, ended or expired.
    pub async fn session(
        &mut self,
        id_hash: &[u8; 32],
        now: i64,
    ) -> Result<Option<SessionRow>, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::session(conn, id_hash, now),
            Store::Ledger(client) => pg::dashboard::session(client, id_hash, now).await,
        }
    }

    /// Records that the session `id_hash` signed in again now with `identity`: changes
    /// that need a recent sign-in are open to it for the next 15 minutes.
    /// With its audit line, `session.reauth`.
    pub async fn prove_session(
        &mut self,
        account_id: &AccountId,
        id_hash: &[u8; 32],
        identity: &SessionIdentity,
        now: i64,
    ) -> Result<(), AccountError> {
        let live = match &mut self.store {
            Store::File(conn) => sqlite::dashboard::prove_session(conn, id_hash, identity, now)?,
            Store::Ledger(client) => {
                pg::dashboard::prove_session(client, id_hash, identity, now).await?
            }
        };
        if !live {
            return Err(AccountError::Invalid(
                "This session ended while it signed in again; sign in.".into(),
            ));
        }
        let detail = format!(
            "signed in again with {} ({}, subject {})",
            identity.provider, identity.issuer, identity.subject
        );
        self.audit(
            Audited::Account(account_id),
            AuditAction::SessionAgain,
            &detail,
        )
        .await
    }

    /// Keeps the identity a link brought back on the session until its customer confirms
    /// it; `None` drops it.
    pub async fn offer_link(
        &mut self,
        id_hash: &[u8; 32],
        offer: Option<&LinkOffer>,
    ) -> Result<(), AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::offer_link(conn, id_hash, offer),
            Store::Ledger(client) => pg::dashboard::offer_link(client, id_hash, offer).await,
        }
    }

    /// Ends the account's session `public_id`; whether it was live.
    pub async fn end_session(
        &mut self,
        account_id: &AccountId,
        public_id: &SessionId,
        now: i64,
    ) -> Result<bool, AccountError> {
        let ended = match &mut self.store {
            Store::File(conn) => sqlite::dashboard::end_session(conn, account_id, public_id, now)?,
            Store::Ledger(client) => {
                pg::dashboard::end_session(client, account_id, public_id, now).await?
            }
        };
        if ended {
            self.audit(
                Audited::Account(account_id),
                AuditAction::SessionEnd,
                public_id.as_str(),
            )
            .await?;
        }
        Ok(ended)
    }

    pub async fn sessions(
        &mut self,
        account_id: &AccountId,
        now: i64,
    ) -> Result<Vec<SessionView>, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::dashboard::sessions(conn, account_id, now),
            Store::Ledger(client) => pg::dashboard::sessions(client, account_id, now).await,
        }
    }
}
