//! The HTTP API: poem + poem-openapi, exact to `postal-api.md`.
//!
//! Where each request's work runs (the first performance decision of the API):
//! - **Postal answers come from memory** (`index::postal`): lookup, metacode, validate
//!   and bulk are hash lookups, on the async worker. SQLite drops a connection's page cache
//!   after every commit of another connection (the billing writer commits hundreds of
//!   times a second), so reading them from the file cost more than everything else.
//! - **Authentication and charging are in memory** (`billing`): a hash lookup and an
//!   addition under a mutex on the async worker; the ledger is written behind by the
//!   billing writer thread (docs/money.md). No request waits on the pool or a commit,
//!   except with `--durable-charges`, where it awaits the commit of its charge.
//! - **City search and suggestions come from memory too** (`index::city`, loaded and
//!   swapped with the postal index): microseconds, on the async worker.
//! - **Bounded under overload:** at most `max_in_flight` billed requests at once; beyond
//!   it a 503 with `Retry-After` (`billed`). Charges pending a flush are bounded by
//!   (accounts x endpoints), not by requests.

mod access;
pub mod account;
mod billed;
pub mod contract;
mod envelope;
mod error;
mod get;
pub(crate) mod hot;
mod http_errors;
pub(crate) mod once;
pub mod ops;
mod reply;
pub mod routes;
pub mod server;
pub(crate) mod telemetry;
pub mod types;
pub mod widget;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::time::Duration;

use anyhow::{Context, Result};
use poem::http::StatusCode;
use poem::listener::{Acceptor, Listener, TcpListener};
use poem::{Endpoint, EndpointExt, Response, Route, get};
use poem_openapi::OpenApiService;

pub use error::ApiError;
pub use routes::Apis;

use crate::billing::notify;
use crate::billing::per_ip::PerIpLimiter;
use crate::billing::{Billing, BillingOptions};
use crate::domain::charge::AccountStatus;
use crate::domain::cidr::Cidr;
use crate::index::loader::{self, Slot};
use crate::index::postal::PostalIndex;
use envelope::Timings;

/// Default cap on billed requests in flight (`Settings::max_in_flight`).
pub const MAX_IN_FLIGHT: usize = 4096;

/// Title of the OpenAPI document.
pub const TITLE: &str = "postal: postal-code data API";

/// What the handlers share: the postal data in memory, a read pool and the billing books.
/// Every API of the service holds it behind one `Arc`.
pub struct State {
    /// The dataset, swapped whole when an import commits (see `index::loader`).
    postal: Slot,
    /// Dropped with the server: the loader thread then stops at once.
    _loader: std::sync::mpsc::SyncSender<()>,
    /// Reads of the file beside the index (`/readyz`'s database check).
    file: loader::FileCheck,
    billing: Billing,
    in_flight: AtomicUsize,
    max_in_flight: usize,
    /// Requests refused 503 because `max_in_flight` were running (for metrics).
    overloaded: AtomicU64,
    /// Publishable keys' requests a minute per client IP.
    per_ip: PerIpLimiter,
    trusted_proxies: Vec<Cidr>,
}

impl State {
    fn new(
        postal: Slot,
        loader: std::sync::mpsc::SyncSender<()>,
        file: loader::FileCheck,
        billing: Billing,
    ) -> State {
        State {
            postal,
            _loader: loader,
            file,
            billing,
            in_flight: AtomicUsize::new(0),
            max_in_flight: MAX_IN_FLIGHT,
            overloaded: AtomicU64::new(0),
            per_ip: PerIpLimiter::default(),
            trusted_proxies: Vec::new(),
        }
    }

    /// The dataset as it is now.
    fn postal(&self) -> Arc<PostalIndex> {
        loader::current(&self.postal)
    }

    /// Balance and windows as they stand, charging nothing (the free /api/aboutapi and
    /// /api/countries), for the key of `body` (`missing_text` when it has none).
    fn status<T>(
        &self,
        body: &contract::ContractJson<T>,
        missing_text: &str,
        endpoint: crate::domain::charge::Endpoint,
        timings: &mut Timings,
    ) -> Result<AccountStatus, ApiError> {
        let key = self.authenticate(body.api_key(missing_text)?, timings)?;
        self.check_access(&body.meta, &key, endpoint)?;
        self.billing
            .status(key.caller)
            .map_err(|_| ApiError::invalid_api_key())
    }
}

/// How Swagger UI and generated clients group the operations.
#[derive(poem_openapi::Tags)]
pub enum ApiTags {
    /// What a postal code is: its place, region and coordinates.
    #[oai(rename = "Postal codes")]
    PostalCodes,
    /// Postal codes by place name.
    Cities,
    /// Whether postal codes exist, one or a thousand at a time.
    Validation,
    /// What is near a point or a code, and how far.
    Geography,
    /// The service itself: version, coverage, countries, your balance (free).
    Service,
    /// The account dashboard's API, for a signed-in customer (the session cookie, set by
    /// signing in at /account): keys, limits, usage, ledger, sessions, audit log.
    #[oai(rename = "Account dashboard")]
    Account,
}

/// What the document says of itself beyond its operations.
const DESCRIPTION: &str = "Look up, validate and search postal codes of 120 countries. \
Every request is a POST with a JSON body; the reads a checkout form makes on every \
keystroke (lookup, places, city, suggest) also answer GET with query parameters. Every \
answered query costs 0.000028 USD from your prepaid balance.\n\n\
**Authentication.** The API key as `Authorization: Bearer KEY` or `X-Api-Key: KEY` (the \
security schemes), else the body's `apiKey` (or `key` of a GET); a header wins. Secret \
keys (`sk_`, and the older `pk_`) are for servers; publishable keys (`pub_`) are bound to \
the origins of your web pages and reach only the operations a form needs.\n\n\
**Data.** Postal-code data from GeoNames (https://www.geonames.org), licensed under \
CC BY 4.0 (https://creativecommons.org/licenses/by/4.0/); credit GeoNames wherever you show it.";

/// The OpenAPI service; its handlers find the `State` in the request's data
/// (`app` adds it), so the document is generated without one.
pub fn service() -> OpenApiService<Apis, ()> {
    OpenApiService::new(routes::apis(), TITLE, env!("CARGO_PKG_VERSION"))
        .description(DESCRIPTION)
        .license(
            poem_openapi::LicenseObject::new("MIT (the code); data: GeoNames, CC BY 4.0")
                .url("https://opensource.org/license/mit"),
        )
        .server(
            // Relative: the server that serves this document (Swagger UI's "Try it out"
            // then calls the same origin, whatever --listen says).
            poem_openapi::ServerObject::new("/")
                .description("the postal server that serves this document"),
        )
}

/// The OpenAPI document as committed in `openapi.yaml`.
pub fn spec_yaml() -> String {
    service().spec_yaml()
}

/// The OpenAPI document as served at `/openapi.json`.
pub fn spec_json() -> String {
    service().spec()
}

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
        .data(dashboard)
        .with(account::SecurityHeaders)
        .around(http_errors::json_errors)
        .with(access::Cors)
        .with(telemetry::Telemetry(observer));
    (endpoint, hot)
}

fn json_error(status: StatusCode, text: &str) -> Response {
    Response::builder()
        .status(status)
        .content_type("application/json; charset=utf-8")
        .body(serde_json::json!({ "error": text }).to_string())
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
    pub ledger: Option<String>,
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
        Some(url) => Billing::start_cluster(db_path, url, settings.billing),
        None => Billing::start(db_path, settings.billing),
    }
}

/// Serves the API on `listen` until Ctrl-C or SIGTERM.
pub async fn serve(db_path: &Path, listen: &str, settings: Settings) -> Result<()> {
    let shutdown = shutdown_signal();
    // Take the file first: a second server is refused before it binds a port.
    let billing = start_billing(db_path, &settings)?;
    let acceptor = TcpListener::bind(listen.to_string())
        .into_acceptor()
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let bound = acceptor
        .local_addr()
        .first()
        .map_or(listen.to_string(), |a| {
            a.to_string().trim_start_matches("socket://").to_string()
        });
    tracing::info!("listening on http://{bound} (Swagger UI at /docs)");
    tracing::info!(
        "checkout widget: {} (integrity {})",
        widget::versioned_path(),
        widget::integrity()
    );
    run(acceptor, db_path, billing, settings, shutdown).await
}

/// Serves the API on `acceptor` until `shutdown` completes; in-flight requests finish
/// (30 s at most) and every charge is flushed before it returns.
pub async fn serve_with(
    acceptor: impl Acceptor + 'static,
    db_path: &Path,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let billing = start_billing(db_path, &settings)?;
    run(acceptor, db_path, billing, settings, shutdown).await
}

async fn run(
    acceptor: impl Acceptor + 'static,
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
            let bound = acceptor.local_addr().first().map_or(String::new(), |a| {
                a.to_string().trim_start_matches("socket://").to_string()
            });
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
        let dashboard = account::Dashboard::new(
            db_path.to_path_buf(),
            settings.ledger.clone(),
            public_url,
            &settings.dashboard,
            settings.trusted_proxies.clone(),
        );
        let (app, hot) = app(state, settings.operations, access_log, dashboard);
        server::run(
            acceptor,
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
