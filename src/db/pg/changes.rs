//! What a cluster adds to the admin operations: every change bumps `changes.version` and
//! notifies the nodes in its transaction (`bump`), and the command then waits until every
//! live node holds it (`wait_for_nodes`).

use std::time::{Duration, Instant};

use tokio_postgres::{Client, Transaction};

use crate::db::admin::AccountError;

use super::CHANGES_CHANNEL;

/// A node is live when its heartbeat is younger than this.
const LIVE: &str = "3 seconds";
/// A time as the reports show it: RFC 3339, UTC, seconds.
pub(super) const UTC_SECONDS: &str = r#"'YYYY-MM-DD"T"HH24:MI:SS"Z"'"#;

/// Bumps the version of accounts and keys and notifies the nodes, in `tx`: the nodes hear
/// of it only if it commits.
pub(super) async fn bump(tx: &Transaction<'_>) -> Result<i64, AccountError> {
    let version: i64 = tx
        .query_one(
            "UPDATE changes SET version = version + 1 RETURNING version",
            &[],
        )
        .await?
        .get(0);
    tx.execute(
        "SELECT pg_notify($1, $2)",
        &[&CHANGES_CHANNEL, &version.to_string()],
    )
    .await?;
    Ok(version)
}

/// Waits until every live node holds `version` (or `timeout`); the nodes that did not.
pub async fn wait_for_nodes(
    client: &Client,
    version: i64,
    timeout: Duration,
) -> anyhow::Result<Vec<i64>> {
    let until = Instant::now() + timeout;
    loop {
        let laggards: Vec<i64> = client
            .query(
                &format!(
                    "SELECT node_id FROM nodes WHERE seen_version < $1
                     AND heartbeat_at > now() - interval '{LIVE}' ORDER BY node_id"
                ),
                &[&version],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        if laggards.is_empty() || Instant::now() >= until {
            return Ok(laggards);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
