//! Idempotency keys in the ledger of a cluster (docs/cluster.md, "Idempotency-Key"):
//! the answers every node stored (written by the flush that charges them) and the claims
//! of the requests running under a key, so that a retry sent to any node is run once and
//! replayed everywhere else.
//!
//! A claim belongs to a node and to the node's local ticket for the request; it is
//! replaced by the answer in the flush that charges it, deleted by the flush after a
//! request that ended without an answer, and taken over when its node stopped beating for
//! `CLAIM_LIVE` (killed: its request's answer is lost with it, so the retry runs).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use tokio_postgres::{Client, GenericClient};

use crate::db::rows::{AnswerIndex, Holder, KeyClaim, ReleasedClaim, StoredAnswer, unix_secs};
use crate::domain::charge::Endpoint;
use crate::domain::idempotency::{ANSWER_TTL, Fingerprint, IdempotencyKey};

/// A claim of a node whose heartbeat is older than this can be taken over. Nodes beat at
/// every flush and every 250 ms when idle.
pub const CLAIM_LIVE: Duration = Duration::from_secs(5);

/// Claims `claim.key` for this node, or says who holds it: the first answer (given since
/// `claim.since`), or a request running on a live node. One claim row per key and
/// account: two nodes claiming at once are ordered by its primary key.
pub async fn claim(client: &Client, node_id: i64, claim: &KeyClaim) -> anyhow::Result<Holder> {
    let ticket = i64::try_from(claim.ticket).unwrap_or(i64::MAX);
    let fingerprint = &claim.fingerprint.as_bytes()[..];
    // An answer is written in the transaction that deletes its claim; a claim that goes
    // while this one is looked at is tried again.
    for _ in 0..3 {
        let claimed = client
            .query_opt(
                "INSERT INTO idempotency_claims AS c
                     (account_id, idempotency_key, endpoint, fingerprint, node_id, ticket)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (account_id, idempotency_key) DO UPDATE SET
                     endpoint = excluded.endpoint, fingerprint = excluded.fingerprint,
                     node_id = excluded.node_id, ticket = excluded.ticket, claimed_at = now()
                 WHERE c.node_id = excluded.node_id OR NOT EXISTS (
                     SELECT 1 FROM nodes n WHERE n.node_id = c.node_id
                     AND n.heartbeat_at > now() - make_interval(secs => $7))
                 RETURNING 1",
                &[
                    &claim.account_id,
                    &claim.key.as_str(),
                    &claim.endpoint.as_str(),
                    &fingerprint,
                    &node_id,
                    &ticket,
                    &CLAIM_LIVE.as_secs_f64(),
                ],
            )
            .await
            .context("claiming an idempotency key")?
            .is_some();
        if claimed {
            // Answered before the claim: the answer's transaction had deleted its claim.
            let answer = client
                .query_opt(
                    "SELECT endpoint, fingerprint, body FROM idempotent_answers
                     WHERE account_id = $1 AND idempotency_key = $2 AND created_at >= $3",
                    &[
                        &claim.account_id,
                        &claim.key.as_str(),
                        &unix_secs(claim.since),
                    ],
                )
                .await?;
            let Some(answer) = answer else {
                return Ok(Holder::Claimed);
            };
            release(
                client,
                node_id,
                &[ReleasedClaim {
                    account_id: claim.account_id,
                    key: claim.key.clone(),
                    ticket: claim.ticket,
                }],
            )
            .await?;
            let (endpoint, fingerprint) = parse(answer.get(0), answer.get(1))?;
            return Ok(Holder::Answered {
                endpoint,
                fingerprint,
                body: Arc::from(answer.get::<_, Vec<u8>>(2)),
            });
        }
        let running = client
            .query_opt(
                "SELECT endpoint, fingerprint FROM idempotency_claims
                 WHERE account_id = $1 AND idempotency_key = $2",
                &[&claim.account_id, &claim.key.as_str()],
            )
            .await?;
        if let Some(running) = running {
            let (endpoint, fingerprint) = parse(running.get(0), running.get(1))?;
            return Ok(Holder::Running {
                endpoint,
                fingerprint,
            });
        }
    }
    anyhow::bail!("an idempotency key changed hands three times while it was claimed")
}

/// Deletes the claims of requests that ended without an answer, each only while it is
/// still its ticket's (the node may have claimed the key again since).
pub async fn release(
    client: &impl GenericClient,
    node_id: i64,
    released: &[ReleasedClaim],
) -> anyhow::Result<()> {
    for r in released {
        client
            .execute(
                "DELETE FROM idempotency_claims
                 WHERE account_id = $1 AND idempotency_key = $2 AND node_id = $3 AND ticket = $4",
                &[
                    &r.account_id,
                    &r.key.as_str(),
                    &node_id,
                    &i64::try_from(r.ticket).unwrap_or(i64::MAX),
                ],
            )
            .await
            .context("releasing an idempotency key")?;
    }
    Ok(())
}

/// Answers given before this are no longer replayable at `at`.
fn expired_before(at: SystemTime) -> i64 {
    unix_secs(at.checked_sub(ANSWER_TTL).unwrap_or(SystemTime::UNIX_EPOCH))
}

fn parse(endpoint: String, fingerprint: Vec<u8>) -> anyhow::Result<(Endpoint, Fingerprint)> {
    let endpoint = Endpoint::parse(&endpoint)
        .with_context(|| format!("an unknown endpoint in the ledger: {endpoint}"))?;
    let fingerprint = <[u8; 32]>::try_from(fingerprint.as_slice())
        .map(Fingerprint::from_bytes)
        .map_err(|_| anyhow::anyhow!("a fingerprint of {} bytes", fingerprint.len()))?;
    Ok((endpoint, fingerprint))
}

/// Writes `answers` in the flush that charges them; each replaces the node's claim of its
/// key. A row of the same account and key is replaced only when it expired: a live one is
/// the first answer, given by another node that took the key over while this one could
/// not reach the ledger (docs/cluster.md), and replays keep sending it.
pub(super) async fn store_answers(
    client: &impl GenericClient,
    node_id: i64,
    answers: &[StoredAnswer],
) -> anyhow::Result<()> {
    for answer in answers {
        client
            .execute(
                "DELETE FROM idempotency_claims
                 WHERE account_id = $1 AND idempotency_key = $2 AND node_id = $3",
                &[&answer.account_id, &answer.key.as_str(), &node_id],
            )
            .await?;
        client
            .execute(
                "INSERT INTO idempotent_answers
                     (account_id, idempotency_key, endpoint, fingerprint, body, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (account_id, idempotency_key) DO UPDATE SET
                     endpoint = excluded.endpoint, fingerprint = excluded.fingerprint,
                     body = excluded.body, created_at = excluded.created_at
                 WHERE idempotent_answers.created_at < $7",
                &[
                    &answer.account_id,
                    &answer.key.as_str(),
                    &answer.endpoint.as_str(),
                    &&answer.fingerprint.as_bytes()[..],
                    &&answer.body[..],
                    &unix_secs(answer.answered),
                    &expired_before(answer.answered),
                ],
            )
            .await
            .context("storing an idempotent answer")?;
    }
    Ok(())
}

/// The answers given at `since` or later, without bodies.
pub async fn load_answers(client: &Client, since: SystemTime) -> anyhow::Result<Vec<AnswerIndex>> {
    let mut answers = Vec::new();
    for r in client
        .query(
            "SELECT account_id, idempotency_key, endpoint, fingerprint, created_at
             FROM idempotent_answers WHERE created_at >= $1",
            &[&unix_secs(since)],
        )
        .await?
    {
        let key: String = r.get(1);
        let endpoint: String = r.get(2);
        let fingerprint: Vec<u8> = r.get(3);
        let (Some(key), Some(endpoint), Some(fingerprint)) = (
            IdempotencyKey::parse(key.as_bytes()),
            Endpoint::parse(&endpoint),
            <[u8; 32]>::try_from(fingerprint.as_slice())
                .ok()
                .map(Fingerprint::from_bytes),
        ) else {
            continue;
        };
        answers.push(AnswerIndex {
            account_id: r.get(0),
            key,
            endpoint,
            fingerprint,
            answered: SystemTime::UNIX_EPOCH
                + Duration::from_secs(u64::try_from(r.get::<_, i64>(4)).unwrap_or(0)),
        });
    }
    Ok(answers)
}

/// The body of a stored answer.
pub async fn answer_body(
    client: &Client,
    account_id: i64,
    key: &IdempotencyKey,
) -> anyhow::Result<Option<Arc<[u8]>>> {
    Ok(client
        .query_opt(
            "SELECT body FROM idempotent_answers WHERE account_id = $1 AND idempotency_key = $2",
            &[&account_id, &key.as_str()],
        )
        .await?
        .map(|r| Arc::from(r.get::<_, Vec<u8>>(0))))
}

/// Deletes up to 1,000 answers given before `before`, and the claims of nodes no longer
/// alive; how many answers.
pub async fn purge_answers(client: &Client, before: SystemTime) -> anyhow::Result<usize> {
    client
        .execute(
            "DELETE FROM idempotency_claims c WHERE NOT EXISTS (
                 SELECT 1 FROM nodes n WHERE n.node_id = c.node_id
                 AND n.heartbeat_at > now() - make_interval(secs => $1))",
            &[&CLAIM_LIVE.as_secs_f64()],
        )
        .await?;
    let deleted = client
        .execute(
            "DELETE FROM idempotent_answers WHERE ctid IN (
                 SELECT ctid FROM idempotent_answers WHERE created_at < $1 LIMIT 1000)",
            &[&unix_secs(before)],
        )
        .await?;
    Ok(usize::try_from(deleted).unwrap_or(usize::MAX))
}
