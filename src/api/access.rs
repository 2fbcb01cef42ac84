//! Who may use a key, and from where (docs/browser.md): the key read from a header or the
//! body, a publishable key held to its origins, its operations, its per-IP limit and its
//! budget, a secret key kept out of other sites' pages, and CORS (the preflight, and the
//! `Access-Control-*` headers of every `/api/*` answer).
//!
//! The decisions of the billed path (`billed`) use what [`RequestMeta`] took from the
//! request's head when its body was read (`contract::ContractJson`): a few header values,
//! no parsing, so a secret key's request pays for nothing it does not use.

use std::net::IpAddr;
use std::time::SystemTime;

use poem::http::header::{self, HeaderMap, HeaderValue};
use poem::http::{Method, StatusCode};
use poem::{Endpoint, IntoResponse, Middleware, Request, Response};
use poem_openapi::registry::MetaSecurityScheme;

use super::error::ApiError;
use crate::billing::KeyEntry;
use crate::billing::per_ip::PerIpLimiter;
use crate::domain::cidr::Cidr;

/// The 403 of a publishable key sent from a page of an origin it does not list.
pub const ORIGIN_NOT_ALLOWED: &str = "Origin not allowed for this key";
/// The 403 of a publishable key on an operation a form does not need.
pub const OPERATION_NOT_ALLOWED: &str = "Operation not allowed for a publishable key";
/// The 403 of a secret key sent from another site's page.
pub const SECRET_KEY_IN_PAGE: &str =
    "Secret keys cannot be used from a web page; create a publishable key for it";

/// The 400 of a secret key sent as a URL's `key=` (GET forms): a URL is kept in
/// browser history, proxy logs and HTTP caches.
pub const SECRET_KEY_IN_URL: &str = "Secret keys cannot be sent in a URL; send the key in the Authorization header, or use a publishable key";

/// `X-Api-Key`.
pub const API_KEY_HEADER: &str = "x-api-key";

/// What the access decisions read from a request's head.
#[derive(Debug, Default)]
pub struct RequestMeta {
    /// `Authorization: Bearer KEY`, else `X-Api-Key: KEY`.
    header_key: Option<HeaderValue>,
    origin: Option<HeaderValue>,
    host: Option<HeaderValue>,
    /// Every `X-Forwarded-For` line, in order, joined: a proxy that appends a line of
    /// its own (HAProxy's `forwardfor`) adds a hop, as one that extends the line does.
    forwarded_for: Option<HeaderValue>,
    peer: Option<IpAddr>,
    /// The body's `apiKey` is a GET's `key=` query parameter (`ContractJson::from_fields`).
    pub(super) key_in_url: bool,
}

/// `value` marked sensitive: its `Debug` is `Sensitive`, so a printed `RequestMeta` never
/// holds the key (a flag; the value is the request's own bytes, shared, not copied).
fn sensitive(mut value: HeaderValue) -> HeaderValue {
    value.set_sensitive(true);
    value
}

impl RequestMeta {
    pub fn of(request: &Request) -> RequestMeta {
        let peer = request.remote_addr().as_socket_addr().map(|a| a.ip());
        RequestMeta::from_head(request.headers(), peer)
    }

    pub(super) fn from_head(headers: &HeaderMap, peer: Option<IpAddr>) -> RequestMeta {
        let bearer = headers
            .get(header::AUTHORIZATION)
            .filter(|v| bearer_token(v).is_some());
        RequestMeta {
            header_key: bearer
                .or_else(|| headers.get(API_KEY_HEADER))
                .cloned()
                .map(sensitive),
            origin: headers.get(header::ORIGIN).cloned(),
            // Only compared with an Origin: a server's request copies nothing more.
            host: headers
                .get(header::ORIGIN)
                .and_then(|_| headers.get(header::HOST))
                .cloned(),
            forwarded_for: forwarded_for(headers),
            peer,
            key_in_url: false,
        }
    }

    /// The key sent in a header, which wins over the body's `apiKey` (docs/browser.md).
    pub fn header_key(&self) -> Option<&str> {
        let value = self.header_key.as_ref()?;
        bearer_token(value)
            .or_else(|| value.to_str().ok().map(str::trim))
            .filter(|key| !key.is_empty())
    }

    /// The address of the client: the peer's, or, when the peer is a trusted proxy, the
    /// last address of `X-Forwarded-For` that is not one (what the first proxy saw).
    pub fn client_ip(&self, trusted: &[Cidr]) -> Option<IpAddr> {
        let peer = self.peer?;
        let is_trusted = |ip: IpAddr| trusted.iter().any(|c| c.contains(ip));
        if !is_trusted(peer) {
            return Some(peer);
        }
        let Some(forwarded) = self.forwarded_for.as_ref().and_then(|v| v.to_str().ok()) else {
            return Some(peer);
        };
        let mut hops = forwarded.rsplit(',').map(str::trim);
        let mut last = peer;
        for hop in &mut hops {
            match hop.parse::<IpAddr>() {
                Ok(ip) if is_trusted(ip) => last = ip,
                Ok(ip) => return Some(ip),
                // Garbage in the header: the last address we could trust is the answer.
                Err(_) => return Some(last),
            }
        }
        Some(last)
    }

    /// Sent from a page of another site than this server's (an `Origin` whose host and
    /// port are not the request's `Host`): Swagger UI at /docs is the same site.
    fn is_cross_site(&self) -> bool {
        let Some(origin) = self.origin.as_ref().and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let origin_host = origin.split_once("://").map_or(origin, |(_, h)| h);
        let host = self.host.as_ref().and_then(|v| v.to_str().ok());
        !host.is_some_and(|h| h.eq_ignore_ascii_case(origin_host))
    }
}

/// Every `X-Forwarded-For` line in order, joined with `,` (a line that is not text reads
/// as garbage: `client_ip` then stops at the hop before it). One line, the usual case,
/// is kept as it came, without a copy.
fn forwarded_for(headers: &HeaderMap) -> Option<HeaderValue> {
    let mut lines = headers.get_all("x-forwarded-for").iter();
    let first = lines.next()?;
    let rest: Vec<&HeaderValue> = lines.collect(); // empty: no allocation
    if rest.is_empty() {
        return Some(first.clone());
    }
    let joined: Vec<&str> = std::iter::once(first)
        .chain(rest)
        .map(|v| v.to_str().unwrap_or("?"))
        .collect();
    HeaderValue::from_str(&joined.join(",")).ok()
}

/// The addresses one client is counted under: an IPv4 address; the /64 of an IPv6 one
/// (a single host is routinely given a whole /64, so counting per address would let
/// it send from 2^64 of them); an IPv4-mapped IPv6 address as its IPv4.
pub fn counted_as(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let network = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(network.into())
            }
        },
    }
}

fn bearer_token(value: &HeaderValue) -> Option<&str> {
    let text = value.to_str().ok()?;
    let (scheme, token) = text.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Who an answer is for: the account's own servers (a secret key), or a page's visitor
/// (a publishable key), whose answers tell nothing of the account: no balance, and as
/// the rate limit the visitor's own per-IP window (docs/browser.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    Account,
    /// The key's per-IP limit, and this visitor's requests in the minute, this one
    /// included.
    Visitor {
        per_minute: u32,
        current: u32,
    },
}

/// How a key may be used here: `form_safe` says whether the operation is one a checkout
/// form needs (the only ones a publishable key reaches). A refusal is answered before
/// any work and charges nothing.
pub fn check(
    meta: &RequestMeta,
    key: &KeyEntry,
    form_safe: bool,
    limiter: &PerIpLimiter,
    trusted: &[Cidr],
) -> Result<Audience, ApiError> {
    let Some(publishable) = &key.publishable else {
        // The key used came from the URL unless a header gave one (an empty or
        // malformed header gives none: `header_key`).
        if meta.key_in_url && meta.header_key().is_none() {
            return Err(ApiError::bad_request(SECRET_KEY_IN_URL));
        }
        if meta.is_cross_site() {
            return Err(ApiError::forbidden(SECRET_KEY_IN_PAGE));
        }
        return Ok(Audience::Account);
    };
    let origin = meta.origin.as_ref().and_then(|v| v.to_str().ok());
    if !publishable.allows(origin) {
        return Err(ApiError::forbidden(ORIGIN_NOT_ALLOWED));
    }
    if !form_safe {
        return Err(ApiError::forbidden(OPERATION_NOT_ALLOWED));
    }
    // A request with no address (not over TCP: tests of the app in memory) is one client.
    let ip = meta
        .client_ip(trusted)
        .map_or(IpAddr::from([0, 0, 0, 0]), counted_as);
    let per_minute = publishable.per_ip_minute;
    // The key's budget is checked after the per-IP limit and is not shown to the visitor
    // (it would tell the shop's traffic): its refusal reads as the per-IP one.
    limiter
        .admit_within(
            key.caller.key_id,
            ip,
            per_minute,
            publishable.budget,
            SystemTime::now(),
        )
        .map(|current| Audience::Visitor {
            per_minute,
            current,
        })
        .map_err(|e| ApiError::rate_limited("Rate limit exceeded", e.retry_after))
}

/// The header forms of the key in the OpenAPI document (the body's `apiKey` is the
/// fallback every operation also takes): `Authorization: Bearer KEY`, `X-Api-Key: KEY`.
pub fn security_schemes() -> [(&'static str, MetaSecurityScheme); 2] {
    let scheme = |ty, description| MetaSecurityScheme {
        ty,
        description: Some(description),
        name: None,
        key_in: None,
        scheme: None,
        bearer_format: None,
        flows: None,
        openid_connect_url: None,
    };
    [
        (
            "BearerKey",
            MetaSecurityScheme {
                scheme: Some("bearer"),
                ..scheme(
                    "http",
                    "The API key as `Authorization: Bearer KEY`; it wins over `X-Api-Key` and the body's `apiKey`.",
                )
            },
        ),
        (
            "ApiKeyHeader",
            MetaSecurityScheme {
                name: Some("X-Api-Key"),
                key_in: Some("header"),
                ..scheme(
                    "apiKey",
                    "The API key as `X-Api-Key: KEY`; it wins over the body's `apiKey`.",
                )
            },
        ),
    ]
}

/// How long a browser may keep a preflight's answer: a day.
pub const PREFLIGHT_MAX_AGE_SECS: u32 = 86_400;
/// Methods of the API a page may call.
const ALLOW_METHODS: &str = "GET, POST, OPTIONS";
/// Headers a page may send.
const ALLOW_HEADERS: &str = "Authorization, Content-Type, X-Api-Key, X-Request-Id";
/// Headers of an answer a page may read.
const EXPOSE_HEADERS: &str = "Retry-After, X-Request-Id, RateLimit, RateLimit-Policy";

/// CORS for `/api/*`: the preflight (`OPTIONS` with `Access-Control-Request-Method`) is
/// answered 204 for any origin, since it carries no key; every other answer to a request
/// with an `Origin` allows that origin to read it. Whether the key may be used from that
/// origin is the billed path's decision (`check`), and its refusal is readable too, so a
/// page can show why.
pub struct Cors;

impl<E: Endpoint> Middleware<E> for Cors {
    type Output = CorsEndpoint<E>;

    fn transform(&self, inner: E) -> Self::Output {
        CorsEndpoint(inner)
    }
}

pub struct CorsEndpoint<E>(E);

impl<E: Endpoint> Endpoint for CorsEndpoint<E> {
    type Output = Response;

    async fn call(&self, request: Request) -> poem::Result<Response> {
        let origin = request.headers().get(header::ORIGIN).cloned();
        let api = request.uri().path().starts_with("/api/");
        let Some(origin) = origin.filter(|_| api) else {
            return self.0.call(request).await.map(IntoResponse::into_response);
        };
        if request.method() == Method::OPTIONS
            && request
                .headers()
                .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
        {
            let mut response = Response::builder().status(StatusCode::NO_CONTENT).finish();
            let headers = response.headers_mut();
            allow(headers, origin);
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static(ALLOW_METHODS),
            );
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static(ALLOW_HEADERS),
            );
            headers.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from(PREFLIGHT_MAX_AGE_SECS),
            );
            return Ok(response);
        }
        let mut response = match self.0.call(request).await {
            Ok(output) => output.into_response(),
            Err(error) => error.into_response(),
        };
        cors_answer(origin, response.headers_mut());
        Ok(response)
    }
}

/// The CORS headers of an answer to an API request that came with `origin` (every
/// answer, errors too, so that a page can read why).
pub(super) fn cors_answer(origin: HeaderValue, headers: &mut HeaderMap) {
    allow(headers, origin);
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSE_HEADERS),
    );
}

fn allow(headers: &mut HeaderMap, origin: HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(headers: &[(&'static str, &str)], peer: &str) -> RequestMeta {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(
                poem::http::HeaderName::from_static(name),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        RequestMeta::from_head(&map, Some(peer.parse().unwrap()))
    }

    #[test]
    fn a_key_in_a_header_is_read_from_bearer_or_x_api_key() {
        let key = |headers: &[(&'static str, &str)]| {
            meta(headers, "192.0.2.1").header_key().map(str::to_owned)
        };
        assert_eq!(
            key(&[("authorization", "Bearer  sk_a ")]).as_deref(),
            Some("sk_a")
        );
        assert_eq!(key(&[("x-api-key", "pub_b")]).as_deref(), Some("pub_b"));
        // Both headers: Authorization.
        let both = [("x-api-key", "pub_b"), ("authorization", "bearer sk_a")];
        assert_eq!(key(&both).as_deref(), Some("sk_a"));
        // Another scheme is not a key: X-Api-Key or the body then.
        assert_eq!(key(&[("authorization", "Basic dXNlcg==")]), None);
        let basic = [("authorization", "Basic dXNlcg=="), ("x-api-key", "pub_b")];
        assert_eq!(key(&basic).as_deref(), Some("pub_b"));
        assert_eq!(key(&[("x-api-key", " ")]), None);
        assert_eq!(key(&[]), None);
    }

    #[test]
    fn the_client_is_the_peer_unless_the_peer_is_a_trusted_proxy() {
        let trusted: Vec<Cidr> = vec!["10.0.0.0/8".parse().unwrap()];
        let xff = [("x-forwarded-for", "203.0.113.9, 198.51.100.2, 10.0.0.3")];
        let ip = |m: &RequestMeta| m.client_ip(&trusted).unwrap().to_string();
        assert_eq!(ip(&meta(&xff, "192.0.2.1")), "192.0.2.1");
        // Through two trusted proxies: the last untrusted hop, not the spoofable first.
        assert_eq!(ip(&meta(&xff, "10.1.1.1")), "198.51.100.2");
        assert_eq!(ip(&meta(&[], "10.1.1.1")), "10.1.1.1");
        let garbage = [("x-forwarded-for", "nonsense, 10.0.0.9")];
        assert_eq!(ip(&meta(&garbage, "10.1.1.1")), "10.0.0.9");
        // A proxy that appends a line of its own: the client's forged line comes first,
        // the proxy's last; the proxy's line names the client.
        let two_lines = [
            ("x-forwarded-for", "198.51.100.77"),
            ("x-forwarded-for", "203.0.113.9"),
        ];
        assert_eq!(ip(&meta(&two_lines, "10.1.1.1")), "203.0.113.9");
    }

    #[test]
    fn an_ipv6_client_is_counted_by_its_slash_64() {
        let counted = |ip: &str| counted_as(ip.parse().unwrap()).to_string();
        assert_eq!(counted("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::");
        assert_eq!(
            counted("2001:db8:1:2:ffff:ffff:ffff:ffff"),
            "2001:db8:1:2::"
        );
        assert_ne!(counted("2001:db8:1:3::1"), counted("2001:db8:1:2::1"));
        assert_eq!(counted("::ffff:192.0.2.7"), "192.0.2.7");
        assert_eq!(counted("192.0.2.7"), "192.0.2.7");
    }

    #[test]
    fn a_page_of_the_same_site_is_not_another_site() {
        let same = meta(
            &[
                ("origin", "http://127.0.0.1:8080"),
                ("host", "127.0.0.1:8080"),
            ],
            "127.0.0.1",
        );
        assert!(!same.is_cross_site());
        let other = meta(
            &[
                ("origin", "https://shop.example"),
                ("host", "127.0.0.1:8080"),
            ],
            "127.0.0.1",
        );
        assert!(other.is_cross_site());
        assert!(meta(&[("origin", "null")], "127.0.0.1").is_cross_site());
        assert!(!meta(&[("host", "x")], "127.0.0.1").is_cross_site());
    }
}
