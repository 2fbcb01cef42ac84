//! `postal account create|list|show|topup|adjust|limits|unfreeze`.

use std::path::Path;
use std::time::SystemTime;

use clap::Subcommand;
use serde::Serialize;
use serde_json::Number;

use crate::db::admin::AccountError;
use crate::db::pg::LedgerConfig;
use crate::domain::admin::{BalanceChange, LimitsChange};
use crate::domain::ids::AccountId;
use crate::domain::money::Micros;

use super::{RateLimits, Verdict, cluster, now_unix, print};

#[derive(Subcommand)]
pub(super) enum AccountCommand {
    /// A new account with a balance of 0.028 USD (1,000 free queries) and a first key.
    Create {
        #[arg(long)]
        name: Option<String>,
    },
    /// Every account: balance, active keys, rate limits and billed queries today (UTC).
    List,
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
    /// Let the account start top-ups by card again after a dispute froze them (review
    /// the dispute in Stripe's Dashboard first).
    Unfreeze { account_id: String },
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
    /// The dashboard sign-ins that own the account (absent when none: made by the CLI).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    identities: Vec<ShownIdentity>,
    /// Top-ups by card (absent when none), newest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    topups: Vec<ShownTopup>,
    /// Why the account may start no top-up by card (a dispute, until `account unfreeze`);
    /// absent when it may.
    #[serde(skip_serializing_if = "Option::is_none")]
    topups_frozen: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Unfrozen {
    account_id: String,
    was_frozen: bool,
    /// Why it was frozen (absent when it was not).
    #[serde(skip_serializing_if = "Option::is_none")]
    frozen_by: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ShownTopup {
    topup_id: String,
    status: &'static str,
    amount: Number,
    created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    paid_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    credited: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payment: Option<String>,
    refunded: Number,
    /// Refunded by the processor but not taken back: the balance was spent.
    refund_shortfall: Number,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ShownIdentity {
    provider: String,
    issuer: String,
    subject: String,
    email: Option<String>,
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
struct Balance {
    account_id: String,
    balance: Number,
}

#[derive(Serialize)]
struct Listed {
    accounts: Vec<ListedAccount>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ListedAccount {
    account_id: String,
    name: Option<String>,
    balance: Number,
    active_keys: u64,
    rate_limits: RateLimits,
    queries_today: u64,
}

/// Runs `command` on the file at `db_path`, or with `ledger` on the cluster's ledger: the
/// same answers; a change holds from the server's (every live node's) next request.
pub(super) fn run(
    db_path: &Path,
    ledger: Option<&LedgerConfig>,
    command: AccountCommand,
) -> anyhow::Result<Verdict> {
    let now = SystemTime::now();
    cluster::admin(db_path, ledger, async |admin| {
        match command {
            AccountCommand::Create { name } => {
                let created = admin.create_account(name.as_deref(), now).await?;
                print(&Created {
                    account_id: created.account_id.into(),
                    key_id: created.key_id.into(),
                    api_key: created.api_key.expose().to_owned(),
                    balance: created.balance.to_json_number(),
                })?;
            }
            AccountCommand::List => {
                let lines = admin.account_lines(now_unix()).await?;
                print(&Listed {
                    accounts: lines
                        .into_iter()
                        .map(|a| ListedAccount {
                            account_id: a.account_id.into(),
                            name: a.name,
                            balance: a.balance.to_json_number(),
                            active_keys: a.active_keys,
                            rate_limits: a.limits.into(),
                            queries_today: a.queries_today,
                        })
                        .collect(),
                })?;
            }
            AccountCommand::Show { account_id } => {
                let account_id = AccountId::new(account_id);
                let view = admin.show(&account_id).await?;
                let identities = admin.identities(&account_id).await?;
                let topups = admin.topups(&account_id).await?;
                print(&Shown {
                    account_id: view.account_id.into(),
                    name: view.name,
                    balance: view.balance.to_json_number(),
                    keys: view
                        .keys
                        .into_iter()
                        .map(|k| ShownKey {
                            key_id: k.key_id.into(),
                            created_at: k.created_at,
                            revoked: k.revoked,
                        })
                        .collect(),
                    rate_limits: view.limits.into(),
                    identities: identities
                        .into_iter()
                        .map(|i| ShownIdentity {
                            provider: i.provider.into(),
                            issuer: i.issuer,
                            subject: i.subject,
                            email: i.email,
                        })
                        .collect(),
                    topups: topups
                        .into_iter()
                        .map(|t| ShownTopup {
                            refund_shortfall: t.shortfall().to_json_number(),
                            topup_id: t.topup_id.into(),
                            status: t.status.as_str(),
                            amount: t.amount.to_json_number(),
                            created_at: crate::domain::date::rfc3339(t.created_at),
                            paid_at: t.paid_at.map(crate::domain::date::rfc3339),
                            credited: t.credited.map(Micros::to_json_number),
                            session_id: t.session_id,
                            payment: t.payment,
                            refunded: t.refunded.to_json_number(),
                        })
                        .collect(),
                    topups_frozen: view.topups_frozen,
                })?;
            }
            AccountCommand::Unfreeze { account_id } => {
                let account_id = AccountId::new(account_id);
                let was = admin.unfreeze_topups(&account_id).await?;
                print(&Unfrozen {
                    account_id: account_id.into(),
                    was_frozen: was.is_some(),
                    frozen_by: was,
                })?;
            }
            AccountCommand::Topup { account_id, usd } => {
                let amount = Micros::parse_usd(&usd)?;
                let topup = BalanceChange::topup(amount).map_err(AccountError::from)?;
                let account_id = AccountId::new(account_id);
                let balance = admin.change_balance(&account_id, &topup, now).await?;
                print(&Balance {
                    account_id: account_id.into(),
                    balance: balance.to_json_number(),
                })?;
            }
            AccountCommand::Adjust {
                account_id,
                usd,
                reason,
            } => {
                let amount = Micros::parse_usd(&usd)?;
                let adjustment =
                    BalanceChange::adjustment(amount, &reason).map_err(AccountError::from)?;
                let account_id = AccountId::new(account_id);
                let balance = admin.change_balance(&account_id, &adjustment, now).await?;
                print(&Balance {
                    account_id: account_id.into(),
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
                    LimitsChange::OFF
                } else {
                    LimitsChange::set(per_minute, per_hour, per_day).map_err(AccountError::from)?
                };
                let limits = admin
                    .set_limits(&AccountId::new(account_id), change)
                    .await?;
                print(&RateLimits::from(limits))?;
            }
        }
        Ok(Verdict::Success)
    })
}
