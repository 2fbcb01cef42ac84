//! `postal ledger show|verify`: an account's audit trail, and the books' check.

use std::path::Path;

use clap::Subcommand;
use serde::Serialize;
use serde_json::Number;

use postal::db::{self, ledger, reports};
use postal::domain::date::UtcDate;

use super::{Format, Verdict, print, print_csv, usd_or_raw};

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
    /// Check that every balance equals the sum of its account's ledger.
    Verify,
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
    kind: String,
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
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Offending {
    account_id: String,
    balance: serde_json::Value,
    ledger_sum: serde_json::Value,
}

pub(super) fn run(db_path: &Path, command: LedgerCommand) -> anyhow::Result<Verdict> {
    match command {
        LedgerCommand::Show {
            account_id,
            since,
            format,
        } => {
            let since = since.as_deref().map(UtcDate::parse).transpose()?;
            show(db_path, account_id, since, format)
        }
        LedgerCommand::Verify => verify(db_path),
    }
}

fn show(
    db_path: &Path,
    account_id: String,
    since: Option<UtcDate>,
    format: Format,
) -> anyhow::Result<Verdict> {
    let mut conn = db::open(db_path)?;
    let entries = reports::ledger_entries(&mut conn, &account_id, since.map(UtcDate::start_unix))?;
    match format {
        Format::Json => print(&Shown {
            account_id,
            entries: entries
                .into_iter()
                .map(|e| Entry {
                    at: e.at,
                    kind: e.kind,
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
                    e.kind,
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
    let report = ledger::verify_ledger(&mut conn)?;
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
