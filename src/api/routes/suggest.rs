//! POST /api/suggest: place names as the user types them, most postal codes first
//! (docs/city.md): parse, authenticate, precheck, one pure call on the in-memory index,
//! charge, respond.

use std::sync::Arc;

use poem::web::Data;

use crate::api::get::{self, text};
use crate::api::reply::Cached;
use poem::Request;
use poem_openapi::param::Query;

use crate::api::reply::Reply;
use poem_openapi::registry::{MetaSchema, MetaSchemaRef};
use poem_openapi::types::Example;
use poem_openapi::{Object, OpenApi};
use serde::Serialize;
use serde_json::Value;

use crate::api::billed::{Billed, Operation};
use crate::api::contract::ContractJson;
use crate::api::error::ApiError;
use crate::api::types::ApiKeyText;
use crate::api::types::{CountryField, Envelope, example_envelope};
use crate::api::{ApiTags, State};
use crate::domain::CountryCode;
use crate::domain::charge::Endpoint;
use crate::domain::text::fold;
use crate::index::postal::PostalIndex;

/// What `q` must hold (its schema's pattern): an ASCII letter or digit, or a character
/// outside ASCII that is not white space.
pub const Q_PATTERN: &str =
    r"[0-9A-Za-z]|[^\x00-\x7F\u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]";

/// Results when `limit` is absent.
pub const DEFAULT_LIMIT: usize = 10;
/// Largest `limit`.
pub const MAX_LIMIT: usize = 50;
/// Longest `q` in characters (a place name has at most 192).
pub const MAX_QUERY_CHARS: usize = 200;

// `q` and `limit` as GET query parameters: documented as the body's fields, read
// leniently (`get::query_param!`).
get::query_param!(
    SearchText,
    true,
    "suggest_query",
    MetaSchemaRef::Inline(Box::new(MetaSchema {
        max_length: Some(MAX_QUERY_CHARS),
        pattern: Some(Q_PATTERN.to_string()),
        ..MetaSchema::new("string")
    })),
    |_: &mut poem_openapi::registry::Registry| {}
);
get::query_param!(
    Limit,
    false,
    "limit",
    MetaSchemaRef::Inline(Box::new(MetaSchema {
        minimum: Some(1.0),
        maximum: Some(MAX_LIMIT as f64),
        ..MetaSchema::new("integer")
    })),
    |_: &mut poem_openapi::registry::Registry| {}
);

/// The route of /api/suggest (its handlers read the `State` from the request data).
pub struct SuggestApi;

#[OpenApi]
impl SuggestApi {
    /// Suggest place names as the user types.
    ///
    /// Places whose name (case, accents and punctuation ignored) starts with `q`, then
    /// places whose name contains it (`q` of 3 characters or more), each group most postal
    /// codes first; `codes` is how many postal codes the place has. `state`/`ST` filter on
    /// admin name1/code1 as on /api/city (optional, also in the US). An empty `results`
    /// answers 200. Billed 0.000028 USD when it answers 200.
    #[oai(
        path = "/api/suggest",
        method = "post",
        operation_id = "suggest",
        tag = "ApiTags::Cities"
    )]
    async fn suggest(
        &self,
        state: Data<&Arc<State>>,
        body: ContractJson<SuggestRequest>,
    ) -> Result<Reply<SuggestResponse>, ApiError> {
        suggest_answer(state.0, &body).await.map(Reply)
    }

    /// Suggest place names as the user types (GET, for pages).
    ///
    /// As POST /api/suggest, with the fields as query parameters and the key as `key`.
    /// A 200 may be kept by the browser an hour. Billed 0.000028 USD when it answers 200.
    #[oai(
        path = "/api/suggest",
        method = "get",
        operation_id = "suggestGet",
        tag = "ApiTags::Cities"
    )]
    #[allow(clippy::too_many_arguments)]
    async fn suggest_get(
        &self,
        state: Data<&Arc<State>>,
        request: &Request,
        /// What the user typed so far.
        q: Query<SearchText>,
        /// ISO 3166-1 alpha-2 code, case-insensitive; default `US`.
        country: Query<get::Country>,
        /// Only places of this state / region (admin name1; US: also the code).
        #[oai(name = "state")]
        region: Query<get::FreeText>,
        /// Only places of this state / region code (admin code1).
        #[oai(name = "ST")]
        st: Query<get::FreeText>,
        /// How many results at most: 1 to 50, default 10.
        limit: Query<Limit>,
        /// A publishable API key, sent from a page of its origins (a secret key here is a 400: send it as `Authorization: Bearer` instead).
        key: Query<get::Required>,
    ) -> Result<Cached<SuggestResponse>, ApiError> {
        // A number as the body would carry it; anything else stays text (400 Invalid 'limit').
        let limit = limit.0.0.map(|l| match l.parse::<u64>() {
            Ok(n) => Value::from(n),
            Err(_) => Value::String(l),
        });
        let body = ContractJson::from_query(
            request,
            [
                ("q", text(q)),
                ("country", text(country)),
                ("state", text(region)),
                ("ST", text(st)),
                ("limit", limit),
                ("apiKey", text(key)),
            ],
        );
        suggest_answer(state.0, &body).await.map(Reply)
    }
}

/// `/api/suggest`'s answer to `body` (POST, or GET's query as a body).
pub(super) async fn suggest_answer(
    state: &State,
    body: &ContractJson<SuggestRequest>,
) -> Result<SuggestResponse, ApiError> {
    let Billed {
        answer, envelope, ..
    } = state.billed::<Suggest>(body).await?;
    Ok(SuggestResponse {
        results: answer,
        envelope,
    })
}

/// `/api/suggest` on the one billed path: 1 query.
pub struct Suggest;

impl Operation for Suggest {
    const ENDPOINT: Endpoint = Endpoint::Suggest;
    type Request = SuggestRequest;
    type Parsed = SuggestQuestion;
    type Answer = Vec<SuggestResult>;

    fn parse(body: &ContractJson<Self::Request>) -> Result<SuggestQuestion, ApiError> {
        parse(body)
    }

    fn work(
        postal: &PostalIndex,
        question: SuggestQuestion,
    ) -> Result<Vec<SuggestResult>, ApiError> {
        Ok(suggestions(postal, &question))
    }
}

/// A checked `/api/suggest` request, folded.
#[derive(Debug, Clone, PartialEq)]
pub struct SuggestQuestion {
    pub q: String,
    pub country: CountryCode,
    pub state: Option<String>,
    pub st: Option<String>,
    pub limit: usize,
}

/// Whether `c` can be part of a name: an ASCII letter or digit, or a character outside
/// ASCII that is not white space (the schema's pattern of `q`; a character the folding
/// then drops, such as `¿`, matches no name).
fn name_character(c: char) -> bool {
    c.is_ascii_alphanumeric() || (!c.is_ascii() && !c.is_whitespace())
}

/// The fields in the order docs/city.md lists their 400s: `q`, `country`, `limit`.
fn parse(body: &ContractJson<SuggestRequest>) -> Result<SuggestQuestion, ApiError> {
    let q = body.required_text("q")?;
    if !q.chars().any(name_character) || q.chars().count() > MAX_QUERY_CHARS {
        return Err(ApiError::bad_request("Invalid 'q'"));
    }
    let folded = fold(q);
    let country = body.country()?;
    let limit = match body.fields.get("limit") {
        None => DEFAULT_LIMIT,
        Some(Value::Number(n)) => n
            .as_u64()
            .filter(|n| (1..=MAX_LIMIT as u64).contains(n))
            .map(|n| n as usize)
            .ok_or_else(|| ApiError::bad_request("Invalid 'limit'"))?,
        Some(_) => return Err(ApiError::bad_request("Invalid 'limit'")),
    };
    Ok(SuggestQuestion {
        q: folded,
        country,
        state: body.optional_free_text("state")?.map(fold),
        st: body.optional_free_text("ST")?.map(fold),
        limit,
    })
}

/// The work: a read of the in-memory index, no I/O.
fn suggestions(index: &PostalIndex, question: &SuggestQuestion) -> Vec<SuggestResult> {
    if question.q.is_empty() {
        // `q` of characters the folding drops (`¿`, `—`): no name starts with nothing.
        return Vec::new();
    }
    index
        .city()
        .suggest(
            question.country,
            &question.q,
            question.state.as_deref(),
            question.st.as_deref(),
            question.limit,
        )
        .into_iter()
        .map(|s| SuggestResult {
            city: s.city,
            state: s.state,
            st: s.st,
            codes: s.codes as u64,
        })
        .collect()
}

/// Body of /api/suggest.
#[derive(Debug, Object)]
#[oai(example, skip_serializing_if_is_none)]
pub struct SuggestRequest {
    /// What the user typed so far; case, accents and punctuation are ignored. It holds an
    /// ASCII letter or digit, or a character outside ASCII that is not white space.
    #[oai(validator(
        max_length = 200,
        pattern = r"[0-9A-Za-z]|[^\x00-\x7F\u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]"
    ))]
    pub q: String,
    /// Your API key.
    #[oai(rename = "apiKey", validator(min_length = 1))]
    pub api_key: ApiKeyText,
    // ISO 3166-1 alpha-2 code, case-insensitive; default `US`. (A plain comment: a
    // described `$ref` becomes an `allOf`, which generated clients cannot read; the
    // CountryCode schema states the rule.)
    pub country: Option<CountryField>,
    /// Only places of this state / region (admin name1; US: also the code). At most 200 characters.
    #[oai(validator(max_length = 200))]
    pub state: Option<String>,
    /// Only places of this state / region code (admin code1).
    #[oai(rename = "ST", validator(max_length = 200))]
    pub st: Option<String>,
    /// How many results at most: 1 to 50, default 10.
    #[oai(validator(minimum(value = "1"), maximum(value = "50")))]
    pub limit: Option<u64>,
}

impl Example for SuggestRequest {
    fn example() -> Self {
        SuggestRequest {
            q: "san fr".into(),
            api_key: "pk_your_api_key".into(),
            country: Some(CountryField("US".into())),
            state: None,
            st: None,
            limit: Some(3),
        }
    }
}

/// One suggested place.
#[derive(Debug, Clone, PartialEq, Object, Serialize)]
pub struct SuggestResult {
    /// The place name as the data writes it.
    pub city: String,
    /// Its state / region (admin name1); "" when the data has none.
    pub state: String,
    /// Its state / region code (admin code1); "" when the data has none.
    #[oai(rename = "ST")]
    #[serde(rename = "ST")]
    pub st: String,
    /// How many postal codes the place has.
    pub codes: u64,
}

/// 200 of /api/suggest.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct SuggestResponse {
    /// Best first: names starting with `q`, then names containing it; most codes first.
    pub results: Vec<SuggestResult>,
    #[oai(flatten)]
    #[serde(skip)]
    pub envelope: Envelope,
}

crate::api::reply::enveloped!(SuggestResponse);

impl Example for SuggestResponse {
    fn example() -> Self {
        let place = |city: &str, codes| SuggestResult {
            city: city.into(),
            state: "California".into(),
            st: "CA".into(),
            codes,
        };
        SuggestResponse {
            results: vec![place("San Francisco", 63), place("San Fernando", 3)],
            envelope: example_envelope(4.999972),
        }
    }
}

impl crate::api::contract::DocumentedBody for SuggestRequest {}
