//! The one narrow interface between the in-memory books (`db::billing`) and where the
//! money is stored: load accounts and keys, apply a batch of charges as deltas, read what
//! others changed. `SqliteStore` is the file; a PostgreSQL store for several server nodes
//! would implement the same trait.

use std::path::Path;
use std::time::SystemTime;

use anyhow::Context;
use rusqlite::{Connection, TransactionBehavior};

use crate::db::accounts::{self, Caller};
use crate::db::{keys, ledger};
use crate::domain::api_key::KeyHash;
use crate::domain::charge::{AccountState, Endpoint};
use crate::domain::money::Micros;
use crate::domain::rate_limit::Counters;

/// Every account (row id -> state as stored) and every active key.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub accounts: Vec<(i64, AccountState)>,
    pub keys: Vec<(KeyHash, Caller)>,
}

/// What one account was charged on one endpoint since the last flush.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChargeRow {
    pub account_id: i64,
    pub endpoint: Endpoint,
    pub queries: u64,
    pub amount: Micros,
}

/// One flush: charge rows (deltas) and the window counters as they stand in memory.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Increasing; a request in durable mode waits for its batch's number.
    pub number: u64,
    pub at: SystemTime,
    pub charges: Vec<ChargeRow>,
    pub counters: Vec<(i64, Counters)>,
}

pub trait ChargeStore: Send {
    /// Every account and active key, and the version they are as of.
    fn load(&mut self) -> anyhow::Result<Snapshot>;
    /// Applies `batch` in one transaction: `balance = balance - amount` and one ledger row
    /// per charge row, the counters, all or nothing.
    fn apply(&mut self, batch: &Batch) -> anyhow::Result<()>;
    /// A new snapshot when someone else changed accounts or keys since the last `load` or
    /// `changes`; `None` when nothing changed.
    fn changes(&mut self) -> anyhow::Result<Option<Snapshot>>;
}

/// The SQLite file, through one connection of its own.
pub struct SqliteStore {
    conn: Connection,
    /// `PRAGMA data_version` as of the last snapshot: it changes when another connection
    /// commits (a CLI top-up, revocation, new key or limits), never for this one's own.
    seen: Option<i64>,
}

impl SqliteStore {
    /// Write-behind commits with `synchronous=NORMAL` (durable against a crash of the
    /// process; a power cut may lose the last commits), durable mode with `FULL`.
    pub fn open(path: &Path, durable: bool) -> anyhow::Result<SqliteStore> {
        let conn = super::open(path)?;
        let sync = if durable { "FULL" } else { "NORMAL" };
        conn.pragma_update(None, "synchronous", sync)?;
        conn.set_prepared_statement_cache_capacity(32);
        Ok(SqliteStore { conn, seen: None })
    }

    fn data_version(&self) -> rusqlite::Result<i64> {
        self.conn
            .prepare_cached("PRAGMA data_version")?
            .query_row([], |r| r.get(0))
    }
}

impl ChargeStore for SqliteStore {
    fn load(&mut self) -> anyhow::Result<Snapshot> {
        // Read the version first: a commit between the two makes the next `changes`
        // load again, never miss it.
        let version = self.data_version()?;
        let tx = self.conn.transaction()?;
        let snapshot = Snapshot {
            accounts: accounts::load_states(&tx)?,
            keys: keys::load_active(&tx)?,
        };
        tx.finish()?;
        self.seen = Some(version);
        Ok(snapshot)
    }

    fn apply(&mut self, batch: &Batch) -> anyhow::Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .context("taking the write lock for a flush")?;
        ledger::append_charges(&tx, &batch.charges, batch.at)?;
        accounts::store_counters(&tx, &batch.counters)?;
        tx.commit().context("committing a flush")?;
        Ok(())
    }

    fn changes(&mut self) -> anyhow::Result<Option<Snapshot>> {
        if Some(self.data_version()?) == self.seen {
            return Ok(None);
        }
        self.load().map(Some)
    }
}
