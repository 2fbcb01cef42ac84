//! POST /api/countries: every country with data, its formats and admin levels; free.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::types::Example;
use poem_openapi::{Object, OpenApi};
use serde::Serialize;

use crate::api::billed::MISSING_API_KEY;
use crate::api::contract::{ContractJson, DocumentedBody};
use crate::api::envelope::Timings;
use crate::api::error::ApiError;
use crate::api::reply::Reply;
use crate::api::types::ApiKeyText;
use crate::api::types::Envelope;
use crate::api::types::example_free_envelope;
use crate::api::{ApiTags, State};
use crate::domain::charge::Endpoint;
use crate::domain::postal_code::canonical;
use crate::index::geo::CountryInfo;
use crate::index::postal::PostalIndex;

/// The route of /api/countries (its handler reads the `State` from the request data).
pub struct CountriesApi;

#[OpenApi]
impl CountriesApi {
    /// Every country with data: name, records, postal-code format and regex, an example
    /// code, the admin levels its records carry. Free, and never rate-limited.
    #[oai(
        path = "/api/countries",
        method = "post",
        operation_id = "countries",
        tag = "ApiTags::Service"
    )]
    async fn countries(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<CountriesRequest>,
    ) -> Result<Reply<CountriesResponse>, ApiError> {
        let state = state.0;
        let mut timings = Timings::start();
        let account = state.status(&body, MISSING_API_KEY, Endpoint::Countries, &mut timings)?;
        let countries = timings.processing(|| country_list(&state.postal()));
        Ok(Reply(CountriesResponse {
            countries,
            envelope: Envelope::free(&account, &timings),
        }))
    }
}

pub fn country_list(postal: &PostalIndex) -> Vec<CountryEntry> {
    postal
        .geo()
        .countries()
        .iter()
        .map(|info: &CountryInfo| CountryEntry {
            code: info.code.to_string(),
            name: info.name.clone(),
            records: info.records,
            codes: info.codes as u64,
            format: info.format.clone(),
            regex: info.regex.clone(),
            example: info
                .example_key
                .as_deref()
                .and_then(|key| postal.place(info.code, key))
                .map(|place| canonical(info.code, place.postal_code)),
            admin_levels: info.admin_levels.clone(),
        })
        .collect()
}

/// Body of /api/countries.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase")]
pub struct CountriesRequest {
    /// Your API key.
    #[oai(validator(min_length = 1))]
    pub api_key: ApiKeyText,
}

/// A country with data.
#[derive(Debug, Clone, Object, Serialize)]
#[oai(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct CountryEntry {
    /// ISO 3166-1 alpha-2 code.
    pub code: String,
    pub name: String,
    /// Records (places) in the data.
    pub records: i64,
    /// Distinct postal codes.
    pub codes: u64,
    /// GeoNames' postal-code format (`#` a digit, `@` a letter); "" when none.
    pub format: String,
    /// GeoNames' postal-code regex; "" when none.
    pub regex: String,
    /// The country's first code in code order.
    pub example: Option<String>,
    /// The admin levels (1 to 3) some record of the country carries.
    pub admin_levels: Vec<u8>,
}

/// 200 of /api/countries (free).
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct CountriesResponse {
    /// By code.
    pub countries: Vec<CountryEntry>,
    #[oai(flatten)]
    #[serde(skip)]
    pub envelope: Envelope,
}

crate::api::reply::enveloped!(CountriesResponse);

impl Example for CountriesResponse {
    fn example() -> Self {
        CountriesResponse {
            countries: vec![CountryEntry {
                code: "AD".into(),
                name: "Andorra".into(),
                records: 7,
                codes: 7,
                format: "AD###".into(),
                regex: "^(?:AD)*(\\d{3})$".into(),
                example: Some("AD100".into()),
                admin_levels: vec![1],
            }],
            envelope: example_free_envelope(),
        }
    }
}

impl DocumentedBody for CountriesRequest {}
