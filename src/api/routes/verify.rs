//! POST /api/verify: is the city a shopper typed one of the places of the postal code
//! (`index::verify`, from memory); 1 query. The question and the verdict serve
//! `verify_bulk` too.

use std::sync::Arc;

use poem::web::Data;

use poem_openapi::types::Example;
use poem_openapi::{Enum, Object, OpenApi};
use serde::Serialize;
use serde_json::Value;

use super::places::PlaceItem;
use crate::api::billed::{Billed, Operation};
use crate::api::contract::{ContractJson, DocumentedBody};
use crate::api::error::ApiError;
use crate::api::reply::Reply;
use crate::api::types::ApiKeyText;
use crate::api::types::{CountryField, Envelope, FreeText, ZipCodeValue, example_envelope};
use crate::api::{ApiTags, State};
use crate::domain::CountryCode;
use crate::domain::charge::Endpoint;
use crate::domain::postal_code::ZipInput;
use crate::index::postal::PostalIndex;
use crate::index::verify::{TypedCity, Verification};

/// The route of /api/verify (its handler read the `State` from the request data).
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
}

/// A checked `/api/verify` request.
pub struct VerifyQuestion {
    pub(super) country: CountryCode,
    pub(super) zipcode: ZipInput,
    pub(super) city: String,
    pub(super) state: Option<String>,
    pub(super) st: Option<String>,
}

impl VerifyQuestion {
    pub(super) fn verify(&self, postal: &PostalIndex) -> Verification {
        let typed = TypedCity {
            city: &self.city,
            state: self.state.as_deref(),
            st: self.st.as_deref(),
        };
        postal.verify(self.country, &self.zipcode, &typed)
    }
}

/// `/api/verify` on the one billed path: 1 query.
pub struct Verify;

impl Operation for Verify {
    const ENDPOINT: Endpoint = Endpoint::Verify;
    type Request = VerifyRequest;
    type Parsed = VerifyQuestion;
    type Answer = Verification;

    /// In the order of the contract's other operations: `zipcode`, `city`, `state`, `ST`,
    /// `country`.
    fn parse(body: &ContractJson<Self::Request>) -> Result<VerifyQuestion, ApiError> {
        let zipcode = body.zipcode()?;
        let city = body.required_free_text("city")?.to_string();
        let state = body.optional_free_text("state")?.map(str::to_string);
        let st = body.optional_free_text("ST")?.map(str::to_string);
        Ok(VerifyQuestion {
            country: body.country()?,
            zipcode,
            city,
            state,
            st,
        })
    }

    fn work(postal: &PostalIndex, question: VerifyQuestion) -> Result<Verification, ApiError> {
        Ok(question.verify(postal))
    }
}

/// The fields a verification shows, shared by one and bulk.
pub(super) struct Verdict {
    pub(super) result: VerifyResult,
    pub(super) matched_city: Option<String>,
    pub(super) matched_state: Option<String>,
    pub(super) matched_st: Option<String>,
    pub(super) places: Option<Vec<PlaceItem>>,
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
    /// The city as typed; case, accents and punctuation are ignored. At most 200 characters.
    pub city: FreeText,
    /// The state / region as typed (admin name1 or code1), if the form has one. At most 200 characters.
    #[oai(validator(max_length = 200))]
    pub state: Option<String>,
    /// The state / region code (admin code1), if the form has one.
    #[oai(rename = "ST", validator(max_length = 200))]
    pub st: Option<String>,
    /// Your API key.
    #[oai(rename = "apiKey", validator(min_length = 1))]
    pub api_key: ApiKeyText,
    // ISO 3166-1 alpha-2 code, case-insensitive; default `US`. (A plain comment: a
    // described `$ref` becomes an `allOf`, which generated clients cannot read.)
    pub country: Option<CountryField>,
}

impl Example for VerifyRequest {
    fn example() -> Self {
        VerifyRequest {
            zipcode: ZipCodeValue(Value::String("75001".into())),
            city: FreeText("Pariss".into()),
            state: None,
            st: None,
            api_key: "pk_your_api_key".into(),
            country: Some(CountryField("FR".into())),
        }
    }
}

impl DocumentedBody for VerifyRequest {}

/// 200 of /api/verify.
#[serde_with::skip_serializing_none]
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example, skip_serializing_if_is_none)]
#[serde(rename_all = "camelCase")]
pub struct VerifyResponse {
    pub result: VerifyResult,
    /// With `fuzzy_match`: the place the city was taken for, as the data writes it.
    pub matched_city: Option<String>,
    /// With `fuzzy_match`: its state / region, when it has one.
    pub matched_state: Option<String>,
    /// With `fuzzy_match`: its state / region code, when it has one.
    #[oai(rename = "matchedST")]
    #[serde(rename = "matchedST")]
    pub matched_st: Option<String>,
    /// With `conflict`: every place of the code (as /api/places answers them).
    pub places: Option<Vec<PlaceItem>>,
    #[oai(flatten)]
    #[serde(skip)]
    pub envelope: Envelope,
}

crate::api::reply::enveloped!(VerifyResponse);

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
