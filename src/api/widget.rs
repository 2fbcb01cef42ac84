//! `GET /widget.js`: the checkout widget (`widget.js`, docs/browser.md), a page's script
//! with no dependencies that calls `/api/places` and `/api/verify` with a publishable key.
//! Served from the binary: the version a page loads is the server's own.
//!
//! Also at a versioned, immutable URL, `/widget.<16 hex of its SHA-256>.js`, whose
//! Subresource Integrity value (`sha384-…`) a page puts in its `<script integrity>`: a
//! page that pins it runs these bytes or nothing. `postal serve` logs both; docs/browser.md
//! shows them (a test checks they are the served script's). Both answers carry `nosniff`
//! and allow any origin to load them (`Access-Control-Allow-Origin: *`, needed by
//! `crossorigin="anonymous"`, and `Cross-Origin-Resource-Policy: cross-origin`).

use std::sync::LazyLock;

use base64::Engine;
use poem::http::{HeaderValue, StatusCode, header};
use poem::{Response, handler};
use sha2::{Digest, Sha256, Sha384};

/// The script, compiled in.
pub const WIDGET_JS: &str = include_str!("widget.js");

/// `/widget.<16 hex of its SHA-256>.js`.
pub fn versioned_path() -> &'static str {
    static PATH: LazyLock<String> = LazyLock::new(|| {
        let digest = hex::encode(Sha256::digest(WIDGET_JS.as_bytes()));
        format!("/widget.{}.js", &digest[..16])
    });
    &PATH
}

/// The script's Subresource Integrity value: `sha384-` and the base64 of its SHA-384.
pub fn integrity() -> &'static str {
    static SRI: LazyLock<String> = LazyLock::new(|| {
        let digest = Sha384::digest(WIDGET_JS.as_bytes());
        format!(
            "sha384-{}",
            base64::engine::general_purpose::STANDARD.encode(digest)
        )
    });
    &SRI
}

fn script(cache: &'static str) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .content_type("text/javascript; charset=utf-8")
        .header(header::CACHE_CONTROL, cache)
        .header(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        )
        .header(header::ACCESS_CONTROL_ALLOW_ORIGIN, "*")
        .header("Cross-Origin-Resource-Policy", "cross-origin")
        .body(WIDGET_JS)
}

/// `GET /widget.js`: the current script, cached an hour.
#[handler]
pub(super) fn widget() -> Response {
    script("public, max-age=3600")
}

/// `GET /widget.<hash>.js`: these bytes for ever.
#[handler]
pub(super) fn widget_immutable() -> Response {
    script("public, max-age=31536000, immutable")
}
