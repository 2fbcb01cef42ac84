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
mod app;
mod billed;
mod code_records;
pub mod contract;
mod envelope;
mod error;
mod get;
pub(crate) mod hot;
mod http_errors;
pub(crate) mod once;
pub mod ops;
mod reply;
pub(crate) use reply::json_string;
pub mod routes;
pub mod server;
mod state;
pub(crate) mod telemetry;
pub mod types;
pub mod widget;

use poem::Response;
use poem::http::StatusCode;
use poem_openapi::OpenApiService;

pub use app::{Dataset, Settings, serve, serve_with};
pub use error::{ApiError, Documented, OperationError};
pub use routes::Apis;
use state::State;

/// Default cap on billed requests in flight (`Settings::max_in_flight`).
pub const MAX_IN_FLIGHT: usize = 4096;

/// Title of the OpenAPI document.
pub const TITLE: &str = "postal: postal-code data API";

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

fn json_error(status: StatusCode, text: &str) -> Response {
    Response::builder()
        .status(status)
        .content_type("application/json; charset=utf-8")
        .body(serde_json::json!({ "error": text }).to_string())
}
