//! `postal usage`: billed queries and USD per UTC day, account and endpoint.

use std::path::Path;

use clap::Args;
use serde::Serialize;
use serde_json::Number;

use crate::db::admin::UsageLine;
use crate::db::pg::LedgerConfig;

use super::{Format, Verdict, cluster, now_unix, print, print_csv};

#[derive(Args)]
pub(super) struct UsageArgs {
    /// The last N UTC days, today included.
    #[arg(long, value_name = "N", default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=3660))]
    days: u32,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

#[derive(Serialize)]
struct Usage {
    days: u32,
    usage: Vec<Line>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Line {
    date: String,
    account_id: String,
    endpoint: String,
    queries: u64,
    usd: Number,
}

/// The lines of the file at `db_path`, or with `ledger` of the cluster's ledger.
pub(super) fn run(
    db_path: &Path,
    ledger: Option<&LedgerConfig>,
    args: UsageArgs,
) -> anyhow::Result<Verdict> {
    let lines = cluster::admin(db_path, ledger, async |admin| {
        admin.usage(args.days, now_unix()).await
    })?;
    print_usage(&args, lines)
}

fn print_usage(args: &UsageArgs, lines: Vec<UsageLine>) -> anyhow::Result<Verdict> {
    match args.format {
        Format::Json => print(&Usage {
            days: args.days,
            usage: lines
                .into_iter()
                .map(|l| Line {
                    date: l.date,
                    account_id: l.account_id.into(),
                    endpoint: l.endpoint,
                    queries: l.queries,
                    usd: l.charged.to_json_number(),
                })
                .collect(),
        })?,
        Format::Csv => print_csv(
            &["date", "accountId", "endpoint", "queries", "usd"],
            lines.into_iter().map(|l| {
                vec![
                    l.date,
                    l.account_id.into(),
                    l.endpoint,
                    l.queries.to_string(),
                    l.charged.to_string(),
                ]
            }),
        )?,
    }
    Ok(Verdict::Success)
}
