//! What the admin commands share in cluster mode (`--ledger URL`, docs/cluster.md): a
//! connection to the PostgreSQL ledger on a runtime of the command's own, and the wait
//! after a change until every live node holds it (the cluster's "from the next request").

use std::future::Future;
use std::time::Duration;

use anyhow::Context;
use tokio_postgres::Client;

use postal::db::pg;

/// How long a command waits for the nodes to acknowledge its change.
const CONFIRM_WAIT: Duration = Duration::from_secs(10);

/// Runs a command's work against the ledger at `url` (connected, schema migrated).
pub(super) fn run<T>(
    url: &str,
    work: impl AsyncFnOnce(&mut Client) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    block_on(async { work(&mut connect(url).await?).await })
}

/// A connection to the ledger at `url`, its schema migrated.
pub(super) async fn connect(url: &str) -> anyhow::Result<Client> {
    let mut client = pg::connect(url).await?;
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

/// Waits until every live node holds `version`; warns about the ones that did not.
pub(super) async fn announce(client: &Client, version: i64) -> anyhow::Result<()> {
    let laggards = pg::admin::wait_for_nodes(client, version, CONFIRM_WAIT).await?;
    if !laggards.is_empty() {
        eprintln!(
            "warning: nodes {laggards:?} did not confirm the change within {CONFIRM_WAIT:?}; \
             it holds there after their next read of the ledger"
        );
    }
    Ok(())
}
