//! The one billed-request path: authenticate -> parse -> (idempotency key) -> pre-check ->
//! work -> charge -> envelope, in the contract's order of checks (decisions.md), for every
//! billed operation. An operation states only how it reads its request, what it costs in
//! queries, and its work on the dataset in memory (`Operation`); `State::billed` does the
//! rest, the API key included. The bulk operations
//! enter it through `State::billed_once` (`api::once`), which adds the idempotency step:
//! a stored answer replayed, or the key claimed and the charge held on it.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::State;
use super::access::{self, RequestMeta};
use super::contract::{ContractJson, Requested};
use super::envelope::{Step, Timings};
use super::error::ApiError;
use super::once::{IdempotencyHeader, Keyed};
use super::types::Envelope;
use crate::billing::{BillingError, ClaimedKey, KeyEntry};
use crate::domain::api_key::hash_presented_key;
use crate::domain::charge::{Endpoint, Refusal};
use crate::index::postal::PostalIndex;

/// The text of a missing `apiKey` on the billed operations.
pub const MISSING_API_KEY: &str = "Missing required field: apiKey";

/// A billed operation of the API: its request, its parse, its cost, its work. The key
/// (`Authorization`/`X-Api-Key` header, else `apiKey` of the body; 400 when missing) is
/// read by the billed path, before anything else, the same for every operation.
pub trait Operation {
    /// What the ledger records it as; bulk endpoints answer refusals with bulk texts.
    const ENDPOINT: Endpoint;
    /// The request's documented fields (e.g. `CodeRequest`): the body the contract's
    /// extractor hands over is a `ContractJson<Self::Request>`.
    type Request: Send + Sync;
    /// The request in domain types.
    type Parsed: Send;
    /// What the work found, before the envelope is added.
    type Answer: Send;

    /// The fields other than the key: 400 with the contract's text when wrong.
    fn parse(body: &ContractJson<Self::Request>) -> Result<Self::Parsed, ApiError>;
    /// Billed queries: 1, or one per record.
    fn queries(_parsed: &Self::Parsed) -> u64 {
        1
    }
    /// The work on the dataset in memory, after the pre-check; an `Err` (e.g. 404)
    /// charges nothing.
    fn work(postal: &PostalIndex, parsed: Self::Parsed) -> Result<Self::Answer, ApiError>;
}

/// An answered billed request.
pub struct Billed<A> {
    pub answer: A,
    pub envelope: Envelope,
    /// What this request cost (`totalCost` of the bulk endpoints).
    pub total_cost: f64,
}

/// How the billed path ended. Matched at once by its caller, so its size costs a move;
/// boxing the large variant would cost an allocation on every billed request.
#[expect(
    clippy::large_enum_variant,
    reason = "moved once per request; a Box would allocate on the hot path"
)]
pub(super) enum Path<A> {
    /// Worked and charged; with an idempotency key, the charge is held on the key until
    /// the answer is stored with it (`State::billed_once`).
    Answered(Billed<A>, Option<ClaimedKey>),
    /// The stored answer of the same request, sent with the same key: nothing charged.
    Replayed(Vec<u8>),
}

impl State {
    /// Runs operation `O` on `body` through the one billed path.
    pub async fn billed<O: Operation>(
        &self,
        body: &ContractJson<O::Request>,
    ) -> Result<Billed<O::Answer>, ApiError> {
        match self.billed_path::<O>(body, None).await? {
            Path::Answered(billed, _) => Ok(billed),
            // Only a request with an Idempotency-Key is replayed.
            Path::Replayed(_) => Err(ApiError::internal(anyhow::anyhow!(
                "a replay without an Idempotency-Key"
            ))),
        }
    }

    /// The path itself. With `once` (the `Idempotency-Key` header of a bulk operation),
    /// the key is read after the other parameters, then a stored answer is replayed, or
    /// a conflict refused, before any pre-check (a replay is not charged, so a balance
    /// spent since does not refuse it; its queries count in the windows, and a full one
    /// refuses it); or the key is claimed and the charge held on it.
    pub(super) async fn billed_path<O: Operation>(
        &self,
        body: &ContractJson<O::Request>,
        once: Option<&IdempotencyHeader>,
    ) -> Result<Path<O::Answer>, ApiError> {
        let _slot = self.admit()?;
        let mut timings = Timings::start();
        let key = self.authenticate(body.api_key(MISSING_API_KEY)?, &mut timings)?;
        let audience = self.check_access(body.meta(), &key, O::ENDPOINT)?;
        timings.lap(Step::RateLimitCheck);
        let caller = key.caller;
        let idempotency_key = once.map(IdempotencyHeader::key).transpose()?.flatten();
        let parsed = O::parse(body)?;
        let claimed = match idempotency_key {
            None => None,
            Some(key) => match self.claim_key(caller, &key, O::ENDPOINT, body).await? {
                Keyed::Run(claimed) => Some(claimed),
                Keyed::Replay(stored) if stored.is_empty() => {
                    return Err(ApiError::unprocessable(super::once::NOT_KEPT));
                }
                Keyed::Replay(stored) => {
                    // Free, but inside the account's windows like the request itself.
                    let queries = O::queries(&parsed);
                    self.billing
                        .count_replay(caller, queries)
                        .map_err(|e| refused(e, O::ENDPOINT))?;
                    return Ok(Path::Replayed(stored));
                }
            },
        };
        let queries = O::queries(&parsed);
        // The request's own fields (and its idempotency key) are processing.
        timings.lap(Step::Processing);
        let checked = self.billing.precheck(caller, queries);
        timings.lap(Step::RateLimitCheck);
        checked.map_err(|e| refused(e, O::ENDPOINT))?;
        let answer = timings.processing(|| O::work(&self.postal(), parsed))?;
        let charged = match &claimed {
            None => self.billing.charge(caller, queries, O::ENDPOINT).await,
            Some(claimed) => {
                self.billing
                    .charge_held(caller, queries, O::ENDPOINT, claimed)
                    .await
            }
        }
        .map_err(|e| refused(e, O::ENDPOINT))?;
        // A held charge is committed with its answer: `billed_once` waits for that flush.
        if self.billing.options().durable && claimed.is_none() {
            self.billing
                .committed(&charged)
                .await
                .map_err(|e| refused(e, O::ENDPOINT))?;
        }
        timings.lap(Step::Balance);
        super::telemetry::count_charge(queries);
        let billed = Billed {
            answer,
            envelope: Envelope::billed(charged.balance, &charged.rate, audience, &timings),
            total_cost: charged.cost.to_usd(),
        };
        Ok(Path::Answered(billed, claimed))
    }

    /// The key behind `api_key` (401 when unknown or revoked), from memory.
    pub(super) fn authenticate(
        &self,
        api_key: &str,
        timings: &mut Timings,
    ) -> Result<KeyEntry, ApiError> {
        let found = self.billing.authenticate(&hash_presented_key(api_key));
        timings.lap(Step::Auth);
        found
            .map(|(key, _)| key)
            .map_err(|_| ApiError::invalid_api_key())
    }

    /// 403 / 429 when the key may not be used from where the request comes, for this
    /// operation (`access::check`); a secret key from a server passes at once.
    pub(super) fn check_access(
        &self,
        meta: &RequestMeta,
        key: &KeyEntry,
        endpoint: Endpoint,
    ) -> Result<access::Audience, ApiError> {
        access::check(
            meta,
            key,
            endpoint.form_safe(),
            &self.per_ip,
            &self.trusted_proxies,
        )
    }

    /// A place among the requests in flight, or 503 beyond `max_in_flight`.
    fn admit(&self) -> Result<InFlight<'_>, ApiError> {
        let before = self.in_flight.fetch_add(1, Ordering::AcqRel);
        let slot = InFlight(&self.in_flight);
        if before >= self.max_in_flight {
            self.overloaded.fetch_add(1, Ordering::Relaxed);
            return Err(ApiError::unavailable("Server overloaded, retry shortly", 1));
        }
        Ok(slot)
    }
}

/// Counts a request in flight until dropped.
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The contract's answer to a refused charge (texts of postal-api.md 7.2).
pub(super) fn refused(error: BillingError, endpoint: Endpoint) -> ApiError {
    let bulk = endpoint.is_bulk();
    match error {
        BillingError::Refused(Refusal::InvalidKey) => ApiError::invalid_api_key(),
        BillingError::Refused(Refusal::InsufficientBalance) => {
            ApiError::payment_required(if bulk {
                "Insufficient balance for bulk request"
            } else {
                "Insufficient balance"
            })
        }
        BillingError::Refused(Refusal::RateLimited { retry_after_secs }) => ApiError::rate_limited(
            if bulk {
                "Rate limit would be exceeded by this bulk request"
            } else {
                "Rate limit exceeded"
            },
            retry_after_secs,
        ),
        // The writer logs why (once per failed flush, not once per request).
        BillingError::Unavailable(_) => {
            ApiError::unavailable("Billing temporarily unavailable, retry shortly", 1)
        }
    }
}
