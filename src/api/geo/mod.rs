//! The geography endpoints (docs/geography.md): nearest, radius, distance, autocomplete,
//! countries, nearest-bulk.
//!
//! Each handler is four steps kept apart, so that the billed-request path can change
//! under them: `parse_*` (the body's fields into domain types, or the 400 with its text),
//! the shared authenticate / precheck / charge of `State`, the work (a function of the
//! in-memory `PostalIndex`, no HTTP), and the response.

use std::sync::Arc;

use poem::web::Data;

use poem_openapi::registry::{MetaSchema, MetaSchemaRef};
use poem_openapi::types::{Example, Type};
use poem_openapi::{Object, OpenApi};
use serde::Serialize;
use serde_json::{Map, Value};

use super::billed::{Billed, MISSING_API_KEY, Operation};
use super::contract::{ContractJson, records_array, zip_input};
use super::envelope::Timings;
use super::error::ApiError;
use super::reply::Reply;
use super::types::{CountryField, Envelope, MAX_ZIPCODE_INTEGER, ZipCodeValue};
use super::types::{example_envelope, example_free_envelope};
use super::types::{given, json_value};
use super::{ApiTags, State};
use crate::db::postal::PlaceRecord;
use crate::domain::CountryCode;
use crate::domain::charge::Endpoint;
use crate::domain::geo::{
    Coordinates, Limit, MAX_RADIUS_RESULTS, MaxKm, Nearby, RadiusKm, km_to_miles, round_km,
    valid_latitude, valid_longitude,
};
use crate::domain::postal_code::{ZipInput, canonical, compact};
use crate::index::geo::CountryInfo;
use crate::index::postal::{PlaceView, PostalIndex};

const ZIP_NOT_FOUND: &str = "ZIP code not found";
const NO_COORDINATES: &str = "ZIP code has no coordinates";
const INVALID_COUNTRY: &str = "Invalid 'country'";
const INVALID_LIMIT: &str = "limit must be an integer from 1 to 100";
const INVALID_MAX_KM: &str = "maxKm must be a number greater than 0";
const INVALID_LATITUDE: &str = "latitude must be a number from -90 to 90";
const INVALID_LONGITUDE: &str = "longitude must be a number from -180 to 180";
const INVALID_RADIUS: &str = "radiusKm must be a number greater than 0 and at most 500";
const NO_CENTER: &str = "Missing 'zipcode' or 'latitude'/'longitude' in request body";
const TWO_CENTERS: &str = "Send either 'zipcode' or 'latitude'/'longitude', not both";
const INVALID_Q: &str = "q may contain only letters, digits, spaces and hyphens";

/// The geography API (its handlers read the `State` from the request data).
pub struct GeoApi;

#[OpenApi]
impl GeoApi {
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

    /// Postal codes of a country that start with `q`, in code order.
    ///
    /// Spaces and hyphens are ignored on both sides (`SW1`, `902`, `100-00`, `10000`).
    /// Billed 0.000028 USD when it answers 200, also when nothing starts with `q`.
    #[oai(
        path = "/api/autocomplete",
        method = "post",
        operation_id = "autocomplete",
        tag = "ApiTags::PostalCodes"
    )]
    async fn autocomplete(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<AutocompleteRequest>,
    ) -> Result<Reply<AutocompleteResponse>, ApiError> {
        let Billed {
            answer, envelope, ..
        } = state.0.billed::<Autocomplete>(&body).await?;
        Ok(Reply(AutocompleteResponse {
            results: answer,
            envelope,
        }))
    }

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

    /// The nearest postal codes of up to 1,000 points, answered in request order.
    ///
    /// As /api/nearest for each point (`limit`, `country`, `maxKm` apply to all). Billed
    /// 0.000028 USD per point; when the balance or a rate window cannot take the whole
    /// batch, nothing is charged (402 / 429).
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
    ) -> Result<Reply<NearestBulkResponse>, ApiError> {
        let Billed {
            answer,
            envelope,
            total_cost,
        } = state.0.billed::<NearestBulk>(&body).await?;
        Ok(Reply(NearestBulkResponse {
            results: answer,
            total_cost,
            envelope,
        }))
    }
}

/// A geography operation on the one billed path: its body, its parse, its cost in
/// queries and its work on the in-memory index (an `Err`, e.g. 404, charges nothing).
macro_rules! geo_operation {
    ($name:ident, $endpoint:expr, $request:ty => $parsed:ty => $answer:ty,
     parse: $parse:expr, queries: $queries:expr, work: $work:expr) => {
        pub struct $name;

        impl Operation for $name {
            const ENDPOINT: Endpoint = $endpoint;
            type Body = ContractJson<$request>;
            type Parsed = $parsed;
            type Answer = $answer;

            fn api_key(body: &Self::Body) -> Result<&str, ApiError> {
                body.api_key(MISSING_API_KEY)
            }

            fn parse(body: &Self::Body) -> Result<$parsed, ApiError> {
                $parse(&body.fields)
            }

            fn queries(parsed: &$parsed) -> u64 {
                $queries(parsed)
            }

            // An `async fn`: the work runs when awaited, inside `processingTime` (a
            // `std::future::ready(work())` ran it before the clock started).
            async fn work(state: &State, parsed: $parsed) -> Result<$answer, ApiError> {
                $work(&state.postal(), &parsed)
            }
        }
    };
}

fn one<T>(_: &T) -> u64 {
    1
}

geo_operation!(Nearest, Endpoint::Nearest, NearestRequest => NearestQuery => Vec<Place>,
    parse: parse_nearest, queries: one,
    work: |index: &PostalIndex, query: &NearestQuery| Ok(nearest_places(index, query)));
geo_operation!(Radius, Endpoint::Radius, RadiusRequest => RadiusQuery => (Vec<Place>, bool),
    parse: parse_radius, queries: one, work: radius_places);
geo_operation!(Distance, Endpoint::Distance, DistanceRequest => DistanceQuery => (Place, Place),
    parse: parse_distance, queries: one, work: distance_between);
geo_operation!(Autocomplete, Endpoint::Autocomplete,
    AutocompleteRequest => AutocompleteQuery => Vec<Suggestion>,
    parse: parse_autocomplete, queries: one,
    work: |index: &PostalIndex, query: &AutocompleteQuery| Ok(suggestions(index, query)));
geo_operation!(NearestBulk, Endpoint::NearestBulk,
    NearestBulkRequest => NearestBulkQuery => Vec<PointResult>,
    parse: parse_nearest_bulk, queries: |query: &NearestBulkQuery| query.points.len() as u64,
    work: |index: &PostalIndex, query: &NearestBulkQuery| Ok(nearest_bulk(index, query)));

// ---------------------------------------------------------------------------------------
// Parse: the body's fields into domain types, in the order docs/geography.md lists them.
// ---------------------------------------------------------------------------------------

/// /api/nearest, and each point of /api/nearest-bulk.
#[derive(Debug, Clone, PartialEq)]
pub struct NearestQuery {
    pub center: Coordinates,
    pub country: Option<CountryCode>,
    pub limit: Limit,
    pub max_km: Option<MaxKm>,
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

#[derive(Debug, Clone, PartialEq)]
pub struct DistanceQuery {
    pub from: (CountryCode, ZipInput),
    pub to: (CountryCode, ZipInput),
}

#[derive(Debug, Clone, PartialEq)]
pub struct AutocompleteQuery {
    pub country: CountryCode,
    /// Compact (upper case, no spaces or hyphens), non-empty.
    pub prefix: String,
    pub limit: Limit,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NearestBulkQuery {
    /// Each point with its `id` as sent (`Null` when absent).
    pub points: Vec<(Coordinates, Value)>,
    pub country: Option<CountryCode>,
    pub limit: Limit,
    pub max_km: Option<MaxKm>,
}

/// A required field's value: `null` is missing. (An optional field sent as `null` is not
/// absent: it answers that field's 400, as `country` in the contract.)
fn present<'a>(fields: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    fields.get(name).filter(|v| !v.is_null())
}

/// A required number in `[low, high]`: missing or null -> `Missing required field:
/// <name>`, anything else out of range -> `invalid`.
fn number_in(
    fields: &Map<String, Value>,
    name: &str,
    valid: fn(f64) -> bool,
    invalid: &str,
) -> Result<f64, ApiError> {
    match present(fields, name) {
        None => Err(ApiError::bad_request(format!(
            "Missing required field: {name}"
        ))),
        Some(v) => v
            .as_f64()
            .filter(|x| valid(*x))
            .ok_or_else(|| ApiError::bad_request(invalid)),
    }
}

fn coordinates(fields: &Map<String, Value>) -> Result<Coordinates, ApiError> {
    let latitude = number_in(fields, "latitude", valid_latitude, INVALID_LATITUDE)?;
    let longitude = number_in(fields, "longitude", valid_longitude, INVALID_LONGITUDE)?;
    Coordinates::parse(latitude, longitude).ok_or_else(|| ApiError::bad_request(INVALID_LATITUDE))
}

/// An optional country filter: absent is none; `null` is not a code (`invalid`).
fn country_filter(value: Option<&Value>, invalid: &str) -> Result<Option<CountryCode>, ApiError> {
    match value {
        None => Ok(None),
        Some(v) => v
            .as_str()
            .and_then(CountryCode::parse)
            .map(Some)
            .ok_or_else(|| ApiError::bad_request(invalid)),
    }
}

/// A code's country: absent is `US`, as in the contract (`null` is `invalid`).
fn code_country(value: Option<&Value>, invalid: &str) -> Result<CountryCode, ApiError> {
    country_filter(value, invalid).map(|c| c.unwrap_or(CountryCode::US))
}

/// `limit`: absent is the default; `null` is not an integer.
fn limit(fields: &Map<String, Value>) -> Result<Limit, ApiError> {
    match fields.get("limit") {
        None => Ok(Limit::default()),
        Some(v) => v
            .as_u64()
            .and_then(Limit::parse)
            .ok_or_else(|| ApiError::bad_request(INVALID_LIMIT)),
    }
}

/// `maxKm`: absent is no bound; `null` is not a number.
fn max_km(fields: &Map<String, Value>) -> Result<Option<MaxKm>, ApiError> {
    match fields.get("maxKm") {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .and_then(MaxKm::parse)
            .map(Some)
            .ok_or_else(|| ApiError::bad_request(INVALID_MAX_KM)),
    }
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

/// q, country, limit.
pub fn parse_autocomplete(fields: &Map<String, Value>) -> Result<AutocompleteQuery, ApiError> {
    let q = match present(fields, "q") {
        Some(Value::String(q)) if !q.trim().is_empty() => q,
        _ => return Err(ApiError::bad_request("Missing required field: q")),
    };
    let prefix = compact(q.trim());
    if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(ApiError::bad_request(INVALID_Q));
    }
    Ok(AutocompleteQuery {
        country: code_country(fields.get("country"), INVALID_COUNTRY)?,
        prefix,
        limit: limit(fields)?,
    })
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

// ---------------------------------------------------------------------------------------
// Work: answers from the in-memory index, no HTTP.
// ---------------------------------------------------------------------------------------

pub fn nearest_places(postal: &PostalIndex, query: &NearestQuery) -> Vec<Place> {
    let hits = postal
        .geo()
        .nearest(&query.center, query.country, query.limit, query.max_km);
    places(postal, &hits)
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
            city: record.place_name,
            state: record.admin_name1.unwrap_or_default(),
            st: record.admin_code1.unwrap_or_default(),
            latitude: at.latitude(),
            longitude: at.longitude(),
            distance_km: None,
        })
    };
    Ok((place(&query.from)?, place(&query.to)?))
}

pub fn suggestions(postal: &PostalIndex, query: &AutocompleteQuery) -> Vec<Suggestion> {
    postal
        .geo()
        .autocomplete(query.country, &query.prefix, query.limit)
        .into_iter()
        .filter_map(|key| {
            let place = postal.place(query.country, key)?;
            Some(Suggestion {
                zipcode: canonical(query.country, place.postal_code),
                city: place.place_name.to_string(),
            })
        })
        .collect()
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

fn located(record: &PlaceRecord) -> Result<Coordinates, ApiError> {
    record
        .latitude
        .zip(record.longitude)
        .and_then(|(lat, lon)| Coordinates::parse(lat, lon))
        .ok_or_else(|| ApiError::not_found(NO_COORDINATES))
}

fn places(postal: &PostalIndex, hits: &[Nearby]) -> Vec<Place> {
    hits.iter()
        .filter_map(|hit| {
            let view = postal.place_at(hit.country, hit.rank)?;
            Some(Place::new(hit.country, &view, Some(hit.km)))
        })
        .collect()
}

mod shapes;
pub use shapes::*;
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn text(e: ApiError) -> String {
        match e {
            ApiError::BadRequest(b) => b.0.error,
            other => format!("{other:?}"),
        }
    }

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

    #[test]
    fn autocomplete_compacts_q() {
        let q = parse_autocomplete(&fields(json!({"q": " sw1a-1", "country": "GB"}))).unwrap();
        assert_eq!(q.prefix, "SW1A1");
        assert_eq!(
            text(parse_autocomplete(&fields(json!({"q": "90*"}))).unwrap_err()),
            INVALID_Q
        );
        assert_eq!(
            text(parse_autocomplete(&fields(json!({"q": "--"}))).unwrap_err()),
            INVALID_Q
        );
        assert_eq!(
            text(parse_autocomplete(&fields(json!({"q": ""}))).unwrap_err()),
            "Missing required field: q"
        );
    }

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
