//! The loader: the one thread that builds the in-memory dataset, swaps in a new one when
//! `postal-import` commits, and frees the old one once no request holds it.

use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::postal::PostalIndex;
use crate::db;

/// How often the server looks for a dataset committed by `postal-import`.
const DATASET_CHECK: Duration = Duration::from_secs(1);

/// The dataset's slot: requests clone the `Arc` inside; a reload swaps it.
pub type Slot = Arc<RwLock<Arc<PostalIndex>>>;

/// Starts the `postal-loader` thread: it loads the dataset, hands it over, then every
/// `DATASET_CHECK` reads the file's dataset generation and, when an import has committed
/// a new one, loads that and swaps it in. Until then the old data answers, as a reader
/// of the file would see it before the commit. The thread ends with the server (when the
/// returned sender is dropped).
///
/// Why one thread of its own, not the runtime's blocking pool: an index is a few large
/// allocations, and mimalloc returns a block freed by another thread only when the
/// thread that allocated it next runs the allocator. With loads and frees on whatever
/// blocking thread came, the old index often stayed in RSS after a reload (RSS 1.14 to
/// 1.45x the first load after five imports, `bench/import-under-load.sh`). Here the same
/// thread allocates every index and frees it, once the last request using it has ended,
/// then hands the pages back (`release_freed_memory`).
///
/// `preloaded`: a dataset already in memory, shared with others (the tests start many
/// servers on copies of one database and load it once). It is used when the file holds
/// the same generation, else the file's is loaded; once a new dataset replaces it, it is
/// let go at once (it is not this thread's to free).
pub async fn start(
    db_path: &Path,
    preloaded: Option<Arc<PostalIndex>>,
) -> Result<(Slot, std::sync::mpsc::SyncSender<()>, FileCheck)> {
    let pool = db::pool(db_path, READ_POOL_SIZE)?;
    let check = FileCheck(pool.clone());
    let (first, loaded) = tokio::sync::oneshot::channel();
    let (keep, stop) = std::sync::mpsc::sync_channel::<()>(0);
    std::thread::Builder::new()
        .name("postal-loader".into())
        .spawn(move || {
            // (the index, whether it is the preloaded one)
            let index = pool
                .get()
                .map_err(anyhow::Error::from)
                .and_then(|conn| match preloaded {
                    Some(shared)
                        if PostalIndex::generation(&conn)? == shared.loaded_generation() =>
                    {
                        Ok((shared, true))
                    }
                    _ => PostalIndex::load(&conn).map(|index| (Arc::new(index), false)),
                });
            // A weak reference keeps the preloaded index's allocation (not its data), so
            // no later index can come to the same address.
            let shared = match &index {
                Ok((index, true)) => Some(Arc::downgrade(index)),
                _ => None,
            };
            let slot = match index {
                Ok((index, _)) => Arc::new(RwLock::new(index)),
                Err(e) => {
                    let _ = first.send(Err(e));
                    return;
                }
            };
            let watched = Arc::downgrade(&slot);
            if first.send(Ok(slot)).is_err() {
                return;
            }
            loop {
                if let Err(std::sync::mpsc::RecvTimeoutError::Disconnected) =
                    stop.recv_timeout(DATASET_CHECK)
                {
                    return;
                }
                let Some(slot) = watched.upgrade() else {
                    return;
                };
                // A panic must not end the reloads for good: log it, try again later.
                let tried = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    reload(&slot, &pool, shared.as_ref())
                }));
                match tried {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => tracing::error!("reloading the dataset: {e:#}"),
                    Err(_) => tracing::error!("reloading the dataset: the loader panicked"),
                }
            }
        })
        .context("starting the dataset loader thread")?;
    let slot = loaded
        .await
        .context("the dataset loader thread stopped")?
        .context("loading the postal data")?;
    Ok((slot, keep, check))
}

/// Requests hold the index for one answer; longer than this is worth a warning.
const OLD_INDEX_HELD: Duration = Duration::from_secs(10);

/// One look at the file's dataset generation, and the reload when it changed. `shared`:
/// the first dataset, when it came preloaded (`start`).
fn reload(
    slot: &Slot,
    pool: &db::Pool,
    shared: Option<&std::sync::Weak<PostalIndex>>,
) -> Result<()> {
    let loaded = current(slot).loaded_generation();
    let conn = pool.get()?;
    if PostalIndex::generation(&conn)? == loaded {
        return Ok(());
    }
    let index = PostalIndex::load(&conn)?;
    drop(conn);
    tracing::info!("new dataset loaded: {:?}", index.coverage());
    let mut old = match slot.write() {
        Ok(mut slot) => std::mem::replace(&mut *slot, Arc::new(index)),
        Err(poisoned) => std::mem::replace(&mut *poisoned.into_inner(), Arc::new(index)),
    };
    if shared.is_some_and(|shared| std::ptr::eq(shared.as_ptr(), Arc::as_ptr(&old))) {
        drop(old);
        after_reload(pool);
        return Ok(());
    }
    // Freed here once the requests that took it have ended (they hold it for one answer).
    // Something holding it far longer keeps both indexes in memory and the reloads waiting:
    // said once, not silently.
    let swapped = Instant::now();
    let mut said = false;
    loop {
        match Arc::try_unwrap(old) {
            Ok(index) => break drop(index),
            Err(shared) => {
                old = shared;
                if !said && swapped.elapsed() >= OLD_INDEX_HELD {
                    tracing::warn!(
                        "the previous dataset is still in use {OLD_INDEX_HELD:?} after the \
                         reload: it stays in memory, and reloads wait, until it is released"
                    );
                    said = true;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    crate::alloc::release_freed_memory();
    after_reload(pool);
    Ok(())
}

/// The dataset as it is now.
pub fn current(slot: &Slot) -> Arc<PostalIndex> {
    match slot.read() {
        Ok(index) => index.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    }
}

/// Connections of the pool for what reads the file beside the index: this loader's
/// thread and the readiness check (`FileCheck`, on a blocking thread of the runtime:
/// `postal serve` gives it as many). A check that hangs holds its thread until it ends;
/// the next one waits, and after its patience says the database does not answer.
pub const READ_POOL_SIZE: u32 = 2;

/// Reads the file the index comes from (`/readyz`: does it answer?).
#[derive(Clone)]
pub struct FileCheck(db::Pool);

impl FileCheck {
    /// Reads the dataset's coverage from the file: blocking, an error when it cannot.
    pub fn read(&self) -> Result<()> {
        let conn = self.0.get()?;
        db::postal::coverage(&conn)?;
        Ok(())
    }
}

/// After a reload: empties the WAL the import left (hundreds of MB), which no checkpoint
/// could do while the reload's read transaction was open (`db::truncate_wal`; the import
/// tries too, but may be done before the server has reloaded).
fn after_reload(pool: &db::Pool) {
    for _ in 0..50 {
        match pool
            .get()
            .map_err(anyhow::Error::from)
            .and_then(|conn| db::truncate_wal(&conn, Duration::from_millis(20)))
        {
            Ok(true) => return,
            Ok(false) => std::thread::sleep(Duration::from_millis(200)),
            Err(e) => return tracing::warn!("emptying the WAL after a reload: {e:#}"),
        }
    }
}
