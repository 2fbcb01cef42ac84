//! Charging in memory, the ledger written behind (docs/money.md): while `postal serve`
//! runs it alone charges the file, decides each charge on the books it holds in memory
//! and answers at once; a writer thread commits what was charged at most every flush
//! interval. `Billing` (here) is the handle requests use; the books themselves are in
//! `books` and the writer thread in `writer`.
//!
//! Why it is exact:
//! - **One decider.** Keys (hash -> account), balances, limits and rate-limit windows are
//!   in `Books`, behind one mutex held for a hash lookup and an addition: charges of an
//!   account are decided one after the other in arrival order, 401 -> 402 -> 429 by
//!   `domain::charge`. The exclusive lock file (`ServeLock`) keeps a second server off
//!   the file, so no other process charges it.
//! - **Deltas, not values.** A flush writes `balance = balance - amount` and one ledger
//!   row per (account, endpoint), so a top-up or adjustment the CLI committed meanwhile
//!   is never overwritten. Only the server writes window counters, so they are written
//!   as they stand in memory.
//! - **What the CLI changes.** After each flush, and at once when a CLI command announces
//!   a commit (`notify`), the writer asks the store for changes; when there are
//!   some it reloads accounts and keys and sets each balance in memory to the stored one
//!   minus the charges not yet flushed, under the mutex: nothing is lost either way.
//! - **Nothing dropped.** A batch whose flush fails goes back into the pending charges
//!   and is tried again; meanwhile billed requests are refused with 503 (`Unavailable`),
//!   so there are no answers the ledger cannot catch up with.
//! - **Durable mode** (`--durable-charges`): the writer flushes as soon as charges are
//!   pending, with `synchronous=FULL`, and a request is answered only once the flush that
//!   holds its charge has committed (group commit: a flush carries everything charged
//!   during the previous one).
//! - **Idempotent requests** (`answers`): the charge of a request sent with an
//!   `Idempotency-Key` is held on its key until its answer is rendered, then made pending
//!   with the answer, so one commit writes both: a stored answer never stands for a
//!   charge that is not in the file, nor a charge for an answer a retry cannot replay.

pub(crate) mod answers;
mod books;
mod claims;
mod lease;
pub(crate) mod lock;
pub mod notify;
pub(crate) mod per_ip;
pub(crate) mod pg;
pub(crate) mod sqlite;
mod stats;
pub(crate) mod store;
mod writer;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;

use books::{Ask, Asking, Books, GRANT_PATIENCE, GRANT_WAIT, GrantRequest, Granted};
pub use claims::ClaimedKey;
pub use stats::BillingStats;
use stats::Counts;
use writer::run_writer;

/// The books' maps and sets: foldhash, randomly seeded, for keys that are ids the store
/// made and SHA-256 digests of API keys, nothing a caller can choose to grow a probe
/// sequence (SipHash cost a billed lookup about 1,500 instructions: callgrind, issue 37).
/// Maps keyed by what a caller sends (client IPs, idempotency keys) keep std's SipHash.
type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// Where a cluster's ledger is (`serve --ledger`): what a node's books lease from.
pub use crate::db::pg::LedgerConfig;
use crate::db::rows::{ChargeRow, Holder, KeyClaim, ReleasedClaim, StoredAnswer};
use crate::domain::grant::WindowQueries;
pub use answers::Claim;
use answers::{Answers, Held};
use lease::{BootTime, Lease};
pub use lock::ServeLock;
use sqlite::SqliteStore;
use store::{Applied, Batch, ChargeStore, Grant, Leasing, Snapshot};

use crate::domain::api_key::{KeyHash, Publishable};
use crate::domain::charge::{AccountState, AccountStatus, Endpoint, Refusal};
use crate::domain::idempotency::{ANSWER_TTL, Fingerprint, IdempotencyKey};
use crate::domain::money::{Micros, PRICE_PER_QUERY};
use crate::domain::rate_limit::RateStatus;

use crate::domain::charge::Caller;

/// How the server writes its charges (flags of `postal serve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BillingOptions {
    /// Write-behind: the longest time between a charge and its commit.
    pub flush_interval: Duration,
    /// Answer only after the commit (`synchronous=FULL`), as before write-behind.
    pub durable: bool,
}

impl Default for BillingOptions {
    fn default() -> Self {
        BillingOptions {
            flush_interval: Duration::from_millis(10),
            durable: false,
        }
    }
}

/// A charge that is decided: the balance right after it and `rateLimit` counting it, and
/// the flush that will record it (`Billing::committed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charged {
    pub balance: Micros,
    pub rate: RateStatus,
    pub cost: Micros,
    pub flush: u64,
}

/// Why billing refused to decide a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BillingError {
    /// The charge rule said no: 401 / 402 / 429.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The ledger cannot be written (flushes fail) or billing stopped: 503, nothing charged.
    #[error("billing unavailable: {0}")]
    Unavailable(String),
}

/// What a flush has reached: every batch up to `done` is committed; `failing` holds the
/// last error while flushes fail.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlushState {
    pub done: u64,
    pub failing: Option<String>,
}

/// A handle on the books and their writer; clone it freely.
#[derive(Clone)]
pub struct Billing {
    shared: Arc<Shared>,
    writer: Arc<Mutex<Option<JoinHandle<()>>>>,
}

struct Shared {
    books: Mutex<Books>,
    /// Wakes the writer: a charge in durable mode, a reload request, stop.
    wake: Condvar,
    /// Set under the books' mutex while the writer waits on `wake`, taken (under the same
    /// mutex) by the one durable charge that wakes it: a charge made while the writer is
    /// flushing makes no futex call (it checks for pending charges before it waits again).
    writer_waiting: AtomicBool,
    flushed: tokio::sync::watch::Sender<FlushState>,
    options: BillingOptions,
    counts: Counts,
    /// This node's id on the shared ledger (cluster mode).
    node_id: Option<i64>,
    _lock: Option<ServeLock>,
}

/// A key in the books: whose it is and, for a publishable key, what binds it.
#[derive(Clone, Debug)]
pub struct KeyEntry {
    pub caller: Caller,
    pub publishable: Option<Arc<Publishable>>,
    /// A rolled key's end (unix seconds); `None` for every other key (no clock read).
    pub expires_at: Option<i64>,
}

impl Billing {
    /// Takes the file's serve lock, loads accounts and keys from the SQLite file at
    /// `path` and starts the writer. Fails when another server holds the file.
    pub fn start(path: &Path, options: BillingOptions) -> anyhow::Result<Billing> {
        let lock = ServeLock::acquire(path)?;
        let store = SqliteStore::open(path, options.durable)?;
        Billing::start_with(Box::new(store), options, Some(lock))
    }

    /// Cluster mode: takes the file's serve lock (its postal data is this node's own) and
    /// charges through the PostgreSQL ledger at `ledger` (docs/cluster.md).
    pub fn start_cluster(
        path: &Path,
        ledger: &crate::db::pg::LedgerConfig,
        options: BillingOptions,
    ) -> anyhow::Result<Billing> {
        let lock = ServeLock::acquire(path)?;
        // The store blocks on a runtime of its own: started off any async worker (`serve`
        // starts billing inside its runtime).
        thread::scope(|scope| {
            scope
                .spawn(|| {
                    let store = pg::PgStore::open(ledger)?;
                    Billing::start_with(Box::new(store), options, Some(lock))
                })
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("starting the ledger store panicked")))
        })
    }

    /// Starts on any store (the SQLite file, or another store of the same trait).
    pub fn start_with(
        mut store: Box<dyn ChargeStore>,
        options: BillingOptions,
        lock: Option<ServeLock>,
    ) -> anyhow::Result<Billing> {
        let snapshot = store.load().context("loading accounts and keys")?;
        let since = SystemTime::now()
            .checked_sub(ANSWER_TTL)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let answered = store
            .load_answers(since)
            .context("loading the idempotency keys")?;
        let mut books = Books::new(
            Answers::from_index(answered),
            store.leasing(),
            options.durable,
        );
        books.replace(snapshot);
        let counts = store.load_counts().context("loading the window counts")?;
        books.sync_counts(&counts);
        let (flushed, _) = tokio::sync::watch::channel(FlushState::default());
        let shared = Arc::new(Shared {
            books: Mutex::new(books),
            wake: Condvar::new(),
            writer_waiting: AtomicBool::new(false),
            flushed,
            options,
            counts: Counts::default(),
            node_id: store.node_id(),
            _lock: lock,
        });
        let writer_shared = shared.clone();
        let writer = thread::Builder::new()
            .name("postal-billing".into())
            .spawn(move || run_writer(store, &writer_shared))
            .context("starting the billing writer")?;
        Ok(Billing {
            shared,
            writer: Arc::new(Mutex::new(Some(writer))),
        })
    }

    pub fn options(&self) -> BillingOptions {
        self.shared.options
    }

    fn books(&self) -> MutexGuard<'_, Books> {
        lock(&self.shared.books)
    }

    /// The key behind a hash (its caller and, for a publishable key, its rules) and its
    /// account as it stands; `Refused(InvalidKey)`
    /// when no active key has that hash.
    pub fn authenticate(&self, key_hash: &KeyHash) -> Result<(KeyEntry, AccountState), Refusal> {
        let books = self.books();
        let key = books.key(key_hash).ok_or(Refusal::InvalidKey)?.clone();
        if key
            .expires_at
            .is_some_and(|end| crate::db::rows::unix_secs(SystemTime::now()) >= end)
        {
            return Err(Refusal::InvalidKey);
        }
        let account = *books
            .account(key.caller.account_id)
            .ok_or(Refusal::InvalidKey)?;
        Ok((key, account))
    }

    /// Would `queries` be charged now? 401 / 402 / 429 / 503 before any work; changes
    /// nothing.
    pub fn precheck(&self, caller: Caller, queries: u64) -> Result<AccountStatus, BillingError> {
        let books = self.books();
        let verdict = books.check(caller, queries, SystemTime::now());
        drop(books);
        self.count(&verdict);
        self.note_empty(caller.account_id, &verdict);
        verdict.map(|(_, status)| status)
    }

    /// Counts the `queries` of a replayed answer in the caller's windows, uncharged:
    /// a replay costs no money but is not outside the account's limits (429 when a
    /// window is full, as for the request itself).
    pub fn count_replay(&self, caller: Caller, queries: u64) -> Result<(), BillingError> {
        let verdict = self
            .books()
            .count_uncharged(caller, queries, SystemTime::now());
        self.count(&verdict);
        verdict
    }

    /// Decides and applies the charge of `queries` of `endpoint` in memory; it is
    /// written by the next flush (`Charged::flush`). When the node's grant is short it
    /// waits for the ledger without blocking the worker.
    pub async fn charge(
        &self,
        caller: Caller,
        queries: u64,
        endpoint: Endpoint,
    ) -> Result<Charged, BillingError> {
        self.decide(caller, queries, endpoint, None).await
    }

    /// As `charge`, for the request that claimed `key`: the charge is decided at once
    /// (balance and windows) but held on the key, and written with the answer
    /// (`ClaimedKey::answer`), or alone if the request ends without one.
    pub async fn charge_held(
        &self,
        caller: Caller,
        queries: u64,
        endpoint: Endpoint,
        key: &ClaimedKey,
    ) -> Result<Charged, BillingError> {
        self.decide(caller, queries, endpoint, Some(key)).await
    }

    async fn decide(
        &self,
        caller: Caller,
        queries: u64,
        endpoint: Endpoint,
        hold_on: Option<&ClaimedKey>,
    ) -> Result<Charged, BillingError> {
        // Started at the first ask (its patience reads the clock): most charges never ask.
        let mut asking: Option<Asking> = None;
        loop {
            match self.try_decide(caller, queries, endpoint, hold_on) {
                Ok(verdict) => return verdict,
                Err(ask) => {
                    let asking = asking.get_or_insert_with(Asking::new);
                    let answer = match self.ask_for_grant(caller.account_id, ask) {
                        Ok(reply) => tokio::time::timeout(GRANT_WAIT, reply)
                            .await
                            .map_err(|_| format!("no grant from the ledger within {GRANT_WAIT:?}"))
                            .and_then(|r| r.map_err(|_| "billing stopped".to_string())?),
                        Err(why) => Err(why),
                    };
                    if let Some(verdict) = asking.after(answer) {
                        self.count(&verdict);
                        self.note_empty(caller.account_id, &verdict);
                        return verdict;
                    }
                    if asking.recall_wait {
                        tokio::time::sleep(lease::RECALL_WAIT).await;
                    }
                }
            }
        }
    }

    /// Decides the charge now when the node's grant and slices cover it (or the store
    /// leases the whole balance); `Err(ask)` when the grant or a limited window's slice is
    /// short and the ledger must be asked first (a 402, or a 429 the counts synced from
    /// the ledger do not already decide, is decided only there).
    fn try_decide(
        &self,
        caller: Caller,
        queries: u64,
        endpoint: Endpoint,
        hold_on: Option<&ClaimedKey>,
    ) -> Result<Result<Charged, BillingError>, Ask> {
        let now = SystemTime::now();
        let mut books = self.books();
        if let Some(short) = books.short_of_grant(caller, queries, now) {
            return Err(Ask::Money(short));
        }
        let checked = books.check(caller, queries, now);
        let billed = queries > 0 && !endpoint.is_free();
        if checked.is_ok()
            && let Some(short) = books.short_of_slices(caller, queries, billed, now)
        {
            return Err(Ask::Windows(short));
        }
        let verdict = checked
            .and_then(|_| books.apply_charge(caller, queries, endpoint, billed, now, hold_on));
        let wake = verdict.is_ok() && self.writer_to_wake(&books);
        drop(books);
        self.wake_writer(wake);
        if let Ok(charged) = &verdict {
            self.shared.counts.charges.fetch_add(1, Ordering::Relaxed);
            return Ok(Ok(*charged));
        }
        self.count(&verdict);
        self.note_empty(caller.account_id, &verdict);
        Ok(verdict)
    }

    /// Asks the writer to ask the store for `need` more of the account (up to `want`);
    /// the answer comes on the receiver. `Err` (503) while the ledger cannot be written.
    fn ask_for_grant(
        &self,
        account_id: i64,
        ask: Ask,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<Granted, String>>, String> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        {
            let mut books = self.books();
            books.ask_for_grant(GrantRequest {
                account_id,
                ask,
                reply,
            })?;
        }
        self.shared.wake.notify_all();
        Ok(answer)
    }

    /// Runs `call` on the store in the writer's thread, between flushes (the store is the
    /// writer's alone); 503 while flushes fail or when the call fails.
    async fn on_writer<T: Send + 'static>(
        &self,
        call: impl FnOnce(&mut dyn ChargeStore) -> anyhow::Result<T> + Send + 'static,
    ) -> Result<T, BillingError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        {
            let mut books = self.books();
            books.call_store(Box::new(move |store| {
                let _ = reply.send(call(store));
            }))?;
        }
        self.shared.wake.notify_all();
        // Bounded: a writer gone (a panic) must not hold the request forever.
        match tokio::time::timeout(GRANT_PATIENCE, answer).await {
            Ok(Ok(Ok(found))) => Ok(found),
            Ok(Ok(Err(e))) => {
                tracing::error!("asking the ledger: {e:#}");
                Err(BillingError::Unavailable(
                    "the ledger cannot be reached".into(),
                ))
            }
            Ok(Err(_)) => Err(BillingError::Unavailable("billing stopped".into())),
            Err(_) => Err(BillingError::Unavailable(format!(
                "the billing writer did not answer within {GRANT_PATIENCE:?}"
            ))),
        }
    }

    /// In durable mode, waits until everything decided so far has committed: a replay of
    /// an answer whose flush has not committed yet (its body still in memory) is sent
    /// only then, as its first answer was. At once in write-behind mode.
    pub async fn settled(&self) -> Result<(), BillingError> {
        if !self.shared.options.durable {
            return Ok(());
        }
        let needed = self.books().last_charged_batch();
        self.flushed_to(needed).await
    }

    /// Waits until the flush that holds `charged` has committed (durable mode answers
    /// after this); `Unavailable` when flushes are failing.
    pub async fn committed(&self, charged: &Charged) -> Result<(), BillingError> {
        self.flushed_to(charged.flush).await
    }

    /// Waits until batch `flush` has committed (`committed`, `ClaimedKey::answer`).
    pub async fn flushed_to(&self, flush: u64) -> Result<(), BillingError> {
        let mut state = self.shared.flushed.subscribe();
        let reached = state
            .wait_for(|s| s.done >= flush || s.failing.is_some())
            .await
            .map_err(|_| BillingError::Unavailable("billing stopped".into()))?;
        if reached.done >= flush {
            return Ok(());
        }
        let why = reached.failing.clone().unwrap_or_default();
        Err(BillingError::Unavailable(why))
    }

    /// Balance and windows as they stand, charging nothing (the free operations).
    pub fn status(&self, caller: Caller) -> Result<AccountStatus, Refusal> {
        let books = self.books();
        let account = books
            .account(caller.account_id)
            .ok_or(Refusal::InvalidKey)?;
        Ok(account.status(SystemTime::now()))
    }

    /// The balance of the account (row id) as these books hold it when they hold the whole
    /// of it (the file's server): the stored balance less every charge answered and not
    /// yet flushed, to the micro-dollar, read without a flush. `None` for an account the
    /// books do not hold, and in a cluster, where a node holds a lease of it only.
    pub fn balance_held(&self, account_id: i64) -> Option<Micros> {
        let books = self.books();
        if books.leasing() != Leasing::WholeBalance {
            return None;
        }
        books.account(account_id).map(|a| a.balance)
    }

    /// Makes the writer look for outside changes now and waits until the books hold them
    /// (what a CLI command's announcement triggers). `false` on timeout.
    pub fn reload_now(&self, timeout: Duration) -> bool {
        let (done, wait) = std::sync::mpsc::channel();
        self.books().request_reload(done);
        self.shared.wake.notify_all();
        wait.recv_timeout(timeout).is_ok()
    }

    /// Makes the writer commit now everything charged before this call, and waits for it
    /// (what `postal backup` asks before it copies the file). `Unavailable` when that
    /// flush failed (the charges stay pending and are retried) or the writer did not
    /// answer within `timeout`.
    pub fn flush_now(&self, timeout: Duration) -> Result<(), BillingError> {
        let needed = self.books().last_charged_batch();
        // The writer answers a reload request after the flush of its turn (which takes
        // everything pending when the turn begins) has committed or failed.
        if !self.reload_now(timeout) {
            return Err(BillingError::Unavailable(format!(
                "the billing writer did not flush within {timeout:?}"
            )));
        }
        let state = self.flush_state();
        if state.done >= needed {
            return Ok(());
        }
        Err(BillingError::Unavailable(state.failing.unwrap_or_else(
            || format!("flushed up to batch {} of {needed}", state.done),
        )))
    }

    /// What flushes have reached.
    pub fn flush_state(&self) -> FlushState {
        self.shared.flushed.borrow().clone()
    }

    /// This node's id on the shared ledger; `None` for the single file.
    pub fn node_id(&self) -> Option<i64> {
        self.shared.node_id
    }

    /// The writer thread is running (readiness: `/readyz`).
    pub fn writer_running(&self) -> bool {
        self.writer
            .lock()
            .map(|w| w.as_ref().is_some_and(|h| !h.is_finished()))
            .unwrap_or(false)
    }

    /// Flushes everything charged so far and stops the writer (retrying a failing flush
    /// for up to a minute), then releases the file. Later charges are refused 503.
    /// Idempotent.
    pub fn shutdown(&self) {
        self.books().stop();
        self.shared.wake.notify_all();
        let writer = lock(&self.writer).take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
    }

    /// In durable mode, a pending charge is flushed at once: whether the writer waits and
    /// must be woken (then by [`wake_writer`](Self::wake_writer) once `books` is
    /// released). Asked under the books' mutex: the writer sets `writer_waiting` and
    /// waits without releasing it in between, so a `true` read here always has a waiter
    /// to wake, and a writer not waiting sees the pending charge before it waits.
    fn writer_to_wake(&self, books: &Books) -> bool {
        self.shared.options.durable
            && books.has_pending()
            && self.shared.writer_waiting.swap(false, Ordering::AcqRel)
    }

    fn wake_writer(&self, wake: bool) {
        if wake {
            self.shared.wake.notify_all();
        }
    }

    /// A 402 of a charge: the store hears of the account's first (`Books::note_empty`).
    fn note_empty<T>(&self, account_id: i64, verdict: &Result<T, BillingError>) {
        if let Err(BillingError::Refused(Refusal::InsufficientBalance)) = verdict {
            let noted = self.books().note_empty(account_id);
            self.wake_writer(noted);
        }
    }

    fn count<T>(&self, verdict: &Result<T, BillingError>) {
        let counter = match verdict {
            Ok(_) => return,
            Err(BillingError::Refused(_)) => &self.shared.counts.refusals,
            Err(BillingError::Unavailable(_)) => &self.shared.counts.unavailable,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// A call of a request to the store, run by the writer (`Billing::on_writer`).
type StoreCall = Box<dyn FnOnce(&mut dyn ChargeStore) + Send>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
