//! What a `postal serve` node reads and writes in the PostgreSQL ledger: its `nodes` row,
//! the snapshot of accounts and keys, grants, numbered flushes, the sweep of expired
//! grants, its acknowledgement of a change, and the idempotent answers.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use tokio_postgres::{Client, GenericClient, Transaction};

use crate::db::idempotency::{ReleasedClaim, StoredAnswer};
use crate::db::keys::ActiveKey;
use crate::db::ledger::ChargeRow;
use crate::db::rows::{Caller, unix_secs};
use crate::domain::api_key::{KeyHash, KeyKind, Publishable};
use crate::domain::charge::AccountState;
use crate::domain::grant;
use crate::domain::money::Micros;
use crate::domain::origin::OriginPattern;
use crate::domain::rate_limit::{Counters, Limits};

use super::RECALL_CHANNEL;
use super::windows::{self, WindowFlush, WindowsFlushed};

/// A node's grant on an account as the ledger holds it, with the account's balance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeGrant {
    pub account_id: i64,
    pub remaining: Micros,
    pub balance: Micros,
    /// What other nodes hold of the account (a grant answers it; a flush does not).
    pub elsewhere: Micros,
}

/// One flush of a node.
pub struct Flush<'a> {
    pub node_id: i64,
    pub number: u64,
    pub at: SystemTime,
    pub charges: &'a [ChargeRow],
    pub returns: &'a [(i64, Micros)],
    pub answers: &'a [StoredAnswer],
    /// Claims of idempotency keys whose requests ended without an answer.
    pub released: &'a [ReleasedClaim],
    pub ttl: Duration,
}

/// What a flush found: this node's grants after it, and the version of accounts and keys.
pub struct Flushed {
    pub grants: Vec<NodeGrant>,
    pub version: i64,
    /// The batch had been applied already (its first COMMIT's answer was lost).
    pub replayed: bool,
    /// This node's window slices after it, and the window counts of its accounts.
    pub windows: WindowsFlushed,
}

fn micros(stored: i64) -> anyhow::Result<Micros> {
    Micros::new(stored).with_context(|| format!("a stored amount out of range: {stored}"))
}

fn count(stored: i64) -> u64 {
    u64::try_from(stored).unwrap_or(0)
}

fn secs(ttl: Duration) -> f64 {
    ttl.as_secs_f64()
}

/// Registers this process as node `node_id`.
pub async fn register(client: &Client, node_id: i64) -> anyhow::Result<()> {
    client
        .execute(
            "INSERT INTO nodes (node_id) VALUES ($1) ON CONFLICT DO NOTHING",
            &[&node_id],
        )
        .await
        .context("registering the node")?;
    Ok(())
}

/// Every account and active key, and the version they are as of, in one snapshot.
pub async fn load(
    client: &mut Client,
) -> anyhow::Result<(i64, Vec<(i64, AccountState)>, Vec<ActiveKey>)> {
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let version = super::version(&tx).await?;
    let mut accounts = Vec::new();
    for r in tx
        .query(
            "SELECT id, balance, limit_per_minute, limit_per_hour, limit_per_day FROM accounts",
            &[],
        )
        .await?
    {
        let limit = |i: usize| r.get::<_, Option<i64>>(i).map(count);
        accounts.push((
            r.get::<_, i64>(0),
            AccountState {
                balance: micros(r.get(1))?,
                limits: Limits {
                    per_minute: limit(2),
                    per_hour: limit(3),
                    per_day: limit(4),
                },
                counters: Counters::default(),
            },
        ));
    }
    let mut keys = Vec::new();
    for r in tx
        .query(
            "SELECT key_hash, account_id, id, kind, origins, per_ip_minute
             FROM api_keys WHERE revoked_at IS NULL",
            &[],
        )
        .await?
    {
        let hash: Vec<u8> = r.get(0);
        let hash: KeyHash = hash
            .try_into()
            .map_err(|_| anyhow::anyhow!("a key hash of the wrong length"))?;
        let kind: String = r.get(3);
        let publishable = match KeyKind::from_stored(&kind) {
            Some(KeyKind::Secret) => None,
            Some(KeyKind::Publishable) => Some(publishable_rules(
                r.get(4),
                r.get::<_, Option<i32>>(5).map(|n| n.max(0) as u32),
            )?),
            None => anyhow::bail!("unknown key kind {kind:?}"),
        };
        keys.push(ActiveKey {
            hash,
            caller: Caller {
                account_id: r.get(1),
                key_id: r.get(2),
            },
            publishable,
        });
    }
    tx.commit().await?;
    Ok((version, accounts, keys))
}

/// A publishable key's stored origins (one per line) and per-IP limit.
pub(super) fn publishable_rules(
    origins: Option<String>,
    per_ip_minute: Option<u32>,
) -> anyhow::Result<Publishable> {
    let origins = origins
        .as_deref()
        .unwrap_or("")
        .lines()
        .map(OriginPattern::parse)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("a stored origin: {e}"))?;
    match (origins.is_empty(), per_ip_minute) {
        (false, Some(per_ip_minute)) => Ok(Publishable {
            origins,
            per_ip_minute,
        }),
        _ => anyhow::bail!("a publishable key without origins or per-IP limit"),
    }
}

/// Leases node `node_id` at least `need` more of each account asked (`(account, need,
/// want)`, up to `want`, `domain::grant::grant_size`), or nothing when less is free, all
/// in one transaction (one commit for every request of a writer turn); then the node's
/// grant of each, in ascending account id.
/// Expired grants of other nodes on the account are swept first. When nothing could be
/// granted while other nodes hold grants on the account, they are asked to hand them back
/// (`NOTIFY`, delivered at commit). Committed durably before the node spends it.
pub async fn grants(
    client: &mut Client,
    node_id: i64,
    asks: &[(i64, Micros, Micros)],
    ttl: Duration,
) -> anyhow::Result<Vec<NodeGrant>> {
    let tx = client.transaction().await?;
    // Every account asked for, locked in ascending id (as flushes lock them).
    let ids: Vec<i64> = asks.iter().map(|(id, _, _)| *id).collect();
    let mut locked: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for row in tx
        .query(
            "SELECT id, balance, leased FROM accounts WHERE id = ANY($1) ORDER BY id FOR UPDATE",
            &[&ids],
        )
        .await?
    {
        locked.insert(row.get(0), (row.get(1), row.get(2)));
    }
    let mut grants = Vec::with_capacity(asks.len());
    for (account_id, (balance, leased)) in locked {
        let Some(&(_, need, want)) = asks.iter().find(|(id, _, _)| *id == account_id) else {
            continue;
        };
        grants.push(
            grant_locked(&tx, node_id, account_id, (balance, leased), need, want, ttl).await?,
        );
    }
    if grants.len() < asks.len() {
        anyhow::bail!("a grant asked for an account that does not exist");
    }
    tx.commit().await.context("committing a grant")?;
    Ok(grants)
}

/// One account's grant, its row locked by the caller's transaction: (balance, leased)
/// as locked.
async fn grant_locked(
    tx: &Transaction<'_>,
    node_id: i64,
    account_id: i64,
    (balance, leased): (i64, i64),
    need: Micros,
    want: Micros,
    ttl: Duration,
) -> anyhow::Result<NodeGrant> {
    let mut leased = leased;
    let swept: i64 = tx
        .query_one(
            "WITH gone AS (DELETE FROM leases
                 WHERE account_id = $1 AND node_id <> $2 AND expires_at < now()
                 RETURNING remaining)
             SELECT coalesce(sum(remaining), 0)::bigint FROM gone",
            &[&account_id, &node_id],
        )
        .await?
        .get(0);
    leased -= swept;
    let own: i64 = tx
        .query_opt(
            "SELECT remaining FROM leases WHERE account_id = $1 AND node_id = $2",
            &[&account_id, &node_id],
        )
        .await?
        .map_or(0, |r| r.get(0));
    let free = micros(balance - leased)?;
    let granted = grant::grant_size(free, need, want);
    if granted == Micros::ZERO && leased > own {
        tx.execute(
            "SELECT pg_notify($1, $2)",
            &[&RECALL_CHANNEL, &format!("{account_id}:{node_id}")],
        )
        .await?;
    }
    let remaining: i64 = tx
        .query_one(
            "INSERT INTO leases (account_id, node_id, remaining, expires_at)
             VALUES ($1, $2, $3, now() + make_interval(secs => $4))
             ON CONFLICT (account_id, node_id) DO UPDATE
                 SET remaining = leases.remaining + excluded.remaining,
                     expires_at = excluded.expires_at
             RETURNING remaining",
            &[&account_id, &node_id, &granted.get(), &secs(ttl)],
        )
        .await?
        .get(0);
    tx.execute(
        "UPDATE accounts SET leased = $2 WHERE id = $1",
        &[&account_id, &(leased + granted.get())],
    )
    .await?;
    Ok(NodeGrant {
        account_id,
        remaining: micros(remaining)?,
        balance: micros(balance)?,
        elsewhere: micros(leased - own).unwrap_or(Micros::ZERO),
    })
}

/// Applies one flush of a node in one transaction, at most once per batch number: the
/// charges (from the node's grant first, then the free balance, `domain::grant::take`),
/// one ledger row each; the grants handed back; the answers. Every grant of the node is
/// extended by `ttl` on the database clock. Returns the node's grants and the version.
pub async fn flush(client: &mut Client, flush: &Flush<'_>) -> anyhow::Result<Flushed> {
    flush_with_windows(client, flush, &WindowFlush::default()).await
}

/// As [`flush`], with the rate-limit windows of the batch in the same transaction
/// (`windows::flush`): the accounts whose windows it touches or holds slices of are
/// locked with the others, in id order.
/// A flush's ledger rows as columns, for one `unnest` insert.
#[derive(Default)]
struct ChargeColumns<'a> {
    account_id: Vec<i64>,
    amount: Vec<i64>,
    balance_after: Vec<i64>,
    queries: Vec<i64>,
    endpoint: Vec<&'a str>,
}

pub async fn flush_with_windows(
    client: &mut Client,
    flush: &Flush<'_>,
    window_flush: &WindowFlush<'_>,
) -> anyhow::Result<Flushed> {
    let tx = client.transaction().await?;
    let number = i64::try_from(flush.number).unwrap_or(i64::MAX);
    let applied: Option<i64> = tx
        .query_opt(
            "SELECT applied_batch FROM nodes WHERE node_id = $1 FOR UPDATE",
            &[&flush.node_id],
        )
        .await?
        .map(|r| r.get(0));
    let replayed = match applied {
        Some(done) if done >= number => true,
        Some(_) => {
            tx.execute(
                "UPDATE nodes SET applied_batch = $2, heartbeat_at = now() WHERE node_id = $1",
                &[&flush.node_id, &number],
            )
            .await?;
            false
        }
        None => {
            tx.execute(
                "INSERT INTO nodes (node_id, applied_batch) VALUES ($1, $2)",
                &[&flush.node_id, &number],
            )
            .await?;
            false
        }
    };
    // Every account this flush touches or holds a grant or a window slice of, locked in
    // id order.
    let held: Vec<i64> = tx
        .query(
            "SELECT account_id FROM leases WHERE node_id = $1
             UNION SELECT account_id FROM window_slices WHERE node_id = $1",
            &[&flush.node_id],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut ids: BTreeSet<i64> = held.into_iter().collect();
    if !replayed {
        ids.extend(flush.charges.iter().map(|c| c.account_id));
        ids.extend(flush.returns.iter().map(|(id, _)| *id));
        let queries = window_flush.admitted.iter().chain(window_flush.returns);
        ids.extend(queries.map(|q| q.account_id));
    }
    let ids: Vec<i64> = ids.into_iter().collect();
    let mut accounts: BTreeMap<i64, (i64, i64, i64)> = BTreeMap::new(); // balance, leased, own
    for r in tx
        .query(
            "SELECT id, balance, leased FROM accounts
             WHERE id = ANY($1) ORDER BY id FOR UPDATE",
            &[&ids],
        )
        .await?
    {
        accounts.insert(r.get(0), (r.get(1), r.get(2), 0));
    }
    // Read once the accounts are locked, by a statement of its own: a grant joined into
    // the locking statement is read from that statement's snapshot, and when the lock
    // waited for another node's sweep of this node's expired grant, PostgreSQL rereads
    // the account (its `leased` without the grant) but not the joined grant, which the
    // flush then took from `leased` a second time (found by the test of an outage longer
    // than the TTL: `leased` went negative).
    for r in tx
        .query(
            "SELECT account_id, remaining FROM leases
             WHERE node_id = $1 AND account_id = ANY($2)",
            &[&flush.node_id, &ids],
        )
        .await?
    {
        if let Some(account) = accounts.get_mut(&r.get::<_, i64>(0)) {
            account.2 = r.get(1);
        }
    }
    if !replayed {
        let at = unix_secs(flush.at);
        // One ledger row per charge row, written by one statement (rows in the batch's
        // order): (account, amount, balance after, queries, endpoint).
        let mut rows = ChargeColumns::default();
        for charge in flush.charges {
            let Some((balance, leased, own)) = accounts.get_mut(&charge.account_id) else {
                tracing::error!("charges of a missing account {} dropped", charge.account_id);
                continue;
            };
            let free = micros(*balance - *leased)?;
            let (from_grant, from_free) = grant::take(charge.amount, micros(*own)?, free);
            let taken = from_grant.get() + from_free.get();
            if taken < charge.amount.get() {
                tracing::warn!(
                    "account {}: {} micros charged but only {taken} could be taken \
                     (a grant expired while this node could not flush)",
                    charge.account_id,
                    charge.amount
                );
            }
            *own -= from_grant.get();
            *leased -= from_grant.get();
            *balance -= taken;
            rows.account_id.push(charge.account_id);
            rows.amount.push(-taken);
            rows.balance_after.push(*balance);
            rows.queries
                .push(i64::try_from(charge.queries).unwrap_or(i64::MAX));
            rows.endpoint.push(charge.endpoint.as_str());
        }
        tx.execute(
            "INSERT INTO ledger (account_id, at, kind, amount, balance_after, query_count,
                                 endpoint, node_id)
             SELECT r.account_id, $6, 'charge', r.amount, r.balance_after, r.query_count,
                    r.endpoint, $7
             FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[])
                  WITH ORDINALITY AS r(account_id, amount, balance_after, query_count,
                                       endpoint, n)
             ORDER BY r.n",
            &[
                &rows.account_id,
                &rows.amount,
                &rows.balance_after,
                &rows.queries,
                &rows.endpoint,
                &at,
                &flush.node_id,
            ],
        )
        .await
        .context("appending the charge rows")?;
        for (account_id, amount) in flush.returns {
            let Some((_, leased, own)) = accounts.get_mut(account_id) else {
                continue;
            };
            let back = amount.get().min(*own);
            *own -= back;
            *leased -= back;
        }
        let touched: BTreeSet<i64> = flush
            .charges
            .iter()
            .map(|c| c.account_id)
            .chain(flush.returns.iter().map(|(id, _)| *id))
            .collect();
        // The touched accounts and this node's grants of them, one statement each.
        let mut changed: (Vec<i64>, Vec<i64>, Vec<i64>, Vec<i64>) = Default::default();
        for id in touched {
            let Some((balance, leased, own)) = accounts.get(&id) else {
                continue;
            };
            changed.0.push(id);
            changed.1.push(*balance);
            changed.2.push(*leased);
            changed.3.push(*own);
        }
        tx.execute(
            "UPDATE accounts a SET balance = u.balance, leased = u.leased
             FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS u(id, balance, leased)
             WHERE a.id = u.id",
            &[&changed.0, &changed.1, &changed.2],
        )
        .await?;
        tx.execute(
            "UPDATE leases l SET remaining = u.remaining
             FROM unnest($1::bigint[], $2::bigint[]) AS u(account_id, remaining)
             WHERE l.account_id = u.account_id AND l.node_id = $3",
            &[&changed.0, &changed.3, &flush.node_id],
        )
        .await?;
        super::idempotency::store_answers(&tx, flush.node_id, flush.answers).await?;
        super::idempotency::release(&tx, flush.node_id, flush.released).await?;
    }
    tx.execute(
        "DELETE FROM leases WHERE node_id = $1 AND remaining = 0",
        &[&flush.node_id],
    )
    .await?;
    tx.execute(
        "UPDATE leases SET expires_at = now() + make_interval(secs => $2)
         WHERE node_id = $1 AND account_id = ANY($3)",
        &[&flush.node_id, &secs(flush.ttl), &ids],
    )
    .await?;
    let windows =
        windows::flush(&tx, flush.node_id, &ids, window_flush, replayed, flush.ttl).await?;
    let grants = node_grants(&tx, flush.node_id).await?;
    let version = super::version(&tx).await?;
    tx.commit().await.context("committing a flush")?;
    Ok(Flushed {
        grants,
        version,
        replayed,
        windows,
    })
}

async fn node_grants(client: &impl GenericClient, node_id: i64) -> anyhow::Result<Vec<NodeGrant>> {
    let mut grants = Vec::new();
    for r in client
        .query(
            "SELECT l.account_id, l.remaining, a.balance FROM leases l
             JOIN accounts a ON a.id = l.account_id WHERE l.node_id = $1",
            &[&node_id],
        )
        .await?
    {
        grants.push(NodeGrant {
            account_id: r.get(0),
            remaining: micros(r.get(1))?,
            balance: micros(r.get(2))?,
            elsewhere: Micros::ZERO,
        });
    }
    Ok(grants)
}

/// Grants past their expiry (on the database clock) go back to their accounts' free
/// balance. Accounts locked in id order; one another transaction holds is skipped (its
/// next grant sweeps it). How many grants were swept.
pub async fn sweep(client: &mut Client) -> anyhow::Result<u64> {
    let tx = client.transaction().await?;
    let ids: Vec<i64> = tx
        .query(
            "SELECT id FROM accounts WHERE id IN
                 (SELECT account_id FROM leases WHERE expires_at < now())
             ORDER BY id FOR UPDATE SKIP LOCKED",
            &[],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if ids.is_empty() {
        tx.commit().await?;
        return Ok(0);
    }
    let swept = tx
        .query(
            "WITH gone AS (DELETE FROM leases WHERE account_id = ANY($1) AND expires_at < now()
                           RETURNING account_id, remaining),
                  sums AS (SELECT account_id, sum(remaining)::bigint AS total, count(*) AS n
                           FROM gone GROUP BY account_id)
             UPDATE accounts a SET leased = a.leased - s.total FROM sums s
             WHERE a.id = s.account_id RETURNING s.n",
            &[&ids],
        )
        .await?;
    tx.commit().await?;
    Ok(swept.iter().map(|r| count(r.get(0))).sum())
}

/// The node's heartbeat, and the version of accounts and keys now.
pub async fn heartbeat(client: &Client, node_id: i64) -> anyhow::Result<i64> {
    client
        .execute(
            "UPDATE nodes SET heartbeat_at = now() WHERE node_id = $1",
            &[&node_id],
        )
        .await?;
    super::version(client).await
}

/// The node's books hold version `version` of accounts and keys.
pub async fn acknowledge(client: &Client, node_id: i64, version: i64) -> anyhow::Result<()> {
    client
        .execute(
            "UPDATE nodes SET seen_version = greatest(seen_version, $2), heartbeat_at = now()
             WHERE node_id = $1",
            &[&node_id, &version],
        )
        .await?;
    Ok(())
}

/// A clean stop: whatever the node still holds goes back, and its row goes.
pub async fn close(client: &mut Client, node_id: i64) -> anyhow::Result<()> {
    let tx = client.transaction().await?;
    let ids: Vec<i64> = tx
        .query(
            "SELECT id FROM accounts WHERE id IN (SELECT account_id FROM leases WHERE node_id = $1)
             ORDER BY id FOR UPDATE",
            &[&node_id],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    tx.execute(
        "WITH gone AS (DELETE FROM leases WHERE node_id = $1 AND account_id = ANY($2)
                       RETURNING account_id, remaining)
         UPDATE accounts a SET leased = a.leased - g.remaining FROM gone g
         WHERE a.id = g.account_id",
        &[&node_id, &ids],
    )
    .await?;
    tx.execute("DELETE FROM nodes WHERE node_id = $1", &[&node_id])
        .await?;
    tx.commit().await?;
    Ok(())
}
