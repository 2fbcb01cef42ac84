//! POST /api/verify (1 query) and /api/verify-bulk (1 query per record): is the city a
//! shopper typed one of the places of the postal code (`index::verify`, from memory).

use std::sync::Arc;

use poem::web::Data;

use poem_openapi::types::Example;
use poem_openapi::{Enum, Object, OpenApi};
use serde::Serialize;
use serde_json::Value;

use super::billed::{Billed, MISSING_API_KEY, Operation};
use super::contract::{ContractJson, DocumentedBody, records_array};
use super::error::ApiError;
use super::places::{PlaceItem, example_places};
use super::reply::Reply;
use super::types::{CountryField, Envelope, NonBlankText, ZipCodeValue, example_envelope};
use super::{ApiTags, State};
use crate::domain::CountryCode;
use crate::domain::charge::Endpoint;
use crate::domain::postal_code::ZipInput;
use crate::index::verify::{TypedCity, Verification};

/// The verification API (its handlers read the `State` from the request data).
pub struct VerifyApi;

#[OpenApi]
impl VerifyApi {
    /// Check a typed city against its postal code.
    ///
    /// `result`: `match` (the city is one of the code's places, case, accents and
    /// punctuation ignored), `fuzzy_match` (a typo, an alias, another language's name or
    /// the city the code's district belongs to: `matchedCity` names it), `conflict` (not a
    /// place of this code, or not in the `state`/`ST` given: `places` lists the code's
    /// places), `not_found` (no such code). Billed 0.000028 USD, whatever the result.
    #[oai(
        path = "/api/verify",
        method = "post",
        operation_id = "verify",
        tag = "ApiTags::Validation"
    )]
    async fn verify(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<VerifyRequest>,
    ) -> Result<Reply<VerifyResponse>, ApiError> {
        let Billed {
            answer, envelope, ..
        } = state.0.billed::<Verify>(&body).await?;
        let verdict = Verdict::from(answer);
        Ok(Reply(VerifyResponse {
            result: verdict.result,
            matched_city: verdict.matched_city,
            matched_state: verdict.matched_state,
            matched_st: verdict.matched_st,
            places: verdict.places,
            envelope,
        }))
    }

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

/// A checked `/api/verify` request.
pub struct VerifyQuestion {
    country: CountryCode,
    zipcode: ZipInput,
    city: String,
    state: Option<String>,
    st: Option<String>,
}

impl VerifyQuestion {
    fn verify(&self, state: &State) -> Verification {
        let typed = TypedCity {
            city: &self.city,
            state: self.state.as_deref(),
            st: self.st.as_deref(),
        };
        state.postal().verify(self.country, &self.zipcode, &typed)
    }
}

/// `/api/verify` on the one billed path: 1 query.
pub struct Verify;

impl Operation for Verify {
    const ENDPOINT: Endpoint = Endpoint::Verify;
    type Body = ContractJson<VerifyRequest>;
    type Parsed = VerifyQuestion;
    type Answer = Verification;

    fn api_key(body: &Self::Body) -> Result<&str, ApiError> {
        body.api_key(MISSING_API_KEY)
    }

    /// In the order of the contract's other operations: `zipcode`, `city`, `state`, `ST`,
    /// `country`.
    fn parse(body: &Self::Body) -> Result<VerifyQuestion, ApiError> {
        let zipcode = body.zipcode()?;
        let city = body.required_text("city")?.to_string();
        let state = body.optional_text("state")?.map(str::to_string);
        let st = body.optional_text("ST")?.map(str::to_string);
        Ok(VerifyQuestion {
            country: body.country()?,
            zipcode,
            city,
            state,
            st,
        })
    }

    async fn work(state: &State, question: VerifyQuestion) -> Result<Verification, ApiError> {
        Ok(question.verify(state))
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
    type Body = ContractJson<VerifyBulkRequest>;
    type Parsed = Vec<VerifyRecord>;
    type Answer = Vec<(VerifyRecord, Verification)>;

    fn api_key(body: &Self::Body) -> Result<&str, ApiError> {
        body.api_key(MISSING_API_KEY)
    }

    fn parse(body: &Self::Body) -> Result<Vec<VerifyRecord>, ApiError> {
        records_array(&body.fields)?
            .iter()
            .enumerate()
            .map(|(i, item)| verify_record(i, item))
            .collect()
    }

    fn queries(records: &Vec<VerifyRecord>) -> u64 {
        records.len() as u64
    }

    async fn work(
        state: &State,
        records: Vec<VerifyRecord>,
    ) -> Result<Vec<(VerifyRecord, Verification)>, ApiError> {
        Ok(records
            .into_iter()
            .map(|record| {
                let verification = record.question.verify(state);
                (record, verification)
            })
            .collect())
    }
}

/// Record `i` of `records`: `postalCode`, `countryCode`, `city` (non-empty strings, the
/// first failing one named), `state` (a string when present).
fn verify_record(i: usize, item: &Value) -> Result<VerifyRecord, ApiError> {
    let text = |name: &str, what: &str| match item.get(name) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        _ => Err(ApiError::bad_request(format!("records[{i}].{name} {what}"))),
    };
    let postal_code = text("postalCode", "must be a non-empty string")?;
    let country_input = item
        .get("countryCode")
        .and_then(Value::as_str)
        .unwrap_or("");
    let country = CountryCode::parse(country_input).ok_or_else(|| {
        ApiError::bad_request(format!(
            "records[{i}].countryCode must be a 2-letter ISO 3166-1 alpha-2 code"
        ))
    })?;
    let city = text("city", "must be a non-empty string")?;
    let state = match item.get("state") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()).filter(|s| !s.trim().is_empty()),
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
        country_input: country_input.to_uppercase(),
        city,
    })
}

/// The fields a verification shows, shared by one and bulk.
struct Verdict {
    result: VerifyResult,
    matched_city: Option<String>,
    matched_state: Option<String>,
    matched_st: Option<String>,
    places: Option<Vec<PlaceItem>>,
}

impl From<Verification> for Verdict {
    fn from(v: Verification) -> Verdict {
        let nothing = |result| Verdict {
            result,
            matched_city: None,
            matched_state: None,
            matched_st: None,
            places: None,
        };
        match v {
            Verification::Match => nothing(VerifyResult::Match),
            Verification::NotFound => nothing(VerifyResult::NotFound),
            Verification::FuzzyMatch(m) => Verdict {
                result: VerifyResult::FuzzyMatch,
                matched_city: Some(m.city),
                // A place without a region (admin 1) has no state to name.
                matched_state: Some(m.state).filter(|s| !s.is_empty()),
                matched_st: Some(m.st).filter(|s| !s.is_empty()),
                places: None,
            },
            Verification::Conflict(places) => Verdict {
                places: Some(places.into_iter().map(PlaceItem::from).collect()),
                ..nothing(VerifyResult::Conflict)
            },
        }
    }
}

/// The verdict on a typed city.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum, Serialize)]
#[oai(rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum VerifyResult {
    /// The city is one of the code's places.
    Match,
    /// A typo, alias or other name of one of the code's places: `matchedCity` names it.
    FuzzyMatch,
    /// Not a place of this code (or not in the region given): `places` lists the code's.
    Conflict,
    /// No such postal code in the country.
    NotFound,
}

/// Body of /api/verify.
#[derive(Debug, Object)]
#[oai(example, skip_serializing_if_is_none)]
pub struct VerifyRequest {
    /// The postal code: a string, or an integer (leading zeros restored as on /api/lookup).
    pub zipcode: ZipCodeValue,
    /// The city as typed; case, accents and punctuation are ignored.
    pub city: NonBlankText,
    /// The state / region as typed (admin name1 or code1), if the form has one.
    pub state: Option<String>,
    /// The state / region code (admin code1), if the form has one.
    #[oai(rename = "ST")]
    pub st: Option<String>,
    /// Your API key.
    #[oai(rename = "apiKey", validator(min_length = 1))]
    pub api_key: String,
    // ISO 3166-1 alpha-2 code, case-insensitive; default `US`. (A plain comment: a
    // described `$ref` becomes an `allOf`, which generated clients cannot read.)
    pub country: Option<CountryField>,
}

impl Example for VerifyRequest {
    fn example() -> Self {
        VerifyRequest {
            zipcode: ZipCodeValue(Value::String("75001".into())),
            city: NonBlankText("Pariss".into()),
            state: None,
            st: None,
            api_key: "pk_your_api_key".into(),
            country: Some(CountryField("FR".into())),
        }
    }
}

impl DocumentedBody for VerifyRequest {}

/// 200 of /api/verify.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example, skip_serializing_if_is_none)]
#[serde(rename_all = "camelCase")]
pub struct VerifyResponse {
    pub result: VerifyResult,
    /// With `fuzzy_match`: the place the city was taken for, as the data writes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_city: Option<String>,
    /// With `fuzzy_match`: its state / region, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_state: Option<String>,
    /// With `fuzzy_match`: its state / region code, when it has one.
    #[oai(rename = "matchedST")]
    #[serde(rename = "matchedST", skip_serializing_if = "Option::is_none")]
    pub matched_st: Option<String>,
    /// With `conflict`: every place of the code (as /api/places answers them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub places: Option<Vec<PlaceItem>>,
    #[oai(flatten)]
    #[serde(flatten)]
    pub envelope: Envelope,
}

impl Example for VerifyResponse {
    fn example() -> Self {
        VerifyResponse {
            result: VerifyResult::FuzzyMatch,
            matched_city: Some("Paris".into()),
            matched_state: Some("Île-de-France".into()),
            matched_st: Some("11".into()),
            places: None,
            envelope: example_envelope(4.999972),
        }
    }
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
    /// The city as typed.
    pub city: NonBlankText,
    /// The state / region as typed (admin name1 or code1), if any.
    pub state: Option<String>,
}

/// Body of /api/verify-bulk.
#[derive(Debug, Object)]
#[oai(example)]
pub struct VerifyBulkRequest {
    /// Your API key.
    #[oai(rename = "apiKey", validator(min_length = 1))]
    pub api_key: String,
    /// 1 to 1,000 records; countries may be mixed.
    #[oai(validator(min_items = 1, max_items = 1000))]
    pub records: Vec<VerifyRecordRequest>,
}

impl Example for VerifyBulkRequest {
    fn example() -> Self {
        let record = |code: &str, country: &str, city: &str| VerifyRecordRequest {
            postal_code: NonBlankText(code.into()),
            country_code: CountryField(country.into()),
            city: NonBlankText(city.into()),
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_city: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_state: Option<String>,
    #[oai(rename = "matchedST")]
    #[serde(rename = "matchedST", skip_serializing_if = "Option::is_none")]
    pub matched_st: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
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
    #[serde(flatten)]
    pub envelope: Envelope,
}

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
