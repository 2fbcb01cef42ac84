//! Where the admin commands run: a runtime of the command's own, and the file or (with
//! `--ledger URL`, docs/cluster.md) a connection to a cluster's PostgreSQL ledger, behind
//! the one admin interface (`accounts::Admin`).

use std::future::Future;
use std::path::Path;

use anyhow::Context;
use tokio_postgres::Client;

use crate::accounts::{Admin, OPERATOR};
use crate::db;
use crate::db::pg::{self, LedgerConfig};

/// Runs `work` on the file at `db`, or with `ledger` on the cluster's ledger (connected,
/// schema migrated).
pub(super) fn admin<T>(
    db: &Path,
    ledger: Option<&LedgerConfig>,
    work: impl AsyncFnOnce(&mut Admin) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    block_on(async {
        let mut admin = match ledger {
            Some(ledger) => Admin::ledger(connect(ledger).await?, OPERATOR),
            None => Admin::file(db::open(db)?, OPERATOR),
        };
        work(&mut admin).await
    })
}

/// Runs a command's work against `ledger` (connected, schema migrated).
pub(super) fn run<T>(
    ledger: &LedgerConfig,
    work: impl AsyncFnOnce(&mut Client) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    block_on(async { work(&mut connect(ledger).await?).await })
}

/// A connection to `ledger`, its schema migrated.
pub(super) async fn connect(ledger: &LedgerConfig) -> anyhow::Result<Client> {
    let mut client = pg::connect(ledger).await?;
    pg::migrate(&mut client).await?;
    Ok(client)
}

/// Runs `work` on a runtime of the command's own.
pub(super) fn block_on<T>(work: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a runtime")?
        .block_on(work)
}
