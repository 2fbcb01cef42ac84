//! `/api/validate`: does a postal code exist, from memory; 1 query, billed also when it
//! does not.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::types::Example;
use poem_openapi::{Object, OpenApi};
use serde::Serialize;
use serde_json::Value;

use super::lookup::CodeQuery;
use crate::api::billed::{Billed, Operation};
use crate::api::contract::ContractJson;
use crate::api::error::{ApiError, RetiredCode};
use crate::api::reply::Reply;
use crate::api::types::*;
use crate::api::{ApiTags, State};
use crate::domain::charge::Endpoint;
use crate::index::postal::PostalIndex;

/// The route of /api/validate (its handler reads the `State` from the request data).
pub struct ValidateApi;

#[OpenApi]
impl ValidateApi {
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
            retired: answer.retired,
            zipcode: ZipCodeValue(answer.zipcode_echo),
            response_time: envelope.performance.total_time,
            envelope,
        }))
    }
}

pub struct Validate;

/// The code as sent (echoed) and whether it exists.
pub struct Validity {
    pub zipcode_echo: Value,
    pub valid: bool,
    /// Not valid because an import removed it.
    pub retired: Option<RetiredCode>,
}

impl Operation for Validate {
    const ENDPOINT: Endpoint = Endpoint::Validate;
    type Request = CodeRequest;
    type Parsed = (CodeQuery, Value);
    type Answer = Validity;

    fn parse(body: &ContractJson<Self::Request>) -> Result<(CodeQuery, Value), ApiError> {
        let query = CodeQuery {
            zipcode: body.zipcode()?,
            country: body.country()?,
        };
        Ok((query, body.zipcode_echo()))
    }

    fn work(postal: &PostalIndex, (query, echo): (CodeQuery, Value)) -> Result<Validity, ApiError> {
        let valid = postal.exists(query.country, &query.zipcode);
        let retired = (!valid)
            .then(|| postal.retired(query.country, &query.zipcode))
            .flatten()
            .map(RetiredCode::of);
        Ok(Validity {
            valid,
            retired,
            zipcode_echo: echo,
        })
    }
}

/// 200 of /api/validate.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct ValidateResponse {
    /// The postal code exists.
    pub valid: bool,
    /// For a code an import removed (`valid` false): its last place and the day it went;
    /// absent otherwise.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retired: Option<RetiredCode>,
    /// The validated code, echoed as sent.
    pub zipcode: ZipCodeValue,
    /// Same as `performance.totalTime`.
    pub response_time: Millis,
    #[oai(flatten)]
    #[serde(skip)]
    pub envelope: Envelope,
}

crate::api::reply::enveloped!(ValidateResponse);

impl Example for ValidateResponse {
    fn example() -> Self {
        ValidateResponse {
            valid: true,
            retired: None,
            zipcode: ZipCodeValue(Value::String("SW1A 1AA".into())),
            response_time: Millis(std::time::Duration::from_micros(262)),
            envelope: example_envelope(4.999972),
        }
    }
}
