//! Rate-limit windows in the PostgreSQL ledger (design study §4.5, W1, "slices"): the
//! queries every node admitted in each window (`window_counts`), and the slices of a
//! limited window's room leased to nodes (`window_slices`), asked for, spent, handed back
//! and renewed exactly as money grants are, under the same lock of the account row. The
//! arithmetic is `domain::grant`'s (`slice_size`, `window_room`).
//!
//! A slice is keyed by its window's start: once a node admits in a newer window, a slice
//! of an older one is void without anyone expiring it, and the next slice replaces it.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, GenericClient};

use crate::domain::grant::{self, SliceAsk, SliceHeld, WindowQueries};
use crate::domain::rate_limit::{Limits, Window, WindowKey};

use super::RECALL_CHANNEL;
use super::decode::{count, stored_count};

/// What a flush does to windows: the queries admitted (added to the counts, taken from
/// the node's slices) and the slices handed back.
#[derive(Debug, Default)]
pub struct WindowFlush<'a> {
    pub admitted: &'a [WindowQueries],
    pub returns: &'a [WindowQueries],
}

/// The node's slices and the accounts' newest window counts, as a flush reports them.
#[derive(Debug, Default)]
pub struct WindowsFlushed {
    pub slices: Vec<SliceHeld>,
    pub counts: Vec<WindowQueries>,
}

// Parameter types of the flush's statements (sent with their types: one round trip).
const I8: Type = Type::INT8;
const I8S: Type = Type::INT8_ARRAY;
const I2S: Type = Type::INT2_ARRAY;
const F8: Type = Type::FLOAT8;

fn key(kind: i16, start: i64) -> anyhow::Result<WindowKey> {
    let window = Window::from_kind(kind).with_context(|| format!("unknown window kind {kind}"))?;
    Ok(WindowKey { window, start })
}

/// Leases node `node_id` at least `need` more queries of each window in `asks` (up to
/// `want`, `domain::grant::slice_size` of the room `limit - count - reserved`), or
/// nothing for a window with less room; then what the node holds of each. Other nodes'
/// expired slices of the account are dropped first. A window without a limit (the limit
/// was just removed) is granted `want` at once. When nothing could be granted of a
/// window while other nodes hold enough of it, they are asked to hand back (`NOTIFY`, as
/// for money). Serialised with grants and flushes by the lock of the account row.
pub async fn slices(
    client: &mut Client,
    node_id: i64,
    account_id: i64,
    asks: &[SliceAsk],
    ttl: Duration,
) -> anyhow::Result<Vec<SliceHeld>> {
    let tx = client.transaction().await?;
    let Some(row) = tx
        .query_opt(
            "SELECT limit_per_minute, limit_per_hour, limit_per_day FROM accounts
             WHERE id = $1 FOR UPDATE",
            &[&account_id],
        )
        .await?
    else {
        anyhow::bail!("no account with id {account_id}");
    };
    let limit = |i: usize| row.get::<_, Option<i64>>(i).map(count);
    let limits = Limits {
        per_minute: limit(0),
        per_hour: limit(1),
        per_day: limit(2),
    };
    tx.execute(
        "DELETE FROM window_slices
         WHERE account_id = $1 AND node_id <> $2 AND expires_at < now()",
        &[&account_id, &node_id],
    )
    .await?;
    let mut held = Vec::with_capacity(asks.len());
    let mut recall = false;
    for ask in asks {
        let kind = ask.window.window.kind();
        let start = ask.window.start;
        let row = tx
            .query_one(
                "SELECT
                   coalesce((SELECT count FROM window_counts
                             WHERE account_id = $1 AND kind = $2 AND window_start = $3), 0),
                   coalesce((SELECT sum(remaining) FROM window_slices
                             WHERE account_id = $1 AND kind = $2 AND window_start = $3
                               AND node_id <> $4), 0)::bigint,
                   coalesce((SELECT remaining FROM window_slices
                             WHERE account_id = $1 AND kind = $2 AND window_start = $3
                               AND node_id = $4), 0)",
                &[&account_id, &kind, &start, &node_id],
            )
            .await?;
        let (counted, others, mut own) = (count(row.get(0)), count(row.get(1)), count(row.get(2)));
        let before = own;
        if let Some(keep) = ask.keep {
            own = own.min(keep);
        }
        let (granted, elsewhere) = match limits.of(ask.window.window) {
            None => (ask.want.max(ask.need), false),
            Some(limit) => {
                let room = grant::window_room(limit, counted, others.saturating_add(own));
                let granted = grant::slice_size(room, ask.need, ask.want);
                let helps = others > 0 && room.saturating_add(others) >= ask.need;
                (granted, granted == 0 && helps)
            }
        };
        recall |= elsewhere;
        let remaining = own.saturating_add(granted);
        if remaining != before {
            tx.execute(
                "INSERT INTO window_slices
                     (account_id, node_id, kind, window_start, remaining, expires_at)
                 VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6))
                 ON CONFLICT (account_id, node_id, kind) DO UPDATE SET
                     remaining = excluded.remaining,
                     window_start = excluded.window_start,
                     expires_at = excluded.expires_at
                 WHERE window_slices.window_start <= excluded.window_start",
                &[
                    &account_id,
                    &node_id,
                    &kind,
                    &start,
                    &stored_count(remaining),
                    &ttl.as_secs_f64(),
                ],
            )
            .await?;
        }
        held.push(SliceHeld {
            account_id,
            window: ask.window,
            remaining,
            count: counted,
            elsewhere,
        });
    }
    if recall {
        tx.execute(
            "SELECT pg_notify($1, $2)",
            &[&RECALL_CHANNEL, &format!("{account_id}:{node_id}")],
        )
        .await?;
    }
    tx.commit().await.context("committing a window slice")?;
    Ok(held)
}

/// The windows part of a flush, inside its transaction, once the accounts `ids` are
/// locked: unless the batch was `replayed`, adds the admitted queries to the counts and
/// takes them and the returned room from the node's slices of the same window (a slice
/// of another window is left alone: it is void or newer); drops the emptied slices of
/// accounts `ids`, extends their others by `ttl`, and reports them, and the counts of
/// accounts `ids`.
pub(super) async fn flush(
    client: &impl GenericClient,
    node_id: i64,
    ids: &[i64],
    windows: &WindowFlush<'_>,
    replayed: bool,
    ttl: Duration,
) -> anyhow::Result<WindowsFlushed> {
    if !replayed {
        let mut counted: BTreeMap<(i64, i16, i64), i64> = BTreeMap::new();
        let mut taken: BTreeMap<(i64, i16, i64), i64> = BTreeMap::new();
        for q in windows.admitted {
            let k = (q.account_id, q.window.window.kind(), q.window.start);
            *counted.entry(k).or_default() += stored_count(q.queries);
            *taken.entry(k).or_default() += stored_count(q.queries);
        }
        for q in windows.returns {
            let k = (q.account_id, q.window.window.kind(), q.window.start);
            *taken.entry(k).or_default() += stored_count(q.queries);
        }
        let columns = |rows: &BTreeMap<(i64, i16, i64), i64>| {
            let mut columns = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for (&(id, kind, start), &queries) in rows {
                columns.0.push(id);
                columns.1.push(kind);
                columns.2.push(start);
                columns.3.push(queries);
            }
            columns
        };
        if !counted.is_empty() {
            let (ids, kinds, starts, queries) = columns(&counted);
            client
                .execute_typed(
                    "INSERT INTO window_counts (account_id, kind, window_start, count)
                 SELECT * FROM unnest($1::bigint[], $2::smallint[], $3::bigint[], $4::bigint[])
                 ON CONFLICT (account_id, kind, window_start) DO UPDATE
                     SET count = window_counts.count + excluded.count",
                    &[(&ids, I8S), (&kinds, I2S), (&starts, I8S), (&queries, I8S)],
                )
                .await
                .context("adding to the window counts")?;
        }
        if !taken.is_empty() {
            let (ids, kinds, starts, queries) = columns(&taken);
            client
                .execute_typed(
                    "UPDATE window_slices s SET remaining = greatest(s.remaining - u.queries, 0)
                 FROM unnest($1::bigint[], $2::smallint[], $3::bigint[], $4::bigint[])
                     AS u(account_id, kind, window_start, queries)
                 WHERE s.node_id = $5 AND s.account_id = u.account_id AND s.kind = u.kind
                   AND s.window_start = u.window_start",
                    &[
                        (&ids, I8S),
                        (&kinds, I2S),
                        (&starts, I8S),
                        (&queries, I8S),
                        (&node_id, I8),
                    ],
                )
                .await
                .context("taking from the window slices")?;
        }
    }
    // One statement: the emptied slices of accounts `ids` go, their others are extended
    // and reported.
    let mut flushed = WindowsFlushed::default();
    for r in client
        .query_typed(
            "WITH gone AS (DELETE FROM window_slices
                           WHERE node_id = $1 AND account_id = ANY($3) AND remaining = 0),
                  kept AS (UPDATE window_slices
                           SET expires_at = now() + make_interval(secs => $2)
                           WHERE node_id = $1 AND account_id = ANY($3) AND remaining > 0
                           RETURNING account_id, kind, window_start, remaining)
             SELECT k.account_id, k.kind, k.window_start, k.remaining, coalesce(c.count, 0)
             FROM kept k LEFT JOIN window_counts c
               ON c.account_id = k.account_id AND c.kind = k.kind
              AND c.window_start = k.window_start",
            &[(&node_id, I8), (&ttl.as_secs_f64(), F8), (&ids, I8S)],
        )
        .await?
    {
        flushed.slices.push(held_of(&r)?);
    }
    flushed.counts = newest_counts(client, Some(ids)).await?;
    Ok(flushed)
}

fn held_of(r: &tokio_postgres::Row) -> anyhow::Result<SliceHeld> {
    Ok(SliceHeld {
        account_id: r.get(0),
        window: key(r.get(1), r.get(2))?,
        remaining: count(r.get(3)),
        count: count(r.get(4)),
        elsewhere: false,
    })
}

/// The end of a flush, as `node::renew_untouched` for grants: the node's slices of
/// accounts outside `touched` with less than `node::RENEW_UNDER` left are extended by
/// `ttl` (rows another transaction holds are skipped); they are returned, with the
/// counts of their windows.
pub(super) async fn renew_untouched(
    client: &impl GenericClient,
    node_id: i64,
    touched: &[i64],
    ttl: Duration,
) -> anyhow::Result<Vec<SliceHeld>> {
    let rows = client
        .query_typed(
            "WITH kept AS (UPDATE window_slices
                           SET expires_at = now() + make_interval(secs => $3)
                           WHERE (account_id, node_id, kind) IN (
                               SELECT account_id, node_id, kind FROM window_slices
                               WHERE node_id = $1 AND NOT account_id = ANY($2)
                                 AND remaining > 0
                                 AND expires_at < now() + make_interval(secs => $4)
                               FOR UPDATE SKIP LOCKED)
                           RETURNING account_id, kind, window_start, remaining)
             SELECT k.account_id, k.kind, k.window_start, k.remaining, coalesce(c.count, 0)
             FROM kept k LEFT JOIN window_counts c
               ON c.account_id = k.account_id AND c.kind = k.kind
              AND c.window_start = k.window_start",
            &[
                (&node_id, I8),
                (&touched, I8S),
                (&ttl.as_secs_f64(), F8),
                (&super::node::RENEW_UNDER.as_secs_f64(), F8),
            ],
        )
        .await
        .context("renewing window slices")?;
    rows.iter().map(held_of).collect()
}

/// The newest count of each window kind of the accounts `ids` (of every account when
/// `None`).
async fn newest_counts(
    client: &impl GenericClient,
    ids: Option<&[i64]>,
) -> anyhow::Result<Vec<WindowQueries>> {
    let mut counts = Vec::new();
    for r in client
        .query_typed(
            "SELECT DISTINCT ON (account_id, kind) account_id, kind, window_start, count
             FROM window_counts WHERE $1::bigint[] IS NULL OR account_id = ANY($1)
             ORDER BY account_id, kind, window_start DESC",
            &[(&ids, I8S)],
        )
        .await?
    {
        counts.push(WindowQueries {
            account_id: r.get(0),
            window: key(r.get(1), r.get(2))?,
            queries: count(r.get(3)),
        });
    }
    Ok(counts)
}

/// The newest count of each window of every account (a node starting shows them).
pub async fn load_counts(client: &Client) -> anyhow::Result<Vec<WindowQueries>> {
    newest_counts(client, None).await
}

/// Drops expired slices (they hold no money: the room simply comes back), and counts of
/// windows that ended more than a window ago by `now_unix` (a node's clock); how many
/// slices were dropped.
pub async fn sweep(client: &Client, now_unix: i64) -> anyhow::Result<u64> {
    let dropped = client
        .execute(
            // Rows a flush holds are skipped (the next sweep takes them): waiting for them
            // while holding others could deadlock with that flush.
            "DELETE FROM window_slices WHERE (account_id, node_id, kind) IN (
                 SELECT account_id, node_id, kind FROM window_slices
                 WHERE expires_at < now() FOR UPDATE SKIP LOCKED)",
            &[],
        )
        .await?;
    client
        .execute(
            // As above: rows a flush is adding to are skipped.
            "DELETE FROM window_counts WHERE (account_id, kind, window_start) IN (
                 SELECT account_id, kind, window_start FROM window_counts
                 WHERE window_start < $1::bigint - 2 *
                     CASE kind WHEN 1 THEN 60 WHEN 2 THEN 3600 ELSE 86400 END
                 FOR UPDATE SKIP LOCKED)",
            &[&now_unix],
        )
        .await?;
    Ok(dropped)
}

/// A clean stop: the node's slices go (their room comes back).
pub async fn close(client: &Client, node_id: i64) -> anyhow::Result<()> {
    client
        .execute("DELETE FROM window_slices WHERE node_id = $1", &[&node_id])
        .await?;
    Ok(())
}
