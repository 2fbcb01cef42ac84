//! What the geography operations share (docs/geography.md): the `Place` they answer, the
//! parse of the fields they have in common, and the texts of their 400s and 404s. Each
//! is on the one billed path by its `Operation`, in its own file.
//!
//! Each operation is four steps kept apart, so that the billed-request path can change
//! under them: `parse_*` (the body's fields into domain types, or the 400 with its text),
//! the shared authenticate / precheck / charge of `State`, the work (a function of the
//! in-memory `PostalIndex`, no HTTP), and the response.

use poem_openapi::Object;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::api::error::ApiError;
use crate::domain::CountryCode;
use crate::domain::geo::{
    Coordinates, Limit, MaxKm, Nearby, round_km, valid_latitude, valid_longitude,
};
use crate::domain::postal_code::canonical;
use crate::index::postal::PlaceRecord;
use crate::index::postal::{PlaceView, PostalIndex};

pub(super) const ZIP_NOT_FOUND: &str = "ZIP code not found";
pub(super) const NO_COORDINATES: &str = "ZIP code has no coordinates";
pub(super) const INVALID_COUNTRY: &str = "Invalid 'country'";
pub(super) const INVALID_LIMIT: &str = "limit must be an integer from 1 to 100";
pub(super) const INVALID_MAX_KM: &str = "maxKm must be a number greater than 0";
pub(super) const INVALID_LATITUDE: &str = "latitude must be a number from -90 to 90";
pub(super) const INVALID_LONGITUDE: &str = "longitude must be a number from -180 to 180";
pub(super) const INVALID_RADIUS: &str = "radiusKm must be a number greater than 0 and at most 500";
pub(super) const NO_CENTER: &str = "Missing 'zipcode' or 'latitude'/'longitude' in request body";
pub(super) const TWO_CENTERS: &str = "Send either 'zipcode' or 'latitude'/'longitude', not both";
pub(super) const INVALID_Q: &str = "q may contain only letters, digits, spaces and hyphens";

/// A required field's value: `null` is missing. (An optional field sent as `null` is not
/// absent: it answers that field's 400, as `country` in the contract.)
pub(super) fn present<'a>(fields: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    fields.get(name).filter(|v| !v.is_null())
}

/// A required number in `[low, high]`: missing or null -> `Missing required field:
/// <name>`, anything else out of range -> `invalid`.
pub(super) fn number_in(
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

pub(super) fn coordinates(fields: &Map<String, Value>) -> Result<Coordinates, ApiError> {
    let latitude = number_in(fields, "latitude", valid_latitude, INVALID_LATITUDE)?;
    let longitude = number_in(fields, "longitude", valid_longitude, INVALID_LONGITUDE)?;
    Coordinates::parse(latitude, longitude).ok_or_else(|| ApiError::bad_request(INVALID_LATITUDE))
}

/// An optional country filter: absent is none; `null` is not a code (`invalid`).
pub(super) fn country_filter(
    value: Option<&Value>,
    invalid: &str,
) -> Result<Option<CountryCode>, ApiError> {
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
pub(super) fn code_country(value: Option<&Value>, invalid: &str) -> Result<CountryCode, ApiError> {
    country_filter(value, invalid).map(|c| c.unwrap_or(CountryCode::US))
}

/// `limit`: absent is the default; `null` is not an integer.
pub(super) fn limit(fields: &Map<String, Value>) -> Result<Limit, ApiError> {
    match fields.get("limit") {
        None => Ok(Limit::default()),
        Some(v) => v
            .as_u64()
            .and_then(Limit::parse)
            .ok_or_else(|| ApiError::bad_request(INVALID_LIMIT)),
    }
}

/// `maxKm`: absent is no bound; `null` is not a number.
pub(super) fn max_km(fields: &Map<String, Value>) -> Result<Option<MaxKm>, ApiError> {
    match fields.get("maxKm") {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .and_then(MaxKm::parse)
            .map(Some)
            .ok_or_else(|| ApiError::bad_request(INVALID_MAX_KM)),
    }
}

pub(super) fn located(record: &PlaceRecord) -> Result<Coordinates, ApiError> {
    record
        .latitude
        .zip(record.longitude)
        .and_then(|(lat, lon)| Coordinates::parse(lat, lon))
        .ok_or_else(|| ApiError::not_found(NO_COORDINATES))
}

pub(super) fn places(postal: &PostalIndex, hits: &[Nearby]) -> Vec<Place> {
    hits.iter()
        .filter_map(|hit| {
            let view = postal.place_at(hit.country, hit.rank)?;
            Some(Place::new(hit.country, &view, Some(hit.km)))
        })
        .collect()
}

/// A postal code's first record, where it is.
#[derive(Debug, Clone, PartialEq, Object, Serialize)]
#[oai(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct Place {
    /// The code as the data writes it (JP: seven digits, as metacode).
    pub zipcode: String,
    /// ISO 3166-1 alpha-2 code.
    pub country: String,
    /// Place name (for a JP office code, its municipality, as /api/lookup).
    pub city: String,
    /// Admin name 1 (state, region), "" when the record has none.
    pub state: String,
    /// Admin code 1, "" when the record has none.
    #[oai(rename = "ST")]
    #[serde(rename = "ST")]
    pub st: String,
    pub latitude: f64,
    pub longitude: f64,
    /// Great-circle distance from the question's point, km, rounded to the metre.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distance_km: Option<f64>,
}

impl Place {
    pub(super) fn new(country: CountryCode, view: &PlaceView<'_>, km: Option<f64>) -> Place {
        Place {
            zipcode: canonical(country, view.postal_code),
            country: country.to_string(),
            city: view.city.to_string(),
            state: view.admin_name1.to_string(),
            st: view.admin_code1.to_string(),
            latitude: view.latitude.unwrap_or_default(),
            longitude: view.longitude.unwrap_or_default(),
            distance_km: km.map(round_km),
        }
    }

    pub(super) fn distance_to(&self, other: &Place) -> f64 {
        crate::domain::geo::haversine_km(
            self.latitude,
            self.longitude,
            other.latitude,
            other.longitude,
        )
    }
}

pub(super) const EXAMPLE_KEY: &str = "pk_your_api_key";

pub(super) fn example_place(
    zipcode: &str,
    country: &str,
    city: &str,
    state: (&str, &str),
    at: (f64, f64),
    km: Option<f64>,
) -> Place {
    Place {
        zipcode: zipcode.into(),
        country: country.into(),
        city: city.into(),
        state: state.0.into(),
        st: state.1.into(),
        latitude: at.0,
        longitude: at.1,
        distance_km: km,
    }
}

pub(super) fn example_nearest_places() -> Vec<Place> {
    let england = ("England", "ENG");
    vec![
        example_place(
            "SW1A",
            "GB",
            "Westminster Abbey",
            england,
            (51.5018, -0.1328),
            Some(0.0),
        ),
        example_place(
            "EC1A",
            "GB",
            "London",
            england,
            (51.5085, -0.1257),
            Some(0.892),
        ),
    ]
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in crate::api::routes) fn fields(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    pub(in crate::api::routes) fn text(e: ApiError) -> String {
        e.text().to_owned()
    }
}
