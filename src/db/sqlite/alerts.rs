//! Alerts in the file (docs/alerts.md): an account's settings, its deliveries, the test
//! event, the balance's `balance.empty`, and the sender's claims and outcomes. The events
//! themselves are decided by schema.sql's triggers, in the transaction of their cause.

use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

use crate::db::admin::AccountError;
use crate::domain::alerts::{
    AlertSettings, AlertsView, DELIVERIES_SHOWN, DeliveryLine, Due, Event, Finished,
};
use crate::domain::ids::AccountId;
use crate::domain::money::Micros;

use super::reports::account_rowid;

/// Deliveries of one account in flight at once, across every sender.
pub const IN_FLIGHT_PER_ACCOUNT: i64 = 4;

/// A new event of the account (?1), of type ?2 at ?3 with the balance ?4; its deliveries
/// are made by the trigger `alert_events_deliveries`.
const NEW_EVENT: &str = "
    INSERT INTO alert_events (public_id, account_id, type, at, balance)
    VALUES ('msg_' || lower(hex(randomblob(12))), ?1, ?2, ?3, ?4)
    RETURNING id, public_id";

/// The account's settings (the defaults when it has no row) and its last deliveries.
pub fn alerts(conn: &Connection, account_id: &AccountId) -> Result<AlertsView, AccountError> {
    let rowid = account_rowid(conn, account_id)?;
    let settings = conn
        .query_row(
            "SELECT balance_below, limit_percent, email, webhook_url
             FROM alert_settings WHERE account_id = ?1",
            [rowid],
            |r| {
                Ok(AlertSettings {
                    balance_below: r.get::<_, Option<i64>>(0)?.and_then(Micros::new),
                    limit_percent: r.get::<_, Option<i64>>(1)?.map(|p| p.clamp(1, 100) as u8),
                    email: r.get::<_, i64>(2)? == 1,
                    webhook_url: r.get(3)?,
                })
            },
        )
        .optional()?
        .unwrap_or_default();
    let deliveries = conn
        .prepare(
            "SELECT e.public_id, e.type, d.channel, d.attempt, d.status,
                    coalesce(d.tried_at, d.due_at), d.result
             FROM alert_deliveries d JOIN alert_events e ON e.id = d.event_id
             WHERE d.account_id = ?1 ORDER BY d.id DESC LIMIT ?2",
        )?
        .query_map(params![rowid, DELIVERIES_SHOWN], delivery_at)?
        .collect::<Result<_, _>>()?;
    let (mail_available, email_address) = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM mail_settings),
                EXISTS (SELECT 1 FROM identities WHERE account_id = ?1 AND unlinked_at IS NULL
                        AND email IS NOT NULL)",
        [rowid],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(AlertsView {
        settings,
        deliveries,
        mail_available,
        email_address,
    })
}

fn delivery_at(r: &Row<'_>) -> rusqlite::Result<DeliveryLine> {
    Ok(DeliveryLine {
        event: r.get(0)?,
        kind: r.get(1)?,
        channel: r.get(2)?,
        attempt: r.get(3)?,
        status: r.get(4)?,
        at: r.get(5)?,
        result: r.get(6)?,
    })
}

/// Sets the account's settings. A webhook URL set or changed gets `fresh_secret`, which
/// is answered (shown once); a URL kept keeps its secret (`None`). A new threshold is
/// armed (the next charge below it alerts), a new percent counts every window afresh.
pub fn set_alerts(
    conn: &mut Connection,
    account_id: &AccountId,
    settings: &AlertSettings,
    fresh_secret: &str,
    now: i64,
) -> Result<Option<String>, AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let rowid = account_rowid(&tx, account_id)?;
    let old: Option<(Option<String>, Option<String>)> = tx
        .query_row(
            "SELECT webhook_url, webhook_secret FROM alert_settings WHERE account_id = ?1",
            [rowid],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let (old_url, old_secret) = old.unwrap_or_default();
    let (secret, shown) = match (&settings.webhook_url, old_url == settings.webhook_url) {
        (None, _) => (None, None),
        (Some(_), true) => (old_secret, None),
        (Some(_), false) => (Some(fresh_secret.to_owned()), Some(fresh_secret.to_owned())),
    };
    tx.execute(
        "INSERT INTO alert_settings (account_id, balance_below, limit_percent, email,
                                     webhook_url, webhook_secret, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (account_id) DO UPDATE SET
             low_armed = CASE WHEN balance_below IS excluded.balance_below THEN low_armed
                              ELSE 1 END,
             near_minute = CASE WHEN limit_percent IS excluded.limit_percent THEN near_minute
                                ELSE 0 END,
             near_hour = CASE WHEN limit_percent IS excluded.limit_percent THEN near_hour
                              ELSE 0 END,
             near_day = CASE WHEN limit_percent IS excluded.limit_percent THEN near_day
                             ELSE 0 END,
             balance_below = excluded.balance_below, limit_percent = excluded.limit_percent,
             email = excluded.email, webhook_url = excluded.webhook_url,
             webhook_secret = excluded.webhook_secret, updated_at = excluded.updated_at",
        params![
            rowid,
            settings.balance_below.map(Micros::get),
            settings.limit_percent,
            settings.email,
            settings.webhook_url,
            secret,
            now
        ],
    )?;
    tx.commit()?;
    Ok(shown)
}

/// Gives the account's webhook `fresh_secret`; refused when it has no webhook.
pub fn roll_secret(
    conn: &mut Connection,
    account_id: &AccountId,
    fresh_secret: &str,
    now: i64,
) -> Result<(), AccountError> {
    let rowid = account_rowid(conn, account_id)?;
    let changed = conn.execute(
        "UPDATE alert_settings SET webhook_secret = ?2, updated_at = ?3
         WHERE account_id = ?1 AND webhook_url IS NOT NULL",
        params![rowid, fresh_secret, now],
    )?;
    match changed {
        0 => Err(AccountError::Conflict(NO_WEBHOOK.to_owned())),
        _ => Ok(()),
    }
}

/// Rolling a secret of no webhook.
pub const NO_WEBHOOK: &str = "No webhookUrl is set: set one first";

/// A `test` event of the account: its id and the channels it goes to.
pub fn test_event(
    conn: &mut Connection,
    account_id: &AccountId,
    now: i64,
) -> Result<(String, Vec<String>), AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let rowid = account_rowid(&tx, account_id)?;
    let (event, public_id): (i64, String) =
        tx.query_row(NEW_EVENT, params![rowid, "test", now, None::<i64>], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    let channels = tx
        .prepare("SELECT channel FROM alert_deliveries WHERE event_id = ?1 ORDER BY channel")?
        .query_map([event], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    tx.commit()?;
    Ok((public_id, channels))
}

/// In a flush's transaction: the account (row id) was answered 402 by this server with
/// `balance` left. `balance.empty` is made when it is armed (once until the balance
/// rises again, whichever server noted it first).
pub fn note_empty(conn: &Connection, account: i64, balance: i64, now: i64) -> rusqlite::Result<()> {
    let disarmed = conn
        .prepare_cached(
            "INSERT INTO alert_settings (account_id, empty_armed, updated_at) VALUES (?1, 0, ?2)
             ON CONFLICT (account_id) DO UPDATE SET empty_armed = 0 WHERE empty_armed = 1
             RETURNING account_id",
        )?
        .query_row(params![account, now], |_| Ok(()))
        .optional()?;
    if disarmed.is_some() {
        conn.prepare_cached(NEW_EVENT)?
            .query_row(params![account, "balance.empty", now, balance], |_| Ok(()))?;
    }
    Ok(())
}

/// Claims up to `limit` deliveries due at `now` for `lease` seconds (a sender that dies
/// lets them go then), at most [`IN_FLIGHT_PER_ACCOUNT`] of an account in flight.
pub fn claim(
    conn: &mut Connection,
    now: i64,
    limit: u32,
    lease: i64,
) -> Result<Vec<Due>, AccountError> {
    // A read first: a sender looks twice a second and most looks find nothing it may
    // claim (nothing due, or an account's 4 in flight), which takes no write lock from
    // the flushes. Then again under the lock.
    let claimable = |conn: &Connection| -> rusqlite::Result<Vec<i64>> {
        conn.prepare_cached(CLAIMABLE)?
            .query_map(params![now, limit, IN_FLIGHT_PER_ACCOUNT], |r| r.get(0))?
            .collect()
    };
    if claimable(conn)?.is_empty() {
        return Ok(Vec::new());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let ids = claimable(&tx)?;
    let mut due = Vec::with_capacity(ids.len());
    for id in ids {
        tx.prepare_cached("UPDATE alert_deliveries SET claimed_until = ?2 WHERE id = ?1")?
            .execute(params![id, now + lease])?;
        due.push(tx.prepare_cached(DUE)?.query_row([id], due_at)?);
    }
    tx.commit()?;
    Ok(due)
}

/// The deliveries due at ?1 that no sender holds, oldest first, an account's only while it
/// has fewer than ?3 held; at most ?2. (The twin of `db::pg::alerts`'s.)
pub(crate) const CLAIMABLE: &str = "
    SELECT id FROM (
        SELECT d.id, d.due_at,
               row_number() OVER (PARTITION BY d.account_id ORDER BY d.due_at, d.id) AS n,
               (SELECT count(*) FROM alert_deliveries f
                WHERE f.account_id = d.account_id AND f.status = 'pending'
                  AND f.claimed_until > ?1) AS busy
        FROM alert_deliveries d
        WHERE d.status = 'pending' AND d.due_at <= ?1 AND d.claimed_until <= ?1) AS c
    WHERE n + busy <= ?3
    ORDER BY due_at, id LIMIT ?2";

/// What sending delivery ?1 needs.
pub(crate) const DUE: &str = "
    SELECT d.id, d.account_id, a.public_id, d.channel, d.attempt,
           e.public_id, e.type, e.at, e.balance, e.amount, e.period, e.period_start,
           e.queries, e.lim, e.subject, s.webhook_url, s.webhook_secret,
           (SELECT i.email FROM identities i
            WHERE i.account_id = d.account_id AND i.unlinked_at IS NULL AND i.email IS NOT NULL
            ORDER BY i.created_at DESC LIMIT 1)
    FROM alert_deliveries d
    JOIN alert_events e ON e.id = d.event_id
    JOIN accounts a ON a.id = d.account_id
    LEFT JOIN alert_settings s ON s.account_id = d.account_id
    WHERE d.id = ?1";

fn due_at(r: &Row<'_>) -> rusqlite::Result<Due> {
    let url: Option<String> = r.get(15)?;
    let secret: Option<String> = r.get(16)?;
    Ok(Due {
        delivery_id: r.get(0)?,
        account_id: r.get(1)?,
        account: r.get(2)?,
        channel: r.get(3)?,
        attempt: r.get(4)?,
        event: Event {
            public_id: r.get(5)?,
            kind: r.get(6)?,
            at: r.get(7)?,
            balance: r.get(8)?,
            amount: r.get(9)?,
            period: r.get(10)?,
            period_start: r.get(11)?,
            queries: r.get(12)?,
            lim: r.get(13)?,
            subject: r.get(14)?,
        },
        webhook: url.zip(secret),
        email_to: r.get(17)?,
    })
}

/// Records how a claimed attempt ended, and the next attempt when there is one. An
/// attempt already recorded (its claim lapsed and another sender finished it) is left.
pub fn finish(
    conn: &mut Connection,
    delivery_id: i64,
    finished: &Finished,
    now: i64,
) -> Result<(), AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let status = finished.status();
    let changed = tx.execute(
        "UPDATE alert_deliveries SET status = ?2, tried_at = ?3, result = ?4
         WHERE id = ?1 AND status = 'pending'",
        params![delivery_id, status, now, finished.result],
    )?;
    if changed == 1
        && let Some(retry_at) = finished.retry_at
    {
        tx.execute(
            "INSERT INTO alert_deliveries (event_id, account_id, channel, attempt, status, due_at)
             SELECT event_id, account_id, channel, attempt + 1, 'pending', ?2
             FROM alert_deliveries WHERE id = ?1",
            params![delivery_id, retry_at],
        )?;
    }
    tx.commit()?;
    Ok(())
}

/// Forgets what was sent before ?1 (unix seconds): attempts no longer pending, and events
/// none of whose attempts is left. (The twin of `db::pg::alerts`'s.)
pub(crate) const PURGE: [&str; 2] = [
    "DELETE FROM alert_deliveries WHERE status <> 'pending' AND coalesce(tried_at, due_at) < ?1",
    "DELETE FROM alert_events WHERE at < ?1
         AND NOT EXISTS (SELECT 1 FROM alert_deliveries d WHERE d.event_id = alert_events.id)",
];

/// Deletes the attempts and events older than `before`; how many rows went.
pub fn purge(conn: &mut Connection, before: i64) -> Result<u64, AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut deleted = 0;
    for sql in PURGE {
        deleted += tx.execute(sql, [before])? as u64;
    }
    tx.commit()?;
    Ok(deleted)
}
