//! The body of every 200: the response type serialized straight to bytes by serde.
//!
//! poem-openapi's `Json<T>` first converts the answer to a `serde_json::Value` tree (a
//! new `String` for every key of a `BTreeMap`, every nested object too), then writes the
//! tree out and drops it. Under `bench/api.sh` that was a few per cent of the server's
//! CPU for a lookup, most of it in the allocator (perf, docs/money.md). [`Reply`] keeps
//! the OpenAPI side of `Json<T>` (the schema comes from `T`'s derived `Object`) and
//! writes `T` with its `serde::Serialize` instead. Both derives name the fields the same
//! way; `tests::replies_are_the_json_of_the_documented_type` checks every response
//! example both ways.

use std::time::SystemTime;

use poem::http::HeaderValue;
use poem::{IntoResponse, Response};
use poem_openapi::ApiResponse;
use poem_openapi::payload::{Json, Payload};
use poem_openapi::registry::{MetaHeader, MetaResponses, MetaSchemaRef, Registry};
use poem_openapi::types::{ToJSON, Type};
use serde::Serialize;

use super::types::Envelope;
use crate::domain::word::{HIGH, below, splat, word};

/// A JSON 200 of type `T`, with the `RateLimit` headers of its envelope; with `CACHED`
/// (`Cached<T>`), also `Cache-Control: private, max-age=...` (the GET forms' answers,
/// which depend only on the dataset: docs/browser.md).
pub struct Reply<T, const CACHED: bool = false>(pub T);

/// A `Reply` a browser may keep.
pub type Cached<T> = Reply<T, true>;

/// How long a browser may keep a GET answer: an hour (the dataset changes by import).
pub const CACHE_CONTROL: &str = "private, max-age=3600";

/// A response that carries the envelope (every 200 of the API does).
pub trait Enveloped {
    fn envelope(&self) -> &Envelope;
}

/// `impl Enveloped` for response types whose envelope is their field `envelope` (each
/// operation's file names its responses).
macro_rules! enveloped {
    ($($response:ty),* $(,)?) => {
        $(impl $crate::api::reply::Enveloped for $response {
            fn envelope(&self) -> &$crate::api::types::Envelope {
                &self.envelope
            }
        })*
    };
}
pub(crate) use enveloped;

/// How a 200's body becomes bytes: the answer's own members by serde_json's writer, then
/// the envelope's by hand ([`Envelope::write_members`]; each answer type skips its
/// `envelope` for serde and flattens it for the document). One type writes its members
/// by hand too (`/api/validate-bulk`'s answer: `BulkAnswer`, tested against the bytes of
/// the documented type).
pub trait JsonBody {
    fn json_bytes(&self) -> serde_json::Result<Vec<u8>>;
}

impl<T: Serialize + Enveloped> JsonBody for T {
    fn json_bytes(&self) -> serde_json::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(512);
        serde_json::to_writer(&mut out, self)?;
        // An answer type must skip its envelope for serde (else it would go out twice).
        debug_assert!(
            !out.windows(14).any(|w| w == b"\"performance\":"),
            "an answer type serializes its envelope: #[serde(skip)] it"
        );
        // `{...}` open again for the envelope's members.
        if out.pop() != Some(b'}') {
            return Err(serde::ser::Error::custom("an answer is a JSON object"));
        }
        if out.len() > 1 {
            out.push(b',');
        }
        self.envelope().write_members(&mut out)?;
        out.push(b'}');
        Ok(out)
    }
}

/// `text` as a JSON string, the bytes serde_json writes: as it is between quotes when
/// nothing in it needs an escape (serde_json escapes only `"`, `\\` and the bytes below
/// 0x20), else serde_json's own escaping. The scan is a byte test; serde_json's
/// `format_escaped_str` was more than half of writing a validate-bulk answer (issue 37).
pub(crate) fn json_string(out: &mut Vec<u8>, text: &str) -> serde_json::Result<()> {
    json_utf8(out, text.as_bytes())
}

/// [`json_string`] of a text's bytes (UTF-8: checked only when an escape is needed).
pub(crate) fn json_utf8(out: &mut Vec<u8>, text: &[u8]) -> serde_json::Result<()> {
    debug_assert!(
        std::str::from_utf8(text).is_ok(),
        "json_utf8 of bytes not UTF-8"
    );
    if (1..=8).contains(&text.len()) {
        // The common case (a code, a country, a normalised code): tested and copied as one
        // word. The byte loop and `memcpy` were about 110 instructions a string (issue 37).
        let word = word(text);
        if !any_escaped(word, text.len()) {
            let end = out.len() + 1 + text.len();
            out.reserve(10);
            out.push(b'"');
            out.extend_from_slice(&word.to_le_bytes());
            out.truncate(end);
            out.push(b'"');
            return Ok(());
        }
    }
    if text.iter().all(|&b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text);
        out.push(b'"');
        Ok(())
    } else {
        let text = std::str::from_utf8(text).map_err(serde::ser::Error::custom)?;
        serde_json::to_writer(out, text)
    }
}

/// Whether any of the first `len` (1 to 8) bytes of `word` (little-endian) is one that
/// serde_json escapes: below 0x20, `"` or `\\`. A byte from 0x80 (UTF-8) is none.
fn any_escaped(word: u64, len: usize) -> bool {
    let flags = below(word, 0x20) | below(word ^ splat(b'"'), 1) | below(word ^ splat(b'\\'), 1);
    // The padding's bytes are above the text's, so their flags are left out whole.
    flags & (HIGH >> (64 - 8 * len)) != 0
}

/// `T` as JSON (the contract's 500 if it cannot be written), and
/// `RateLimit-Policy`/`RateLimit` when its envelope has them.
fn json_response<T: JsonBody + Enveloped + Send>(body: T) -> Response {
    let headers = body.envelope().rate_limit_headers(SystemTime::now);
    let mut response = match body.json_bytes() {
        Ok(data) => Response::builder()
            .header(
                poem::http::header::CONTENT_TYPE,
                "application/json; charset=utf-8",
            )
            .body(data),
        Err(err) => {
            tracing::error!("internal error: writing an answer: {err}");
            return super::json_error(
                poem::http::StatusCode::INTERNAL_SERVER_ERROR,
                "Internal server error",
            );
        }
    };
    set_rate_limit_headers(&mut response, headers);
    response
}

/// `RateLimit-Policy` and `RateLimit` (`Envelope::rate_limit_headers`), when there are.
pub(super) fn set_rate_limit_headers(response: &mut Response, headers: Option<(String, String)>) {
    if let Some((policy, state)) = headers
        && let (Ok(policy), Ok(state)) =
            (HeaderValue::try_from(policy), HeaderValue::try_from(state))
    {
        response.headers_mut().insert("ratelimit-policy", policy);
        response.headers_mut().insert("ratelimit", state);
    }
}

impl<T: Type, const CACHED: bool> Payload for Reply<T, CACHED> {
    const CONTENT_TYPE: &'static str = Json::<T>::CONTENT_TYPE;

    fn check_content_type(content_type: &str) -> bool {
        Json::<T>::check_content_type(content_type)
    }

    fn schema_ref() -> MetaSchemaRef {
        T::schema_ref()
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }
}

impl<T: JsonBody + Enveloped + Send, const CACHED: bool> IntoResponse for Reply<T, CACHED> {
    fn into_response(self) -> Response {
        let mut response = json_response(self.0);
        if CACHED {
            response.headers_mut().insert(
                poem::http::header::CACHE_CONTROL,
                HeaderValue::from_static(CACHE_CONTROL),
            );
        }
        response
    }
}

/// The `RateLimit` headers in the document, on the 200 of `meta`.
fn with_rate_limit_headers(mut meta: MetaResponses) -> MetaResponses {
    let header = |name: &str, description: &str| MetaHeader {
        name: name.to_string(),
        description: Some(description.to_string()),
        required: false,
        deprecated: false,
        schema: String::schema_ref(),
    };
    for response in &mut meta.responses {
        response.headers.push(header(
            "RateLimit-Policy",
            "Billed answers of an account with window limits (IETF httpapi draft): each limited window, e.g. `\"minute\";q=60;w=60, \"day\";q=5000;w=86400` (q: limit, w: seconds).",
        ));
        response.headers.push(header(
            "RateLimit",
            "With RateLimit-Policy: each window after this request, e.g. `\"minute\";r=59;t=42` (r: queries left, t: seconds to the window's end).",
        ));
    }
    meta
}
impl<T: ToJSON + JsonBody + Enveloped + Send, const CACHED: bool> ApiResponse for Reply<T, CACHED> {
    fn meta() -> MetaResponses {
        let mut meta = with_rate_limit_headers(<Json<T> as ApiResponse>::meta());
        for response in meta.responses.iter_mut().filter(|_| CACHED) {
            response.headers.push(MetaHeader {
                name: "Cache-Control".to_string(),
                description: Some(format!(
                    "`{CACHE_CONTROL}`: the answer depends only on the dataset (its balance and rate limit are those of the moment it was answered)."
                )),
                required: true,
                deprecated: false,
                schema: String::schema_ref(),
            });
        }
        meta
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }
}

#[cfg(test)]
mod tests {
    use poem_openapi::types::{Example, ToJSON};

    use super::JsonBody;

    use crate::api::routes::about::AboutResponse;
    use crate::api::routes::autocomplete::AutocompleteResponse;
    use crate::api::routes::city::CityResponse;
    use crate::api::routes::countries::CountriesResponse;
    use crate::api::routes::dataset::DatasetResponse;
    use crate::api::routes::distance::DistanceResponse;
    use crate::api::routes::lookup::LookupResponse;
    use crate::api::routes::metacode::MetaResponse;
    use crate::api::routes::nearest::NearestResponse;
    use crate::api::routes::nearest_bulk::NearestBulkResponse;
    use crate::api::routes::places::PlacesResponse;
    use crate::api::routes::radius::RadiusResponse;
    use crate::api::routes::suggest::SuggestResponse;
    use crate::api::routes::validate::ValidateResponse;
    use crate::api::routes::validate_bulk::BulkResponse;
    use crate::api::routes::verify::VerifyResponse;
    use crate::api::routes::verify_bulk::VerifyBulkResponse;

    /// serde writes the JSON the OpenAPI document describes (the `ToJSON` of the derived
    /// `Object`), field for field, on the example of each response.
    fn same<T: Example + ToJSON + JsonBody>() {
        let example = T::example();
        let documented = example.to_json().expect("an object");
        let bytes = example.json_bytes().unwrap();
        let written: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(written, documented, "{}", T::name());
        // The envelope once (a type whose serde still wrote it would repeat its members).
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(text.matches("\"performance\":").count(), 1, "{text}");
    }

    #[test]
    fn replies_are_the_json_of_the_documented_type() {
        same::<LookupResponse>();
        same::<CityResponse>();
        same::<MetaResponse>();
        same::<ValidateResponse>();
        same::<BulkResponse>();
        same::<AboutResponse>();
        same::<NearestResponse>();
        same::<RadiusResponse>();
        same::<DistanceResponse>();
        same::<AutocompleteResponse>();
        same::<CountriesResponse>();
        same::<NearestBulkResponse>();
        same::<SuggestResponse>();
        same::<PlacesResponse>();
        same::<VerifyResponse>();
        same::<VerifyBulkResponse>();
        same::<DatasetResponse>();
    }

    /// The word test says no for a short text without escapes (UTF-8 bytes included, such
    /// as C2 A2, C4 A0 and DC 9C: an escaped byte plus 0x80), and yes for each escaped
    /// byte at each place: so that such texts take the word path, not only get the same
    /// bytes.
    #[test]
    fn the_word_test_finds_exactly_the_escaped_bytes() {
        use crate::domain::word::word;
        for text in [
            "90210", "US", "é", "😀", "¢", "Ġ", "ܜ", "\u{7f}", "SW1A 1AA", "x😀é",
        ] {
            assert!(
                !super::any_escaped(word(text.as_bytes()), text.len()),
                "{text:?}"
            );
        }
        for len in 1..=8 {
            for at in 0..len {
                for escaped in [0, 0x1f, b'"', b'\\'] {
                    let mut text = vec![b'a'; len];
                    text[at] = escaped;
                    assert!(super::any_escaped(word(&text), len), "{text:?}");
                }
            }
        }
    }

    /// `json_utf8` writes serde_json's bytes for every text of up to three of these
    /// characters (each edge of the word test: the escaped ones, their neighbours, UTF-8
    /// of two and four bytes, a NUL) between fillers of 0 to 8 letters.
    #[test]
    fn json_utf8_writes_the_bytes_serde_json_writes() {
        let symbols = [
            "\0", "\u{1f}", " ", "!", "\"", "#", "[", "\\", "]", "\u{7f}", "é", "😀", "A",
        ];
        let mut texts = vec![String::new()];
        for _ in 0..3 {
            let longer: Vec<String> = texts
                .iter()
                .flat_map(|t| symbols.iter().map(move |s| format!("{t}{s}")))
                .collect();
            texts.extend(longer);
        }
        for text in &texts {
            for (before, after) in [(0, 0), (1, 0), (0, 5), (4, 3), (8, 0)] {
                let text = format!("{}{text}{}", "x".repeat(before), "y".repeat(after));
                let mut out = b"[".to_vec();
                super::json_utf8(&mut out, text.as_bytes()).unwrap();
                let mut expected = b"[".to_vec();
                serde_json::to_writer(&mut expected, &text).unwrap();
                assert_eq!(out, expected, "{text:?}");
            }
        }
    }
}
