//! POST /api/nearest: the postal codes nearest to a point (docs/geography.md); 1 query.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::types::Example;
use poem_openapi::{Object, OpenApi};
use serde::Serialize;
use serde_json::{Map, Value};

use super::geo::*;
use crate::api::billed::{Billed, Operation};
use crate::api::contract::{ContractJson, DocumentedBody};
use crate::api::error::ApiError;
use crate::api::reply::Reply;
use crate::api::types::ApiKeyText;
use crate::api::types::example_envelope;
use crate::api::types::{CountryField, Envelope};
use crate::api::{ApiTags, State};
use crate::domain::CountryCode;
use crate::domain::charge::Endpoint;
use crate::domain::geo::{Coordinates, Limit, MaxKm};
use crate::index::postal::PostalIndex;

/// The route of /api/nearest (its handler reads the `State` from the request data).
pub struct NearestApi;

#[OpenApi]
impl NearestApi {
    /// The postal codes nearest to a point.
    ///
    /// Each code is its first record; distances are great-circle (haversine, mean Earth
    /// radius 6371.0088 km), right across the antimeridian and at the poles. Equal
    /// distances are ordered by country, then code. `country` keeps only that country's
    /// codes; `maxKm` drops codes farther away. Billed 0.000028 USD when it answers 200.
    #[oai(
        path = "/api/nearest",
        method = "post",
        operation_id = "nearest",
        tag = "ApiTags::Geography"
    )]
    async fn nearest(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<NearestRequest>,
    ) -> Result<Reply<NearestResponse>, ApiError> {
        let Billed {
            answer, envelope, ..
        } = state.0.billed::<Nearest>(&body).await?;
        Ok(Reply(NearestResponse {
            results: answer,
            envelope,
        }))
    }
}

pub struct Nearest;

impl Operation for Nearest {
    const ENDPOINT: Endpoint = Endpoint::Nearest;
    type Request = NearestRequest;
    type Parsed = NearestQuery;
    type Answer = Vec<Place>;

    fn parse(body: &ContractJson<NearestRequest>) -> Result<NearestQuery, ApiError> {
        parse_nearest(&body.fields)
    }

    fn work(postal: &PostalIndex, query: NearestQuery) -> Result<Vec<Place>, ApiError> {
        Ok(nearest_places(postal, &query))
    }
}

/// /api/nearest, and each point of /api/nearest-bulk.
#[derive(Debug, Clone, PartialEq)]
pub struct NearestQuery {
    pub center: Coordinates,
    pub country: Option<CountryCode>,
    pub limit: Limit,
    pub max_km: Option<MaxKm>,
}

/// latitude, longitude, country, limit, maxKm.
pub fn parse_nearest(fields: &Map<String, Value>) -> Result<NearestQuery, ApiError> {
    Ok(NearestQuery {
        center: coordinates(fields)?,
        country: country_filter(fields.get("country"), INVALID_COUNTRY)?,
        limit: limit(fields)?,
        max_km: max_km(fields)?,
    })
}

pub fn nearest_places(postal: &PostalIndex, query: &NearestQuery) -> Vec<Place> {
    let hits = postal
        .geo()
        .nearest(&query.center, query.country, query.limit, query.max_km);
    places(postal, &hits)
}

/// Body of /api/nearest.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase", example, skip_serializing_if_is_none)]
pub struct NearestRequest {
    /// -90 to 90.
    #[oai(validator(minimum(value = "-90"), maximum(value = "90")))]
    pub latitude: f64,
    /// -180 to 180.
    #[oai(validator(minimum(value = "-180"), maximum(value = "180")))]
    pub longitude: f64,
    // Only codes of this country (ISO 3166-1 alpha-2); default: every country. (A plain
    // comment: a described `$ref` becomes an `allOf`, which generated clients cannot
    // read; the CountryCode schema states the rule.)
    pub country: Option<CountryField>,
    /// 1 to 100, default 10.
    #[oai(validator(minimum(value = "1"), maximum(value = "100")))]
    pub limit: Option<u64>,
    /// Only codes at most this far, km (greater than 0).
    #[oai(validator(minimum(value = "0", exclusive)))]
    pub max_km: Option<f64>,
    /// Your API key.
    #[oai(validator(min_length = 1))]
    pub api_key: ApiKeyText,
}

/// 200 of /api/nearest.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct NearestResponse {
    /// Nearest first.
    pub results: Vec<Place>,
    #[oai(flatten)]
    #[serde(skip)]
    pub envelope: Envelope,
}

crate::api::reply::enveloped!(NearestResponse);

impl Example for NearestRequest {
    fn example() -> Self {
        NearestRequest {
            latitude: 51.5018,
            longitude: -0.1328,
            country: Some(CountryField("GB".into())),
            limit: Some(2),
            max_km: None,
            api_key: EXAMPLE_KEY.into(),
        }
    }
}

impl Example for NearestResponse {
    fn example() -> Self {
        NearestResponse {
            results: example_nearest_places(),
            envelope: example_envelope(4.999972),
        }
    }
}

impl DocumentedBody for NearestRequest {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::routes::geo::tests::{fields, text};
    use serde_json::json;

    #[test]
    fn nearest_checks_latitude_longitude_country_limit_max_km_in_that_order() {
        let cases = [
            (json!({}), "Missing required field: latitude"),
            (json!({"latitude": "1", "longitude": 500}), INVALID_LATITUDE),
            (json!({"latitude": 91, "longitude": 0}), INVALID_LATITUDE),
            (json!({"latitude": 1}), "Missing required field: longitude"),
            (json!({"latitude": 1, "longitude": -181}), INVALID_LONGITUDE),
            (
                json!({"latitude": 1, "longitude": 1, "country": "XX", "limit": 0}),
                INVALID_COUNTRY,
            ),
            (
                json!({"latitude": 1, "longitude": 1, "limit": 0}),
                INVALID_LIMIT,
            ),
            (
                json!({"latitude": 1, "longitude": 1, "limit": 101}),
                INVALID_LIMIT,
            ),
            (
                json!({"latitude": 1, "longitude": 1, "limit": 2.5}),
                INVALID_LIMIT,
            ),
            (
                json!({"latitude": 1, "longitude": 1, "maxKm": 0}),
                INVALID_MAX_KM,
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(
                text(parse_nearest(&fields(body.clone())).unwrap_err()),
                expected,
                "{body}"
            );
        }
        let q = parse_nearest(&fields(
            json!({"latitude": -90, "longitude": 180, "country": "gb"}),
        ))
        .unwrap();
        assert_eq!(q.country, CountryCode::parse("GB"));
        assert_eq!(q.limit, Limit::default());
    }
}
