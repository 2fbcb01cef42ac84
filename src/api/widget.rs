//! `GET /widget.js`: the checkout widget (`widget.js`, docs/browser.md), a page's script
//! with no dependencies that calls `/api/places` and `/api/verify` with a publishable key.
//! Served from the binary: the version a page loads is the server's own.

use poem::http::{StatusCode, header};
use poem::{Response, handler};

/// The script, compiled in.
pub const WIDGET_JS: &str = include_str!("widget.js");

#[handler]
pub(super) fn widget() -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .content_type("text/javascript; charset=utf-8")
        .header(header::CACHE_CONTROL, "public, max-age=3600")
        .body(WIDGET_JS)
}
