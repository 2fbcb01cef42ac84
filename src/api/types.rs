//! The JSON shapes the operations share (postal-api.md section 2): the field types, the
//! code request of lookup, metacode, validate and places, the envelope, and their
//! examples from the real data. Each operation's own shapes are in its file (`routes`).

use poem_openapi::registry::{MetaSchema, MetaSchemaRef, Registry};
use poem_openapi::types::{Example, ParseFromJSON, ParseResult, ToJSON};
use poem_openapi::{NewType, Object};
use serde::Serialize;
use serde_json::Value;

use super::contract::{DocumentedBody, MAX_TEXT_CHARS};

/// What `str::trim` leaves something of: a character that is not Unicode `White_Space`.
/// Written out (not `\S`) so that every regex dialect reads it the same.
pub const NON_BLANK: &str = "[^\\t\\n\\u000B\\f\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]";

/// Largest `zipcode` sent as an integer: 2^53 - 1, the largest integer every JSON client
/// holds exactly (RFC 7493). No postal code has more than 10 digits.
pub const MAX_ZIPCODE_INTEGER: u64 = (1 << 53) - 1;

pub(super) fn non_blank_string() -> MetaSchemaRef {
    MetaSchemaRef::Inline(Box::new(MetaSchema {
        pattern: Some(NON_BLANK.to_string()),
        ..MetaSchema::new("string")
    }))
}

/// The schema of a free-text field (`city`): non-blank, at most [`MAX_TEXT_CHARS`]
/// characters (JSON Schema's `maxLength` counts code points, as `bounded` does).
pub(super) fn free_text_string() -> MetaSchemaRef {
    MetaSchemaRef::Inline(Box::new(MetaSchema {
        pattern: Some(NON_BLANK.to_string()),
        max_length: Some(MAX_TEXT_CHARS),
        ..MetaSchema::new("string")
    }))
}

/// The schema of an optional free-text field (`state`, `ST`): at most [`MAX_TEXT_CHARS`]
/// characters.
pub(super) fn bounded_string() -> MetaSchemaRef {
    MetaSchemaRef::Inline(Box::new(MetaSchema {
        max_length: Some(MAX_TEXT_CHARS),
        ..MetaSchema::new("string")
    }))
}

/// poem-openapi's `Type` of a hand-written wrapper: its name, schema and registration; the
/// rest is the same for all of them.
macro_rules! wrapper_type {
    ($ty:ident, $name:expr, $schema:expr, $register:expr) => {
        impl ::poem_openapi::types::Type for $ty {
            const IS_REQUIRED: bool = true;
            type RawValueType = Self;
            type RawElementValueType = Self;

            fn name() -> ::std::borrow::Cow<'static, str> {
                $name.into()
            }

            fn schema_ref() -> ::poem_openapi::registry::MetaSchemaRef {
                $schema
            }

            fn register(registry: &mut ::poem_openapi::registry::Registry) {
                ($register)(registry)
            }

            fn as_raw_value(&self) -> Option<&Self> {
                Some(self)
            }

            fn raw_element_iter<'a>(
                &'a self,
            ) -> Box<dyn Iterator<Item = &'a Self::RawElementValueType> + 'a> {
                Box::new(self.as_raw_value().into_iter())
            }
        }
    };
}
pub(crate) use wrapper_type;

/// Implements the poem-openapi traits of a documentation-only wrapper of a JSON string.
macro_rules! documented_value {
    ($ty:ident, $name:expr, $schema:expr, $register:expr) => {
        wrapper_type!($ty, $name, $schema, $register);

        impl ParseFromJSON for $ty {
            fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
                match value {
                    Some(Value::String(s)) => Ok($ty(s)),
                    Some(other) => Err(poem_openapi::types::ParseError::expected_type(other)),
                    None => Err(poem_openapi::types::ParseError::expected_input()),
                }
            }
        }

        impl ToJSON for $ty {
            fn to_json(&self) -> Option<Value> {
                Some(Value::String(self.0.clone()))
            }
        }
    };
}

/// Implements the poem-openapi traits of a field kept as the JSON value sent (a string or
/// a number, echoed as is), which `$admits` accepts.
macro_rules! json_value {
    ($ty:ident, $name:expr, $schema:expr, $admits:expr) => {
        $crate::api::types::wrapper_type!(
            $ty,
            $name,
            $schema,
            |_: &mut ::poem_openapi::registry::Registry| {}
        );

        impl ::poem_openapi::types::ParseFromJSON for $ty {
            fn parse_from_json(
                value: Option<::serde_json::Value>,
            ) -> ::poem_openapi::types::ParseResult<Self> {
                match value {
                    Some(v) if ($admits)(&v) => Ok($ty(v)),
                    Some(other) => Err(::poem_openapi::types::ParseError::expected_type(other)),
                    None => Err(::poem_openapi::types::ParseError::expected_input()),
                }
            }
        }

        impl ::poem_openapi::types::ToJSON for $ty {
            fn to_json(&self) -> Option<::serde_json::Value> {
                Some(self.0.clone())
            }
        }
    };
}
pub(crate) use json_value;

/// A string field the server requires to hold more than white space (`city`, `postalCode`).
#[derive(Debug, Clone, PartialEq)]
pub struct NonBlankText(pub String);

documented_value!(
    NonBlankText,
    "non_blank_string",
    non_blank_string(),
    |_: &mut Registry| {}
);

/// A free-text field the server requires (`city`): more than white space, at most
/// [`MAX_TEXT_CHARS`] characters (the operation's parse answers a longer one 400).
#[derive(Debug, Clone, PartialEq)]
pub struct FreeText(pub String);

documented_value!(
    FreeText,
    "free_text_string",
    free_text_string(),
    |_: &mut Registry| {}
);

// The `apiKey` of a request body, documented as the string it is; its `Debug` shows `***`,
// so a printed request never holds the key. The billed path reads the key from the body's
// fields (`contract`), never through this type: nothing is added per request. (Plain
// comments: a doc comment would become the description of every field of this type.)
#[derive(Clone, PartialEq, NewType)]
#[oai(from_parameter = false, from_multipart = false, to_header = false)]
pub struct ApiKeyText(pub String);

impl std::fmt::Debug for ApiKeyText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl From<&str> for ApiKeyText {
    fn from(key: &str) -> ApiKeyText {
        ApiKeyText(key.to_owned())
    }
}

/// `country` / `countryCode`: one of GeoNames' 252 ISO 3166-1 alpha-2 codes, in any case
/// (the enum lists upper, lower and mixed case; surrounding spaces are also accepted).
#[derive(Debug, Clone, PartialEq)]
pub struct CountryField(pub String);

documented_value!(
    CountryField,
    "CountryCode",
    MetaSchemaRef::Reference("CountryCode".to_string()),
    |registry: &mut Registry| register_country_enum::<CountryField>(
        registry,
        "CountryCode",
        "ISO 3166-1 alpha-2 code (GeoNames' 252 codes), case-insensitive.",
        |_| true
    )
);

/// `country` on /api/city when it is what makes `state` / `ST` optional: any code but US.
pub struct CountryOutsideUs;

impl CountryOutsideUs {
    pub fn register(registry: &mut Registry) {
        register_country_enum::<CountryOutsideUs>(
            registry,
            "CountryCodeOutsideUS",
            "An ISO 3166-1 alpha-2 code other than US, case-insensitive.",
            |code| code != "US",
        );
    }

    pub fn schema_ref() -> MetaSchemaRef {
        MetaSchemaRef::Reference("CountryCodeOutsideUS".to_string())
    }
}

fn register_country_enum<T>(
    registry: &mut Registry,
    name: &str,
    description: &'static str,
    keep: impl Fn(&str) -> bool,
) {
    registry.create_schema::<T, _>(name.to_string(), |_| MetaSchema {
        description: Some(description),
        enum_items: crate::domain::country::ISO_CODES
            .iter()
            .filter(|code| keep(code))
            .flat_map(|code| {
                let mut chars = code.chars();
                let (a, b) = (chars.next().unwrap_or('A'), chars.next().unwrap_or('A'));
                [
                    format!("{a}{b}"),
                    format!("{}{}", a.to_ascii_lowercase(), b.to_ascii_lowercase()),
                    format!("{a}{}", b.to_ascii_lowercase()),
                    format!("{}{b}", a.to_ascii_lowercase()),
                ]
            })
            .map(Value::String)
            .collect(),
        ..MetaSchema::new("string")
    });
}

/// A postal code sent as a JSON string or integer (`"02134"`, `2134`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ZipCodeValue(pub Value);

json_value!(
    ZipCodeValue,
    "string_or_integer",
    MetaSchemaRef::Inline(Box::new(MetaSchema {
        one_of: vec![
            non_blank_string(),
            MetaSchemaRef::Inline(Box::new(MetaSchema {
                minimum: Some(0.0),
                maximum: Some(MAX_ZIPCODE_INTEGER as f64),
                ..MetaSchema::new("integer")
            })),
        ],
        ..MetaSchema::ANY
    })),
    |v: &Value| v.is_string() || v.is_u64()
);

// ---------------------------------------------------------------------------------------
// Requests (documentation of the bodies; `contract` reads them).
// ---------------------------------------------------------------------------------------

/// Body of /api/lookup, /api/metacode, /api/metazip and /api/validate.
#[derive(Debug, Object)]
#[oai(example, skip_serializing_if_is_none)]
pub struct CodeRequest {
    /// The postal code: a string, or an integer (leading zeros restored where the
    /// country's codes are digits of one length: US `2134` is `02134`).
    pub zipcode: ZipCodeValue,
    /// Your API key.
    #[oai(rename = "apiKey", validator(min_length = 1))]
    pub api_key: ApiKeyText,
    // ISO 3166-1 alpha-2 code, case-insensitive; default `US` when absent (`null` is
    // not a code: 400). (A plain comment: a described `$ref` becomes an `allOf`, which
    // generated clients cannot read; the CountryCode schema states the rule.)
    pub country: Option<CountryField>,
}

impl Example for CodeRequest {
    fn example() -> Self {
        CodeRequest {
            zipcode: ZipCodeValue(Value::String("90210".into())),
            api_key: "pk_your_api_key".into(),
            country: Some(CountryField("US".into())),
        }
    }
}

impl DocumentedBody for CodeRequest {}

/// An object that has property `name`, of `schema` (a branch of a rule over several
/// fields of a request body).
pub(super) fn given(name: &'static str, schema: MetaSchemaRef) -> MetaSchemaRef {
    MetaSchemaRef::Inline(Box::new(MetaSchema {
        required: vec![name],
        properties: vec![(name, schema)],
        ..MetaSchema::new("object")
    }))
}

// ---------------------------------------------------------------------------------------
// The envelope (postal-api.md 2.1).
// ---------------------------------------------------------------------------------------

/// A measured duration, written `"0.142ms"`: milliseconds with three decimals, rounded
/// to the microsecond. Five go out with every billed answer, so the text is written
/// straight to the serializer, with no `String` in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Millis(pub std::time::Duration);

impl Millis {
    /// The text, written at the end of `buf`.
    fn text(self, buf: &mut [u8; 32]) -> &str {
        // Only ASCII digits, '.' and "ms" were written.
        std::str::from_utf8(self.bytes(buf)).unwrap_or("")
    }

    /// The text's bytes (ASCII), written at the end of `buf`: the envelope's writer takes
    /// them without a UTF-8 check, and in 64-bit arithmetic (a `u128` division and a
    /// `from_utf8` were most of the five timings' cost, issue 37).
    pub(crate) fn bytes(self, buf: &mut [u8; 32]) -> &[u8] {
        let d = self.0;
        // `(as_nanos + 500) / 1000`: seconds are whole thousands of microseconds.
        let micros = d
            .as_secs()
            .checked_mul(1_000_000)
            .and_then(|m| m.checked_add(u64::from((d.subsec_nanos() + 500) / 1000)));
        let at = match micros {
            Some(micros) => write_millis(micros, buf),
            None => write_millis(d.as_nanos().saturating_add(500) / 1000, buf),
        };
        &buf[at..]
    }

    /// `"<digits>.<3 digits>ms"` back to the duration.
    fn parse(text: &str) -> Option<Millis> {
        let (whole, fraction) = text.strip_suffix("ms")?.split_once('.')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(whole) || fraction.len() != 3 || !digits(fraction) {
            return None;
        }
        let micros = whole
            .parse::<u64>()
            .ok()?
            .checked_mul(1000)?
            .checked_add(fraction.parse::<u64>().ok()?)?;
        Some(Millis(std::time::Duration::from_micros(micros)))
    }
}

impl std::fmt::Display for Millis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text(&mut [0; 32]))
    }
}

impl Serialize for Millis {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.text(&mut [0; 32]))
    }
}

/// `micros` as `"<milliseconds>.<3 digits>ms"` at the end of `buf`; where it starts.
fn write_millis<T>(micros: T, buf: &mut [u8; 32]) -> usize
where
    T: Copy + PartialEq + From<u16> + std::ops::Div<Output = T> + std::ops::Rem<Output = T>,
    u8: TryFrom<T>,
{
    let mut at = buf.len();
    let mut put = |b: u8| {
        at -= 1;
        buf[at] = b;
    };
    let ten = T::from(10);
    let digit = |n: T| b'0' + u8::try_from(n % ten).unwrap_or(0);
    put(b's');
    put(b'm');
    let (mut whole, fraction) = (micros / T::from(1000), micros % T::from(1000));
    put(digit(fraction));
    put(digit(fraction / ten));
    put(digit(fraction / T::from(100)));
    put(b'.');
    loop {
        put(digit(whole));
        whole = whole / ten;
        if whole == T::from(0) {
            break;
        }
    }
    at
}

/// What a [`Millis`] looks like.
const MILLIS_PATTERN: &str = "^[0-9]+\\.[0-9]{3}ms$";

wrapper_type!(
    Millis,
    "Millis",
    MetaSchemaRef::Inline(Box::new(MetaSchema {
        pattern: Some(MILLIS_PATTERN.to_string()),
        ..MetaSchema::new("string")
    })),
    |_: &mut Registry| {}
);

impl ParseFromJSON for Millis {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        match value {
            Some(Value::String(s)) => Millis::parse(&s).ok_or_else(|| {
                poem_openapi::types::ParseError::custom(format!(
                    "not a duration like \"0.142ms\": {s:?}"
                ))
            }),
            Some(other) => Err(poem_openapi::types::ParseError::expected_type(other)),
            None => Err(poem_openapi::types::ParseError::expected_input()),
        }
    }
}

impl ToJSON for Millis {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(self.to_string()))
    }
}

/// Measured time of each step, as `"<n>ms"`.
#[derive(Debug, Clone, Object, Serialize)]
#[oai(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct Performance {
    /// Finding the account behind the API key.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_time: Option<Millis>,
    /// Checking the rate-limit windows.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit_check_time: Option<Millis>,
    /// Checking the balance and deciding the charge (committed behind the answer, or
    /// before it with `--durable-charges`).
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub balance_time: Option<Millis>,
    /// Answering the question itself.
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processing_time: Option<Millis>,
    /// From the request's arrival to the response.
    pub total_time: Millis,
}

/// Use of one rate-limit window.
#[derive(Debug, Clone, Object, Serialize)]
#[oai(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct WindowUse {
    /// The limit, or null when this window has none.
    #[oai(nullable)]
    pub limit: Option<u64>,
    /// Billed queries in the current window, this request included; null without a limit.
    #[oai(nullable)]
    pub current: Option<u64>,
    /// `current` is at least 80% of `limit`.
    pub approaching_limit: bool,
}

/// Rate-limit status of the account.
#[derive(Debug, Clone, Object, Serialize)]
#[oai(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct RateLimitStatus {
    /// false unless the account enabled rate limits.
    pub enabled: bool,
    pub per_minute: WindowUse,
    pub per_hour: WindowUse,
    pub per_day: WindowUse,
}

/// What every 200 of a billed operation carries beside its answer (postal-api.md 2.1),
/// written into the response object beside the answer's fields.
#[derive(Debug, Clone, Object, Serialize)]
#[oai(rename_all = "camelCase")]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    /// Balance in USD, after this request's charge when the operation is billed. Absent
    /// from the answers to a publishable key: a page's visitors do not see the account's
    /// balance (docs/browser.md).
    #[oai(skip_serializing_if_is_none)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub balance: Option<f64>,
    pub performance: Performance,
    pub rate_limit: RateLimitStatus,
    /// Whether the request was charged (not written: the `RateLimit` headers go on billed
    /// answers only).
    #[oai(skip)]
    #[serde(skip)]
    pub billed: bool,
}

impl Envelope {
    /// The envelope's members as they end every 200's object, after the answer's own:
    /// `"balance":..,"performance":{..},"rateLimit":{..}`, written by hand (`JsonBody`).
    /// Through serde they were a flattened map whose 21 keys and 5 timings serde_json
    /// scanned for escapes one by one, about a sixth of a billed lookup's instructions
    /// (callgrind, issue 37). The names are those of the derived `Object` (the test
    /// `replies_are_the_json_of_the_documented_type` holds the two together); none needs
    /// an escape, nor does a timing's text.
    pub fn write_members(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        if let Some(balance) = self.balance {
            out.extend_from_slice(b"\"balance\":");
            serde_json::to_writer(&mut *out, &balance)?;
            out.push(b',');
        }
        out.extend_from_slice(b"\"performance\":{");
        let p = &self.performance;
        let timings = [
            ("authTime", p.auth_time),
            ("rateLimitCheckTime", p.rate_limit_check_time),
            ("balanceTime", p.balance_time),
            ("processingTime", p.processing_time),
            ("totalTime", Some(p.total_time)),
        ];
        let mut first = true;
        for (name, timing) in timings {
            let Some(timing) = timing else { continue };
            if !first {
                out.push(b',');
            }
            first = false;
            out.push(b'"');
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":\"");
            out.extend_from_slice(timing.bytes(&mut [0; 32]));
            out.push(b'"');
        }
        let limits = &self.rate_limit;
        out.extend_from_slice(b"},\"rateLimit\":{\"enabled\":");
        out.extend_from_slice(json_bool(limits.enabled));
        let windows = [
            ("perMinute", &limits.per_minute),
            ("perHour", &limits.per_hour),
            ("perDay", &limits.per_day),
        ];
        for (name, window) in windows {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":{\"limit\":");
            serde_json::to_writer(&mut *out, &window.limit)?;
            out.extend_from_slice(b",\"current\":");
            serde_json::to_writer(&mut *out, &window.current)?;
            out.extend_from_slice(b",\"approachingLimit\":");
            out.extend_from_slice(json_bool(window.approaching_limit));
            out.push(b'}');
        }
        out.push(b'}');
        Ok(())
    }
}

fn json_bool(value: bool) -> &'static [u8] {
    if value { b"true" } else { b"false" }
}

// ---------------------------------------------------------------------------------------
// Examples of the envelope (the OpenAPI document's, from the real data).
// ---------------------------------------------------------------------------------------

pub(in crate::api) fn example_performance() -> Performance {
    Performance {
        auth_time: Some(Millis(std::time::Duration::from_micros(11))),
        rate_limit_check_time: Some(Millis(std::time::Duration::from_micros(6))),
        balance_time: Some(Millis(std::time::Duration::from_micros(212))),
        processing_time: Some(Millis(std::time::Duration::from_micros(14))),
        total_time: Millis(std::time::Duration::from_micros(262)),
    }
}

pub(in crate::api) fn example_envelope(balance: f64) -> Envelope {
    Envelope {
        balance: Some(balance),
        performance: example_performance(),
        rate_limit: example_rate_limit(),
        billed: true,
    }
}

/// The envelope of a free operation (`totalTime` only).
pub(in crate::api) fn example_free_envelope() -> Envelope {
    Envelope {
        balance: Some(4.999972),
        performance: Performance {
            auth_time: None,
            rate_limit_check_time: None,
            balance_time: None,
            processing_time: None,
            total_time: Millis(std::time::Duration::from_micros(105)),
        },
        rate_limit: example_rate_limit(),
        billed: false,
    }
}

pub(in crate::api) fn example_rate_limit() -> RateLimitStatus {
    let off = || WindowUse {
        limit: None,
        current: None,
        approaching_limit: false,
    };
    RateLimitStatus {
        enabled: false,
        per_minute: off(),
        per_hour: off(),
        per_day: off(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `write_members` writes the bytes serde writes of the derived `Serialize`, without
    /// the braces: every timing, none, a balance or none, windows with limits or none,
    /// a balance serde_json writes in exponent form.
    #[test]
    fn the_envelope_is_written_as_serde_writes_it() {
        let mut limited = example_envelope(1e-7);
        limited.rate_limit.enabled = true;
        limited.rate_limit.per_minute = WindowUse {
            limit: Some(60),
            current: Some(59),
            approaching_limit: true,
        };
        limited.rate_limit.per_day = WindowUse {
            limit: Some(u64::MAX),
            current: Some(0),
            approaching_limit: false,
        };
        let mut unbalanced = example_envelope(0.0);
        unbalanced.balance = None;
        unbalanced.performance.auth_time = Some(Millis(std::time::Duration::from_secs(12)));
        for envelope in [
            example_envelope(4.999916),
            example_free_envelope(),
            limited,
            unbalanced,
        ] {
            let mut members = Vec::new();
            envelope.write_members(&mut members).unwrap();
            let written = format!("{{{}}}", String::from_utf8(members).unwrap());
            assert_eq!(written, serde_json::to_string(&envelope).unwrap());
        }
    }
}
