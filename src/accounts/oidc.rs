//! The OpenID Connect client of sign-in: the provider's metadata by discovery, the
//! authorization URL of the code flow with PKCE (S256), `state` and `nonce`, and the
//! code exchanged for an ID token checked by the `openidconnect` crate (signature from the
//! JWKS, `iss`, `aud`, `exp`, `nonce`). The crate's HTTP requests go through our ureq
//! agent (redirects off, bounded in time: [`outside_agent`]).
//!
//! Each call blocks while it talks to the provider: the dashboard runs it on the store's
//! threads for outside calls (`Accounts::outside`), never the API's.

use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreProviderMetadata};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointMaybeSet, EndpointNotSet,
    EndpointSet, HttpRequest, HttpResponse, IssuerUrl, Nonce, PkceCodeChallenge, PkceCodeVerifier,
    RedirectUrl, Scope, TokenResponse,
};
use secrecy::{ExposeSecret, SecretString};

use super::{IdentityView, Provider, store::OUTSIDE_TIMEOUT};
use crate::domain::dashboard;

type Client = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// The agent of every call to a provider or Stripe: no redirects (the `openidconnect`
/// crate's SSRF warning), 4xx and 5xx as answers, not errors, and at most
/// [`OUTSIDE_TIMEOUT`] in all.
pub fn outside_agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .timeout_global(Some(OUTSIDE_TIMEOUT))
        .build()
        .into()
}

/// Why a sign-in with a provider failed (the reason itself is logged, not shown).
#[derive(Debug, thiserror::Error)]
pub enum SignInError {
    /// Its discovery document could not be read (or its issuer or our redirect URI is
    /// not a URL).
    #[error("the provider could not be reached")]
    Unreachable,
    /// Its answer could not be verified: an expired or used code, or a token not meant
    /// for this service.
    #[error("the provider's answer could not be verified")]
    Unverified,
}

/// Where to send the browser, and what its callback must be checked against.
pub struct Authorization {
    /// The provider's authorization URL.
    pub url: String,
    /// The `state`, which the browser keeps in a cookie and the provider sends back.
    pub state: SecretString,
    pub nonce: String,
    /// The PKCE code verifier.
    pub verifier: SecretString,
}

impl std::fmt::Debug for Authorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorization")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// The authorization URL of a sign-in with `provider`, whose callback is `redirect`.
pub fn authorize(
    http: &ureq::Agent,
    provider: &Provider,
    redirect: &str,
) -> Result<Authorization, SignInError> {
    let client = client(http, provider, redirect)?;
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
    Ok(Authorization {
        url: url.to_string(),
        state: state.secret().clone().into(),
        nonce: nonce.secret().clone(),
        verifier: verifier.secret().clone().into(),
    })
}

/// The identity `provider` vouches for: `code` exchanged (with the sign-in's PKCE
/// `verifier`) for an ID token, checked against the sign-in's `nonce`. Its e-mail
/// address only when the provider says it is verified; `now` is when it is linked.
pub fn identity(
    http: &ureq::Agent,
    provider: &Provider,
    redirect: &str,
    code: String,
    verifier: &SecretString,
    nonce: String,
    now: i64,
) -> Result<IdentityView, SignInError> {
    let client = client(http, provider, redirect)?;
    let refused = |why: String| {
        tracing::warn!(provider = %provider.name, "sign-in refused: {why}");
        SignInError::Unverified
    };
    let exchange = client
        .exchange_code(AuthorizationCode::new(code))
        .map_err(|e| refused(e.to_string()))?
        .set_pkce_verifier(PkceCodeVerifier::new(verifier.expose_secret().to_owned()));
    let tokens = exchange
        .request(&http_client(http))
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
    Ok(IdentityView {
        issuer: claims.issuer().as_str().to_owned(),
        subject: claims.subject().as_str().to_owned(),
        provider: provider.name.clone(),
        email,
        created_at: now,
    })
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

/// The provider's client, from its discovery document (read now).
fn client(http: &ureq::Agent, provider: &Provider, redirect: &str) -> Result<Client, SignInError> {
    let unreachable = |why: String| {
        tracing::warn!(provider = %provider.name, "OpenID discovery failed: {why}");
        SignInError::Unreachable
    };
    let issuer = IssuerUrl::new(provider.issuer.clone()).map_err(|e| unreachable(e.to_string()))?;
    let metadata = CoreProviderMetadata::discover(&issuer, &http_client(http))
        .map_err(|e| unreachable(error_chain(&e)))?;
    let redirect = RedirectUrl::new(redirect.to_owned()).map_err(|e| unreachable(e.to_string()))?;
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
