//! Benchmark of the charging path (`db::billing`): charges per second and the wait of each
//! caller, with 64 concurrent async callers on one account and on 1,000 accounts. Every
//! charge is durable when answered (WAL, synchronous=FULL, on a real file).
//!
//! Run it with `bench/charge/run.sh [--seconds S] [--callers N] [--accounts N] [--dir DIR]`.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use clap::Parser;
use postal::db::{self, Billing, Caller, Charge, accounts};
use postal::domain::api_key::hash_presented_key;
use postal::domain::money::Micros;

#[derive(Parser)]
struct Args {
    /// Seconds per scenario.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Concurrent callers.
    #[arg(long, default_value_t = 64)]
    callers: usize,
    /// Tokio worker threads of the callers (the billing writer is one more thread).
    #[arg(long, default_value_t = 2)]
    workers: usize,
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
    println!(
        "database {} (WAL, synchronous=FULL), {} callers, {} s per scenario",
        path.display(),
        args.callers,
        args.seconds
    );
    let callers = make_accounts(&path, args.accounts)?;
    fsync_baseline(&path)?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.workers)
        .enable_all()
        .build()?;
    let duration = Duration::from_secs_f64(args.seconds);
    let many = format!("{} accounts", callers.len());
    for (label, accounts) in [("1 account", &callers[..1]), (many.as_str(), &callers[..])] {
        let billing = Billing::start(&path)?;
        let report = runtime.block_on(run(&billing, accounts, args.callers, duration));
        let stats = billing.stats();
        billing.shutdown();
        report.print(label, stats);
    }
    let mut conn = db::open(&path)?;
    let ledger = accounts::verify_ledger(&mut conn)?;
    println!(
        "ledger verify: {} accounts, {} entries, ok = {}",
        ledger.accounts,
        ledger.entries,
        ledger.mismatches.is_empty()
    );
    Ok(())
}

/// `count` accounts with 1,000 USD each (35.7 million queries).
fn make_accounts(path: &std::path::Path, count: usize) -> anyhow::Result<Vec<Caller>> {
    let mut conn = db::open(path)?;
    let now = SystemTime::now();
    let thousand = Micros::parse_usd("1000")?;
    (0..count)
        .map(|_| {
            let account = accounts::create_account(&mut conn, None, now)?;
            accounts::topup(&mut conn, &account.account_id, thousand, now)?;
            accounts::authenticate(&conn, &hash_presented_key(account.api_key.expose()))?
                .context("the new key authenticates")
        })
        .collect()
}

/// What one commit costs on this disk: one-row transactions, back to back.
fn fsync_baseline(path: &std::path::Path) -> anyhow::Result<()> {
    let conn = db::open(path)?;
    conn.execute_batch("CREATE TEMP TABLE IF NOT EXISTS t (x)")?;
    conn.execute_batch("CREATE TABLE IF NOT EXISTS bench_fsync (x INTEGER)")?;
    let start = Instant::now();
    let mut commits = 0;
    while start.elapsed() < Duration::from_secs(2) {
        conn.execute("INSERT INTO bench_fsync VALUES (?1)", [commits])?;
        commits += 1;
    }
    let per_sec = commits as f64 / start.elapsed().as_secs_f64();
    println!(
        "disk: {per_sec:.0} commits/s for one-row transactions ({:.3} ms per durable commit)",
        1000.0 / per_sec
    );
    Ok(())
}

struct Report {
    charges: u64,
    elapsed: Duration,
    waits: Vec<Duration>,
}

impl Report {
    fn print(mut self, label: &str, stats: db::BillingStats) {
        self.waits.sort();
        let quantile = |q: f64| {
            let i = ((self.waits.len() as f64 * q) as usize).min(self.waits.len() - 1);
            self.waits[i].as_secs_f64() * 1000.0
        };
        let secs = self.elapsed.as_secs_f64();
        println!(
            "{label:>14}: {:>8.0} charges/s | wait p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms | {:.0} commits/s, {:.1} charges per commit, {:.3} ms per commit, writer busy {:.0}%",
            self.charges as f64 / secs,
            quantile(0.50),
            quantile(0.99),
            self.waits.last().map_or(0.0, |w| w.as_secs_f64() * 1000.0),
            stats.transactions as f64 / secs,
            stats.charges as f64 / stats.transactions.max(1) as f64,
            stats.busy.as_secs_f64() * 1000.0 / stats.transactions.max(1) as f64,
            stats.busy.as_secs_f64() * 100.0 / secs,
        );
    }
}

/// `callers` tasks charge one query each, in a loop, for `duration`; caller i uses the
/// accounts i, i + callers, ... in turn.
async fn run(billing: &Billing, accounts: &[Caller], callers: usize, duration: Duration) -> Report {
    let start = Instant::now();
    let deadline = start + duration;
    let tasks: Vec<_> = (0..callers)
        .map(|i| {
            let billing = billing.clone();
            let mine: Vec<Caller> = accounts
                .iter()
                .copied()
                .skip(i % accounts.len())
                .step_by(callers)
                .collect();
            let mine = if mine.is_empty() {
                vec![accounts[0]]
            } else {
                mine
            };
            tokio::spawn(async move {
                let mut waits = Vec::with_capacity(1 << 16);
                let mut n = 0;
                while Instant::now() < deadline {
                    let caller = mine[n % mine.len()];
                    n += 1;
                    let asked = Instant::now();
                    let charge = Charge {
                        caller,
                        queries: 1,
                        endpoint: "/api/lookup",
                    };
                    match billing.charge(charge).await {
                        Ok(Ok(_)) => waits.push(asked.elapsed()),
                        other => panic!("charge failed: {other:?}"),
                    }
                }
                waits
            })
        })
        .collect();
    let mut waits = Vec::new();
    for task in tasks {
        waits.extend(task.await.expect("caller task"));
    }
    Report {
        charges: waits.len() as u64,
        elapsed: start.elapsed(),
        waits,
    }
}
