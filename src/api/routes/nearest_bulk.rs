//! POST /api/nearest-bulk: the nearest postal codes of up to 1,000 points
//! (docs/geography.md); 1 query per point.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::registry::{MetaSchema, MetaSchemaRef};
use poem_openapi::types::Example;
use poem_openapi::{Object, OpenApi};
use serde::Serialize;
use serde_json::{Map, Value};

use super::geo::*;
use crate::api::billed::{Billed, Operation};
use crate::api::contract::{ContractJson, DocumentedBody, records_array};
use crate::api::error::ApiError;
use crate::api::once::{IdempotencyHeader, Replayable};
use crate::api::types::ApiKeyText;
use crate::api::types::example_envelope;
use crate::api::types::json_value;
use crate::api::types::{CountryField, Envelope, MAX_ZIPCODE_INTEGER};
use crate::api::{ApiTags, State};
use crate::domain::CountryCode;
use crate::domain::charge::Endpoint;
use crate::domain::geo::{Coordinates, Limit, MaxKm, valid_latitude, valid_longitude};
use crate::index::postal::PostalIndex;

/// The route of /api/nearest-bulk (its handler reads the `State` from the request data).
pub struct NearestBulkApi;

#[OpenApi]
impl NearestBulkApi {
    /// The nearest postal codes of up to 1,000 points, answered in request order.
    ///
    /// As /api/nearest for each point (`limit`, `country`, `maxKm` apply to all). Billed
    /// 0.000028 USD per point; when the balance or a rate window cannot take the whole
    /// batch, nothing is charged (402 / 429). With an `Idempotency-Key`, a retry of a
    /// request whose answer was lost is never billed twice.
    #[oai(
        path = "/api/nearest-bulk",
        method = "post",
        operation_id = "nearestBulk",
        tag = "ApiTags::Geography"
    )]
    async fn nearest_bulk(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<NearestBulkRequest>,
        /// Makes retrying this request safe: a key of yours, 1 to 255 visible ASCII
        /// characters (a UUID), new for each request. A retry with the same key and body
        /// within 24 hours gets the first 200 again, byte for byte, with
        /// `Idempotent-Replayed: true`, charged nothing; the same key with another body
        /// is 422, and 409 while the first request is still running. Keys are per
        /// account; only 200s are kept (an error charges nothing: retry it as it is).
        #[oai(name = "Idempotency-Key", example = "crate::api::once::example_key")]
        idempotency_key: IdempotencyHeader,
    ) -> Result<Replayable<NearestBulkResponse>, ApiError> {
        let respond = |billed: Billed<Vec<PointResult>>| NearestBulkResponse {
            results: billed.answer,
            total_cost: billed.total_cost,
            envelope: billed.envelope,
        };
        state
            .0
            .billed_once::<NearestBulk, _>(&body, &idempotency_key, respond)
            .await
    }
}

pub struct NearestBulk;

impl Operation for NearestBulk {
    const ENDPOINT: Endpoint = Endpoint::NearestBulk;
    type Request = NearestBulkRequest;
    type Parsed = NearestBulkQuery;
    type Answer = Vec<PointResult>;

    fn parse(body: &ContractJson<NearestBulkRequest>) -> Result<NearestBulkQuery, ApiError> {
        parse_nearest_bulk(&body.fields)
    }

    fn queries(query: &NearestBulkQuery) -> u64 {
        query.points.len() as u64
    }

    fn work(postal: &PostalIndex, query: NearestBulkQuery) -> Result<Vec<PointResult>, ApiError> {
        Ok(nearest_bulk(postal, &query))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct NearestBulkQuery {
    /// Each point with its `id` as sent (`Null` when absent).
    pub points: Vec<(Coordinates, Value)>,
    pub country: Option<CountryCode>,
    pub limit: Limit,
    pub max_km: Option<MaxKm>,
}

/// records (as /api/validate-bulk: the lowest failing index wins; latitude, longitude,
/// id within one), then limit, country, maxKm.
pub fn parse_nearest_bulk(fields: &Map<String, Value>) -> Result<NearestBulkQuery, ApiError> {
    let items = records_array(fields)?;
    let points = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let number = |name: &str, valid: fn(f64) -> bool, range: &str| {
                item.get(name)
                    .and_then(Value::as_f64)
                    .filter(|x| valid(*x))
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "records[{i}].{name} must be a number from {range}"
                        ))
                    })
            };
            let latitude = number("latitude", valid_latitude, "-90 to 90")?;
            let longitude = number("longitude", valid_longitude, "-180 to 180")?;
            let id = match item.get("id") {
                None => Value::Null,
                Some(id) if PointId::admits(id) => id.clone(),
                Some(_) => {
                    return Err(ApiError::bad_request(format!(
                        "records[{i}].id must be a string or an integer from \
                         -9007199254740991 to 9007199254740991"
                    )));
                }
            };
            let center = Coordinates::parse(latitude, longitude).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "records[{i}].latitude must be a number from -90 to 90"
                ))
            })?;
            Ok((center, id))
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    Ok(NearestBulkQuery {
        points,
        limit: limit(fields)?,
        country: country_filter(fields.get("country"), INVALID_COUNTRY)?,
        max_km: max_km(fields)?,
    })
}

/// Each point's nearest places, in request order; searched in the index's visiting order
/// (`GeoIndex::visiting_order`: 1,000 points spread over the world took 11-13 ms in
/// request order and 7.6-8.0 ms in that order, in one process on this machine).
pub fn nearest_bulk(postal: &PostalIndex, query: &NearestBulkQuery) -> Vec<PointResult> {
    let centers: Vec<Coordinates> = query.points.iter().map(|(c, _)| *c).collect();
    let mut answers: Vec<Option<PointResult>> = query.points.iter().map(|_| None).collect();
    for index in postal.geo().visiting_order(&centers) {
        let (center, id) = &query.points[index];
        let hits = postal
            .geo()
            .nearest(center, query.country, query.limit, query.max_km);
        answers[index] = Some(PointResult {
            index: index as u64,
            id: (!id.is_null()).then(|| PointId(id.clone())),
            results: places(postal, &hits),
        });
    }
    answers.into_iter().flatten().collect()
}

/// One point of /api/nearest-bulk.
#[derive(Debug, Object)]
pub struct BulkPoint {
    /// -90 to 90.
    #[oai(validator(minimum(value = "-90"), maximum(value = "90")))]
    pub latitude: f64,
    /// -180 to 180.
    #[oai(validator(minimum(value = "-180"), maximum(value = "180")))]
    pub longitude: f64,
    /// Yours, echoed in the point's result.
    pub id: Option<PointId>,
}

/// Body of /api/nearest-bulk.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase", example, skip_serializing_if_is_none)]
pub struct NearestBulkRequest {
    /// 1 to 1,000 points.
    #[oai(validator(min_items = 1, max_items = 1000))]
    pub records: Vec<BulkPoint>,
    /// Per point: 1 to 100, default 10.
    #[oai(validator(minimum(value = "1"), maximum(value = "100")))]
    pub limit: Option<u64>,
    // Only codes of this country; default: every country. (A plain comment: a described
    // `$ref` becomes an `allOf`, which generated clients cannot read; the CountryCode
    // schema states the rule.)
    pub country: Option<CountryField>,
    /// Only codes at most this far, km.
    #[oai(validator(minimum(value = "0", exclusive)))]
    pub max_km: Option<f64>,
    /// Your API key.
    #[oai(validator(min_length = 1))]
    pub api_key: ApiKeyText,
}

/// The nearest codes of one point.
#[derive(Debug, Object, Serialize)]
pub struct PointResult {
    /// The point's index in `records`.
    pub index: u64,
    /// The point's `id`, when it had one.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<PointId>,
    /// Nearest first.
    pub results: Vec<Place>,
}

/// 200 of /api/nearest-bulk.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct NearestBulkResponse {
    /// In request order.
    pub results: Vec<PointResult>,
    /// Points x 0.000028 USD.
    pub total_cost: f64,
    #[oai(flatten)]
    #[serde(skip)]
    pub envelope: Envelope,
}

crate::api::reply::enveloped!(NearestBulkResponse);

impl Example for NearestBulkRequest {
    fn example() -> Self {
        NearestBulkRequest {
            records: vec![BulkPoint {
                latitude: 51.5018,
                longitude: -0.1328,
                id: Some(PointId(Value::String("westminster".into()))),
            }],
            limit: Some(2),
            country: None,
            max_km: None,
            api_key: EXAMPLE_KEY.into(),
        }
    }
}

impl Example for NearestBulkResponse {
    fn example() -> Self {
        NearestBulkResponse {
            results: vec![PointResult {
                index: 0,
                id: Some(PointId(Value::String("westminster".into()))),
                results: example_nearest_places(),
            }],
            total_cost: 0.000028,
            envelope: example_envelope(4.999972),
        }
    }
}

/// A point's `id` in /api/nearest-bulk: any string, or an integer every JSON client holds
/// exactly (-(2^53 - 1) to 2^53 - 1, RFC 7493), echoed as sent.
/// Serialized as the value sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointId(pub Value);

impl PointId {
    /// Whether `value` is an `id` the server echoes.
    pub(super) fn admits(value: &Value) -> bool {
        match value {
            Value::String(_) => true,
            Value::Number(n) => n
                .as_i64()
                .is_some_and(|v| v.unsigned_abs() <= MAX_ZIPCODE_INTEGER),
            _ => false,
        }
    }
}

json_value!(
    PointId,
    "string_or_safe_integer",
    {
        let safe = MAX_ZIPCODE_INTEGER as f64;
        MetaSchemaRef::Inline(Box::new(MetaSchema {
            one_of: vec![
                MetaSchemaRef::Inline(Box::new(MetaSchema::new("string"))),
                MetaSchemaRef::Inline(Box::new(MetaSchema {
                    minimum: Some(-safe),
                    maximum: Some(safe),
                    ..MetaSchema::new("integer")
                })),
            ],
            ..MetaSchema::ANY
        }))
    },
    PointId::admits
);

impl DocumentedBody for NearestBulkRequest {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::routes::geo::tests::{fields, text};
    use serde_json::json;

    #[test]
    fn nearest_bulk_reports_the_lowest_failing_record() {
        let cases = [
            (
                json!({}),
                "Missing required field: records (must be an array)",
            ),
            (
                json!({"records": []}),
                "records array must contain at least 1 record",
            ),
            (
                json!({"records": [{"latitude": 1, "longitude": 1}, {"latitude": 1}, {"latitude": 100}]}),
                "records[1].longitude must be a number from -180 to 180",
            ),
            (
                json!({"records": [{"latitude": 1, "longitude": 1, "id": [1]}]}),
                "records[0].id must be a string or an integer from -9007199254740991 to \
                 9007199254740991",
            ),
            (
                json!({"records": [{"latitude": 1, "longitude": 1, "id": -9007199254740992_i64}]}),
                "records[0].id must be a string or an integer from -9007199254740991 to \
                 9007199254740991",
            ),
            (
                json!({"records": [{"latitude": 1, "longitude": 1}], "limit": 1000}),
                INVALID_LIMIT,
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(
                text(parse_nearest_bulk(&fields(body.clone())).unwrap_err()),
                expected,
                "{body}"
            );
        }
        let ids = parse_nearest_bulk(&fields(json!({"records": [
            {"latitude": 1, "longitude": 1, "id": -9007199254740991_i64},
            {"latitude": 1, "longitude": 1, "id": 9007199254740991_u64},
            {"latitude": 1, "longitude": 1, "id": ""},
        ]})))
        .unwrap();
        assert_eq!(
            ids.points
                .iter()
                .map(|(_, id)| id.clone())
                .collect::<Vec<_>>(),
            [
                json!(-9007199254740991_i64),
                json!(9007199254740991_u64),
                json!("")
            ]
        );
        let many: Vec<Value> = (0..1001)
            .map(|_| json!({"latitude": 0, "longitude": 0}))
            .collect();
        assert_eq!(
            text(parse_nearest_bulk(&fields(json!({ "records": many }))).unwrap_err()),
            "records array exceeds maximum of 1000 per request"
        );
    }
}
