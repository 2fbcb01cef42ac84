//! The admin's daily reads in the ledger: accounts at a glance, one account's ledger,
//! usage per day, an account's keys. The twin of `db::sqlite::reports`.

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, GenericClient};

use crate::db::admin::{
    AccountError, AccountLine, KeyLine, LedgerEntry, LedgerPage, LedgerQuery, UsageLine,
    UsageQuery, day_start, last_30_days,
};
use crate::domain::date::{UtcDate, rfc3339_minute};

use super::changes::UTC_SECONDS;
use super::decode::{count, limits_at, publishable_rules};
use crate::domain::ids::{AccountId, KeyId};

/// `postal account list`.
pub async fn account_lines(client: &Client, now: i64) -> anyhow::Result<Vec<AccountLine>> {
    let rows = client
        .query(
            "SELECT a.public_id, a.name, a.balance,
                    a.limit_per_minute, a.limit_per_hour, a.limit_per_day,
                    (SELECT count(*) FROM api_keys k
                      WHERE k.account_id = a.id AND k.revoked_at IS NULL),
                    coalesce((SELECT sum(u.queries) FROM usage_days u
                      WHERE u.account_id = a.id AND u.day = $1), 0)::bigint
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

/// `postal ledger show` and the dashboard's ledger: the rows `query` asks for.
pub async fn ledger_entries(
    client: &Client,
    public_id: &AccountId,
    query: &LedgerQuery,
) -> Result<LedgerPage, AccountError> {
    let rowid = account_rowid(client, public_id).await?;
    let sql = query.sql(|n| format!("${n}"));
    let since = query.since.unwrap_or(i64::MIN);
    let (before, rows) = query.paging.bounds();
    let rows = match query.paging.page {
        Some(_) => {
            client
                .query(&sql, &[&rowid, &since, &before, &rows])
                .await?
        }
        None => client.query(&sql, &[&rowid, &since, &before]).await?,
    };
    let rows = rows
        .iter()
        .map(|r| {
            Ok((
                r.get(0),
                LedgerEntry {
                    at: crate::domain::date::rfc3339(r.get(1)),
                    kind: r.try_get(2)?,
                    amount: r.try_get(3)?,
                    balance_after: r.try_get(4)?,
                    queries: count(r.get(5)),
                    endpoint: r.get(6),
                    note: r.get(7),
                },
            ))
        })
        .collect::<Result<Vec<_>, AccountError>>()?;
    Ok(query.paging.paged(rows))
}

/// `postal usage` and the dashboard's usage: the usage `query` asks for.
pub async fn usage(client: &Client, query: &UsageQuery) -> Result<Vec<UsageLine>, AccountError> {
    let account = match &query.account {
        Some(id) => Some(account_rowid(client, id).await?),
        None => None,
    };
    let key = match (&query.key, account) {
        (Some(key), Some(account)) => Some(key_rowid(client, key, account).await?),
        (Some(key), None) => return Err(AccountError::UnknownKey(key.clone())),
        (None, _) => None,
    };
    let from = query.from();
    // Parameters 1, then 2 and 3 when there (a key needs its account).
    let mut values: Vec<&(dyn ToSql + Sync)> = vec![&from];
    values.extend(account.iter().map(|v| v as &(dyn ToSql + Sync)));
    values.extend(key.iter().map(|v| v as &(dyn ToSql + Sync)));
    let rows = client
        .query(&query.sql(|n| format!("${n}::bigint")), &values)
        .await?;
    rows.iter()
        .map(|r| {
            Ok(UsageLine {
                date: UtcDate::of_unix(r.get(0)).to_string(),
                account_id: r.get(1),
                key_id: r.get(2),
                endpoint: r.get(3),
                queries: count(r.get(4)),
                charged: r.try_get(5)?,
            })
        })
        .collect()
}

/// The row id of the account's key `public_id`.
async fn key_rowid(client: &Client, public_id: &KeyId, account: i64) -> Result<i64, AccountError> {
    Ok(client
        .query_opt(
            "SELECT id FROM api_keys WHERE public_id = $1 AND account_id = $2",
            &[&public_id, &account],
        )
        .await?
        .ok_or_else(|| AccountError::UnknownKey(public_id.clone()))?
        .get(0))
}

/// `postal key list`.
pub async fn keys(
    client: &Client,
    public_id: &AccountId,
    now: i64,
) -> Result<Vec<KeyLine>, AccountError> {
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
                        max_per_minute, max_per_day, u.last_at, coalesce(u.queries, 0)::bigint
                 FROM api_keys
                 LEFT JOIN (SELECT key_id, max(last_at) AS last_at,
                                   sum(CASE WHEN day >= $2 THEN queries ELSE 0 END) AS queries
                            FROM usage_days WHERE account_id = $1 GROUP BY key_id) u
                   ON u.key_id = api_keys.id
                 WHERE account_id = $1 ORDER BY id"
            ),
            &[&rowid, &last_30_days(now)],
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
                last_used_at: r.get::<_, Option<i64>>(11).map(rfc3339_minute),
                queries_30d: count(r.get(12)),
            })
        })
        .collect()
}
