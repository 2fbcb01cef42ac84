//! The GET forms of the reads a page makes on every keystroke: `/api/lookup`,
//! `/api/places`, `/api/city` and `/api/suggest` take their fields as query parameters
//! and the key as `key` (or a header). A GET without custom headers is a CORS "simple
//! request": no preflight, one round trip. Each GET handler sits beside its POST (one
//! OpenAPI path holds both methods), reads its query as the body it stands for
//! (`ContractJson::from_query`) and answers through the POST's own function, on the one
//! billed path; the answer may be kept by the browser (`reply::Cached`).

use poem::Request;
use poem_openapi::param::Query;
use poem_openapi::registry::Registry;
use serde_json::Value;

use super::contract::ContractJson;
use super::types::{CodeRequest, CountryField};

/// The body a GET of one code stands for (`/api/lookup`, `/api/places`).
pub(super) fn code_body(
    request: &Request,
    zipcode: Query<Required>,
    country: Query<Country>,
    key: Query<Required>,
) -> ContractJson<CodeRequest> {
    ContractJson::from_query(request, code_fields(zipcode.0.0, country.0.0, key.0.0))
}

/// The fields of the body a GET of one code stands for, from its query parameters (each
/// the first of its name, absent or as sent): `code_body`, and `api::hot` for the same
/// GET answered before poem's routing.
pub(super) fn code_fields(
    zipcode: Option<String>,
    country: Option<String>,
    key: Option<String>,
) -> [(&'static str, Option<Value>); 3] {
    [
        ("zipcode", zipcode.map(Value::String)),
        ("country", country.map(Value::String)),
        ("apiKey", key.map(Value::String)),
    ]
}

/// A query parameter as the text field of a body.
pub(super) fn text(value: Query<impl Into<Option<String>>>) -> Option<Value> {
    value.0.into().map(Value::String)
}

/// The query parameters of the GET forms: documented as the body's fields are (required,
/// non-blank, the country's enum...), read leniently (absent or empty is `None`) so that
/// the operation's own parse answers a bad one with the contract's 400 text, as for a body.
macro_rules! query_param {
    ($ty:ident, $required:expr, $name:expr, $schema:expr, $register:expr) => {
        pub struct $ty(pub Option<String>);

        impl poem_openapi::types::Type for $ty {
            const IS_REQUIRED: bool = $required;
            type RawValueType = Self;
            type RawElementValueType = Self;

            fn name() -> std::borrow::Cow<'static, str> {
                $name.into()
            }

            fn schema_ref() -> poem_openapi::registry::MetaSchemaRef {
                $schema
            }

            fn register(registry: &mut poem_openapi::registry::Registry) {
                ($register)(registry)
            }

            fn as_raw_value(&self) -> Option<&Self> {
                Some(self)
            }

            fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a Self> + 'a> {
                Box::new(self.as_raw_value().into_iter())
            }
        }

        impl poem_openapi::types::ParseFromParameter for $ty {
            fn parse_from_parameter(value: &str) -> poem_openapi::types::ParseResult<Self> {
                Ok($ty(Some(value.to_string())))
            }

            fn parse_from_parameters<I: IntoIterator<Item = A>, A: AsRef<str>>(
                iter: I,
            ) -> poem_openapi::types::ParseResult<Self> {
                let first = iter.into_iter().next();
                Ok($ty(first.map(|v| v.as_ref().to_string())))
            }
        }

        impl From<$ty> for Option<String> {
            fn from(param: $ty) -> Option<String> {
                param.0
            }
        }
    };
}
pub(super) use query_param;

query_param!(
    Required,
    true,
    "non_blank_string",
    super::types::non_blank_string(),
    |_: &mut Registry| {}
);
query_param!(
    RequiredFreeText,
    true,
    "free_text_string",
    super::types::free_text_string(),
    |_: &mut Registry| {}
);
query_param!(
    FreeText,
    false,
    "bounded_string",
    super::types::bounded_string(),
    |_: &mut Registry| {}
);
query_param!(
    Country,
    false,
    "country_code",
    CountryField::schema_ref(),
    CountryField::register
);
