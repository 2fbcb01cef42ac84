//! The `ChargeStore` of one SQLite file: the server's own connection, its flushes in
//! `BEGIN IMMEDIATE` transactions, and `PRAGMA data_version` then `books_version` to
//! notice what the CLI changed (a commit of any other connection moves the first; only a
//! change of accounts, keys, providers or payment settings moves the second, so the
//! dashboard's sessions and audit lines never make the books reload). The SQL itself is `db`'s (`accounts`, `keys`, `ledger`, `idempotency`).

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::Context;
use rusqlite::{Connection, TransactionBehavior};

use super::store::{Applied, Batch, ChargeStore, Grant, Snapshot};
use crate::db;
use crate::db::rows::AnswerIndex;
use crate::db::sqlite::{accounts, alerts, idempotency, keys, ledger};
use crate::domain::idempotency::IdempotencyKey;
use crate::domain::money::Micros;

/// The SQLite file, through one connection of its own.
pub struct SqliteStore {
    conn: Connection,
    /// `PRAGMA data_version` as of the last look: it changes when another connection
    /// commits (a CLI top-up, revocation, new key or limits; a session seen), never for
    /// this one's own.
    seen: Option<i64>,
    /// `books_version` as of the last snapshot or this connection's last flush (whose
    /// own changes of accounts count there too).
    known: i64,
    /// A flush found `books_version` moved by another connection since `known`.
    outside: bool,
}

impl SqliteStore {
    /// Write-behind commits with `synchronous=NORMAL` (durable against a crash of the
    /// process; a power cut may lose the last commits), durable mode with `FULL`.
    pub fn open(path: &Path, durable: bool) -> anyhow::Result<SqliteStore> {
        let conn = db::open(path)?;
        let sync = if durable { "FULL" } else { "NORMAL" };
        conn.pragma_update(None, "synchronous", sync)?;
        conn.set_prepared_statement_cache_capacity(32);
        Ok(SqliteStore {
            conn,
            seen: None,
            known: 0,
            outside: false,
        })
    }

    fn data_version(&self) -> rusqlite::Result<i64> {
        db::data_version(&self.conn)
    }
}

/// The count of changes to what the server holds (`books_version` in schema.sql).
fn books_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.prepare_cached("SELECT version FROM books_version")?
        .query_row([], |r| r.get(0))
}

impl ChargeStore for SqliteStore {
    fn load(&mut self) -> anyhow::Result<Snapshot> {
        // Read the version first: a commit between the two makes the next `changes`
        // load again, never miss it.
        let version = self.data_version()?;
        let tx = self.conn.transaction()?;
        let known = books_version(&tx)?;
        let snapshot = Snapshot {
            accounts: accounts::load_states(&tx)?,
            keys: keys::load_active(&tx)?,
        };
        tx.finish()?;
        (self.seen, self.known, self.outside) = (Some(version), known, false);
        Ok(snapshot)
    }

    /// The only lease is the whole balance (`Leasing::WholeBalance`): the books never ask,
    /// and an answer is simply the stored balance.
    fn grant(&mut self, account_id: i64, _need: Micros, _want: Micros) -> anyhow::Result<Grant> {
        let balance = accounts::balance_of(&self.conn, account_id)?.unwrap_or(Micros::ZERO);
        Ok(Grant {
            account_id,
            remaining: balance,
            balance,
            elsewhere: Micros::ZERO,
        })
    }

    fn apply(&mut self, batch: &Batch) -> anyhow::Result<Applied> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .context("taking the write lock for a flush")?;
        let before = books_version(&tx)?;
        ledger::append_charges(&tx, &batch.charges, batch.at)?;
        accounts::store_counters(&tx, &batch.counters)?;
        idempotency::store(&tx, &batch.answers)?;
        let at = crate::db::rows::unix_secs(batch.at);
        for (account, balance) in &batch.empties {
            alerts::note_empty(&tx, *account, balance.get(), at)?;
        }
        let after = books_version(&tx)?;
        tx.commit().context("committing a flush")?;
        self.outside |= before != self.known;
        self.known = after;
        Ok(Applied::default())
    }

    fn load_answers(&mut self, since: SystemTime) -> anyhow::Result<Vec<AnswerIndex>> {
        idempotency::load_index(&self.conn, since)
    }

    fn answer_body(
        &mut self,
        account_id: i64,
        key: &IdempotencyKey,
    ) -> anyhow::Result<Option<Arc<[u8]>>> {
        Ok(idempotency::body(&self.conn, account_id, key)?.map(Arc::from))
    }

    fn purge_answers(&mut self, before: SystemTime) -> anyhow::Result<usize> {
        idempotency::purge(&self.conn, before)
    }

    fn changes(&mut self) -> anyhow::Result<Option<Snapshot>> {
        if !self.outside {
            let version = self.data_version()?;
            if Some(version) == self.seen {
                return Ok(None);
            }
            // Another connection committed: a reload only if it changed what the books
            // hold (a commit after this read moves `data_version` again: looked at next).
            if books_version(&self.conn)? == self.known {
                self.seen = Some(version);
                return Ok(None);
            }
        }
        self.load().map(Some)
    }
}
