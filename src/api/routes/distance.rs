//! POST /api/distance: the great-circle distance between two postal codes
//! (docs/geography.md); 1 query.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::types::Example;
use poem_openapi::{Object, OpenApi};
use serde::Serialize;
use serde_json::{Map, Value};

use super::geo::*;
use crate::api::billed::{Billed, Operation};
use crate::api::contract::{ContractJson, DocumentedBody, zip_input};
use crate::api::error::ApiError;
use crate::api::reply::Reply;
use crate::api::types::ApiKeyText;
use crate::api::types::example_envelope;
use crate::api::types::{CountryField, Envelope, ZipCodeValue};
use crate::api::{ApiTags, State};
use crate::domain::CountryCode;
use crate::domain::charge::Endpoint;
use crate::domain::geo::{km_to_miles, round_km};
use crate::domain::postal_code::{ZipInput, canonical};
use crate::index::postal::PostalIndex;

/// The route of /api/distance (its handler reads the `State` from the request data).
pub struct DistanceApi;

#[OpenApi]
impl DistanceApi {
    /// The great-circle distance between two postal codes (of any countries).
    ///
    /// Billed 0.000028 USD when it answers 200.
    #[oai(
        path = "/api/distance",
        method = "post",
        operation_id = "distance",
        tag = "ApiTags::Geography"
    )]
    async fn distance(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<DistanceRequest>,
    ) -> Result<Reply<DistanceResponse>, ApiError> {
        let Billed {
            answer, envelope, ..
        } = state.0.billed::<Distance>(&body).await?;
        let (from, to) = answer;
        let km = from.distance_to(&to);
        Ok(Reply(DistanceResponse {
            km: round_km(km),
            miles: round_km(km_to_miles(km)),
            from,
            to,
            envelope,
        }))
    }
}

pub struct Distance;

impl Operation for Distance {
    const ENDPOINT: Endpoint = Endpoint::Distance;
    type Request = DistanceRequest;
    type Parsed = DistanceQuery;
    type Answer = (Place, Place);

    fn parse(body: &ContractJson<DistanceRequest>) -> Result<DistanceQuery, ApiError> {
        parse_distance(&body.fields)
    }

    fn work(postal: &PostalIndex, query: DistanceQuery) -> Result<(Place, Place), ApiError> {
        distance_between(postal, &query)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DistanceQuery {
    pub from: (CountryCode, ZipInput),
    pub to: (CountryCode, ZipInput),
}

/// from.zipcode, from.country, to.zipcode, to.country.
pub fn parse_distance(fields: &Map<String, Value>) -> Result<DistanceQuery, ApiError> {
    let end = |name: &str| -> Result<(CountryCode, ZipInput), ApiError> {
        let Some(Value::Object(end)) = present(fields, name) else {
            return Err(ApiError::bad_request(format!(
                "Missing required field: {name}"
            )));
        };
        let zipcode = zip_input(end.get("zipcode")).ok_or_else(|| {
            ApiError::bad_request(format!("Missing required field: {name}.zipcode"))
        })?;
        let country = code_country(end.get("country"), &format!("Invalid '{name}.country'"))?;
        Ok((country, zipcode))
    };
    Ok(DistanceQuery {
        from: end("from")?,
        to: end("to")?,
    })
}

/// Both codes' places (404 when either is unknown or has no coordinates).
pub fn distance_between(
    postal: &PostalIndex,
    query: &DistanceQuery,
) -> Result<(Place, Place), ApiError> {
    let place = |(country, zipcode): &(CountryCode, ZipInput)| -> Result<Place, ApiError> {
        let record = postal
            .lookup(*country, zipcode)
            .ok_or_else(|| ApiError::not_found(ZIP_NOT_FOUND))?;
        let at = located(&record)?;
        Ok(Place {
            zipcode: canonical(*country, &record.postal_code),
            country: country.to_string(),
            city: postal
                .office_city(*country, &record.postal_code, &record.place_name)
                .map_or(record.place_name, str::to_string),
            state: record.admin_name1.unwrap_or_default(),
            st: record.admin_code1.unwrap_or_default(),
            latitude: at.latitude(),
            longitude: at.longitude(),
            distance_km: None,
        })
    };
    Ok((place(&query.from)?, place(&query.to)?))
}

/// One end of /api/distance.
#[derive(Debug, Object)]
pub struct CodeRef {
    /// Postal code (string or integer, as /api/lookup).
    pub zipcode: ZipCodeValue,
    // ISO 3166-1 alpha-2 code; default `US`. (A plain comment: a described `$ref`
    // becomes an `allOf`, which generated clients cannot read; the CountryCode schema
    // states the rule.)
    pub country: Option<CountryField>,
}

/// Body of /api/distance.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase", example, skip_serializing_if_is_none)]
pub struct DistanceRequest {
    pub from: CodeRef,
    pub to: CodeRef,
    /// Your API key.
    #[oai(validator(min_length = 1))]
    pub api_key: ApiKeyText,
}

/// 200 of /api/distance.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct DistanceResponse {
    /// Great-circle distance, km, rounded to the metre.
    pub km: f64,
    /// The same in international miles, three decimals.
    pub miles: f64,
    pub from: Place,
    pub to: Place,
    #[oai(flatten)]
    #[serde(skip)]
    pub envelope: Envelope,
}

crate::api::reply::enveloped!(DistanceResponse);

impl Example for DistanceRequest {
    fn example() -> Self {
        DistanceRequest {
            from: CodeRef {
                zipcode: ZipCodeValue(Value::String("90210".into())),
                country: Some(CountryField("US".into())),
            },
            to: CodeRef {
                zipcode: ZipCodeValue(Value::String("10001".into())),
                country: Some(CountryField("US".into())),
            },
            api_key: EXAMPLE_KEY.into(),
        }
    }
}

impl Example for DistanceResponse {
    fn example() -> Self {
        DistanceResponse {
            km: 3948.243,
            miles: 2453.325,
            from: example_place(
                "90210",
                "US",
                "Beverly Hills",
                ("California", "CA"),
                (34.0901, -118.4065),
                None,
            ),
            to: example_place(
                "10001",
                "US",
                "New York",
                ("New York", "NY"),
                (40.7484, -73.9967),
                None,
            ),
            envelope: example_envelope(4.999972),
        }
    }
}

impl DocumentedBody for DistanceRequest {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::routes::geo::tests::{fields, text};
    use serde_json::json;

    #[test]
    fn distance_names_the_end_that_is_wrong() {
        let cases = [
            (json!({}), "Missing required field: from"),
            (json!({"from": {}}), "Missing required field: from.zipcode"),
            (
                json!({"from": {"zipcode": "1", "country": 1}}),
                "Invalid 'from.country'",
            ),
            (
                json!({"from": {"zipcode": "1"}, "to": "x"}),
                "Missing required field: to",
            ),
            (
                json!({"from": {"zipcode": "1"}, "to": {"zipcode": " "}}),
                "Missing required field: to.zipcode",
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(
                text(parse_distance(&fields(body.clone())).unwrap_err()),
                expected,
                "{body}"
            );
        }
    }
}
