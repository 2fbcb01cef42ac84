//! `/api/city` (POST, and GET for pages): the postal codes of a place (exact, then
//! fuzzy), from the in-memory place index (`index::city`); 1 query.

use std::sync::Arc;

use poem::Request;
use poem::web::Data;
use poem_openapi::param::Query;
use poem_openapi::registry::{MetaSchema, MetaSchemaRef, Registry};
use poem_openapi::types::{Example, Type};
use poem_openapi::{Object, OpenApi};
use serde::Serialize;

use crate::api::billed::{Billed, Operation};
use crate::api::contract::{ContractJson, DocumentedBody};
use crate::api::error::ApiError;
use crate::api::get::{self, text};
use crate::api::reply::{Cached, Reply};
use crate::api::types::*;
use crate::api::{ApiTags, State};
use crate::domain::CountryCode;
use crate::domain::charge::Endpoint;
use crate::domain::text::{fold, written_in_latin};
use crate::index::city::{CityMatch, CityQuery};
use crate::index::postal::PostalIndex;

/// The route of /api/city (its handlers read the `State` from the request data).
pub struct CityApi;

#[OpenApi]
impl CityApi {
    /// Find the postal codes of a city.
    ///
    /// Case, accents and punctuation are ignored. With no exact match, the closest name
    /// of the country (and state) answers, named in `matchedCity`/`matchedState`/`matchedST`.
    /// For the US, `state` or `ST` is required.
    #[oai(
        path = "/api/city",
        method = "post",
        operation_id = "findCity",
        tag = "ApiTags::Cities"
    )]
    async fn city(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<CityRequest>,
    ) -> Result<Reply<CityResponse>, ApiError> {
        city_answer(state.0, &body).await.map(Reply)
    }

    /// Find the postal codes of a city (GET, for pages).
    ///
    /// As POST /api/city, with the fields as query parameters and the key as `key`.
    /// A 200 may be kept by the browser an hour. Billed 0.000028 USD when it answers 200.
    #[oai(
        path = "/api/city",
        method = "get",
        operation_id = "findCityGet",
        tag = "ApiTags::Cities"
    )]
    #[allow(clippy::too_many_arguments)]
    async fn city_get(
        &self,
        state: Data<&Arc<State>>,
        request: &Request,
        /// City or place name.
        city: Query<get::RequiredFreeText>,
        /// Full state name (US: or its code); for US either `state` or `ST` is required.
        #[oai(name = "state")]
        region: Query<get::FreeText>,
        /// State abbreviation (admin code 1).
        #[oai(name = "ST")]
        st: Query<get::FreeText>,
        /// ISO 3166-1 alpha-2 code, case-insensitive; default `US`.
        country: Query<get::Country>,
        /// A publishable API key, sent from a page of its origins (a secret key here is a 400: send it as `Authorization: Bearer` instead).
        key: Query<get::Required>,
    ) -> Result<Cached<CityResponse>, ApiError> {
        let body = ContractJson::from_query(
            request,
            [
                ("city", text(city)),
                ("state", text(region)),
                ("ST", text(st)),
                ("country", text(country)),
                ("apiKey", text(key)),
            ],
        );
        city_answer(state.0, &body).await.map(Reply)
    }
}

/// `/api/city`'s answer to `body` (POST, or GET's query as a body).
pub(super) async fn city_answer(
    state: &State,
    body: &ContractJson<CityRequest>,
) -> Result<CityResponse, ApiError> {
    let Billed {
        answer: found,
        envelope,
        ..
    } = state.billed::<City>(body).await?;
    let fuzzy = found.fuzzy;
    Ok(CityResponse {
        zipcodes: found.zipcodes,
        matched_city: fuzzy.as_ref().map(|m| m.city.clone()),
        // A place without a region (admin 1) has no state to name.
        matched_state: fuzzy
            .as_ref()
            .map(|m| m.state.clone())
            .filter(|s| !s.is_empty()),
        matched_st: fuzzy.map(|m| m.st).filter(|s| !s.is_empty()),
        envelope,
    })
}

pub struct City;

impl Operation for City {
    const ENDPOINT: Endpoint = Endpoint::City;
    type Request = CityRequest;
    type Parsed = CityQuery;
    type Answer = CityMatch;

    fn parse(body: &ContractJson<Self::Request>) -> Result<CityQuery, ApiError> {
        let city = body.required_free_text("city")?;
        let (state, st) = (
            body.optional_free_text("state")?,
            body.optional_free_text("ST")?,
        );
        let country = body.country()?;
        if country == CountryCode::US && state.is_none() && st.is_none() {
            return Err(ApiError::bad_request(
                "Missing 'state' or 'ST' in request body",
            ));
        }
        Ok(CityQuery {
            country,
            city: fold(city),
            state: state.map(fold),
            st: st.map(fold),
            latin: written_in_latin(city),
        })
    }

    fn work(postal: &PostalIndex, query: CityQuery) -> Result<CityMatch, ApiError> {
        postal
            .city()
            .find(&query)
            .ok_or_else(|| ApiError::not_found("No ZIP codes found for the given city/state"))
    }
}

/// Body of /api/city.
#[derive(Debug, Object)]
#[oai(example, skip_serializing_if_is_none)]
pub struct CityRequest {
    /// City or place name; case, accents and punctuation are ignored. At most 200 characters.
    pub city: FreeText,
    /// Full state name (US: or its code); for US either `state` or `ST` is required. At most 200 characters.
    #[oai(validator(max_length = 200))]
    pub state: Option<String>,
    /// State abbreviation (admin code 1).
    #[oai(rename = "ST", validator(max_length = 200))]
    pub st: Option<String>,
    /// Your API key.
    #[oai(rename = "apiKey", validator(min_length = 1))]
    pub api_key: ApiKeyText,
    // ISO 3166-1 alpha-2 code, case-insensitive; default `US` when absent (`null` is
    // not a code: 400). (A plain comment: a described `$ref` becomes an `allOf`, which
    // generated clients cannot read; the CountryCode schema states the rule.)
    pub country: Option<CountryField>,
}

impl Example for CityRequest {
    fn example() -> Self {
        CityRequest {
            city: FreeText("Beverly Hills".into()),
            state: None,
            st: Some("CA".into()),
            api_key: "pk_your_api_key".into(),
            country: Some(CountryField("US".into())),
        }
    }
}

impl DocumentedBody for CityRequest {
    fn register_body(registry: &mut Registry) {
        Self::register(registry);
        CountryOutsideUs::register(registry);
    }

    /// For the US (no `country`, or `US`), `state` or `ST` is required.
    fn body_schema() -> MetaSchemaRef {
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            all_of: vec![Self::schema_ref()],
            any_of: vec![
                given("state", non_blank_string()),
                given("ST", non_blank_string()),
                given("country", CountryOutsideUs::schema_ref()),
            ],
            ..MetaSchema::ANY
        }))
    }
}

/// 200 of /api/city.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct CityResponse {
    /// Postal codes of the city, unique and ascending.
    pub zipcodes: Vec<String>,
    /// The city that answered, only when no name matched exactly.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_city: Option<String>,
    /// Its state (admin name 1), only on a fuzzy match.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_state: Option<String>,
    /// Its state code (admin code 1), only on a fuzzy match.
    #[oai(rename = "matchedST", skip_serializing_if_is_none)]
    #[serde(rename = "matchedST")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_st: Option<String>,
    #[oai(flatten)]
    #[serde(skip)]
    pub envelope: Envelope,
}

crate::api::reply::enveloped!(CityResponse);

impl Example for CityResponse {
    fn example() -> Self {
        CityResponse {
            zipcodes: ["94102", "94103", "94104"].map(String::from).to_vec(),
            matched_city: Some("San Francisco".into()),
            matched_state: Some("California".into()),
            matched_st: Some("CA".into()),
            envelope: example_envelope(4.999972),
        }
    }
}
