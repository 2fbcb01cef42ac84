//! POST /api/radius: every postal code within a radius of a code or a point
//! (docs/geography.md); 1 query.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::registry::{MetaSchema, MetaSchemaRef};
use poem_openapi::types::{Example, Type};
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
use crate::api::types::given;
use crate::api::types::{CountryField, Envelope, ZipCodeValue};
use crate::api::{ApiTags, State};
use crate::domain::CountryCode;
use crate::domain::charge::Endpoint;
use crate::domain::geo::{Coordinates, MAX_RADIUS_RESULTS, RadiusKm};
use crate::domain::postal_code::ZipInput;
use crate::index::postal::PostalIndex;

/// The route of /api/radius (its handler reads the `State` from the request data).
pub struct RadiusApi;

#[OpenApi]
impl RadiusApi {
    /// Every postal code within a radius of a code or a point (at most 500 km).
    ///
    /// Nearest first, at most 1,000 (then `truncated` is true). Around a `zipcode`
    /// (`country` names its country, default `US`) codes of every country answer; around
    /// `latitude`/`longitude` a `country` keeps only that country's codes; a body with both
    /// centres, or neither, is a 400. Billed 0.000028 USD when it answers 200.
    #[oai(
        path = "/api/radius",
        method = "post",
        operation_id = "radius",
        tag = "ApiTags::Geography"
    )]
    async fn radius(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<RadiusRequest>,
    ) -> Result<Reply<RadiusResponse>, ApiError> {
        let Billed {
            answer, envelope, ..
        } = state.0.billed::<Radius>(&body).await?;
        let (results, truncated) = answer;
        Ok(Reply(RadiusResponse {
            results,
            truncated,
            envelope,
        }))
    }
}

pub struct Radius;

impl Operation for Radius {
    const ENDPOINT: Endpoint = Endpoint::Radius;
    type Request = RadiusRequest;
    type Parsed = RadiusQuery;
    type Answer = (Vec<Place>, bool);

    fn parse(body: &ContractJson<RadiusRequest>) -> Result<RadiusQuery, ApiError> {
        parse_radius(&body.fields)
    }

    fn work(postal: &PostalIndex, query: RadiusQuery) -> Result<(Vec<Place>, bool), ApiError> {
        radius_places(postal, &query)
    }
}

/// Where a radius is centred.
#[derive(Debug, Clone, PartialEq)]
pub enum Center {
    Code(CountryCode, ZipInput),
    Point(Coordinates, Option<CountryCode>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct RadiusQuery {
    pub center: Center,
    pub radius: RadiusKm,
}

/// The centre (zipcode, or latitude and longitude; not both), country, radiusKm. A field
/// sent, even as `null`, is given: `{zipcode, latitude: null}` sends both centres.
pub fn parse_radius(fields: &Map<String, Value>) -> Result<RadiusQuery, ApiError> {
    let has_point = fields.contains_key("latitude") || fields.contains_key("longitude");
    let center = match (fields.get("zipcode"), has_point) {
        (Some(_), true) => return Err(ApiError::bad_request(TWO_CENTERS)),
        (None, false) => return Err(ApiError::bad_request(NO_CENTER)),
        (Some(zipcode), false) => {
            let zipcode = zip_input(Some(zipcode))
                .ok_or_else(|| ApiError::bad_request("Missing required field: zipcode"))?;
            Center::Code(
                code_country(fields.get("country"), INVALID_COUNTRY)?,
                zipcode,
            )
        }
        (None, true) => Center::Point(
            coordinates(fields)?,
            country_filter(fields.get("country"), INVALID_COUNTRY)?,
        ),
    };
    let radius = match present(fields, "radiusKm") {
        None => return Err(ApiError::bad_request("Missing required field: radiusKm")),
        Some(v) => v
            .as_f64()
            .and_then(RadiusKm::parse)
            .ok_or_else(|| ApiError::bad_request(INVALID_RADIUS))?,
    };
    Ok(RadiusQuery { center, radius })
}

/// 404 when the centre code is unknown or has no coordinates.
pub fn radius_places(
    postal: &PostalIndex,
    query: &RadiusQuery,
) -> Result<(Vec<Place>, bool), ApiError> {
    let (center, filter) = match &query.center {
        Center::Point(point, filter) => (*point, *filter),
        Center::Code(country, zipcode) => {
            let record = postal
                .lookup(*country, zipcode)
                .ok_or_else(|| ApiError::not_found(ZIP_NOT_FOUND))?;
            (located(&record)?, None)
        }
    };
    let (hits, truncated) = postal
        .geo()
        .within(&center, query.radius, filter, MAX_RADIUS_RESULTS);
    Ok((places(postal, &hits), truncated))
}

/// Body of /api/radius: `zipcode` (and `country`) or `latitude` and `longitude`.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase", example, skip_serializing_if_is_none)]
pub struct RadiusRequest {
    /// The centre's postal code (string or integer, as /api/lookup).
    pub zipcode: Option<ZipCodeValue>,
    // With `zipcode`: its country (default `US`); with coordinates: only codes of this
    // country. (A plain comment: a described `$ref` becomes an `allOf`, which generated
    // clients cannot read; the CountryCode schema states the rule.)
    pub country: Option<CountryField>,
    /// The centre's latitude, -90 to 90 (instead of `zipcode`).
    #[oai(validator(minimum(value = "-90"), maximum(value = "90")))]
    pub latitude: Option<f64>,
    /// The centre's longitude, -180 to 180 (instead of `zipcode`).
    #[oai(validator(minimum(value = "-180"), maximum(value = "180")))]
    pub longitude: Option<f64>,
    /// Greater than 0, at most 500.
    #[oai(validator(minimum(value = "0", exclusive), maximum(value = "500")))]
    pub radius_km: f64,
    /// Your API key.
    #[oai(validator(min_length = 1))]
    pub api_key: ApiKeyText,
}

/// 200 of /api/radius.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct RadiusResponse {
    /// Nearest first, at most 1,000.
    pub results: Vec<Place>,
    /// More than 1,000 codes are within the radius; the nearest 1,000 answered.
    pub truncated: bool,
    #[oai(flatten)]
    #[serde(skip)]
    pub envelope: Envelope,
}

crate::api::reply::enveloped!(RadiusResponse);

impl Example for RadiusRequest {
    fn example() -> Self {
        RadiusRequest {
            zipcode: Some(ZipCodeValue(Value::String("SW1A".into()))),
            country: Some(CountryField("GB".into())),
            latitude: None,
            longitude: None,
            radius_km: 0.5,
            api_key: EXAMPLE_KEY.into(),
        }
    }
}

impl Example for RadiusResponse {
    fn example() -> Self {
        RadiusResponse {
            results: example_nearest_places().into_iter().take(1).collect(),
            truncated: false,
            envelope: example_envelope(4.999972),
        }
    }
}

impl DocumentedBody for RadiusRequest {
    /// Either `zipcode` or `latitude`, and either `zipcode` or `longitude`: a `zipcode`
    /// alone, or `latitude` and `longitude` without one (OpenAPI 3.0 has no `not`; two
    /// "exactly one of" say it).
    fn body_schema() -> MetaSchemaRef {
        // Each with its property's schema, as in RadiusRequest (which lints tell apart).
        let degrees = |limit: f64| {
            MetaSchemaRef::Inline(Box::new(MetaSchema {
                minimum: Some(-limit),
                maximum: Some(limit),
                ..MetaSchema::new_with_format("number", "double")
            }))
        };
        let exactly_one = |other: MetaSchemaRef| {
            MetaSchemaRef::Inline(Box::new(MetaSchema {
                one_of: vec![given("zipcode", ZipCodeValue::schema_ref()), other],
                ..MetaSchema::ANY
            }))
        };
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            all_of: vec![
                Self::schema_ref(),
                exactly_one(given("latitude", degrees(90.0))),
                exactly_one(given("longitude", degrees(180.0))),
            ],
            ..MetaSchema::ANY
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::routes::geo::tests::{fields, text};
    use serde_json::json;

    #[test]
    fn radius_takes_a_code_or_a_point_but_not_both() {
        let cases = [
            (json!({"radiusKm": 5}), NO_CENTER),
            (
                json!({"zipcode": "1", "latitude": 1, "radiusKm": 5}),
                TWO_CENTERS,
            ),
            (
                json!({"zipcode": true, "radiusKm": 5}),
                "Missing required field: zipcode",
            ),
            (
                json!({"zipcode": "10001", "country": "U", "radiusKm": 5}),
                INVALID_COUNTRY,
            ),
            (
                json!({"zipcode": "10001"}),
                "Missing required field: radiusKm",
            ),
            (
                json!({"zipcode": "10001", "radiusKm": 500.5}),
                INVALID_RADIUS,
            ),
            (
                json!({"longitude": 1, "radiusKm": 1}),
                "Missing required field: latitude",
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(
                text(parse_radius(&fields(body.clone())).unwrap_err()),
                expected,
                "{body}"
            );
        }
        let q = parse_radius(&fields(json!({"zipcode": 2134, "radiusKm": 500}))).unwrap();
        assert_eq!(
            q.center,
            Center::Code(CountryCode::US, ZipInput::Integer(2134))
        );
    }
}
