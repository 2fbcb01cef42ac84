//! The dashboard's page: `GET /account` is the sign-in page (every configured provider)
//! or, signed in, the dashboard, a client of `/account/api/*` (`app.js`, served by this
//! binary: nothing from a CDN, it works offline). Every answer under `/account` carries
//! the security headers (`SecurityHeaders`): a CSP without inline scripts,
//! `frame-ancestors 'none'`, `nosniff`, `no-referrer`.

use std::sync::Arc;

use poem::http::{HeaderValue, StatusCode, header};
use poem::web::Data;
use poem::{Endpoint, IntoResponse, Middleware, Request, Response, handler};

use super::Dashboard;
use crate::accounts::Provider;

const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("app.css");

/// Escapes text for HTML.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

pub(super) fn html(status: StatusCode, title: &str, body: &str) -> Response {
    let page = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · postal</title><link rel=\"stylesheet\" href=\"/account/app.css\"></head>\
         <body><main>{body}</main></body></html>\n",
        escape(title)
    );
    Response::builder()
        .status(status)
        .content_type("text/html; charset=utf-8")
        .header(header::CACHE_CONTROL, "no-store")
        .body(page)
}

/// A page saying what happened (a failed sign-in), with a way back.
pub(super) fn message(status: StatusCode, title: &str, text: &str) -> Response {
    html(
        status,
        title,
        &format!(
            "<h1>{}</h1><p role=\"alert\">{}</p><p><a href=\"/account\">Back to sign-in</a></p>",
            escape(title),
            escape(text)
        ),
    )
}

/// `GET /account`: the sign-in page, or the dashboard when signed in.
#[handler]
pub(super) async fn index(req: &Request, dash: Data<&Arc<Dashboard>>) -> Response {
    // A request without a cookie of a session id's shape reads no store (`session`), and
    // the providers are held in memory (`Dashboard::providers`).
    if dash.session(req).await.is_ok() {
        return html(
            StatusCode::OK,
            "Your account",
            "<h1>Your account</h1>\
             <div id=\"app\" aria-live=\"polite\"><p>Loading…</p></div>\
             <script src=\"/account/app.js\" defer></script>",
        );
    }
    let providers = match dash.providers().await {
        Ok(providers) => providers,
        Err(e) => return message(StatusCode::INTERNAL_SERVER_ERROR, "Sign in", e.text()),
    };
    let body = if providers.is_empty() {
        format!(
            "<h1>Sign in</h1><p>No sign-in provider is configured on this server yet.</p>\
             <p>The operator adds one with <code>postal provider add NAME --issuer URL \
             --client-id ID --client-secret-file PATH</code>, registering \
             <code>{}/account/callback/NAME</code> as its redirect URI (docs/account.md).</p>",
            escape(&dash.public_url)
        )
    } else {
        let buttons: String = providers
            .iter()
            .map(|p| {
                format!(
                    "<li><a class=\"button\" href=\"/account/signin/{}\">Sign in with {}</a></li>",
                    escape(p.name.as_str()),
                    escape(&label(p, &providers))
                )
            })
            .collect();
        format!(
            "<h1>Sign in</h1><p>Sign in to create API keys, set your limits and follow \
             your usage. A new account starts with 1,000 free queries, no payment method \
             needed.</p><ul class=\"providers\">{buttons}</ul>"
        )
    };
    html(StatusCode::OK, "Sign in", &body)
}

/// What the sign-in page calls `provider`: the name customers know (GitHub, Google,
/// Microsoft) for those kinds, followed by the operator's name for it when another provider
/// of the page has the same; an OpenID provider of any issuer by its name.
fn label(provider: &Provider, all: &[Provider]) -> String {
    match provider.kind.label() {
        None => provider.name.to_string(),
        Some(known) if all.iter().filter(|p| p.kind == provider.kind).count() > 1 => {
            format!("{known} ({})", provider.name)
        }
        Some(known) => known.to_owned(),
    }
}

#[handler]
pub(super) fn script() -> Response {
    Response::builder()
        .content_type("text/javascript; charset=utf-8")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(SCRIPT)
}

#[handler]
pub(super) fn style() -> Response {
    Response::builder()
        .content_type("text/css; charset=utf-8")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(STYLE)
}

/// The security headers of every HTML page: every answer under `/account` (and
/// `no-store`, unless the answer says otherwise) and Swagger UI under `/docs`, each with
/// its CSP; `nosniff`, `no-referrer`, `X-Frame-Options: DENY`. The middleware wraps the
/// whole application and acts on those paths only (the widget's script sets its own).
pub(crate) struct SecurityHeaders;

impl<E: Endpoint> Middleware<E> for SecurityHeaders {
    type Output = SecurityHeadersEndpoint<E>;

    fn transform(&self, ep: E) -> Self::Output {
        SecurityHeadersEndpoint(ep)
    }
}

pub(crate) struct SecurityHeadersEndpoint<E>(E);

/// The dashboard's pages: nothing but this server's own script, style and calls.
const ACCOUNT_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; \
     frame-ancestors 'none'";
/// Swagger UI (`/docs`): its page is poem-openapi's, with the bundle inline, so scripts
/// are not restricted; it is never framed, never posts a form elsewhere, loads no plugin.
const DOCS_POLICY: &str =
    "frame-ancestors 'none'; base-uri 'none'; object-src 'none'; form-action 'self'";

impl<E: Endpoint> Endpoint for SecurityHeadersEndpoint<E> {
    type Output = Response;

    async fn call(&self, req: Request) -> poem::Result<Response> {
        let path = req.uri().path();
        let policy = if path == "/account" || path.starts_with("/account/") {
            ACCOUNT_POLICY
        } else if path == "/docs" || path.starts_with("/docs/") {
            DOCS_POLICY
        } else {
            return self.0.call(req).await.map(IntoResponse::into_response);
        };
        let mut response = match self.0.call(req).await {
            Ok(output) => output.into_response(),
            Err(e) => e.into_response(),
        };
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(policy),
        );
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        // A page that posts a form to this server says `same-origin` itself: under
        // `no-referrer` a browser sends `Origin: null` with the form, which the dashboard
        // refuses.
        headers
            .entry(header::REFERRER_POLICY)
            .or_insert(HeaderValue::from_static("no-referrer"));
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        if policy == ACCOUNT_POLICY && !headers.contains_key(header::CACHE_CONTROL) {
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        }
        Ok(response)
    }
}
