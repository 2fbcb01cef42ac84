//! Where an admin change acts: the SQLite file, whose running server is told of it
//! (`notify::announce`: it reloads before its next request), or a cluster's ledger, where
//! a change returns once every live node holds it (docs/cluster.md). One interface over
//! the two ledgers, for every caller of an admin operation (the CLI's `account`, `key`,
//! `ledger` and `usage` commands): each operation and its answer are written once, the
//! rules of a change once (`domain::admin`), the SQL once per dialect (`db::sqlite`,
//! `db::pg`, twins file for file).

use std::time::{Duration, SystemTime};

use rusqlite::Connection;
use tokio_postgres::Client;

use crate::billing::notify;
use crate::db::admin::{
    AccountError, AccountLine, AccountView, KeyLine, LedgerEntry, NewAccount, NewKey, UsageLine,
};
use crate::db::{pg, sqlite};
use crate::domain::admin::{BalanceChange, LimitsChange};
use crate::domain::api_key::Publishable;
use crate::domain::money::Micros;
use crate::domain::rate_limit::Limits;

/// How long a change to a cluster's ledger waits for the nodes to acknowledge it.
const CONFIRM_WAIT: Duration = Duration::from_secs(10);

/// The file, or the cluster's ledger (connected, schema migrated).
pub enum Admin {
    File(Connection),
    Ledger(Client),
}

impl Admin {
    /// A change committed at `version` (the ledger's; none for the file) holds where the
    /// change acts. Nodes that did not confirm within [`CONFIRM_WAIT`] are warned about
    /// on stderr: the change holds there after their next read of the ledger.
    async fn changed(&self, version: i64) -> anyhow::Result<()> {
        match self {
            Admin::File(conn) => notify::announce(conn),
            Admin::Ledger(client) => {
                let laggards = pg::changes::wait_for_nodes(client, version, CONFIRM_WAIT).await?;
                if !laggards.is_empty() {
                    eprintln!(
                        "warning: nodes {laggards:?} did not confirm the change within \
                         {CONFIRM_WAIT:?}; it holds there after their next read of the ledger"
                    );
                }
            }
        }
        Ok(())
    }

    pub async fn create_account(
        &mut self,
        name: Option<&str>,
        now: SystemTime,
    ) -> anyhow::Result<NewAccount> {
        let (created, version) = match self {
            Admin::File(conn) => (sqlite::accounts::create_account(conn, name, now)?, 0),
            Admin::Ledger(client) => pg::accounts::create_account(client, name, now).await?,
        };
        self.changed(version).await?;
        Ok(created)
    }

    /// The account as stored. A server on the file is asked to flush first, so the balance
    /// holds every charge answered before the call; cluster nodes flush every 10 ms.
    pub async fn show(&mut self, account_id: &str) -> Result<AccountView, AccountError> {
        match self {
            Admin::File(conn) => {
                notify::announce(conn);
                sqlite::accounts::show(conn, account_id)
            }
            Admin::Ledger(client) => pg::accounts::show(client, account_id).await,
        }
    }

    /// Applies a checked top-up or adjustment; the new balance.
    pub async fn change_balance(
        &mut self,
        account_id: &str,
        change: &BalanceChange,
        now: SystemTime,
    ) -> anyhow::Result<Micros> {
        let (balance, version) = match self {
            Admin::File(conn) => (
                sqlite::accounts::change_balance(conn, account_id, change, now)?,
                0,
            ),
            Admin::Ledger(client) => {
                pg::accounts::change_balance(client, account_id, change, now).await?
            }
        };
        self.changed(version).await?;
        Ok(balance)
    }

    /// Applies a checked change of limits; the limits in force.
    pub async fn set_limits(
        &mut self,
        account_id: &str,
        change: LimitsChange,
    ) -> anyhow::Result<Limits> {
        let (limits, version) = match self {
            Admin::File(conn) => (sqlite::accounts::set_limits(conn, account_id, change)?, 0),
            Admin::Ledger(client) => pg::accounts::set_limits(client, account_id, change).await?,
        };
        self.changed(version).await?;
        Ok(limits)
    }

    pub async fn create_key(
        &mut self,
        account_id: &str,
        publishable: Option<&Publishable>,
        now: SystemTime,
    ) -> anyhow::Result<NewKey> {
        let (key, version) = match self {
            Admin::File(conn) => (
                sqlite::keys::create_key(conn, account_id, publishable, now)?,
                0,
            ),
            Admin::Ledger(client) => {
                pg::keys::create_key(client, account_id, publishable, now).await?
            }
        };
        self.changed(version).await?;
        Ok(key)
    }

    pub async fn revoke_key(&mut self, key_id: &str, now: SystemTime) -> anyhow::Result<()> {
        let version = match self {
            Admin::File(conn) => {
                sqlite::keys::revoke_key(conn, key_id, now)?;
                0
            }
            Admin::Ledger(client) => pg::keys::revoke_key(client, key_id, now).await?,
        };
        self.changed(version).await
    }

    /// Every account, oldest first (`now`, unix seconds: for "today").
    pub async fn account_lines(&mut self, now: i64) -> anyhow::Result<Vec<AccountLine>> {
        match self {
            Admin::File(conn) => sqlite::reports::account_lines(conn, now),
            Admin::Ledger(client) => pg::reports::account_lines(client, now).await,
        }
    }

    /// The account's ledger in the order it was written, from `since` (unix seconds) on.
    pub async fn ledger_entries(
        &mut self,
        account_id: &str,
        since: Option<i64>,
    ) -> Result<Vec<LedgerEntry>, AccountError> {
        match self {
            Admin::File(conn) => sqlite::reports::ledger_entries(conn, account_id, since),
            Admin::Ledger(client) => pg::reports::ledger_entries(client, account_id, since).await,
        }
    }

    /// Charges of the last `days` UTC days, per day, account and endpoint.
    pub async fn usage(&mut self, days: u32, now: i64) -> anyhow::Result<Vec<UsageLine>> {
        match self {
            Admin::File(conn) => sqlite::reports::usage(conn, days, now),
            Admin::Ledger(client) => pg::reports::usage(client, days, now).await,
        }
    }

    /// The account's keys, oldest first.
    pub async fn keys(&mut self, account_id: &str) -> Result<Vec<KeyLine>, AccountError> {
        match self {
            Admin::File(conn) => sqlite::reports::keys(conn, account_id),
            Admin::Ledger(client) => pg::reports::keys(client, account_id).await,
        }
    }
}
