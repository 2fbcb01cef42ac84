//! Benchmark of the books in memory (`billing`): charges per second decided by
//! concurrent tasks, each on a worker thread of its own (1 account, 1,000 accounts), in write-behind and durable mode, what
//! the flushes cost, and what a CLI command's announcement to the server costs (the
//! price of "a change holds from the next request").
//!
//! Run it with `bench/charge/run.sh [--seconds S] [--threads N] [--accounts N] [--dir DIR]`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use clap::Parser;
use postal::billing::{Billing, BillingOptions, notify};
use postal::db::{self, sqlite::accounts, sqlite::keys};
use postal::domain::admin::BalanceChange;
use postal::domain::api_key::hash_presented_key;
use postal::domain::charge::Caller;
use postal::domain::charge::Endpoint;
use postal::domain::money::Micros;

#[derive(Parser)]
struct Args {
    /// Seconds per scenario.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Tasks charging at once (one worker thread each).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Accounts in the second scenario.
    #[arg(long, default_value_t = 1000)]
    accounts: usize,
    /// Directory for the database file (a disk, not tmpfs, for honest fsyncs).
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir_in(&args.dir).context("creating the bench directory")?;
    let path = dir.path().join("bench.db");
    let callers = make_accounts(&path, args.accounts)?;
    let duration = Duration::from_secs_f64(args.seconds);
    println!(
        "{} threads, {} s per scenario, database {}",
        args.threads,
        args.seconds,
        path.display()
    );
    let many = format!("{} accounts", callers.len());
    for durable in [false, true] {
        for (label, accounts) in [("1 account", &callers[..1]), (many.as_str(), &callers[..])] {
            let options = BillingOptions {
                durable,
                ..BillingOptions::default()
            };
            let billing = Billing::start(&path, options)?;
            let (charges, elapsed) = run(&billing, accounts, args.threads, duration);
            billing.shutdown();
            let stats = billing.stats();
            let mode = if durable { "durable" } else { "write-behind" };
            println!(
                "{mode:12} {label:14}: {:>10.0} charges/s; {} flushes, {:.3} ms mean flush",
                charges as f64 / elapsed.as_secs_f64(),
                stats.flushes,
                stats.flush_busy.as_secs_f64() * 1000.0 / stats.flushes.max(1) as f64
            );
        }
    }
    announce_cost(&path, &callers)?;
    Ok(())
}

fn make_accounts(path: &Path, count: usize) -> anyhow::Result<Vec<Caller>> {
    let mut conn = db::open(path)?;
    let now = SystemTime::now();
    let thousand = BalanceChange::topup(Micros::parse_usd("1000")?)?;
    (0..count)
        .map(|_| {
            let account = accounts::create_account(&mut conn, None, now)?;
            accounts::change_balance(&mut conn, &account.account_id, &thousand, now)?;
            let hash = hash_presented_key(account.api_key.expose());
            keys::load_active(&conn)?
                .into_iter()
                .find_map(|k| (k.hash == hash).then_some(k.caller))
                .context("the new key authenticates")
        })
        .collect()
}

/// Each of `threads` tasks (on a runtime of as many worker threads, as `postal serve`
/// charges) charges 1 query in a loop, round robin over `accounts`; in durable mode each
/// waits for its commit, as a request would.
fn run(
    billing: &Billing,
    accounts: &[Caller],
    threads: usize,
    duration: Duration,
) -> (u64, Duration) {
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let accounts: Arc<Vec<Caller>> = Arc::new(accounts.to_vec());
    let durable = billing.options().durable;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_time()
        .build()
        .expect("a runtime");
    let started = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (billing, done, stop, accounts) = (
                billing.clone(),
                done.clone(),
                stop.clone(),
                accounts.clone(),
            );
            runtime.spawn(async move {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    let caller = accounts[i % accounts.len()];
                    i += 1;
                    if let Ok(charged) = billing.charge(caller, 1, Endpoint::Lookup).await {
                        if durable && billing.committed(&charged).await.is_err() {
                            continue;
                        }
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    runtime.block_on(async {
        for w in workers {
            let _ = w.await;
        }
    });
    (done.load(Ordering::Relaxed), started.elapsed())
}

/// A CLI top-up, with and without a server to announce it to (median of 50).
fn announce_cost(path: &Path, callers: &[Caller]) -> anyhow::Result<()> {
    let mut conn = db::open(path)?;
    let account = accounts::create_account(&mut conn, None, SystemTime::now())?;
    let five = BalanceChange::topup(Micros::parse_usd("5")?)?;
    let time_topups = |conn: &mut rusqlite::Connection| -> anyhow::Result<f64> {
        let mut times: Vec<f64> = (0..50)
            .map(|_| {
                let t = Instant::now();
                accounts::change_balance(conn, &account.account_id, &five, SystemTime::now())?;
                notify::announce(conn);
                Ok(t.elapsed().as_secs_f64() * 1000.0)
            })
            .collect::<anyhow::Result<_>>()?;
        times.sort_by(f64::total_cmp);
        Ok(times[times.len() / 2])
    };
    let alone = time_topups(&mut conn)?;
    let billing = Billing::start(path, BillingOptions::default())?;
    let listener = notify::Listener::start(path, billing.clone());
    let announced = time_topups(&mut conn)?;
    drop(listener);
    billing.shutdown();
    println!(
        "CLI top-up: {alone:.3} ms without a server, {announced:.3} ms announced to a server \
         holding {} accounts (reload included); 0 per request",
        callers.len() + 1
    );
    Ok(())
}
