//! Sign-in with an OpenID Connect provider: the authorization code flow with PKCE (S256),
//! `state` and `nonce`, the provider's metadata by discovery, the ID token checked by the
//! `openidconnect` crate (signature from the JWKS, `iss`, `aud`, `exp`, `nonce`). The
//! crate's HTTP requests go through our ureq agent (redirects off).
//!
//! `GET /account/signin/{name}` keeps the sign-in (state hashed, nonce, PKCE verifier) in
//! the database and the state in a cookie, then sends the browser to the provider;
//! `GET /account/callback/{name}` takes the sign-in once (a replayed or foreign state
//! finds none), checks the cookie's state, exchanges the code and checks the ID token. An
//! identity is (issuer, subject): its first sign-in makes an account with the free
//! allowance; a signed-in customer may link a second provider (`/account/link/{name}`).
//! Never by e-mail address.

use std::sync::Arc;

use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreProviderMetadata};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointMaybeSet, EndpointNotSet,
    EndpointSet, HttpRequest, HttpResponse, IssuerUrl, Nonce, PkceCodeChallenge, PkceCodeVerifier,
    RedirectUrl, Scope, TokenResponse,
};
use poem::http::{StatusCode, header};
use poem::web::{Data, Path, Query};
use poem::{Request, Response, handler};
use secrecy::ExposeSecret;
use serde::Deserialize;

use super::{Dashboard, SIGNIN_COOKIE, STARTS_PER_MINUTE, cookie, now_unix, see_other};
use crate::accounts::{AccountError, IdentityView, Provider, SessionRow, SignIn};
use crate::domain::dashboard;

type Client = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// Why a sign-in failed, shown to the person on a page (and its status).
struct Failure {
    status: StatusCode,
    text: String,
}

impl Failure {
    fn new(status: StatusCode, text: impl Into<String>) -> Failure {
        Failure {
            status,
            text: text.into(),
        }
    }
}

fn failed(f: Failure) -> Response {
    super::page::message(f.status, "Sign-in failed", &f.text)
}

/// The HTTP client the crate calls: our agent, the answer read whole (at most 1 MiB).
fn http_client(
    agent: &ureq::Agent,
) -> impl Fn(HttpRequest) -> Result<HttpResponse, ureq::Error> + '_ {
    move |request: HttpRequest| {
        let response = agent.run(request)?;
        let (parts, mut body) = response.into_parts();
        let bytes = body.with_config().limit(1 << 20).read_to_vec()?;
        Ok(HttpResponse::from_parts(parts, bytes))
    }
}

/// The provider's client, from its discovery document (read now, on a blocking thread).
fn client(dash: &Dashboard, provider: &Provider) -> Result<Client, Failure> {
    let unreachable = |why: String| {
        tracing::warn!(provider = %provider.name, "OpenID discovery failed: {why}");
        Failure::new(
            StatusCode::BAD_GATEWAY,
            format!(
                "The provider {} could not be reached; try again later.",
                provider.name
            ),
        )
    };
    let issuer = IssuerUrl::new(provider.issuer.clone()).map_err(|e| unreachable(e.to_string()))?;
    let metadata = CoreProviderMetadata::discover(&issuer, &http_client(&dash.http))
        .map_err(|e| unreachable(error_chain(&e)))?;
    let redirect = RedirectUrl::new(format!(
        "{}/account/callback/{}",
        dash.public_url, provider.name
    ))
    .map_err(|e| unreachable(e.to_string()))?;
    Ok(CoreClient::from_provider_metadata(
        metadata,
        ClientId::new(provider.client_id.clone()),
        Some(ClientSecret::new(
            provider.client_secret.expose_secret().to_owned(),
        )),
    )
    .set_redirect_uri(redirect))
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

async fn provider(dash: &Dashboard, name: &str) -> Result<Provider, Failure> {
    let name = name.to_owned();
    let providers = dash
        .admin(move |mut admin| async move { admin.providers().await })
        .await
        .map_err(|e| Failure::new(e.status(), e.text()))?;
    providers
        .into_iter()
        .find(|p| p.name == name)
        .ok_or_else(|| Failure::new(StatusCode::NOT_FOUND, "No such sign-in provider."))
}

/// `GET /account/signin/{name}`: to the provider.
#[handler]
pub(super) async fn start_signin(
    req: &Request,
    Path(name): Path<String>,
    dash: Data<&Arc<Dashboard>>,
) -> Response {
    if let Some(refused) = refused_start(&dash, req) {
        return refused;
    }
    start(&dash, &name, None).await.unwrap_or_else(failed)
}

/// At most [`STARTS_PER_MINUTE`] sign-ins started a minute per client IP (counted as the
/// API counts a page's clients: an IPv6 /64, `X-Forwarded-For` from a trusted proxy);
/// beyond, the 429 page (with `Retry-After`) to answer.
fn refused_start(dash: &Dashboard, req: &Request) -> Option<Response> {
    let ip = crate::api::access::RequestMeta::of(req)
        .client_ip(&dash.trusted_proxies)
        .map_or(
            std::net::IpAddr::from([0, 0, 0, 0]),
            crate::api::access::counted_as,
        );
    dash.starts
        .admit(0, ip, STARTS_PER_MINUTE, std::time::SystemTime::now())
        .err()
        .map(|e| {
            let mut page = super::page::message(
                StatusCode::TOO_MANY_REQUESTS,
                "Too many sign-ins",
                &format!(
                    "Too many sign-ins were started from your address; try again in {} seconds.",
                    e.retry_after
                ),
            );
            if let Ok(value) = e.retry_after.to_string().parse() {
                page.headers_mut().insert(header::RETRY_AFTER, value);
            }
            page
        })
}

/// `GET /account/link/{name}`: to the provider, to link its identity to the signed-in
/// account.
#[handler]
pub(super) async fn link(
    req: &Request,
    Path(name): Path<String>,
    dash: Data<&Arc<Dashboard>>,
) -> Response {
    let Ok(session) = dash.session(req).await else {
        return see_other("/account");
    };
    if let Some(refused) = refused_start(&dash, req) {
        return refused;
    }
    start(&dash, &name, Some(session.account()))
        .await
        .unwrap_or_else(failed)
}

async fn start(
    dash: &Arc<Dashboard>,
    name: &str,
    link_account: Option<String>,
) -> Result<Response, Failure> {
    let provider = provider(dash, name).await?;
    let worker = dash.clone();
    let (url, state, nonce, verifier) = dash
        .outside(move || {
            let client = client(&worker, &provider)?;
            let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
            let (url, state, nonce) = client
                .authorize_url(
                    CoreAuthenticationFlow::AuthorizationCode,
                    || CsrfToken::new(dashboard::random_token()),
                    || Nonce::new(dashboard::random_token()),
                )
                .add_scope(Scope::new("email".to_string()))
                .set_pkce_challenge(challenge)
                .url();
            Ok::<_, Failure>((url, state, nonce, verifier))
        })
        .await
        .map_err(|e| Failure::new(e.status(), e.text()))??;
    let pending = SignIn {
        provider: name.to_owned(),
        nonce: nonce.secret().clone(),
        verifier: verifier.secret().clone().into(),
        link_account,
    };
    let state_hash = dashboard::token_hash(state.secret());
    let now = now_unix();
    dash.admin(move |mut admin| async move { admin.put_signin(&state_hash, &pending, now).await })
        .await
        .map_err(|e| Failure::new(StatusCode::INTERNAL_SERVER_ERROR, e.text()))?;
    let mut response = see_other(url.as_str());
    response.headers_mut().append(
        header::SET_COOKIE,
        dash.set_cookie(
            SIGNIN_COOKIE,
            state.secret(),
            dashboard::SIGNIN_SECS,
            "/account/callback",
        ),
    );
    Ok(response)
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
        dash.set_cookie(SIGNIN_COOKIE, "", 0, "/account/callback"),
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
    if let Some(error) = answer.error {
        let said = answer.error_description.unwrap_or_default();
        return Err(match error.as_str() {
            "access_denied" => Failure::new(
                StatusCode::FORBIDDEN,
                "The sign-in was declined at the provider; nothing was changed.",
            ),
            _ => bad(&format!("The provider refused the sign-in: {error} {said}")),
        });
    }
    let (Some(code), Some(state)) = (answer.code, answer.state) else {
        return Err(bad("The provider's answer lacks its code or state."));
    };
    // The state must be the one this browser started with, and unused.
    let cookie_state = cookie(req, SIGNIN_COOKIE).unwrap_or_default();
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
    if pending.provider != name {
        return Err(bad(
            "This sign-in was started with another provider; start again.",
        ));
    }
    let provider = provider(dash, name).await?;
    let worker = dash.clone();
    let provider_name = provider.name.clone();
    let nonce = pending.nonce.clone();
    let verifier = pending.verifier.clone();
    let identity = dash.outside(move || {
        let client = client(&worker, &provider)?;
        let refused = |why: String| {
            tracing::warn!(provider = %provider.name, "sign-in refused: {why}");
            Failure::new(
                StatusCode::BAD_REQUEST,
                "The provider's answer could not be verified (an expired or used code, or a token not meant for this service); start again.",
            )
        };
        let exchange = client
            .exchange_code(AuthorizationCode::new(code))
            .map_err(|e| refused(e.to_string()))?
            .set_pkce_verifier(PkceCodeVerifier::new(
                verifier.expose_secret().to_owned(),
            ));
        let tokens = exchange
            .request(&http_client(&worker.http))
            .map_err(|e| refused(error_chain(&e)))?;
        let id_token = tokens
            .id_token()
            .ok_or_else(|| refused("no ID token".into()))?;
        let claims = id_token
            .claims(&client.id_token_verifier(), &Nonce::new(nonce))
            .map_err(|e| refused(error_chain(&e)))?;
        let email = claims
            .email()
            .filter(|_| claims.email_verified() == Some(true))
            .map(|e| e.as_str().to_owned());
        Ok::<_, Failure>(IdentityView {
            issuer: claims.issuer().as_str().to_owned(),
            subject: claims.subject().as_str().to_owned(),
            provider: provider_name,
            email,
            created_at: now,
        })
    })
    .await
    .map_err(|e| Failure::new(e.status(), e.text()))??;

    let refused = |e: crate::api::ApiError| {
        Failure::new(
            if e.is_server_error() {
                StatusCode::INTERNAL_SERVER_ERROR
            } else {
                StatusCode::FORBIDDEN
            },
            e.text(),
        )
    };
    if let Some(account) = pending.link_account {
        dash.admin(move |mut admin| async move { admin.link(&account, &identity, now).await })
            .await
            .map_err(refused)?;
        return Ok(see_other("/account"));
    }
    let signups_open = dash.signups_open;
    let client_text = req
        .header(header::USER_AGENT)
        .map(|ua| ua.chars().take(200).collect::<String>());
    let session_id = dashboard::random_token();
    let row = SessionRow {
        public_id: dashboard::new_session_id(),
        account_id: String::new(),
        csrf: dashboard::random_token().into(),
        created_at: now,
        client: client_text,
    };
    let id_hash = dashboard::token_hash(&session_id);
    dash.admin(move |mut admin| async move {
        let signed_in = admin.sign_in(&identity, signups_open, now).await?;
        let row = SessionRow {
            account_id: signed_in.account_id,
            ..row
        };
        admin.create_session(&id_hash, &row).await?;
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
