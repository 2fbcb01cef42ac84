//! `postal key create|list|revoke`.

use std::path::Path;
use std::time::SystemTime;

use clap::Subcommand;
use serde::Serialize;

use postal::billing::notify;
use postal::db::pg::admin;
use postal::db::{self, keys, reports};
use postal::domain::api_key::{DEFAULT_PER_IP_MINUTE, KeyKind, Publishable};
use postal::domain::origin::OriginPattern;

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
        #[arg(
            long,
            value_name = "N",
            requires = "publishable",
            value_parser = clap::value_parser!(u32).range(1..)
        )]
        per_ip_minute: Option<u32>,
    },
    /// The account's keys: public ids, creation and revocation times (never a secret).
    List { account_id: String },
    /// Revoke a key by its id (`key_...`); the next request with it gets 401.
    Revoke { key_id: String },
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
}

impl Rules {
    fn of(publishable: &Publishable) -> Rules {
        Rules {
            origins: publishable.origins.iter().map(|o| o.to_string()).collect(),
            per_ip_minute: publishable.per_ip_minute,
        }
    }
}

fn kind(publishable: Option<&Publishable>) -> &'static str {
    match publishable {
        Some(_) => KeyKind::Publishable.as_str(),
        None => KeyKind::Secret.as_str(),
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
    created_at: String,
    revoked: bool,
    revoked_at: Option<String>,
    kind: &'static str,
    #[serde(flatten)]
    publishable: Option<Rules>,
}

pub(super) fn run(db_path: &Path, command: KeyCommand) -> anyhow::Result<Verdict> {
    let mut conn = db::open(db_path)?;
    let now = SystemTime::now();
    match command {
        KeyCommand::Create {
            account_id,
            publishable,
            origins,
            per_ip_minute,
        } => {
            let publishable = publishable.then(|| Publishable {
                origins,
                per_ip_minute: per_ip_minute.unwrap_or(DEFAULT_PER_IP_MINUTE),
            });
            let key = keys::create_key(&mut conn, &account_id, publishable.as_ref(), now)?;
            notify::announce(&conn);
            print(&NewKey {
                key_id: key.key_id,
                api_key: key.api_key.expose().to_owned(),
                kind: publishable.as_ref().map(|_| KeyKind::Publishable.as_str()),
                publishable: publishable.as_ref().map(Rules::of),
            })?;
        }
        KeyCommand::List { account_id } => {
            let keys = reports::keys(&mut conn, &account_id)?;
            print(&KeyList {
                account_id,
                keys: keys
                    .into_iter()
                    .map(|k| ListedKey {
                        key_id: k.key_id,
                        created_at: k.created_at,
                        revoked: k.revoked_at.is_some(),
                        revoked_at: k.revoked_at,
                        kind: kind(k.publishable.as_ref()),
                        publishable: k.publishable.as_ref().map(Rules::of),
                    })
                    .collect(),
            })?;
        }
        KeyCommand::Revoke { key_id } => {
            keys::revoke_key(&mut conn, &key_id, now)?;
            notify::announce(&conn);
            print(&Revoked {
                key_id,
                revoked: true,
            })?;
        }
    }
    Ok(Verdict::Success)
}

/// `postal key ... --ledger URL`: the same commands against the cluster's ledger; a new or
/// revoked key holds on every live node when the command returns.
pub(super) fn run_cluster(url: &str, command: KeyCommand) -> anyhow::Result<Verdict> {
    let now = SystemTime::now();
    cluster::run(url, async |client| {
        match command {
            KeyCommand::Create {
                account_id,
                publishable,
                origins,
                per_ip_minute,
            } => {
                let publishable = publishable.then(|| Publishable {
                    origins,
                    per_ip_minute: per_ip_minute.unwrap_or(DEFAULT_PER_IP_MINUTE),
                });
                let (key, version) =
                    admin::create_key(client, &account_id, publishable.as_ref(), now).await?;
                cluster::announce(client, version).await?;
                print(&NewKey {
                    key_id: key.key_id,
                    api_key: key.api_key.expose().to_owned(),
                    kind: publishable.as_ref().map(|_| KeyKind::Publishable.as_str()),
                    publishable: publishable.as_ref().map(Rules::of),
                })?;
            }
            KeyCommand::List { account_id } => {
                let keys = admin::keys(client, &account_id).await?;
                print(&KeyList {
                    account_id,
                    keys: keys
                        .into_iter()
                        .map(|k| ListedKey {
                            key_id: k.key_id,
                            created_at: k.created_at,
                            revoked: k.revoked_at.is_some(),
                            revoked_at: k.revoked_at,
                            kind: kind(k.publishable.as_ref()),
                            publishable: k.publishable.as_ref().map(Rules::of),
                        })
                        .collect(),
                })?;
            }
            KeyCommand::Revoke { key_id } => {
                let version = admin::revoke_key(client, &key_id, now).await?;
                cluster::announce(client, version).await?;
                print(&Revoked {
                    key_id,
                    revoked: true,
                })?;
            }
        }
        Ok(Verdict::Success)
    })
}
