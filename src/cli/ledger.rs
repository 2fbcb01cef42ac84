//! `postal ledger show|verify`: an account's audit trail, and the books' check.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde::Serialize;
use serde_json::Number;

use crate::billing::ServeLock;
use crate::db::admin::LedgerReport;
use crate::db::pg;
use crate::db::pg::LedgerConfig;
use crate::db::{self, sqlite};
use crate::domain::date::UtcDate;
use crate::domain::ids::AccountId;

use super::{BadInput, Format, Verdict, cluster, print, print_csv, usd_or_raw};

#[derive(Subcommand)]
pub(super) enum LedgerCommand {
    /// An account's ledger, oldest first: every grant, top-up, charge and adjustment.
    Show {
        account_id: String,
        /// Only entries from this UTC day on (YYYY-MM-DD).
        #[arg(long, value_name = "DATE")]
        since: Option<String>,
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Check that every balance equals the sum of its account's ledger (with --ledger,
    /// also that every account's leased amount is the sum of its nodes' grants).
    Verify,
    /// Move a single-file installation's customers (accounts, keys, ledger, sign-in
    /// providers and identities, audit log, payment settings and top-ups) into the empty
    /// PostgreSQL ledger given by --ledger, then check both with `verify`; refused while a
    /// server runs on the file. Sessions and sign-ins under way are not moved.
    Migrate {
        /// The SQLite file to move from.
        #[arg(long, value_name = "FILE")]
        from: PathBuf,
    },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Shown {
    account_id: String,
    entries: Vec<Entry>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    at: String,
    kind: &'static str,
    amount: Number,
    balance_after: Number,
    queries: u64,
    endpoint: Option<String>,
    note: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Verified {
    accounts: u64,
    entries: u64,
    ok: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    offending_accounts: Vec<Offending>,
    /// Cluster mode: accounts whose `leased` is not the sum of their grants.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    offending_leases: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Migrated {
    accounts: u64,
    keys: u64,
    entries: u64,
    /// Rows moved per table of the file, in the order they were moved.
    tables: Tables,
    file_ok: bool,
    ledger_ok: bool,
}

/// `{"accounts": 2, "api_keys": 3, ...}`, in the order the tables were moved.
struct Tables(Vec<(&'static str, u64)>);

impl Serialize for Tables {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (table, rows) in &self.0 {
            map.serialize_entry(table, rows)?;
        }
        map.end()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Offending {
    account_id: String,
    balance: serde_json::Value,
    ledger_sum: serde_json::Value,
}

pub(super) fn run(
    db_path: &Path,
    ledger: Option<&LedgerConfig>,
    command: LedgerCommand,
) -> anyhow::Result<Verdict> {
    match command {
        LedgerCommand::Show {
            account_id,
            since,
            format,
        } => {
            let since = since.as_deref().map(UtcDate::parse).transpose()?;
            show(db_path, ledger, account_id, since, format)
        }
        LedgerCommand::Verify => match ledger {
            Some(ledger) => verify_cluster(ledger),
            None => verify(db_path),
        },
        LedgerCommand::Migrate { from } => match ledger {
            Some(ledger) => migrate(&from, ledger),
            None => Err(BadInput("ledger migrate needs --ledger (or POSTAL_LEDGER)".into()).into()),
        },
    }
}

fn show(
    db_path: &Path,
    ledger: Option<&LedgerConfig>,
    account_id: String,
    since: Option<UtcDate>,
    format: Format,
) -> anyhow::Result<Verdict> {
    let query = crate::db::admin::LedgerQuery {
        since: since.map(UtcDate::start_unix),
        ..Default::default()
    };
    let entries = cluster::admin(db_path, ledger, async |admin| {
        Ok(admin
            .ledger_entries(&AccountId::new(account_id.clone()), &query)
            .await?
            .entries)
    })?;
    match format {
        Format::Json => print(&Shown {
            account_id,
            entries: entries
                .into_iter()
                .map(|e| Entry {
                    at: e.at,
                    kind: e.kind.as_str(),
                    amount: e.amount.to_json_number(),
                    balance_after: e.balance_after.to_json_number(),
                    queries: e.queries,
                    endpoint: e.endpoint,
                    note: e.note,
                })
                .collect(),
        })?,
        Format::Csv => print_csv(
            &[
                "at",
                "kind",
                "amount",
                "balanceAfter",
                "queries",
                "endpoint",
                "note",
            ],
            entries.into_iter().map(|e| {
                vec![
                    e.at,
                    e.kind.to_string(),
                    e.amount.to_string(),
                    e.balance_after.to_string(),
                    e.queries.to_string(),
                    e.endpoint.unwrap_or_default(),
                    e.note.unwrap_or_default(),
                ]
            }),
        )?,
    }
    Ok(Verdict::Success)
}

fn verify(db_path: &Path) -> anyhow::Result<Verdict> {
    let mut conn = db::open(db_path)?;
    let report = sqlite::ledger::verify(&mut conn)?;
    print_verified(report, Vec::new())
}

fn verify_cluster(ledger: &LedgerConfig) -> anyhow::Result<Verdict> {
    let (report, leases) = cluster::run(ledger, async |client| pg::ledger::verify(client).await)?;
    print_verified(report, leases)
}

/// `ledger migrate`: the file checked, moved, and both sides checked.
fn migrate(file: &Path, ledger: &LedgerConfig) -> anyhow::Result<Verdict> {
    if !file.exists() {
        return Err(BadInput(format!("no file {}", file.display())).into());
    }
    let _lock = ServeLock::acquire(file)?;
    let mut conn = db::open(file)?;
    let before = sqlite::ledger::verify(&mut conn)?;
    if !before.mismatches.is_empty() {
        return Err(BadInput(format!(
            "{}: {} balances differ from their ledger (`postal ledger verify`): not moved",
            file.display(),
            before.mismatches.len()
        ))
        .into());
    }
    let (moved, after, leases) = cluster::run(ledger, async |client| {
        let moved = pg::from_file::migrate_from_file(client, &conn).await?;
        let (after, leases) = pg::ledger::verify(client).await?;
        Ok((moved, after, leases))
    })?;
    let ledger_ok = after.mismatches.is_empty()
        && leases.is_empty()
        && after.accounts == before.accounts
        && after.entries == before.entries;
    print(&Migrated {
        accounts: moved.rows("accounts"),
        keys: moved.rows("api_keys"),
        entries: moved.rows("ledger"),
        tables: Tables(moved.tables),
        file_ok: true,
        ledger_ok,
    })?;
    Ok(if ledger_ok {
        Verdict::Success
    } else {
        Verdict::Failure
    })
}

fn print_verified(report: LedgerReport, leases: Vec<String>) -> anyhow::Result<Verdict> {
    let ok = report.mismatches.is_empty() && leases.is_empty();
    print(&Verified {
        accounts: report.accounts,
        entries: report.entries,
        ok,
        offending_accounts: report
            .mismatches
            .into_iter()
            .map(|m| Offending {
                account_id: m.account_id.into(),
                balance: usd_or_raw(m.balance),
                ledger_sum: usd_or_raw(m.ledger_sum),
            })
            .collect(),
        offending_leases: leases,
    })?;
    Ok(if ok {
        Verdict::Success
    } else {
        Verdict::Failure
    })
}
