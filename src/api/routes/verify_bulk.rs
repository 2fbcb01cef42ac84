//! POST /api/verify-bulk: up to 1,000 typed cities checked against their postal codes,
//! each as /api/verify answers it; 1 query per record, the whole batch or nothing.

use std::sync::Arc;

use poem::web::Data;

use poem_openapi::types::Example;
use poem_openapi::{Object, OpenApi};
use serde::Serialize;
use serde_json::Value;

use super::places::{PlaceItem, example_places};
use crate::api::billed::{Billed, Operation};
use crate::api::contract::{
    ContractJson, DocumentedBody, RecordCodes, bounded, record_codes, records_array,
};
use crate::api::error::ApiError;
use crate::api::reply::Reply;
use crate::api::types::ApiKeyText;
use crate::api::types::{CountryField, Envelope, FreeText, NonBlankText, example_envelope};
use crate::api::{ApiTags, State};
use crate::domain::charge::Endpoint;
use crate::domain::postal_code::ZipInput;
use crate::index::postal::PostalIndex;
use crate::index::verify::Verification;

use super::verify::*;

/// The route of /api/verify-bulk (its handler reads the `State` from the request data).
pub struct VerifyBulkApi;

#[OpenApi]
impl VerifyBulkApi {
    /// Check up to 1,000 typed cities against their postal codes in one request.
    ///
    /// Results in the order of `records`, each as /api/verify answers it. Billed per
    /// record; when the balance or a rate window cannot take the whole batch, nothing is
    /// charged (402 / 429).
    #[oai(
        path = "/api/verify-bulk",
        method = "post",
        operation_id = "verifyBulk",
        tag = "ApiTags::Validation"
    )]
    async fn verify_bulk(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<VerifyBulkRequest>,
    ) -> Result<Reply<VerifyBulkResponse>, ApiError> {
        let Billed {
            answer,
            envelope,
            total_cost,
        } = state.0.billed::<VerifyBulk>(&body).await?;
        let results = answer
            .into_iter()
            .map(|(record, verification)| {
                let verdict = Verdict::from(verification);
                VerifyBulkResult {
                    postal_code: record.postal_code,
                    country_code: record.country_input,
                    city: record.city,
                    result: verdict.result,
                    matched_city: verdict.matched_city,
                    matched_state: verdict.matched_state,
                    matched_st: verdict.matched_st,
                    places: verdict.places,
                }
            })
            .collect();
        Ok(Reply(VerifyBulkResponse {
            results,
            total_cost,
            envelope,
        }))
    }
}

/// One record of `/api/verify-bulk`, checked.
pub struct VerifyRecord {
    postal_code: String,
    /// `countryCode` as sent, upper-cased (echoed).
    country_input: String,
    city: String,
    question: VerifyQuestion,
}

/// `/api/verify-bulk` on the one billed path: 1 query per record.
pub struct VerifyBulk;

impl Operation for VerifyBulk {
    const ENDPOINT: Endpoint = Endpoint::VerifyBulk;
    type Request = VerifyBulkRequest;
    type Parsed = Vec<VerifyRecord>;
    type Answer = Vec<(VerifyRecord, Verification)>;

    fn parse(body: &ContractJson<Self::Request>) -> Result<Vec<VerifyRecord>, ApiError> {
        records_array(&body.fields)?
            .iter()
            .enumerate()
            .map(|(i, item)| verify_record(i, item))
            .collect()
    }

    fn queries(records: &Vec<VerifyRecord>) -> u64 {
        records.len() as u64
    }

    fn work(
        postal: &PostalIndex,
        records: Vec<VerifyRecord>,
    ) -> Result<Vec<(VerifyRecord, Verification)>, ApiError> {
        Ok(records
            .into_iter()
            .map(|record| {
                let verification = record.question.verify(postal);
                (record, verification)
            })
            .collect())
    }
}

/// Record `i` of `records`: `postalCode` and `countryCode` as validate-bulk reads them,
/// then `city` (a non-empty string) and `state` (a string when present).
fn verify_record(i: usize, item: &Value) -> Result<VerifyRecord, ApiError> {
    let RecordCodes {
        postal_code,
        country,
        country_input,
    } = record_codes(i, item)?;
    let city = match item.get("city") {
        Some(Value::String(s)) if !s.trim().is_empty() => {
            bounded(|| format!("records[{i}].city"), s)?.to_owned()
        }
        _ => {
            return Err(ApiError::bad_request(format!(
                "records[{i}].city must be a non-empty string"
            )));
        }
    };
    let state = match item.get("state") {
        None => None,
        Some(Value::String(s)) => Some(bounded(|| format!("records[{i}].state"), s)?.to_owned())
            .filter(|s| !s.trim().is_empty()),
        Some(_) => {
            return Err(ApiError::bad_request(format!(
                "records[{i}].state must be a string"
            )));
        }
    };
    Ok(VerifyRecord {
        question: VerifyQuestion {
            country,
            zipcode: ZipInput::Text(postal_code.clone()),
            city: city.clone(),
            state,
            st: None,
        },
        postal_code,
        country_input,
        city,
    })
}

/// One record of /api/verify-bulk.
#[derive(Debug, Object)]
#[oai(skip_serializing_if_is_none)]
pub struct VerifyRecordRequest {
    /// Non-empty postal code.
    #[oai(rename = "postalCode")]
    pub postal_code: NonBlankText,
    // ISO 3166-1 alpha-2 code. (A plain comment: a described `$ref` becomes an `allOf`.)
    #[oai(rename = "countryCode")]
    pub country_code: CountryField,
    /// The city as typed. At most 200 characters.
    pub city: FreeText,
    /// The state / region as typed (admin name1 or code1), if any. At most 200 characters.
    #[oai(validator(max_length = 200))]
    pub state: Option<String>,
}

/// Body of /api/verify-bulk.
#[derive(Debug, Object)]
#[oai(example)]
pub struct VerifyBulkRequest {
    /// Your API key.
    #[oai(rename = "apiKey", validator(min_length = 1))]
    pub api_key: ApiKeyText,
    /// 1 to 1,000 records; countries may be mixed.
    #[oai(validator(min_items = 1, max_items = 1000))]
    pub records: Vec<VerifyRecordRequest>,
}

impl Example for VerifyBulkRequest {
    fn example() -> Self {
        let record = |code: &str, country: &str, city: &str| VerifyRecordRequest {
            postal_code: NonBlankText(code.into()),
            country_code: CountryField(country.into()),
            city: FreeText(city.into()),
            state: None,
        };
        VerifyBulkRequest {
            api_key: "pk_your_api_key".into(),
            records: vec![
                record("75001", "FR", "Paris"),
                record("75001", "FR", "Lyon"),
            ],
        }
    }
}

impl DocumentedBody for VerifyBulkRequest {}

/// One result of /api/verify-bulk: the record echoed and its verdict.
#[serde_with::skip_serializing_none]
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", skip_serializing_if_is_none)]
#[serde(rename_all = "camelCase")]
pub struct VerifyBulkResult {
    /// Echo of the input.
    pub postal_code: String,
    /// Echo of the input, upper case.
    pub country_code: String,
    /// Echo of the input.
    pub city: String,
    pub result: VerifyResult,
    pub matched_city: Option<String>,
    pub matched_state: Option<String>,
    #[oai(rename = "matchedST")]
    #[serde(rename = "matchedST")]
    pub matched_st: Option<String>,
    pub places: Option<Vec<PlaceItem>>,
}

/// 200 of /api/verify-bulk.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct VerifyBulkResponse {
    pub results: Vec<VerifyBulkResult>,
    /// Records x 0.000028 USD.
    pub total_cost: f64,
    #[oai(flatten)]
    #[serde(skip)]
    pub envelope: Envelope,
}

crate::api::reply::enveloped!(VerifyBulkResponse);

impl Example for VerifyBulkResponse {
    fn example() -> Self {
        let result = |city: &str, result, places| VerifyBulkResult {
            postal_code: "75001".into(),
            country_code: "FR".into(),
            city: city.into(),
            result,
            matched_city: None,
            matched_state: None,
            matched_st: None,
            places,
        };
        VerifyBulkResponse {
            results: vec![
                result("Paris", VerifyResult::Match, None),
                result("Lyon", VerifyResult::Conflict, Some(example_places())),
            ],
            total_cost: 0.000056,
            envelope: example_envelope(4.999944),
        }
    }
}
