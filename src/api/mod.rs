//! The HTTP API: poem + poem-openapi, exact to `postal-api.md`.
//!
//! Where each request's work runs (the first performance decision of the API):
//! - **Postal answers come from memory** (`db::postal_index`): lookup, metacode, validate
//!   and bulk are hash lookups, on the async worker. SQLite drops a connection's page cache
//!   after every commit of another connection (the billing writer commits hundreds of
//!   times a second), so reading them from the file cost more than everything else.
//! - **Authentication is one indexed read on the async worker** (key and account in one
//!   statement); handing a read of microseconds to `spawn_blocking` costs more than the
//!   read (stack.md section 4: 19 µs a round trip).
//! - **City search and suggestions come from memory too** (`db::city_index`, loaded and
//!   swapped with the postal index): microseconds, on the async worker.
//! - **Charges go to the billing thread** (`db::billing`) through a channel; the handler
//!   awaits the answer, so a worker never blocks on a commit, and one commit carries all
//!   the charges that arrived meanwhile.

mod contract;
mod endpoints;
mod envelope;
mod error;
mod suggest;
mod types;

use std::future::Future;
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use std::time::{Instant, SystemTime};

use anyhow::{Context, Result};
use poem::http::StatusCode;
use poem::listener::{Acceptor, Listener, TcpListener};
use poem::{Endpoint, EndpointExt, Response, Route, Server};
use poem_openapi::OpenApiService;

pub use endpoints::PostalApi;
pub use error::ApiError;
pub use suggest::SuggestApi;

use crate::db;
use crate::db::accounts::{AccountStatus, Caller, ChargeState};
use crate::db::billing::{Billing, Charge, Charged, Refusal};
use crate::db::postal_index::PostalIndex;
use crate::domain::api_key::hash_presented_key;
use endpoints::Billed;
use envelope::Timings;

/// How often the server looks for a dataset committed by `postal-import`.
const DATASET_CHECK: Duration = Duration::from_secs(1);

/// Title of the OpenAPI document.
pub const TITLE: &str = "postal: postal-code data API";

/// What the handlers share: the postal data in memory, two read pools and the billing writer.
pub struct State {
    /// The dataset, swapped whole when an import commits (see `watch_dataset`).
    postal: Arc<RwLock<Arc<PostalIndex>>>,
    /// Authentication on the async workers: held for microseconds, never waited on long.
    pool: db::Pool,
    /// Long reads on the blocking threads (dataset reload): their own connections, so
    /// that slow work can never take every connection from the short reads.
    slow_pool: db::Pool,
    billing: Billing,
}

/// Who is asking, and their account as it stood when the request arrived.
pub(crate) struct Session {
    caller: Caller,
    account: ChargeState,
}

impl State {
    pub fn new(
        postal: PostalIndex,
        pool: db::Pool,
        slow_pool: db::Pool,
        billing: Billing,
    ) -> State {
        State {
            postal: Arc::new(RwLock::new(Arc::new(postal))),
            pool,
            slow_pool,
            billing,
        }
    }

    /// The dataset as it is now.
    fn postal(&self) -> Arc<PostalIndex> {
        match self.postal.read() {
            Ok(index) => index.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Every `DATASET_CHECK` reads the file's dataset generation; when an import has
    /// committed a new one, loads it on a blocking thread and swaps it in. Until then the
    /// old data answers, as a reader of the file would see it before the commit.
    fn watch_dataset(&self) {
        let postal = self.postal.clone();
        let pool = self.slow_pool.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(DATASET_CHECK).await;
                let pool = pool.clone();
                let loaded = match postal.read() {
                    Ok(index) => index.loaded_generation(),
                    Err(poisoned) => poisoned.into_inner().loaded_generation(),
                };
                let fresh = tokio::task::spawn_blocking(move || -> Result<Option<PostalIndex>> {
                    let conn = pool.get()?;
                    if PostalIndex::generation(&conn)? == loaded {
                        return Ok(None);
                    }
                    PostalIndex::load(&conn).map(Some)
                })
                .await;
                match fresh {
                    Ok(Ok(Some(index))) => {
                        tracing::info!("new dataset loaded: {:?}", index.coverage());
                        if let Ok(mut slot) = postal.write() {
                            *slot = Arc::new(index);
                        }
                    }
                    Ok(Ok(None)) => {}
                    Ok(Err(e)) => tracing::error!("reloading the dataset: {e:#}"),
                    Err(e) => tracing::error!("reloading the dataset: {e}"),
                }
            }
        });
    }

    /// 401 unless the key exists and is not revoked; reads the account in the same
    /// statement, on a pooled connection that sees every commit.
    fn authenticate(&self, api_key: &str, timings: &mut Timings) -> Result<Session, ApiError> {
        let t = Instant::now();
        let hash = hash_presented_key(api_key);
        let found = self
            .pool
            .get()
            .map_err(|e| ApiError::internal(e.into()))
            .and_then(|c| {
                db::accounts::authenticate_account(&c, &hash).map_err(ApiError::internal)
            });
        timings.auth += t.elapsed();
        let (caller, account) = found?.ok_or_else(ApiError::invalid_api_key)?;
        Ok(Session { caller, account })
    }

    /// 402 / 429 before any work, from the account as read at authentication, so that a
    /// request which would end in 404 still answers 402 or 429 first (decisions.md, order
    /// of checks). Nothing is written; the charge re-checks in the writer's transaction.
    fn precheck(
        &self,
        session: &Session,
        queries: u64,
        texts: Billed,
        timings: &mut Timings,
    ) -> Result<(), ApiError> {
        let t = Instant::now();
        let verdict = session.account.admits(queries, SystemTime::now());
        timings.rate_limit_check += t.elapsed();
        verdict
            .map(|_| ())
            .map_err(|refusal| refused(refusal, texts))
    }

    /// Charges `queries` durably (group commit) and answers the new balance and windows.
    async fn charge(
        &self,
        session: &Session,
        queries: u64,
        endpoint: &'static str,
        texts: Billed,
        timings: &mut Timings,
    ) -> Result<Charged, ApiError> {
        let t = Instant::now();
        let charge = Charge {
            caller: session.caller,
            queries,
            endpoint,
        };
        let verdict = self.billing.charge(charge).await;
        timings.balance += t.elapsed();
        verdict
            .map_err(ApiError::internal)?
            .map_err(|refusal| refused(refusal, texts))
    }

    /// Balance and windows as they stood (the free /api/aboutapi).
    fn status(&self, session: &Session) -> AccountStatus {
        session.account.status(SystemTime::now())
    }
}

fn refused(refusal: Refusal, texts: Billed) -> ApiError {
    match refusal {
        Refusal::InvalidKey => ApiError::invalid_api_key(),
        Refusal::InsufficientBalance => ApiError::payment_required(texts.insufficient()),
        Refusal::RateLimited { retry_after_secs } => {
            ApiError::rate_limited(texts.rate_limited(), retry_after_secs)
        }
    }
}

/// The OpenAPI service over `state` (`None`: only to generate the document).
pub fn service(state: Option<State>) -> OpenApiService<(PostalApi, SuggestApi), ()> {
    let state = state.map(Arc::new);
    let apis = (
        PostalApi {
            state: state.clone(),
        },
        SuggestApi { state },
    );
    OpenApiService::new(apis, TITLE, env!("CARGO_PKG_VERSION")).description(
        "Look up, validate and search postal codes of 120 countries (GeoNames data, CC BY 4.0). \
             Every request is a POST with a JSON body carrying your `apiKey`; every answered query \
             costs 0.000028 USD from your prepaid balance.",
    )
}

/// The OpenAPI document as committed in `openapi.yaml`.
pub fn spec_yaml() -> String {
    service(None).spec_yaml()
}

/// The OpenAPI document as served at `/openapi.json`.
pub fn spec_json() -> String {
    service(None).spec()
}

/// The whole HTTP application: the API, `/openapi.json`, Swagger UI at `/docs`, and JSON
/// bodies for 404 / 405.
pub fn app(state: State) -> impl Endpoint {
    let api = service(Some(state));
    let docs = api.swagger_ui();
    let spec = api.spec_endpoint();
    Route::new()
        .nest("/", api)
        .nest("/docs", docs)
        .at("/openapi.json", spec)
        .catch_all_error(|err: poem::Error| async move {
            if err.is_from_response() {
                return err.into_response();
            }
            let (status, text) = match err.status() {
                StatusCode::NOT_FOUND => (StatusCode::NOT_FOUND, "Not found"),
                StatusCode::METHOD_NOT_ALLOWED => {
                    (StatusCode::METHOD_NOT_ALLOWED, "Method not allowed")
                }
                StatusCode::PAYLOAD_TOO_LARGE => {
                    (StatusCode::PAYLOAD_TOO_LARGE, "Request body too large")
                }
                StatusCode::BAD_REQUEST => (StatusCode::BAD_REQUEST, contract::INVALID_JSON),
                _ => (StatusCode::INTERNAL_SERVER_ERROR, "Internal server error"),
            };
            json_error(status, text)
        })
}

fn json_error(status: StatusCode, text: &str) -> Response {
    Response::builder()
        .status(status)
        .content_type("application/json; charset=utf-8")
        .body(serde_json::json!({ "error": text }).to_string())
}

/// Serves the API on `listen` until Ctrl-C or SIGTERM.
pub async fn serve(db_path: &Path, listen: &str) -> Result<()> {
    let acceptor = TcpListener::bind(listen.to_string())
        .into_acceptor()
        .await
        .with_context(|| format!("listening on {listen}"))?;
    tracing::info!("listening on http://{listen} (Swagger UI at /docs)");
    serve_with(acceptor, db_path, shutdown_signal()).await
}

/// Serves the API on `acceptor` until `shutdown` completes; in-flight requests finish
/// (30 s at most) and pending charges are committed before it returns.
pub async fn serve_with(
    acceptor: impl Acceptor + 'static,
    db_path: &Path,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let billing = Billing::start(db_path)?;
    let pool = db::pool(db_path, 8)?;
    let postal = PostalIndex::load(&*pool.get()?)?;
    let state = State::new(postal, pool, db::pool(db_path, 8)?, billing.clone());
    state.watch_dataset();
    let app = app(state);
    Server::new_with_acceptor(acceptor)
        .run_with_graceful_shutdown(app, shutdown, Some(std::time::Duration::from_secs(30)))
        .await
        .context("serving HTTP")?;
    billing.shutdown();
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
    tracing::info!("shutting down: finishing in-flight requests");
}
