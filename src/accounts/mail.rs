//! The operator's mail relay through the one admin interface (`postal mail`,
//! docs/alerts.md): set, read, removed, on the file or the cluster's ledger. As the payment
//! settings, a change is the operator's and is not written to any account's audit log.

use crate::db::admin::{AccountError, MailSettings};
use crate::db::{pg, sqlite};

use super::{Admin, Store};

impl Admin {
    /// Sets the relay (settings checked by `alerts::mail::check` first); a sender reads it
    /// when it sends, so nothing is told of it.
    pub async fn set_mail(&mut self, settings: &MailSettings) -> Result<(), AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::mail::set_settings(conn, settings),
            Store::Ledger(client) => pg::mail::set_settings(client, settings).await,
        }
    }

    /// The relay, or `None`: e-mail alerts are off.
    pub async fn mail_settings(&mut self) -> Result<Option<MailSettings>, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::mail::settings(conn),
            Store::Ledger(client) => pg::mail::settings(client).await,
        }
    }

    /// Removes the relay (e-mail alerts off); whether there was one.
    pub async fn clear_mail(&mut self) -> Result<bool, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::mail::clear_settings(conn),
            Store::Ledger(client) => pg::mail::clear_settings(client).await,
        }
    }
}
