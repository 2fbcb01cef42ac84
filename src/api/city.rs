//! `/api/city`: the postal codes of a place (exact, then fuzzy), from the in-memory
//! place index (`db::city_index`); 1 query.

use super::State;
use super::billed::{MISSING_API_KEY, Operation};
use super::contract::ContractJson;
use super::error::ApiError;
use super::types::CityRequest;
use crate::domain::CountryCode;
use crate::domain::charge::Endpoint;
use crate::domain::text::fold;
use crate::index::city::{CityMatch, CityQuery};

pub struct City;

impl Operation for City {
    const ENDPOINT: Endpoint = Endpoint::City;
    type Body = ContractJson<CityRequest>;
    type Parsed = CityQuery;
    type Answer = CityMatch;

    fn api_key(body: &Self::Body) -> Result<&str, ApiError> {
        body.api_key(MISSING_API_KEY)
    }

    fn parse(body: &Self::Body) -> Result<CityQuery, ApiError> {
        let city = body.required_text("city")?;
        let (state, st) = (body.optional_text("state")?, body.optional_text("ST")?);
        let country = body.country()?;
        if country == CountryCode::US && state.is_none() && st.is_none() {
            return Err(ApiError::bad_request(
                "Missing 'state' or 'ST' in request body",
            ));
        }
        Ok(CityQuery {
            country,
            city: fold(city),
            state: state.map(fold),
            st: st.map(fold),
        })
    }

    async fn work(state: &State, query: CityQuery) -> Result<CityMatch, ApiError> {
        state
            .postal()
            .city()
            .find(&query)
            .ok_or_else(|| ApiError::not_found("No ZIP codes found for the given city/state"))
    }
}
