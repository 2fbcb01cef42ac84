//! The GET forms of the reads a page makes on every keystroke: `/api/lookup`,
//! `/api/places`, `/api/city` and `/api/suggest` take their fields as query parameters
//! and the key as `key` (or a header). A GET without custom headers is a CORS "simple
//! request": no preflight, one round trip. Each GET handler sits beside its POST (one
//! OpenAPI path holds both methods), reads its query as the body it stands for
//! (`ContractJson::from_query`) and answers through the POST's own function, on the one
//! billed path; the answer may be kept by the browser (`reply::Cached`).

use poem_openapi::param::Query;
use serde_json::Value;

/// A query parameter as the text field of a body.
pub(super) fn text(value: Query<Option<String>>) -> Option<Value> {
    value.0.map(Value::String)
}
