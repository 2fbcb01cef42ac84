//! `postal payments stripe|show|off`: top-ups by card in the account dashboard, through
//! the operator's Stripe account (docs/payments.md).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use secrecy::ExposeSecret;
use serde::Serialize;
use serde_json::Number;

use crate::db::admin::PaymentSettings;
use crate::db::pg::LedgerConfig;
use crate::domain::money::{MIN_TOPUP, Micros};
use crate::domain::payments::DEFAULT_MAX_TOPUP;

use super::{BadInput, SecretSource, Verdict, cluster, now_unix, outside_url, print};

#[derive(Subcommand)]
pub(super) enum PaymentsCommand {
    /// Take top-ups by card with Stripe Checkout. Stripe's webhook endpoint is
    /// `{--public-url}/account/stripe/webhook`; subscribe it to the events docs/payments.md
    /// lists. Secrets are read from files (mode 0600) or the environment, never from the
    /// command line, and kept in the database.
    Stripe {
        #[command(flatten)]
        secret_key: SecretKey,
        #[command(flatten)]
        webhook_secret: WebhookSecret,
        /// Stripe's API, or a proxy in front of it: https, or http only to a loopback host.
        #[arg(long, value_name = "URL", default_value = "https://api.stripe.com")]
        api_base: String,
        /// The largest top-up a customer may start, USD.
        #[arg(long, value_name = "USD", default_value = "1000")]
        max_topup: String,
    },
    /// The settings in force (never a secret).
    Show,
    /// Stop taking top-ups by card.
    Off,
}

/// Stripe's secret key: a restricted key (`rk_live_…`, `rk_test_…`) with only
/// Checkout Sessions: Write, or (warned about) a full secret key (`sk_…`).
#[derive(Args)]
#[group(required = true, multiple = false)]
pub(super) struct SecretKey {
    /// The file holding the secret key (mode 0600 or stricter, its trailing newline
    /// ignored).
    #[arg(long, value_name = "PATH")]
    secret_key_file: Option<PathBuf>,
    /// The environment variable holding the secret key, for a secret manager that exports
    /// variables.
    #[arg(long, value_name = "VAR")]
    secret_key_env: Option<String>,
}

/// The webhook endpoint's signing secret (`whsec_…`).
#[derive(Args)]
#[group(required = true, multiple = false)]
pub(super) struct WebhookSecret {
    /// The file holding the webhook endpoint's signing secret (mode 0600 or stricter, its
    /// trailing newline ignored).
    #[arg(long, value_name = "PATH")]
    webhook_secret_file: Option<PathBuf>,
    /// The environment variable holding the webhook endpoint's signing secret.
    #[arg(long, value_name = "VAR")]
    webhook_secret_env: Option<String>,
}

/// What a full secret key (`sk_…`) is told: it can do anything on the Stripe account,
/// while this server only creates and reads Checkout Sessions
/// (`accounts::stripe::create_session`, `retrieve_session`).
const FULL_KEY_WARNING: &str = "holds a full secret key (sk_…), which can do anything on \
    the Stripe account; use a restricted key (rk_…) allowed only Checkout Sessions: Write \
    (Stripe's Dashboard, Developers → API keys → Create restricted key)";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Shown {
    enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    processor: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_base: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_topup: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    webhook_path: Option<&'static str>,
    /// The secret key's mode, from its prefix (`live`, `test`), never the key.
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<&'static str>,
}

impl Shown {
    fn of(settings: Option<PaymentSettings>) -> Shown {
        match settings {
            None => Shown {
                enabled: false,
                processor: None,
                api_base: None,
                max_topup: None,
                webhook_path: None,
                mode: None,
            },
            Some(s) => Shown {
                enabled: true,
                processor: Some("stripe"),
                mode: Some(key_mode(s.secret_key.expose_secret())),
                api_base: Some(s.api_base),
                max_topup: Some(s.max_topup.to_json_number()),
                webhook_path: Some(WEBHOOK_PATH),
            },
        }
    }
}

const WEBHOOK_PATH: &str = "/account/stripe/webhook";

fn key_mode(key: &str) -> &'static str {
    match key.split('_').nth(1) {
        Some("live") => "live",
        Some("test") => "test",
        _ => "unknown",
    }
}

#[derive(Serialize)]
struct Off {
    enabled: bool,
    #[serde(rename = "wasEnabled")]
    was_enabled: bool,
}

pub(super) fn run(
    db_path: &Path,
    ledger: Option<&LedgerConfig>,
    command: PaymentsCommand,
) -> anyhow::Result<Verdict> {
    cluster::admin(db_path, ledger, async |admin| {
        match command {
            PaymentsCommand::Stripe {
                secret_key,
                webhook_secret,
                api_base,
                max_topup,
            } => {
                let (secret_key, key_source) = SecretSource {
                    file: secret_key.secret_key_file.as_deref(),
                    env: secret_key.secret_key_env.as_deref(),
                    what: "the Stripe secret key file",
                }
                .read()?;
                let (webhook_secret, webhook_source) = SecretSource {
                    file: webhook_secret.webhook_secret_file.as_deref(),
                    env: webhook_secret.webhook_secret_env.as_deref(),
                    what: "the Stripe webhook secret file",
                }
                .read()?;
                let (secret_key, webhook_secret) = (secret_key.trim(), webhook_secret.trim());
                match secret_key.split('_').next() {
                    Some("rk") => {}
                    Some("sk") => eprintln!("warning: {key_source} {FULL_KEY_WARNING}"),
                    _ => {
                        return Err(BadInput(format!(
                            "{key_source} does not hold a Stripe secret or restricted key \
                             (sk_… or rk_…)"
                        ))
                        .into());
                    }
                }
                if !webhook_secret.starts_with("whsec_") {
                    return Err(BadInput(format!(
                        "{webhook_source} does not hold a webhook signing secret (whsec_…)"
                    ))
                    .into());
                }
                outside_url("--api-base", &api_base)?;
                let max_topup = Micros::parse_usd(&max_topup)
                    .ok()
                    .filter(|m| *m >= MIN_TOPUP && m.get() % 10_000 == 0)
                    .ok_or_else(|| {
                        BadInput(format!(
                            "--max-topup must be whole cents of at least {MIN_TOPUP} USD \
                             (default {DEFAULT_MAX_TOPUP}): {max_topup:?}"
                        ))
                    })?;
                let settings = PaymentSettings {
                    secret_key: secret_key.to_owned().into(),
                    webhook_secret: webhook_secret.to_owned().into(),
                    api_base: api_base.trim_end_matches('/').to_owned(),
                    max_topup,
                };
                admin.set_payments(&settings, now_unix()).await?;
                print(&Shown::of(Some(settings)))?;
            }
            PaymentsCommand::Show => print(&Shown::of(admin.payments().await?))?,
            PaymentsCommand::Off => {
                let was_enabled = admin.payments_off().await?;
                print(&Off {
                    enabled: false,
                    was_enabled,
                })?;
            }
        }
        Ok(Verdict::Success)
    })
}
