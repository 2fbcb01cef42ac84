//! The writer thread: flushes the books' pending charges through the `ChargeStore` every
//! interval (at once in durable mode), retries a failing flush, answers reload and grant
//! requests and the other calls of requests to the store, purges expired idempotent
//! answers, and flushes what is left on stop.

use std::collections::BTreeMap;

use super::books::Short;
use super::books::WindowShort;
use super::*;
use crate::domain::rate_limit::WindowKey;

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

/// Forgets the idempotency keys no longer replayable and the rolled keys past their grace
/// (`Books::expire`), and deletes the answers from the store (at most `db::sqlite::idempotency::PURGE_ROWS`); how long until the next purge: at once
/// when that bound was reached.
fn purge_answers(store: &mut dyn ChargeStore, shared: &Shared) -> Duration {
    let now = SystemTime::now();
    lock(&shared.books).expire(now);
    let before = now
        .checked_sub(ANSWER_TTL + PURGE_GRACE)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    match store.purge_answers(before) {
        Ok(deleted) if deleted >= crate::db::sqlite::idempotency::PURGE_ROWS => Duration::ZERO,
        Ok(_) => PURGE_EVERY,
        Err(e) => {
            tracing::error!("deleting expired idempotent answers: {e:#}");
            PURGE_EVERY
        }
    }
}

/// Asks the store for the slices a request short of room in limited windows waits for
/// (the windows it is still short of when asked); `Full` for the first window (shortest
/// first) that could not be covered. A request needing as much of a window the ledger
/// refused in this turn gets the same answer unasked (`full`).
fn answer_slices(
    store: &mut dyn ChargeStore,
    shared: &Shared,
    account_id: i64,
    short: &WindowShort,
    full: &mut FastMap<(i64, WindowKey), (u64, bool)>,
) -> Result<Granted, String> {
    let asks = {
        let books = lock(&shared.books);
        if let Some(why) = books.failing() {
            return Err(why.to_owned());
        }
        books.slice_asks(account_id, short)
    };
    // An ask of a window that has ended since (a request decided at its last instant) is
    // not sent: the request is decided again, in the window of now. A slice of an older
    // window would also move this node's slice of the current one back in the ledger.
    let now = SystemTime::now();
    if asks.is_empty()
        || asks
            .iter()
            .any(|a| a.window.start != a.window.window.start(now))
    {
        return Ok(Granted::More);
    }
    for ask in &asks {
        if let Some((need, elsewhere)) = full.get(&(account_id, ask.window))
            && ask.need >= *need
        {
            return Ok(Granted::Full {
                window: ask.window.window,
                elsewhere: *elsewhere,
            });
        }
    }
    let sent = BootTime::now();
    let held = match store.slices(account_id, &asks) {
        Ok(held) => held,
        Err(e) => {
            tracing::error!("asking the ledger for a window slice: {e:#}");
            return Err("the ledger cannot be reached".to_string());
        }
    };
    let mut books = lock(&shared.books);
    books.sync_slices_of(account_id, &held, sent, true);
    books.slices_granted(account_id, &asks, sent);
    for (ask, h) in asks.iter().zip(&held) {
        let usable = books.slice_usable(account_id, ask.window, sent);
        if usable < short.queries {
            full.insert((account_id, ask.window), (ask.need, h.elsewhere));
            return Ok(Granted::Full {
                window: ask.window.window,
                elsewhere: h.elsewhere,
            });
        }
    }
    Ok(Granted::More)
}

/// Asks the store for the grants requests are waiting for (with grants only), one
/// account at a time; a request whose grant another one's already covers is answered
/// without asking.
fn answer_grants(store: &mut dyn ChargeStore, shared: &Shared, requests: Vec<GrantRequest>) {
    let mut full: FastMap<(i64, WindowKey), (u64, bool)> = FastMap::default();
    // Requests short of money: those the grants already cover are answered at once; the
    // rest wait for one call to the ledger for all their accounts (one transaction, one
    // commit per writer turn, however many accounts ran short).
    let mut waiting: Vec<(GrantRequest, Short, Micros)> = Vec::new();
    let mut asks: BTreeMap<i64, (Micros, Micros)> = BTreeMap::new();
    for request in requests {
        let short = match request.ask {
            Ask::Money(short) => short,
            Ask::Windows(short) => {
                let answer = answer_slices(store, shared, request.account_id, &short, &mut full);
                let _ = request.reply.send(answer);
                continue;
            }
        };
        let books = lock(&shared.books);
        if let Some(why) = books.failing() {
            let _ = request.reply.send(Err(why.to_owned()));
            continue;
        }
        let usable = books.usable_grant(request.account_id, BootTime::now());
        drop(books);
        if usable >= short.cost {
            let _ = request.reply.send(Ok(Granted::More));
            continue;
        }
        // What is still missing now (other requests may have spent some of the grant).
        let need = short.cost.checked_sub(usable).unwrap_or(Micros::ZERO);
        let ask = asks
            .entry(request.account_id)
            .or_insert((Micros::ZERO, Micros::ZERO));
        *ask = (ask.0.max(need), ask.1.max(short.want).max(need));
        waiting.push((request, short, usable));
    }
    if asks.is_empty() {
        return;
    }
    let asks: Vec<(i64, Micros, Micros)> = asks
        .into_iter()
        .map(|(id, (need, want))| (id, need, want))
        .collect();
    shared
        .counts
        .grant_requests
        .fetch_add(asks.len() as u64, Ordering::Relaxed);
    let sent = BootTime::now();
    let grants = match store.grants(&asks) {
        Ok(grants) => grants,
        Err(e) => {
            tracing::error!("asking the ledger for grants: {e:#}");
            for (request, _, _) in waiting {
                let _ = request
                    .reply
                    .send(Err("the ledger cannot be reached".to_string()));
            }
            return;
        }
    };
    let mut books = lock(&shared.books);
    let mut elsewhere: FastMap<i64, bool> = FastMap::default();
    for grant in grants {
        books.take_grant(grant, sent);
        elsewhere.insert(grant.account_id, grant.elsewhere > Micros::ZERO);
    }
    for (request, short, before) in waiting {
        let after = books.usable_grant(request.account_id, sent);
        let answer = if after > before || after >= short.cost {
            Granted::More
        } else {
            Granted::Nothing {
                elsewhere: elsewhere.get(&request.account_id).copied().unwrap_or(false),
            }
        };
        let _ = request.reply.send(Ok(answer));
    }
}

pub(super) fn run_writer(mut store: Box<dyn ChargeStore>, shared: &Shared) {
    let options = shared.options;
    let mut retry = options.flush_interval;
    let mut stop_deadline: Option<Instant> = None;
    // The first purge at once: answers may have expired while no server ran.
    let mut next_purge = Instant::now();
    loop {
        // Wait for the interval (write-behind) or for charges (durable), a reload
        // request or stop.
        let (grants, calls, batch, reloads, stopping) = {
            let mut books = lock(&shared.books);
            let pause = if books.failing().is_some() {
                retry
            } else {
                options.flush_interval
            };
            let until = Instant::now() + pause;
            loop {
                if books.writer_has_work(options.durable) {
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
            let (reloads, grants, calls) = books.take_requests();
            // Everything pending goes in this turn's batch on stop, in durable mode, and
            // for a reload request (`flush_now` waits for it); otherwise, with grants, only
            // what is due (`Books::flush_due`).
            let all = books.stopping() || options.durable || !reloads.is_empty();
            let batch = books.next_batch(all);
            (grants, calls, batch, reloads, books.stopping())
        };

        answer_grants(store.as_mut(), shared, grants);
        for call in calls {
            call(store.as_mut());
        }

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
                    counts
                        .handbacks
                        .fetch_add(batch.returns.len() as u64, Ordering::Relaxed);
                    counts.flush_busy_nanos.fetch_add(took, Ordering::Relaxed);
                    counts.last_flush_nanos.store(took, Ordering::Relaxed);
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap_or_default();
                    counts
                        .last_commit_unix_micros
                        .store(now.as_micros() as u64, Ordering::Relaxed);
                    let recovered = lock(&shared.books).flushed(&batch, &applied, sent);
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
                    let waiting = lock(&shared.books).flush_failed(batch);
                    for request in waiting {
                        let _ = request
                            .reply
                            .send(Err("the ledger cannot be written".into()));
                    }
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
        shared
            .counts
            .recalls
            .fetch_add(recalls.len() as u64, Ordering::Relaxed);
        if !recalls.is_empty() {
            let mut books = lock(&shared.books);
            for id in recalls {
                books.recalled(id);
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
