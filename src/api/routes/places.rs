//! POST /api/places: every place of a postal code (FR, DE, GB, AT, CH... have several
//! towns per code), with region and county in every country, from memory; 1 query.

use std::sync::Arc;

use poem::web::Data;

use crate::api::get;
use crate::api::reply::Cached;
use poem::Request;
use poem_openapi::param::Query;

use poem_openapi::types::Example;
use poem_openapi::{Object, OpenApi};
use serde::Serialize;

use super::lookup::CodeQuery;
use crate::api::billed::{Billed, Operation};
use crate::api::contract::ContractJson;
use crate::api::error::ApiError;
use crate::api::reply::Reply;
use crate::api::types::{CodeRequest, Envelope, example_envelope};
use crate::api::{ApiTags, State};
use crate::domain::charge::Endpoint;
use crate::index::postal::CodePlace;
use crate::index::postal::PostalIndex;

/// The places API (its handlers read the `State` from the request data).
pub struct PlacesApi;

#[OpenApi]
impl PlacesApi {
    /// Every place of a postal code.
    ///
    /// What a form offers when a code has several towns: each record of the code, the
    /// first one (the one /api/lookup answers) first, with its region (admin name1/code1)
    /// and county (admin name2) in every country. An unknown code is 404, not billed.
    /// Billed 0.000028 USD when it answers 200.
    #[oai(
        path = "/api/places",
        method = "post",
        operation_id = "places",
        tag = "ApiTags::PostalCodes"
    )]
    async fn places(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<CodeRequest>,
    ) -> Result<Reply<PlacesResponse>, ApiError> {
        places_answer(state.0, &body).await.map(Reply)
    }

    /// Every place of a postal code (GET, for pages).
    ///
    /// As POST /api/places, with the fields as query parameters and the key as `key`.
    /// A 200 may be kept by the browser an hour. Billed 0.000028 USD when it answers 200.
    #[oai(
        path = "/api/places",
        method = "get",
        operation_id = "placesGet",
        tag = "ApiTags::PostalCodes"
    )]
    async fn places_get(
        &self,
        state: Data<&Arc<State>>,
        request: &Request,
        /// The postal code.
        zipcode: Query<get::Required>,
        /// ISO 3166-1 alpha-2 code, case-insensitive; default `US`.
        country: Query<get::Country>,
        /// A publishable API key, sent from a page of its origins (a secret key here is a 400: send it as `Authorization: Bearer` instead).
        key: Query<get::Required>,
    ) -> Result<Cached<PlacesResponse>, ApiError> {
        let body = get::code_body(request, zipcode, country, key);
        places_answer(state.0, &body).await.map(Reply)
    }
}

/// `/api/places`' answer to `body` (POST, or GET's query as a body).
pub(super) async fn places_answer(
    state: &State,
    body: &ContractJson<CodeRequest>,
) -> Result<PlacesResponse, ApiError> {
    let Billed {
        answer, envelope, ..
    } = state.billed::<Places>(body).await?;
    Ok(PlacesResponse {
        places: answer.into_iter().map(PlaceItem::from).collect(),
        envelope,
    })
}

/// `/api/places` on the one billed path: 1 query.
pub struct Places;

impl Operation for Places {
    const ENDPOINT: Endpoint = Endpoint::Places;
    type Request = CodeRequest;
    type Parsed = CodeQuery;
    type Answer = Vec<CodePlace>;

    fn parse(body: &ContractJson<Self::Request>) -> Result<CodeQuery, ApiError> {
        super::lookup::parse(body)
    }

    fn work(postal: &PostalIndex, query: CodeQuery) -> Result<Vec<CodePlace>, ApiError> {
        postal
            .places(query.country, &query.zipcode)
            .map(|code| code.places)
            .ok_or_else(|| ApiError::zip_not_found(postal.retired(query.country, &query.zipcode)))
    }
}

/// One place of a postal code.
#[derive(Debug, Clone, PartialEq, Object, Serialize)]
#[oai(skip_serializing_if_is_none)]
pub struct PlaceItem {
    /// The place name as the data writes it.
    pub city: String,
    /// Its state / region (admin name1); "" when the data has none.
    pub state: String,
    /// Its state / region code (admin code1); "" when the data has none.
    #[oai(rename = "ST")]
    #[serde(rename = "ST")]
    pub st: String,
    /// Its county / district (admin name2); absent when the data has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub county: Option<String>,
    #[oai(nullable)]
    pub latitude: Option<f64>,
    #[oai(nullable)]
    pub longitude: Option<f64>,
}

impl From<CodePlace> for PlaceItem {
    fn from(p: CodePlace) -> PlaceItem {
        PlaceItem {
            city: p.city,
            state: p.state,
            st: p.st,
            county: p.county,
            latitude: p.latitude,
            longitude: p.longitude,
        }
    }
}

/// 200 of /api/places.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct PlacesResponse {
    /// Every record of the code, the first (lookup's) first, then in the data's order.
    pub places: Vec<PlaceItem>,
    #[oai(flatten)]
    #[serde(skip)]
    pub envelope: Envelope,
}

crate::api::reply::enveloped!(PlacesResponse);

impl Example for PlacesResponse {
    fn example() -> Self {
        PlacesResponse {
            places: example_places(),
            envelope: example_envelope(4.999972),
        }
    }
}

/// The places of FR 75001, as `/api/places` answers them on the full dataset.
pub(super) fn example_places() -> Vec<PlaceItem> {
    let place = |city: &str, latitude, longitude| PlaceItem {
        city: city.into(),
        state: "Île-de-France".into(),
        st: "11".into(),
        county: Some("Paris".into()),
        latitude: Some(latitude),
        longitude: Some(longitude),
    };
    vec![
        place("Paris", 48.8534, 2.3488),
        place("Paris 01", 48.8592, 2.3417),
    ]
}
