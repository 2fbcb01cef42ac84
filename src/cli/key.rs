//! `postal key create|list|revoke`.

use std::path::Path;
use std::time::SystemTime;

use clap::Subcommand;
use serde::Serialize;

use postal::billing::notify;
use postal::db::{self, keys, reports};

use super::{Verdict, print};

#[derive(Subcommand)]
pub(super) enum KeyCommand {
    /// A new key for the account; the key is shown once.
    Create { account_id: String },
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
}

pub(super) fn run(db_path: &Path, command: KeyCommand) -> anyhow::Result<Verdict> {
    let mut conn = db::open(db_path)?;
    let now = SystemTime::now();
    match command {
        KeyCommand::Create { account_id } => {
            let key = keys::create_key(&mut conn, &account_id, now)?;
            notify::announce(&conn);
            print(&NewKey {
                key_id: key.key_id,
                api_key: key.api_key.expose().to_owned(),
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
