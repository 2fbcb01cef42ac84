//! `postal`: serve the API and administer accounts, keys and the ledger (cli.md).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Context;
use clap::{Parser, Subcommand};
use serde::Serialize;
use serde_json::Number;

use postal::db::accounts::{AccountError, LimitsChange};
use postal::db::{self, accounts};
use postal::domain::money::{AmountError, Micros};
use postal::domain::rate_limit::Limits;

#[derive(Parser)]
#[command(
    name = "postal",
    version,
    about = "Postal-code data service: serve and administer"
)]
struct Cli {
    /// SQLite database file.
    #[arg(
        long,
        global = true,
        env = "POSTAL_DB",
        default_value = "data/postal.db"
    )]
    db: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API (imports the dataset first when the database has none).
    Serve {
        #[arg(long, env = "POSTAL_LISTEN", default_value = "127.0.0.1:8080")]
        listen: String,
        /// Write-behind: the longest time (ms) between a charge and its commit; a crash
        /// loses at most this interval's charges (docs/money.md).
        #[arg(long, env = "POSTAL_FLUSH_INTERVAL_MS", default_value_t = 10,
              value_parser = clap::value_parser!(u64).range(1..=60_000))]
        flush_interval_ms: u64,
        /// Answer each billed request only after its charge is committed with
        /// synchronous=FULL (slower; nothing answered is ever lost).
        #[arg(long, env = "POSTAL_DURABLE_CHARGES")]
        durable_charges: bool,
    },
    /// Create, show, top up or adjust an account; set its rate limits.
    #[command(subcommand)]
    Account(AccountCommand),
    /// Create or revoke an API key.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Check the ledger.
    #[command(subcommand)]
    Ledger(LedgerCommand),
}

#[derive(Subcommand)]
enum AccountCommand {
    /// A new account with a balance of 0.028 USD (1,000 free queries) and a first key.
    Create {
        #[arg(long)]
        name: Option<String>,
    },
    /// Balance, keys and rate limits of an account.
    Show { account_id: String },
    /// Credit a payment of at least 5.00 USD, in full.
    Topup {
        account_id: String,
        /// USD, up to 6 decimals, at least 5.00.
        #[arg(long, value_name = "AMOUNT")]
        usd: String,
    },
    /// Correct a balance up or down (never below 0), with a reason kept in the ledger.
    Adjust {
        account_id: String,
        /// Signed USD, up to 6 decimals (`-1.5`, `2`).
        #[arg(long, value_name = "SIGNED_AMOUNT", allow_hyphen_values = true)]
        usd: String,
        #[arg(long)]
        reason: String,
    },
    /// Set per-minute/hour/day limits (windows not given keep theirs), remove them all
    /// with --off, or show them with no option.
    Limits {
        account_id: String,
        #[arg(long, value_name = "N")]
        per_minute: Option<u64>,
        #[arg(long, value_name = "N")]
        per_hour: Option<u64>,
        #[arg(long, value_name = "N")]
        per_day: Option<u64>,
        #[arg(long, conflicts_with_all = ["per_minute", "per_hour", "per_day"])]
        off: bool,
    },
}

#[derive(Subcommand)]
enum KeyCommand {
    /// A new key for the account; the key is shown once.
    Create { account_id: String },
    /// Revoke a key by its id (`key_...`); the next request with it gets 401.
    Revoke { key_id: String },
}

#[derive(Subcommand)]
enum LedgerCommand {
    /// Check that every balance equals the sum of its account's ledger.
    Verify,
}

/// How a command that ran to its end came out.
enum Verdict {
    Success,
    /// The command ran and its answer is "no" (`ledger verify` found a mismatch).
    Failure,
}

fn main() -> ExitCode {
    let cli = Cli::parse(); // clap exits 2 itself on bad usage
    match run(cli) {
        Ok(Verdict::Success) => ExitCode::SUCCESS,
        Ok(Verdict::Failure) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(if is_bad_argument(&e) { 2 } else { 1 })
        }
    }
}

/// Errors that are the user's (exit 2) rather than the system's (exit 1).
fn is_bad_argument(e: &anyhow::Error) -> bool {
    match e.downcast_ref::<AccountError>() {
        Some(AccountError::Unexpected(_)) => false,
        Some(_) => true,
        None => e.downcast_ref::<AmountError>().is_some(),
    }
}

fn run(cli: Cli) -> anyhow::Result<Verdict> {
    match cli.command {
        Command::Serve {
            listen,
            flush_interval_ms,
            durable_charges,
        } => {
            let settings = postal::api::Settings {
                billing: postal::db::BillingOptions {
                    flush_interval: std::time::Duration::from_millis(flush_interval_ms),
                    durable: durable_charges,
                },
            };
            serve(&cli.db, &listen, settings)?;
            Ok(Verdict::Success)
        }
        Command::Account(command) => account(&cli.db, command),
        Command::Key(command) => key(&cli.db, command),
        Command::Ledger(LedgerCommand::Verify) => verify(&cli.db),
    }
}

/// Where `postal serve` finds the dataset on a fresh clone (the shared copy beside the
/// repository); without it, the upstream files.
const LOCAL_DATASET: &str = "../shared/geonames/allCountries.zip";

/// `postal serve`: a database without postal data first gets the dataset, one without
/// accounts gets a first account whose key is printed once; then the API runs until
/// Ctrl-C or SIGTERM.
fn serve(db_path: &Path, listen: &str, settings: postal::api::Settings) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_target(false)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let mut conn = db::open(db_path)?;
    if db::postal::coverage(&conn)?.records == 0 {
        let local = Path::new(LOCAL_DATASET);
        let sources = if local.exists() {
            vec![LOCAL_DATASET.to_string()]
        } else {
            Vec::new()
        };
        let shown = sources
            .first()
            .map_or(postal::import::UPSTREAM_POSTAL_CODES, String::as_str);
        eprintln!(
            "{} holds no postal data: importing {shown}",
            db_path.display()
        );
        let summary = postal::import::run(&postal::import::Options {
            db: db_path.to_path_buf(),
            sources,
            country_info: None,
            progress: std::io::stderr().is_terminal(),
        })?;
        eprintln!("{summary}");
    }
    if accounts::account_count(&conn)? == 0 {
        let created =
            accounts::create_account(&mut conn, Some("first account"), SystemTime::now())?;
        println!(
            "created account {} with API key {} (shown once; balance {} USD)",
            created.account_id,
            created.api_key.expose(),
            created.balance
        );
    }
    drop(conn);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(8) // the size of the slow-read pool (src/api/mod.rs)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(postal::api::serve(db_path, listen, settings))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Created {
    account_id: String,
    key_id: String,
    api_key: String,
    balance: Number,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Shown {
    account_id: String,
    name: Option<String>,
    balance: Number,
    keys: Vec<ShownKey>,
    rate_limits: RateLimits,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ShownKey {
    key_id: String,
    created_at: String,
    revoked: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RateLimits {
    per_minute: Option<u64>,
    per_hour: Option<u64>,
    per_day: Option<u64>,
}

impl From<Limits> for RateLimits {
    fn from(l: Limits) -> Self {
        RateLimits {
            per_minute: l.per_minute,
            per_hour: l.per_hour,
            per_day: l.per_day,
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Balance {
    account_id: String,
    balance: Number,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NewKey {
    key_id: String,
    api_key: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Revoked {
    key_id: String,
    revoked: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Verified {
    accounts: u64,
    entries: u64,
    ok: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    offending_accounts: Vec<Offending>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Offending {
    account_id: String,
    balance: serde_json::Value,
    ledger_sum: serde_json::Value,
}

/// Prints the command's one JSON object and a newline.
fn print(output: &impl Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string(output)?);
    Ok(())
}

/// Raw micros (possibly tampered with) as USD: exact when within `Micros`' bound.
fn usd_or_raw(micros: i64) -> serde_json::Value {
    match Micros::new(micros) {
        Some(m) => serde_json::Value::Number(m.to_json_number()),
        None => serde_json::Value::String(format!("{micros} micro-dollars")),
    }
}

fn account(db_path: &Path, command: AccountCommand) -> anyhow::Result<Verdict> {
    let mut conn = db::open(db_path)?;
    let now = SystemTime::now();
    match command {
        AccountCommand::Create { name } => {
            let created = accounts::create_account(&mut conn, name.as_deref(), now)?;
            print(&Created {
                account_id: created.account_id,
                key_id: created.key_id,
                api_key: created.api_key.expose().to_owned(),
                balance: created.balance.to_json_number(),
            })?;
        }
        AccountCommand::Show { account_id } => {
            let view = accounts::show(&conn, &account_id)?;
            print(&Shown {
                account_id: view.account_id,
                name: view.name,
                balance: view.balance.to_json_number(),
                keys: view
                    .keys
                    .into_iter()
                    .map(|k| ShownKey {
                        key_id: k.key_id,
                        created_at: k.created_at,
                        revoked: k.revoked,
                    })
                    .collect(),
                rate_limits: view.limits.into(),
            })?;
        }
        AccountCommand::Topup { account_id, usd } => {
            let amount = Micros::parse_usd(&usd)?;
            let balance = accounts::topup(&mut conn, &account_id, amount, now)?;
            print(&Balance {
                account_id,
                balance: balance.to_json_number(),
            })?;
        }
        AccountCommand::Adjust {
            account_id,
            usd,
            reason,
        } => {
            let amount = Micros::parse_usd(&usd)?;
            let balance = accounts::adjust(&mut conn, &account_id, amount, &reason, now)?;
            print(&Balance {
                account_id,
                balance: balance.to_json_number(),
            })?;
        }
        AccountCommand::Limits {
            account_id,
            per_minute,
            per_hour,
            per_day,
            off,
        } => {
            let change = if off {
                LimitsChange::Off
            } else if per_minute.is_none() && per_hour.is_none() && per_day.is_none() {
                LimitsChange::Keep
            } else {
                LimitsChange::Set {
                    per_minute,
                    per_hour,
                    per_day,
                }
            };
            let limits = accounts::set_limits(&mut conn, &account_id, change)?;
            print(&RateLimits::from(limits))?;
        }
    }
    Ok(Verdict::Success)
}

fn key(db_path: &Path, command: KeyCommand) -> anyhow::Result<Verdict> {
    let mut conn = db::open(db_path)?;
    let now = SystemTime::now();
    match command {
        KeyCommand::Create { account_id } => {
            let key = accounts::create_key(&mut conn, &account_id, now)?;
            print(&NewKey {
                key_id: key.key_id,
                api_key: key.api_key.expose().to_owned(),
            })?;
        }
        KeyCommand::Revoke { key_id } => {
            accounts::revoke_key(&mut conn, &key_id, now)?;
            print(&Revoked {
                key_id,
                revoked: true,
            })?;
        }
    }
    Ok(Verdict::Success)
}

fn verify(db_path: &Path) -> anyhow::Result<Verdict> {
    let mut conn = db::open(db_path)?;
    let report = accounts::verify_ledger(&mut conn)?;
    let ok = report.mismatches.is_empty();
    print(&Verified {
        accounts: report.accounts,
        entries: report.entries,
        ok,
        offending_accounts: report
            .mismatches
            .into_iter()
            .map(|m| Offending {
                account_id: m.account_id,
                balance: usd_or_raw(m.balance),
                ledger_sum: usd_or_raw(m.ledger_sum),
            })
            .collect(),
    })?;
    Ok(if ok {
        Verdict::Success
    } else {
        Verdict::Failure
    })
}
