//! `ApiError`: the one way an error leaves the API, with the contract's status and text.

use std::marker::PhantomData;

use poem::{IntoResponse, Response};
use poem_openapi::payload::Json;
use poem_openapi::registry::{MetaResponses, Registry};
use poem_openapi::{ApiResponse, Object};

/// Every non-2xx body: `{"error": "<text of postal-api.md>"}`.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct ErrorBody {
    /// The contract's error text.
    pub error: String,
}

impl poem_openapi::types::Example for ErrorBody {
    fn example() -> Self {
        ErrorBody {
            error: "ZIP code not found".to_string(),
        }
    }
}

/// The body of a 404: the error text and, for a postal code an import removed, what it was.
#[derive(Debug, Clone, Object)]
pub struct NotFoundBody {
    /// The contract's error text.
    pub error: String,
    /// Only for a code that an import of the dataset removed (docs/dataset.md): its last
    /// place and the day it went. Absent for a code that never existed.
    #[oai(skip_serializing_if_is_none)]
    pub retired: Option<RetiredCode>,
}

/// A postal code an import removed from the dataset and none brought back.
#[derive(Debug, Clone, PartialEq, Eq, Object, serde::Serialize)]
#[oai(example)]
pub struct RetiredCode {
    /// The UTC day of the import that removed it (`YYYY-MM-DD`).
    pub since: String,
    /// Its (first) place before it was removed.
    pub city: String,
}

impl poem_openapi::types::Example for RetiredCode {
    fn example() -> Self {
        RetiredCode {
            since: "2026-11-25".to_string(),
            city: "Beverly Hills".to_string(),
        }
    }
}

impl RetiredCode {
    pub fn of(retired: &crate::index::history::Retired) -> RetiredCode {
        RetiredCode {
            since: crate::domain::date::UtcDate::of_unix(retired.since).to_string(),
            city: retired.city.to_string(),
        }
    }
}

/// The body of a 409: `{"error": ...}`, as every error's.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct InProgressBody {
    /// `A request with this Idempotency-Key is still in progress; retry shortly`.
    pub error: String,
}

impl poem_openapi::types::Example for InProgressBody {
    fn example() -> Self {
        InProgressBody {
            error: super::once::IN_PROGRESS.to_string(),
        }
    }
}

/// The body of a 422: `{"error": ...}`, as every error's.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct KeyReusedBody {
    /// `Idempotency-Key already used with a different request body`, `Idempotency-Key
    /// already used on /api/<operation>`, or, for the same request whose answer was over
    /// 2 MiB and not kept, `The answer to this Idempotency-Key was too large to keep and
    /// cannot be replayed; send the request with a new key to run it again`.
    pub error: String,
}

impl poem_openapi::types::Example for KeyReusedBody {
    fn example() -> Self {
        KeyReusedBody {
            error: super::once::OTHER_BODY.to_string(),
        }
    }
}

/// The body of a 429: the error text and the whole seconds to wait (also in `Retry-After`).
#[derive(Debug, Clone, Object)]
pub struct RateLimitedBody {
    /// `Rate limit exceeded`, or for the bulk endpoint `Rate limit would be exceeded by this bulk request`.
    pub error: String,
    /// Seconds until the earliest blocking window ends (>= 1).
    #[oai(rename = "retryAfter")]
    pub retry_after: u64,
}

/// Every error response of the API, and what the OpenAPI document says of each: an
/// operation documents all of them but [`IDEMPOTENCY_STATUSES`], which only the operations
/// that take an `Idempotency-Key` answer (`ApiError::idempotency_meta`).
#[derive(Debug)]
pub struct ApiError(Status);

/// The statuses only a request with an `Idempotency-Key` gets.
const IDEMPOTENCY_STATUSES: [u16; 2] = [409, 422];

/// The statuses only dashboard operations answer (each documenting its own: `Documented`).
const DASHBOARD_STATUSES: [u16; 1] = [502];

#[derive(Debug, ApiResponse)]
enum Status {
    /// Missing or invalid parameters, or a body that is not a JSON object.
    #[oai(status = 400)]
    BadRequest(Json<ErrorBody>),
    /// The API key does not exist or was revoked.
    #[oai(status = 401)]
    Unauthorized(Json<ErrorBody>),
    /// The balance does not cover the cost of the request; nothing was charged.
    #[oai(status = 402)]
    PaymentRequired(Json<ErrorBody>),
    /// The key may not be used here (docs/browser.md); nothing was charged: a publishable
    /// key from an origin it does not list (`Origin not allowed for this key`) or on an
    /// operation a form does not need (`Operation not allowed for a publishable key`), or
    /// a secret key from another site's page.
    #[oai(status = 403)]
    Forbidden(Json<ErrorBody>),
    /// Postal code or city not found (lookup, metacode, city); nothing was charged. A code
    /// an import removed carries `retired`.
    #[oai(status = 404)]
    NotFound(Json<NotFoundBody>),
    /// A request with this `Idempotency-Key` is still being answered (`A request with this
    /// Idempotency-Key is still in progress; retry shortly`); nothing was charged. Retry it
    /// once the first has its answer: you then get that answer.
    #[oai(status = 409)]
    Conflict(Json<InProgressBody>),
    /// The request body is larger than 1 MiB.
    #[oai(status = 413)]
    PayloadTooLarge(Json<ErrorBody>),
    /// The `Idempotency-Key` was used in the last 24 hours for another request (`Idempotency-Key
    /// already used with a different request body`, or `Idempotency-Key already used on
    /// /api/<operation>`), or its answer was too large to keep (over 2 MiB: it was sent
    /// once, charged once, and is not replayed); nothing was charged. Send a new key for a
    /// new request.
    #[oai(status = 422)]
    UnprocessableEntity(Json<KeyReusedBody>),
    /// A rate-limit window of the account is full; nothing was charged.
    #[oai(status = 429)]
    TooManyRequests(
        Json<RateLimitedBody>,
        /// Same number as `retryAfter`.
        #[oai(header = "Retry-After")]
        u64,
    ),
    /// Internal server error; nothing was charged.
    #[oai(status = 500)]
    Internal(Json<ErrorBody>),
    /// An outside service answered what this server does not pass on (the dashboard's
    /// payment processor; never an `/api` operation's).
    #[oai(status = 502)]
    BadGateway(Json<ErrorBody>),
    /// Overloaded, or the ledger cannot be written for now; nothing was charged. Retry
    /// after `Retry-After` seconds.
    #[oai(status = 503)]
    ServiceUnavailable(
        Json<ErrorBody>,
        /// Seconds to wait before retrying.
        #[oai(header = "Retry-After")]
        u64,
    ),
}

fn body(text: &str) -> Json<ErrorBody> {
    Json(ErrorBody {
        error: text.to_string(),
    })
}

impl ApiError {
    pub fn bad_request(text: impl AsRef<str>) -> ApiError {
        ApiError(Status::BadRequest(body(text.as_ref())))
    }

    /// A 401 with its own text (the dashboard's `Not signed in`).
    pub fn unauthorized(text: &str) -> ApiError {
        ApiError(Status::Unauthorized(body(text)))
    }

    pub fn invalid_api_key() -> ApiError {
        ApiError(Status::Unauthorized(body("Invalid API key")))
    }

    pub fn payment_required(text: &str) -> ApiError {
        ApiError(Status::PaymentRequired(body(text)))
    }

    pub fn forbidden(text: &str) -> ApiError {
        ApiError(Status::Forbidden(body(text)))
    }

    pub fn not_found(text: &str) -> ApiError {
        ApiError(Status::NotFound(Json(NotFoundBody {
            error: text.to_string(),
            retired: None,
        })))
    }

    /// `404 ZIP code not found`, with what the code was when an import removed it.
    pub fn zip_not_found(retired: Option<&crate::index::history::Retired>) -> ApiError {
        ApiError(Status::NotFound(Json(NotFoundBody {
            error: "ZIP code not found".to_string(),
            retired: retired.map(RetiredCode::of),
        })))
    }

    /// 409: another request holds the `Idempotency-Key` (`api::once`).
    pub fn conflict(text: &str) -> ApiError {
        ApiError(Status::Conflict(Json(InProgressBody {
            error: text.to_string(),
        })))
    }

    /// 422: the `Idempotency-Key` was used for another request (`api::once`).
    pub fn unprocessable(text: impl AsRef<str>) -> ApiError {
        ApiError(Status::UnprocessableEntity(Json(KeyReusedBody {
            error: text.as_ref().to_string(),
        })))
    }

    pub fn too_large() -> ApiError {
        ApiError(Status::PayloadTooLarge(body("Request body too large")))
    }

    pub fn rate_limited(text: &str, retry_after: u64) -> ApiError {
        let retry_after = retry_after.max(1);
        ApiError(Status::TooManyRequests(
            Json(RateLimitedBody {
                error: text.to_string(),
                retry_after,
            }),
            retry_after,
        ))
    }

    /// 503 with `Retry-After`: overloaded, or billing cannot record charges for now.
    pub fn unavailable(text: &str, retry_after: u64) -> ApiError {
        ApiError(Status::ServiceUnavailable(body(text), retry_after.max(1)))
    }

    /// A failure of the service itself: logged with its cause, answered without it.
    pub fn internal(cause: anyhow::Error) -> ApiError {
        let request_id = super::telemetry::current_request_id();
        tracing::error!(request_id = %request_id, "internal error: {cause:#}");
        ApiError(Status::Internal(body("Internal server error")))
    }

    /// 502: an outside service's answer refused (logged by the caller with its cause).
    pub fn bad_gateway(text: &str) -> ApiError {
        ApiError(Status::BadGateway(body(text)))
    }

    /// Whether the service failed (500, 502, 503), not the request.
    pub fn is_server_error(&self) -> bool {
        matches!(
            self.0,
            Status::Internal(_) | Status::BadGateway(_) | Status::ServiceUnavailable(..)
        )
    }

    /// The error's HTTP status.
    pub fn status(&self) -> poem::http::StatusCode {
        use poem::http::StatusCode as S;
        match &self.0 {
            Status::BadRequest(_) => S::BAD_REQUEST,
            Status::Unauthorized(_) => S::UNAUTHORIZED,
            Status::PaymentRequired(_) => S::PAYMENT_REQUIRED,
            Status::Forbidden(_) => S::FORBIDDEN,
            Status::NotFound(_) => S::NOT_FOUND,
            Status::Conflict(_) => S::CONFLICT,
            Status::PayloadTooLarge(_) => S::PAYLOAD_TOO_LARGE,
            Status::UnprocessableEntity(_) => S::UNPROCESSABLE_ENTITY,
            Status::TooManyRequests(..) => S::TOO_MANY_REQUESTS,
            Status::Internal(_) => S::INTERNAL_SERVER_ERROR,
            Status::BadGateway(_) => S::BAD_GATEWAY,
            Status::ServiceUnavailable(..) => S::SERVICE_UNAVAILABLE,
        }
    }

    /// The error's text (`{"error": ...}`).
    pub fn text(&self) -> &str {
        match &self.0 {
            Status::BadRequest(b)
            | Status::Unauthorized(b)
            | Status::PaymentRequired(b)
            | Status::Forbidden(b)
            | Status::PayloadTooLarge(b)
            | Status::Internal(b)
            | Status::BadGateway(b)
            | Status::ServiceUnavailable(b, _) => &b.0.error,
            Status::NotFound(b) => &b.0.error,
            Status::Conflict(b) => &b.0.error,
            Status::UnprocessableEntity(b) => &b.0.error,
            Status::TooManyRequests(b, _) => &b.0.error,
        }
    }

    /// The documented responses of the statuses only an `Idempotency-Key` gets (409, 422),
    /// for the operations that take one.
    pub(super) fn idempotency_meta() -> MetaResponses {
        let mut meta = Status::meta();
        meta.responses
            .retain(|r| r.status.is_some_and(|s| IDEMPOTENCY_STATUSES.contains(&s)));
        meta
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.0.into_response()
    }
}

impl ApiResponse for ApiError {
    fn meta() -> MetaResponses {
        let mut meta = Status::meta();
        meta.responses.retain(|r| {
            !r.status.is_some_and(|s| {
                IDEMPOTENCY_STATUSES.contains(&s) || DASHBOARD_STATUSES.contains(&s)
            })
        });
        meta
    }

    fn register(registry: &mut Registry) {
        Status::register(registry);
    }
}

impl From<ApiError> for poem::Error {
    fn from(error: ApiError) -> poem::Error {
        error.0.into()
    }
}

/// The error statuses an operation can answer, each with what the document says of it:
/// for operations that answer fewer than the API's, in their own words (the dashboard's,
/// which never answer the API's 401 and 402).
pub trait Documented {
    /// Status and description (which gives the texts), in no particular order.
    const ERRORS: &'static [(u16, &'static str)];
}

/// An `ApiError` of an operation that documents only the statuses and texts of `D`: the
/// same response, the same one shape (`{"error": ...}`).
pub struct OperationError<D>(ApiError, PhantomData<fn() -> D>);

impl<D> From<ApiError> for OperationError<D> {
    fn from(error: ApiError) -> Self {
        OperationError(error, PhantomData)
    }
}

impl<D> std::fmt::Debug for OperationError<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<D> IntoResponse for OperationError<D> {
    fn into_response(self) -> Response {
        self.0.into_response()
    }
}

impl<D> From<OperationError<D>> for poem::Error {
    fn from(error: OperationError<D>) -> poem::Error {
        error.0.into()
    }
}

impl<D: Documented> ApiResponse for OperationError<D> {
    fn meta() -> MetaResponses {
        let mut meta = Status::meta();
        meta.responses.retain_mut(|response| {
            let documented = D::ERRORS
                .iter()
                .find(|(status, _)| response.status == Some(*status));
            if let Some((_, description)) = documented {
                response.description = description;
            }
            documented.is_some()
        });
        meta
    }

    fn register(registry: &mut Registry) {
        Status::register(registry);
    }
}
