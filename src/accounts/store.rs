//! The account store the server opens once at start (issue 48): the file's connection
//! pool, or a pool of connections to the cluster's ledger, and a runtime of its own that
//! every dashboard operation and every call to an outside service (an identity provider,
//! Stripe) runs on.
//!
//! Why a runtime of its own: the API's runtime has a blocking pool the size of SQLite's
//! read pool (2 threads), which `/readyz`, the postal loader and a ledger host's name
//! lookup need. A dashboard call used to open a connection on one of those threads and
//! wait there for the ledger; a few dozen requests took both, and `/readyz` answered 503.
//! Here the store's work (SQLite calls that block, ledger calls that wait) and the outside
//! calls (blocking HTTP, bounded by their own timeout) have their own threads, so the API
//! never waits behind them; and how many run at once is bounded: beyond the bound a call
//! waits [`WAIT`] for its turn, then is answered 503 with `Retry-After`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::Semaphore;

use crate::billing::Billing;
use crate::db;
use crate::db::admin::AccountError;
use crate::db::pg::LedgerConfig;

use super::Admin;

/// Store operations at once: each holds a connection (and, on the file, a thread) while
/// it runs; the file's connections each keep a page cache, so few.
const STORE_CALLS: usize = 4;
/// Calls to outside services at once (each a blocking thread, idle, for up to
/// `OUTSIDE_TIMEOUT`).
const OUTSIDE_CALLS: usize = 32;
/// How long a call to a provider or Stripe may take in all (connect, send, answer).
pub const OUTSIDE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a call waits for its turn before it is answered 503: with the outside
/// timeout, a dashboard request answers within 10 s whatever a provider does.
pub const WAIT: Duration = Duration::from_secs(3);
/// Ledger connections: their connect and statement timeouts.
const LEDGER_CONNECT: Duration = Duration::from_secs(5);
const LEDGER_STATEMENT: Duration = Duration::from_secs(10);

/// The account store and the threads the customer's side runs on.
pub struct Accounts {
    /// Dropped without waiting (`shutdown_background`): a call in flight at shutdown ends
    /// with the process.
    runtime: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    source: Source,
    store_calls: Arc<Semaphore>,
    outside_calls: Arc<Semaphore>,
    /// This server's books, which count the store's calls (`/metrics`).
    books: Billing,
    /// Wakes the alerts' sender (`wake_sender`).
    sender_wake: Arc<tokio::sync::Notify>,
}

#[derive(Clone)]
enum Source {
    /// The file, and the books of this server, told of each change directly.
    File {
        pool: db::Pool,
        books: Billing,
    },
    Ledger(deadpool_postgres::Pool),
}

/// Why an account call did not run, or what it refused.
#[derive(Debug)]
pub enum Failed {
    /// Every slot was taken for [`WAIT`]: try again later (503 with `Retry-After`).
    Busy,
    Account(AccountError),
}

impl From<AccountError> for Failed {
    fn from(e: AccountError) -> Failed {
        Failed::Account(e)
    }
}

impl Accounts {
    /// Opens the store: the file at `db` (its server's `books` told of changes), or with
    /// `ledger` a pool of connections to it (connected lazily, on the store's runtime).
    pub fn open(
        db: &std::path::Path,
        ledger: Option<&LedgerConfig>,
        books: Billing,
    ) -> anyhow::Result<Accounts> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(STORE_CALLS)
            .max_blocking_threads(OUTSIDE_CALLS)
            .thread_name("postal-accounts")
            .enable_all()
            .build()
            .context("starting the account store's runtime")?;
        let source = match ledger {
            Some(ledger) => Source::Ledger(db::pg::pool(
                ledger,
                STORE_CALLS,
                LEDGER_CONNECT,
                WAIT,
                LEDGER_STATEMENT,
            )?),
            None => Source::File {
                pool: db::pool_on_demand(db, STORE_CALLS as u32)?,
                books: books.clone(),
            },
        };
        Ok(Accounts {
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
            source,
            store_calls: Arc::new(Semaphore::new(STORE_CALLS)),
            outside_calls: Arc::new(Semaphore::new(OUTSIDE_CALLS)),
            books,
            sender_wake: Arc::default(),
        })
    }

    /// Runs `work` with the admin interface acting as `actor`, on the store's runtime,
    /// with a connection lent by the pool.
    pub async fn run<T, F, Fut>(&self, actor: String, work: F) -> Result<T, Failed>
    where
        T: Send + 'static,
        F: FnOnce(Admin) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, AccountError>> + Send + 'static,
    {
        self.books.count_account_call();
        let permit = turn(&self.store_calls).await?;
        let source = self.source.clone();
        let task = self.handle.spawn(async move {
            let _permit = permit;
            let admin = source.admin(&actor).await?;
            work(admin).await
        });
        task.await
            .map_err(|e| AccountError::Unexpected(e.into()))?
            .map_err(Failed::Account)
    }

    /// Runs `call` (a blocking call to an outside service, bounded by its own timeout) on
    /// the store's blocking threads.
    pub async fn outside<T, F>(&self, call: F) -> Result<T, Failed>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let permit = turn(&self.outside_calls).await?;
        self.handle
            .spawn_blocking(move || {
                let _permit = permit;
                call()
            })
            .await
            .map_err(|e| Failed::Account(AccountError::Unexpected(e.into())))
    }
}

impl Accounts {
    /// Starts the alerts' sender on the store's runtime (it stops with the store).
    pub fn start_sender(&self, options: crate::accounts::sender::SenderOptions) {
        let opener = Opener(self.source.clone());
        self.handle.spawn(crate::accounts::sender::run(
            opener,
            options,
            self.sender_wake.clone(),
        ));
    }

    /// Makes the sender look for due deliveries now (a change that may have made some).
    pub fn wake_sender(&self) {
        self.sender_wake.notify_one();
    }
}

/// The sender's way to the store, as the alerts' sender names its changes.
#[derive(Clone)]
struct Opener(Source);

/// Who the sender's records are, for the audit log (it writes none).
const SENDER: &str = "alerts (sender)";

impl crate::accounts::sender::Opener for Opener {
    async fn admin(&self) -> Result<Admin, AccountError> {
        self.0.admin(SENDER).await
    }
}

impl Drop for Accounts {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// A slot of `slots`, waited for at most [`WAIT`].
async fn turn(slots: &Arc<Semaphore>) -> Result<tokio::sync::OwnedSemaphorePermit, Failed> {
    match tokio::time::timeout(WAIT, slots.clone().acquire_owned()).await {
        Ok(Ok(permit)) => Ok(permit),
        _ => Err(Failed::Busy),
    }
}

impl Source {
    async fn admin(&self, actor: &str) -> Result<Admin, AccountError> {
        Ok(match self {
            Source::File { pool, books } => {
                let conn = pool
                    .get()
                    .context("a connection to the file")
                    .map_err(AccountError::Unexpected)?;
                Admin::on_file(Box::new(conn), actor, Some(books.clone()))
            }
            Source::Ledger(pool) => {
                let client = pool
                    .get()
                    .await
                    .context("a connection to the ledger")
                    .map_err(AccountError::Unexpected)?;
                Admin::on_ledger(Box::new(db::pg::Pooled(client)), actor, true)
            }
        })
    }
}
