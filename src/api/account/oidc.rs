//! Sign-in with a provider (OpenID Connect, Google, Microsoft, GitHub), as the browser sees
//! it (the clients that talk to the provider are `accounts::flow`'s).
//!
//! `GET /account/signin/{name}` keeps the sign-in (state hashed, nonce, PKCE verifier) in
//! the database and the state in a cookie, then sends the browser to the provider;
//! `GET /account/callback/{name}` checks the state against the cookie and takes the
//! sign-in once (a replayed or foreign state finds none) before it reads anything else of
//! the URL; then a provider's `error` is a fixed text per code (its description only
//! logged), or the code is exchanged and the ID token checked. An
//! identity is (issuer, subject): its first sign-in makes an account with the free
//! allowance; a signed-in customer may link a second provider (`/account/link/{name}`).
//! Never by e-mail address.

use std::sync::Arc;

use poem::http::{StatusCode, header};
use poem::web::{Data, Path, Query};
use poem::{Request, Response, handler};
use secrecy::ExposeSecret;
use serde::Deserialize;

use super::{Dashboard, STARTS_PER_MINUTE, Session, cookie, now_unix, see_other};
use crate::accounts::flow::{self, SignInError};
use crate::accounts::{
    AccountError, IdentityView, LinkOffer, Provider, SessionIdentity, SessionRow, SignIn,
};
use crate::api::ApiError;
use crate::domain::dashboard::{self, SignInPurpose};
use crate::domain::ids::{ProviderName, SessionId};

/// Why a sign-in failed, shown to the person on a page (and its status).
pub(super) struct Failure {
    status: StatusCode,
    text: String,
    /// Seconds to wait (a 429's).
    retry_after: Option<u64>,
}

impl Failure {
    fn new(status: StatusCode, text: impl Into<String>) -> Failure {
        Failure {
            status,
            text: text.into(),
            retry_after: None,
        }
    }

    /// As the dashboard's JSON API answers it: its status and text (a provider that
    /// cannot be reached: 503, retry in 30 seconds).
    pub(super) fn into_api(self) -> ApiError {
        match self.status.as_u16() {
            400 => ApiError::bad_request(self.text),
            403 => ApiError::forbidden(&self.text),
            404 => ApiError::not_found(&self.text),
            429 => ApiError::rate_limited(&self.text, self.retry_after.unwrap_or(60)),
            500 => ApiError::internal(anyhow::anyhow!(self.text)),
            _ => ApiError::unavailable(&self.text, 30),
        }
    }
}

fn failed(f: Failure) -> Response {
    let mut page = super::page::message(f.status, "Sign-in failed", &f.text);
    if let Some(value) = f.retry_after.and_then(|s| s.to_string().parse().ok()) {
        page.headers_mut().insert(header::RETRY_AFTER, value);
    }
    page
}

/// A provider's refusal, or its silence, as the page says it.
fn signin_failure(provider: &str, e: SignInError) -> Failure {
    match e {
        SignInError::Unreachable => Failure::new(
            StatusCode::BAD_GATEWAY,
            format!("The provider {provider} could not be reached; try again later."),
        ),
        SignInError::Unverified => Failure::new(
            StatusCode::BAD_REQUEST,
            "The provider's answer could not be verified (an expired or used code, or a token not meant for this service); start again.",
        ),
        SignInError::NotAllowed(why) => Failure::new(StatusCode::FORBIDDEN, why),
    }
}

/// The page of an error the provider sent back (RFC 6749 4.1.2.1, OpenID Connect Core
/// 3.1.2.6) to a sign-in this browser started: a fixed text per known code, never a word
/// of the URL's (content spoofing on this origin); `error_description` goes to the log.
fn provider_refused(provider: &str, error: &str, description: Option<&str>) -> Failure {
    // Quoted (`?`) and cut: a line of the log holds no newline or escape from the URL.
    let clip = |text: &str| text.chars().take(300).collect::<String>();
    tracing::info!(
        provider,
        error = ?clip(error),
        description = ?description.map(clip),
        "the provider answered the sign-in with an error"
    );
    let (status, text) = provider_error_text(error);
    Failure::new(status, text)
}

/// The status and text of a provider's `error` code on the page. The person's own
/// choices (declined, asked to sign in or choose again) are 4xx; what only the operator
/// can fix (the client as registered at the provider), or the provider's own failure, is
/// 502.
fn provider_error_text(error: &str) -> (StatusCode, &'static str) {
    match error {
        "access_denied" => (
            StatusCode::FORBIDDEN,
            "The sign-in was declined at the provider; nothing was changed.",
        ),
        "login_required" => (
            StatusCode::BAD_REQUEST,
            "The provider asks you to sign in there first; start again.",
        ),
        "consent_required" => (
            StatusCode::BAD_REQUEST,
            "The provider needs your consent to sign you in here; start again and give it.",
        ),
        "interaction_required" => (
            StatusCode::BAD_REQUEST,
            "The provider needs you on its own pages first; start again.",
        ),
        "account_selection_required" => (
            StatusCode::BAD_REQUEST,
            "The provider asks you to choose an account; start again.",
        ),
        "invalid_request" => (
            StatusCode::BAD_GATEWAY,
            "The provider found this service's sign-in request invalid; tell the operator of this service.",
        ),
        "unauthorized_client" => (
            StatusCode::BAD_GATEWAY,
            "The provider does not allow this service to sign you in this way; tell the operator of this service.",
        ),
        "unsupported_response_type" => (
            StatusCode::BAD_GATEWAY,
            "The provider does not support this service's way of signing in; tell the operator of this service.",
        ),
        "invalid_scope" => (
            StatusCode::BAD_GATEWAY,
            "The provider refused the access this service asks for; tell the operator of this service.",
        ),
        "server_error" => (
            StatusCode::BAD_GATEWAY,
            "The provider failed while signing you in; try again later.",
        ),
        "temporarily_unavailable" => (
            StatusCode::BAD_GATEWAY,
            "The provider is temporarily unavailable; try again later.",
        ),
        _ => (
            StatusCode::BAD_REQUEST,
            "The provider refused the sign-in; start again.",
        ),
    }
}

impl Dashboard {
    /// Where `provider` sends the browser back to.
    fn redirect_uri(&self, provider: &str) -> String {
        format!("{}/account/callback/{provider}", self.public_url)
    }
}

async fn provider(dash: &Dashboard, name: &str) -> Result<Provider, Failure> {
    let name = name.to_owned();
    let providers = dash
        .admin(move |mut admin| async move { admin.providers().await })
        .await
        .map_err(|e| Failure::new(e.status(), e.text()))?;
    providers
        .into_iter()
        .find(|p| p.name == *name)
        .ok_or_else(|| Failure::new(StatusCode::NOT_FOUND, "No such sign-in provider."))
}

/// `GET /account/signin/{name}`: to the provider.
#[handler]
pub(super) async fn start_signin(
    req: &Request,
    Path(name): Path<String>,
    dash: Data<&Arc<Dashboard>>,
) -> Response {
    let started = match too_many_starts(&dash, req) {
        Some(failure) => Err(failure),
        None => begin(&dash, &name, None).await,
    };
    match started {
        Ok(Started { url, cookie }) => {
            let mut response = see_other(&url);
            response.headers_mut().append(header::SET_COOKIE, cookie);
            response
        }
        Err(failure) => failed(failure),
    }
}

/// At most [`STARTS_PER_MINUTE`] sign-ins (links, sign-ins again) started a minute per
/// client IP (counted as the API counts a page's clients: an IPv6 /64, `X-Forwarded-For`
/// from a trusted proxy); beyond, the 429 to answer.
pub(super) fn too_many_starts(dash: &Dashboard, req: &Request) -> Option<Failure> {
    let ip = dash.client(req);
    dash.starts
        .admit(0, ip, STARTS_PER_MINUTE, std::time::SystemTime::now())
        .err()
        .map(|e| Failure {
            status: StatusCode::TOO_MANY_REQUESTS,
            text: format!(
                "Too many sign-ins were started from your address; try again in {} seconds.",
                e.retry_after
            ),
            retry_after: Some(e.retry_after),
        })
}

/// A sign-in started: where to send the browser, and the sign-in state's cookie.
pub(super) struct Started {
    pub url: String,
    pub cookie: poem::http::HeaderValue,
}

/// Starts a sign-in with provider `name`: kept (its state hashed) until its callback, the
/// state in a cookie. `session`: the signed-in session a link or a sign-in again is for,
/// which alone completes it; the person is then asked to sign in at the provider again.
pub(super) async fn begin(
    dash: &Arc<Dashboard>,
    name: &str,
    session: Option<(SignInPurpose, &Session)>,
) -> Result<Started, Failure> {
    let provider = provider(dash, name).await?;
    let (http, redirect) = (dash.http.clone(), dash.redirect_uri(name));
    let again = session.is_some();
    let authorization = dash
        .outside(move || {
            flow::authorize(&http, &provider, &redirect, again)
                .map_err(|e| signin_failure(provider.name.as_str(), e))
        })
        .await
        .map_err(|e| Failure::new(e.status(), e.text()))??;
    let flow::Authorization {
        url,
        state,
        nonce,
        verifier,
    } = authorization;
    let now = now_unix();
    let pending = SignIn {
        provider: ProviderName::new(name),
        nonce,
        verifier,
        link_account: session.map(|(_, s)| s.account()),
        purpose: session.map_or(SignInPurpose::SignIn, |(purpose, _)| purpose),
        session_hash: session.map(|(_, s)| s.hash),
        started_at: now,
    };
    let state_hash = dashboard::token_hash(state.expose_secret());
    dash.admin(move |mut admin| async move { admin.put_signin(&state_hash, &pending, now).await })
        .await
        .map_err(|e| Failure::new(StatusCode::INTERNAL_SERVER_ERROR, e.text()))?;
    let cookie = dash.set_cookie(
        dash.cookies().signin,
        state.expose_secret(),
        dashboard::SIGNIN_SECS,
        dash.cookies().signin_path,
    );
    Ok(Started { url, cookie })
}

#[derive(Deserialize)]
pub(super) struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// `GET /account/callback/{name}`: the provider sends the browser back here.
#[handler]
pub(super) async fn callback(
    req: &Request,
    Path(name): Path<String>,
    Query(answer): Query<Callback>,
    dash: Data<&Arc<Dashboard>>,
) -> Response {
    let mut response = finish(&dash, req, &name, answer)
        .await
        .unwrap_or_else(failed);
    // The state served once, whatever came of it.
    response.headers_mut().append(
        header::SET_COOKIE,
        dash.set_cookie(dash.cookies().signin, "", 0, dash.cookies().signin_path),
    );
    response
}

async fn finish(
    dash: &Arc<Dashboard>,
    req: &Request,
    name: &str,
    answer: Callback,
) -> Result<Response, Failure> {
    let bad = |text: &str| Failure::new(StatusCode::BAD_REQUEST, text);
    let lacking = || bad("The provider's answer lacks its code or state.");
    // The state first, whatever else the URL says: anyone can send a browser here with
    // any query, and only a sign-in this browser started may have its answer shown.
    let Some(state) = answer.state else {
        return Err(lacking());
    };
    // The state must be the one this browser started with, and unused.
    let cookie_state = cookie(req, dash.cookies().signin).unwrap_or_default();
    if dashboard::token_hash(&cookie_state) != dashboard::token_hash(&state) {
        return Err(bad(
            "This sign-in was not started in this browser (its state does not match); start again.",
        ));
    }
    let state_hash = dashboard::token_hash(&state);
    let now = now_unix();
    let pending = dash
        .admin(move |mut admin| async move { admin.take_signin(&state_hash, now).await })
        .await
        .map_err(|e| Failure::new(StatusCode::INTERNAL_SERVER_ERROR, e.text()))?
        .ok_or_else(|| bad("This sign-in expired or was already used; start again."))?;
    if pending.provider != *name {
        return Err(bad(
            "This sign-in was started with another provider; start again.",
        ));
    }
    if let Some(error) = answer.error {
        return Err(provider_refused(
            name,
            &error,
            answer.error_description.as_deref(),
        ));
    }
    let Some(code) = answer.code else {
        return Err(lacking());
    };
    let provider = provider(dash, name).await?;
    let (http, redirect) = (dash.http.clone(), dash.redirect_uri(name));
    let SignIn {
        nonce,
        verifier,
        link_account,
        purpose,
        session_hash,
        started_at: pending_started_at,
        ..
    } = pending;
    // A link or a sign-in again completes only in the session that started it, still
    // live: a state planted in another browser (cookie tossing) would otherwise link the
    // victim's identity to the planter's account (review L1). Checked before the code is
    // redeemed.
    let own = match purpose {
        SignInPurpose::SignIn => None,
        SignInPurpose::Link | SignInPurpose::Again => {
            let own = dash.session(req).await.ok().filter(|session| {
                Some(session.hash) == session_hash
                    && link_account.as_ref() == Some(&session.account())
            });
            let Some(own) = own else {
                return Err(Failure::new(StatusCode::FORBIDDEN, elsewhere(purpose)));
            };
            Some(own)
        }
    };
    let again = own.is_some();
    let started_at = pending_started_at;
    let identity = dash
        .outside(move || {
            let back = flow::Returned {
                redirect: &redirect,
                code,
                verifier: &verifier,
                nonce,
                now,
                again,
                started_at,
            };
            flow::identity(&http, &provider, back)
                .map_err(|e| signin_failure(provider.name.as_str(), e))
        })
        .await
        .map_err(|e| Failure::new(e.status(), e.text()))??;

    let refused = |e: crate::api::ApiError| {
        let limited = e.status() == StatusCode::TOO_MANY_REQUESTS;
        Failure {
            status: if e.is_server_error() {
                StatusCode::INTERNAL_SERVER_ERROR
            } else if limited {
                e.status()
            } else {
                StatusCode::FORBIDDEN
            },
            text: e.text().to_owned(),
            // The new accounts of an address are counted per UTC day: until its end.
            retry_after: limited.then(|| (86_400 - now.rem_euclid(86_400)) as u64),
        }
    };
    match (purpose, own) {
        (SignInPurpose::Link, Some(session)) => {
            // Linked only once the customer confirms it on our page (`link`).
            let offer = LinkOffer { identity, at: now };
            let hash = session.hash;
            dash.admin(move |mut admin| async move { admin.offer_link(&hash, Some(&offer)).await })
                .await
                .map_err(refused)?;
            return Ok(see_other("/account/link"));
        }
        (SignInPurpose::Again, Some(session)) => {
            return signed_in_again(dash, session, identity, now)
                .await
                .map_err(refused);
        }
        _ => {}
    }
    let signups = dash.signups(req);
    let client_text = req
        .header(header::USER_AGENT)
        .map(|ua| ua.chars().take(200).collect::<String>());
    // A sign-in ends the session this browser had (of whichever account).
    let previous = dash
        .session(req)
        .await
        .ok()
        .map(|s| (s.account(), s.row.public_id));
    let address = crate::api::access::RequestMeta::of(req)
        .client_ip(&dash.trusted_proxies)
        .map_or_else(|| "an unknown address".to_owned(), |ip| ip.to_string());
    let how = format!(
        "signed in with {} ({}, subject {}) from {address}, {}",
        identity.provider.as_str(),
        identity.issuer,
        identity.subject,
        client_text.as_deref().unwrap_or("no User-Agent")
    );
    let session_id = dashboard::random_token();
    let (public_id, csrf) = (
        SessionId::new(dashboard::new_session_id()),
        dashboard::random_token().into(),
    );
    let id_hash = dashboard::token_hash(&session_id);
    dash.admin(move |mut admin| async move {
        // Refused (closed sign-ups, too many new accounts), it ends nothing.
        let signed_in = admin.sign_in(&identity, &signups, now).await?;
        if let Some((account, public_id)) = previous {
            admin.end_session(&account, &public_id, now).await?;
        }
        let row = SessionRow {
            public_id,
            account_id: signed_in.account_id,
            csrf,
            created_at: now,
            client: client_text,
            identity: Some(SessionIdentity::of(&identity)),
            // Recent only as far as the provider says the person signed in there lately
            // (`auth_time`): a pass through its own session is not a new sign-in.
            authenticated_at: identity.signed_in_at.map_or(0, |at| at.min(now)),
            link_offer: None,
        };
        admin.create_session(&id_hash, &row, &how).await?;
        Ok::<_, AccountError>(())
    })
    .await
    .map_err(refused)?;
    let mut response = see_other("/account");
    response.headers_mut().append(
        header::SET_COOKIE,
        dash.set_cookie(
            dash.cookies().session,
            &session_id,
            dashboard::ABSOLUTE_SECS,
            "/",
        ),
    );
    Ok(response)
}

/// The page's text when a link or a sign-in again comes back to another browser or
/// session than the one that started it.
fn elsewhere(purpose: SignInPurpose) -> &'static str {
    match purpose {
        SignInPurpose::Link => {
            "This link was started in another session; sign in and link again from your \
             dashboard."
        }
        _ => {
            "This sign-in again was started in another session; start it again from your \
             dashboard."
        }
    }
}

/// A session's sign-in again came back with `identity`: it must be the identity the
/// session was opened with (`reauth` starts none for a session that has none recorded);
/// the session's changes are then open for the next 15 minutes.
async fn signed_in_again(
    dash: &Arc<Dashboard>,
    session: Session,
    identity: IdentityView,
    now: i64,
) -> Result<Response, ApiError> {
    let (hash, account, actor) = (session.hash, session.account(), session.actor());
    if !session
        .row
        .identity
        .is_some_and(|known| known.is(&identity))
    {
        return Err(ApiError::forbidden(
            "You signed in again as another identity than this session's; sign in again as \
             the same person to make this change.",
        ));
    }
    dash.admin_as(actor, move |mut admin| async move {
        admin
            .prove_session(&account, &hash, &SessionIdentity::of(&identity), now)
            .await
    })
    .await?;
    Ok(see_other("/account"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_error_shows_a_fixed_text_per_code_and_nothing_of_the_url() {
        let cases = [
            (
                "access_denied",
                403,
                "The sign-in was declined at the provider; nothing was changed.",
            ),
            (
                "login_required",
                400,
                "The provider asks you to sign in there first; start again.",
            ),
            (
                "consent_required",
                400,
                "The provider needs your consent to sign you in here; start again and give it.",
            ),
            (
                "interaction_required",
                400,
                "The provider needs you on its own pages first; start again.",
            ),
            (
                "account_selection_required",
                400,
                "The provider asks you to choose an account; start again.",
            ),
            (
                "invalid_request",
                502,
                "The provider found this service's sign-in request invalid; tell the operator of this service.",
            ),
            (
                "unauthorized_client",
                502,
                "The provider does not allow this service to sign you in this way; tell the operator of this service.",
            ),
            (
                "unsupported_response_type",
                502,
                "The provider does not support this service's way of signing in; tell the operator of this service.",
            ),
            (
                "invalid_scope",
                502,
                "The provider refused the access this service asks for; tell the operator of this service.",
            ),
            (
                "server_error",
                502,
                "The provider failed while signing you in; try again later.",
            ),
            (
                "temporarily_unavailable",
                502,
                "The provider is temporarily unavailable; try again later.",
            ),
            (
                "Call +1-555-0100",
                400,
                "The provider refused the sign-in; start again.",
            ),
            ("", 400, "The provider refused the sign-in; start again."),
        ];
        for (code, status, text) in cases {
            let failure = provider_refused(
                "p1",
                code,
                Some("Your account is suspended. Call +1-555-0100"),
            );
            assert_eq!(
                (failure.status.as_u16(), failure.text.as_str()),
                (status, text),
                "{code}"
            );
        }
    }
}
