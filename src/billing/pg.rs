//! The `ChargeStore` of cluster mode (docs/cluster.md): the PostgreSQL ledger shared by
//! every node. The node charges in memory against grants (`Leasing::Grants`); this store
//! asks for them, flushes numbered batches (a batch whose COMMIT answer was lost is
//! retried unchanged and applied once: `db::pg::node::flush`), reads the version of
//! accounts and keys at each flush and every `POLL` besides, sweeps expired grants, and
//! listens for changes and recalls on a dedicated connection of its own thread, which it
//! reconnects. The SQL is `db::pg`'s.
//!
//! The trait is synchronous (the writer is a thread): the store drives its connection on
//! a current-thread runtime of its own, every call bounded by `CALL_TIMEOUT` so that a
//! ledger that stopped answering turns into failed flushes (503), not a stuck writer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use tokio_postgres::{AsyncMessage, Client};

use super::lease::LEASE_TTL;
use super::store::{Applied, Batch, ChargeStore, Grant, Leasing, Snapshot};
use crate::db::pg::{self, LedgerConfig, RECALL_CHANNEL, idempotency, node, windows};
use crate::db::rows::{AnswerIndex, Holder, KeyClaim};
use crate::domain::grant::{SliceAsk, SliceHeld, WindowQueries};
use crate::domain::idempotency::IdempotencyKey;
use crate::domain::money::Micros;

/// The longest a call to the ledger may take (the design's flush_timeout). 1 s was too
/// short on two saturated cores: PostgreSQL's COMMITs were seen taking 0.9-2.8 s there.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// The server aborts a statement of the writer's after this, before the call gives up on
/// it: a call that timed out cannot commit later (a claim of an idempotency key committed
/// after its release was sent would hold the key on every other node).
const STATEMENT_TIMEOUT: Duration = Duration::from_millis(1_800);
/// How often an idle node reads the version (and beats its heart).
const POLL: Duration = Duration::from_millis(250);
/// How long the listener waits before it reconnects.
const RECONNECT: Duration = Duration::from_millis(500);

/// What the listener thread tells the store.
#[derive(Default)]
struct Heard {
    /// A change was notified, or the listener (re)connected and may have missed one.
    changed: AtomicBool,
    /// Accounts other nodes asked this node's grants of.
    recalls: Mutex<Vec<i64>>,
    stop: AtomicBool,
}

/// The ledger in PostgreSQL, as one node sees it.
pub struct PgStore {
    runtime: tokio::runtime::Runtime,
    ledger: LedgerConfig,
    client: Option<Client>,
    /// The task driving `client`'s connection (aborted with a call that timed out).
    connection: Option<tokio::task::JoinHandle<()>>,
    node_id: i64,
    /// The version of accounts and keys the books hold (the last `load`), and the newest
    /// the ledger showed.
    loaded: i64,
    latest: i64,
    last_poll: Instant,
    last_sweep: Instant,
    heard: Arc<Heard>,
    listener: Option<JoinHandle<()>>,
}

impl PgStore {
    /// Connects to the ledger, migrates its schema, registers this process as a
    /// new node (a random id: a restart is a new node) and starts the listener.
    pub fn open(ledger: &LedgerConfig) -> anyhow::Result<PgStore> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the ledger's runtime")?;
        let node_id = i64::try_from(rand::random::<u64>() >> 1).unwrap_or(1);
        let heard = Arc::new(Heard::default());
        let mut store = PgStore {
            runtime,
            ledger: ledger.clone(),
            client: None,
            connection: None,
            node_id,
            loaded: 0,
            latest: 0,
            last_poll: Instant::now(),
            last_sweep: Instant::now(),
            heard: heard.clone(),
            listener: None,
        };
        let (mut client, connection) = store.runtime.block_on(pg::connect_task(ledger))?;
        store.connection = Some(connection);
        store.runtime.block_on(pg::migrate(&mut client))?;
        store.runtime.block_on(node::register(&client, node_id))?;
        store
            .runtime
            .block_on(pg::bound_statements(&client, STATEMENT_TIMEOUT))?;
        store.client = Some(client);
        store.listener = Some(
            thread::Builder::new()
                .name("postal-ledger-listen".into())
                .spawn({
                    let ledger = ledger.clone();
                    move || listen(&ledger, node_id, &heard)
                })
                .context("starting the ledger listener")?,
        );
        tracing::info!(
            "cluster mode: node {node_id} on the ledger {ledger} ({:?})",
            ledger.security()
        );
        Ok(store)
    }

    /// Runs `call` on the connection (reconnecting first when it was lost), within
    /// `CALL_TIMEOUT`; a call that timed out drops the connection, whose state is unknown.
    fn call<T>(
        &mut self,
        call: impl AsyncFnOnce(&mut Client, i64) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.drop_connection();
            let (client, connection) = self.runtime.block_on(async {
                tokio::time::timeout(CALL_TIMEOUT, pg::connect_task(&self.ledger))
                    .await
                    .map_err(|_| anyhow::anyhow!("connecting to the ledger timed out"))?
            })?;
            self.connection = Some(connection);
            self.runtime
                .block_on(node::register(&client, self.node_id))?;
            self.runtime
                .block_on(pg::bound_statements(&client, STATEMENT_TIMEOUT))?;
            self.client = Some(client);
        }
        let node_id = self.node_id;
        let Some(client) = self.client.as_mut() else {
            anyhow::bail!("no connection to the ledger");
        };
        let answer = self
            .runtime
            .block_on(async { tokio::time::timeout(CALL_TIMEOUT, call(client, node_id)).await });
        match answer {
            Ok(answer) => answer,
            Err(_) => {
                self.drop_connection();
                anyhow::bail!("the ledger did not answer within {CALL_TIMEOUT:?}")
            }
        }
    }

    /// Drops the connection and closes its socket now: a transaction the server still
    /// has open on it (a call that timed out) is rolled back at once, its locks with it,
    /// instead of when the dropped connection's task next runs.
    fn drop_connection(&mut self) {
        self.client = None;
        if let Some(connection) = self.connection.take() {
            connection.abort();
            let _ = self.runtime.block_on(connection);
        }
    }

    fn snapshot(&mut self) -> anyhow::Result<Snapshot> {
        let (version, accounts, keys) = self.call(async |client, _| node::load(client).await)?;
        self.loaded = version;
        self.latest = self.latest.max(version);
        Ok(Snapshot { accounts, keys })
    }
}

impl ChargeStore for PgStore {
    fn load(&mut self) -> anyhow::Result<Snapshot> {
        let snapshot = self.snapshot()?;
        // The books are not serving yet: they hold this version from the start.
        let version = self.loaded;
        self.call(async |client, node_id| node::acknowledge(client, node_id, version).await)?;
        Ok(snapshot)
    }

    fn load_answers(&mut self, since: SystemTime) -> anyhow::Result<Vec<AnswerIndex>> {
        self.call(async |client, _| idempotency::load_answers(client, since).await)
    }

    fn leasing(&self) -> Leasing {
        Leasing::Grants
    }

    fn grant(&mut self, account_id: i64, need: Micros, want: Micros) -> anyhow::Result<Grant> {
        self.grants(&[(account_id, need, want)])?
            .pop()
            .context("the ledger answered no grant")
    }

    fn grants(&mut self, asks: &[(i64, Micros, Micros)]) -> anyhow::Result<Vec<Grant>> {
        let grants = self
            .call(async |client, node_id| node::grants(client, node_id, asks, LEASE_TTL).await)?;
        Ok(grants
            .into_iter()
            .map(|grant| Grant {
                account_id: grant.account_id,
                remaining: grant.remaining,
                balance: grant.balance,
                elsewhere: grant.elsewhere,
            })
            .collect())
    }

    fn slices(&mut self, account_id: i64, asks: &[SliceAsk]) -> anyhow::Result<Vec<SliceHeld>> {
        self.call(async |client, node_id| {
            windows::slices(client, node_id, account_id, asks, LEASE_TTL).await
        })
    }

    fn load_counts(&mut self) -> anyhow::Result<Vec<WindowQueries>> {
        self.call(async |client, _| windows::load_counts(client).await)
    }

    fn apply(&mut self, batch: &Batch) -> anyhow::Result<Applied> {
        let flushed = self.call(async |client, node_id| {
            node::flush_with_windows(
                client,
                &node::Flush {
                    node_id,
                    number: batch.number,
                    at: batch.at,
                    charges: &batch.charges,
                    returns: &batch.returns,
                    topups: &batch.topups,
                    answers: &batch.answers,
                    released: &batch.released,
                    ttl: LEASE_TTL,
                },
                &windows::WindowFlush {
                    admitted: &batch.admitted,
                    returns: &batch.slice_returns,
                },
            )
            .await
        })?;
        if flushed.replayed {
            tracing::warn!(
                "flush {} had been applied already (its commit's answer was lost): not applied again",
                batch.number
            );
        }
        self.latest = self.latest.max(flushed.version);
        if !batch.empties.is_empty() {
            // After the flush (a replayed one too: the arming makes a note once), each in
            // a transaction of its own: a 402 changes no row of the flush. Each locks its
            // account row before its settings, in the flush's order (accounts, then the
            // triggers' settings), so it cannot deadlock with another node's flush; an
            // error loses that account's `balance.empty`, never a charge.
            let at = crate::db::rows::unix_secs(batch.at);
            for (account, balance) in &batch.empties {
                let noted = self.call(async |client, _| {
                    crate::db::pg::alerts::note_empty(client, *account, balance.get(), at).await
                });
                if let Err(e) = noted {
                    tracing::error!("deciding balance.empty of account {account}: {e:#}");
                }
            }
        }
        Ok(Applied {
            grants: flushed
                .grants
                .into_iter()
                .map(|g| Grant {
                    account_id: g.account_id,
                    remaining: g.remaining,
                    balance: g.balance,
                    elsewhere: g.elsewhere,
                })
                .collect(),
            touched: flushed.touched,
            version: Some(flushed.version),
            slices: flushed.windows.slices,
            counts: flushed.windows.counts,
        })
    }

    fn claim_key(&mut self, claim: &KeyClaim) -> anyhow::Result<Holder> {
        self.call(async |client, node_id| idempotency::claim(client, node_id, claim).await)
    }

    fn answer_body(
        &mut self,
        account_id: i64,
        key: &IdempotencyKey,
    ) -> anyhow::Result<Option<Arc<[u8]>>> {
        self.call(async |client, _| idempotency::answer_body(client, account_id, key).await)
    }

    fn purge_answers(&mut self, before: SystemTime) -> anyhow::Result<usize> {
        self.call(async |client, _| idempotency::purge_answers(client, before).await)
    }

    fn changes(&mut self) -> anyhow::Result<Option<Snapshot>> {
        let notified = self.heard.changed.swap(false, Ordering::AcqRel);
        if notified || self.last_poll.elapsed() >= POLL {
            self.last_poll = Instant::now();
            let version = self.call(async |client, node_id| node::heartbeat(client, node_id).await);
            match version {
                Ok(version) => self.latest = self.latest.max(version),
                Err(e) => {
                    if notified {
                        self.heard.changed.store(true, Ordering::Release);
                    }
                    return Err(e);
                }
            }
        }
        if self.last_sweep.elapsed() >= LEASE_TTL {
            self.last_sweep = Instant::now();
            match self.call(async |client, _| node::sweep(client).await) {
                Ok(0) => {}
                Ok(swept) => tracing::info!("{swept} expired grants returned to their balances"),
                Err(e) => tracing::warn!("sweeping expired grants: {e:#}"),
            }
            let now = crate::db::rows::unix_secs(SystemTime::now());
            if let Err(e) = self.call(async |client, _| windows::sweep(client, now).await) {
                tracing::warn!("sweeping expired window slices: {e:#}");
            }
        }
        if self.latest > self.loaded {
            return self.snapshot().map(Some);
        }
        Ok(None)
    }

    fn reloaded(&mut self) -> anyhow::Result<()> {
        let version = self.loaded;
        self.call(async |client, node_id| node::acknowledge(client, node_id, version).await)
    }

    fn node_id(&self) -> Option<i64> {
        Some(self.node_id)
    }

    fn recalls(&mut self) -> Vec<i64> {
        std::mem::take(&mut *self.heard.recalls.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn close(&mut self) -> anyhow::Result<()> {
        self.heard.stop.store(true, Ordering::Release);
        if let Some(listener) = self.listener.take() {
            let _ = listener.join();
        }
        self.call(async |client, node_id| windows::close(client, node_id).await)?;
        self.call(async |client, node_id| node::close(client, node_id).await)
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.heard.stop.store(true, Ordering::Release);
    }
}

/// The listener thread: one connection that LISTENs for changes and recalls, reconnected
/// after any failure. After each (re)connection it reports a change, so that the store
/// reads the version and catches what was notified while it was away (LISTEN first, then
/// the version: nothing falls between).
fn listen(ledger: &LedgerConfig, node_id: i64, heard: &Heard) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!("the ledger listener cannot start: {e}");
            return;
        }
    };
    while !heard.stop.load(Ordering::Acquire) {
        if let Err(e) = runtime.block_on(listen_once(ledger, node_id, heard)) {
            tracing::warn!("ledger listener: {e:#}; reconnecting");
        }
        heard.changed.store(true, Ordering::Release);
        let until = Instant::now() + RECONNECT;
        while Instant::now() < until && !heard.stop.load(Ordering::Acquire) {
            thread::sleep(Duration::from_millis(50));
        }
    }
}

async fn listen_once(ledger: &LedgerConfig, node_id: i64, heard: &Heard) -> anyhow::Result<()> {
    let (client, mut connection) = tokio::time::timeout(CALL_TIMEOUT, pg::open(ledger))
        .await
        .map_err(|_| anyhow::anyhow!("connecting timed out"))??;
    let (sender, mut notifications) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = std::pin::pin!(futures_util::stream::poll_fn(move |cx| {
            connection.poll_message(cx)
        }));
        use futures_util::StreamExt;
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if sender.send(n).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    });
    pg::listen(&client).await?;
    heard.changed.store(true, Ordering::Release);
    loop {
        tokio::select! {
            notification = notifications.recv() => {
                let Some(n) = notification else { break };
                if n.channel() == RECALL_CHANNEL {
                    let mut parts = n.payload().split(':');
                    let account = parts.next().and_then(|a| a.parse::<i64>().ok());
                    let asker = parts.next().and_then(|a| a.parse::<i64>().ok());
                    if let Some(account) = account && asker != Some(node_id) {
                        heard.recalls.lock().unwrap_or_else(|p| p.into_inner()).push(account);
                    }
                } else {
                    heard.changed.store(true, Ordering::Release);
                }
            }
            () = tokio::time::sleep(Duration::from_millis(100)) => {
                if heard.stop.load(Ordering::Acquire) {
                    break;
                }
            }
        }
    }
    drop(client);
    match driver.await {
        Ok(Err(e)) => Err(e.into()),
        _ => Ok(()),
    }
}
