//! `postal key create|list|revoke`.

use std::path::Path;
use std::time::SystemTime;

use clap::Subcommand;
use serde::Serialize;

use crate::db::admin::AccountError;
use crate::db::pg::LedgerConfig;
use crate::domain::api_key::{Budget, DEFAULT_PER_IP_MINUTE, KeyKind, Publishable};
use crate::domain::dashboard;
use crate::domain::ids::{AccountId, KeyId};
use crate::domain::origin::OriginPattern;

use super::{Verdict, cluster, print};

#[derive(Subcommand)]
pub(super) enum KeyCommand {
    /// A new key for the account; the key is shown once. A secret key (`sk_`) by
    /// default, for servers; `--publishable` makes a key for web pages (`pub_`).
    Create {
        account_id: String,
        /// A publishable key, safe to ship in a web page: it answers only requests from
        /// its `--origin`s, only the read operations a form needs, limited per client IP.
        #[arg(long, requires = "origins")]
        publishable: bool,
        /// An origin whose pages may use the publishable key: scheme://host[:port]; a
        /// leading `*.` on the host allows every subdomain. Repeat for several.
        #[arg(
            long = "origin",
            value_name = "ORIGIN",
            requires = "publishable",
            value_parser = |text: &str| OriginPattern::parse(text)
        )]
        origins: Vec<OriginPattern>,
        /// Requests a minute per client IP for the publishable key [default: 60].
        #[arg(long, value_name = "N", requires = "publishable", value_parser = count())]
        per_ip_minute: Option<u32>,
        /// At most N requests in a UTC minute with the publishable key, over every client
        /// IP (counted by each server node) [default: no bound].
        #[arg(long, value_name = "N", requires = "publishable", value_parser = count())]
        max_per_minute: Option<u32>,
        /// At most N requests in a UTC day with the publishable key, over every client IP
        /// (counted by each server node) [default: no bound].
        #[arg(long, value_name = "N", requires = "publishable", value_parser = count())]
        max_per_day: Option<u32>,
        /// A name for the key, shown in listings and the dashboard (1 to 100 characters).
        #[arg(long)]
        name: Option<String>,
    },
    /// The account's keys: public ids, creation and revocation times (never a secret).
    List { account_id: String },
    /// Revoke a key by its id (`key_...`); the next request with it gets 401.
    Revoke { key_id: String },
}

/// A publishable key's limits: a count of requests, at least 1.
fn count() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(1..)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NewKey {
    key_id: String,
    api_key: String,
    /// Only for a publishable key: a secret key's output is cli.md's, unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    #[serde(flatten)]
    publishable: Option<Rules>,
}

/// What binds a publishable key, as `key create` and `key list` show it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Rules {
    origins: Vec<String>,
    per_ip_minute: u32,
    /// The budget, only when the key has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_per_minute: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_per_day: Option<u32>,
}

impl Rules {
    fn of(publishable: &Publishable) -> Rules {
        Rules {
            origins: publishable.origins.iter().map(|o| o.to_string()).collect(),
            per_ip_minute: publishable.per_ip_minute,
            max_per_minute: publishable.budget.per_minute,
            max_per_day: publishable.budget.per_day,
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Revoked {
    key_id: String,
    revoked: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct KeyList {
    account_id: String,
    keys: Vec<ListedKey>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ListedKey {
    key_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    created_at: String,
    revoked: bool,
    revoked_at: Option<String>,
    kind: &'static str,
    #[serde(flatten)]
    publishable: Option<Rules>,
    /// To the minute; `null` if never used.
    last_used_at: Option<String>,
    queries_last_30_days: u64,
}

/// Runs `command` on the file at `db_path`, or with `ledger` on the cluster's ledger: a
/// new or revoked key holds from the server's (every live node's) next request.
pub(super) fn run(
    db_path: &Path,
    ledger: Option<&LedgerConfig>,
    command: KeyCommand,
) -> anyhow::Result<Verdict> {
    let now = SystemTime::now();
    cluster::admin(db_path, ledger, async |admin| {
        match command {
            KeyCommand::Create {
                account_id,
                publishable,
                origins,
                per_ip_minute,
                max_per_minute,
                max_per_day,
                name,
            } => {
                let name = dashboard::key_name(name.as_deref())
                    .map_err(|why| AccountError::Invalid(why.to_string()))?;
                let per_ip_minute = per_ip_minute.unwrap_or(DEFAULT_PER_IP_MINUTE);
                let budget = Budget {
                    per_minute: max_per_minute,
                    per_day: max_per_day,
                };
                let publishable = publishable
                    .then(|| Publishable::new(origins, per_ip_minute, budget))
                    .transpose()
                    .map_err(AccountError::from)?;
                let key = admin
                    .create_key(
                        &AccountId::new(account_id),
                        publishable.as_ref(),
                        name.as_deref(),
                        now,
                    )
                    .await?;
                print(&NewKey {
                    key_id: key.key_id.into(),
                    api_key: key.api_key.expose().to_owned(),
                    kind: publishable.as_ref().map(|_| KeyKind::Publishable.as_str()),
                    publishable: publishable.as_ref().map(Rules::of),
                })?;
            }
            KeyCommand::List { account_id } => {
                let keys = admin.keys(&AccountId::new(account_id.clone())).await?;
                print(&KeyList {
                    account_id,
                    keys: keys
                        .into_iter()
                        .map(|k| ListedKey {
                            key_id: k.key_id.into(),
                            name: k.name,
                            created_at: k.created_at,
                            revoked: k.revoked_at.is_some(),
                            revoked_at: k.revoked_at,
                            kind: KeyKind::of(k.publishable.as_ref()).as_str(),
                            publishable: k.publishable.as_ref().map(Rules::of),
                            last_used_at: k.last_used_at,
                            queries_last_30_days: k.queries_30d,
                        })
                        .collect(),
                })?;
            }
            KeyCommand::Revoke { key_id } => {
                admin.revoke_key(&KeyId::new(key_id.clone()), now).await?;
                print(&Revoked {
                    key_id,
                    revoked: true,
                })?;
            }
        }
        Ok(Verdict::Success)
    })
}
