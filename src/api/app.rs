//! The server: the application (`app`), how `postal serve` runs (`Settings`, `serve`),
//! and the signals that stop it.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use poem::{Endpoint, EndpointExt, Route, get};

use super::state::State;
use super::{access, account, hot, http_errors, ops, server, service, telemetry, widget};
use crate::billing::notify;
use crate::billing::{Billing, BillingOptions};
use crate::domain::cidr::Cidr;
use crate::index::loader;
use crate::index::postal::PostalIndex;

/// The whole HTTP application: the API (its handlers read `state` as request data), the
/// document at `/openapi.json`, Swagger UI at `/docs`, the operator's `/healthz`,
/// `/readyz` and `/metrics`, the checkout widget `/widget.js`, JSON bodies for every
/// error (`http_errors`); every request observed by `telemetry` (request id, access log,
/// metrics).
///
/// And the same application's answers to its hottest operation before poem's routing
/// (`hot`), with the same state and observer.
fn app(
    state: State,
    operations: ops::Operations,
    access_log: Arc<dyn telemetry::AccessLog>,
    dashboard: Arc<account::Dashboard>,
) -> (impl Endpoint, hot::Hot) {
    let metrics = Arc::new(telemetry::Metrics::for_node(
        state.billing.node_id().is_some(),
    ));
    let ops = ops::Ops::new(&state, operations, metrics.clone());
    let api = service();
    let docs = api.swagger_ui();
    let spec = api.spec_endpoint();
    let state = Arc::new(state);
    let observer = telemetry::Observer {
        metrics,
        access_log,
    };
    let hot = hot::Hot::new(state.clone(), observer.clone());
    let endpoint = account::pages(Route::new())
        .nest("/", api)
        .nest("/docs", docs)
        .at("/openapi.json", spec)
        .at("/healthz", get(ops::healthz))
        .at("/readyz", get(ops::readyz).data(ops.clone()))
        .at("/metrics", get(ops::scrape).data(ops))
        .at("/widget.js", get(widget::widget))
        .at(widget::versioned_path(), get(widget::widget_immutable))
        .data(state)
        .data(dashboard.clone())
        .with(account::Visits(dashboard))
        .with(account::SecurityHeaders)
        .around(http_errors::json_errors)
        .with(access::Cors)
        .with(telemetry::Telemetry(observer));
    (endpoint, hot)
}

/// How `postal serve` runs (its flags).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub billing: BillingOptions,
    /// The operator's routes (e.g. a bearer token for /metrics).
    pub operations: ops::Operations,
    /// Where the access lines go; `None`: `tracing` events ([`telemetry::TracingAccessLog`]).
    pub access_log: Option<Arc<dyn telemetry::AccessLog>>,
    /// Peers whose `X-Forwarded-For` names the client (`--trusted-proxy`).
    pub trusted_proxies: Vec<Cidr>,
    /// Answer every request through poem's routing, the hot operations too (`hot`): the
    /// tests compare the two ways of answering.
    pub without_hot_path: bool,
    /// Cluster mode: accounts, keys and the ledger in this PostgreSQL (`--ledger`), the
    /// file holding only the postal data (docs/cluster.md). `None`: the file holds all.
    pub ledger: Option<crate::billing::LedgerConfig>,
    /// A dataset already in memory, loaded from a copy of this file: answered from instead
    /// of loading the file's. The tests start about 150 servers on copies of a few
    /// databases and load each once. Only the generation is checked (a file whose
    /// generation differs loads its own), so the caller vouches that the data is the
    /// same. `None` (`postal serve`): the file's.
    pub dataset: Option<Dataset>,
    /// The account dashboard's public URL and sign-up policy.
    pub dashboard: account::DashboardSettings,
}

/// A dataset loaded once and shared by servers (`Settings::dataset`).
#[derive(Clone)]
pub struct Dataset(pub Arc<crate::index::postal::PostalIndex>);

impl std::fmt::Debug for Dataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Dataset(generation {})", self.0.loaded_generation())
    }
}

impl Dataset {
    /// The dataset of the database at `path`, loaded now.
    pub fn load(path: &Path) -> Result<Dataset> {
        Ok(Dataset(Arc::new(PostalIndex::open(path)?)))
    }
}

/// The books on the file, or on the cluster's ledger.
fn start_billing(db_path: &Path, settings: &Settings) -> Result<Billing> {
    match &settings.ledger {
        Some(ledger) => Billing::start_cluster(db_path, ledger, settings.billing),
        None => Billing::start(db_path, settings.billing),
    }
}

/// Serves the API on `listen` until Ctrl-C or SIGTERM.
pub async fn serve(db_path: &Path, listen: &str, settings: Settings) -> Result<()> {
    let shutdown = shutdown_signal();
    // Take the file first: a second server is refused before it binds a port.
    let billing = start_billing(db_path, &settings)?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .and_then(tokio::net::TcpListener::into_std)
        .with_context(|| format!("listening on {listen}"))?;
    let bound = listener
        .local_addr()
        .map_or(listen.to_string(), |a| a.to_string());
    tracing::info!("listening on http://{bound} (Swagger UI at /docs)");
    tracing::info!(
        "checkout widget: {} (integrity {})",
        widget::versioned_path(),
        widget::integrity()
    );
    run(listener, db_path, billing, settings, shutdown).await
}

/// Serves the API on `listener` (non-blocking) until `shutdown` completes; in-flight
/// requests finish (30 s at most) and every charge is flushed before it returns.
pub async fn serve_with(
    listener: std::net::TcpListener,
    db_path: &Path,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let billing = start_billing(db_path, &settings)?;
    run(listener, db_path, billing, settings, shutdown).await
}

async fn run(
    listener: std::net::TcpListener,
    db_path: &Path,
    billing: Billing,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let served = async {
        let _changes = notify::Listener::start(db_path, billing.clone());
        let (postal, loader, file) =
            loader::start(db_path, settings.dataset.clone().map(|d| d.0)).await?;
        let mut state = State::new(postal, loader, file, billing.clone());
        state.trusted_proxies = settings.trusted_proxies.clone();
        let access_log = settings
            .access_log
            .unwrap_or_else(|| Arc::new(telemetry::TracingAccessLog));
        let public_url = settings.dashboard.public_url.clone().unwrap_or_else(|| {
            let bound = listener
                .local_addr()
                .map_or(String::new(), |a| a.to_string());
            // A wildcard address is no address a browser can be sent back to.
            let bound = match bound.rsplit_once(':') {
                Some(("0.0.0.0" | "[::]", port)) => {
                    tracing::warn!(
                        "the account dashboard's sign-in redirects to http://127.0.0.1:{port}; \
                         set --public-url to the address customers reach"
                    );
                    format!("127.0.0.1:{port}")
                }
                _ => bound,
            };
            format!("http://{bound}")
        });
        tracing::info!("account dashboard at {public_url}/account");
        let accounts =
            crate::accounts::Accounts::open(db_path, settings.ledger.as_ref(), billing.clone())?;
        let dashboard = account::Dashboard::new(
            accounts,
            billing.clone(),
            public_url,
            &settings.dashboard,
            settings.trusted_proxies.clone(),
        );
        let (app, hot) = app(state, settings.operations, access_log, dashboard);
        server::run(
            listener,
            app,
            (!settings.without_hot_path).then_some(hot),
            server::Limits::default(),
            shutdown,
            Duration::from_secs(30),
        )
        .await
        .context("serving HTTP")
    }
    .await;
    // Flush every charge, whether serving ended cleanly or not.
    billing.shutdown();
    served
}

/// Resolves on Ctrl-C or SIGTERM. The handlers are installed when this is called (not
/// when first polled), so a signal during start-up still stops the server cleanly.
fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let signals = {
        use tokio::signal::unix::{SignalKind, signal};
        (
            signal(SignalKind::interrupt()).ok(),
            signal(SignalKind::terminate()).ok(),
        )
    };
    async move {
        #[cfg(unix)]
        {
            let (mut interrupt, mut terminate) = signals;
            let interrupted = async {
                match interrupt.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let terminated = async {
                match terminate.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = interrupted => {},
                _ = terminated => {},
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        tracing::info!("shutting down: finishing in-flight requests, then flushing charges");
    }
}
