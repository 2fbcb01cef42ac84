//! What a signed-in customer starts at a provider, and the link's confirmation:
//!
//! - `POST /account/api/identities/link` (`{"provider"}`) starts a link of another
//!   identity, and `POST /account/api/reauth` a sign-in again with the session's own
//!   identity (before a change that needs a recent sign-in: `extract::Recent`). Both are
//!   changes (CSRF token, Origin), both ask the provider to sign the person in again
//!   (`prompt=login`), and both answer the provider's URL for the page to go to: a form
//!   posted here could not be redirected to another origin under the page's
//!   `form-action 'self'`. Only the session that started one completes it (`oidc`).
//! - A link's callback links nothing: it keeps the identity on the session and shows
//!   `GET /account/link`, "Link this identity to your account?", which links it only on
//!   the customer's `POST /account/link` (with the session's CSRF token).

use std::sync::Arc;

use poem::http::StatusCode;
use poem::web::{Data, Form};
use poem::{Request, Response, handler};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};
use secrecy::ExposeSecret;
use serde::Deserialize;

use super::answers::{Failed, SignInAgain, StartLink};
use super::extract::{Body, Changing, DashboardBody, Recent};
use super::oidc::{Started, begin, too_many_starts};
use super::page::{escape, html, message};
use super::{Dashboard, Session, now_unix, see_other};
use crate::accounts::LinkOffer;
use crate::api::{ApiError, ApiTags};
use crate::domain::dashboard::{self, SignInPurpose};

#[derive(Debug, Object)]
pub struct LinkRequest {
    /// The name of the provider to link an identity of (one of `/me`'s `providers`).
    pub provider: String,
}

impl DashboardBody for LinkRequest {}

/// Where to send the browser. (`Debug` by hand: the URL carries the sign-in's state.)
#[derive(Object)]
pub struct StartedBody {
    /// The provider's sign-in page, with this sign-in's state.
    pub url: String,
}

impl std::fmt::Debug for StartedBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let endpoint = self.url.split(['?', '#']).next().unwrap_or_default();
        f.debug_struct("StartedBody")
            .field("endpoint", &endpoint)
            .finish_non_exhaustive()
    }
}

#[derive(ApiResponse)]
pub enum StartedAnswer {
    /// Send the browser to `url`; the sign-in state's cookie is set (10 minutes).
    #[oai(status = 200)]
    Ok(Json<StartedBody>, #[oai(header = "Set-Cookie")] String),
}

/// `/account/api/identities/link` and `/account/api/reauth`.
pub struct StartsApi;

#[OpenApi(prefix_path = "/account/api", tag = "ApiTags::Account")]
impl StartsApi {
    /// Starts linking an identity of another provider to the account (a change that needs
    /// a recent sign-in): the provider asks the person to sign in, then `/account/link`
    /// asks the customer to confirm the link.
    #[oai(
        path = "/identities/link",
        method = "post",
        operation_id = "linkIdentity"
    )]
    async fn link(
        &self,
        dash: Data<&Arc<Dashboard>>,
        req: &Request,
        recent: Recent,
        body: Body<LinkRequest>,
    ) -> Result<StartedAnswer, Failed<StartLink>> {
        let session = recent.0;
        Ok(start(&dash, req, &body.0.provider, SignInPurpose::Link, &session).await?)
    }

    /// Starts a sign-in again with the identity this session was opened with: a roll, a
    /// revoke, a limit change, an unlink or a top-up needs a sign-in of the last 15
    /// minutes.
    #[oai(path = "/reauth", method = "post", operation_id = "signInAgain")]
    async fn reauth(
        &self,
        dash: Data<&Arc<Dashboard>>,
        req: &Request,
        changing: Changing,
    ) -> Result<StartedAnswer, Failed<SignInAgain>> {
        let session = changing.0;
        let Some(identity) = session.row.identity.clone() else {
            return Err(ApiError::bad_request(UNKNOWN_IDENTITY).into());
        };
        Ok(start(
            &dash,
            req,
            identity.provider.as_str(),
            SignInPurpose::Again,
            &session,
        )
        .await?)
    }
}

/// A session opened before sessions recorded their identity cannot sign in again.
const UNKNOWN_IDENTITY: &str = "This session does not know which identity opened it (it \
     is older than this server's version); sign out and sign in again.";

async fn start(
    dash: &Arc<Dashboard>,
    req: &Request,
    provider: &str,
    purpose: SignInPurpose,
    session: &Session,
) -> Result<StartedAnswer, ApiError> {
    if let Some(failure) = too_many_starts(dash, req) {
        return Err(failure.into_api());
    }
    let Started { url, cookie } = begin(dash, provider, Some((purpose, session)))
        .await
        .map_err(|f| f.into_api())?;
    Ok(StartedAnswer::Ok(
        Json(StartedBody { url }),
        cookie.to_str().unwrap_or("").to_owned(),
    ))
}

/// The identity a link brought back to `session`, while it may still be confirmed.
fn fresh_offer(session: &Session, now: i64) -> Option<&LinkOffer> {
    session
        .row
        .link_offer
        .as_ref()
        .filter(|offer| now - offer.at < dashboard::SIGNIN_SECS)
}

const NOTHING_TO_CONFIRM: &str = "No link is waiting for your confirmation (or it waited over 10 minutes); link again from your dashboard.";

/// `GET /account/link`: "Link this identity to your account?", with the identity the
/// link brought back and a form that posts the answer.
#[handler]
pub(super) async fn offered(req: &Request, dash: Data<&Arc<Dashboard>>) -> Response {
    let Ok(session) = dash.session(req).await else {
        return see_other("/account");
    };
    let Some(offer) = fresh_offer(&session, now_unix()) else {
        return message(StatusCode::NOT_FOUND, "Link a sign-in", NOTHING_TO_CONFIRM);
    };
    let i = &offer.identity;
    let email = i
        .email
        .as_deref()
        .map(|e| format!("<dt>E-mail</dt><dd>{}</dd>", escape(e)))
        .unwrap_or_default();
    let mut page = html(
        StatusCode::OK,
        "Link a sign-in",
        &format!(
            "<h1>Link this identity to your account?</h1>\
             <p>Once linked, it signs in to account <code>{account}</code>.</p>\
             <dl><dt>Provider</dt><dd>{provider}</dd><dt>Issuer</dt><dd>{issuer}</dd>\
             <dt>Subject</dt><dd>{subject}</dd>{email}</dl>\
             <form method=\"post\" action=\"/account/link\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <button name=\"decision\" value=\"link\">Link</button> \
             <button name=\"decision\" value=\"cancel\" class=\"secondary\">Cancel</button>\
             </form>",
            account = escape(session.row.account_id.as_str()),
            provider = escape(i.provider.as_str()),
            issuer = escape(&i.issuer),
            subject = escape(&i.subject),
            csrf = escape(session.row.csrf.expose_secret()),
        ),
    );
    // Its form is a change, checked for its Origin: under the dashboard's `no-referrer` a
    // browser would send `Origin: null` with it (`page::SecurityHeaders`).
    page.headers_mut().insert(
        poem::http::header::REFERRER_POLICY,
        poem::http::HeaderValue::from_static("same-origin"),
    );
    page
}

#[derive(Deserialize)]
pub(super) struct Decision {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    decision: String,
}

/// `POST /account/link`: the customer's answer (`decision=link` or `cancel`, with the
/// session's CSRF token as `csrf`); either way the offer is used up. Then the dashboard.
#[handler]
pub(super) async fn confirm(
    req: &Request,
    Form(answer): Form<Decision>,
    dash: Data<&Arc<Dashboard>>,
) -> Response {
    let title = "Link a sign-in";
    let session = match dash.recent_with(req, &answer.csrf).await {
        Ok(session) => session,
        Err(e) => return message(e.status(), title, e.text()),
    };
    let now = now_unix();
    let link = match answer.decision.as_str() {
        "link" => true,
        "cancel" => false,
        _ => {
            return message(
                StatusCode::BAD_REQUEST,
                title,
                "Answer with Link or Cancel.",
            );
        }
    };
    let Some(offer) = fresh_offer(&session, now).cloned() else {
        return message(StatusCode::NOT_FOUND, title, NOTHING_TO_CONFIRM);
    };
    let (hash, account, actor) = (session.hash, session.account(), session.actor());
    let done = dash
        .admin_as(actor, move |mut admin| async move {
            admin.offer_link(&hash, None).await?;
            if link {
                admin.link(&account, &offer.identity, now).await?;
            }
            Ok(())
        })
        .await;
    match done {
        Ok(()) => see_other("/account"),
        Err(e) if e.is_server_error() => message(e.status(), title, e.text()),
        Err(e) => message(StatusCode::FORBIDDEN, title, e.text()),
    }
}
