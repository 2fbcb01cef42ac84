//! The one narrow interface between the in-memory books (`billing`) and where the money
//! is stored: load accounts and keys, apply a batch of charges as deltas (with the
//! answers of idempotent requests they paid for), read what others changed. `SqliteStore` (`billing::sqlite`) is the file; a PostgreSQL store for
//! several server nodes would implement the same trait beside it.

use std::time::SystemTime;

pub use crate::db::idempotency::{AnswerIndex, StoredAnswer};
use crate::db::keys::ActiveKey;
pub use crate::db::ledger::ChargeRow;
use crate::domain::charge::AccountState;
use crate::domain::rate_limit::Counters;

/// Every account (row id -> state as stored) and every active key.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub accounts: Vec<(i64, AccountState)>,
    pub keys: Vec<ActiveKey>,
}

/// One flush: charge rows (deltas), the window counters as they stand in memory, and the
/// answers of idempotent requests charged in it.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Increasing; a request in durable mode waits for its batch's number.
    pub number: u64,
    pub at: SystemTime,
    pub charges: Vec<ChargeRow>,
    pub counters: Vec<(i64, Counters)>,
    pub answers: Vec<StoredAnswer>,
}

pub trait ChargeStore: Send {
    /// Every account and active key, and the version they are as of.
    fn load(&mut self) -> anyhow::Result<Snapshot>;
    /// The idempotency keys answered at `since` or later (without bodies), once at start.
    fn load_answers(&mut self, since: SystemTime) -> anyhow::Result<Vec<AnswerIndex>>;
    /// Applies `batch` in one transaction: `balance = balance - amount` and one ledger row
    /// per charge row, the counters, the answers, all or nothing.
    fn apply(&mut self, batch: &Batch) -> anyhow::Result<()>;
    /// Deletes the answers given before `before`; how many.
    fn purge_answers(&mut self, before: SystemTime) -> anyhow::Result<usize>;
    /// A new snapshot when someone else changed accounts or keys since the last `load` or
    /// `changes`; `None` when nothing changed.
    fn changes(&mut self) -> anyhow::Result<Option<Snapshot>>;
}
