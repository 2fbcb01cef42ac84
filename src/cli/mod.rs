//! The `postal` command line: its arguments, one module per command group, and the
//! conventions they share (one JSON object on stdout, exit 2 for the user's mistakes).

mod access_log;
mod account;
mod backup;
mod cluster;
mod dataset;
mod key;
mod ledger;
mod log_writer;
mod mail;
mod payments;
mod provider;
mod serve;
mod usage;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use serde::Serialize;

use crate::db::admin::AccountError;
use crate::db::pg::LedgerConfig;
use crate::domain::date::DateError;
use crate::domain::money::{AmountError, Micros};
use crate::domain::rate_limit::Limits;

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
    /// Cluster mode: accounts, keys and the ledger in this PostgreSQL
    /// (`postgres://user@host:port/db`); the file then holds only the postal data. Off
    /// loopback TLS is required and verified (the host's name, a chain to the Mozilla
    /// roots, or to the CA of `sslrootcert=PATH`); on loopback or a Unix socket, plain
    /// unless `sslmode=verify-full` or `sslrootcert` asks for TLS. docs/cluster.md, "TLS and
    /// the password".
    #[arg(long, global = true, env = "POSTAL_LEDGER", hide_env_values = true)]
    ledger: Option<String>,
    /// The ledger's password, read from this file (mode 0600 or stricter, its trailing
    /// newline ignored) in place of any in --ledger, which `ps` and the environment show.
    #[arg(
        long,
        global = true,
        env = "POSTAL_LEDGER_PASSWORD_FILE",
        value_name = "PATH"
    )]
    ledger_password_file: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API (imports the dataset first when the database has none).
    Serve(serve::ServeArgs),
    /// Create, list, show, top up or adjust accounts; set their rate limits.
    #[command(subcommand)]
    Account(account::AccountCommand),
    /// Create, list or revoke API keys.
    #[command(subcommand)]
    Key(key::KeyCommand),
    /// Read or check the ledger.
    #[command(subcommand)]
    Ledger(ledger::LedgerCommand),
    /// The OpenID Connect providers customers sign in to the account dashboard with.
    #[command(subcommand)]
    Provider(provider::ProviderCommand),
    /// Top-ups by card in the account dashboard (Stripe Checkout).
    #[command(subcommand)]
    Payments(payments::PaymentsCommand),
    /// The SMTP relay customers' e-mail alerts are sent through.
    #[command(subcommand)]
    Mail(mail::MailCommand),
    /// Billed queries and USD per day, account and endpoint.
    Usage(usage::UsageArgs),
    /// Write a consistent copy of the database to DEST, while the server runs; the copy
    /// holds every charge answered before the command started.
    Backup(backup::BackupArgs),
    /// Replace the database with the copy SRC once it is checked (integrity, every
    /// balance equal to its ledger); refused while a server runs on the database.
    Restore(backup::RestoreArgs),
    /// The dataset's provenance and the codes imports added, removed or moved.
    #[command(subcommand)]
    Dataset(dataset::DatasetCommand),
}

/// The user's mistake (exit 2): a missing or unfit argument (a backup's source, a
/// destination that exists, a country code). Nothing was changed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BadInput(String);

/// `text`, given as `flag`, when this server may call it or send a browser there
/// (`domain::outside`: https, or http to a loopback host).
fn outside_url<'a>(flag: &str, text: &'a str) -> Result<&'a str, BadInput> {
    match crate::domain::outside::allowed(text) {
        true => Ok(text),
        false => Err(BadInput(format!(
            "{flag} must be {}: {text:?}",
            crate::domain::outside::RULE
        ))),
    }
}

/// A secret the operator gives by one of two flags, never as a flag's value (where `ps`
/// and the shell's history would show it): `--…-file PATH`, a file of mode 0600 or
/// stricter (`db::secret_file`, as `--ledger-password-file`), or `--…-env VAR`, for a
/// secret manager that exports variables. Clap lets exactly one through.
struct SecretSource<'a> {
    file: Option<&'a Path>,
    env: Option<&'a str>,
    /// What the file holds, in its errors: "the client secret file".
    what: &'a str,
}

impl SecretSource<'_> {
    /// The secret, and where it came from (the file's path or the variable's name) for
    /// the errors that follow. A file missing, open to others or empty, a variable not set
    /// or empty, is the operator's mistake (exit 2).
    fn read(&self) -> Result<(String, String), BadInput> {
        match (self.file, self.env) {
            (Some(path), _) => {
                let secret = crate::db::secret_file::read(path, self.what)
                    .map_err(|e| BadInput(format!("{e:#}")))?;
                let secret = String::from_utf8(secret).map_err(|_| {
                    BadInput(format!(
                        "{} {} is not UTF-8 text",
                        self.what,
                        path.display()
                    ))
                })?;
                Ok((secret, path.display().to_string()))
            }
            (None, Some(var)) => {
                let secret = std::env::var(var)
                    .map_err(|_| BadInput(format!("the environment variable {var} is not set")))?;
                if secret.trim().is_empty() {
                    return Err(BadInput(format!("the environment variable {var} is empty")));
                }
                Ok((secret, var.to_owned()))
            }
            (None, None) => Err(BadInput(format!("no {} given", self.what))),
        }
    }
}

/// How a command that ran to its end came out.
enum Verdict {
    Success,
    /// The command ran and its answer is "no" (`ledger verify` found a mismatch).
    Failure,
}

/// Runs the command line and decides the exit code, once.
pub fn main() -> ExitCode {
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
        None => {
            e.downcast_ref::<AmountError>().is_some()
                || e.downcast_ref::<DateError>().is_some()
                || e.downcast_ref::<BadInput>().is_some()
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<Verdict> {
    // The file's own commands leave a ledger in the environment alone.
    let on_file = matches!(
        cli.command,
        Command::Backup(_) | Command::Restore(_) | Command::Dataset(_)
    );
    let ledger = match on_file {
        true => None,
        false => ledger(cli.ledger.as_deref(), cli.ledger_password_file.as_deref())?,
    };
    let db = &cli.db;
    match cli.command {
        Command::Serve(args) => serve::run(db, ledger, args),
        Command::Account(command) => account::run(db, ledger.as_ref(), command),
        Command::Key(command) => key::run(db, ledger.as_ref(), command),
        Command::Ledger(command) => ledger::run(db, ledger.as_ref(), command),
        Command::Provider(command) => provider::run(db, ledger.as_ref(), command),
        Command::Payments(command) => payments::run(db, ledger.as_ref(), command),
        Command::Mail(command) => mail::run(db, ledger.as_ref(), command),
        Command::Usage(args) => usage::run(db, ledger.as_ref(), args),
        Command::Backup(args) => backup::backup(db, args),
        Command::Restore(args) => backup::restore(db, args),
        Command::Dataset(command) => dataset::run(db, command),
    }
}

/// The ledger of `--ledger` with the password of `--ledger-password-file`: a mistake in
/// either (a connection string that cannot be parsed, clear text off loopback, a password
/// file missing, empty or open to others, a CA file unreadable) is the operator's.
fn ledger(url: Option<&str>, password_file: Option<&Path>) -> anyhow::Result<Option<LedgerConfig>> {
    match (url, password_file) {
        (Some(url), _) => LedgerConfig::parse(url, password_file)
            .map(Some)
            .map_err(|e| BadInput(format!("{e:#}")).into()),
        (None, Some(_)) => Err(BadInput(
            "--ledger-password-file is the password of a ledger: give --ledger (or POSTAL_LEDGER)"
                .into(),
        )
        .into()),
        (None, None) => Ok(None),
    }
}

/// How a listing is printed: one JSON object (cli.md), or CSV with a header line for a
/// spreadsheet.
#[derive(Clone, Copy, ValueEnum, Default)]
enum Format {
    #[default]
    Json,
    Csv,
}

/// Prints the command's one JSON object and a newline.
fn print(output: &impl Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string(output)?);
    Ok(())
}

/// Prints `rows` as CSV under `header`; every field is text (amounts as exact decimals).
fn print_csv(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> anyhow::Result<()> {
    let mut out = csv::Writer::from_writer(std::io::stdout().lock());
    out.write_record(header)?;
    for row in rows {
        out.write_record(&row)?;
    }
    out.flush()?;
    Ok(())
}

/// Raw micros (possibly tampered with) as USD: exact when within `Micros`' bound.
fn usd_or_raw(micros: i64) -> serde_json::Value {
    match Micros::new(micros) {
        Some(m) => serde_json::Value::Number(m.to_json_number()),
        None => serde_json::Value::String(format!("{micros} micro-dollars")),
    }
}

fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
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
