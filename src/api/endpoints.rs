//! The seven operations of postal-api.md section 4. Each handler: read the body into
//! domain types (`contract`), call `db`, map the result; errors leave as `ApiError`.

use std::sync::Arc;

use poem_openapi::OpenApi;
use poem_openapi::payload::Json;

use super::State;
use super::contract::ContractJson;
use super::envelope::{Timings, rate_limit_status, usd};
use super::error::ApiError;
use super::types::*;
use crate::db::billing::Charged;
use crate::db::city_index::CityQuery;
use crate::db::postal::{PlaceRecord, Verdict};
use crate::domain::CountryCode;
use crate::domain::money::PRICE_PER_QUERY;
use crate::domain::postal_code::canonical;
use crate::domain::text::fold;

const MISSING_API_KEY: &str = "Missing required field: apiKey";

/// Which texts a refused charge answers with (postal-api.md 7.2).
#[derive(Clone, Copy)]
pub(super) enum Billed {
    Single,
    Bulk,
}

impl Billed {
    pub(super) fn insufficient(self) -> &'static str {
        match self {
            Billed::Single => "Insufficient balance",
            Billed::Bulk => "Insufficient balance for bulk request",
        }
    }

    pub(super) fn rate_limited(self) -> &'static str {
        match self {
            Billed::Single => "Rate limit exceeded",
            Billed::Bulk => "Rate limit would be exceeded by this bulk request",
        }
    }
}

/// The API; `state` is `None` only when the value exists to generate the OpenAPI document.
pub struct PostalApi {
    pub(super) state: Option<Arc<State>>,
}

#[OpenApi]
impl PostalApi {
    /// Look up a postal code: city, state and coordinates.
    ///
    /// Non-US records carry only city, latitude and longitude (`state` and `ST` are "");
    /// their regions are in /api/metacode. Billed 0.000028 USD when it answers 200.
    #[oai(path = "/api/lookup", method = "post")]
    async fn lookup(
        &self,
        body: ContractJson<CodeRequest>,
    ) -> Result<Json<LookupResponse>, ApiError> {
        let (country, record, charged, timings) = self.first_record(body, "lookup").await?;
        let us = country == CountryCode::US;
        let region = |v: Option<String>| {
            if us {
                v.unwrap_or_default()
            } else {
                String::new()
            }
        };
        Ok(Json(LookupResponse {
            city: record.place_name,
            state: region(record.admin_name1),
            st: region(record.admin_code1),
            latitude: record.latitude,
            longitude: record.longitude,
            balance: usd(charged.balance),
            performance: timings.billed(),
            rate_limit: rate_limit_status(&charged.rate),
        }))
    }

    /// Find the postal codes of a city.
    ///
    /// Case, accents and punctuation are ignored. With no exact match, the closest name
    /// of the country (and state) answers, named in `matchedCity`/`matchedState`/`matchedST`.
    /// For the US, `state` or `ST` is required.
    #[oai(path = "/api/city", method = "post")]
    async fn city(&self, body: ContractJson<CityRequest>) -> Result<Json<CityResponse>, ApiError> {
        let state = self.state()?;
        let mut timings = Timings::start();
        let session = state.authenticate(body.api_key(MISSING_API_KEY)?, &mut timings)?;
        let city = body.required_text("city")?;
        let country = body.country()?;
        let (state_filter, st_filter) = (body.optional_text("state"), body.optional_text("ST"));
        if country == CountryCode::US && state_filter.is_none() && st_filter.is_none() {
            return Err(ApiError::bad_request(
                "Missing 'state' or 'ST' in request body",
            ));
        }
        state.precheck(&session, 1, Billed::Single, &mut timings)?;
        let query = CityQuery {
            country,
            city: fold(city),
            state: state_filter.map(fold),
            st: st_filter.map(fold),
        };
        let found = timings
            .processing(|| state.postal().city().find(&query))
            .ok_or_else(|| ApiError::not_found("No ZIP codes found for the given city/state"))?;
        let charged = state
            .charge(&session, 1, "city", Billed::Single, &mut timings)
            .await?;
        let fuzzy = found.fuzzy;
        Ok(Json(CityResponse {
            zipcodes: found.zipcodes,
            matched_city: fuzzy.as_ref().map(|m| m.city.clone()),
            // A place without a region (admin 1) has no state to name.
            matched_state: fuzzy
                .as_ref()
                .map(|m| m.state.clone())
                .filter(|s| !s.is_empty()),
            matched_st: fuzzy.map(|m| m.st).filter(|s| !s.is_empty()),
            balance: usd(charged.balance),
            performance: timings.billed(),
            rate_limit: rate_limit_status(&charged.rate),
        }))
    }

    /// All metadata of a postal code.
    ///
    /// US codes have the US shape (zipcode, city, state, stateAbbrev, county, ...), others
    /// the GeoNames shape (postalCode, placeName, admin_name1..3, ...). Fields without
    /// data are omitted.
    #[oai(path = "/api/metacode", method = "post")]
    async fn metacode(
        &self,
        body: ContractJson<CodeRequest>,
    ) -> Result<Json<MetaResponse>, ApiError> {
        self.meta(body, "metacode").await
    }

    /// Legacy alias of /api/metacode (identical behaviour, kept indefinitely).
    #[oai(path = "/api/metazip", method = "post", deprecated)]
    async fn metazip(
        &self,
        body: ContractJson<CodeRequest>,
    ) -> Result<Json<MetaResponse>, ApiError> {
        self.meta(body, "metazip").await
    }

    /// Check whether a postal code exists.
    ///
    /// An unknown code answers 200 with `valid: false` (and is billed).
    #[oai(path = "/api/validate", method = "post")]
    async fn validate(
        &self,
        body: ContractJson<CodeRequest>,
    ) -> Result<Json<ValidateResponse>, ApiError> {
        let state = self.state()?;
        let mut timings = Timings::start();
        let session = state.authenticate(body.api_key(MISSING_API_KEY)?, &mut timings)?;
        let zipcode = body.zipcode()?;
        let country = body.country()?;
        state.precheck(&session, 1, Billed::Single, &mut timings)?;
        let valid = timings.processing(|| state.postal().exists(country, &zipcode));
        let charged = state
            .charge(&session, 1, "validate", Billed::Single, &mut timings)
            .await?;
        let performance = timings.billed();
        Ok(Json(ValidateResponse {
            valid,
            zipcode: ZipCodeValue(body.zipcode_echo()),
            response_time: performance.total_time.clone(),
            balance: usd(charged.balance),
            performance,
            rate_limit: rate_limit_status(&charged.rate),
        }))
    }

    /// Check up to 1,000 postal codes of any countries in one request.
    ///
    /// Per-record problems are results (`reason`: not_found, invalid_format,
    /// unknown_country), never errors. Billed per record; when the balance or a rate
    /// window cannot take the whole batch, nothing is charged (402 / 429).
    #[oai(path = "/api/validate-bulk", method = "post")]
    async fn validate_bulk(
        &self,
        body: ContractJson<BulkRequest>,
    ) -> Result<Json<BulkResponse>, ApiError> {
        let state = self.state()?;
        let mut timings = Timings::start();
        let session = state.authenticate(body.api_key(MISSING_API_KEY)?, &mut timings)?;
        let records = body.bulk_records()?;
        let count = records.len() as u64;
        state.precheck(&session, count, Billed::Bulk, &mut timings)?;
        let codes: Vec<(CountryCode, String)> = records
            .iter()
            .map(|r| (r.country, r.postal_code.clone()))
            .collect();
        let verdicts = timings.processing(|| state.postal().check_codes(&codes));
        let charged = state
            .charge(&session, count, "validate-bulk", Billed::Bulk, &mut timings)
            .await?;
        let results = records
            .into_iter()
            .zip(verdicts)
            .map(|(record, verdict)| {
                let (normalized, reason) = match verdict {
                    Verdict::Valid(key) => (Some(key), None),
                    Verdict::NotFound => (None, Some(Reason::NotFound)),
                    Verdict::InvalidFormat => (None, Some(Reason::InvalidFormat)),
                    Verdict::UnknownCountry => (None, Some(Reason::UnknownCountry)),
                };
                BulkResult {
                    postal_code: record.postal_code,
                    country_code: record.country_input,
                    valid: normalized.is_some(),
                    normalized,
                    reason,
                }
            })
            .collect();
        Ok(Json(BulkResponse {
            results,
            total_cost: usd(PRICE_PER_QUERY
                .checked_mul(count)
                .unwrap_or(PRICE_PER_QUERY)),
            balance: usd(charged.balance),
            performance: timings.billed(),
            rate_limit: rate_limit_status(&charged.rate),
        }))
    }

    /// Service version and coverage; free, and never rate-limited (a health check).
    #[oai(path = "/api/aboutapi", method = "post")]
    async fn aboutapi(
        &self,
        body: ContractJson<AboutRequest>,
    ) -> Result<Json<AboutResponse>, ApiError> {
        let state = self.state()?;
        let mut timings = Timings::start();
        let session =
            state.authenticate(body.api_key("Missing or invalid 'apiKey'")?, &mut timings)?;
        let account = state.status(&session);
        let coverage = timings.processing(|| state.postal().coverage());
        Ok(Json(AboutResponse {
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
            performance: timings.total_only(),
            balance: usd(account.balance),
            rate_limit: rate_limit_status(&account.rate),
        }))
    }
}

impl PostalApi {
    fn state(&self) -> Result<&State, ApiError> {
        self.state
            .as_deref()
            .ok_or_else(|| ApiError::internal(anyhow::anyhow!("the API runs without a database")))
    }

    /// lookup and metacode: the first record of the code, charged to `endpoint`.
    async fn first_record(
        &self,
        body: ContractJson<CodeRequest>,
        endpoint: &'static str,
    ) -> Result<(CountryCode, PlaceRecord, Charged, Timings), ApiError> {
        let state = self.state()?;
        let mut timings = Timings::start();
        let session = state.authenticate(body.api_key(MISSING_API_KEY)?, &mut timings)?;
        let zipcode = body.zipcode()?;
        let country = body.country()?;
        state.precheck(&session, 1, Billed::Single, &mut timings)?;
        let record = timings
            .processing(|| state.postal().lookup(country, &zipcode))
            .ok_or_else(|| ApiError::not_found("ZIP code not found"))?;
        let charged = state
            .charge(&session, 1, endpoint, Billed::Single, &mut timings)
            .await?;
        Ok((country, record, charged, timings))
    }

    async fn meta(
        &self,
        body: ContractJson<CodeRequest>,
        endpoint: &'static str,
    ) -> Result<Json<MetaResponse>, ApiError> {
        let (country, record, charged, timings) = self.first_record(body, endpoint).await?;
        Ok(Json(MetaResponse {
            meta: meta_record(country, record),
            balance: usd(charged.balance),
            performance: timings.billed(),
            rate_limit: rate_limit_status(&charged.rate),
        }))
    }
}

fn meta_record(country: CountryCode, r: PlaceRecord) -> Meta {
    if country == CountryCode::US {
        return Meta::Us(UsMeta {
            zipcode: r.postal_code,
            city: r.place_name,
            state: r.admin_name1,
            state_abbrev: r.admin_code1,
            county: r.admin_name2,
            latitude: r.latitude,
            longitude: r.longitude,
            timezone: r.timezone,
        });
    }
    // Mexico and Brazil: GeoNames' admin levels are state / municipality (/ city for MX).
    let rich = matches!(country.as_str(), "MX" | "BR");
    let rich_field = |v: &Option<String>| if rich { v.clone() } else { None };
    let city = rich_field(&r.admin_name3).filter(|c| *c != r.place_name);
    Meta::World(Box::new(WorldMeta {
        admin_level1: rich_field(&r.admin_name1),
        admin_level2: rich_field(&r.admin_name2),
        municipality: rich_field(&r.admin_name2),
        city,
        postal_code: canonical(country, &r.postal_code),
        country: country.to_string(),
        place_name: r.place_name,
        latitude: r.latitude,
        longitude: r.longitude,
        timezone: r.timezone,
        admin_name1: r.admin_name1,
        admin_code1: r.admin_code1,
        admin_name2: r.admin_name2,
        admin_code2: r.admin_code2,
        admin_name3: r.admin_name3,
        admin_code3: r.admin_code3,
        accuracy: r.accuracy,
    }))
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
