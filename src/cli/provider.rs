//! `postal provider add|list|remove`: the providers customers sign in to the account
//! dashboard with (docs/account.md): any OpenID Connect issuer, Google, Microsoft (any
//! tenant, or some) and GitHub (OAuth, not OpenID Connect).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde::Serialize;

use crate::db::admin::{AccountError, Provider};
use crate::db::pg::LedgerConfig;
use crate::domain::dashboard::{self, ProviderKind};
use crate::domain::ids::ProviderName;

use super::{BadInput, SecretSource, Verdict, cluster, now_unix, outside_url, print};

#[derive(Subcommand)]
pub(super) enum ProviderCommand {
    /// Offer a provider on the sign-in page. Its redirect URI, to register at the
    /// provider, is `{--public-url}/account/callback/{NAME}`.
    Add {
        /// Its name in the redirect URI and on the sign-in page: a-z, 0-9 and '-'.
        name: String,
        /// How it signs customers in: `oidc` (any OpenID Connect issuer, `--issuer`),
        /// `google`, `microsoft` (`--tenant`) or `github` (`--github-url`).
        #[arg(long, default_value = "oidc", value_parser = kind)]
        kind: ProviderKind,
        /// The issuer URL; its `/.well-known/openid-configuration` is read at each sign-in.
        /// Required for `oidc`; for `microsoft`, the base of `{URL}/{tenant}/v2.0` (default
        /// https://login.microsoftonline.com: other clouds, tests). https, or http only to
        /// a loopback host; so must be every endpoint its discovery document names.
        #[arg(long)]
        issuer: Option<String>,
        #[arg(long)]
        client_id: String,
        #[command(flatten)]
        client_secret: ClientSecret,
        /// `github`: the GitHub's address, for GitHub Enterprise Server (its API is
        /// `{URL}/api/v3`; github.com's is https://api.github.com). https, or http only to a
        /// loopback host.
        #[arg(long, value_name = "URL")]
        github_url: Option<String>,
        /// `github`: only members of this organization sign in (repeatable: of any);
        /// asks the `read:org` scope.
        #[arg(long, value_name = "ORG")]
        allowed_org: Vec<String>,
        /// `microsoft`: `common` (any account, work or personal), `organizations`,
        /// `consumers`, or a tenant's id or domain.
        #[arg(long, value_name = "TENANT")]
        tenant: Option<String>,
        /// `microsoft`: only accounts of this tenant id (a GUID) sign in (repeatable: of
        /// any).
        #[arg(long, value_name = "ID")]
        allowed_tenant: Vec<String>,
    },
    /// The providers offered, with their redirect URIs' paths (never a secret).
    List,
    /// Stop offering a provider; accounts keep the identities it signed in.
    Remove { name: String },
}

/// The client secret, read now and kept in the database; never on the command line, where
/// `ps` and the shell's history would show it.
#[derive(Args)]
#[group(required = true, multiple = false)]
pub(super) struct ClientSecret {
    /// The file holding the client secret (mode 0600 or stricter, its trailing newline
    /// ignored).
    #[arg(long, value_name = "PATH")]
    client_secret_file: Option<PathBuf>,
    /// The environment variable holding the client secret, for a secret manager that
    /// exports variables.
    #[arg(long, value_name = "VAR")]
    client_secret_env: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    name: String,
    kind: &'static str,
    issuer: String,
    client_id: String,
    redirect_path: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    allowed: Vec<String>,
}

impl Listed {
    fn of(p: Provider) -> Listed {
        Listed {
            redirect_path: format!("/account/callback/{}", p.name),
            name: p.name.into(),
            kind: p.kind.as_str(),
            issuer: p.issuer,
            client_id: p.client_id,
            allowed: p.allowed,
        }
    }
}

fn kind(text: &str) -> Result<ProviderKind, String> {
    ProviderKind::from_stored(text).ok_or_else(|| {
        let kinds: Vec<&str> = ProviderKind::ALL.iter().map(|k| k.as_str()).collect();
        format!("one of {}", kinds.join(", "))
    })
}

/// A URL this server may call (`outside_url`) as given, without its trailing '/'.
fn url(flag: &str, text: &str) -> Result<String, BadInput> {
    Ok(outside_url(flag, text)?.trim_end_matches('/').to_owned())
}

/// What `provider add` was given beyond the name and the client, checked for its kind.
struct Place {
    kind: ProviderKind,
    issuer: Option<String>,
    github_url: Option<String>,
    allowed_org: Vec<String>,
    tenant: Option<String>,
    allowed_tenant: Vec<String>,
}

impl Place {
    /// The issuer (or GitHub's address) and who may sign in; a flag of another kind is
    /// refused rather than ignored.
    fn resolve(self) -> Result<(String, Vec<String>), BadInput> {
        let not_for = |flag: &str| {
            BadInput(format!(
                "{flag} is not an option of --kind {}",
                self.kind.as_str()
            ))
        };
        let allowed =
            |names: &[String], flag: &str| {
                names
                    .iter()
                    .map(|n| {
                        dashboard::allowed_name(n).map(str::to_owned).ok_or_else(|| {
                        BadInput(format!(
                            "{flag} must be 1 to 100 of a-z, A-Z, 0-9, '-', '.' and '_': {n:?}"
                        ))
                    })
                    })
                    .collect::<Result<Vec<_>, _>>()
            };
        if self.kind != ProviderKind::Github {
            if self.github_url.is_some() {
                return Err(not_for("--github-url"));
            }
            if !self.allowed_org.is_empty() {
                return Err(not_for("--allowed-org"));
            }
        }
        if self.kind != ProviderKind::Microsoft {
            if self.tenant.is_some() {
                return Err(not_for("--tenant"));
            }
            if !self.allowed_tenant.is_empty() {
                return Err(not_for("--allowed-tenant"));
            }
        }
        match self.kind {
            ProviderKind::Oidc => {
                let issuer = self
                    .issuer
                    .ok_or_else(|| BadInput("--kind oidc needs --issuer URL".into()))?;
                Ok((url("--issuer", &issuer)?, Vec::new()))
            }
            ProviderKind::Google => match self.issuer {
                Some(_) => Err(not_for("--issuer")),
                None => Ok((dashboard::GOOGLE_ISSUER.to_owned(), Vec::new())),
            },
            ProviderKind::Github => {
                if self.issuer.is_some() {
                    return Err(not_for("--issuer"));
                }
                let github = self.github_url.as_deref().unwrap_or(dashboard::GITHUB_URL);
                Ok((
                    url("--github-url", github)?,
                    allowed(&self.allowed_org, "--allowed-org")?,
                ))
            }
            ProviderKind::Microsoft => {
                let base = self.issuer.as_deref().unwrap_or(dashboard::MICROSOFT_BASE);
                let tenant = self.tenant.as_deref().unwrap_or("common");
                let tenant = dashboard::allowed_name(tenant)
                    .ok_or_else(|| BadInput(format!("--tenant is not a tenant: {tenant:?}")))?;
                Ok((
                    format!("{}/{tenant}/v2.0", url("--issuer", base)?),
                    self.allowed_tenant
                        .iter()
                        .map(|t| {
                            dashboard::tenant_id(t).ok_or_else(|| {
                                BadInput(format!(
                                    "--allowed-tenant must be a tenant id (a GUID): {t:?}"
                                ))
                            })
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                ))
            }
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
                kind,
                issuer,
                client_id,
                client_secret,
                github_url,
                allowed_org,
                tenant,
                allowed_tenant,
            } => {
                let name = dashboard::provider_name(&name)
                    .map(ProviderName::new)
                    .map_err(|why| AccountError::Invalid(why.to_string()))?;
                let (issuer, allowed) = Place {
                    kind,
                    issuer,
                    github_url,
                    allowed_org,
                    tenant,
                    allowed_tenant,
                }
                .resolve()?;
                let (client_secret, _) = SecretSource {
                    file: client_secret.client_secret_file.as_deref(),
                    env: client_secret.client_secret_env.as_deref(),
                    what: "the client secret file",
                }
                .read()?;
                if client_id.trim().is_empty() || client_secret.is_empty() {
                    return Err(
                        BadInput("the client id and secret must not be empty".into()).into(),
                    );
                }
                let provider = Provider {
                    name,
                    kind,
                    issuer,
                    client_id,
                    client_secret: client_secret.into(),
                    allowed,
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
                    .remove_provider(&ProviderName::new(name.clone()), now_unix())
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
