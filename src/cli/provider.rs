//! `postal provider add|list|remove`: the OpenID Connect providers customers sign in to
//! the account dashboard with (docs/account.md).

use std::path::Path;

use clap::Subcommand;
use serde::Serialize;

use crate::db::admin::{AccountError, Provider};
use crate::db::pg::LedgerConfig;
use crate::domain::dashboard;
use crate::domain::ids::ProviderName;

use super::{BadInput, Verdict, cluster, now_unix, print};

#[derive(Subcommand)]
pub(super) enum ProviderCommand {
    /// Offer a provider on the sign-in page. Its redirect URI, to register at the
    /// provider, is `{--public-url}/account/callback/{NAME}`.
    Add {
        /// Its name in the redirect URI and on the sign-in page: a-z, 0-9 and '-'.
        name: String,
        /// The issuer URL; its `/.well-known/openid-configuration` is read at each sign-in.
        #[arg(long)]
        issuer: String,
        #[arg(long)]
        client_id: String,
        /// The environment variable holding the client secret (read now, never given on
        /// the command line, where `ps` would show it).
        #[arg(long, value_name = "VAR")]
        client_secret_env: String,
    },
    /// The providers offered, with their redirect URIs' paths (never a secret).
    List,
    /// Stop offering a provider; accounts keep the identities it signed in.
    Remove { name: String },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    name: String,
    issuer: String,
    client_id: String,
    redirect_path: String,
}

impl Listed {
    fn of(p: Provider) -> Listed {
        Listed {
            redirect_path: format!("/account/callback/{}", p.name),
            name: p.name.into(),
            issuer: p.issuer,
            client_id: p.client_id,
        }
    }
}

#[derive(Serialize)]
struct Providers {
    providers: Vec<Listed>,
}

#[derive(Serialize)]
struct Removed {
    name: String,
    removed: bool,
}

pub(super) fn run(
    db_path: &Path,
    ledger: Option<&LedgerConfig>,
    command: ProviderCommand,
) -> anyhow::Result<Verdict> {
    cluster::admin(db_path, ledger, async |admin| {
        match command {
            ProviderCommand::Add {
                name,
                issuer,
                client_id,
                client_secret_env,
            } => {
                let name = dashboard::provider_name(&name)
                    .map(ProviderName::new)
                    .map_err(|why| AccountError::Invalid(why.to_string()))?;
                let issuer_ok = issuer.starts_with("https://") || issuer.starts_with("http://");
                if !issuer_ok {
                    return Err(
                        BadInput(format!("--issuer must be an http(s) URL: {issuer:?}")).into(),
                    );
                }
                let client_secret = std::env::var(&client_secret_env).map_err(|_| {
                    BadInput(format!(
                        "the environment variable {client_secret_env} is not set"
                    ))
                })?;
                if client_id.trim().is_empty() || client_secret.is_empty() {
                    return Err(
                        BadInput("the client id and secret must not be empty".into()).into(),
                    );
                }
                let provider = Provider {
                    name,
                    issuer: issuer.trim_end_matches('/').to_owned(),
                    client_id,
                    client_secret: client_secret.into(),
                };
                admin.add_provider(&provider, now_unix()).await?;
                print(&Listed::of(provider))?;
            }
            ProviderCommand::List => {
                let providers = admin.providers().await?;
                print(&Providers {
                    providers: providers.into_iter().map(Listed::of).collect(),
                })?;
            }
            ProviderCommand::Remove { name } => {
                if !admin
                    .remove_provider(&ProviderName::new(name.clone()))
                    .await?
                {
                    return Err(BadInput(format!("no provider {name:?}")).into());
                }
                print(&Removed {
                    name,
                    removed: true,
                })?;
            }
        }
        Ok(Verdict::Success)
    })
}
