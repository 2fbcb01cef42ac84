//! Idempotent bulk requests (docs/money.md, "Idempotent bulk requests"): the
//! `Idempotency-Key` header of `/api/validate-bulk` and `/api/nearest-bulk`, the step of
//! the billed path that replays a stored answer or claims the key, and the answer stored
//! byte for byte.
//!
//! A lost answer to a 1,000-record request is retried with the same key and body: the
//! retry gets the first answer again (its `balance` is the balance of then), with
//! `Idempotent-Replayed: true`, charged nothing; its queries count in the account's
//! windows, so replays are no way around the limits. The rules (the
//! IETF httpapi draft "The Idempotency-Key HTTP Header Field", as Stripe applies it):
//! - the key: 1 to 255 visible ASCII characters (`domain::idempotency`), scoped to the
//!   account; a malformed one (or two headers) is `400 Invalid Idempotency-Key: 1 to 255
//!   visible ASCII characters`, checked after the API key, with the other parameters;
//! - the same key with another body within 24 hours: `422 Idempotency-Key already used
//!   with a different request body`; on the other bulk operation: `422 Idempotency-Key
//!   already used on /api/<operation>`;
//! - while the first request with the key runs: `409 A request with this Idempotency-Key
//!   is still in progress; retry shortly` (the retry would otherwise run the work twice);
//! - only 200s are stored: an error charges nothing, so its retry simply runs again;
//! - an answer over [`MAX_STORED_ANSWER`] bytes is sent but not kept: a retry gets
//!   `422` [`NOT_KEPT`].

use std::sync::Arc;
use std::time::SystemTime;

use poem::http::HeaderValue;
use poem::{IntoResponse, Request, RequestBody, Response};
use poem_openapi::registry::{
    MetaHeader, MetaParamIn, MetaResponses, MetaSchema, MetaSchemaRef, Registry,
};
use poem_openapi::types::ToJSON;
use poem_openapi::{ApiExtractor, ApiExtractorType, ApiResponse, ExtractParamOptions};

use super::State;
use super::billed::{Billed, Operation, Path, refused};
use super::contract::{ContractJson, Requested};
use super::error::ApiError;
use super::reply::{Enveloped, JsonBody, Reply, set_rate_limit_headers};
use crate::billing::{Claim, ClaimedKey};
use crate::domain::charge::Caller;
use crate::domain::charge::Endpoint;
use crate::domain::idempotency::{IdempotencyKey, MAX_KEY_CHARS};

/// The request header.
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";
/// The header of a replayed answer.
pub const REPLAYED: &str = "Idempotent-Replayed";
/// 400: a key that is not 1 to 255 visible ASCII characters, or two keys.
pub const INVALID_KEY: &str = "Invalid Idempotency-Key: 1 to 255 visible ASCII characters";
/// 409: the first request with the key has not answered yet.
pub const IN_PROGRESS: &str =
    "A request with this Idempotency-Key is still in progress; retry shortly";
/// 422: the key was used with another body.
pub const OTHER_BODY: &str = "Idempotency-Key already used with a different request body";
/// 422: the answer of the key's request was larger than [`MAX_STORED_ANSWER`] bytes, so
/// it was not kept (the request was charged once; running it again is a new request).
pub const NOT_KEPT: &str = "The answer to this Idempotency-Key was too large to keep and cannot be replayed; send the request with a new key to run it again";

/// The largest answer kept for a retry: 2 MiB. A validate-bulk or verify-bulk of 1,000
/// records is about 0.2 MB; a nearest-bulk of 1,000 points with many neighbours can be
/// 15 MB, which would sit in memory until its flush and in the file for a day, and make
/// that flush slow (289 ms seen for 14.4 MB). A larger answer is sent, not kept: its key
/// keeps an empty body, which a retry reads as [`NOT_KEPT`].
pub const MAX_STORED_ANSWER: usize = 2 * 1024 * 1024;

/// The `Idempotency-Key` header as sent; read on the billed path, after the API key.
pub struct IdempotencyHeader(Sent);

enum Sent {
    Absent,
    One(HeaderValue),
    Several,
}

impl IdempotencyHeader {
    /// The key (`None` without the header), or 400.
    pub(super) fn key(&self) -> Result<Option<IdempotencyKey>, ApiError> {
        match &self.0 {
            Sent::Absent => Ok(None),
            Sent::One(value) => IdempotencyKey::parse(value.as_bytes())
                .map(Some)
                .ok_or_else(|| ApiError::bad_request(INVALID_KEY)),
            Sent::Several => Err(ApiError::bad_request(INVALID_KEY)),
        }
    }
}

/// The document's example of a key.
pub fn example_key() -> String {
    "0b9c2f6e-4d1a-4e37-9a8c-5f2e7d4c1b03".to_string()
}

impl<'a> ApiExtractor<'a> for IdempotencyHeader {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::Parameter];
    type ParamType = String;
    type ParamRawType = ();

    fn param_in() -> Option<MetaParamIn> {
        Some(MetaParamIn::Header)
    }

    fn param_schema_ref() -> Option<MetaSchemaRef> {
        Some(MetaSchemaRef::Inline(Box::new(MetaSchema {
            min_length: Some(1),
            max_length: Some(MAX_KEY_CHARS),
            pattern: Some("^[!-~]+$".to_string()),
            ..MetaSchema::new("string")
        })))
    }

    async fn from_request(
        request: &'a Request,
        _body: &mut RequestBody,
        _options: ExtractParamOptions<String>,
    ) -> poem::Result<Self> {
        let mut values = request.headers().get_all(IDEMPOTENCY_KEY).iter();
        let sent = match (values.next(), values.next()) {
            (None, _) => Sent::Absent,
            (Some(value), None) => Sent::One(value.clone()),
            (Some(_), Some(_)) => Sent::Several,
        };
        Ok(IdempotencyHeader(sent))
    }
}

/// What the idempotency step found: run the request under the claimed key, or send the
/// stored answer.
pub(super) enum Keyed {
    Run(ClaimedKey),
    Replay(Vec<u8>),
}

/// The 200 of an operation that takes an `Idempotency-Key`: `T` as `Reply<T>` sends it,
/// or, under a key, the bytes stored for a retry (the first answer sends the very bytes
/// a retry will get).
pub enum Replayable<T> {
    /// Without a key.
    Fresh(T),
    /// Answered now under a key, with its `RateLimit` headers.
    Stored {
        body: Vec<u8>,
        rate_limit: Option<(String, String)>,
    },
    /// A retry: the stored answer, `Idempotent-Replayed: true`. No `RateLimit` headers:
    /// they describe the windows after a billed answer, and a replay is not one.
    Replayed(Vec<u8>),
}

impl<T: JsonBody + Enveloped + Send> IntoResponse for Replayable<T> {
    fn into_response(self) -> Response {
        let json = |body: Vec<u8>| {
            Response::builder()
                .content_type("application/json; charset=utf-8")
                .body(body)
        };
        match self {
            Replayable::Fresh(answer) => Reply::<T>(answer).into_response(),
            Replayable::Stored { body, rate_limit } => {
                let mut response = json(body);
                set_rate_limit_headers(&mut response, rate_limit);
                response
            }
            Replayable::Replayed(body) => {
                let mut response = json(body);
                response
                    .headers_mut()
                    .insert(REPLAYED, HeaderValue::from_static("true"));
                response
            }
        }
    }
}

impl<T: ToJSON + JsonBody + Enveloped + Send> ApiResponse for Replayable<T> {
    fn meta() -> MetaResponses {
        let mut meta = <Reply<T> as ApiResponse>::meta();
        for response in &mut meta.responses {
            response.headers.push(MetaHeader {
                name: REPLAYED.to_string(),
                description: Some(
                    "`true` on a retry's answer: the answer stored for the first request with \
                     this Idempotency-Key and body, byte for byte (its `balance` is the balance \
                     after that request), charged nothing, its queries counted in the account's \
                     rate-limit windows (a full window answers 429). Absent on every other answer."
                        .to_string(),
                ),
                required: false,
                deprecated: false,
                schema: MetaSchemaRef::Inline(Box::new(MetaSchema {
                    enum_items: vec!["true".into()],
                    example: Some("true".into()),
                    ..MetaSchema::new("string")
                })),
            });
        }
        meta.responses
            .extend(ApiError::idempotency_meta().responses);
        meta
    }

    fn register(registry: &mut Registry) {
        <Reply<T> as ApiResponse>::register(registry);
        ApiError::register(registry);
    }
}

impl State {
    /// Runs the bulk operation `O` through the billed path with its `Idempotency-Key`
    /// step; `respond` makes the 200 of what it answered. Under a key that answer is
    /// stored, with its held charge, before it is sent.
    pub async fn billed_once<O: Operation, T: JsonBody + Enveloped + Send>(
        &self,
        body: &ContractJson<O::Request>,
        header: &IdempotencyHeader,
        respond: impl FnOnce(Billed<O::Answer>) -> T,
    ) -> Result<Replayable<T>, ApiError> {
        let (billed, claimed) = match self.billed_path::<O>(body, Some(header)).await? {
            Path::Replayed(stored) => return Ok(Replayable::Replayed(stored)),
            Path::Answered(billed, claimed) => (billed, claimed),
        };
        let answer = respond(billed);
        let Some(claimed) = claimed else {
            return Ok(Replayable::Fresh(answer));
        };
        let rate_limit = answer.envelope().rate_limit_headers(SystemTime::now);
        // Cannot fail for the API's types; if it did, the claim is dropped: the key is
        // free again and the held charge stands, as for a panic after the work.
        let stored = answer
            .json_bytes()
            .map_err(|e| ApiError::internal(e.into()))?;
        let kept: &[u8] = if stored.len() > MAX_STORED_ANSWER {
            &[]
        } else {
            &stored
        };
        let flush = claimed.answer(Arc::from(kept));
        if self.billing.options().durable {
            self.billing
                .flushed_to(flush)
                .await
                .map_err(|e| refused(e, O::ENDPOINT))?;
        }
        Ok(Replayable::Stored {
            body: stored,
            rate_limit,
        })
    }

    /// The idempotency step: what the request with `key` finds (409 and 422 refuse it).
    pub(super) async fn claim_key(
        &self,
        caller: Caller,
        key: &IdempotencyKey,
        endpoint: Endpoint,
        body: &impl Requested,
    ) -> Result<Keyed, ApiError> {
        let fingerprint = body
            .fingerprint()
            .map_err(|e| ApiError::internal(e.into()))?;
        let claim = self
            .billing
            .claim(caller.account_id, key, endpoint, fingerprint)
            .await
            .map_err(|e| refused(e, endpoint))?;
        match claim {
            Claim::Run(claimed) => Ok(Keyed::Run(claimed)),
            // Its flush may not have committed yet: durable mode replays only after.
            Claim::Replay(Some(stored)) => {
                self.billing
                    .settled()
                    .await
                    .map_err(|e| refused(e, endpoint))?;
                Ok(Keyed::Replay(stored.to_vec()))
            }
            Claim::Replay(None) => self
                .stored_answer(caller.account_id, key, endpoint)
                .await
                .map(Keyed::Replay),
            Claim::OtherBody => Err(ApiError::unprocessable(OTHER_BODY)),
            Claim::OtherEndpoint(used) => Err(ApiError::unprocessable(format!(
                "Idempotency-Key already used on /api/{used}"
            ))),
            Claim::InProgress => Err(ApiError::conflict(IN_PROGRESS)),
        }
    }

    /// A stored answer's body, from the store (one row by its key).
    async fn stored_answer(
        &self,
        account_id: i64,
        key: &IdempotencyKey,
        endpoint: Endpoint,
    ) -> Result<Vec<u8>, ApiError> {
        let read = self
            .billing
            .stored_body(account_id, key)
            .await
            .map_err(|e| refused(e, endpoint))?;
        // Purged only a minute after it stops being replayable (`billing`).
        read.map(|body| body.to_vec()).ok_or_else(|| {
            ApiError::internal(anyhow::anyhow!("a stored answer is missing from the store"))
        })
    }
}
