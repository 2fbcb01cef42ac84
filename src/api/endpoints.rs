//! The routes of postal-api.md section 4. A billed handler runs its operation (one file
//! each: `lookup`, `city`, `validate`) through the one billed path (`billed`) and maps
//! the answer and the envelope to its JSON shape; errors leave as `ApiError`.

use std::sync::Arc;

use poem::web::Data;

use super::reply::Reply;
use poem_openapi::OpenApi;

use super::ApiTags;
use super::State;
use super::billed::Billed;
use super::city::City;
use super::contract::ContractJson;
use super::envelope::Timings;
use super::error::ApiError;
use super::get::{self, text};
use super::lookup::{FirstRecord, Lookup, Metacode, Metazip};
use super::reply::Cached;
use super::types::*;
use super::validate::{Validate, ValidateBulk};
use crate::db::postal::PlaceRecord;
use crate::domain::CountryCode;
use crate::domain::postal_code::canonical;
use crate::index::postal::Verdict;
use poem::Request;
use poem_openapi::param::Query;

/// The contract's operations (their handlers read the `State` from the request data).
pub struct PostalApi;

#[OpenApi]
impl PostalApi {
    /// Look up a postal code: city, state and coordinates.
    ///
    /// Non-US records carry only city, latitude and longitude (`state` and `ST` are "");
    /// their regions are in /api/metacode. Billed 0.000028 USD when it answers 200.
    #[oai(
        path = "/api/lookup",
        method = "post",
        operation_id = "lookup",
        tag = "ApiTags::PostalCodes"
    )]
    async fn lookup(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<CodeRequest>,
    ) -> Result<Reply<LookupResponse>, ApiError> {
        lookup_answer(state.0, &body).await.map(Reply)
    }

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

    /// All metadata of a postal code.
    ///
    /// US codes have the US shape (zipcode, city, state, stateAbbrev, county, ...), others
    /// the GeoNames shape (postalCode, placeName, admin_name1..3, ...). Fields without
    /// data are omitted.
    #[oai(
        path = "/api/metacode",
        method = "post",
        operation_id = "getMetacode",
        tag = "ApiTags::PostalCodes"
    )]
    async fn metacode(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<CodeRequest>,
    ) -> Result<Reply<MetaResponse>, ApiError> {
        let billed = state.0.billed::<Metacode>(&body).await?;
        Ok(meta_response(billed))
    }

    /// Legacy alias of /api/metacode (identical behaviour, kept indefinitely).
    #[oai(
        path = "/api/metazip",
        method = "post",
        deprecated,
        operation_id = "getMetazip",
        tag = "ApiTags::PostalCodes"
    )]
    async fn metazip(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<CodeRequest>,
    ) -> Result<Reply<MetaResponse>, ApiError> {
        let billed = state.0.billed::<Metazip>(&body).await?;
        Ok(meta_response(billed))
    }

    /// Check whether a postal code exists.
    ///
    /// An unknown code answers 200 with `valid: false` (and is billed).
    #[oai(
        path = "/api/validate",
        method = "post",
        operation_id = "validate",
        tag = "ApiTags::Validation"
    )]
    async fn validate(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<CodeRequest>,
    ) -> Result<Reply<ValidateResponse>, ApiError> {
        let Billed {
            answer, envelope, ..
        } = state.0.billed::<Validate>(&body).await?;
        Ok(Reply(ValidateResponse {
            valid: answer.valid,
            zipcode: ZipCodeValue(answer.zipcode_echo),
            response_time: envelope.performance.total_time,
            envelope,
        }))
    }

    /// Check up to 1,000 postal codes of any countries in one request.
    ///
    /// Per-record problems are results (`reason`: not_found, invalid_format,
    /// unknown_country), never errors. Billed per record; when the balance or a rate
    /// window cannot take the whole batch, nothing is charged (402 / 429).
    #[oai(
        path = "/api/validate-bulk",
        method = "post",
        operation_id = "validateBulk",
        tag = "ApiTags::Validation"
    )]
    async fn validate_bulk(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<BulkRequest>,
    ) -> Result<Reply<BulkResponse>, ApiError> {
        let Billed {
            answer,
            envelope,
            total_cost,
        } = state.0.billed::<ValidateBulk>(&body).await?;
        let results = answer
            .into_iter()
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
                    reason: NullableReason(reason),
                }
            })
            .collect();
        Ok(Reply(BulkResponse {
            results,
            total_cost,
            envelope,
        }))
    }

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

    /// Look up a postal code (GET, for pages).
    ///
    /// As POST /api/lookup, with the fields as query parameters and the key as `key`
    /// (`Authorization`/`X-Api-Key` win). `zipcode` is text as typed. A 200 may be kept by
    /// the browser an hour. Billed 0.000028 USD when it answers 200.
    #[oai(
        path = "/api/lookup",
        method = "get",
        operation_id = "lookupGet",
        tag = "ApiTags::PostalCodes"
    )]
    async fn lookup_get(
        &self,
        state: Data<&Arc<State>>,
        request: &Request,
        /// The postal code.
        zipcode: Query<get::Required>,
        /// ISO 3166-1 alpha-2 code, case-insensitive; default `US`.
        country: Query<get::Country>,
        /// Your API key (a publishable key, from a page).
        key: Query<get::Required>,
    ) -> Result<Cached<LookupResponse>, ApiError> {
        let body = get::code_body(request, zipcode, country, key);
        lookup_answer(state.0, &body).await.map(Reply)
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
        city: Query<get::Required>,
        /// Full state name (US: or its code); for US either `state` or `ST` is required.
        #[oai(name = "state")]
        region: Query<get::Text>,
        /// State abbreviation (admin code 1).
        #[oai(name = "ST")]
        st: Query<get::Text>,
        /// ISO 3166-1 alpha-2 code, case-insensitive; default `US`.
        country: Query<get::Country>,
        /// Your API key (a publishable key, from a page).
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

/// `/api/lookup`'s answer to `body` (POST, or GET's query as a body).
pub(super) async fn lookup_answer(
    state: &State,
    body: &ContractJson<CodeRequest>,
) -> Result<LookupResponse, ApiError> {
    let Billed {
        answer, envelope, ..
    } = state.billed::<Lookup>(body).await?;
    let FirstRecord { country, record } = answer;
    let us = country == CountryCode::US;
    let region = |v: Option<String>| {
        if us {
            v.unwrap_or_default()
        } else {
            String::new()
        }
    };
    Ok(LookupResponse {
        city: record.place_name,
        state: region(record.admin_name1),
        st: region(record.admin_code1),
        latitude: record.latitude,
        longitude: record.longitude,
        envelope,
    })
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

fn meta_response(billed: Billed<FirstRecord>) -> Reply<MetaResponse> {
    let Billed {
        answer, envelope, ..
    } = billed;
    Reply(MetaResponse {
        meta: meta_record(answer.country, answer.record),
        envelope,
    })
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
