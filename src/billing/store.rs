//! The one narrow interface between the in-memory books (`billing`) and where the money
//! is stored: load accounts and keys, lease money to this node (grants), apply a batch of
//! charges as deltas (with the answers of idempotent requests they paid for, and the
//! grants handed back), read what others changed. `SqliteStore` (`billing::sqlite`) is the
//! file, whose one server holds the whole balance; `PgStore` (`billing::pg`) is the
//! PostgreSQL ledger of a cluster, which leases each node a slice of it (docs/cluster.md).

use std::sync::Arc;
use std::time::SystemTime;

use crate::db::rows::{
    ActiveKey, AnswerIndex, ChargeRow, Holder, KeyClaim, ReleasedClaim, StoredAnswer,
};
use crate::domain::charge::AccountState;
use crate::domain::grant::{SliceAsk, SliceHeld, WindowQueries};
use crate::domain::idempotency::IdempotencyKey;
use crate::domain::money::Micros;
use crate::domain::rate_limit::Counters;

/// Every account (row id -> state as stored) and every active key.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub accounts: Vec<(i64, AccountState)>,
    pub keys: Vec<ActiveKey>,
}

/// One flush: charge rows (deltas), the window counters as they stand in memory, the
/// answers of idempotent requests charged in it, and the grants handed back.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Increasing; a request in durable mode waits for its batch's number. A store whose
    /// commits can be ambiguous applies a number at most once.
    pub number: u64,
    pub at: SystemTime,
    pub charges: Vec<ChargeRow>,
    pub counters: Vec<(i64, Counters)>,
    pub answers: Vec<StoredAnswer>,
    /// Claims of idempotency keys whose requests ended without an answer (with grants
    /// only: the ledger holds the claims of a cluster).
    pub released: Vec<ReleasedClaim>,
    /// Unspent grants handed back (account, amount), taken from the books when the batch
    /// was: always empty for a store that leases the whole balance.
    pub returns: Vec<(i64, Micros)>,
    /// With grants: grants running low that the flush tops up (account, want), so that
    /// requests do not wait for a grant (`Lease::top_up`); always empty otherwise.
    pub topups: Vec<(i64, Micros)>,
    /// With grants: the queries admitted per window (every window, limited or not), to
    /// be added to the ledger's window counts and taken from this node's slices.
    pub admitted: Vec<WindowQueries>,
    /// With grants: the unspent room of window slices handed back.
    pub slice_returns: Vec<WindowQueries>,
    /// Accounts answered 402 since the last flush, with the balance the books held: the
    /// store makes `balance.empty` of each when armed (docs/alerts.md).
    pub empties: Vec<(i64, Micros)>,
}

/// How a store leases money to the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Leasing {
    /// One node holds the only lease, the whole balance (one server on its file, kept
    /// alone by the serve lock): the books decide on the balance itself and never ask
    /// for a grant; a failed flush is never ambiguous and is merged into the next one.
    #[default]
    WholeBalance,
    /// Each node charges only against what the store granted it, asks for more when
    /// short, and retries a failed flush unchanged (its commit may have happened).
    Grants,
}

/// What the store holds for this node on one account after a grant or a flush: what is
/// left of its grant, and the account's stored balance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    pub account_id: i64,
    pub remaining: Micros,
    pub balance: Micros,
    /// What other nodes hold of the account, as a grant found it (they were asked to hand
    /// it back when nothing could be granted); zero in a flush's report.
    pub elsewhere: Micros,
}

/// What a flush reports back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// This node's grants as the store holds them after the flush, of the accounts it
    /// touched or renewed (an account of `touched` missing from the list holds none; the
    /// grants of other accounts are as they were); empty for `Leasing::WholeBalance`.
    pub grants: Vec<Grant>,
    /// With grants: the accounts the flush changed. Their grants and slices are reported
    /// in full; those of other accounts only when the flush renewed them.
    pub touched: Vec<i64>,
    /// The version of accounts and keys read in the flush, when the store has one.
    pub version: Option<i64>,
    /// With grants: this node's window slices after the flush, as `grants` (one of a
    /// `touched` account not listed is gone).
    pub slices: Vec<SliceHeld>,
    /// With grants: the newest count of each window of the accounts the flush touched or
    /// holds anything of.
    pub counts: Vec<WindowQueries>,
}

pub trait ChargeStore: Send {
    /// Every account and active key, and the version they are as of.
    fn load(&mut self) -> anyhow::Result<Snapshot>;
    /// The idempotency keys answered at `since` or later (without bodies), once at start.
    fn load_answers(&mut self, since: SystemTime) -> anyhow::Result<Vec<AnswerIndex>>;
    /// How this store leases money to the node.
    fn leasing(&self) -> Leasing {
        Leasing::WholeBalance
    }
    /// Leases this node at least `need` more of the account's free balance (up to
    /// `want`), or nothing when less than `need` is free; what it then holds.
    fn grant(&mut self, account_id: i64, need: Micros, want: Micros) -> anyhow::Result<Grant>;
    /// As `grant` for several accounts (`(account, need, want)`, each at most once), in
    /// one transaction where the store has them: what the node then holds of each.
    fn grants(&mut self, asks: &[(i64, Micros, Micros)]) -> anyhow::Result<Vec<Grant>> {
        asks.iter()
            .map(|&(account_id, need, want)| self.grant(account_id, need, want))
            .collect()
    }
    /// Leases this node at least `need` more queries of each window asked for (up to
    /// `want`), or nothing for a window with less room; what it then holds of each.
    /// Only a store with `Leasing::Grants` is asked.
    fn slices(&mut self, account_id: i64, asks: &[SliceAsk]) -> anyhow::Result<Vec<SliceHeld>> {
        let _ = (account_id, asks);
        anyhow::bail!("this store does not lease rate-limit windows")
    }
    /// The stored window counts (the newest of each account and kind), once at start.
    fn load_counts(&mut self) -> anyhow::Result<Vec<WindowQueries>> {
        Ok(Vec::new())
    }
    /// Applies `batch` in one transaction: `balance = balance - amount` and one ledger row
    /// per charge row, the counters, the answers, the returned grants, all or nothing.
    fn apply(&mut self, batch: &Batch) -> anyhow::Result<Applied>;
    /// Claims an idempotency key ledger-wide for a request this node runs, or says who
    /// holds it (with grants only: one server's memory holds every key of its file).
    fn claim_key(&mut self, claim: &KeyClaim) -> anyhow::Result<Holder> {
        let _ = claim;
        Ok(Holder::Claimed)
    }
    /// The body of a stored answer.
    fn answer_body(
        &mut self,
        account_id: i64,
        key: &IdempotencyKey,
    ) -> anyhow::Result<Option<Arc<[u8]>>>;
    /// Deletes the answers given before `before`; how many.
    fn purge_answers(&mut self, before: SystemTime) -> anyhow::Result<usize>;
    /// A new snapshot when someone else changed accounts or keys since the last `load` or
    /// `changes`; `None` when nothing changed.
    fn changes(&mut self) -> anyhow::Result<Option<Snapshot>>;
    /// The books now hold the last snapshot `changes` gave (a cluster's admin command
    /// waits for every node to say so).
    fn reloaded(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
    /// This node's id on a shared ledger (cluster mode); `None` for the single file.
    fn node_id(&self) -> Option<i64> {
        None
    }
    /// Accounts whose grants other nodes asked back since the last call.
    fn recalls(&mut self) -> Vec<i64> {
        Vec::new()
    }
    /// The writer stops: every charge is flushed and every grant returned.
    fn close(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
}
