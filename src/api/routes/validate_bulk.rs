//! `/api/validate-bulk`: up to 1,000 postal codes of any countries, from memory; 1 query
//! per record, the whole batch or nothing.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::registry::{MetaSchema, MetaSchemaRef};
use poem_openapi::types::{Example, ParseFromJSON, ParseResult, ToJSON};
use poem_openapi::{Enum, Object, OpenApi};
use serde::Serialize;
use serde_json::Value;

use crate::api::billed::{Billed, Operation};
use crate::api::contract::{BulkRecord, ContractJson, DocumentedBody};
use crate::api::error::{ApiError, RetiredCode};
use crate::api::once::{IdempotencyHeader, Replayable};
use crate::api::types::*;
use crate::api::{ApiTags, State};
use crate::domain::charge::Endpoint;
use crate::index::postal::PostalIndex;
use crate::index::postal::Verdict;

/// The route of /api/validate-bulk (its handler reads the `State` from the request data).
pub struct ValidateBulkApi;

#[OpenApi]
impl ValidateBulkApi {
    /// Check up to 1,000 postal codes of any countries in one request.
    ///
    /// Per-record problems are results (`reason`: not_found, invalid_format,
    /// unknown_country), never errors. Billed per record; when the balance or a rate
    /// window cannot take the whole batch, nothing is charged (402 / 429). With an
    /// `Idempotency-Key`, a retry of a request whose answer was lost is never billed
    /// twice.
    #[oai(
        path = "/api/validate-bulk",
        method = "post",
        operation_id = "validateBulk",
        tag = "ApiTags::Validation"
    )]
    async fn validate_bulk(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<BulkRequest>,
        /// Makes retrying this request safe: a key of yours, 1 to 255 visible ASCII
        /// characters (a UUID), new for each request. A retry with the same key and body
        /// within 24 hours gets the first 200 again, byte for byte, with
        /// `Idempotent-Replayed: true`, charged nothing; the same key with another body
        /// is 422, and 409 while the first request is still running. Keys are per
        /// account; only 200s are kept (an error charges nothing: retry it as it is).
        #[oai(name = "Idempotency-Key", example = "crate::api::once::example_key")]
        idempotency_key: IdempotencyHeader,
    ) -> Result<Replayable<BulkResponse>, ApiError> {
        state
            .0
            .billed_once::<ValidateBulk, _>(&body, &idempotency_key, respond)
            .await
    }
}

/// The 200 of what the work found.
fn respond(billed: Billed<Vec<(BulkRecord, Verdict, Option<String>)>>) -> BulkResponse {
    let Billed {
        answer,
        envelope,
        total_cost,
    } = billed;
    let results = answer
        .into_iter()
        .map(|(record, verdict, retired_since)| {
            let (normalized, reason) = match verdict {
                Verdict::Valid(key) => (Some(key.as_str().to_owned()), None),
                Verdict::NotFound => (None, Some(Reason::NotFound)),
                Verdict::InvalidFormat => (None, Some(Reason::InvalidFormat)),
                Verdict::UnknownCountry => (None, Some(Reason::UnknownCountry)),
            };
            BulkResult {
                postal_code: record.postal_code,
                country_code: record.country_input,
                valid: normalized.is_some(),
                normalized,
                reason: NullableReason(reason),
                retired_since,
            }
        })
        .collect();
    BulkResponse {
        results,
        total_cost,
        envelope,
    }
}

pub struct ValidateBulk;

impl Operation for ValidateBulk {
    const ENDPOINT: Endpoint = Endpoint::ValidateBulk;
    type Request = BulkRequest;
    type Parsed = Vec<BulkRecord>;
    /// Each record, its verdict, and for a code an import removed the day it went.
    type Answer = Vec<(BulkRecord, Verdict, Option<String>)>;

    fn parse(body: &ContractJson<Self::Request>) -> Result<Vec<BulkRecord>, ApiError> {
        body.bulk_records()
    }

    fn queries(records: &Vec<BulkRecord>) -> u64 {
        records.len() as u64
    }

    // Not inlined: bench/counts.py counts validate-bulk's work as this function's cost.
    #[inline(never)]
    fn work(
        postal: &PostalIndex,
        records: Vec<BulkRecord>,
    ) -> Result<Vec<(BulkRecord, Verdict, Option<String>)>, ApiError> {
        Ok(records
            .into_iter()
            .map(|record| {
                let verdict = postal.check_code(record.country, &record.postal_code);
                let retired_since = (verdict == Verdict::NotFound)
                    .then(|| postal.retired_text(record.country, &record.postal_code))
                    .flatten()
                    .map(|r| RetiredCode::of(r).since);
                (record, verdict, retired_since)
            })
            .collect())
    }
}

/// One record of a bulk request.
#[derive(Debug, Object)]
pub struct BulkRecordRequest {
    /// Non-empty postal code.
    #[oai(rename = "postalCode")]
    pub postal_code: NonBlankText,
    // ISO 3166-1 alpha-2 code. (A plain comment: a described `$ref` becomes an `allOf`,
    // which generated clients cannot read; the CountryCode schema states the rule.)
    #[oai(rename = "countryCode")]
    pub country_code: CountryField,
}

/// Body of /api/validate-bulk.
#[derive(Debug, Object)]
#[oai(example)]
pub struct BulkRequest {
    /// Your API key.
    #[oai(rename = "apiKey", validator(min_length = 1))]
    pub api_key: String,
    /// 1 to 1,000 records; countries may be mixed.
    #[oai(validator(min_items = 1, max_items = 1000))]
    pub records: Vec<BulkRecordRequest>,
}

impl Example for BulkRequest {
    fn example() -> Self {
        let record = |code: &str, country: &str| BulkRecordRequest {
            postal_code: NonBlankText(code.into()),
            country_code: CountryField(country.into()),
        };
        BulkRequest {
            api_key: "pk_your_api_key".into(),
            records: vec![
                record("90210", "US"),
                record("SW1A 1AA", "GB"),
                record("ABCDE", "US"),
            ],
        }
    }
}

impl DocumentedBody for BulkRequest {}

/// Why a bulk record is not valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum, Serialize)]
#[oai(rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Well-formed, but not in the country's data.
    NotFound,
    /// Not a form of the country's postal codes.
    InvalidFormat,
    /// A valid ISO code with no data loaded.
    UnknownCountry,
}

/// `reason` of a bulk result: the enum inline and nullable, because generated clients
/// cannot take `null` through an `allOf` around a `$ref` to an enum (openapi-python-client:
/// "Cannot take allOf a non-object").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NullableReason(pub Option<Reason>);

wrapper_type!(
    NullableReason,
    "nullable_reason",
    {
        let mut schema = MetaSchema::new("string");
        schema.enum_items = [
            Reason::NotFound,
            Reason::InvalidFormat,
            Reason::UnknownCountry,
        ]
        .iter()
        .filter_map(ToJSON::to_json)
        // OpenAPI 3.0.3: a nullable enum lists null among its values.
        .chain([Value::Null])
        .collect();
        schema.nullable = true;
        MetaSchemaRef::Inline(Box::new(schema))
    },
    |_: &mut poem_openapi::registry::Registry| {}
);

impl ParseFromJSON for NullableReason {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        match value {
            None | Some(Value::Null) => Ok(NullableReason(None)),
            some => Reason::parse_from_json(some)
                .map(|reason| NullableReason(Some(reason)))
                .map_err(poem_openapi::types::ParseError::propagate),
        }
    }
}

impl ToJSON for NullableReason {
    fn to_json(&self) -> Option<Value> {
        Some(
            self.0
                .as_ref()
                .and_then(ToJSON::to_json)
                .unwrap_or(Value::Null),
        )
    }
}

/// One result of /api/validate-bulk, in request order.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct BulkResult {
    /// Echo of the input.
    pub postal_code: String,
    /// Echo of the input, upper case.
    pub country_code: String,
    pub valid: bool,
    /// The stored key when valid (GB outcode, CA forward sortation area, ...), else null.
    #[oai(nullable)]
    pub normalized: Option<String>,
    /// Why the record is not valid; null when valid.
    pub reason: NullableReason,
    /// With `reason` not_found, for a code an import removed: the UTC day it went
    /// (`YYYY-MM-DD`); absent otherwise.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retired_since: Option<String>,
}

/// 200 of /api/validate-bulk.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct BulkResponse {
    pub results: Vec<BulkResult>,
    /// Records x 0.000028 USD.
    pub total_cost: f64,
    #[oai(flatten)]
    #[serde(flatten)]
    pub envelope: Envelope,
}

crate::api::reply::enveloped!(BulkResponse);

impl Example for BulkResponse {
    fn example() -> Self {
        let result = |code: &str,
                      country: &str,
                      normalized: Option<&str>,
                      reason: Option<Reason>| BulkResult {
            postal_code: code.into(),
            country_code: country.into(),
            valid: normalized.is_some(),
            normalized: normalized.map(String::from),
            reason: NullableReason(reason),
            retired_since: None,
        };
        BulkResponse {
            results: vec![
                result("90210", "US", Some("90210"), None),
                result("SW1A 1AA", "GB", Some("SW1A"), None),
                result("ABCDE", "US", None, Some(Reason::InvalidFormat)),
            ],
            total_cost: 0.000084,
            envelope: example_envelope(4.999916),
        }
    }
}
