//! Top-ups by card through the one admin interface (docs/payments.md): the operator's
//! settings, the top-ups a customer starts in the dashboard, and what the processor's
//! webhook confirms (a payment credited once, a refund taken back), each held by the
//! server (every node) before the call returns and written to the account's audit log.

use crate::db::admin::TopupView;
use crate::db::admin::{AccountError, Audited, Credited, Payment, PaymentSettings, Refunded};
use crate::db::{pg, sqlite};
use crate::domain::admin::AuditAction;
use crate::domain::ids::{AccountId, TopupId};
use crate::domain::money::Micros;
use crate::domain::payments::{Clawback, TopupStatus};

use super::{Admin, Store};

impl Admin {
    /// Sets the card payments' settings; every server holds them before this returns (a
    /// webhook is checked against the settings a server holds in memory: `api::account`).
    pub async fn set_payments(
        &mut self,
        settings: &PaymentSettings,
        now: i64,
    ) -> Result<(), AccountError> {
        let version = match &mut self.store {
            Store::File(conn) => {
                sqlite::payments::set_settings(conn, settings, now)?;
                0
            }
            Store::Ledger(client) => pg::payments::set_settings(client, settings, now).await?,
        };
        Ok(self.changed(version).await?)
    }

    pub async fn payments(&mut self) -> Result<Option<PaymentSettings>, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::payments::settings(conn),
            Store::Ledger(client) => pg::payments::settings(client).await,
        }
    }

    /// Turns card payments off; whether they were on. Every server holds it before this
    /// returns, as `set_payments`.
    pub async fn payments_off(&mut self) -> Result<bool, AccountError> {
        let (was_on, version) = match &mut self.store {
            Store::File(conn) => (sqlite::payments::clear_settings(conn)?, 0),
            Store::Ledger(client) => pg::payments::clear_settings(client).await?,
        };
        self.changed(version).await?;
        Ok(was_on)
    }

    /// A pending top-up of `amount` the account's customer is about to pay; its id.
    pub async fn start_topup(
        &mut self,
        account_id: &AccountId,
        amount: Micros,
        now: i64,
    ) -> Result<TopupId, AccountError> {
        let topup_id = match &mut self.store {
            Store::File(conn) => sqlite::payments::new_topup(conn, account_id, amount, now)?,
            Store::Ledger(client) => {
                pg::payments::new_topup(client, account_id, amount, now).await?
            }
        };
        let detail = format!("{topup_id}: {amount} USD by card, pending");
        self.audit(
            Audited::Account(account_id),
            AuditAction::TopupStart,
            &detail,
        )
        .await?;
        Ok(topup_id)
    }

    /// The processor made the top-up's payment page.
    pub async fn topup_opened(
        &mut self,
        topup_id: &TopupId,
        session_id: &str,
        url: &str,
    ) -> Result<(), AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::payments::topup_opened(conn, topup_id, session_id, url),
            Store::Ledger(client) => {
                pg::payments::topup_opened(client, topup_id, session_id, url).await
            }
        }
    }

    /// A pending top-up ends unpaid (`Expired`, `Failed`); whether it was pending.
    pub async fn close_topup(
        &mut self,
        topup_id: Option<&TopupId>,
        session_id: Option<&str>,
        status: TopupStatus,
    ) -> Result<bool, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::payments::close_topup(conn, topup_id, session_id, status),
            Store::Ledger(client) => {
                pg::payments::close_topup(client, topup_id, session_id, status).await
            }
        }
    }

    /// The account's top-ups by card, newest first.
    pub async fn topups(&mut self, account_id: &AccountId) -> Result<Vec<TopupView>, AccountError> {
        match &mut self.store {
            Store::File(conn) => sqlite::payments::topups(conn, account_id),
            Store::Ledger(client) => pg::payments::topups(client, account_id).await,
        }
    }

    /// Credits a payment the processor confirmed, once per Checkout Session; held by the
    /// server (every node) when this returns `Now`.
    pub async fn credit_payment(
        &mut self,
        paid: &Payment,
        now: i64,
    ) -> Result<Credited, AccountError> {
        let (credited, version) = match &mut self.store {
            Store::File(conn) => {
                let credited = sqlite::payments::credit(conn, paid, now)?;
                let changed = matches!(credited, Credited::Now { .. }).then_some(0);
                (credited, changed)
            }
            Store::Ledger(client) => pg::payments::credit(client, paid, now).await?,
        };
        if let (
            Some(version),
            Credited::Now {
                account_id,
                topup_id,
                amount,
                balance,
            },
        ) = (version, &credited)
        {
            self.changed(version).await?;
            let detail = format!(
                "{topup_id}: {amount} USD paid by card ({}); balance {balance} USD",
                crate::domain::payments::credit_note(&paid.session_id, paid.payment.as_deref())
            );
            self.audit(Audited::Account(account_id), AuditAction::Topup, &detail)
                .await?;
        }
        if let Credited::Mismatch {
            account_id,
            topup_id,
            asked,
        } = &credited
        {
            let detail = format!(
                "{topup_id}: Stripe Checkout {} reports {} {} paid for a top-up of {asked} \
                 USD; nothing credited",
                paid.session_id, paid.amount, paid.currency
            );
            self.audit(
                Audited::Account(account_id),
                AuditAction::TopupMismatch,
                &detail,
            )
            .await?;
        }
        if let Credited::Frozen {
            account_id,
            topup_id,
            why,
        } = &credited
        {
            let detail = format!(
                "{topup_id}: Stripe Checkout {} reports {} {} paid while top-ups are frozen \
                 ({why}); nothing credited",
                paid.session_id, paid.amount, paid.currency
            );
            self.audit(
                Audited::Account(account_id),
                AuditAction::TopupFrozen,
                &detail,
            )
            .await?;
        }
        Ok(credited)
    }

    /// Takes back a refund of `payment` (the processor's running total) or a dispute of it
    /// (what is left of its credit, once per dispute; the account's top-ups frozen) from
    /// the balance, never below zero; what could not be taken back is the shortfall, in
    /// the audit log and the top-up. A server on the file flushes first, so the balance
    /// split is the one after every charge answered.
    pub async fn refund_payment(
        &mut self,
        payment: &str,
        topup_id: Option<&TopupId>,
        clawback: &Clawback,
        now: i64,
    ) -> Result<Refunded, AccountError> {
        let (refunded, version) = match &mut self.store {
            Store::File(conn) => {
                Admin::tell_server(self.books.as_ref(), conn);
                let refunded = sqlite::payments::refund(conn, payment, topup_id, clawback, now)?;
                let changed = match &refunded {
                    Refunded::Now { .. } => Some(0),
                    _ => None,
                };
                (refunded, changed)
            }
            Store::Ledger(client) => {
                pg::payments::refund(client, payment, topup_id, clawback, now).await?
            }
        };
        if let Some(version) = version {
            self.changed(version).await?;
        }
        if let Refunded::Now {
            account_id,
            topup_id,
            owed,
            split,
            balance,
        } = &refunded
        {
            let (action, what) = match clawback {
                Clawback::Refund { .. } => (AuditAction::Refund, "refunded".to_owned()),
                Clawback::Dispute { dispute } => (
                    AuditAction::Dispute,
                    format!("disputed ({dispute}); top-ups by card frozen"),
                ),
            };
            let detail = format!(
                "{topup_id}: {owed} USD of card payment {payment} {what}; {} USD taken \
                 back, {} USD could not be; balance {balance} USD",
                split.taken, split.shortfall
            );
            self.audit(Audited::Account(account_id), action, &detail)
                .await?;
        }
        Ok(refunded)
    }

    /// Lets the account start top-ups by card again after a dispute froze them (`postal
    /// account unfreeze`); why they were frozen, or `None` when they were not (nothing
    /// changed, nothing audited).
    pub async fn unfreeze_topups(
        &mut self,
        account_id: &AccountId,
    ) -> Result<Option<String>, AccountError> {
        let was = match &mut self.store {
            Store::File(conn) => sqlite::payments::unfreeze(conn, account_id)?,
            Store::Ledger(client) => pg::payments::unfreeze(client, account_id).await?,
        };
        if let Some(why) = &was {
            let detail = format!("top-ups by card allowed again (frozen by {why})");
            self.audit(
                Audited::Account(account_id),
                AuditAction::TopupsUnfreeze,
                &detail,
            )
            .await?;
        }
        Ok(was)
    }
}
