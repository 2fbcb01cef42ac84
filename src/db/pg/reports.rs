//! The admin's daily reads in the ledger: accounts at a glance, one account's ledger,
//! usage per day, an account's keys. The twin of `db::sqlite::reports`.

use tokio_postgres::{Client, GenericClient};

use crate::db::admin::{
    AccountError, AccountLine, DAY, KeyLine, LedgerEntry, UsageLine, day_start,
};

use super::changes::UTC_SECONDS;
use super::decode::{count, limits_at, publishable_rules};
use crate::domain::ids::AccountId;

/// `postal account list`.
pub async fn account_lines(client: &Client, now: i64) -> anyhow::Result<Vec<AccountLine>> {
    let rows = client
        .query(
            "SELECT a.public_id, a.name, a.balance,
                    a.limit_per_minute, a.limit_per_hour, a.limit_per_day,
                    (SELECT count(*) FROM api_keys k
                      WHERE k.account_id = a.id AND k.revoked_at IS NULL),
                    coalesce((SELECT sum(query_count) FROM ledger l
                      WHERE l.account_id = a.id AND l.kind = 'charge' AND l.at >= $1), 0)::bigint
             FROM accounts a ORDER BY a.id",
            &[&day_start(now)],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(AccountLine {
                account_id: r.get(0),
                name: r.get(1),
                balance: r.try_get(2)?,
                limits: limits_at(r, 3),
                active_keys: count(r.get(6)),
                queries_today: count(r.get(7)),
            })
        })
        .collect()
}

pub(super) async fn account_rowid(
    client: &impl GenericClient,
    public_id: &AccountId,
) -> Result<i64, AccountError> {
    Ok(client
        .query_opt(
            "SELECT id FROM accounts WHERE public_id = $1",
            &[&public_id],
        )
        .await?
        .ok_or_else(|| AccountError::UnknownAccount(public_id.clone()))?
        .get(0))
}

/// `postal ledger show`.
pub async fn ledger_entries(
    client: &Client,
    public_id: &AccountId,
    since: Option<i64>,
) -> Result<Vec<LedgerEntry>, AccountError> {
    let rowid = account_rowid(client, public_id).await?;
    let rows = client
        .query(
            &format!(
                "SELECT to_char(to_timestamp(at) AT TIME ZONE 'UTC', {UTC_SECONDS}), kind, amount,
                        balance_after, query_count, endpoint, note
                 FROM ledger WHERE account_id = $1 AND at >= $2 ORDER BY id"
            ),
            &[&rowid, &since.unwrap_or(i64::MIN)],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(LedgerEntry {
                at: r.get(0),
                kind: r.try_get(1)?,
                amount: r.try_get(2)?,
                balance_after: r.try_get(3)?,
                queries: count(r.get(4)),
                endpoint: r.get(5),
                note: r.get(6),
            })
        })
        .collect()
}

/// `postal usage`.
pub async fn usage(client: &Client, days: u32, now: i64) -> anyhow::Result<Vec<UsageLine>> {
    let from = day_start(now) - (i64::from(days.max(1)) - 1) * DAY;
    let rows = client
        .query(
            "SELECT to_char(to_timestamp(l.at - l.at % 86400) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
                    a.public_id, l.endpoint, sum(l.query_count)::bigint, (-sum(l.amount))::bigint
             FROM ledger l JOIN accounts a ON a.id = l.account_id
             WHERE l.kind = 'charge' AND l.at >= $1
             GROUP BY day, l.account_id, a.public_id, l.endpoint
             ORDER BY day, l.account_id, l.endpoint",
            &[&from],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            Ok::<_, AccountError>(UsageLine {
                date: r.get(0),
                account_id: r.get(1),
                endpoint: r.get(2),
                queries: count(r.get(3)),
                charged: r.try_get(4)?,
            })
        })
        .collect::<Result<_, _>>()?)
}

/// `postal key list`.
pub async fn keys(client: &Client, public_id: &AccountId) -> Result<Vec<KeyLine>, AccountError> {
    let rowid = account_rowid(client, public_id).await?;
    let rows = client
        .query(
            &format!(
                "SELECT public_id, to_char(to_timestamp(created_at) AT TIME ZONE 'UTC', {UTC_SECONDS}),
                        to_char(to_timestamp(coalesce(revoked_at, CASE
                            WHEN expires_at <= extract(epoch FROM now()) THEN expires_at END))
                            AT TIME ZONE 'UTC', {UTC_SECONDS}),
                        kind = 'publishable', origins, per_ip_minute, name, hint,
                        CASE WHEN revoked_at IS NULL AND expires_at > extract(epoch FROM now())
                             THEN to_char(to_timestamp(expires_at) AT TIME ZONE 'UTC', {UTC_SECONDS})
                        END,
                        max_per_minute, max_per_day
                 FROM api_keys WHERE account_id = $1 ORDER BY id"
            ),
            &[&rowid],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let publishable: bool = r.get(3);
            Ok(KeyLine {
                key_id: r.get(0),
                name: r.get(6),
                hint: r.get(7),
                expires_at: r.get(8),
                created_at: r.get(1),
                revoked_at: r.get(2),
                publishable: match publishable {
                    true => Some(publishable_rules(
                        r.get(4),
                        r.get(5),
                        (r.get(9), r.get(10)),
                    )?),
                    false => None,
                },
            })
        })
        .collect()
}
