//! The `idempotent_answers` table: the 200 answers of bulk requests sent with an
//! `Idempotency-Key`, written by the billing writer in the transaction that writes their
//! charge (`billing::sqlite`), loaded (without bodies) when the server starts, read by a
//! replay, deleted 24 hours on.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use rusqlite::{Connection, OptionalExtension, params};

use crate::db::rows::{AnswerIndex, StoredAnswer, unix_secs};
use crate::domain::charge::Endpoint;
use crate::domain::idempotency::{Fingerprint, IdempotencyKey};

/// Writes `answers`, inside the caller's transaction. A row of the same account and key
/// can only be an expired answer (the server replays a live one instead of running the
/// request): it is replaced.
pub fn store(conn: &Connection, answers: &[StoredAnswer]) -> anyhow::Result<()> {
    for answer in answers {
        conn.prepare_cached(
            "INSERT INTO idempotent_answers
                 (account_id, idempotency_key, endpoint, fingerprint, body, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (account_id, idempotency_key) DO UPDATE SET
                 endpoint = excluded.endpoint, fingerprint = excluded.fingerprint,
                 body = excluded.body, created_at = excluded.created_at",
        )?
        .execute(params![
            answer.account_id,
            answer.key.as_str(),
            answer.endpoint.as_str(),
            &answer.fingerprint.as_bytes()[..],
            &answer.body[..],
            unix_secs(answer.answered),
        ])
        .context("storing an idempotent answer")?;
    }
    Ok(())
}

/// Every answer given at `since` or later, without bodies (a row that does not parse,
/// which only a hand edit can make, is skipped: its key then runs as new).
pub fn load_index(conn: &Connection, since: SystemTime) -> anyhow::Result<Vec<AnswerIndex>> {
    let mut stmt = conn.prepare(
        "SELECT account_id, idempotency_key, endpoint, fingerprint, created_at
         FROM idempotent_answers WHERE created_at >= ?1",
    )?;
    let rows = stmt.query_map([unix_secs(since)], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, Vec<u8>>(3)?,
            r.get::<_, i64>(4)?,
        ))
    })?;
    let mut index = Vec::new();
    for row in rows {
        let (account_id, key, endpoint, fingerprint, created) =
            row.context("reading the idempotent answers")?;
        let parsed = (
            IdempotencyKey::parse(key.as_bytes()),
            Endpoint::parse(&endpoint),
            <[u8; 32]>::try_from(fingerprint.as_slice()).ok(),
        );
        let (Some(key), Some(endpoint), Some(fingerprint)) = parsed else {
            continue;
        };
        index.push(AnswerIndex {
            account_id,
            key,
            endpoint,
            fingerprint: Fingerprint::from_bytes(fingerprint),
            answered: UNIX_EPOCH + Duration::from_secs(u64::try_from(created).unwrap_or(0)),
        });
    }
    Ok(index)
}

/// The body stored for `key` of `account_id`.
pub fn body(
    conn: &Connection,
    account_id: i64,
    key: &IdempotencyKey,
) -> anyhow::Result<Option<Vec<u8>>> {
    conn.prepare_cached(
        "SELECT body FROM idempotent_answers WHERE account_id = ?1 AND idempotency_key = ?2",
    )?
    .query_row(params![account_id, key.as_str()], |r| r.get(0))
    .optional()
    .context("reading an idempotent answer")
}

/// Most rows one purge deletes: a purge holds the write lock that flushes need (durable
/// requests wait for them), and a row carries a body of up to 2 MiB
/// (`api::once::MAX_STORED_ANSWER`): at most about 200 MB freed in one transaction. A full pass is followed by
/// another at once, between flushes (`billing`).
pub const PURGE_ROWS: usize = 100;

/// Deletes answers given before `before`, the oldest first, [`PURGE_ROWS`] at most; how
/// many.
pub fn purge(conn: &Connection, before: SystemTime) -> anyhow::Result<usize> {
    conn.prepare_cached(
        "DELETE FROM idempotent_answers WHERE id IN (
             SELECT id FROM idempotent_answers WHERE created_at < ?1
             ORDER BY created_at LIMIT ?2)",
    )?
    .execute(params![unix_secs(before), PURGE_ROWS as i64])
    .context("deleting expired idempotent answers")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::db;

    fn answer(key: &str, body: &str, answered: SystemTime) -> StoredAnswer {
        StoredAnswer {
            account_id: 1,
            key: IdempotencyKey::parse(key.as_bytes()).unwrap(),
            endpoint: Endpoint::ValidateBulk,
            fingerprint: Fingerprint::from_bytes([7; 32]),
            body: Arc::from(body.as_bytes()),
            answered,
        }
    }

    fn file() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let conn = db::open(&dir.path().join("p.db")).unwrap();
        conn.execute_batch(
            "INSERT INTO accounts (id, public_id, balance, created_at) VALUES (1, 'acct_x', 0, 0)",
        )
        .unwrap();
        (dir, conn)
    }

    #[test]
    fn a_stored_answer_is_read_back_byte_for_byte_and_indexed_without_its_body() {
        let (_dir, conn) = file();
        let at = UNIX_EPOCH + Duration::from_secs(2_000_000_000);
        let stored = answer("k-1", "{\"results\":[]}", at);
        store(&conn, std::slice::from_ref(&stored)).unwrap();
        assert_eq!(
            body(&conn, 1, &stored.key).unwrap().as_deref(),
            Some(&b"{\"results\":[]}"[..])
        );
        let other = IdempotencyKey::parse(b"k-2").unwrap();
        assert_eq!(body(&conn, 1, &other).unwrap(), None);
        assert_eq!(body(&conn, 2, &stored.key).unwrap(), None);
        let index = load_index(&conn, at).unwrap();
        assert_eq!(
            index,
            [AnswerIndex {
                account_id: 1,
                key: stored.key.clone(),
                endpoint: Endpoint::ValidateBulk,
                fingerprint: stored.fingerprint,
                answered: at,
            }]
        );
        assert!(
            load_index(&conn, at + Duration::from_secs(1))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn an_answer_stored_again_under_its_key_replaces_the_old_one() {
        let (_dir, conn) = file();
        let at = UNIX_EPOCH + Duration::from_secs(2_000_000_000);
        store(&conn, &[answer("k", "old", at)]).unwrap();
        let later = at + Duration::from_secs(90_000);
        store(&conn, &[answer("k", "new", later)]).unwrap();
        let key = IdempotencyKey::parse(b"k").unwrap();
        assert_eq!(body(&conn, 1, &key).unwrap().as_deref(), Some(&b"new"[..]));
        assert_eq!(load_index(&conn, at).unwrap()[0].answered, later);
    }

    #[test]
    fn the_purge_deletes_only_answers_older_than_its_bound() {
        let (_dir, conn) = file();
        let at = UNIX_EPOCH + Duration::from_secs(2_000_000_000);
        store(
            &conn,
            &[
                answer("old", "1", at),
                answer("new", "2", at + Duration::from_secs(10)),
            ],
        )
        .unwrap();
        assert_eq!(purge(&conn, at + Duration::from_secs(10)).unwrap(), 1);
        let left: Vec<String> = load_index(&conn, UNIX_EPOCH)
            .unwrap()
            .into_iter()
            .map(|a| a.key.as_str().to_owned())
            .collect();
        assert_eq!(left, ["new"]);
    }
}
