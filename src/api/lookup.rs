//! `/api/lookup`, `/api/metacode` and `/api/metazip`: the first record of a postal code,
//! from memory; 1 query.

use std::future::Future;

use super::State;
use super::billed::{MISSING_API_KEY, Operation};
use super::contract::ContractJson;
use super::error::ApiError;
use super::types::CodeRequest;
use crate::db::postal::PlaceRecord;
use crate::domain::CountryCode;
use crate::domain::charge::Endpoint;
use crate::domain::postal_code::ZipInput;

/// The code asked for.
pub struct CodeQuery {
    pub country: CountryCode,
    pub zipcode: ZipInput,
}

/// The first record of a code, and its country.
pub struct FirstRecord {
    pub country: CountryCode,
    pub record: PlaceRecord,
}

fn parse(body: &ContractJson<CodeRequest>) -> Result<CodeQuery, ApiError> {
    Ok(CodeQuery {
        zipcode: body.zipcode()?,
        country: body.country()?,
    })
}

async fn first_record(state: &State, query: CodeQuery) -> Result<FirstRecord, ApiError> {
    let record = state
        .postal()
        .lookup(query.country, &query.zipcode)
        .ok_or_else(|| ApiError::not_found("ZIP code not found"))?;
    Ok(FirstRecord {
        country: query.country,
        record,
    })
}

macro_rules! first_record_operation {
    ($name:ident, $endpoint:expr) => {
        pub struct $name;

        impl Operation for $name {
            const ENDPOINT: Endpoint = $endpoint;
            type Body = ContractJson<CodeRequest>;
            type Parsed = CodeQuery;
            type Answer = FirstRecord;

            fn api_key(body: &Self::Body) -> Result<&str, ApiError> {
                body.api_key(MISSING_API_KEY)
            }

            fn parse(body: &Self::Body) -> Result<CodeQuery, ApiError> {
                parse(body)
            }

            fn work(
                state: &State,
                query: CodeQuery,
            ) -> impl Future<Output = Result<FirstRecord, ApiError>> + Send {
                first_record(state, query)
            }
        }
    };
}

first_record_operation!(Lookup, Endpoint::Lookup);
first_record_operation!(Metacode, Endpoint::Metacode);
first_record_operation!(Metazip, Endpoint::Metazip);
