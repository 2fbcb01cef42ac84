//! `postal usage`: billed queries and USD per UTC day, account and endpoint, and with
//! `--by key` per key too.

use std::path::Path;

use clap::Args;
use serde::Serialize;
use serde_json::Number;

use crate::db::admin::{UsageLine, UsageQuery};
use crate::db::pg::LedgerConfig;
use crate::domain::ids::AccountId;

use super::{Format, Verdict, cluster, now_unix, print, print_csv};

#[derive(Args)]
pub(super) struct UsageArgs {
    /// The last N UTC days, today included.
    #[arg(long, value_name = "N", default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=3660))]
    days: u32,
    /// `account`: a line per day, account and endpoint; `key`: per key as well.
    #[arg(long, value_enum, default_value_t)]
    by: By,
    /// Only this account (`acct_...`).
    #[arg(long, value_name = "ACCOUNT_ID")]
    account: Option<String>,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

/// What a line of `postal usage` is per.
#[derive(Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
enum By {
    #[default]
    Account,
    Key,
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
    /// With `--by key`: the key (`null` for charges made before keys were counted).
    #[serde(skip_serializing_if = "Option::is_none")]
    key_id: Option<Option<String>>,
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
    let query = UsageQuery {
        days: args.days,
        now: now_unix(),
        account: args.account.clone().map(AccountId::new),
        key: None,
        per_key: args.by == By::Key,
    };
    let lines = cluster::admin(db_path, ledger, async |admin| {
        Ok(admin.usage(&query).await?)
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
                    key_id: (args.by == By::Key).then(|| l.key_id.map(String::from)),
                    endpoint: l.endpoint,
                    queries: l.queries,
                    usd: l.charged.to_json_number(),
                })
                .collect(),
        })?,
        Format::Csv => {
            let per_key = args.by == By::Key;
            let header: &[&str] = match per_key {
                true => &["date", "accountId", "keyId", "endpoint", "queries", "usd"],
                false => &["date", "accountId", "endpoint", "queries", "usd"],
            };
            print_csv(
                header,
                lines.into_iter().map(|l| {
                    let mut row = vec![l.date, l.account_id.into()];
                    if per_key {
                        row.push(l.key_id.map(String::from).unwrap_or_default());
                    }
                    row.extend([l.endpoint, l.queries.to_string(), l.charged.to_string()]);
                    row
                }),
            )?
        }
    }
    Ok(Verdict::Success)
}
