//! The charging path: one writer thread commits many waiting charges per transaction
//! (group commit) and answers each caller once its charge is durable.
//!
//! Why one writer: SQLite has one write lock per file, and with `synchronous=FULL` every
//! commit waits for an fsync. A transaction per request would pay the lock and the fsync
//! per request; here the writer drains every charge waiting in its channel, applies them
//! in one `BEGIN IMMEDIATE` transaction, commits once, then answers them all. While it
//! commits, the next batch queues up, so the batch grows with the load and the fsync is
//! shared by everyone in it. Before each transaction the writer briefly waits for the
//! callers it has just answered (see `run_writer`), so batches hold all concurrent
//! callers instead of alternating between two halves of them; a batch's balances and
//! ledger rows are written with a few multi-row statements. Figures: `bench/charge/`.
//!
//! Why it is exact:
//! - Each charge is decided on the account's state as the transaction sees it, with the
//!   charges before it in the same batch applied: `BEGIN IMMEDIATE` takes the write lock
//!   before the first read, so no other process (a CLI top-up, revocation or limit change)
//!   can commit between the read and the write. The writer remembers the accounts and
//!   keys it read or wrote, but only uses that memory when `PRAGMA data_version` says no
//!   other connection has committed since its own last commit (see `Known`); any outside
//!   change (top-up, revocation, new limits) makes it read everything afresh.
//! - Each charge is all or nothing: the key is checked (401), then the balance covers
//!   N x 28 micros (402), then every window has room for N (429); a refused charge changes
//!   nothing and the next one in the batch is decided as if it never came.
//! - Balances, window counters and ledger rows are written in the same transaction; the
//!   ledger gets one row per (account, endpoint) per transaction, whose `query_count` says
//!   how many queries it covers.
//! - Callers are answered only after the commit returned. If anything fails, the whole
//!   transaction rolls back and every caller of the batch gets an error: nothing of it was
//!   charged.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, anyhow};
use rusqlite::{Connection, ToSql, TransactionBehavior, params_from_iter};
use tokio::sync::oneshot;

use crate::db::accounts::{self, Caller, ChargeState, unix_secs};
use crate::domain::money::Micros;
use crate::domain::rate_limit::RateStatus;

/// Most charges in one transaction: bounds the wait of the first caller in a batch.
const MAX_BATCH: usize = 4096;

/// The writer lingers for more charges at most this share of its last transaction's
/// time, capped at `LINGER_MAX`, and stops lingering after a `LINGER_GAP` without any.
const LINGER_SHARE: u32 = 4;
const LINGER_MAX: Duration = Duration::from_millis(2);
const LINGER_GAP: Duration = Duration::from_micros(200);

/// A request to charge `queries` billed queries of `endpoint` (e.g. `"lookup"`) to
/// the caller's account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charge {
    pub caller: Caller,
    pub queries: u64,
    pub endpoint: &'static str,
}

/// A charge that is committed: the balance right after it (in the order charges were
/// applied) and `rateLimit` counting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charged {
    pub balance: Micros,
    pub rate: RateStatus,
}

/// Why a charge was refused (nothing was charged or counted). In the contract's order of
/// checks: 401, then 402, then 429.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The key was revoked (or its account is gone) since it authenticated: 401.
    #[error("Invalid API key")]
    InvalidKey,
    /// The balance is below N x 0.000028 USD: 402.
    #[error("Insufficient balance")]
    InsufficientBalance,
    /// A window has no room for N more queries: 429, with `Retry-After`.
    #[error("Rate limit exceeded")]
    RateLimited { retry_after_secs: u64 },
}

/// The answer to a charge: `Err` when it could not be recorded (nothing was charged).
pub type ChargeResult = anyhow::Result<Result<Charged, Refusal>>;

enum Message {
    Charge(Charge, oneshot::Sender<ChargeResult>),
    /// Answered as soon as the writer reads it: it is alive and draining its queue.
    Ping(oneshot::Sender<()>),
    Stop,
}

/// A handle on the billing writer; clone it freely. The writer stops (after committing
/// what it has received) on [`Billing::shutdown`] or when the last handle is dropped.
#[derive(Clone)]
pub struct Billing {
    inner: Arc<Inner>,
}

struct Inner {
    sender: Sender<Message>,
    writer: Mutex<Option<JoinHandle<()>>>,
    stats: Arc<Counts>,
}

/// Totals since start: committed transactions and the charges (applied or refused) they
/// decided. `charges / transactions` is the mean batch size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BillingStats {
    pub transactions: u64,
    pub charges: u64,
    /// Time the writer spent in transactions (from `BEGIN` to the end of `COMMIT`).
    pub busy: Duration,
    /// When the last transaction committed, and how long it took (operations: /metrics).
    pub last_commit: Option<SystemTime>,
    pub last_transaction: Duration,
    /// Charges sent to the writer and not answered yet.
    pub pending: u64,
}

#[derive(Default)]
struct Counts {
    transactions: AtomicU64,
    charges: AtomicU64,
    busy_nanos: AtomicU64,
    last_commit_unix_micros: AtomicU64,
    last_transaction_nanos: AtomicU64,
    received: AtomicU64,
    answered: AtomicU64,
}

impl Billing {
    /// Opens its own connection to `path` and starts the writer thread.
    pub fn start(path: &Path) -> anyhow::Result<Billing> {
        let conn = super::open(path)?;
        // Room for the multi-row statements of every chunk size, and the rest.
        conn.set_prepared_statement_cache_capacity(32);
        // Checkpoints run on their own thread (`Checkpointer`), not inside a commit.
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        let (sender, receiver) = mpsc::channel();
        let stats = Arc::new(Counts::default());
        let writer_stats = stats.clone();
        let writer = thread::Builder::new()
            .name("postal-billing".into())
            .spawn(move || run_writer(conn, receiver, &writer_stats))
            .context("starting the billing writer")?;
        Ok(Billing {
            inner: Arc::new(Inner {
                sender,
                writer: Mutex::new(Some(writer)),
                stats,
            }),
        })
    }

    /// Charges and waits (asynchronously) until the charge is durable or refused.
    pub async fn charge(&self, charge: Charge) -> ChargeResult {
        let answer = self.send(charge)?;
        answer
            .await
            .map_err(|_| anyhow!("billing stopped before answering"))?
    }

    /// As [`Billing::charge`], blocking the thread (for threads, the CLI, benchmarks).
    /// Panics if called from within an async runtime; use `charge` there.
    pub fn charge_blocking(&self, charge: Charge) -> ChargeResult {
        let answer = self.send(charge)?;
        answer
            .blocking_recv()
            .map_err(|_| anyhow!("billing stopped before answering"))?
    }

    fn send(&self, charge: Charge) -> anyhow::Result<oneshot::Receiver<ChargeResult>> {
        let (reply, answer) = oneshot::channel();
        self.inner
            .sender
            .send(Message::Charge(charge, reply))
            .map_err(|_| anyhow!("billing has stopped"))?;
        self.inner.stats.received.fetch_add(1, Ordering::Relaxed);
        Ok(answer)
    }

    /// Whether the writer answers a ping within `patience`: it runs and reads its queue
    /// between commits (`/readyz`).
    pub async fn responds_within(&self, patience: Duration) -> bool {
        let (reply, answer) = oneshot::channel();
        if self.inner.sender.send(Message::Ping(reply)).is_err() {
            return false;
        }
        matches!(tokio::time::timeout(patience, answer).await, Ok(Ok(())))
    }

    pub fn stats(&self) -> BillingStats {
        BillingStats {
            transactions: self.inner.stats.transactions.load(Ordering::Relaxed),
            charges: self.inner.stats.charges.load(Ordering::Relaxed),
            busy: Duration::from_nanos(self.inner.stats.busy_nanos.load(Ordering::Relaxed)),
            last_commit: match self
                .inner
                .stats
                .last_commit_unix_micros
                .load(Ordering::Relaxed)
            {
                0 => None,
                micros => Some(SystemTime::UNIX_EPOCH + Duration::from_micros(micros)),
            },
            last_transaction: Duration::from_nanos(
                self.inner
                    .stats
                    .last_transaction_nanos
                    .load(Ordering::Relaxed),
            ),
            pending: (self.inner.stats.received.load(Ordering::Relaxed))
                .saturating_sub(self.inner.stats.answered.load(Ordering::Relaxed)),
        }
    }

    /// Commits and answers every charge received so far, then stops the writer and waits
    /// for it. Later charges fail with "billing has stopped". Idempotent.
    pub fn shutdown(&self) {
        self.inner.stop();
    }
}

impl Inner {
    fn stop(&self) {
        let _ = self.sender.send(Message::Stop);
        let writer = self.writer.lock().map(|mut w| w.take()).unwrap_or(None);
        if let Some(writer) = writer {
            let _ = writer.join();
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop();
    }
}

type Waiting = (Charge, oneshot::Sender<ChargeResult>);

fn run_writer(mut conn: Connection, receiver: Receiver<Message>, stats: &Counts) {
    let mut batch: Vec<Waiting> = Vec::new();
    let mut known = Known::default();
    let mut stopping = false;
    let mut last_transaction = Duration::ZERO;
    // Callers the next batch can expect: those the last commit answered (they come back)
    // plus those that arrived while it ran.
    let mut expected = 0;
    let mut wal = WalControl::new(&conn);
    let _checkpointer = Checkpointer::start(&conn);
    loop {
        if batch.is_empty() && !stopping {
            match receiver.recv() {
                Ok(message) => stopping |= take(message, &mut batch),
                Err(_) => stopping = true,
            }
        }
        // Linger: without waiting for the callers just answered, batches would alternate
        // between two halves of the callers, two fsyncs per round. So take what is queued,
        // then wait while fewer than `expected` are in and charges keep coming (no gap
        // over LINGER_GAP), for at most a quarter of the last transaction's time: at most
        // +25% latency when commits are slow (fsync bound), where full batches matter
        // most; next to nothing when they are fast.
        let linger_until = Instant::now() + (last_transaction / LINGER_SHARE).min(LINGER_MAX);
        while batch.len() < MAX_BATCH && !stopping {
            match receiver.try_recv() {
                Ok(message) => {
                    stopping |= take(message, &mut batch);
                    continue;
                }
                Err(TryRecvError::Disconnected) => stopping = true,
                Err(TryRecvError::Empty) => {}
            }
            let left = linger_until.saturating_duration_since(Instant::now());
            if batch.len() >= expected || left.is_zero() {
                break;
            }
            match receiver.recv_timeout(left.min(LINGER_GAP)) {
                Ok(message) => stopping |= take(message, &mut batch),
                Err(_) => break,
            }
        }
        if batch.is_empty() {
            if stopping {
                return;
            }
            continue;
        }
        let started = Instant::now();
        let answers = commit(&mut conn, &mut known, &mut batch, stats);
        last_transaction = started.elapsed();
        // What is queued now arrived during the transaction: other callers than those
        // about to be answered.
        while batch.len() < MAX_BATCH {
            match receiver.try_recv() {
                Ok(message) => stopping |= take(message, &mut batch),
                Err(_) => break,
            }
        }
        expected = answers.len() + batch.len();
        stats
            .answered
            .fetch_add(answers.len() as u64, Ordering::Relaxed);
        for (reply, answer) in answers {
            let _ = reply.send(answer);
        }
        wal.after_commit(&conn);
    }
}

/// Copies committed pages from the WAL into the database file, off the writer's thread.
///
/// SQLite's automatic checkpoint runs inside the commit that crosses 1,000 WAL pages: it
/// copies about 4 MB and fsyncs the database file while every caller of that batch waits
/// (balance times of 6-8 ms in the middle of 0.3 ms ones under bench/api.sh). A PASSIVE
/// checkpoint from another connection takes no write lock, so the writer keeps committing
/// meanwhile. Stopped and joined when dropped (the writer's end).
struct Checkpointer {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

const CHECKPOINT_EVERY: Duration = Duration::from_millis(50);

impl Checkpointer {
    fn start(writer: &Connection) -> Checkpointer {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let path = writer.path().map(std::path::PathBuf::from);
        let flag = stop.clone();
        let thread = path.and_then(|path| {
            thread::Builder::new()
                .name("postal-checkpoint".into())
                .spawn(move || {
                    let conn = match super::open(&path) {
                        Ok(conn) => conn,
                        Err(e) => return tracing::error!("checkpointer: {e:#}"),
                    };
                    while !flag.load(Ordering::Relaxed) {
                        thread::sleep(CHECKPOINT_EVERY);
                        if let Err(e) =
                            conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
                        {
                            tracing::debug!("checkpoint: {e}");
                        }
                    }
                })
                .ok()
        });
        Checkpointer { stop, thread }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Keeps the WAL from growing without bound.
///
/// SQLite's automatic (PASSIVE) checkpoints copy committed pages into the database file
/// but restart the WAL only at a moment when no reader holds a snapshot in it. Under a
/// steady stream of charges, with lookups reading all the time, that moment never comes:
/// bench/api.sh grew the WAL by 23 MB/s. So every `WAL_CHECK_EVERY` commits the writer
/// looks at the WAL file's size and, past `WAL_RESTART_BYTES` (four times the size a
/// reset WAL is truncated to, `journal_size_limit`), runs a RESTART checkpoint,
/// waiting at most `WAL_RESTART_WAIT` for readers (theirs are read transactions of
/// microseconds); if some are still busy, it tries again later. Callers of the last
/// batch are already answered; the next batch waits at most that long.
struct WalControl {
    wal_path: std::path::PathBuf,
    commits: u32,
}

const WAL_CHECK_EVERY: u32 = 64;
const WAL_RESTART_BYTES: u64 = 64 << 20;
const WAL_RESTART_WAIT: Duration = Duration::from_millis(10);

impl WalControl {
    fn new(conn: &Connection) -> WalControl {
        let db = conn.path().unwrap_or_default();
        WalControl {
            wal_path: std::path::PathBuf::from(format!("{db}-wal")),
            commits: 0,
        }
    }

    fn after_commit(&mut self, conn: &Connection) {
        self.commits += 1;
        if self.commits < WAL_CHECK_EVERY {
            return;
        }
        self.commits = 0;
        let size = std::fs::metadata(&self.wal_path)
            .map(|m| m.len())
            .unwrap_or(0);
        if size <= WAL_RESTART_BYTES {
            return;
        }
        let _ = conn.busy_timeout(WAL_RESTART_WAIT);
        let restarted =
            conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| r.get::<_, i64>(0));
        let _ = conn.busy_timeout(super::BUSY_TIMEOUT);
        if !matches!(restarted, Ok(0)) {
            tracing::debug!("WAL restart postponed: readers busy");
        }
    }
}

/// Queues a charge; `true` for the stop message.
fn take(message: Message, batch: &mut Vec<Waiting>) -> bool {
    match message {
        Message::Charge(charge, reply) => {
            batch.push((charge, reply));
            false
        }
        Message::Ping(reply) => {
            let _ = reply.send(());
            false
        }
        Message::Stop => true,
    }
}

/// Applies and commits the batch (leaving it empty); returns each caller's answer, to
/// be sent once the commit has returned.
fn commit(
    conn: &mut Connection,
    known: &mut Known,
    batch: &mut Vec<Waiting>,
    stats: &Counts,
) -> Vec<(oneshot::Sender<ChargeResult>, ChargeResult)> {
    let charges: Vec<Charge> = batch.iter().map(|(charge, _)| *charge).collect();
    let started = Instant::now();
    let applied = apply_with(conn, known, &charges, SystemTime::now());
    stats
        .busy_nanos
        .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    match applied {
        Ok(outcomes) => {
            stats.transactions.fetch_add(1, Ordering::Relaxed);
            stats
                .last_commit_unix_micros
                .store(unix_micros(SystemTime::now()), Ordering::Relaxed);
            stats
                .last_transaction_nanos
                .store(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
            stats
                .charges
                .fetch_add(charges.len() as u64, Ordering::Relaxed);
            batch
                .drain(..)
                .zip(outcomes)
                .map(|((_, reply), outcome)| (reply, Ok(outcome)))
                .collect()
        }
        Err(e) => {
            tracing::error!(
                "billing transaction failed, {} charges refused: {e:#}",
                charges.len()
            );
            batch
                .drain(..)
                .map(|(_, reply)| {
                    let error = anyhow!("the charge was not recorded: {e:#}");
                    (reply, Err(error))
                })
                .collect()
        }
    }
}

fn unix_micros(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// One account's state during a batch.
struct InBatch {
    before: Micros,
    state: ChargeState,
    changed: bool,
}

/// What the writer knows of accounts and keys as of its last commit. It stands in for
/// re-reading them only while `PRAGMA data_version` is unchanged, i.e. while no other
/// connection (a CLI top-up, revocation or limit change, another server) has committed
/// since; otherwise it is dropped and everything is read again. Inside `BEGIN IMMEDIATE`
/// nobody else can commit, so this is exactly as fresh as reading the rows, without two
/// SELECTs per account and batch.
#[derive(Default)]
struct Known {
    data_version: Option<i64>,
    accounts: HashMap<i64, Option<ChargeState>>,
    keys: HashMap<Caller, bool>,
}

/// Beyond this many accounts the writer forgets and starts over (bounds its memory).
const MAX_KNOWN_ACCOUNTS: usize = 100_000;

/// Applies `charges` in order in one transaction and commits it; returns each outcome.
/// Public for tests that drive a connection directly (reads every row afresh).
pub fn apply(
    conn: &mut Connection,
    charges: &[Charge],
    now: SystemTime,
) -> anyhow::Result<Vec<Result<Charged, Refusal>>> {
    apply_with(conn, &mut Known::default(), charges, now)
}

fn apply_with(
    conn: &mut Connection,
    known: &mut Known,
    charges: &[Charge],
    now: SystemTime,
) -> anyhow::Result<Vec<Result<Charged, Refusal>>> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .context("taking the write lock for billing")?;
    let data_version: i64 = tx
        .prepare_cached("PRAGMA data_version")?
        .query_row([], |r| r.get(0))?;
    if known.data_version.take() != Some(data_version) || known.accounts.len() > MAX_KNOWN_ACCOUNTS
    {
        known.accounts.clear();
        known.keys.clear();
    }
    let mut accounts: HashMap<i64, Option<InBatch>> = HashMap::new();
    let mut keys: HashMap<Caller, bool> = HashMap::new();
    // (account, endpoint) -> index in `rows`; a row is (account, endpoint, queries, amount).
    let mut row_of: HashMap<(i64, &'static str), usize> = HashMap::new();
    let mut rows: Vec<(i64, &'static str, u64, Micros)> = Vec::new();
    let mut outcomes = Vec::with_capacity(charges.len());

    for charge in charges {
        let caller = charge.caller;
        let active = match keys.entry(caller) {
            Entry::Occupied(e) => *e.get(),
            Entry::Vacant(e) => *e.insert(match known.keys.get(&caller) {
                Some(active) => *active,
                None => accounts::key_is_active(&tx, &caller)?,
            }),
        };
        let account = match accounts.entry(caller.account_id) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let state = match known.accounts.get(&caller.account_id) {
                    Some(state) => *state,
                    None => accounts::charge_state(&tx, caller.account_id)?,
                };
                e.insert(state.map(|state| InBatch {
                    before: state.balance,
                    state,
                    changed: false,
                }))
            }
        };
        let account = match account {
            Some(account) if active => account,
            _ => {
                outcomes.push(Err(Refusal::InvalidKey));
                continue;
            }
        };
        let cost = match account.state.admits(charge.queries, now) {
            Ok(cost) => cost,
            Err(refusal) => {
                outcomes.push(Err(refusal));
                continue;
            }
        };
        if charge.queries > 0 {
            account.state.balance = account
                .state
                .balance
                .checked_sub(cost)
                .context("balance arithmetic")?;
            account.state.counters = account.state.counters.add(charge.queries, now);
            account.changed = true;
            let index = *row_of
                .entry((caller.account_id, charge.endpoint))
                .or_insert_with(|| {
                    rows.push((caller.account_id, charge.endpoint, 0, Micros::ZERO));
                    rows.len() - 1
                });
            let row = &mut rows[index];
            row.2 += charge.queries;
            row.3 = row.3.checked_add(cost).context("ledger arithmetic")?;
        }
        let status = account.state.status(now);
        outcomes.push(Ok(Charged {
            balance: status.balance,
            rate: status.rate,
        }));
    }

    let changed: Vec<(i64, ChargeState)> = accounts
        .iter()
        .filter_map(|(id, account)| {
            let account = account.as_ref().filter(|a| a.changed)?;
            Some((*id, account.state))
        })
        .collect();
    store_charge_states(&tx, &changed)?;
    let at = unix_secs(now);
    let mut running: HashMap<i64, Micros> = HashMap::new();
    let mut ledger_rows = Vec::with_capacity(rows.len());
    for (account_id, endpoint, queries, amount) in rows {
        let balance = running.entry(account_id).or_insert_with(|| {
            accounts[&account_id]
                .as_ref()
                .map_or(Micros::ZERO, |a| a.before)
        });
        *balance = balance.checked_sub(amount).context("ledger arithmetic")?;
        let numbers = [
            account_id,
            at,
            -amount.get(),
            balance.get(),
            i64::try_from(queries).unwrap_or(i64::MAX),
        ];
        ledger_rows.push((numbers, endpoint));
    }
    insert_charge_rows(&tx, &ledger_rows)?;
    tx.commit().context("committing charges")?;
    known.keys.extend(keys);
    known.accounts.extend(
        accounts
            .into_iter()
            .map(|(id, account)| (id, account.map(|a| a.state))),
    );
    known.data_version = Some(data_version);
    Ok(outcomes)
}

/// Rows per multi-row statement, largest first: a batch's writes take a few statements
/// instead of one per account, and these few sizes keep the statement cache warm.
const CHUNK_SIZES: [usize; 4] = [64, 16, 4, 1];

/// Calls `write` on consecutive chunks of `items`, each of one of the `CHUNK_SIZES`.
fn in_chunks<T>(
    items: &[T],
    mut write: impl FnMut(&[T]) -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    let mut rest = items;
    while !rest.is_empty() {
        let size = CHUNK_SIZES
            .into_iter()
            .find(|size| *size <= rest.len())
            .unwrap_or(1);
        let (chunk, tail) = rest.split_at(size);
        write(chunk)?;
        rest = tail;
    }
    Ok(())
}

/// Writes the balances and window counters of the accounts a batch changed.
fn store_charge_states(conn: &Connection, states: &[(i64, ChargeState)]) -> rusqlite::Result<()> {
    let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    in_chunks(states, |chunk| {
        let values = vec!["(?, ?, ?, ?, ?, ?, ?, ?)"; chunk.len()].join(", ");
        let sql = format!(
            "WITH v (id, balance, ms, mc, hs, hc, ds, dc) AS (VALUES {values})
             UPDATE accounts SET balance = v.balance, minute_start = v.ms, minute_count = v.mc,
                    hour_start = v.hs, hour_count = v.hc, day_start = v.ds, day_count = v.dc
             FROM v WHERE accounts.id = v.id"
        );
        let numbers: Vec<i64> = chunk
            .iter()
            .flat_map(|(id, state)| {
                let c = &state.counters;
                [
                    *id,
                    state.balance.get(),
                    c.minute.start,
                    n(c.minute.count),
                    c.hour.start,
                    n(c.hour.count),
                    c.day.start,
                    n(c.day.count),
                ]
            })
            .collect();
        conn.prepare_cached(&sql)?
            .execute(params_from_iter(numbers))?;
        Ok(())
    })
}

/// Appends `charge` rows: (account, at, amount, balance after, query count) and endpoint.
fn insert_charge_rows(
    conn: &Connection,
    rows: &[([i64; 5], &'static str)],
) -> rusqlite::Result<()> {
    in_chunks(rows, |chunk| {
        let values = vec!["(?, ?, 'charge', ?, ?, ?, ?)"; chunk.len()].join(", ");
        let sql = format!(
            "INSERT INTO ledger (account_id, at, kind, amount, balance_after, query_count, endpoint)
             VALUES {values}"
        );
        let mut params: Vec<&dyn ToSql> = Vec::with_capacity(chunk.len() * 6);
        for (numbers, endpoint) in chunk {
            params.extend(numbers.iter().map(|n| n as &dyn ToSql));
            params.push(endpoint);
        }
        conn.prepare_cached(&sql)?.execute(params.as_slice())?;
        Ok(())
    })
}
