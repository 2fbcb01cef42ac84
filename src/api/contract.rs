//! The request side of the contract: any body becomes a JSON object or the contract's
//! 400 / 413, and fields are read with the contract's texts.
//!
//! poem-openapi's own `Json<T>` answers a bad body with a plain-text 400 that names no
//! field, and a missing or non-JSON `Content-Type` with 415 (stack.md, section 2). The
//! contract wants JSON errors with exact texts, a body parsed as JSON whatever its
//! `Content-Type`, and the API key checked (401) before any other field (decisions.md,
//! order of checks). So [`ContractJson`] documents the endpoint's request type `T` in the
//! OpenAPI document but hands the handler the parsed JSON object; the handler reads
//! `apiKey`, authenticates, then reads its other fields with the functions below.

use std::marker::PhantomData;

use poem::{Request, RequestBody};
use poem_openapi::ApiExtractor;
use poem_openapi::ApiExtractorType;
use poem_openapi::ExtractParamOptions;
use poem_openapi::registry::{MetaMediaType, MetaRequest, MetaSchemaRef, Registry};
use poem_openapi::types::Type;
use std::ops::Range;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::access::{self, RequestMeta};
use super::code_records::{self, CodeItem, CodeRecords, Field};
use super::error::ApiError;
use super::types::MAX_ZIPCODE_INTEGER;
use crate::domain::CountryCode;
use crate::domain::idempotency::Fingerprint;
use crate::domain::postal_code::ZipInput;

/// Largest accepted body (decisions.md): 1 MiB.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// The OpenAPI schema of a request body: the documented type `T`, and for some bodies a
/// rule over several fields (/api/city: `state`, `ST` or a country outside the US).
pub trait DocumentedBody: Type + Send {
    fn register_body(registry: &mut Registry) {
        Self::register(registry);
    }

    fn body_schema() -> MetaSchemaRef {
        Self::schema_ref()
    }

    /// Whether the body's `records` are read only for their codes (`api::code_records`),
    /// not parsed into a `Value` (`/api/validate-bulk`).
    const CODE_RECORDS: bool = false;
}

/// A request body that is a JSON object, documented as `T`, and what the access rules
/// read from the request's head (`access::RequestMeta`: a key in a header, the origin).
pub struct ContractJson<T> {
    /// The body's fields; `records` is in `code_records` instead when it is an array of a
    /// body with `DocumentedBody::CODE_RECORDS`.
    pub fields: Map<String, Value>,
    pub code_records: Option<CodeRecords>,
    pub meta: RequestMeta,
    documented: PhantomData<T>,
}

/// A request whose head and fields the billed path reads (a `ContractJson<Operation::Request>`).
pub trait Requested {
    fn meta(&self) -> &RequestMeta;
    /// The fingerprint of the body (an idempotent request's): that of its fields as a
    /// `Value` parses them, whatever the way they were read.
    fn fingerprint(&self) -> serde_json::Result<Fingerprint>;
}

impl<T> Requested for ContractJson<T> {
    fn meta(&self) -> &RequestMeta {
        &self.meta
    }

    fn fingerprint(&self) -> serde_json::Result<Fingerprint> {
        let Some(records) = &self.code_records else {
            return Fingerprint::of(&self.fields);
        };
        let mut fields = self.fields.clone();
        fields.insert("records".to_owned(), records.to_value());
        Fingerprint::of(&fields)
    }
}

impl<'a, T: DocumentedBody> ApiExtractor<'a> for ContractJson<T> {
    // The body, and the key it may carry instead of a header: the document lists the
    // header forms as security schemes, with the body's `apiKey` as the fallback (`{}`).
    const TYPES: &'static [ApiExtractorType] = &[
        ApiExtractorType::RequestObject,
        ApiExtractorType::SecurityScheme,
    ];
    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        T::register_body(registry);
        for (name, scheme) in access::security_schemes() {
            registry.create_security_scheme(name, scheme);
        }
    }

    fn security_schemes() -> Vec<&'static str> {
        access::security_schemes()
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    }

    fn has_security_fallback() -> bool {
        true
    }

    fn request_meta() -> Option<MetaRequest> {
        json_request(T::body_schema())
    }

    async fn from_request(
        request: &'a Request,
        body: &mut RequestBody,
        _options: ExtractParamOptions<()>,
    ) -> poem::Result<Self> {
        let bytes = read_body(body, MAX_BODY_BYTES, INVALID_JSON).await?;
        let mut json = Self::from_bytes(&bytes)?;
        json.meta = RequestMeta::of(request);
        Ok(json)
    }
}

pub const INVALID_JSON: &str = "Invalid JSON body";

/// The OpenAPI entry of a required JSON body of `schema` (an API's and the dashboard's).
pub(super) fn json_request(schema: MetaSchemaRef) -> Option<MetaRequest> {
    Some(MetaRequest {
        description: None,
        required: true,
        content: vec![MetaMediaType {
            content_type: "application/json",
            schema,
        }],
    })
}

/// The request's body, at most `limit` bytes: beyond, 413 `Request body too large`; a
/// body that cannot be read, 400 `invalid`.
pub(super) async fn read_body(
    body: &mut RequestBody,
    limit: usize,
    invalid: &str,
) -> Result<bytes::Bytes, ApiError> {
    let body = body.take().map_err(|_| ApiError::bad_request(invalid))?;
    read_whole(body, limit, invalid).await
}

/// As [`read_body`], of a body a plain handler took (the Stripe webhook's raw bytes).
pub(crate) async fn read_whole(
    body: poem::Body,
    limit: usize,
    invalid: &str,
) -> Result<bytes::Bytes, ApiError> {
    body.into_bytes_limit(limit).await.map_err(|e| match e {
        poem::error::ReadBodyError::PayloadTooLarge => ApiError::too_large(),
        _ => ApiError::bad_request(invalid),
    })
}

impl<T: DocumentedBody> ContractJson<T> {
    /// A body that is a JSON object, else `400 Invalid JSON body`.
    // Not inlined: bench/counts.py counts validate-bulk's parse from this function's cost.
    #[inline(never)]
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ApiError> {
        // The whole body checked as UTF-8 once, then parsed as text: serde_json checks each
        // string of a byte slice on its own (a tenth of a validate-bulk request's
        // instructions, issue 37). The same bodies pass: JSON outside its strings is ASCII.
        let text = std::str::from_utf8(bytes).map_err(|_| ApiError::bad_request(INVALID_JSON))?;
        let (fields, code_records) = if T::CODE_RECORDS {
            code_records::object_with_code_records(text)
                .map_err(|_| ApiError::bad_request(INVALID_JSON))?
        } else {
            match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(fields)) => (fields, None),
                _ => return Err(ApiError::bad_request(INVALID_JSON)),
            }
        };
        Ok(ContractJson {
            fields,
            code_records,
            meta: RequestMeta::default(),
            documented: PhantomData,
        })
    }
}

impl<T> ContractJson<T> {
    /// A GET request's query parameters as the body they stand for (`/api/lookup?...`):
    /// each present one a field, the request's head read as for a body.
    pub fn from_query<'k>(
        request: &Request,
        fields: impl IntoIterator<Item = (&'k str, Option<Value>)>,
    ) -> Self {
        Self::from_fields(fields, RequestMeta::of(request))
    }

    /// As [`from_query`](Self::from_query), the head already read (`api::hot`). The
    /// body's `apiKey`, if any, is the URL's `key=`: only a publishable key may come so.
    pub fn from_fields<'k>(
        fields: impl IntoIterator<Item = (&'k str, Option<Value>)>,
        mut meta: RequestMeta,
    ) -> Self {
        meta.key_in_url = true;
        ContractJson {
            fields: fields
                .into_iter()
                .filter_map(|(name, value)| Some((name.to_string(), value?)))
                .collect(),
            code_records: None,
            meta,
            documented: PhantomData,
        }
    }

    /// The key: `Authorization: Bearer` or `X-Api-Key`, which win; else `apiKey`, a
    /// non-empty string; else `missing_text` (endpoints word it differently).
    pub fn api_key(&self, missing_text: &str) -> Result<&str, ApiError> {
        if let Some(key) = self.meta.header_key() {
            return Ok(key);
        }
        match self.fields.get("apiKey") {
            Some(Value::String(key)) if !key.is_empty() => Ok(key),
            _ => Err(ApiError::bad_request(missing_text)),
        }
    }

    /// `zipcode`: a non-blank string, or a JSON integer from 0 to 2^53 - 1.
    pub fn zipcode(&self) -> Result<ZipInput, ApiError> {
        zip_input(self.fields.get("zipcode"))
            .ok_or_else(|| ApiError::bad_request("Missing required field: zipcode"))
    }

    /// `zipcode` exactly as sent, for echoing.
    pub fn zipcode_echo(&self) -> Value {
        self.fields.get("zipcode").cloned().unwrap_or(Value::Null)
    }

    /// A non-blank string field, else `400 Missing required field: <name>`.
    pub fn required_text(&self, name: &str) -> Result<&str, ApiError> {
        match self.fields.get(name) {
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
            _ => Err(ApiError::bad_request(format!(
                "Missing required field: {name}"
            ))),
        }
    }

    /// A required free-text field (`city`): as `required_text`, and at most
    /// [`MAX_TEXT_CHARS`] characters (a longer one is 400 naming the limit, before any
    /// work: the cost of matching a name grows with its length).
    pub fn required_free_text(&self, name: &str) -> Result<&str, ApiError> {
        bounded(|| name, self.required_text(name)?)
    }

    /// An optional free-text field (`state`, `ST`): as `optional_text`, at most
    /// [`MAX_TEXT_CHARS`] characters.
    pub fn optional_free_text(&self, name: &str) -> Result<Option<&str>, ApiError> {
        self.optional_text(name)?
            .map(|text| bounded(|| name, text))
            .transpose()
    }

    /// An optional string field: absent, or blank, is `None`; `null` or another type
    /// than a string is `400 Invalid '<name>'` (docs/decisions.md).
    pub fn optional_text(&self, name: &str) -> Result<Option<&str>, ApiError> {
        match self.fields.get(name) {
            None => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ApiError::bad_request(format!("Invalid '{name}'"))),
        }
    }

    /// `country`: absent means US; otherwise one of the 252 ISO codes. `null` is not a
    /// code: `400 Invalid 'country'` (docs/decisions.md).
    pub fn country(&self) -> Result<CountryCode, ApiError> {
        match self.fields.get("country") {
            None => Ok(CountryCode::US),
            Some(Value::String(s)) => {
                CountryCode::parse(s).ok_or_else(|| ApiError::bad_request("Invalid 'country'"))
            }
            Some(_) => Err(ApiError::bad_request("Invalid 'country'")),
        }
    }
}

/// The most characters a free-text field (`city`, `state`, `ST`) may hold: the longest
/// place names are under 170 (Bangkok's ceremonial name).
pub const MAX_TEXT_CHARS: usize = 200;

/// `text`, the value of field `name` (`city`, or `records[3].city`: a name built only
/// when the text is too long), or 400 when it is longer than [`MAX_TEXT_CHARS`]
/// characters.
pub fn bounded<N: std::fmt::Display>(
    name: impl FnOnce() -> N,
    text: &str,
) -> Result<&str, ApiError> {
    match text.chars().nth(MAX_TEXT_CHARS) {
        None => Ok(text),
        Some(_) => Err(ApiError::bad_request(format!(
            "{} must be at most {MAX_TEXT_CHARS} characters",
            name()
        ))),
    }
}

/// A `zipcode` value: a non-blank string or a non-negative JSON integer.
pub fn zip_input(value: Option<&Value>) -> Option<ZipInput> {
    match value {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(ZipInput::Text(s.clone())),
        // Above 2^53 - 1 a JSON number is not an exact integer in most clients.
        Some(Value::Number(n)) => n
            .as_u64()
            .filter(|&v| v <= MAX_ZIPCODE_INTEGER)
            .map(ZipInput::Integer),
        _ => None,
    }
}

/// `records` of a bulk body: an array of 1 to 1,000 items (validate-bulk, nearest-bulk),
/// with the contract's texts.
pub fn records_array(fields: &Map<String, Value>) -> Result<&Vec<Value>, ApiError> {
    let Some(Value::Array(items)) = fields.get("records") else {
        return Err(no_records());
    };
    records_count(items.len())?;
    Ok(items)
}

fn no_records() -> ApiError {
    ApiError::bad_request("Missing required field: records (must be an array)")
}

/// 1 to 1,000 records, with the contract's texts.
fn records_count(len: usize) -> Result<(), ApiError> {
    if len == 0 {
        return Err(ApiError::bad_request(
            "records array must contain at least 1 record",
        ));
    }
    if len > MAX_BULK_RECORDS {
        return Err(ApiError::bad_request(
            "records array exceeds maximum of 1000 per request",
        ));
    }
    Ok(())
}

/// The codes of one record of a bulk request, checked (verify-bulk's, from a `Value`).
pub struct RecordCodes {
    pub postal_code: String,
    pub country: CountryCode,
    /// `countryCode` as sent, upper-cased (echoed in the result).
    pub country_input: String,
}

/// Maximum records of one bulk request.
pub const MAX_BULK_RECORDS: usize = 1000;

/// The records of a `/api/validate-bulk` body, checked: their codes are in `texts`.
pub struct BulkCodes {
    pub texts: Arc<str>,
    pub records: Vec<BulkRecord>,
}

/// One record of `/api/validate-bulk`, checked.
pub struct BulkRecord {
    /// `postalCode`: these bytes of `BulkCodes::texts`.
    pub postal_code: Range<u32>,
    pub country: CountryCode,
    /// `countryCode` as sent, upper-cased (echoed in the result), when that is not
    /// `country` itself.
    pub country_echo: Option<Box<str>>,
}

impl BulkRecord {
    pub fn postal_code<'t>(&self, texts: &'t str) -> &'t str {
        texts
            .get(self.postal_code.start as usize..self.postal_code.end as usize)
            .unwrap_or("")
    }

    /// [`BulkRecord::postal_code`]'s bytes: without the two checks that its ends are
    /// whole characters (16 instructions of `/api/validate-bulk`'s work a record).
    pub fn code_bytes<'t>(&self, texts: &'t str) -> &'t [u8] {
        texts
            .as_bytes()
            .get(self.postal_code.start as usize..self.postal_code.end as usize)
            .unwrap_or(b"")
    }

    pub fn country_echo(&self) -> &str {
        self.country_echo
            .as_deref()
            .unwrap_or(self.country.as_str())
    }
}

impl<T> ContractJson<T> {
    /// `records`: 1 to 1,000 objects with a non-empty string `postalCode` and an ISO
    /// `countryCode`; the lowest failing index wins, `postalCode` before `countryCode`.
    pub fn bulk_records(&self) -> Result<BulkCodes, ApiError> {
        let Some(CodeRecords { texts, items }) = &self.code_records else {
            return Err(no_records());
        };
        records_count(items.len())?;
        let mut records = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let (postal_code, country_code) = match item {
                CodeItem::Object {
                    postal_code,
                    country_code,
                    ..
                } => (postal_code, country_code),
                CodeItem::Other(_) => (&Field::Absent, &Field::Absent),
            };
            let (_, country, country_input) =
                checked_codes(i, postal_code.text(texts), country_code.text(texts))?;
            let postal_code = match postal_code {
                Field::Text(range) => range.clone(),
                _ => 0..0,
            };
            let country_echo = (country_input != country.as_str())
                .then(|| country_input.to_uppercase().into_boxed_str());
            records.push(BulkRecord {
                postal_code,
                country,
                country_echo,
            });
        }
        Ok(BulkCodes {
            texts: Arc::clone(texts),
            records,
        })
    }
}

/// Record `i`'s `postalCode` and `countryCode` (each `Some` when a string): a non-blank
/// postal code, then an ISO country code (the first failing one named); with the country
/// code as sent.
fn checked_codes<'a>(
    i: usize,
    postal_code: Option<&'a str>,
    country_code: Option<&'a str>,
) -> Result<(&'a str, CountryCode, &'a str), ApiError> {
    let postal_code = postal_code.filter(|s| !blank(s)).ok_or_else(|| {
        ApiError::bad_request(format!(
            "records[{i}].postalCode must be a non-empty string"
        ))
    })?;
    let country_input = country_code.unwrap_or("");
    let country = CountryCode::parse(country_input).ok_or_else(|| {
        ApiError::bad_request(format!(
            "records[{i}].countryCode must be a 2-letter ISO 3166-1 alpha-2 code"
        ))
    })?;
    Ok((postal_code, country, country_input))
}

/// Whether `text` is empty or only white space (`str::trim`'s), looking no further than
/// its first byte when that is ASCII and not white space (most codes).
fn blank(text: &str) -> bool {
    match text.as_bytes().first() {
        Some(&b) if b.is_ascii() && !matches!(b, b'\t'..=b'\r' | b' ') => false,
        _ => text.trim().is_empty(),
    }
}

/// Record `i` of a bulk request's `records` as a `Value`: its codes as
/// [`ContractJson::bulk_records`] checks them (verify-bulk's records).
pub fn record_codes(i: usize, item: &Value) -> Result<RecordCodes, ApiError> {
    let text = |name: &str| item.get(name).and_then(Value::as_str);
    let (postal_code, country, country_input) =
        checked_codes(i, text("postalCode"), text("countryCode"))?;
    Ok(RecordCodes {
        postal_code: postal_code.to_owned(),
        country,
        country_input: country_input.to_uppercase(),
    })
}
