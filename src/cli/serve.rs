//! `postal serve`: first-run set-up (dataset, first account), logging, then the API.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::Context;
use clap::{Args, ValueEnum};

use crate::api::ops::Operations;
use crate::db::pg::LedgerConfig;
use crate::db::{self, sqlite::accounts};

use crate::api::telemetry::AccessLog;

use super::Verdict;
use super::{access_log, log_writer};

#[derive(Args)]
pub(super) struct ServeArgs {
    #[arg(long, env = "POSTAL_LISTEN", default_value = "127.0.0.1:8080")]
    listen: String,
    /// Log lines on stderr: `text` for a person, `json` (one object a line) for a collector.
    #[arg(long, env = "POSTAL_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// When set, GET /metrics requires `Authorization: Bearer <token>`.
    #[arg(long, env = "POSTAL_METRICS_TOKEN", hide_env_values = true)]
    metrics_token: Option<String>,
    /// Write-behind: the longest time (ms) between a charge and its commit; a crash
    /// loses at most this interval's charges (docs/money.md).
    #[arg(long, env = "POSTAL_FLUSH_INTERVAL_MS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    flush_interval_ms: u64,
    /// Answer each billed request only after its charge is committed with
    /// synchronous=FULL (slower; nothing answered is ever lost).
    #[arg(long, env = "POSTAL_DURABLE_CHARGES")]
    durable_charges: bool,
    /// Proxies (an address or ADDRESS/PREFIX, repeatable; env: comma-separated) whose
    /// `X-Forwarded-For` names the client for publishable keys' per-IP limits; from any
    /// other peer the header is ignored.
    #[arg(long = "trusted-proxy", value_name = "CIDR", env = "POSTAL_TRUSTED_PROXIES",
          value_delimiter = ',', num_args = 1..)]
    trusted_proxies: Vec<crate::domain::cidr::Cidr>,
    /// Benchmarks only: answer the hot operations through poem's routing too (the way
    /// they were answered before `api::hot`), to compare the two in one binary.
    #[arg(long, hide = true)]
    without_hot_path: bool,
    /// The address customers reach the server at (`https://api.example.com`): the
    /// dashboard's sign-in redirect URIs are `{URL}/account/callback/{provider}`, and its
    /// session cookie is `__Host-` and Secure when it is https. Default: http:// and the
    /// address listened on.
    #[arg(long, env = "POSTAL_PUBLIC_URL", value_name = "URL",
          value_parser = |text: &str| match text.starts_with("https://") || text.starts_with("http://") {
              true => Ok(text.trim_end_matches('/').to_string()),
              false => Err(format!("not an http(s) URL: {text:?}")),
          })]
    public_url: Option<String>,
    /// Whether a first sign-in of an unknown identity makes an account (`open`) or is
    /// refused (`closed`: only identities already known sign in).
    #[arg(long, env = "POSTAL_SIGNUPS", value_enum, default_value_t = Signups::Open)]
    signups: Signups,
    /// Requests a minute one client address may make under /account (the dashboard, its
    /// API, sign-in, the Stripe webhook), changes a quarter of that; and one session to
    /// /account/api. Beyond: 429 with Retry-After.
    #[arg(long, env = "POSTAL_ACCOUNT_REQUESTS_PER_MINUTE", value_name = "N",
          default_value_t = crate::api::account::REQUESTS_PER_MINUTE,
          value_parser = clap::value_parser!(u32).range(1..))]
    account_requests_per_minute: u32,
    /// New accounts (each with the free allowance) that first sign-ins from one client
    /// address may make per UTC day, counted as the per-IP limits count (an IPv6 /64,
    /// X-Forwarded-For only from a --trusted-proxy) and kept in the store (every node,
    /// across restarts). Beyond: the sign-in is refused with 429; known identities still
    /// sign in.
    #[arg(long, env = "POSTAL_MAX_NEW_ACCOUNTS_PER_IP_DAY", value_name = "N",
          default_value_t = crate::domain::dashboard::NEW_ACCOUNTS_PER_IP_DAY)]
    max_new_accounts_per_ip_day: u32,
    /// Let customers' alert webhooks go to loopback, private and link-local addresses,
    /// and over plain http (tests, private networks). Off: https to public addresses only,
    /// checked when set and at each delivery (docs/alerts.md).
    #[arg(long, env = "POSTAL_ALLOW_PRIVATE_WEBHOOKS")]
    allow_private_webhooks: bool,
    /// The pause before a failed alert delivery is tried again the first time (tests).
    #[arg(long, hide = true, default_value_t = crate::accounts::sender::RETRY_BASE_MS)]
    alert_retry_base_ms: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Signups {
    Open,
    Closed,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Where `postal serve` finds the dataset on a fresh clone (the shared copy beside the
/// repository); without it, the upstream files.
const LOCAL_DATASET: &str = "../shared/geonames/allCountries.zip";

/// A database without postal data first gets the dataset, one without accounts gets a
/// first account whose key is printed once; then the API runs until Ctrl-C or SIGTERM.
pub(super) fn run(
    db_path: &Path,
    ledger: Option<LedgerConfig>,
    args: ServeArgs,
) -> anyhow::Result<Verdict> {
    let (access_log, _flushed_at_exit) = init_logging(args.log_format)?;
    let mut conn = db::open(db_path)?;
    if db::postal::coverage(&conn)?.records == 0 {
        let local = Path::new(LOCAL_DATASET);
        let sources = if local.exists() {
            vec![LOCAL_DATASET.to_string()]
        } else {
            Vec::new()
        };
        let shown = sources
            .first()
            .map_or(crate::import::UPSTREAM_POSTAL_CODES, String::as_str);
        eprintln!(
            "{} holds no postal data: importing {shown}",
            db_path.display()
        );
        let summary = crate::import::run(&crate::import::Options {
            db: db_path.to_path_buf(),
            sources,
            country_info: None,
            gazetteer: None,
            progress: std::io::stderr().is_terminal(),
            allow_shrink: false,
            overrides: None,
            if_changed: false,
        })?;
        eprintln!("{summary}");
    }
    // In cluster mode accounts live in the ledger: `postal account create --ledger`.
    if ledger.is_none() && accounts::account_count(&conn)? == 0 {
        let created =
            accounts::create_account(&mut conn, Some("first account"), SystemTime::now())?;
        println!(
            "created account {} with API key {} (shown once; balance {} USD)",
            created.account_id,
            created.api_key.expose(),
            created.balance
        );
    }
    drop(conn);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(crate::index::loader::READ_POOL_SIZE as usize)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let settings = crate::api::Settings {
        billing: crate::billing::BillingOptions {
            flush_interval: std::time::Duration::from_millis(args.flush_interval_ms),
            durable: args.durable_charges,
        },
        operations: Operations {
            metrics_token: args.metrics_token.map(Into::into),
        },
        access_log: Some(access_log),
        trusted_proxies: args.trusted_proxies,
        without_hot_path: args.without_hot_path,
        ledger,
        dataset: None,
        dashboard: crate::api::account::DashboardSettings {
            public_url: args.public_url,
            signups_closed: args.signups == Signups::Closed,
            requests_per_minute: Some(args.account_requests_per_minute),
            max_new_accounts_per_ip_day: Some(args.max_new_accounts_per_ip_day),
            allow_private_webhooks: args.allow_private_webhooks,
            alert_retry_base_ms: Some(args.alert_retry_base_ms),
        },
    };
    runtime.block_on(crate::api::serve(db_path, &args.listen, settings))?;
    Ok(Verdict::Success)
}

/// Logs to stderr at info (the level is fixed). Lines are written in batches by a thread
/// of their own (`log_writer`), so a request neither waits for a write(2) nor wakes a
/// thread; none is dropped. Requests log one access line each, formatted by
/// `access_log` in the subscriber's shape. The guard writes what is left when dropped, at
/// exit.
fn init_logging(
    format: LogFormat,
) -> anyhow::Result<(Arc<dyn AccessLog>, log_writer::Flusher<std::io::Stderr>)> {
    let (writer, flusher) =
        log_writer::batched(std::io::stderr()).context("starting the log writer thread")?;
    let builder = tracing_subscriber::fmt()
        .with_target(false)
        .with_writer(writer.clone());
    let access_format = match format {
        LogFormat::Text => {
            builder.with_ansi(std::io::stderr().is_terminal()).init();
            access_log::Format::Text
        }
        LogFormat::Json => {
            builder
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_span_list(false)
                .init();
            access_log::Format::Json
        }
    };
    Ok((
        Arc::new(access_log::Lines::new(access_format, writer)),
        flusher,
    ))
}
