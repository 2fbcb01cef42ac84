//! `/api/lookup` (POST, and GET for pages): the first record of a postal code, from
//! memory; 1 query. `first_record` (the record whole) serves metacode and metazip.

use std::sync::Arc;

use poem::Request;
use poem::web::Data;
use poem_openapi::param::Query;
use poem_openapi::types::Example;
use poem_openapi::{Object, OpenApi};
use serde::Serialize;

use crate::api::billed::{Billed, Operation};
use crate::api::contract::ContractJson;
use crate::api::error::ApiError;
use crate::api::get::{self};
use crate::api::reply::{Cached, Reply};
use crate::api::types::*;
use crate::api::{ApiTags, State};
use crate::domain::CountryCode;
use crate::domain::charge::Endpoint;
use crate::domain::postal_code::ZipInput;
use crate::index::postal::PlaceRecord;
use crate::index::postal::PostalIndex;

/// The route of /api/lookup (its handlers read the `State` from the request data).
pub struct LookupApi;

#[OpenApi]
impl LookupApi {
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
        /// A publishable API key, sent from a page of its origins (a secret key here is a 400: send it as `Authorization: Bearer` instead).
        key: Query<get::Required>,
    ) -> Result<Cached<LookupResponse>, ApiError> {
        let body = get::code_body(request, zipcode, country, key);
        lookup_answer(state.0, &body).await.map(Reply)
    }
}

/// `/api/lookup`'s answer to `body` (POST, or GET's query as a body).
pub(crate) async fn lookup_answer(
    state: &State,
    body: &ContractJson<CodeRequest>,
) -> Result<LookupResponse, ApiError> {
    let Billed {
        answer, envelope, ..
    } = state.billed::<Lookup>(body).await?;
    let LookupPlace {
        city,
        state,
        st,
        latitude,
        longitude,
    } = answer;
    Ok(LookupResponse {
        city,
        state,
        st,
        latitude,
        longitude,
        envelope,
    })
}

/// What /api/lookup shows of a code's first record, copied out of the index: its city
/// (`PostalIndex::first_place`), its region for a US code only, its coordinates.
pub struct LookupPlace {
    city: String,
    state: String,
    st: String,
    latitude: Option<f64>,
    longitude: Option<f64>,
}

/// The code asked for.
pub struct CodeQuery {
    pub country: CountryCode,
    pub zipcode: ZipInput,
}

/// The first record of a code, with its country (/api/metacode and /api/metazip, which
/// name its own place name, a JP office code's company included).
pub struct FirstRecord {
    pub country: CountryCode,
    pub record: PlaceRecord,
}

#[inline]
pub(super) fn parse(body: &ContractJson<CodeRequest>) -> Result<CodeQuery, ApiError> {
    Ok(CodeQuery {
        zipcode: body.zipcode()?,
        country: body.country()?,
    })
}

/// The first record of the code (what /api/metacode and /api/metazip answer from), or
/// 404.
pub(super) fn first_record(
    postal: &PostalIndex,
    query: CodeQuery,
) -> Result<FirstRecord, ApiError> {
    let record = postal
        .lookup(query.country, &query.zipcode)
        .ok_or_else(|| ApiError::zip_not_found(postal.retired(query.country, &query.zipcode)))?;
    Ok(FirstRecord {
        country: query.country,
        record,
    })
}

pub struct Lookup;

impl Operation for Lookup {
    const ENDPOINT: Endpoint = Endpoint::Lookup;
    type Request = CodeRequest;
    type Parsed = CodeQuery;
    type Answer = LookupPlace;

    fn parse(body: &ContractJson<CodeRequest>) -> Result<CodeQuery, ApiError> {
        parse(body)
    }

    /// The record borrowed, and three strings copied: `first_record`'s owned record
    /// (nine strings) was most of the lookup's own work (issue 37).
    fn work(postal: &PostalIndex, query: CodeQuery) -> Result<LookupPlace, ApiError> {
        let CodeQuery { country, zipcode } = query;
        let place = postal
            .first_place(country, &zipcode)
            .ok_or_else(|| ApiError::zip_not_found(postal.retired(country, &zipcode)))?;
        let region = |value: &str| match country {
            CountryCode::US => value.to_string(),
            _ => String::new(),
        };
        Ok(LookupPlace {
            city: place.city.to_string(),
            state: region(place.admin_name1),
            st: region(place.admin_code1),
            latitude: place.latitude,
            longitude: place.longitude,
        })
    }
}

/// 200 of /api/lookup.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct LookupResponse {
    /// City or place name. For a JP office code, whose place name is a company or an
    /// office, its municipality (`Kyoto Shi`); /api/metacode's `placeName` has the company.
    pub city: String,
    /// Full state name; "" outside the US.
    pub state: String,
    /// State abbreviation; "" outside the US.
    #[oai(rename = "ST")]
    #[serde(rename = "ST")]
    pub st: String,
    #[oai(nullable)]
    pub latitude: Option<f64>,
    #[oai(nullable)]
    pub longitude: Option<f64>,
    #[oai(flatten)]
    #[serde(skip)]
    pub envelope: Envelope,
}

crate::api::reply::enveloped!(LookupResponse);

impl Example for LookupResponse {
    fn example() -> Self {
        LookupResponse {
            city: "Beverly Hills".into(),
            state: "California".into(),
            st: "CA".into(),
            latitude: Some(34.0901),
            longitude: Some(-118.4065),
            envelope: example_envelope(4.999972),
        }
    }
}
