//! Alerts as the customer sets and reads them, and as the sender claims and records
//! their deliveries (docs/alerts.md).

use std::time::SystemTime;

use crate::db::admin::{AccountError, Audited};
use crate::db::{pg, sqlite};
use crate::domain::admin::AuditAction;
use crate::domain::alerts::{AlertSettings, AlertsView, Due, Finished};
use crate::domain::date::unix_secs;
use crate::domain::ids::AccountId;

use super::{Admin, Store};

impl Admin {
    pub async fn alerts(&mut self, account_id: &AccountId) -> Result<AlertsView, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::alerts::alerts(conn, account_id),
            Store::Ledger(client) => pg::alerts::alerts(client, account_id).await,
        }
    }

    /// Sets the account's alerts; the webhook's new secret when its URL was set or
    /// changed (`fresh_secret`, shown once).
    pub async fn set_alerts(
        &mut self,
        account_id: &AccountId,
        settings: &AlertSettings,
        fresh_secret: &str,
    ) -> Result<Option<String>, AccountError> {
        let now = unix_secs(SystemTime::now());
        let shown = match &mut self.store {
            Store::File(conn) => {
                sqlite::alerts::set_alerts(conn, account_id, settings, fresh_secret, now)?
            }
            Store::Ledger(client) => {
                pg::alerts::set_alerts(client, account_id, settings, fresh_secret, now).await?
            }
        };
        let detail = format!(
            "balance below {}, limit percent {}, e-mail {}, webhook {}{}",
            settings
                .balance_below
                .map_or("off".to_owned(), |m| format!("{m} USD")),
            settings
                .limit_percent
                .map_or("off".to_owned(), |p| format!("{p}%")),
            if settings.email { "on" } else { "off" },
            settings
                .webhook_url
                .as_deref()
                .map_or("off".to_owned(), url_host),
            if shown.is_some() {
                " (a new signing secret)"
            } else {
                ""
            }
        );
        self.audit(
            Audited::Account(account_id),
            AuditAction::AlertsSet,
            &detail,
        )
        .await?;
        Ok(shown)
    }

    /// Gives the account's webhook a new signing secret; refused without a webhook.
    pub async fn roll_alert_secret(
        &mut self,
        account_id: &AccountId,
        fresh_secret: &str,
    ) -> Result<(), AccountError> {
        let now = unix_secs(SystemTime::now());
        match &mut self.store {
            Store::File(conn) => sqlite::alerts::roll_secret(conn, account_id, fresh_secret, now)?,
            Store::Ledger(client) => {
                pg::alerts::roll_secret(client, account_id, fresh_secret, now).await?
            }
        }
        self.audit(
            Audited::Account(account_id),
            AuditAction::AlertsSecretRoll,
            "a new signing secret for the webhook",
        )
        .await
    }

    /// A `test` event: its id and the channels it goes to.
    pub async fn test_alert(
        &mut self,
        account_id: &AccountId,
    ) -> Result<(String, Vec<String>), AccountError> {
        let now = unix_secs(SystemTime::now());
        let (event, channels) = match &mut self.store {
            Store::File(conn) => sqlite::alerts::test_event(conn, account_id, now)?,
            Store::Ledger(client) => pg::alerts::test_event(client, account_id, now).await?,
        };
        let detail = match channels.is_empty() {
            true => format!("{event}, to no channel"),
            false => format!("{event}, to {}", channels.join(" and ")),
        };
        self.audit(
            Audited::Account(account_id),
            AuditAction::AlertsTest,
            &detail,
        )
        .await?;
        Ok((event, channels))
    }

    /// The sender's claim: up to `limit` deliveries due now, held for `lease` seconds.
    pub async fn claim_deliveries(
        &mut self,
        limit: u32,
        lease: i64,
    ) -> Result<Vec<Due>, AccountError> {
        let now = unix_secs(SystemTime::now());
        match &mut self.store {
            Store::File(conn) => sqlite::alerts::claim(conn, now, limit, lease),
            Store::Ledger(client) => pg::alerts::claim(client, now, limit, lease).await,
        }
    }

    /// How a claimed attempt ended.
    pub async fn finish_delivery(
        &mut self,
        delivery_id: i64,
        finished: &Finished,
    ) -> Result<(), AccountError> {
        let now = unix_secs(SystemTime::now());
        match &mut self.store {
            Store::File(conn) => sqlite::alerts::finish(conn, delivery_id, finished, now),
            Store::Ledger(client) => pg::alerts::finish(client, delivery_id, finished, now).await,
        }
    }

    /// Forgets the attempts and events older than `before` (unix seconds) that are done.
    pub async fn purge_alerts(&mut self, before: i64) -> Result<u64, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::alerts::purge(conn, before),
            Store::Ledger(client) => pg::alerts::purge(client, before).await,
        }
    }
}

/// A webhook URL as the audit log names it: its scheme and host (a path or query may hold
/// a token of the receiver's).
fn url_host(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    format!("{scheme}://{host}/…")
}
