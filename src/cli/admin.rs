//! Where the admin commands act: the SQLite file, whose running server is told of a
//! change (`notify::announce`: it reloads before its next request), or a cluster's
//! ledger (`--ledger URL`), where a change returns once every live node holds it
//! (docs/cluster.md). One method per operation over both, so that each command and its
//! output are written once (`account`, `key`, `usage`).

use std::path::Path;
use std::time::SystemTime;

use rusqlite::Connection;
use tokio_postgres::Client;

use postal::billing::notify;
use postal::db::accounts::{self, AccountView, LimitsChange, NewAccount};
use postal::db::keys::{self, NewKey};
use postal::db::pg::admin;
use postal::db::reports::{self, AccountLine, KeyLine, UsageLine};
use postal::db::{self, rows::AccountError};
use postal::domain::api_key::Publishable;
use postal::domain::money::Micros;
use postal::domain::rate_limit::Limits;

use super::cluster;

/// The file, or the cluster's ledger.
pub(super) enum Admin {
    File(Connection),
    Ledger(Client),
}

/// Runs `work` on the file at `db`, or with `ledger` on the cluster's ledger (connected,
/// schema migrated).
pub(super) fn run<T>(
    db: &Path,
    ledger: Option<&str>,
    work: impl AsyncFnOnce(&mut Admin) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    cluster::block_on(async {
        let mut admin = match ledger {
            Some(url) => Admin::Ledger(cluster::connect(url).await?),
            None => Admin::File(db::open(db)?),
        };
        work(&mut admin).await
    })
}

impl Admin {
    /// A change committed at `version` (the ledger's; none for the file) holds where the
    /// command acts.
    async fn changed(&self, version: i64) -> anyhow::Result<()> {
        match self {
            Admin::File(conn) => notify::announce(conn),
            Admin::Ledger(client) => cluster::announce(client, version).await?,
        }
        Ok(())
    }

    pub(super) async fn create_account(
        &mut self,
        name: Option<&str>,
        now: SystemTime,
    ) -> anyhow::Result<NewAccount> {
        let (created, version) = match self {
            Admin::File(conn) => (accounts::create_account(conn, name, now)?, 0),
            Admin::Ledger(client) => admin::create_account(client, name, now).await?,
        };
        self.changed(version).await?;
        Ok(created)
    }

    pub(super) async fn account_lines(&mut self, now: i64) -> anyhow::Result<Vec<AccountLine>> {
        match self {
            Admin::File(conn) => reports::account_lines(conn, now),
            Admin::Ledger(client) => admin::account_lines(client, now).await,
        }
    }

    /// The account as stored. A server on the file is asked to flush first, so the balance
    /// holds every charge answered before the command started; cluster nodes flush every
    /// 10 ms.
    pub(super) async fn show(&mut self, account_id: &str) -> Result<AccountView, AccountError> {
        match self {
            Admin::File(conn) => {
                notify::announce(conn);
                accounts::show(conn, account_id)
            }
            Admin::Ledger(client) => admin::show(client, account_id).await,
        }
    }

    pub(super) async fn topup(
        &mut self,
        account_id: &str,
        amount: Micros,
        now: SystemTime,
    ) -> anyhow::Result<Micros> {
        let (balance, version) = match self {
            Admin::File(conn) => (accounts::topup(conn, account_id, amount, now)?, 0),
            Admin::Ledger(client) => admin::topup(client, account_id, amount, now).await?,
        };
        self.changed(version).await?;
        Ok(balance)
    }

    pub(super) async fn adjust(
        &mut self,
        account_id: &str,
        amount: Micros,
        reason: &str,
        now: SystemTime,
    ) -> anyhow::Result<Micros> {
        let (balance, version) = match self {
            Admin::File(conn) => (accounts::adjust(conn, account_id, amount, reason, now)?, 0),
            Admin::Ledger(client) => admin::adjust(client, account_id, amount, reason, now).await?,
        };
        self.changed(version).await?;
        Ok(balance)
    }

    pub(super) async fn set_limits(
        &mut self,
        account_id: &str,
        change: LimitsChange,
    ) -> anyhow::Result<Limits> {
        let (limits, version) = match self {
            Admin::File(conn) => (accounts::set_limits(conn, account_id, change)?, 0),
            Admin::Ledger(client) => admin::set_limits(client, account_id, change).await?,
        };
        self.changed(version).await?;
        Ok(limits)
    }

    pub(super) async fn create_key(
        &mut self,
        account_id: &str,
        publishable: Option<&Publishable>,
        now: SystemTime,
    ) -> anyhow::Result<NewKey> {
        let (key, version) = match self {
            Admin::File(conn) => (keys::create_key(conn, account_id, publishable, now)?, 0),
            Admin::Ledger(client) => {
                admin::create_key(client, account_id, publishable, now).await?
            }
        };
        self.changed(version).await?;
        Ok(key)
    }

    pub(super) async fn keys(&mut self, account_id: &str) -> Result<Vec<KeyLine>, AccountError> {
        match self {
            Admin::File(conn) => reports::keys(conn, account_id),
            Admin::Ledger(client) => admin::keys(client, account_id).await,
        }
    }

    pub(super) async fn revoke_key(&mut self, key_id: &str, now: SystemTime) -> anyhow::Result<()> {
        let version = match self {
            Admin::File(conn) => {
                keys::revoke_key(conn, key_id, now)?;
                0
            }
            Admin::Ledger(client) => admin::revoke_key(client, key_id, now).await?,
        };
        self.changed(version).await
    }

    pub(super) async fn usage(&mut self, days: u32, now: i64) -> anyhow::Result<Vec<UsageLine>> {
        match self {
            Admin::File(conn) => reports::usage(conn, days, now),
            Admin::Ledger(client) => admin::usage(client, days, now).await,
        }
    }
}
