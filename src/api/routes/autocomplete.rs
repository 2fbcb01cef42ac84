//! POST /api/autocomplete: the postal codes of a country that start with `q`
//! (docs/geography.md); 1 query.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::types::Example;
use poem_openapi::{Object, OpenApi};
use serde::Serialize;
use serde_json::{Map, Value};

use super::geo::*;
use crate::api::billed::{Billed, Operation};
use crate::api::contract::{ContractJson, DocumentedBody};
use crate::api::error::ApiError;
use crate::api::reply::Reply;
use crate::api::types::ApiKeyText;
use crate::api::types::example_envelope;
use crate::api::types::{CountryField, Envelope};
use crate::api::{ApiTags, State};
use crate::domain::CountryCode;
use crate::domain::charge::Endpoint;
use crate::domain::geo::Limit;
use crate::domain::postal_code::{canonical, compact};
use crate::index::postal::PostalIndex;

/// The route of /api/autocomplete (its handler reads the `State` from the request data).
pub struct AutocompleteApi;

#[OpenApi]
impl AutocompleteApi {
    /// Postal codes of a country that start with `q`, in code order.
    ///
    /// Spaces and hyphens are ignored on both sides (`SW1`, `902`, `100-00`, `10000`).
    /// Billed 0.000028 USD when it answers 200, also when nothing starts with `q`.
    #[oai(
        path = "/api/autocomplete",
        method = "post",
        operation_id = "autocomplete",
        tag = "ApiTags::PostalCodes"
    )]
    async fn autocomplete(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<AutocompleteRequest>,
    ) -> Result<Reply<AutocompleteResponse>, ApiError> {
        let Billed {
            answer, envelope, ..
        } = state.0.billed::<Autocomplete>(&body).await?;
        Ok(Reply(AutocompleteResponse {
            results: answer,
            envelope,
        }))
    }
}

pub struct Autocomplete;

impl Operation for Autocomplete {
    const ENDPOINT: Endpoint = Endpoint::Autocomplete;
    type Request = AutocompleteRequest;
    type Parsed = AutocompleteQuery;
    type Answer = Vec<Suggestion>;

    fn parse(body: &ContractJson<AutocompleteRequest>) -> Result<AutocompleteQuery, ApiError> {
        parse_autocomplete(&body.fields)
    }

    fn work(postal: &PostalIndex, query: AutocompleteQuery) -> Result<Vec<Suggestion>, ApiError> {
        Ok(suggestions(postal, &query))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct AutocompleteQuery {
    pub country: CountryCode,
    /// Compact (upper case, no spaces or hyphens), non-empty.
    pub prefix: String,
    pub limit: Limit,
}

/// q, country, limit.
pub fn parse_autocomplete(fields: &Map<String, Value>) -> Result<AutocompleteQuery, ApiError> {
    let q = match present(fields, "q") {
        Some(Value::String(q)) if !q.trim().is_empty() => q,
        _ => return Err(ApiError::bad_request("Missing required field: q")),
    };
    let prefix = compact(q.trim());
    if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(ApiError::bad_request(INVALID_Q));
    }
    Ok(AutocompleteQuery {
        country: code_country(fields.get("country"), INVALID_COUNTRY)?,
        prefix,
        limit: limit(fields)?,
    })
}

pub fn suggestions(postal: &PostalIndex, query: &AutocompleteQuery) -> Vec<Suggestion> {
    postal
        .geo()
        .autocomplete(query.country, &query.prefix, query.limit)
        .into_iter()
        .filter_map(|key| {
            let place = postal.place(query.country, key)?;
            Some(Suggestion {
                zipcode: canonical(query.country, place.postal_code),
                city: place.city.to_string(),
            })
        })
        .collect()
}

/// Body of /api/autocomplete.
#[derive(Debug, Object)]
#[oai(rename_all = "camelCase", example, skip_serializing_if_is_none)]
pub struct AutocompleteRequest {
    /// The beginning of a code; spaces and hyphens are ignored, and white space around it.
    // White space is written out (Unicode White_Space, what `str::trim` drops), not `\s`:
    // `\s` of ECMAScript also takes U+FEFF, Python's also U+001C..U+001F.
    #[oai(validator(
        pattern = r"^[\t\n\u000B\f\r \u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]*[ -]*[A-Za-z0-9][A-Za-z0-9 -]*[\t\n\u000B\f\r \u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]*$"
    ))]
    pub q: String,
    // ISO 3166-1 alpha-2 code; default `US`. (A plain comment: a described `$ref`
    // becomes an `allOf`, which generated clients cannot read; the CountryCode schema
    // states the rule.)
    pub country: Option<CountryField>,
    /// 1 to 100, default 10.
    #[oai(validator(minimum(value = "1"), maximum(value = "100")))]
    pub limit: Option<u64>,
    /// Your API key.
    #[oai(validator(min_length = 1))]
    pub api_key: ApiKeyText,
}

/// A code that starts with `q`.
#[derive(Debug, Clone, Object, Serialize)]
pub struct Suggestion {
    pub zipcode: String,
    /// The place name of its first record.
    pub city: String,
}

/// 200 of /api/autocomplete.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct AutocompleteResponse {
    /// In code order (of the compact forms).
    pub results: Vec<Suggestion>,
    #[oai(flatten)]
    #[serde(skip)]
    pub envelope: Envelope,
}

crate::api::reply::enveloped!(AutocompleteResponse);

impl Example for AutocompleteRequest {
    fn example() -> Self {
        AutocompleteRequest {
            q: "9021".into(),
            country: Some(CountryField("US".into())),
            limit: Some(3),
            api_key: EXAMPLE_KEY.into(),
        }
    }
}

impl Example for AutocompleteResponse {
    fn example() -> Self {
        let suggestion = |zipcode: &str| Suggestion {
            zipcode: zipcode.into(),
            city: "Beverly Hills".into(),
        };
        AutocompleteResponse {
            results: vec![
                suggestion("90210"),
                suggestion("90211"),
                suggestion("90212"),
            ],
            envelope: example_envelope(4.999972),
        }
    }
}

impl DocumentedBody for AutocompleteRequest {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::routes::geo::tests::{fields, text};
    use serde_json::json;

    #[test]
    fn autocomplete_compacts_q() {
        let q = parse_autocomplete(&fields(json!({"q": " sw1a-1", "country": "GB"}))).unwrap();
        assert_eq!(q.prefix, "SW1A1");
        assert_eq!(
            text(parse_autocomplete(&fields(json!({"q": "90*"}))).unwrap_err()),
            INVALID_Q
        );
        assert_eq!(
            text(parse_autocomplete(&fields(json!({"q": "--"}))).unwrap_err()),
            INVALID_Q
        );
        assert_eq!(
            text(parse_autocomplete(&fields(json!({"q": ""}))).unwrap_err()),
            "Missing required field: q"
        );
    }
}
