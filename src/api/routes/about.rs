//! `/api/aboutapi`: the service's version and coverage; free, never rate-limited (a
//! health check with a key).

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::types::Example;
use poem_openapi::{Object, OpenApi};
use serde::Serialize;

use crate::api::contract::{ContractJson, DocumentedBody};
use crate::api::envelope::Timings;
use crate::api::error::ApiError;
use crate::api::reply::Reply;
use crate::api::types::*;
use crate::api::{ApiTags, State};

/// The route of /api/aboutapi (its handler reads the `State` from the request data).
pub struct AboutApi;

#[OpenApi]
impl AboutApi {
    /// Service version and coverage; free, and never rate-limited (a health check).
    #[oai(
        path = "/api/aboutapi",
        method = "post",
        operation_id = "aboutApi",
        tag = "ApiTags::Service"
    )]
    async fn aboutapi(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<AboutRequest>,
    ) -> Result<Reply<AboutResponse>, ApiError> {
        let state = state.0;
        let mut timings = Timings::start();
        let account = state.status(
            &body,
            "Missing or invalid 'apiKey'",
            crate::domain::charge::Endpoint::Aboutapi,
            &mut timings,
        )?;
        let coverage = timings.processing(|| state.postal().coverage());
        Ok(Reply(AboutResponse {
            about: "postal: postal-code lookup, validation and city search over GeoNames data, billed per query."
                .to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            coverage: format!(
                "{} postal codes in {} countries. Data: GeoNames (CC BY 4.0)",
                thousands(coverage.records),
                coverage.countries
            ),
            usage: "POST JSON with your apiKey to /api/lookup, /api/city, /api/metacode, /api/validate or \
                    /api/validate-bulk; 0.000028 USD per query (per record in bulk); docs at /docs."
                .to_string(),
            envelope: Envelope::free(&account, &timings),
        }))
    }
}

/// Body of /api/aboutapi.
#[derive(Debug, Object)]
#[oai(example)]
pub struct AboutRequest {
    /// Your API key.
    #[oai(rename = "apiKey", validator(min_length = 1))]
    pub api_key: ApiKeyText,
}

impl Example for AboutRequest {
    fn example() -> Self {
        AboutRequest {
            api_key: "pk_your_api_key".into(),
        }
    }
}

impl DocumentedBody for AboutRequest {}

/// 200 of /api/aboutapi.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct AboutResponse {
    #[oai(rename = "About")]
    #[serde(rename = "About")]
    pub about: String,
    /// Semantic version of the service.
    pub version: String,
    pub coverage: String,
    pub usage: String,
    #[oai(flatten)]
    #[serde(skip)]
    pub envelope: Envelope,
}

crate::api::reply::enveloped!(AboutResponse);

impl Example for AboutResponse {
    fn example() -> Self {
        AboutResponse {
            about: "postal: postal-code lookup, validation and city search over GeoNames data, billed per query."
                .into(),
            version: env!("CARGO_PKG_VERSION").into(),
            coverage: "1,648,448 postal codes in 120 countries. Data: GeoNames (CC BY 4.0)".into(),
            usage: "POST JSON with your apiKey to /api/lookup ...".into(),
            envelope: example_free_envelope(),
        }
    }
}

/// `1648448` -> `1,648,448`.
fn thousands(n: i64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn thousands_are_separated_by_commas() {
        assert_eq!(super::thousands(1_648_448), "1,648,448");
        assert_eq!(super::thousands(120), "120");
        assert_eq!(super::thousands(1000), "1,000");
    }
}
