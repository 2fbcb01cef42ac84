//! How much the dashboard lets one client and one session ask (issue 50): every request
//! under `/account` (pages, sign-in, the JSON API, the Stripe webhook) counts against its
//! client address, at most `--account-requests-per-minute` a minute (120 by default), a
//! change (any method but GET) also against a quarter of that; and every request of a
//! session to `/account/api` counts against the session, at most as many.
//! Beyond, 429 with `Retry-After`, before any other work: a JSON error under
//! `/account/api` and for the webhook, a page elsewhere.
//!
//! Addresses are counted as the publishable keys' per-IP limits count them (an IPv6 /64,
//! an IPv4-mapped address as its IPv4, `X-Forwarded-For` only from a `--trusted-proxy`),
//! in memory, per node, in fixed UTC minutes (`billing::per_ip::PerMinute`).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::SystemTime;

use poem::http::{Method, StatusCode, header};
use poem::{Endpoint, IntoResponse, Middleware, Request, Response};

use super::Dashboard;
use crate::api::ApiError;
use crate::billing::per_ip::LimitExceeded;

/// Requests a minute a client address may make under `/account`, and a session to
/// `/account/api`, by default.
pub const REQUESTS_PER_MINUTE: u32 = 120;

const FROM_ADDRESS: &str = "Too many requests to the dashboard from your address";
const IN_SESSION: &str = "Too many requests in this session";

impl Dashboard {
    /// The client address a request is counted under.
    pub(super) fn client(&self, req: &Request) -> IpAddr {
        crate::api::access::RequestMeta::of(req)
            .client_ip(&self.trusted_proxies)
            .map_or(IpAddr::from([0, 0, 0, 0]), crate::api::access::counted_as)
    }

    /// Counts a request of the client at `address` (a change twice: in every request's
    /// minute and in the changes' own), or how long it must wait.
    fn admit_visit(&self, address: IpAddr, change: bool) -> Result<(), LimitExceeded> {
        let now = SystemTime::now();
        let all = self.requests_per_minute;
        if change {
            self.visits.admit((true, address), (all / 4).max(1), now)?;
        }
        self.visits.admit((false, address), all, now).map(|_| ())
    }

    /// Counts a request of the session whose id hashes to `hash`, or 429.
    pub(super) fn admit_session_call(&self, hash: &[u8; 32]) -> Result<(), ApiError> {
        self.session_calls
            .admit(*hash, self.requests_per_minute, SystemTime::now())
            .map(|_| ())
            .map_err(|full| ApiError::rate_limited(IN_SESSION, full.retry_after))
    }
}

/// The per-address limit, around the whole application: it acts on `/account` paths only.
pub(crate) struct Visits(pub Arc<Dashboard>);

impl<E: Endpoint> Middleware<E> for Visits {
    type Output = VisitsEndpoint<E>;

    fn transform(&self, ep: E) -> Self::Output {
        VisitsEndpoint(ep, self.0.clone())
    }
}

pub(crate) struct VisitsEndpoint<E>(E, Arc<Dashboard>);

impl<E: Endpoint> Endpoint for VisitsEndpoint<E> {
    type Output = Response;

    async fn call(&self, req: Request) -> poem::Result<Response> {
        let path = req.uri().path();
        if path != "/account" && !path.starts_with("/account/") {
            return self.0.call(req).await.map(IntoResponse::into_response);
        }
        let change = req.method() != Method::GET && req.method() != Method::HEAD;
        let Err(full) = self.1.admit_visit(self.1.client(&req), change) else {
            return self.0.call(req).await.map(IntoResponse::into_response);
        };
        if path.starts_with("/account/api/") || path == "/account/stripe/webhook" {
            return Ok(ApiError::rate_limited(FROM_ADDRESS, full.retry_after).into_response());
        }
        let mut page = super::page::message(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many requests",
            &format!("{FROM_ADDRESS}; try again in {} seconds.", full.retry_after),
        );
        if let Ok(value) = full.retry_after.to_string().parse() {
            page.headers_mut().insert(header::RETRY_AFTER, value);
        }
        Ok(page)
    }
}
