//! What a `postal serve` node reads and writes in the PostgreSQL ledger: its `nodes` row,
//! the snapshot of accounts and keys, grants, numbered flushes, the sweep of expired
//! grants, its acknowledgement of a change, and the idempotent answers.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, GenericClient, Transaction};

use crate::db::rows::{ActiveKey, ChargeRow, ReleasedClaim, StoredAnswer, unix_secs};
use crate::domain::api_key::{KeyHash, KeyKind};
use crate::domain::charge::AccountState;
use crate::domain::charge::Caller;
use crate::domain::grant::{self, Locked};
use crate::domain::money::Micros;
use crate::domain::rate_limit::Counters;

use super::RECALL_CHANNEL;
use super::decode::{count, limits_at, publishable_rules, stored_count};
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
    /// Grants running low while the node spends from them (account, want): each gets
    /// `domain::grant::grant_size` more of the free balance, so that requests do not wait
    /// for a grant (nothing when less than a query is free; no recall is sent).
    pub topups: &'a [(i64, Micros)],
    pub answers: &'a [StoredAnswer],
    /// Claims of idempotency keys whose requests ended without an answer.
    pub released: &'a [ReleasedClaim],
    pub ttl: Duration,
}

/// What a flush found: this node's grants after it, and the version of accounts and keys.
pub struct Flushed {
    /// The node's grants of the accounts the flush touched or renewed (an account of
    /// `touched` missing here holds none; a grant of any other account is as it was).
    pub grants: Vec<NodeGrant>,
    /// The accounts the flush changed (and locked), in ascending id.
    pub touched: Vec<i64>,
    pub version: i64,
    /// The batch had been applied already (its first COMMIT's answer was lost).
    pub replayed: bool,
    /// This node's window slices after it, and the window counts of its accounts.
    pub windows: WindowsFlushed,
}

// Parameter types of statements sent with their types (one round trip each, instead of
// a prepare, an execute and a close): the flush's, run under the accounts' locks.
const I8: Type = Type::INT8;
const I8S: Type = Type::INT8_ARRAY;
const F8: Type = Type::FLOAT8;

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
    let tx = super::snapshot(client).await?;
    let version = super::version(&tx).await?;
    let mut accounts = Vec::new();
    for r in tx
        .query(
            "SELECT id, balance, limit_per_minute, limit_per_hour, limit_per_day FROM accounts",
            &[],
        )
        .await?
    {
        accounts.push((
            r.get::<_, i64>(0),
            AccountState {
                balance: r.try_get(1)?,
                limits: limits_at(&r, 2),
                counters: Counters::default(),
            },
        ));
    }
    let mut keys = Vec::new();
    for r in tx
        .query(
            "SELECT key_hash, account_id, id, kind, origins, per_ip_minute, expires_at,
                    max_per_minute, max_per_day
             FROM api_keys WHERE revoked_at IS NULL
               AND (expires_at IS NULL OR expires_at > extract(epoch FROM now()))",
            &[],
        )
        .await?
    {
        let hash: Vec<u8> = r.get(0);
        let hash: KeyHash = hash
            .try_into()
            .map_err(|_| anyhow::anyhow!("a key hash of the wrong length"))?;
        let publishable = match r.try_get::<_, KeyKind>(3)? {
            KeyKind::Secret => None,
            KeyKind::Publishable => {
                Some(publishable_rules(r.get(4), r.get(5), (r.get(7), r.get(8)))?)
            }
        };
        keys.push(ActiveKey {
            hash,
            caller: Caller {
                account_id: r.get(1),
                key_id: r.get(2),
            },
            publishable,
            expires_at: r.get(6),
        });
    }
    tx.commit().await?;
    Ok((version, accounts, keys))
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
    let ids: Vec<i64> = asks.iter().map(|(id, _, _)| *id).collect();
    // One round trip (sent together, run in this order): every account asked for locked
    // in ascending id (as flushes lock them); other nodes' expired grants on them swept
    // (what each returns to its account); this node's grants of them.
    let (locked, swept, own) = tokio::try_join!(
        biased;
        async {
            tx.query_typed(
                "SELECT id, balance, leased FROM accounts WHERE id = ANY($1) ORDER BY id FOR UPDATE",
                &[(&ids, I8S)],
            )
            .await
            .context("locking the accounts")
        },
        async {
            tx.query_typed(
                "WITH gone AS (DELETE FROM leases
                     WHERE account_id = ANY($1) AND node_id <> $2 AND expires_at < now()
                     RETURNING account_id, remaining)
                 SELECT account_id, sum(remaining)::bigint FROM gone GROUP BY account_id",
                &[(&ids, I8S), (&node_id, I8)],
            )
            .await
            .context("sweeping expired grants")
        },
        async {
            tx.query_typed(
                "SELECT account_id, remaining FROM leases
                 WHERE account_id = ANY($1) AND node_id = $2",
                &[(&ids, I8S), (&node_id, I8)],
            )
            .await
            .context("reading the grants")
        },
    )?;
    let amounts = |rows: Vec<tokio_postgres::Row>| -> anyhow::Result<BTreeMap<i64, Micros>> {
        rows.iter().map(|r| Ok((r.get(0), r.try_get(1)?))).collect()
    };
    let (swept, own) = (amounts(swept)?, amounts(own)?);
    let mut grants = Vec::with_capacity(asks.len());
    let mut recalls = Vec::new();
    // The grants written (account, granted, leased after), in ascending id.
    let mut written: (Vec<i64>, Vec<Micros>, Vec<Micros>) = Default::default();
    for row in &locked {
        let account_id: i64 = row.get(0);
        let Some(&(_, need, want)) = asks.iter().find(|(id, _, _)| *id == account_id) else {
            continue;
        };
        let swept = swept.get(&account_id).copied().unwrap_or(Micros::ZERO);
        let mut account = Locked {
            balance: row.try_get(1)?,
            leased: row
                .try_get::<_, Micros>(2)?
                .checked_sub(swept)
                .context("a swept grant")?,
            own: own.get(&account_id).copied().unwrap_or(Micros::ZERO),
        };
        let granted = account.grant(need, want);
        if granted == Micros::ZERO && account.elsewhere() > Micros::ZERO {
            recalls.push(format!("{account_id}:{node_id}"));
        }
        written.0.push(account_id);
        written.1.push(granted);
        written.2.push(account.leased);
        grants.push(NodeGrant {
            account_id,
            remaining: account.own,
            balance: account.balance,
            elsewhere: account.elsewhere(),
        });
    }
    if grants.len() < asks.len() {
        anyhow::bail!("a grant asked for an account that does not exist");
    }
    // One round trip again: the grants (extended; an account with nothing granted and
    // nothing held gets no row), the accounts' `leased`, and the recalls (NOTIFY, sent at
    // commit) of accounts with nothing free while other nodes hold grants of them.
    let ttl = secs(ttl);
    tokio::try_join!(
        biased;
        write(
            &tx,
            true,
            "INSERT INTO leases (account_id, node_id, remaining, expires_at)
             SELECT u.account_id, $3, u.granted, now() + make_interval(secs => $4)
             FROM unnest($1::bigint[], $2::bigint[]) AS u(account_id, granted)
             WHERE u.granted > 0 OR EXISTS (SELECT 1 FROM leases l
                 WHERE l.account_id = u.account_id AND l.node_id = $3)
             ON CONFLICT (account_id, node_id) DO UPDATE
                 SET remaining = leases.remaining + excluded.remaining,
                     expires_at = excluded.expires_at",
            vec![(&written.0, I8S), (&written.1, I8S), (&node_id, I8), (&ttl, F8)],
            "writing the grants",
        ),
        write(
            &tx,
            true,
            "UPDATE accounts a SET leased = u.leased
             FROM unnest($1::bigint[], $2::bigint[]) AS u(id, leased)
             WHERE a.id = u.id AND a.leased <> u.leased",
            vec![(&written.0, I8S), (&written.2, I8S)],
            "writing what is leased",
        ),
        write(
            &tx,
            !recalls.is_empty(),
            "SELECT pg_notify($1, r) FROM unnest($2::text[]) AS r",
            vec![(&RECALL_CHANNEL, Type::TEXT), (&recalls, Type::TEXT_ARRAY)],
            "recalling grants",
        ),
    )?;
    tx.commit().await.context("committing a grant")?;
    Ok(grants)
}

/// Applies one flush of a node in one transaction, at most once per batch number: the
/// charges (from the node's grant first, then the free balance, `domain::grant::take`),
/// one ledger row each; the grants handed back; the answers. The grants of the accounts
/// it changes are extended by `ttl` on the database clock, the node's others when they
/// near their expiry (`RENEW_UNDER`). Returns those grants and the version.
pub async fn flush(client: &mut Client, flush: &Flush<'_>) -> anyhow::Result<Flushed> {
    flush_with_windows(client, flush, &WindowFlush::default()).await
}

/// A flush's ledger rows as columns, for one `unnest` insert.
#[derive(Default)]
struct ChargeColumns<'a> {
    account_id: Vec<i64>,
    key_id: Vec<i64>,
    amount: Vec<i64>,
    balance_after: Vec<i64>,
    queries: Vec<i64>,
    endpoint: Vec<&'a str>,
}

/// As [`flush`], with the rate-limit windows of the batch in the same transaction
/// (`windows::flush`): the accounts whose windows it changes are locked with the others,
/// in id order; the node's other slices are renewed as its grants are.
pub async fn flush_with_windows(
    client: &mut Client,
    flush: &Flush<'_>,
    window_flush: &WindowFlush<'_>,
) -> anyhow::Result<Flushed> {
    let tx = client.transaction().await?;
    let number = i64::try_from(flush.number).unwrap_or(i64::MAX);
    // Every account this flush changes, locked in id order. The node's other grants and
    // slices are only renewed (`renew_untouched`): other nodes' flushes of the same
    // accounts do not wait for them.
    let mut ids: BTreeSet<i64> = BTreeSet::new();
    ids.extend(flush.charges.iter().map(|c| c.account_id));
    ids.extend(flush.returns.iter().map(|(id, _)| *id));
    ids.extend(flush.topups.iter().map(|(id, _)| *id));
    let queries = window_flush.admitted.iter().chain(window_flush.returns);
    ids.extend(queries.map(|q| q.account_id));
    let ids: Vec<i64> = ids.into_iter().collect();
    // One round trip (the statements are sent together and run in this order, `biased`):
    // the batch number claimed (no row: applied before, the flush only reports), the
    // accounts locked, and the node's grants of them read once they are locked, by a
    // statement of its own: a grant joined into the locking statement is read from that
    // statement's snapshot, and when the lock waited for another node's sweep of this
    // node's expired grant, PostgreSQL rereads the account (its `leased` without the
    // grant) but not the joined grant, which the flush then took from `leased` a second
    // time (found by the test of an outage longer than the TTL: `leased` went negative).
    let (claimed, locked, own) = tokio::try_join!(
        biased;
        async {
            tx.query_typed_opt(
                "INSERT INTO nodes (node_id, applied_batch) VALUES ($1, $2)
                 ON CONFLICT (node_id) DO UPDATE
                     SET applied_batch = excluded.applied_batch, heartbeat_at = now()
                     WHERE nodes.applied_batch < excluded.applied_batch
                 RETURNING node_id",
                &[(&flush.node_id, I8), (&number, I8)],
            )
            .await
            .context("claiming the batch number")
        },
        async {
            tx.query_typed(
                "SELECT id, balance, leased FROM accounts
                 WHERE id = ANY($1) ORDER BY id FOR UPDATE",
                &[(&ids, I8S)],
            )
            .await
            .context("locking the accounts")
        },
        async {
            tx.query_typed(
                "SELECT account_id, remaining FROM leases
                 WHERE node_id = $1 AND account_id = ANY($2)",
                &[(&flush.node_id, I8), (&ids, I8S)],
            )
            .await
            .context("reading the grants")
        },
    )?;
    let replayed = claimed.is_none();
    let mut accounts: BTreeMap<i64, Locked> = BTreeMap::new();
    for r in locked {
        let (balance, leased) = (r.try_get(1)?, r.try_get(2)?);
        let own = Micros::ZERO;
        accounts.insert(
            r.get(0),
            Locked {
                balance,
                leased,
                own,
            },
        );
    }
    for r in own {
        if let Some(account) = accounts.get_mut(&r.get::<_, i64>(0)) {
            account.own = r.try_get(1)?;
        }
    }
    // One ledger row per charge row (rows in the batch's order).
    let mut rows = ChargeColumns::default();
    // The changed accounts and this node's grants of them: a grant left is written and
    // extended, an emptied one goes.
    let mut changed: (Vec<i64>, Vec<Micros>, Vec<Micros>) = Default::default();
    let mut kept: (Vec<i64>, Vec<Micros>) = Default::default();
    let mut emptied: Vec<i64> = Vec::new();
    if !replayed {
        let spent: Vec<(i64, Micros)> = flush
            .charges
            .iter()
            .map(|c| (c.account_id, c.amount))
            .collect();
        let settled = grant::settle(accounts, &spent, flush.returns, flush.topups);
        for (charge, taken) in flush.charges.iter().zip(&settled.charges) {
            let Some(taken) = taken else {
                tracing::error!("charges of a missing account {} dropped", charge.account_id);
                continue;
            };
            if taken.taken < taken.wanted {
                tracing::warn!(
                    "account {}: {} micros charged but only {} could be taken \
                     (a grant expired while this node could not flush)",
                    charge.account_id,
                    taken.wanted.get(),
                    taken.taken.get()
                );
            }
            rows.account_id.push(charge.account_id);
            rows.key_id.push(charge.key_id);
            rows.amount.push(-taken.taken.get());
            rows.balance_after.push(taken.balance_after.get());
            rows.queries.push(stored_count(charge.queries));
            rows.endpoint.push(charge.endpoint.as_str());
        }
        for (&id, account) in &settled.accounts {
            changed.0.push(id);
            changed.1.push(account.balance);
            changed.2.push(account.leased);
            if account.own > Micros::ZERO {
                kept.0.push(id);
                kept.1.push(account.own);
            } else {
                emptied.push(id);
            }
        }
        super::idempotency::store_answers(&tx, flush.node_id, flush.answers).await?;
        super::idempotency::release(&tx, flush.node_id, flush.released).await?;
    }
    let at = unix_secs(flush.at);
    // One round trip again: the writes, then the renewals (the last writes: they lock
    // rows of accounts this flush does not hold, and nothing after them waits for a
    // lock), then what the flush reports. A replayed batch writes nothing; its grants
    // are extended, as its first application did.
    let ttl = secs(flush.ttl);
    let (_, _, _, _, _, _, windows, renewed, renewed_slices, mut grants, version) = tokio::try_join!(
        biased;
        write(
            &tx,
            !rows.account_id.is_empty(),
            "INSERT INTO ledger (account_id, at, kind, amount, balance_after, query_count,
                                 endpoint, node_id, key_id)
             SELECT r.account_id, $6, 'charge', r.amount, r.balance_after, r.query_count,
                    r.endpoint, $7, r.key_id
             FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[],
                         $5::text[], $8::bigint[])
                  WITH ORDINALITY AS r(account_id, amount, balance_after, query_count,
                                       endpoint, key_id, n)
             ORDER BY r.n",
            vec![
                    (&rows.account_id, I8S),
                    (&rows.amount, I8S),
                    (&rows.balance_after, I8S),
                    (&rows.queries, I8S),
                    (&rows.endpoint, Type::TEXT_ARRAY),
                    (&at, I8),
                    (&flush.node_id, I8),
                    (&rows.key_id, I8S),
                ],
            "appending the charge rows",
        ),
        // The same rows counted per day and key: every node's flushes add to one row,
        // under the locks of the accounts already held (rows in the batch's order:
        // account, key, endpoint, each once).
        write(
            &tx,
            !rows.account_id.is_empty(),
            "INSERT INTO usage_days AS u (account_id, day, key_id, endpoint, queries, charged,
                                          last_at)
             SELECT r.account_id, $5 - $5 % 86400, r.key_id, r.endpoint, r.query_count,
                    -r.amount, $5
             FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[],
                         $6::bigint[])
                  AS r(account_id, key_id, endpoint, query_count, amount)
             ON CONFLICT (account_id, day, key_id, endpoint) DO UPDATE
                 SET queries = u.queries + excluded.queries,
                     charged = u.charged + excluded.charged,
                     last_at = greatest(u.last_at, excluded.last_at)",
            vec![
                    (&rows.account_id, I8S),
                    (&rows.key_id, I8S),
                    (&rows.endpoint, Type::TEXT_ARRAY),
                    (&rows.queries, I8S),
                    (&at, I8),
                    (&rows.amount, I8S),
                ],
            "counting the charges in usage_days",
        ),
        write(
            &tx,
            !changed.0.is_empty(),
            "UPDATE accounts a SET balance = u.balance, leased = u.leased
             FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS u(id, balance, leased)
             WHERE a.id = u.id AND (a.balance, a.leased) <> (u.balance, u.leased)",
            vec![(&changed.0, I8S), (&changed.1, I8S), (&changed.2, I8S)],
            "writing the balances",
        ),
        write(
            &tx,
            !kept.0.is_empty(),
            "INSERT INTO leases (account_id, node_id, remaining, expires_at)
             SELECT u.account_id, $3, u.remaining, now() + make_interval(secs => $4)
             FROM unnest($1::bigint[], $2::bigint[]) AS u(account_id, remaining)
             ON CONFLICT (account_id, node_id) DO UPDATE
                 SET remaining = excluded.remaining, expires_at = excluded.expires_at",
            vec![(&kept.0, I8S), (&kept.1, I8S), (&flush.node_id, I8), (&ttl, F8)],
            "writing the grants",
        ),
        write(
            &tx,
            !emptied.is_empty(),
            "DELETE FROM leases WHERE node_id = $1 AND account_id = ANY($2)",
            vec![(&flush.node_id, I8), (&emptied, I8S)],
            "deleting emptied grants",
        ),
        write(
            &tx,
            replayed,
            "UPDATE leases SET expires_at = now() + make_interval(secs => $2)
             WHERE node_id = $1 AND account_id = ANY($3)",
            vec![(&flush.node_id, I8), (&ttl, F8), (&ids, I8S)],
            "extending the grants of a replayed batch",
        ),
        windows::flush(&tx, flush.node_id, &ids, window_flush, replayed, flush.ttl),
        renew_untouched(&tx, flush.node_id, &ids, flush.ttl),
        windows::renew_untouched(&tx, flush.node_id, &ids, flush.ttl),
        node_grants(&tx, flush.node_id, &ids),
        async { super::version(&tx).await },
    )?;
    let mut windows = windows;
    windows.slices.extend(renewed_slices);
    grants.extend(renewed);
    tx.commit().await.context("committing a flush")?;
    Ok(Flushed {
        grants,
        touched: ids,
        version,
        replayed,
        windows,
    })
}

/// One write of a pipelined group (`tokio::try_join!(biased; ...)`): sent when first
/// polled, so in the group's order; nothing is sent (0 rows) unless `run`.
async fn write(
    tx: &Transaction<'_>,
    run: bool,
    sql: &str,
    params: Vec<(&(dyn ToSql + Sync), Type)>,
    what: &'static str,
) -> anyhow::Result<u64> {
    if !run {
        return Ok(0);
    }
    tx.execute_typed(sql, &params).await.context(what)
}

/// A grant this close to its expiry is renewed by the next flush even when the flush
/// does not touch its account: each grant is extended about once a second, not by every
/// flush (a node's local deadline is `MARGIN` = 1 s short of the TTL, so a grant renewed
/// every second or so never reaches it while the node flushes).
pub const RENEW_UNDER: Duration = Duration::from_secs(4);

/// Extends by `ttl` the node's grants outside `touched` that have less than
/// `RENEW_UNDER` left on the database clock; a row another transaction holds (a sweep
/// of it as expired) is skipped, never waited for. The grants renewed, with their
/// accounts' balances (read, not locked).
async fn renew_untouched(
    tx: &Transaction<'_>,
    node_id: i64,
    touched: &[i64],
    ttl: Duration,
) -> anyhow::Result<Vec<NodeGrant>> {
    tx.query_typed(
        "UPDATE leases l SET expires_at = now() + make_interval(secs => $3)
             FROM accounts a
             WHERE a.id = l.account_id AND l.node_id = $1 AND l.account_id IN (
                 SELECT account_id FROM leases
                 WHERE node_id = $1 AND NOT account_id = ANY($2) AND remaining > 0
                   AND expires_at < now() + make_interval(secs => $4)
                 FOR UPDATE SKIP LOCKED)
             RETURNING l.account_id, l.remaining, a.balance",
        &[
            (&node_id, I8),
            (&touched, I8S),
            (&secs(ttl), F8),
            (&secs(RENEW_UNDER), F8),
        ],
    )
    .await
    .context("renewing grants")?
    .iter()
    .map(grant_of)
    .collect()
}

/// The node's grants of the accounts `ids`.
async fn node_grants(
    client: &impl GenericClient,
    node_id: i64,
    ids: &[i64],
) -> anyhow::Result<Vec<NodeGrant>> {
    client
        .query_typed(
            "SELECT l.account_id, l.remaining, a.balance FROM leases l
             JOIN accounts a ON a.id = l.account_id
             WHERE l.node_id = $1 AND l.account_id = ANY($2)",
            &[(&node_id, I8), (&ids, I8S)],
        )
        .await?
        .iter()
        .map(grant_of)
        .collect()
}

/// A grant read as (account, remaining, balance).
fn grant_of(r: &tokio_postgres::Row) -> anyhow::Result<NodeGrant> {
    Ok(NodeGrant {
        account_id: r.get(0),
        remaining: r.try_get(1)?,
        balance: r.try_get(2)?,
        elsewhere: Micros::ZERO,
    })
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
