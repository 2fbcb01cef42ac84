//! `postal mail smtp|show|off|test`: the operator's mail relay, through which customers
//! get their e-mail alerts (docs/alerts.md, "The operator's mail relay").

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde::Serialize;

use crate::alerts::mail::{self, MailSettings, Mailer};
use crate::db::pg::LedgerConfig;

use super::{BadInput, SecretSource, Verdict, cluster, now_unix, print};

#[derive(Subcommand)]
pub(super) enum MailCommand {
    /// Send e-mail alerts through this SMTP relay. Checked without connecting (`mail test`
    /// connects); the password is read from a file (mode 0600) or the environment, never
    /// from the command line, and kept in the database.
    Smtp {
        /// `smtp://HOST[:PORT]` (STARTTLS, port 587 by default) or `smtps://HOST[:PORT]`
        /// (implicit TLS, 465). Off loopback the relay must offer TLS, and its certificate
        /// is verified.
        #[arg(long, value_name = "URL")]
        url: String,
        /// The From of every message: `billing@example.com` or `"Postal
        /// <billing@example.com>"`.
        #[arg(long, value_name = "MAILBOX")]
        from: String,
        /// The user the relay's AUTH takes (PLAIN or LOGIN); with a password.
        #[arg(long, value_name = "NAME")]
        user: Option<String>,
        #[command(flatten)]
        password: Password,
    },
    /// The relay in force (never its password).
    Show,
    /// Remove the relay: e-mail alerts are off.
    Off,
    /// Send "Postal: test message" to ADDRESS through the relay; print its reply.
    Test {
        /// The recipient: `someone@example.com`.
        #[arg(value_name = "ADDRESS")]
        address: String,
    },
}

/// The relay's password, with `--user`.
#[derive(Args)]
#[group(required = false, multiple = false)]
pub(super) struct Password {
    /// The file holding the relay's password (mode 0600 or stricter, its trailing newline
    /// ignored).
    #[arg(long, value_name = "PATH")]
    password_file: Option<PathBuf>,
    /// The environment variable holding the relay's password, for a secret manager that
    /// exports variables.
    #[arg(long, value_name = "VAR")]
    password_env: Option<String>,
}

/// The settings as printed: the password only as whether there is one.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Shown {
    enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<String>,
    /// `(set)` or `(none)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    password: Option<&'static str>,
    /// When the relay was set, Unix seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    updated_at: Option<i64>,
    /// Without a relay: what that means.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'static str>,
}

const NO_RELAY: &str = "no mail relay is set: e-mail alerts are off";

impl Shown {
    fn of(settings: Option<MailSettings>) -> Shown {
        match settings {
            None => Shown {
                enabled: false,
                url: None,
                from: None,
                user: None,
                password: None,
                updated_at: None,
                note: Some(NO_RELAY),
            },
            Some(s) => Shown {
                enabled: true,
                password: Some(match s.password {
                    Some(_) => "(set)",
                    None => "(none)",
                }),
                url: Some(s.url),
                from: Some(s.sender),
                user: s.username,
                updated_at: Some(s.updated_at),
                note: None,
            },
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Off {
    enabled: bool,
    was_enabled: bool,
}

#[derive(Serialize)]
struct Sent<'a> {
    to: &'a str,
    /// The relay's reply line: `250 2.0.0 Ok: queued as ...`.
    reply: String,
}

const TEST_SUBJECT: &str = "Postal: test message";
const TEST_TEXT: &str = "This is a test message from postal (`postal mail test`): the \
    operator's mail relay works, and e-mail alerts to customers will be sent through it.\n";

pub(super) fn run(
    db_path: &Path,
    ledger: Option<&LedgerConfig>,
    command: MailCommand,
) -> anyhow::Result<Verdict> {
    cluster::admin(db_path, ledger, async |admin| {
        match command {
            MailCommand::Smtp {
                url,
                from,
                user,
                password,
            } => {
                let settings = settings(url, from, user, &password)?;
                admin.set_mail(&settings).await?;
                print(&Shown::of(Some(settings)))?;
            }
            MailCommand::Show => print(&Shown::of(admin.mail_settings().await?))?,
            MailCommand::Off => {
                let was_enabled = admin.clear_mail().await?;
                print(&Off {
                    enabled: false,
                    was_enabled,
                })?;
            }
            MailCommand::Test { address } => {
                mail::check_recipient(&address).map_err(BadInput)?;
                let settings = admin.mail_settings().await?.ok_or(BadInput(format!(
                    "{NO_RELAY}; set one with `postal mail smtp`"
                )))?;
                let mailer = Mailer::new(&settings).map_err(BadInput)?;
                // The relay's reply, or why it failed (the system's, exit 1), after at most
                // the mailer's timeout per step.
                let reply = mailer
                    .send(&address, TEST_SUBJECT, TEST_TEXT)
                    .map_err(|why| anyhow::anyhow!("the relay did not take the message: {why}"))?;
                print(&Sent {
                    to: address.trim(),
                    reply,
                })?;
            }
        }
        Ok(Verdict::Success)
    })
}

/// The settings the operator gave, checked (nothing connected), the password read.
fn settings(
    url: String,
    from: String,
    user: Option<String>,
    password: &Password,
) -> Result<MailSettings, BadInput> {
    mail::check(&url, &from).map_err(BadInput)?;
    let given = password.password_file.is_some() || password.password_env.is_some();
    let password = match (&user, given) {
        (Some(_), true) => {
            let (secret, _) = SecretSource {
                file: password.password_file.as_deref(),
                env: password.password_env.as_deref(),
                what: "the relay's password file",
            }
            .read()?;
            Some(secret.trim_end_matches(['\r', '\n']).to_owned())
        }
        (None, false) => None,
        (Some(_), false) => {
            return Err(BadInput(
                "--user needs the relay's password: --password-file PATH or --password-env VAR"
                    .into(),
            ));
        }
        (None, true) => {
            return Err(BadInput(
                "--password-file and --password-env need --user".into(),
            ));
        }
    };
    let user = user.map(|u| u.trim().to_owned());
    if user.as_deref() == Some("") {
        return Err(BadInput("--user is empty".into()));
    }
    Ok(MailSettings {
        url: url.trim().to_owned(),
        sender: from.trim().to_owned(),
        username: user,
        password,
        updated_at: now_unix(),
    })
}
