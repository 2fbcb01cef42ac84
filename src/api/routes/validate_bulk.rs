//! `/api/validate-bulk`: up to 1,000 postal codes of any countries, from memory; 1 query
//! per record, the whole batch or nothing.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::registry::{MetaSchema, MetaSchemaRef};
use poem_openapi::types::{Example, ParseFromJSON, ParseResult, ToJSON};
use poem_openapi::{Enum, Object, OpenApi};
use serde::Serialize;
use serde_json::Value;

use crate::api::billed::{Billed, Operation};
use crate::api::contract::{BulkCodes, BulkRecord, ContractJson, DocumentedBody};
use crate::api::error::{ApiError, RetiredCode};
use crate::api::once::{IdempotencyHeader, Replayable};
use crate::api::reply::{JsonBody, json_string, json_utf8};
use crate::api::types::*;
use crate::api::{ApiTags, State};
use crate::domain::charge::Endpoint;
use crate::index::postal::PostalIndex;
use crate::index::postal::Verdict;

/// The route of /api/validate-bulk (its handler reads the `State` from the request data).
pub struct ValidateBulkApi;

#[OpenApi]
impl ValidateBulkApi {
    /// Check up to 1,000 postal codes of any countries in one request.
    ///
    /// Per-record problems are results (`reason`: not_found, invalid_format,
    /// unknown_country), never errors. Billed per record; when the balance or a rate
    /// window cannot take the whole batch, nothing is charged (402 / 429). With an
    /// `Idempotency-Key`, a retry of a request whose answer was lost is never billed
    /// twice.
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
        /// Makes retrying this request safe: a key of yours, 1 to 255 visible ASCII
        /// characters (a UUID), new for each request. A retry with the same key and body
        /// within 24 hours gets the first 200 again, byte for byte, with
        /// `Idempotent-Replayed: true`, charged nothing; the same key with another body
        /// is 422, and 409 while the first request is still running. Keys are per
        /// account; only 200s are kept (an error charges nothing: retry it as it is).
        #[oai(name = "Idempotency-Key", example = "crate::api::once::example_key")]
        idempotency_key: IdempotencyHeader,
    ) -> Result<Replayable<BulkAnswer>, ApiError> {
        state
            .0
            .billed_once::<ValidateBulk, _>(&body, &idempotency_key, respond)
            .await
    }
}

/// The 200 of what the work found.
fn respond(billed: Billed<BulkChecked>) -> BulkAnswer {
    let Billed {
        answer,
        envelope,
        total_cost,
    } = billed;
    BulkAnswer {
        checked: answer,
        total_cost,
        envelope,
    }
}

pub struct ValidateBulk;

/// Each record and its verdict; their codes are in `texts`.
pub struct BulkChecked {
    texts: Arc<str>,
    records: Vec<BulkRecord>,
    /// `records[i]`'s verdict: the work writes 24 bytes a record, and moves no record (an
    /// 80-byte result a record, record and all, was a fifth of the work, issue 37).
    verdicts: Vec<Verdict>,
    /// For each code an import removed, its record's index and the day it went, in index
    /// order.
    retired: Vec<(usize, String)>,
}

impl BulkChecked {
    /// Each record, its verdict and the day its code was retired.
    fn results(&self) -> impl Iterator<Item = (&BulkRecord, &Verdict, Option<&str>)> {
        let mut retired = self.retired.iter().peekable();
        self.records
            .iter()
            .zip(&self.verdicts)
            .enumerate()
            .map(move |(i, (record, verdict))| {
                let since = retired.next_if(|(at, _)| *at == i);
                (record, verdict, since.map(|(_, since)| since.as_str()))
            })
    }
}

impl Operation for ValidateBulk {
    const ENDPOINT: Endpoint = Endpoint::ValidateBulk;
    type Request = BulkRequest;
    type Parsed = BulkCodes;
    type Answer = BulkChecked;

    fn parse(body: &ContractJson<Self::Request>) -> Result<BulkCodes, ApiError> {
        body.bulk_records()
    }

    fn queries(codes: &BulkCodes) -> u64 {
        codes.records.len() as u64
    }

    // Not inlined: bench/counts.py counts validate-bulk's work as this function's cost.
    #[inline(never)]
    fn work(postal: &PostalIndex, codes: BulkCodes) -> Result<BulkChecked, ApiError> {
        let BulkCodes { texts, records } = codes;
        let mut retired = Vec::new();
        let verdicts = records
            .iter()
            .enumerate()
            .map(|(i, record)| {
                let verdict = postal.check_code(record.country, record.code_bytes(&texts));
                if verdict == Verdict::NotFound
                    && let Some(code) =
                        postal.retired_text(record.country, record.postal_code(&texts))
                {
                    retired.push((i, RetiredCode::of(code).since));
                }
                verdict
            })
            .collect();
        Ok(BulkChecked {
            texts,
            records,
            verdicts,
            retired,
        })
    }
}

/// The 200 of /api/validate-bulk as it is sent: documented as [`BulkResponse`] (which
/// [`BulkAnswer::documented`] builds), written by hand (`JsonBody`): a result is a fixed
/// template around four strings, and serde_json scanned each of its nine strings (keys
/// included) for escapes, more than half of writing the answer (issue 37). The test
/// `the_answer_is_written_as_serde_writes_the_documented_type` holds the two to the same
/// bytes.
pub struct BulkAnswer {
    checked: BulkChecked,
    total_cost: f64,
    envelope: Envelope,
}

crate::api::reply::enveloped!(BulkAnswer, BulkResponse);

wrapper_type!(
    BulkAnswer,
    BulkResponse::name(),
    BulkResponse::schema_ref(),
    BulkResponse::register
);

impl ToJSON for BulkAnswer {
    fn to_json(&self) -> Option<Value> {
        self.documented().to_json()
    }
}

impl BulkAnswer {
    /// The same answer in the documented type.
    pub fn documented(&self) -> BulkResponse {
        let texts = &self.checked.texts;
        let results = self
            .checked
            .results()
            .map(|(record, verdict, retired_since)| {
                let (normalized, reason) = match verdict {
                    Verdict::Valid(code) => (Some(code.as_str().to_owned()), None),
                    other => (None, Some(Reason::of(other))),
                };
                BulkResult {
                    postal_code: record.postal_code(texts).to_owned(),
                    country_code: record.country_echo().to_owned(),
                    valid: normalized.is_some(),
                    normalized,
                    reason: NullableReason(reason),
                    retired_since: retired_since.map(str::to_owned),
                }
            })
            .collect();
        BulkResponse {
            results,
            total_cost: self.total_cost,
            envelope: self.envelope.clone(),
        }
    }
}

impl JsonBody for BulkAnswer {
    fn json_bytes(&self) -> serde_json::Result<Vec<u8>> {
        let texts = &self.checked.texts;
        let mut out = Vec::with_capacity(self.checked.records.len() * 96 + 512);
        out.extend_from_slice(br#"{"results":["#);
        for (i, (record, verdict, retired_since)) in self.checked.results().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(br#"{"postalCode":"#);
            json_string(&mut out, record.postal_code(texts))?;
            out.extend_from_slice(br#","countryCode":"#);
            json_string(&mut out, record.country_echo())?;
            match verdict {
                Verdict::Valid(code) => {
                    out.extend_from_slice(br#","valid":true,"normalized":"#);
                    json_utf8(&mut out, code.as_bytes())?;
                    out.extend_from_slice(br#","reason":null"#);
                }
                other => {
                    out.extend_from_slice(br#","valid":false,"normalized":null,"reason":""#);
                    out.extend_from_slice(Reason::of(other).as_str().as_bytes());
                    out.push(b'"');
                }
            }
            if let Some(since) = retired_since {
                out.extend_from_slice(br#","retiredSince":"#);
                json_string(&mut out, since)?;
            }
            out.push(b'}');
        }
        out.extend_from_slice(br#"],"totalCost":"#);
        serde_json::to_writer(&mut out, &self.total_cost)?;
        out.push(b',');
        self.envelope.write_members(&mut out)?;
        out.push(b'}');
        Ok(out)
    }
}

/// One record of a bulk request.
#[derive(Debug, Object)]
pub struct BulkRecordRequest {
    /// Non-empty postal code.
    #[oai(rename = "postalCode")]
    pub postal_code: NonBlankText,
    // ISO 3166-1 alpha-2 code. (A plain comment: a described `$ref` becomes an `allOf`,
    // which generated clients cannot read; the CountryCode schema states the rule.)
    #[oai(rename = "countryCode")]
    pub country_code: CountryField,
}

/// Body of /api/validate-bulk.
#[derive(Debug, Object)]
#[oai(example)]
pub struct BulkRequest {
    /// Your API key.
    #[oai(rename = "apiKey", validator(min_length = 1))]
    pub api_key: ApiKeyText,
    /// 1 to 1,000 records; countries may be mixed.
    #[oai(validator(min_items = 1, max_items = 1000))]
    pub records: Vec<BulkRecordRequest>,
}

impl Example for BulkRequest {
    fn example() -> Self {
        let record = |code: &str, country: &str| BulkRecordRequest {
            postal_code: NonBlankText(code.into()),
            country_code: CountryField(country.into()),
        };
        BulkRequest {
            api_key: "pk_your_api_key".into(),
            records: vec![
                record("90210", "US"),
                record("SW1A 1AA", "GB"),
                record("ABCDE", "US"),
            ],
        }
    }
}

impl DocumentedBody for BulkRequest {
    const CODE_RECORDS: bool = true;
}

/// Why a bulk record is not valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Enum, Serialize)]
#[oai(rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Well-formed, but not in the country's data.
    NotFound,
    /// Not a form of the country's postal codes.
    InvalidFormat,
    /// A valid ISO code with no data loaded.
    UnknownCountry,
}

impl Reason {
    /// The reason of a verdict other than `Valid`.
    fn of(verdict: &Verdict) -> Reason {
        match verdict {
            Verdict::NotFound => Reason::NotFound,
            Verdict::UnknownCountry => Reason::UnknownCountry,
            Verdict::InvalidFormat | Verdict::Valid(_) => Reason::InvalidFormat,
        }
    }

    /// As serde and the document name it.
    fn as_str(self) -> &'static str {
        match self {
            Reason::NotFound => "not_found",
            Reason::InvalidFormat => "invalid_format",
            Reason::UnknownCountry => "unknown_country",
        }
    }
}

/// `reason` of a bulk result: the enum inline and nullable, because generated clients
/// cannot take `null` through an `allOf` around a `$ref` to an enum (openapi-python-client:
/// "Cannot take allOf a non-object").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NullableReason(pub Option<Reason>);

wrapper_type!(
    NullableReason,
    "nullable_reason",
    {
        let mut schema = MetaSchema::new("string");
        schema.enum_items = [
            Reason::NotFound,
            Reason::InvalidFormat,
            Reason::UnknownCountry,
        ]
        .iter()
        .filter_map(ToJSON::to_json)
        // OpenAPI 3.0.3: a nullable enum lists null among its values.
        .chain([Value::Null])
        .collect();
        schema.nullable = true;
        MetaSchemaRef::Inline(Box::new(schema))
    },
    |_: &mut poem_openapi::registry::Registry| {}
);

impl ParseFromJSON for NullableReason {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        match value {
            None | Some(Value::Null) => Ok(NullableReason(None)),
            some => Reason::parse_from_json(some)
                .map(|reason| NullableReason(Some(reason)))
                .map_err(poem_openapi::types::ParseError::propagate),
        }
    }
}

impl ToJSON for NullableReason {
    fn to_json(&self) -> Option<Value> {
        Some(
            self.0
                .as_ref()
                .and_then(ToJSON::to_json)
                .unwrap_or(Value::Null),
        )
    }
}

/// One result of /api/validate-bulk, in request order.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct BulkResult {
    /// Echo of the input.
    pub postal_code: String,
    /// Echo of the input, upper case.
    pub country_code: String,
    pub valid: bool,
    /// The stored key when valid (GB outcode, CA forward sortation area, ...), else null.
    #[oai(nullable)]
    pub normalized: Option<String>,
    /// Why the record is not valid; null when valid.
    pub reason: NullableReason,
    /// With `reason` not_found, for a code an import removed: the UTC day it went
    /// (`YYYY-MM-DD`); absent otherwise.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retired_since: Option<String>,
}

/// 200 of /api/validate-bulk.
#[derive(Debug, Object, Serialize)]
#[oai(rename_all = "camelCase", example)]
#[serde(rename_all = "camelCase")]
pub struct BulkResponse {
    pub results: Vec<BulkResult>,
    /// Records x 0.000028 USD.
    pub total_cost: f64,
    #[oai(flatten)]
    #[serde(skip)]
    pub envelope: Envelope,
}

impl Example for BulkResponse {
    fn example() -> Self {
        let result = |code: &str,
                      country: &str,
                      normalized: Option<&str>,
                      reason: Option<Reason>| BulkResult {
            postal_code: code.into(),
            country_code: country.into(),
            valid: normalized.is_some(),
            normalized: normalized.map(String::from),
            reason: NullableReason(reason),
            retired_since: None,
        };
        BulkResponse {
            results: vec![
                result("90210", "US", Some("90210"), None),
                result("SW1A 1AA", "GB", Some("SW1A"), None),
                result("ABCDE", "US", None, Some(Reason::InvalidFormat)),
            ],
            total_cost: 0.000084,
            envelope: example_envelope(4.999916),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::CountryCode;
    use crate::domain::postal_code::CanonicalCode;

    /// An answer with every kind of result and strings that need escapes.
    fn answer(envelope: Envelope) -> BulkAnswer {
        let codes = [
            "90210",
            "a\"b\\c",
            "tab\there\n\u{1}\u{1f}",
            "é😀\u{7f}",
            "SW1A 1AA",
            "",
        ];
        let texts: String = codes.concat();
        let de = CountryCode::parse("DE").unwrap();
        let verdicts = [
            Verdict::Valid(CanonicalCode::of(CountryCode::US, "90210")),
            Verdict::Valid(CanonicalCode::of(CountryCode::JP, "100-0001")),
            Verdict::Valid(CanonicalCode::of(de, &"1\"2".repeat(10))),
            Verdict::NotFound,
            Verdict::InvalidFormat,
            Verdict::UnknownCountry,
        ];
        let mut at = 0;
        let records = codes
            .iter()
            .enumerate()
            .map(|(i, code)| {
                let start = at;
                at += code.len() as u32;
                BulkRecord {
                    postal_code: start..at,
                    country: if i % 2 == 0 { CountryCode::US } else { de },
                    country_echo: (i == 1).then(|| " DE\u{b}".into()),
                }
            })
            .collect();
        // Days on the first record, a middle one and the last.
        let retired = [0, 3, 5]
            .into_iter()
            .map(|i| (i, format!("2026-01-0{i}")))
            .collect();
        BulkAnswer {
            checked: BulkChecked {
                texts: Arc::from(texts),
                records,
                verdicts: verdicts.into(),
                retired,
            },
            total_cost: 0.000168,
            envelope,
        }
    }

    #[test]
    fn each_retired_day_goes_to_its_own_record() {
        let answer = answer(example_envelope(0.1));
        let days: Vec<Option<&str>> = answer.checked.results().map(|(_, _, day)| day).collect();
        assert_eq!(
            days,
            [
                Some("2026-01-00"),
                None,
                None,
                Some("2026-01-03"),
                None,
                Some("2026-01-05")
            ]
        );
    }

    #[test]
    fn the_answer_is_written_as_serde_writes_the_documented_type() {
        let mut without_balance = example_envelope(0.1);
        without_balance.balance = None;
        for envelope in [example_envelope(4.999916), without_balance] {
            let answer = answer(envelope);
            let written = String::from_utf8(answer.json_bytes().unwrap()).unwrap();
            let documented = String::from_utf8(answer.documented().json_bytes().unwrap()).unwrap();
            assert_eq!(written, documented);
            assert_eq!(answer.to_json(), answer.documented().to_json());
        }
    }
}
