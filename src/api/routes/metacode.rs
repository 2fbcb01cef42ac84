//! `/api/metacode` and its legacy alias `/api/metazip`: every field of a postal code's
//! first record, in the US shape or the world shape; 1 query.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::types::Example;
use poem_openapi::{Object, OpenApi, Union};
use serde::Serialize;

use super::lookup::{CodeQuery, FirstRecord, first_record};
use crate::api::billed::{Billed, Operation};
use crate::api::contract::ContractJson;
use crate::api::error::ApiError;
use crate::api::reply::Reply;
use crate::api::types::*;
use crate::api::{ApiTags, State};
use crate::domain::CountryCode;
use crate::domain::charge::Endpoint;
use crate::domain::postal_code::canonical;
use crate::index::postal::PlaceRecord;
use crate::index::postal::PostalIndex;

/// The routes of /api/metacode and /api/metazip (their handlers read the `State` from the
/// request data).
pub struct MetacodeApi;

#[OpenApi]
impl MetacodeApi {
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
}

/// `/api/metacode` and `/api/metazip`: one operation under two names, billed each under
/// its own.
pub struct MetaLookup<const METAZIP: bool>;
pub type Metacode = MetaLookup<false>;
pub type Metazip = MetaLookup<true>;

impl<const METAZIP: bool> Operation for MetaLookup<METAZIP> {
    const ENDPOINT: Endpoint = if METAZIP {
        Endpoint::Metazip
    } else {
        Endpoint::Metacode
    };
    type Request = CodeRequest;
    type Parsed = CodeQuery;
    type Answer = FirstRecord;

    fn parse(body: &ContractJson<CodeRequest>) -> Result<CodeQuery, ApiError> {
        super::lookup::parse(body)
    }

    fn work(postal: &PostalIndex, query: CodeQuery) -> Result<FirstRecord, ApiError> {
        first_record(postal, query)
    }
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

/// Metadata of a US postal code.
#[serde_with::skip_serializing_none]
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", skip_serializing_if_is_none)]
#[serde(rename_all = "camelCase")]
pub struct UsMeta {
    pub zipcode: String,
    pub city: String,
    pub state: Option<String>,
    pub state_abbrev: Option<String>,
    pub county: Option<String>,
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
    /// IANA timezone at the coordinates.
    pub timezone: Option<String>,
}

/// Metadata of a non-US postal code; fields without data are omitted.
#[serde_with::skip_serializing_none]
#[derive(Debug, Object, Serialize)]
#[oai(skip_serializing_if_is_none)]
pub struct WorldMeta {
    #[oai(rename = "postalCode")]
    #[serde(rename = "postalCode")]
    pub postal_code: String,
    pub country: String,
    #[oai(rename = "placeName")]
    #[serde(rename = "placeName")]
    pub place_name: String,
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
    /// IANA timezone at the coordinates.
    pub timezone: Option<String>,
    pub admin_name1: Option<String>,
    pub admin_code1: Option<String>,
    pub admin_name2: Option<String>,
    pub admin_code2: Option<String>,
    pub admin_name3: Option<String>,
    pub admin_code3: Option<String>,
    /// GeoNames accuracy of the coordinates: 1 (estimated) to 6 (centroid).
    pub accuracy: Option<i64>,
    /// Rich-schema countries (MX, BR): the top-level region (admin name 1).
    #[oai(rename = "adminLevel1")]
    #[serde(rename = "adminLevel1")]
    pub admin_level1: Option<String>,
    /// Rich-schema countries (MX, BR): the second-level region (admin name 2).
    #[oai(rename = "adminLevel2")]
    #[serde(rename = "adminLevel2")]
    pub admin_level2: Option<String>,
    /// Rich-schema countries (MX, BR): the municipality (admin name 2).
    pub municipality: Option<String>,
    /// Rich-schema countries (MX): the city (admin name 3), when distinct from placeName.
    pub city: Option<String>,
}

/// The metadata record: US shape for US codes, otherwise the world shape.
#[derive(Debug, Union, Serialize)]
#[serde(untagged)]
pub enum Meta {
    Us(UsMeta),
    World(Box<WorldMeta>),
}

/// 200 of /api/metacode and /api/metazip.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct MetaResponse {
    pub meta: Meta,
    #[oai(flatten)]
    #[serde(skip)]
    pub envelope: Envelope,
}

crate::api::reply::enveloped!(MetaResponse);

impl Example for MetaResponse {
    fn example() -> Self {
        MetaResponse {
            meta: Meta::World(Box::new(WorldMeta {
                postal_code: "1000001".into(),
                country: "JP".into(),
                place_name: "Chiyoda".into(),
                latitude: Some(35.6841),
                longitude: Some(139.7521),
                timezone: Some("Asia/Tokyo".into()),
                admin_name1: Some("Tokyo To".into()),
                admin_code1: Some("40".into()),
                admin_name2: Some("Chiyoda Ku".into()),
                admin_code2: None,
                admin_name3: None,
                admin_code3: None,
                accuracy: None,
                admin_level1: None,
                admin_level2: None,
                municipality: None,
                city: None,
            })),
            envelope: example_envelope(4.999972),
        }
    }
}
