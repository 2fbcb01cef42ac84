//! The hottest operation, `/api/lookup` (`POST`, and the `GET` a checkout page sends),
//! answered before poem's routing (issue 21, docs/performance.md).
//!
//! Through poem a lookup passes the conversion of hyper's request into poem's, the
//! telemetry, CORS and JSON-error middlewares, two levels of routing (the app's `Route`,
//! then poem-openapi's), the `Data` and body extractors, each layer a boxed future moved
//! into the next; perf put that stack at several times the billed path's own work. Here
//! `api::server` hands the request's head and body to [`Hot::answer`] when [`Op::of`]
//! names it, and the answer is the one poem would give, from the same pieces:
//!
//! - the body read under the same limits and timeout (`api::server`), then
//!   [`ContractJson::from_bytes`] and the request's head as
//!   [`RequestMeta::from_head`](super::access::RequestMeta), as the extractor does; for
//!   the GET, the query decoded as poem decodes it for poem-openapi (`form_urlencoded`,
//!   the first value of each name) into the body it stands for (`get::code_fields`);
//! - the operation's own answer function on the one billed path
//!   (`routes::lookup::lookup_answer`: `State::billed`, the envelope, the one error type),
//!   as the same reply (`Reply`, `Cached` for the GET);
//! - the CORS headers of an answer to a page ([`access::cors_answer`]);
//! - the request observed by the server's [`Observer`]: id, metrics, access line.
//!
//! Everything else (other methods and paths, `OPTIONS` preflights, the document) goes
//! through poem. The OpenAPI document is unchanged: the operation is still declared (and
//! answered, for a request that reaches poem another way) in `routes::lookup`.

use std::net::IpAddr;
use std::sync::Arc;

use poem::http::{Method, header, request::Parts};
use poem::{IntoResponse, Response};

use super::State;
use super::access::{self, RequestMeta};
use super::contract::ContractJson;
use super::get;
use super::reply::Reply;
use super::routes;
use super::telemetry::Observer;

/// An operation answered here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `POST /api/lookup`.
    Lookup,
    /// `GET /api/lookup?zipcode=..&country=..&key=..`.
    LookupGet,
}

impl Op {
    /// The operation a request's method and path name, if it is answered here.
    pub fn of(method: &Method, path: &str) -> Option<Op> {
        if path != "/api/lookup" {
            return None;
        }
        match *method {
            Method::POST => Some(Op::Lookup),
            Method::GET => Some(Op::LookupGet),
            _ => None,
        }
    }
}

/// What answers the hot operations: the handlers' state and the server's observer.
pub struct Hot {
    state: Arc<State>,
    observer: Observer,
}

impl Hot {
    pub(super) fn new(state: Arc<State>, observer: Observer) -> Hot {
        Hot { state, observer }
    }

    /// The answer to `op`, whose request has `head` and `body`, from `peer`.
    pub async fn answer(
        &self,
        op: Op,
        head: &Parts,
        body: &[u8],
        peer: Option<IpAddr>,
    ) -> Response {
        let path = head.uri.path();
        let observed = self.observer.begin(&head.headers, path);
        let mut response = self
            .observer
            .scope(&observed, self.work(op, head, body, peer))
            .await;
        if let Some(origin) = head.headers.get(header::ORIGIN) {
            access::cors_answer(origin.clone(), response.headers_mut());
        }
        self.observer
            .end(observed, &head.method, path, &mut response);
        response
    }

    async fn work(&self, op: Op, head: &Parts, body: &[u8], peer: Option<IpAddr>) -> Response {
        match op {
            Op::Lookup => {
                let mut request = match ContractJson::from_bytes(body) {
                    Ok(request) => request,
                    Err(e) => return e.into_response(),
                };
                request.meta = RequestMeta::from_head(&head.headers, peer);
                match routes::lookup::lookup_answer(&self.state, &request).await {
                    Ok(answer) => Reply::<_, false>(answer).into_response(),
                    Err(e) => e.into_response(),
                }
            }
            Op::LookupGet => {
                // One pass over the query: the first value of each name.
                let query = head.uri.query().unwrap_or_default();
                let [mut zipcode, mut country, mut key] = [None, None, None];
                for (name, value) in form_urlencoded::parse(query.as_bytes()) {
                    let slot = match &*name {
                        "zipcode" => &mut zipcode,
                        "country" => &mut country,
                        "key" => &mut key,
                        _ => continue,
                    };
                    if slot.is_none() {
                        *slot = Some(value.into_owned());
                    }
                }
                let request = ContractJson::from_fields(
                    get::code_fields(zipcode, country, key),
                    RequestMeta::from_head(&head.headers, peer),
                );
                match routes::lookup::lookup_answer(&self.state, &request).await {
                    Ok(answer) => Reply::<_, true>(answer).into_response(),
                    Err(e) => e.into_response(),
                }
            }
        }
    }
}
