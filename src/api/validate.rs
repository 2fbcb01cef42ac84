//! `/api/validate` (1 query) and `/api/validate-bulk` (1 query per record): does a code
//! exist, from memory.

use serde_json::Value;

use super::State;
use super::billed::{MISSING_API_KEY, Operation};
use super::contract::{BulkRecord, ContractJson};
use super::error::ApiError;
use super::lookup::CodeQuery;
use super::types::{BulkRequest, CodeRequest};
use crate::domain::CountryCode;
use crate::domain::charge::Endpoint;
use crate::index::postal::Verdict;

pub struct Validate;

/// The code as sent (echoed) and whether it exists.
pub struct Validity {
    pub zipcode_echo: Value,
    pub valid: bool,
}

impl Operation for Validate {
    const ENDPOINT: Endpoint = Endpoint::Validate;
    type Body = ContractJson<CodeRequest>;
    type Parsed = (CodeQuery, Value);
    type Answer = Validity;

    fn api_key(body: &Self::Body) -> Result<&str, ApiError> {
        body.api_key(MISSING_API_KEY)
    }

    fn parse(body: &Self::Body) -> Result<(CodeQuery, Value), ApiError> {
        let query = CodeQuery {
            zipcode: body.zipcode()?,
            country: body.country()?,
        };
        Ok((query, body.zipcode_echo()))
    }

    async fn work(state: &State, (query, echo): (CodeQuery, Value)) -> Result<Validity, ApiError> {
        Ok(Validity {
            valid: state.postal().exists(query.country, &query.zipcode),
            zipcode_echo: echo,
        })
    }
}

pub struct ValidateBulk;

impl Operation for ValidateBulk {
    const ENDPOINT: Endpoint = Endpoint::ValidateBulk;
    type Body = ContractJson<BulkRequest>;
    type Parsed = Vec<BulkRecord>;
    type Answer = Vec<(BulkRecord, Verdict)>;

    fn api_key(body: &Self::Body) -> Result<&str, ApiError> {
        body.api_key(MISSING_API_KEY)
    }

    fn parse(body: &Self::Body) -> Result<Vec<BulkRecord>, ApiError> {
        body.bulk_records()
    }

    fn queries(records: &Vec<BulkRecord>) -> u64 {
        records.len() as u64
    }

    async fn work(
        state: &State,
        records: Vec<BulkRecord>,
    ) -> Result<Vec<(BulkRecord, Verdict)>, ApiError> {
        let codes: Vec<(CountryCode, String)> = records
            .iter()
            .map(|r| (r.country, r.postal_code.clone()))
            .collect();
        let verdicts = state.postal().check_codes(&codes);
        Ok(records.into_iter().zip(verdicts).collect())
    }
}
