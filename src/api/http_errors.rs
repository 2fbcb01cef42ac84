//! Errors raised by routing rather than by a handler (unknown path, wrong method, a body
//! poem refuses) as the contract's JSON, and `405` with the `Allow` header RFC 9110 asks
//! for. Errors of the HTTP framing itself (bad request line, 413 before the body, 414,
//! 431) are answered in `server`.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use poem::http::{HeaderValue, Method, StatusCode, header};
use poem::{Endpoint, IntoResponse, Request, Response};
use poem_openapi::OpenApi;

use super::Apis;
use super::{contract, json_error};

/// Wraps the whole application (`app`): every error leaves as `{"error": ...}`.
pub(super) async fn json_errors<E: Endpoint>(
    app: Arc<E>,
    request: Request,
) -> poem::Result<Response> {
    let path = request.uri().path().to_string();
    // HEAD of an API path would run the operation (and charge it) for a head alone: the
    // API answers its own methods only.
    let mut response = if request.method() == Method::HEAD && path.starts_with("/api/") {
        json_error(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed")
    } else {
        match app.call(request).await {
            Ok(output) => output.into_response(),
            Err(err) if err.is_from_response() => err.into_response(),
            Err(err) => {
                let text = match err.status() {
                    StatusCode::NOT_FOUND => "Not found",
                    StatusCode::METHOD_NOT_ALLOWED => "Method not allowed",
                    StatusCode::PAYLOAD_TOO_LARGE => "Request body too large",
                    StatusCode::BAD_REQUEST => contract::INVALID_JSON,
                    _ => "Internal server error",
                };
                let status = match err.status() {
                    s @ (StatusCode::NOT_FOUND
                    | StatusCode::METHOD_NOT_ALLOWED
                    | StatusCode::PAYLOAD_TOO_LARGE
                    | StatusCode::BAD_REQUEST) => s,
                    _ => StatusCode::INTERNAL_SERVER_ERROR,
                };
                json_error(status, text)
            }
        }
    };
    if response.status() == StatusCode::METHOD_NOT_ALLOWED
        && let Some(allow) = allowed(&path)
    {
        response.headers_mut().insert(header::ALLOW, allow.clone());
    }
    Ok(response)
}

/// The `Allow` value of `path`: its own, or that of the path template it fits
/// (`/account/api/keys/{key_id}`: a `{...}` segment fits any one segment).
fn allowed(path: &str) -> Option<&'static HeaderValue> {
    let methods = allowed_methods();
    methods.get(path).or_else(|| {
        let segments: Vec<&str> = path.split('/').collect();
        methods.iter().find_map(|(template, allow)| {
            let pattern: Vec<&str> = template.split('/').collect();
            let fits = template.contains('{')
                && pattern.len() == segments.len()
                && pattern.iter().zip(&segments).all(|(p, s)| {
                    p == s || (p.starts_with('{') && p.ends_with('}') && !s.is_empty())
                });
            fits.then_some(allow)
        })
    })
}

/// Each path of the OpenAPI document and its methods, as an `Allow` value (`POST`).
fn allowed_methods() -> &'static HashMap<String, HeaderValue> {
    static ALLOWED: OnceLock<HashMap<String, HeaderValue>> = OnceLock::new();
    ALLOWED.get_or_init(|| {
        let get = HeaderValue::from_static("GET");
        // A path may have operations in several API structs (the GET forms: `get.rs`).
        let mut methods: HashMap<String, Vec<String>> = HashMap::new();
        for path in <Apis as OpenApi>::meta()
            .into_iter()
            .flat_map(|api| api.paths)
        {
            let of_path = methods.entry(path.path).or_default();
            of_path.extend(path.operations.iter().map(|op| op.method.to_string()));
        }
        methods
            .into_iter()
            .filter_map(|(path, mut methods)| {
                methods.sort();
                let value = HeaderValue::from_str(&methods.join(", ")).ok()?;
                Some((path, value))
            })
            // The operator's routes and the document, outside the OpenAPI paths.
            .chain(
                [
                    "/healthz",
                    "/readyz",
                    "/metrics",
                    "/openapi.json",
                    "/widget.js",
                    "/account",
                    "/account/app.js",
                    "/account/app.css",
                    "/account/signin/{name}",
                    "/account/callback/{name}",
                ]
                .map(|path| (path.to_string(), get.clone())),
            )
            .chain([
                (
                    "/account/stripe/webhook".to_string(),
                    HeaderValue::from_static("POST"),
                ),
                (
                    "/account/link".to_string(),
                    HeaderValue::from_static("GET, POST"),
                ),
                (super::widget::versioned_path().to_string(), get.clone()),
            ])
            .collect()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn api_paths_allow_post_the_form_reads_get_too_and_the_operator_routes_get() {
        let allowed = super::allowed_methods();
        // 7 paths of the contract, 6 of geography, suggest, places, verify, verify-bulk,
        // dataset; 5 GET routes and the versioned widget; the dashboard's 18 API paths, 6
        // pages and Stripe's webhook.
        assert_eq!(allowed.len(), 49, "{allowed:?}");
        for path in [
            "/api/validate-bulk",
            "/api/nearest",
            "/api/verify",
            "/api/verify-bulk",
            "/api/dataset",
        ] {
            assert_eq!(allowed[path], "POST");
        }
        for path in ["/api/lookup", "/api/places", "/api/city", "/api/suggest"] {
            assert_eq!(allowed[path], "GET, POST");
        }
        for path in [
            "/healthz",
            "/readyz",
            "/metrics",
            "/openapi.json",
            "/widget.js",
        ] {
            assert_eq!(allowed[path], "GET");
        }
        let allowed = |path| super::allowed(path).map(|v| v.to_str().unwrap());
        assert_eq!(allowed("/account/api/keys"), Some("GET, POST"));
        assert_eq!(allowed("/account/api/keys/key_1"), Some("DELETE, PATCH"));
        assert_eq!(allowed("/account/api/keys/key_1/roll"), Some("POST"));
        assert_eq!(allowed("/account/api/alerts"), Some("GET, PUT"));
        assert_eq!(allowed("/account/api/alerts/test"), Some("POST"));
        assert_eq!(allowed("/account/signin/google"), Some("GET"));
        assert_eq!(allowed("/account/api/keys/key_1/other"), None);
        assert_eq!(allowed("/account/api/keys/"), None);
    }
}
