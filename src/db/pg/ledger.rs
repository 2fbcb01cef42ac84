//! The ledger's check (`postal ledger verify --ledger`): every balance against the sum of
//! its ledger, and every account's `leased` against the sum of its grants. The twin of
//! `db::sqlite::ledger`; the charge rows a node appends are `node`'s flush.

use tokio_postgres::Client;

use crate::db::admin::{LedgerReport, Mismatch};

use super::decode::count;

/// The ledger's check in one snapshot: every balance against the sum of its ledger, and
/// every account's `leased` against the sum of its grants (accounts whose grants do not
/// add up).
pub async fn verify(client: &mut Client) -> anyhow::Result<(LedgerReport, Vec<String>)> {
    let tx = super::snapshot(client).await?;
    let totals = tx
        .query_one(
            "SELECT (SELECT count(*) FROM accounts), (SELECT count(*) FROM ledger)",
            &[],
        )
        .await?;
    let mismatches = tx
        .query(
            "SELECT a.public_id, a.balance, coalesce(l.total, 0)::bigint
             FROM accounts a
             LEFT JOIN (SELECT account_id, sum(amount) AS total FROM ledger GROUP BY account_id) l
               ON l.account_id = a.id
             WHERE a.balance IS DISTINCT FROM coalesce(l.total, 0)
             ORDER BY a.id",
            &[],
        )
        .await?
        .iter()
        .map(|r| Mismatch {
            account_id: r.get(0),
            balance: r.get(1),
            ledger_sum: r.get(2),
        })
        .collect();
    let leases = tx
        .query(
            "SELECT a.public_id FROM accounts a
             LEFT JOIN (SELECT account_id, sum(remaining) AS total FROM leases GROUP BY account_id) l
               ON l.account_id = a.id
             WHERE a.leased IS DISTINCT FROM coalesce(l.total, 0)::bigint
             ORDER BY a.id",
            &[],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    tx.commit().await?;
    Ok((
        LedgerReport {
            accounts: count(totals.get(0)),
            entries: count(totals.get(1)),
            mismatches,
        },
        leases,
    ))
}
