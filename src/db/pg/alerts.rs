//! Alerts in a cluster's ledger: the twin of `db::sqlite::alerts`. The events are decided
//! by the seventh migration's triggers, in the transaction of their cause; claims are
//! taken one at a time across the nodes (an advisory lock), so an account's deliveries
//! in flight are bounded across them.

use tokio_postgres::{Client, Row};

use crate::db::admin::AccountError;
use crate::db::sqlite::alerts::{IN_FLIGHT_PER_ACCOUNT, NO_WEBHOOK};
use crate::domain::alerts::{
    AlertSettings, AlertsView, DELIVERIES_SHOWN, DeliveryLine, Due, Event, Finished,
};
use crate::domain::ids::AccountId;
use crate::domain::money::{Micros, PRICE_PER_QUERY};

use super::reports::account_rowid;

/// The advisory lock of the senders' claims.
const CLAIM_LOCK: i64 = 7_352_870_051;

const NEW_EVENT: &str = "
    INSERT INTO alert_events (public_id, account_id, type, at, balance)
    VALUES (alert_id(), $1, $2, $3, $4)
    RETURNING id, public_id";

pub async fn alerts(client: &Client, account_id: &AccountId) -> Result<AlertsView, AccountError> {
    let rowid = account_rowid(client, account_id).await?;
    let settings = client
        .query_opt(
            "SELECT balance_below, limit_percent, email, webhook_url
             FROM alert_settings WHERE account_id = $1",
            &[&rowid],
        )
        .await?
        .map(|r| AlertSettings {
            balance_below: r.get::<_, Option<i64>>(0).and_then(Micros::new),
            limit_percent: r.get::<_, Option<i32>>(1).map(|p| p.clamp(1, 100) as u8),
            email: r.get(2),
            webhook_url: r.get(3),
        })
        .unwrap_or_default();
    let deliveries = client
        .query(
            "SELECT e.public_id, e.type, d.channel, d.attempt, d.status,
                    coalesce(d.tried_at, d.due_at), d.result
             FROM alert_deliveries d JOIN alert_events e ON e.id = d.event_id
             WHERE d.account_id = $1 ORDER BY d.id DESC LIMIT $2",
            &[&rowid, &i64::from(DELIVERIES_SHOWN)],
        )
        .await?
        .iter()
        .map(delivery_at)
        .collect();
    let row = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM mail_settings),
                    EXISTS (SELECT 1 FROM identities WHERE account_id = $1
                            AND unlinked_at IS NULL AND email IS NOT NULL)",
            &[&rowid],
        )
        .await?;
    Ok(AlertsView {
        settings,
        deliveries,
        mail_available: row.get(0),
        email_address: row.get(1),
    })
}

fn delivery_at(r: &Row) -> DeliveryLine {
    DeliveryLine {
        event: r.get(0),
        kind: r.get(1),
        channel: r.get(2),
        attempt: r.get::<_, i32>(3).max(1) as u32,
        status: r.get(4),
        at: r.get(5),
        result: r.get(6),
    }
}

pub async fn set_alerts(
    client: &mut Client,
    account_id: &AccountId,
    settings: &AlertSettings,
    fresh_secret: &str,
    now: i64,
) -> Result<Option<String>, AccountError> {
    let tx = client.transaction().await?;
    let rowid = account_rowid(&tx, account_id).await?;
    let old = tx
        .query_opt(
            "SELECT webhook_url, webhook_secret FROM alert_settings WHERE account_id = $1
             FOR UPDATE",
            &[&rowid],
        )
        .await?;
    let (old_url, old_secret): (Option<String>, Option<String>) =
        old.map_or((None, None), |r| (r.get(0), r.get(1)));
    let (secret, shown) = match (&settings.webhook_url, old_url == settings.webhook_url) {
        (None, _) => (None, None),
        (Some(_), true) => (old_secret, None),
        (Some(_), false) => (Some(fresh_secret.to_owned()), Some(fresh_secret.to_owned())),
    };
    tx.execute(
        "INSERT INTO alert_settings (account_id, balance_below, limit_percent, email,
                                     webhook_url, webhook_secret, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (account_id) DO UPDATE SET
             low_armed = CASE WHEN alert_settings.balance_below
                                   IS NOT DISTINCT FROM excluded.balance_below
                              THEN alert_settings.low_armed ELSE true END,
             near_minute = CASE WHEN alert_settings.limit_percent
                                     IS NOT DISTINCT FROM excluded.limit_percent
                                THEN alert_settings.near_minute ELSE 0 END,
             near_hour = CASE WHEN alert_settings.limit_percent
                                   IS NOT DISTINCT FROM excluded.limit_percent
                              THEN alert_settings.near_hour ELSE 0 END,
             near_day = CASE WHEN alert_settings.limit_percent
                                  IS NOT DISTINCT FROM excluded.limit_percent
                             THEN alert_settings.near_day ELSE 0 END,
             balance_below = excluded.balance_below, limit_percent = excluded.limit_percent,
             email = excluded.email, webhook_url = excluded.webhook_url,
             webhook_secret = excluded.webhook_secret, updated_at = excluded.updated_at",
        &[
            &rowid,
            &settings.balance_below.map(Micros::get),
            &settings.limit_percent.map(i32::from),
            &settings.email,
            &settings.webhook_url,
            &secret,
            &now,
        ],
    )
    .await?;
    tx.commit().await?;
    Ok(shown)
}

pub async fn roll_secret(
    client: &mut Client,
    account_id: &AccountId,
    fresh_secret: &str,
    now: i64,
) -> Result<(), AccountError> {
    let rowid = account_rowid(client, account_id).await?;
    let changed = client
        .execute(
            "UPDATE alert_settings SET webhook_secret = $2, updated_at = $3
             WHERE account_id = $1 AND webhook_url IS NOT NULL",
            &[&rowid, &fresh_secret, &now],
        )
        .await?;
    match changed {
        0 => Err(AccountError::Conflict(NO_WEBHOOK.to_owned())),
        _ => Ok(()),
    }
}

pub async fn test_event(
    client: &mut Client,
    account_id: &AccountId,
    now: i64,
) -> Result<(String, Vec<String>), AccountError> {
    let tx = client.transaction().await?;
    let rowid = account_rowid(&tx, account_id).await?;
    let row = tx
        .query_one(NEW_EVENT, &[&rowid, &"test", &now, &None::<i64>])
        .await?;
    let (event, public_id): (i64, String) = (row.get(0), row.get(1));
    let channels = tx
        .query(
            "SELECT channel FROM alert_deliveries WHERE event_id = $1 ORDER BY channel",
            &[&event],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    tx.commit().await?;
    Ok((public_id, channels))
}

/// After a flush: `balance.empty` of the account when it is armed and the ledger's
/// balance is below a query's price (the twin of `db::sqlite::alerts::note_empty`), in a
/// transaction that locks the account row first, as a flush does before its triggers
/// lock the settings.
pub async fn note_empty(
    client: &mut Client,
    account: i64,
    balance: i64,
    now: i64,
) -> anyhow::Result<()> {
    let tx = client.transaction().await?;
    let stored: Option<i64> = tx
        .query_opt(
            "SELECT balance FROM accounts WHERE id = $1 FOR UPDATE",
            &[&account],
        )
        .await?
        .map(|r| r.get(0));
    if stored.is_none_or(|b| b >= PRICE_PER_QUERY.get()) {
        return Ok(());
    }
    let disarmed = tx
        .query_opt(
            "INSERT INTO alert_settings (account_id, empty_armed, updated_at)
             VALUES ($1, false, $2)
             ON CONFLICT (account_id) DO UPDATE SET empty_armed = false
             WHERE alert_settings.empty_armed
             RETURNING account_id",
            &[&account, &now],
        )
        .await?;
    if disarmed.is_some() {
        tx.query_one(
            NEW_EVENT,
            &[&account, &"balance.empty", &now, &Some(balance)],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

pub async fn claim(
    client: &mut Client,
    now: i64,
    limit: u32,
    lease: i64,
) -> Result<Vec<Due>, AccountError> {
    let claimable = dollars(crate::db::sqlite::alerts::CLAIMABLE);
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
        [&now, &i64::from(limit), &IN_FLIGHT_PER_ACCOUNT];
    // A read first (most looks find nothing to claim), then again under the lock.
    if client.query(&claimable, &params).await?.is_empty() {
        return Ok(Vec::new());
    }
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&CLAIM_LOCK])
        .await?;
    let ids: Vec<i64> = tx
        .query(&claimable, &params)
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut due = Vec::with_capacity(ids.len());
    let select = tx.prepare(&dollars(crate::db::sqlite::alerts::DUE)).await?;
    for id in ids {
        tx.execute(
            "UPDATE alert_deliveries SET claimed_until = $2 WHERE id = $1",
            &[&id, &(now + lease)],
        )
        .await?;
        due.push(due_at(&tx.query_one(&select, &[&id]).await?));
    }
    tx.commit().await?;
    Ok(due)
}

/// The SQLite statement in PostgreSQL's placeholders (`?1` -> `$1`): the claim's two
/// statements are written once, in the dialect both read alike.
fn dollars(sql: &str) -> String {
    sql.replace('?', "$")
}

fn due_at(r: &Row) -> Due {
    let url: Option<String> = r.get(15);
    let secret: Option<String> = r.get(16);
    Due {
        delivery_id: r.get(0),
        account_id: r.get(1),
        account: r.get(2),
        channel: r.get(3),
        attempt: r.get::<_, i32>(4).max(1) as u32,
        event: Event {
            public_id: r.get(5),
            kind: r.get(6),
            at: r.get(7),
            balance: r.get(8),
            amount: r.get(9),
            period: r.get(10),
            period_start: r.get(11),
            queries: r.get(12),
            lim: r.get(13),
            subject: r.get(14),
        },
        webhook: url.zip(secret),
        email_to: r.get(17),
    }
}

pub async fn finish(
    client: &mut Client,
    delivery_id: i64,
    finished: &Finished,
    now: i64,
) -> Result<(), AccountError> {
    let tx = client.transaction().await?;
    let changed = tx
        .execute(
            "UPDATE alert_deliveries SET status = $2, tried_at = $3, result = $4
             WHERE id = $1 AND status = 'pending'",
            &[&delivery_id, &finished.status(), &now, &finished.result],
        )
        .await?;
    if changed == 1
        && let Some(retry_at) = finished.retry_at
    {
        tx.execute(
            "INSERT INTO alert_deliveries (event_id, account_id, channel, attempt, status, due_at)
             SELECT event_id, account_id, channel, attempt + 1, 'pending', $2
             FROM alert_deliveries WHERE id = $1",
            &[&delivery_id, &retry_at],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

pub async fn purge(client: &mut Client, before: i64) -> Result<u64, AccountError> {
    let tx = client.transaction().await?;
    let mut deleted = 0;
    for sql in crate::db::sqlite::alerts::PURGE {
        deleted += tx.execute(&dollars(sql), &[&before]).await?;
    }
    tx.commit().await?;
    Ok(deleted)
}
