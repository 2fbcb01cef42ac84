//! Charging in memory, the ledger written behind (docs/money.md): while `postal serve`
//! runs it alone charges the file, decides each charge on the books it holds in memory
//! and answers at once; a writer thread commits what was charged at most every flush
//! interval.
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

pub mod answers;
mod lease;
pub mod lock;
pub mod notify;
pub mod per_ip;
pub mod pg;
pub mod sqlite;
pub mod store;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;

pub use answers::Claim;
use answers::{Answers, Held};
use lease::{BootTime, Lease};
pub use lock::ServeLock;
use sqlite::SqliteStore;
use store::{Applied, Batch, ChargeRow, ChargeStore, Grant, Leasing, Snapshot, StoredAnswer};

use crate::domain::api_key::{KeyHash, Publishable};
use crate::domain::charge::{AccountState, AccountStatus, Endpoint, Refusal};
use crate::domain::idempotency::{ANSWER_TTL, Fingerprint, IdempotencyKey};
use crate::domain::money::{Micros, PRICE_PER_QUERY};
use crate::domain::rate_limit::RateStatus;

pub use crate::db::rows::Caller;

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

/// Totals since start, for metrics: what was charged, refused and flushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BillingStats {
    /// Charges decided and applied (each of N queries counts once).
    pub charges: u64,
    /// Charges refused 401 / 402 / 429.
    pub refusals: u64,
    /// Requests refused 503 because flushes failed.
    pub unavailable: u64,
    /// Flushes committed, and those that failed.
    pub flushes: u64,
    pub failed_flushes: u64,
    /// Time spent in committed flushes.
    pub flush_busy: Duration,
    /// Reloads of accounts and keys after an outside change.
    pub reloads: u64,
    /// The last committed flush's duration, and when it committed.
    pub last_flush: Duration,
    pub last_commit: Option<std::time::SystemTime>,
    /// Charge rows (account x endpoint) waiting for the next flush.
    pub pending: u64,
}

#[derive(Default)]
struct Counts {
    charges: AtomicU64,
    refusals: AtomicU64,
    unavailable: AtomicU64,
    flushes: AtomicU64,
    failed_flushes: AtomicU64,
    flush_busy_nanos: AtomicU64,
    reloads: AtomicU64,
    /// The last committed flush: how long it took, and when it ended (µs since 1970).
    last_flush_nanos: AtomicU64,
    last_commit_unix_micros: AtomicU64,
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
    _lock: Option<ServeLock>,
}

/// A key in the books: whose it is and, for a publishable key, what binds it.
#[derive(Clone, Debug)]
pub struct KeyEntry {
    pub caller: Caller,
    pub publishable: Option<Arc<Publishable>>,
}

/// Everything charges are decided on.
#[derive(Default)]
struct Books {
    keys: HashMap<KeyHash, KeyEntry>,
    active_keys: HashSet<i64>,
    accounts: HashMap<i64, AccountState>,
    pending: Pending,
    /// Idempotency keys: requests running under them (and charges held on them), answers.
    answers: Answers,
    /// The batch number charges go into now (the next flush).
    batch: u64,
    /// Set while flushes fail: billed requests get 503.
    failing: Option<String>,
    reload_requests: Vec<std::sync::mpsc::Sender<()>>,
    stop: bool,
    /// How the store leases money: the whole balance (the file) or grants (a cluster).
    leasing: Leasing,
    /// With grants: this node's grant per account (the balances in `accounts` are then
    /// what the envelope shows, the grants what charges are decided on).
    leases: HashMap<i64, Lease>,
    /// Requests short of their grant, waiting for the writer to ask the store.
    grant_requests: Vec<GrantRequest>,
    /// With grants: the batch being flushed, or whose flush failed and is retried
    /// unchanged before any other (its commit may have happened: merged into the next
    /// one, it could be charged twice).
    in_flight: Option<Batch>,
}

/// A request short of its grant asks the writer for more.
struct GrantRequest {
    account_id: i64,
    short: Short,
    reply: tokio::sync::oneshot::Sender<Result<Granted, String>>,
}

/// A charge the node's grant does not cover: its cost, and how much to ask for (what is
/// missing is decided when the writer asks: other requests may have spent some since).
#[derive(Debug, Clone, Copy)]
struct Short {
    cost: Micros,
    want: Micros,
}

/// One charge asking the ledger for grants: what the answers so far decide.
struct Asking {
    give_up: Instant,
    /// Nothing was free, but other nodes held grants of the account and were told to hand
    /// them back: wait, ask again.
    recall_wait: bool,
    recalls: u32,
    granted: u32,
}

impl Asking {
    fn new() -> Asking {
        Asking {
            give_up: Instant::now() + GRANT_PATIENCE,
            recall_wait: false,
            recalls: 0,
            granted: 0,
        }
    }

    /// After the ledger's answer: `Some` verdict to give (402 when nothing was free and
    /// no other node held any of the account, or still held some after `RECALLS` recall
    /// waits; 503 when the ledger cannot be reached or other requests of the node kept
    /// taking the grants), or `None`: decide again (after the recall wait when
    /// `recall_wait`).
    fn after(&mut self, answer: Result<Granted, String>) -> Option<Result<Charged, BillingError>> {
        self.recall_wait = false;
        match answer {
            Ok(Granted::More) => self.granted += 1,
            Ok(Granted::Nothing { elsewhere: false }) => {
                return Some(Err(Refusal::InsufficientBalance.into()));
            }
            Ok(Granted::Nothing { elsewhere: true }) if self.recalls >= RECALLS => {
                return Some(Err(Refusal::InsufficientBalance.into()));
            }
            Ok(Granted::Nothing { elsewhere: true }) => {
                self.recalls += 1;
                self.recall_wait = true;
            }
            Err(why) => {
                tracing::warn!("a charge short of its grant gets 503: {why}");
                return Some(Err(BillingError::Unavailable(why)));
            }
        }
        if Instant::now() >= self.give_up {
            tracing::warn!(
                "a charge short of its grant gets 503: asked for {GRANT_PATIENCE:?} \
                 ({} grants taken by other requests, {} recalls)",
                self.granted,
                self.recalls
            );
            return Some(Err(BillingError::Unavailable(
                "the grants of this node were taken by its other requests".into(),
            )));
        }
        None
    }
}

/// What the ledger answered a grant request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Granted {
    /// The grant grew (or already covered the need): decide again.
    More,
    /// Less than the need is free; `elsewhere`: other nodes hold grants of the account
    /// (they were told to hand them back).
    Nothing { elsewhere: bool },
}

/// How many recall waits a charge short of money sits through while other nodes still
/// hold grants of the account, before it answers 402 (a live node hands back within a
/// flush or two; a dead one's grant expires after `lease::LEASE_TTL`).
const RECALLS: u32 = 5;

/// How long one charge keeps asking for grants before it gives up with 503 (the ledger
/// kept granting, and other requests of the node kept taking it first).
const GRANT_PATIENCE: Duration = Duration::from_secs(5);
/// How long a request waits for the writer to answer its grant request.
const GRANT_WAIT: Duration = Duration::from_secs(2);

/// Charged, not yet flushed.
#[derive(Default)]
struct Pending {
    rows: HashMap<(i64, Endpoint), (u64, Micros)>,
    /// Accounts whose window counters changed.
    counters: HashSet<i64>,
    /// Answers of idempotent requests whose charges are in `rows`.
    answers: Vec<StoredAnswer>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.rows.is_empty() && self.counters.is_empty() && self.answers.is_empty()
    }

    /// Per account, the amount charged and not yet flushed (one pass over the rows).
    fn amounts(&self) -> HashMap<i64, Micros> {
        let mut sums: HashMap<i64, Micros> = HashMap::new();
        for ((id, _), (_, amount)) in &self.rows {
            let sum = sums.entry(*id).or_insert(Micros::ZERO);
            *sum = sum.checked_add(*amount).unwrap_or(*sum);
        }
        sums
    }

    fn add(&mut self, account_id: i64, endpoint: Endpoint, queries: u64, amount: Micros) {
        let row = self
            .rows
            .entry((account_id, endpoint))
            .or_insert((0, Micros::ZERO));
        row.0 += queries;
        row.1 = row.1.checked_add(amount).unwrap_or(Micros::MAX);
        self.counters.insert(account_id);
    }
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
        ledger: &str,
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
        let mut books = Books {
            batch: 1,
            answers: Answers::from_index(answered),
            leasing: store.leasing(),
            ..Books::default()
        };
        books.replace(snapshot);
        let (flushed, _) = tokio::sync::watch::channel(FlushState::default());
        let shared = Arc::new(Shared {
            books: Mutex::new(books),
            wake: Condvar::new(),
            writer_waiting: AtomicBool::new(false),
            flushed,
            options,
            counts: Counts::default(),
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
        let key = books.keys.get(key_hash).ok_or(Refusal::InvalidKey)?.clone();
        let account = *books
            .accounts
            .get(&key.caller.account_id)
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
        verdict.map(|(_, status)| status)
    }

    /// Decides and applies the charge of `queries` of `endpoint` in memory; it is
    /// written by the next flush (`Charged::flush`).
    pub fn charge(
        &self,
        caller: Caller,
        queries: u64,
        endpoint: Endpoint,
    ) -> Result<Charged, BillingError> {
        self.decide(caller, queries, endpoint, None)
    }

    /// As `charge`, for the request that claimed `key`: the charge is decided at once
    /// (balance and windows) but held on the key, and written with the answer
    /// (`ClaimedKey::answer`), or alone if the request ends without one.
    pub fn charge_held(
        &self,
        caller: Caller,
        queries: u64,
        endpoint: Endpoint,
        key: &ClaimedKey,
    ) -> Result<Charged, BillingError> {
        self.decide(caller, queries, endpoint, Some(key))
    }

    fn decide(
        &self,
        caller: Caller,
        queries: u64,
        endpoint: Endpoint,
        hold_on: Option<&ClaimedKey>,
    ) -> Result<Charged, BillingError> {
        let mut asking = Asking::new();
        loop {
            match self.try_decide(caller, queries, endpoint, hold_on) {
                Ok(verdict) => return verdict,
                Err(short) => {
                    // Not on an async worker (`charge_async` is): blocking is fine.
                    let answer = self
                        .ask_for_grant(caller.account_id, short)
                        .and_then(|reply| {
                            reply
                                .blocking_recv()
                                .map_err(|_| "billing stopped".to_string())?
                        });
                    if let Some(verdict) = asking.after(answer) {
                        self.count(&verdict);
                        return verdict;
                    }
                    if asking.recall_wait {
                        std::thread::sleep(lease::RECALL_WAIT);
                    }
                }
            }
        }
    }

    /// As `charge`, on an async worker: when the node's grant is short it waits for the
    /// ledger without blocking the worker.
    pub async fn charge_async(
        &self,
        caller: Caller,
        queries: u64,
        endpoint: Endpoint,
    ) -> Result<Charged, BillingError> {
        self.decide_async(caller, queries, endpoint, None).await
    }

    /// As `charge_held`, on an async worker.
    pub async fn charge_held_async(
        &self,
        caller: Caller,
        queries: u64,
        endpoint: Endpoint,
        key: &ClaimedKey,
    ) -> Result<Charged, BillingError> {
        self.decide_async(caller, queries, endpoint, Some(key))
            .await
    }

    async fn decide_async(
        &self,
        caller: Caller,
        queries: u64,
        endpoint: Endpoint,
        hold_on: Option<&ClaimedKey>,
    ) -> Result<Charged, BillingError> {
        let mut asking = Asking::new();
        loop {
            match self.try_decide(caller, queries, endpoint, hold_on) {
                Ok(verdict) => return verdict,
                Err(short) => {
                    let answer = match self.ask_for_grant(caller.account_id, short) {
                        Ok(reply) => tokio::time::timeout(GRANT_WAIT, reply)
                            .await
                            .map_err(|_| format!("no grant from the ledger within {GRANT_WAIT:?}"))
                            .and_then(|r| r.map_err(|_| "billing stopped".to_string())?),
                        Err(why) => Err(why),
                    };
                    if let Some(verdict) = asking.after(answer) {
                        self.count(&verdict);
                        return verdict;
                    }
                    if asking.recall_wait {
                        tokio::time::sleep(lease::RECALL_WAIT).await;
                    }
                }
            }
        }
    }

    /// Decides the charge now when the node's grant covers it (or the store leases the
    /// whole balance); `Err((need, want))` when the grant is short and the ledger must be
    /// asked first (a 402 is decided only there).
    fn try_decide(
        &self,
        caller: Caller,
        queries: u64,
        endpoint: Endpoint,
        hold_on: Option<&ClaimedKey>,
    ) -> Result<Result<Charged, BillingError>, Short> {
        let now = SystemTime::now();
        let mut books = self.books();
        if let Some(short) = books.short_of_grant(caller, queries, now) {
            return Err(short);
        }
        let verdict = books.check(caller, queries, now).and_then(|_| {
            let account = books
                .accounts
                .get_mut(&caller.account_id)
                .ok_or(Refusal::InvalidKey)?;
            let cost = account.charge(queries, now)?;
            let status = account.status(now);
            if let Some(lease) = books.leases.get_mut(&caller.account_id) {
                lease.spend(cost, BootTime::now());
            }
            if queries > 0 && !endpoint.is_free() {
                let charge = Held {
                    endpoint,
                    queries,
                    amount: cost,
                };
                let held = hold_on.is_some_and(|claimed| {
                    books
                        .answers
                        .hold(claimed.account_id, &claimed.key, claimed.ticket, charge)
                });
                if !held {
                    books
                        .pending
                        .add(caller.account_id, endpoint, queries, cost);
                }
            }
            Ok(Charged {
                balance: status.balance,
                rate: status.rate,
                cost,
                flush: books.batch,
            })
        });
        let wake = verdict.is_ok() && self.writer_to_wake(&books);
        drop(books);
        self.wake_writer(wake);
        if let Ok(charged) = &verdict {
            self.shared.counts.charges.fetch_add(1, Ordering::Relaxed);
            return Ok(Ok(*charged));
        }
        self.count(&verdict);
        Ok(verdict)
    }

    /// Asks the writer to ask the store for `need` more of the account (up to `want`);
    /// the answer comes on the receiver. `Err` (503) while the ledger cannot be written.
    fn ask_for_grant(
        &self,
        account_id: i64,
        short: Short,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<Granted, String>>, String> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        {
            let mut books = self.books();
            if let Some(why) = &books.failing {
                return Err(why.clone());
            }
            books.grant_requests.push(GrantRequest {
                account_id,
                short,
                reply,
            });
        }
        self.shared.wake.notify_all();
        Ok(answer)
    }

    /// What a request of `endpoint` with the body `fingerprint` finds under `key` of
    /// `account_id` (`answers::Answers::claim`); when nothing live, the key is claimed for
    /// it until the returned `ClaimedKey` answers or is dropped.
    pub fn claim(
        &self,
        account_id: i64,
        key: &IdempotencyKey,
        endpoint: Endpoint,
        fingerprint: Fingerprint,
    ) -> Claim<ClaimedKey> {
        let claim =
            self.books()
                .answers
                .claim(account_id, key, endpoint, fingerprint, SystemTime::now());
        claim.map_run(|ticket| ClaimedKey {
            billing: self.clone(),
            account_id,
            key: key.clone(),
            ticket,
            open: true,
        })
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

    /// As `committed`, blocking the thread (tests, benchmarks).
    pub fn committed_blocking(&self, charged: &Charged) -> Result<(), BillingError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| BillingError::Unavailable(e.to_string()))?;
        runtime.block_on(self.committed(charged))
    }

    /// Balance and windows as they stand, charging nothing (the free operations).
    pub fn status(&self, caller: Caller) -> Result<AccountStatus, Refusal> {
        let books = self.books();
        let account = books
            .accounts
            .get(&caller.account_id)
            .ok_or(Refusal::InvalidKey)?;
        Ok(account.status(SystemTime::now()))
    }

    /// Makes the writer look for outside changes now and waits until the books hold them
    /// (what a CLI command's announcement triggers). `false` on timeout.
    pub fn reload_now(&self, timeout: Duration) -> bool {
        let (done, wait) = std::sync::mpsc::channel();
        self.books().reload_requests.push(done);
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

    pub fn stats(&self) -> BillingStats {
        let c = &self.shared.counts;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        BillingStats {
            charges: get(&c.charges),
            refusals: get(&c.refusals),
            unavailable: get(&c.unavailable),
            flushes: get(&c.flushes),
            failed_flushes: get(&c.failed_flushes),
            flush_busy: Duration::from_nanos(get(&c.flush_busy_nanos)),
            reloads: get(&c.reloads),
            last_flush: Duration::from_nanos(get(&c.last_flush_nanos)),
            last_commit: match get(&c.last_commit_unix_micros) {
                0 => None,
                micros => Some(std::time::UNIX_EPOCH + Duration::from_micros(micros)),
            },
            pending: self.books().pending.rows.len() as u64,
        }
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
        self.books().stop = true;
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
            && !books.pending.is_empty()
            && self.shared.writer_waiting.swap(false, Ordering::AcqRel)
    }

    fn wake_writer(&self, wake: bool) {
        if wake {
            self.shared.wake.notify_all();
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

impl Books {
    /// 503 while flushes fail or after stop; then the charge rule.
    fn check(
        &self,
        caller: Caller,
        queries: u64,
        now: SystemTime,
    ) -> Result<(Micros, AccountStatus), BillingError> {
        if !self.active_keys.contains(&caller.key_id) {
            return Err(Refusal::InvalidKey.into());
        }
        let account = self
            .accounts
            .get(&caller.account_id)
            .ok_or(Refusal::InvalidKey)?;
        if let Some(why) = &self.failing {
            return Err(BillingError::Unavailable(why.clone()));
        }
        if self.stop {
            return Err(BillingError::Unavailable("shutting down".into()));
        }
        let cost = account.admits(queries, now)?;
        Ok((cost, account.status(now)))
    }

    /// With grants: when `queries` cost more than this node's usable grant on the
    /// caller's account, how much more it needs and how much to ask for. `None` when the
    /// grant covers them, or when the charge is refused for another reason first (401,
    /// 503) or the whole balance is this node's (the file).
    fn short_of_grant(&mut self, caller: Caller, queries: u64, now: SystemTime) -> Option<Short> {
        if self.leasing != Leasing::Grants {
            return None;
        }
        match self.check(caller, queries, now) {
            Ok(_) | Err(BillingError::Refused(Refusal::InsufficientBalance)) => {}
            Err(_) => return None,
        }
        let cost = PRICE_PER_QUERY.checked_mul(queries)?;
        let lease = self.leases.entry(caller.account_id).or_default();
        let usable = lease.usable(BootTime::now());
        let need = cost.checked_sub(usable).filter(|n| *n > Micros::ZERO)?;
        Some(Short {
            cost,
            want: lease.want(need),
        })
    }

    /// What this node charged of the account and the store does not hold yet: pending,
    /// held on idempotency keys, and (with grants) in the batch being flushed.
    fn unflushed(&self, account_id: i64) -> Micros {
        self.unflushed_all()
            .get(&account_id)
            .copied()
            .unwrap_or(Micros::ZERO)
    }

    /// [`unflushed`](Self::unflushed) of every account, in one pass over the pending
    /// rows, the idempotency keys and the batch in flight (a reload or a flush's grants
    /// hold the books' mutex, which every billed request waits on, and a day of
    /// idempotency keys may be in `answers`).
    fn unflushed_all(&self) -> HashMap<i64, Micros> {
        let mut sums = self.pending.amounts();
        let mut add = |id: i64, amount: Micros| {
            let sum = sums.entry(id).or_insert(Micros::ZERO);
            *sum = sum.checked_add(amount).unwrap_or(Micros::MAX);
        };
        for (id, amount) in self.answers.held() {
            add(id, amount);
        }
        for r in self.in_flight.iter().flat_map(|batch| &batch.charges) {
            add(r.account_id, r.amount);
        }
        sums
    }

    /// Takes what the store holds for this node on an account after a grant or a flush
    /// sent at `sent`: the grant left is its `remaining` minus the charges the store has
    /// not seen, spendable until `sent`'s deadline; the balance shown likewise.
    /// `unflushed`: the account's [`unflushed`](Self::unflushed).
    fn sync_grant(&mut self, grant: Grant, sent: BootTime, unflushed: Micros) {
        let less = |m: Micros| m.checked_sub(unflushed).filter(|m| !m.is_negative());
        // A grant handed back in the batch being flushed is still in `remaining` until
        // that flush commits: it is not this node's to spend any more.
        let returning = self.in_flight.as_ref().map_or(Micros::ZERO, |batch| {
            batch
                .returns
                .iter()
                .filter(|(id, _)| *id == grant.account_id)
                .fold(Micros::ZERO, |sum, (_, m)| {
                    sum.checked_add(*m).unwrap_or(sum)
                })
        });
        let lease = self.leases.entry(grant.account_id).or_default();
        lease.left = less(grant.remaining)
            .and_then(|m| m.checked_sub(returning))
            .filter(|m| !m.is_negative())
            .unwrap_or(Micros::ZERO);
        lease.deadline = Some(sent.deadline());
        if let Some(account) = self.accounts.get_mut(&grant.account_id) {
            account.balance = less(grant.balance).unwrap_or(Micros::ZERO);
        }
    }

    /// After a flush sent at `sent`: every grant as the store holds it (one not listed
    /// is gone).
    fn sync_grants(&mut self, applied: &Applied, sent: BootTime) {
        if self.leasing != Leasing::Grants {
            return;
        }
        for lease in self.leases.values_mut() {
            lease.left = Micros::ZERO;
            lease.deadline = None;
        }
        let unflushed = self.unflushed_all();
        for grant in &applied.grants {
            let of = unflushed.get(&grant.account_id).copied();
            self.sync_grant(*grant, sent, of.unwrap_or(Micros::ZERO));
        }
    }

    /// Takes the store's accounts and keys. A known account keeps its window counters
    /// (the server is their only writer) and its balance becomes the stored one minus
    /// what is charged and not yet flushed.
    fn replace(&mut self, snapshot: Snapshot) {
        let mut accounts = HashMap::with_capacity(snapshot.accounts.len());
        let unflushed_all = self.unflushed_all();
        for (id, mut stored) in snapshot.accounts {
            if let Some(known) = self.accounts.get(&id) {
                stored.counters = known.counters;
            }
            let unflushed = unflushed_all.get(&id).copied().unwrap_or(Micros::ZERO);
            stored.balance = stored
                .balance
                .checked_sub(unflushed)
                .filter(|b| !b.is_negative())
                .unwrap_or(Micros::ZERO);
            accounts.insert(id, stored);
        }
        self.accounts = accounts;
        self.active_keys = snapshot.keys.iter().map(|k| k.caller.key_id).collect();
        self.keys = snapshot
            .keys
            .into_iter()
            .map(|k| {
                let entry = KeyEntry {
                    caller: k.caller,
                    publishable: k.publishable.map(Arc::new),
                };
                (k.hash, entry)
            })
            .collect();
    }

    /// The pending charges as a batch; the books start the next one.
    /// The last batch holding a charge (or an answer) decided so far: the one charges go
    /// into now, or, when it is empty, the one taken before it (committed, or being
    /// committed). Batches commit in order and a failed one goes back into the pending
    /// charges, so `done` reaching it means everything decided before is in the file.
    fn last_charged_batch(&self) -> u64 {
        if self.pending.is_empty() {
            self.batch - 1
        } else {
            self.batch
        }
    }

    fn take_batch(&mut self) -> Batch {
        let pending = std::mem::take(&mut self.pending);
        let number = self.batch;
        self.batch += 1;
        let counters = pending
            .counters
            .iter()
            .filter_map(|id| Some((*id, self.accounts.get(id)?.counters)))
            .collect();
        let answers = pending.answers;
        let mut charges: Vec<ChargeRow> = pending
            .rows
            .into_iter()
            .map(|((account_id, endpoint), (queries, amount))| ChargeRow {
                account_id,
                endpoint,
                queries,
                amount,
            })
            .collect();
        charges.sort_by_key(|r| (r.account_id, r.endpoint));
        let now = BootTime::now();
        let stopping = self.stop;
        let mut returns: Vec<(i64, Micros)> = self
            .leases
            .iter_mut()
            .filter_map(|(id, lease)| {
                let back = lease.to_return(now, stopping).then_some((*id, lease.left));
                if back.is_some() || lease.left == Micros::ZERO {
                    lease.left = Micros::ZERO;
                    lease.recalled = false;
                }
                back
            })
            .collect();
        returns.sort_unstable();
        Batch {
            number,
            at: SystemTime::now(),
            charges,
            counters,
            answers,
            returns,
        }
    }

    /// Is there anything to flush: charges, or grants to hand back?
    fn flush_due(&self) -> bool {
        if !self.pending.is_empty() {
            return true;
        }
        if self.leasing != Leasing::Grants {
            return false;
        }
        let now = BootTime::now();
        self.leases
            .values()
            .any(|lease| lease.to_return(now, self.stop))
    }

    /// Is anything not yet in the store: charges, or (with grants) a grant left?
    fn holds_anything(&self) -> bool {
        !self.pending.is_empty()
            || self.in_flight.is_some()
            || self.leases.values().any(|l| l.left > Micros::ZERO)
    }

    /// A batch that did not commit goes back into the pending charges.
    fn put_back(&mut self, batch: Batch) {
        for row in batch.charges {
            self.pending
                .add(row.account_id, row.endpoint, row.queries, row.amount);
        }
        self.pending
            .counters
            .extend(batch.counters.into_iter().map(|(id, _)| id));
        self.pending.answers.extend(batch.answers);
    }
}

/// An idempotency key claimed by the request running under it (`Billing::claim`). Its
/// charge (`Billing::charge_held`) waits on it; `answer` makes both pending. Dropped
/// without an answer (an error, a panic, a client gone), it frees the key, and a charge
/// it held is made pending alone: the work was done and billed, nothing is replayed.
pub struct ClaimedKey {
    billing: Billing,
    account_id: i64,
    key: IdempotencyKey,
    ticket: u64,
    open: bool,
}

impl ClaimedKey {
    /// The request answered `body`: the key replays it from now on, and its charge and
    /// the answer go into the same pending batch, whose number this returns (durable mode
    /// waits for it).
    pub fn answer(mut self, body: Arc<[u8]>) -> u64 {
        self.open = false;
        let mut books = self.billing.books();
        let (held, stored) = books.answers.answer(
            self.account_id,
            &self.key,
            self.ticket,
            body,
            SystemTime::now(),
        );
        if let Some(held) = held {
            books
                .pending
                .add(self.account_id, held.endpoint, held.queries, held.amount);
        }
        books.pending.answers.extend(stored);
        let batch = books.batch;
        let wake = self.billing.writer_to_wake(&books);
        drop(books);
        self.billing.wake_writer(wake);
        batch
    }
}

impl Drop for ClaimedKey {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        let mut books = self.billing.books();
        let held = books
            .answers
            .release(self.account_id, &self.key, self.ticket);
        if let Some(held) = held {
            books
                .pending
                .add(self.account_id, held.endpoint, held.queries, held.amount);
        }
        let wake = self.billing.writer_to_wake(&books);
        drop(books);
        self.billing.wake_writer(wake);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Longest pause between two tries of a failing flush.
const RETRY_MAX: Duration = Duration::from_secs(1);
/// How long a clean stop keeps retrying a failing flush.
const STOP_RETRY: Duration = Duration::from_secs(60);
/// How often the writer forgets expired idempotency keys and deletes their answers.
const PURGE_EVERY: Duration = Duration::from_secs(60);
/// Answers are deleted from the file this long after they stop being replayable, so that
/// a replay decided just before then still finds its body.
const PURGE_GRACE: Duration = Duration::from_secs(60);
/// A flush at least this slow is logged: in durable mode every request of its batch waited
/// for it (bench/api.sh counts them beside its p99). Not rate-limited: a disk that stays
/// slow gives at most one line per flush, about ten a second.
const SLOW_FLUSH: Duration = Duration::from_millis(100);

/// Forgets the idempotency keys no longer replayable and deletes their answers from the
/// file (at most `db::idempotency::PURGE_ROWS`); how long until the next purge: at once
/// when that bound was reached.
fn purge_answers(store: &mut dyn ChargeStore, shared: &Shared) -> Duration {
    let now = SystemTime::now();
    lock(&shared.books).answers.expire(now);
    let before = now
        .checked_sub(ANSWER_TTL + PURGE_GRACE)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    match store.purge_answers(before) {
        Ok(deleted) if deleted >= crate::db::idempotency::PURGE_ROWS => Duration::ZERO,
        Ok(_) => PURGE_EVERY,
        Err(e) => {
            tracing::error!("deleting expired idempotent answers: {e:#}");
            PURGE_EVERY
        }
    }
}

/// Asks the store for the grants requests are waiting for (with grants only), one
/// account at a time; a request whose grant another one's already covers is answered
/// without asking.
fn answer_grants(store: &mut dyn ChargeStore, shared: &Shared, requests: Vec<GrantRequest>) {
    // What the ledger refused in this turn, per account: (the smallest need refused, whether
    // other nodes held grants). A request needing as much gets the same answer unasked.
    let mut refused: HashMap<i64, (Micros, bool)> = HashMap::new();
    for request in requests {
        let before = {
            let books = lock(&shared.books);
            if let Some(why) = &books.failing {
                let _ = request.reply.send(Err(why.clone()));
                continue;
            }
            let usable = books
                .leases
                .get(&request.account_id)
                .map_or(Micros::ZERO, |l| l.usable(BootTime::now()));
            if usable >= request.short.cost {
                let _ = request.reply.send(Ok(Granted::More));
                continue;
            }
            if let Some((need, elsewhere)) = refused.get(&request.account_id)
                && request
                    .short
                    .cost
                    .checked_sub(usable)
                    .unwrap_or(Micros::ZERO)
                    >= *need
            {
                let _ = request.reply.send(Ok(Granted::Nothing {
                    elsewhere: *elsewhere,
                }));
                continue;
            }
            usable
        };
        let sent = BootTime::now();
        // What is still missing now (other requests may have spent some of the grant).
        let need = request
            .short
            .cost
            .checked_sub(before)
            .unwrap_or(Micros::ZERO);
        let want = request.short.want.max(need);
        let answer = match store.grant(request.account_id, need, want) {
            Ok(grant) => {
                let mut books = lock(&shared.books);
                let unflushed = books.unflushed(grant.account_id);
                books.sync_grant(grant, sent, unflushed);
                if let Some(lease) = books.leases.get_mut(&request.account_id) {
                    lease.granted(sent);
                }
                let after = books
                    .leases
                    .get(&request.account_id)
                    .map_or(Micros::ZERO, |l| l.usable(sent));
                Ok(if after > before || after >= request.short.cost {
                    Granted::More
                } else {
                    let elsewhere = grant.elsewhere > Micros::ZERO;
                    refused.insert(request.account_id, (need, elsewhere));
                    Granted::Nothing { elsewhere }
                })
            }
            Err(e) => {
                tracing::error!("asking the ledger for a grant: {e:#}");
                Err("the ledger cannot be reached".to_string())
            }
        };
        let _ = request.reply.send(answer);
    }
}

fn run_writer(mut store: Box<dyn ChargeStore>, shared: &Shared) {
    let options = shared.options;
    let mut retry = options.flush_interval;
    let mut stop_deadline: Option<Instant> = None;
    // The first purge at once: answers may have expired while no server ran.
    let mut next_purge = Instant::now();
    loop {
        // Wait for the interval (write-behind) or for charges (durable), a reload
        // request or stop.
        let (grants, batch, reloads, stopping) = {
            let mut books = lock(&shared.books);
            let pause = if books.failing.is_some() {
                retry
            } else {
                options.flush_interval
            };
            let until = Instant::now() + pause;
            loop {
                let durable_ready = options.durable && !books.pending.is_empty();
                if books.stop
                    || durable_ready
                    || !books.reload_requests.is_empty()
                    || !books.grant_requests.is_empty()
                {
                    break;
                }
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                shared.writer_waiting.store(true, Ordering::Release);
                books = shared
                    .wake
                    .wait_timeout(books, left)
                    .map(|(b, _)| b)
                    .unwrap_or_else(|p| p.into_inner().0);
                shared.writer_waiting.store(false, Ordering::Relaxed);
            }
            let reloads = std::mem::take(&mut books.reload_requests);
            let grants = std::mem::take(&mut books.grant_requests);
            let batch = match books.leasing {
                Leasing::WholeBalance => (!books.pending.is_empty()).then(|| books.take_batch()),
                Leasing::Grants => match &books.in_flight {
                    Some(retried) => Some(retried.clone()),
                    None if books.flush_due() => {
                        let batch = books.take_batch();
                        books.in_flight = Some(batch.clone());
                        Some(batch)
                    }
                    None => None,
                },
            };
            (grants, batch, reloads, books.stop)
        };

        answer_grants(store.as_mut(), shared, grants);

        let mut flushed_ok = true;
        if let Some(batch) = batch {
            let started = Instant::now();
            let sent = BootTime::now();
            let number = batch.number;
            match store.apply(&batch) {
                Ok(applied) => {
                    let elapsed = started.elapsed();
                    let took = elapsed.as_nanos() as u64;
                    let counts = &shared.counts;
                    counts.flushes.fetch_add(1, Ordering::Relaxed);
                    counts.flush_busy_nanos.fetch_add(took, Ordering::Relaxed);
                    counts.last_flush_nanos.store(took, Ordering::Relaxed);
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap_or_default();
                    counts
                        .last_commit_unix_micros
                        .store(now.as_micros() as u64, Ordering::Relaxed);
                    let recovered = {
                        let mut books = lock(&shared.books);
                        books.answers.written(&batch.answers);
                        books.in_flight = None;
                        books.sync_grants(&applied, sent);
                        books.failing.take()
                    };
                    if recovered.is_some() {
                        tracing::warn!("billing flushes work again: charges are answered");
                    }
                    retry = options.flush_interval;
                    shared.flushed.send_modify(|s| {
                        s.done = number;
                        s.failing = None;
                    });
                    // Logged after the requests that waited for this flush are let go.
                    if elapsed >= SLOW_FLUSH {
                        tracing::warn!(
                            "slow billing flush: {:.1} ms from BEGIN to the end of COMMIT \
                             ({} charge rows), waiting for the disk or for another writer",
                            elapsed.as_secs_f64() * 1e3,
                            batch.charges.len()
                        );
                    }
                }
                Err(e) => {
                    flushed_ok = false;
                    let why = format!("{e:#}");
                    shared.counts.failed_flushes.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(
                        "billing flush failed ({} charge rows kept, retrying in {retry:?}): {why}",
                        batch.charges.len()
                    );
                    let mut books = lock(&shared.books);
                    if books.leasing == Leasing::WholeBalance {
                        books.put_back(batch);
                    } // else: still `in_flight`, retried as it is
                    books.failing = Some("the ledger cannot be written".into());
                    for request in std::mem::take(&mut books.grant_requests) {
                        let _ = request
                            .reply
                            .send(Err("the ledger cannot be written".into()));
                    }
                    drop(books);
                    shared.flushed.send_modify(|s| {
                        s.failing = Some(why);
                    });
                    retry = (retry * 2).clamp(Duration::from_millis(10), RETRY_MAX);
                }
            }
        }

        if Instant::now() >= next_purge {
            next_purge = Instant::now() + purge_answers(store.as_mut(), shared);
        }

        // Outside changes (CLI): reload after our own flush so that the stored balances
        // hold every flushed charge.
        match store.changes() {
            Ok(Some(snapshot)) => {
                lock(&shared.books).replace(snapshot);
                shared.counts.reloads.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = store.reloaded() {
                    tracing::error!("acknowledging account changes: {e:#}");
                }
            }
            Ok(None) => {}
            Err(e) => tracing::error!("reading account changes: {e:#}"),
        }
        let recalls = store.recalls();
        if !recalls.is_empty() {
            let mut books = lock(&shared.books);
            for id in recalls {
                if let Some(lease) = books.leases.get_mut(&id) {
                    lease.recalled = true;
                }
            }
        }
        for done in reloads {
            let _ = done.send(());
        }

        if stopping {
            let empty = !lock(&shared.books).holds_anything();
            let deadline = *stop_deadline.get_or_insert_with(|| Instant::now() + STOP_RETRY);
            if empty || (!flushed_ok && Instant::now() >= deadline) {
                if !empty {
                    tracing::error!(
                        "stopping with unflushed charges: the ledger could not be written"
                    );
                } else if let Err(e) = store.close() {
                    tracing::error!("closing the ledger: {e:#}");
                }
                return;
            }
        }
    }
}
