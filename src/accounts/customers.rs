//! Accounts as the operator and the customer change and read them: creation, balance
//! changes, limits, the ledger and usage reports.

use std::time::SystemTime;

use crate::db::admin::{
    AccountError, AccountLine, AccountView, Audited, LedgerPage, LedgerQuery, NewAccount,
    UsageLine, UsageQuery,
};
use crate::db::{pg, sqlite};
use crate::domain::admin::{AuditAction, BalanceChange, LimitsChange};
use crate::domain::ids::AccountId;
use crate::domain::money::Micros;
use crate::domain::rate_limit::Limits;

use super::{Admin, Store};

impl Admin {
    pub async fn create_account(
        &mut self,
        name: Option<&str>,
        now: SystemTime,
    ) -> anyhow::Result<NewAccount> {
        let (created, version) = match &mut self.store {
            Store::File(conn) => (sqlite::accounts::create_account(conn, name, now)?, 0),
            Store::Ledger(client) => pg::accounts::create_account(client, name, now).await?,
        };
        self.changed(version).await?;
        self.audit(
            Audited::Account(&created.account_id),
            AuditAction::AccountCreate,
            &format!("with key {}", created.key_id),
        )
        .await?;
        Ok(created)
    }

    /// The account as stored. Read by a command on the file, whose server is asked to
    /// flush first, the balance holds every charge answered before the call; read by that
    /// server's dashboard, it is its books' (the same, unflushed charges included) and
    /// nothing is flushed or reloaded. Cluster nodes flush every 10 ms.
    pub async fn show(&mut self, account_id: &AccountId) -> Result<AccountView, AccountError> {
        match &mut self.store {
            Store::File(conn) => match &self.books {
                Some(books) => {
                    let (rowid, mut view) = sqlite::accounts::show_row(conn, account_id)?;
                    if let Some(held) = books.balance_held(rowid) {
                        view.balance = held;
                    }
                    Ok(view)
                }
                None => {
                    Admin::flush_for_command(None, conn);
                    sqlite::accounts::show(conn, account_id)
                }
            },
            Store::Ledger(client) => pg::accounts::show(client, account_id).await,
        }
    }

    /// Applies a checked top-up or adjustment; the new balance.
    pub async fn change_balance(
        &mut self,
        account_id: &AccountId,
        change: &BalanceChange,
        now: SystemTime,
    ) -> anyhow::Result<Micros> {
        let (balance, version) = match &mut self.store {
            Store::File(conn) => (
                sqlite::accounts::change_balance(conn, account_id, change, now)?,
                0,
            ),
            Store::Ledger(client) => {
                pg::accounts::change_balance(client, account_id, change, now).await?
            }
        };
        self.changed(version).await?;
        let detail = format!(
            "{} USD{}; balance {} USD",
            change.amount(),
            change.note().map(|n| format!(" ({n})")).unwrap_or_default(),
            balance
        );
        self.audit(Audited::Account(account_id), change.action(), &detail)
            .await?;
        Ok(balance)
    }

    /// Applies a checked change of limits; the limits in force.
    pub async fn set_limits(
        &mut self,
        account_id: &AccountId,
        change: LimitsChange,
    ) -> anyhow::Result<Limits> {
        let (limits, version) = match &mut self.store {
            Store::File(conn) => (sqlite::accounts::set_limits(conn, account_id, change)?, 0),
            Store::Ledger(client) => pg::accounts::set_limits(client, account_id, change).await?,
        };
        self.changed(version).await?;
        let window = |l: Option<u64>| l.map_or("off".to_owned(), |n| n.to_string());
        let detail = format!(
            "per minute {}, per hour {}, per day {}",
            window(limits.per_minute),
            window(limits.per_hour),
            window(limits.per_day)
        );
        self.audit(
            Audited::Account(account_id),
            AuditAction::LimitsSet,
            &detail,
        )
        .await?;
        Ok(limits)
    }

    /// Every account, oldest first (`now`, unix seconds: for "today").
    pub async fn account_lines(&mut self, now: i64) -> anyhow::Result<Vec<AccountLine>> {
        match &mut self.store {
            Store::File(conn) => sqlite::reports::account_lines(conn, now),
            Store::Ledger(client) => pg::reports::account_lines(client, now).await,
        }
    }

    /// The account's ledger rows `query` asks for (through the ledger's index by
    /// account); for a command on the file, its server flushes first
    /// (`flush_for_command`).
    pub async fn ledger_entries(
        &mut self,
        account_id: &AccountId,
        query: &LedgerQuery,
    ) -> Result<LedgerPage, AccountError> {
        match &mut self.store {
            Store::File(conn) => {
                Admin::flush_for_command(self.books.as_ref(), conn);
                sqlite::reports::ledger_entries(conn, account_id, query)
            }
            Store::Ledger(client) => pg::reports::ledger_entries(client, account_id, query).await,
        }
    }

    /// Charges per day, account and endpoint (and key), as `query` asks (for a command on
    /// the file, its server flushes first: `flush_for_command`).
    pub async fn usage(&mut self, query: &UsageQuery) -> Result<Vec<UsageLine>, AccountError> {
        match &mut self.store {
            Store::File(conn) => {
                Admin::flush_for_command(self.books.as_ref(), conn);
                sqlite::reports::usage(conn, query)
            }
            Store::Ledger(client) => pg::reports::usage(client, query).await,
        }
    }
}
