//! The OpenID Connect client of sign-in: the provider's metadata by discovery, the
//! authorization URL of the code flow with PKCE (S256), `state` and `nonce`, and the
//! code exchanged for an ID token checked by the `openidconnect` crate (signature from the
//! JWKS, `iss`, `aud`, `exp`, `nonce`). The crate's HTTP requests go through our ureq
//! agent (redirects off, bounded in time: [`outside_agent`]).
//!
//! `--kind google` is this with Google's issuer. `--kind microsoft` reads the metadata of
//! `{base}/{tenant}/v2.0` itself: for `common`, `organizations` and `consumers` it names
//! the issuer `.../{tenantid}/v2.0`, which the crate's discovery refuses, so the ID token's
//! `iss` is checked here as Microsoft's own libraries check it: equal to the metadata's
//! issuer with `{tenantid}` replaced by the token's `tid` (and `tid` one of
//! `--allowed-tenant`, when given). The identity is then (that issuer, `sub`).
//!
//! Each call blocks while it talks to the provider: the dashboard runs it on the store's
//! threads for outside calls (`Accounts::outside`), never the API's.

use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreProviderMetadata};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointMaybeSet, EndpointNotSet,
    EndpointSet, HttpRequest, HttpResponse, IssuerUrl, JsonWebKeySet, Nonce, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, Scope, TokenResponse,
};
use secrecy::{ExposeSecret, SecretString};

use super::flow::Returned;
use super::{IdentityView, Provider, store::OUTSIDE_TIMEOUT};
use crate::domain::dashboard::{self, ProviderKind};

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
    /// The person signed in at the provider, but is not one this provider admits here
    /// (`--allowed-org`, `--allowed-tenant`): the text says why, to them.
    #[error("{0}")]
    NotAllowed(String),
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

impl Authorization {
    /// A sign-in sending the browser to `url`, with its `state`, `nonce` and PKCE
    /// `verifier` to keep.
    pub(super) fn new(
        url: impl ToString,
        state: String,
        nonce: String,
        verifier: &PkceCodeVerifier,
    ) -> Authorization {
        Authorization {
            url: url.to_string(),
            state: state.into(),
            nonce,
            verifier: verifier.secret().clone().into(),
        }
    }
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
    let (client, _) = client(http, provider, redirect)?;
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let request = client
        .authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            || CsrfToken::new(dashboard::random_token()),
            || Nonce::new(dashboard::random_token()),
        )
        .add_scope(Scope::new("email".to_string()))
        .set_pkce_challenge(challenge);
    let (url, state, nonce) = request.url();
    Ok(Authorization::new(
        url,
        state.into_secret(),
        nonce.secret().clone(),
        &verifier,
    ))
}

/// The identity `provider` vouches for: the code exchanged (with the sign-in's PKCE
/// verifier) for an ID token, checked against the sign-in's nonce. Its e-mail address only
/// when the provider says it is verified.
pub fn identity(
    http: &ureq::Agent,
    provider: &Provider,
    back: Returned<'_>,
) -> Result<IdentityView, SignInError> {
    let (client, metadata_issuer) = client(http, provider, back.redirect)?;
    let refused = |why: String| {
        tracing::warn!(provider = %provider.name, "sign-in refused: {why}");
        SignInError::Unverified
    };
    let exchange = client
        .exchange_code(AuthorizationCode::new(back.code))
        .map_err(|e| refused(e.to_string()))?
        .set_pkce_verifier(PkceCodeVerifier::new(
            back.verifier.expose_secret().to_owned(),
        ));
    let tokens = exchange
        .request(&http_client(http))
        .map_err(|e| refused(error_chain(&e)))?;
    let id_token = tokens
        .id_token()
        .ok_or_else(|| refused("no ID token".into()))?;
    let microsoft = provider.kind == ProviderKind::Microsoft;
    // Microsoft's issuer is checked below, against the token's own tenant.
    let verifier = client.id_token_verifier().require_issuer_match(!microsoft);
    let claims = id_token
        .claims(&verifier, &Nonce::new(back.nonce))
        .map_err(|e| refused(error_chain(&e)))?;
    if microsoft {
        let tid = tenant_of(&id_token.to_string()).map_err(&refused)?;
        let expected = dashboard::microsoft_issuer(&metadata_issuer, &tid);
        if expected.as_deref() != Some(claims.issuer().as_str()) {
            return Err(refused(format!(
                "the ID token's issuer {} is not the issuer of its tid {tid} ({expected:?})",
                claims.issuer().as_str()
            )));
        }
        if !provider.allowed.is_empty() && !provider.allowed.contains(&tid) {
            tracing::info!(provider = %provider.name, %tid, "sign-in refused: tenant not allowed");
            return Err(SignInError::NotAllowed(
                "Your Microsoft account belongs to an organization (tenant) that may not sign in here; sign in with an account of an allowed organization.".into(),
            ));
        }
    }
    let email = claims
        .email()
        .filter(|_| claims.email_verified() == Some(true))
        .map(|e| e.as_str().to_owned());
    Ok(IdentityView {
        issuer: claims.issuer().as_str().to_owned(),
        subject: claims.subject().as_str().to_owned(),
        provider: provider.name.clone(),
        email,
        // Not `preferred_username`: unverified (Microsoft's is a UPN that reads like an
        // e-mail address any tenant may choose).
        name: None,
        created_at: back.now,
    })
}

/// The `tid` claim of an ID token (already verified: signature, audience, expiry, nonce),
/// read from its payload, which the crate's standard claims do not carry.
fn tenant_of(jwt: &str) -> Result<String, String> {
    use base64::Engine;
    let payload = jwt.split('.').nth(1).ok_or("the ID token has no payload")?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|e| format!("the ID token's payload: {e}"))?;
    let claims: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("the ID token's payload: {e}"))?;
    match claims.get("tid").and_then(|t| t.as_str()) {
        Some(tid) if !tid.is_empty() => Ok(tid.to_owned()),
        _ => Err("the ID token has no tid".into()),
    }
}

/// An answer's body as JSON (at most 1 MiB read).
pub(super) fn json<T: serde::de::DeserializeOwned>(
    response: &mut ureq::http::Response<ureq::Body>,
) -> Result<T, String> {
    let bytes = response
        .body_mut()
        .with_config()
        .limit(1 << 20)
        .read_to_vec()
        .map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
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

/// The provider's client, from its discovery document (read now), and the issuer that
/// document names.
fn client(
    http: &ureq::Agent,
    provider: &Provider,
    redirect: &str,
) -> Result<(Client, String), SignInError> {
    let unreachable = |why: String| {
        tracing::warn!(provider = %provider.name, "OpenID discovery failed: {why}");
        SignInError::Unreachable
    };
    let issuer = IssuerUrl::new(provider.issuer.clone()).map_err(|e| unreachable(e.to_string()))?;
    let metadata = match provider.kind {
        ProviderKind::Microsoft => microsoft_metadata(http, &issuer),
        _ => {
            CoreProviderMetadata::discover(&issuer, &http_client(http)).map_err(|e| error_chain(&e))
        }
    }
    .map_err(unreachable)?;
    let metadata_issuer = metadata.issuer().as_str().to_owned();
    let redirect = RedirectUrl::new(redirect.to_owned()).map_err(|e| unreachable(e.to_string()))?;
    let client = CoreClient::from_provider_metadata(
        metadata,
        ClientId::new(provider.client_id.clone()),
        Some(ClientSecret::new(
            provider.client_secret.expose_secret().to_owned(),
        )),
    )
    .set_redirect_uri(redirect);
    Ok((client, metadata_issuer))
}

/// Microsoft's metadata and keys, read as the crate's discovery reads them but without its
/// check that the document's issuer is the URL asked (a multi-tenant document names
/// `{tenantid}`); the issuer must still be of the same host, with the placeholder at most.
fn microsoft_metadata(
    http: &ureq::Agent,
    issuer: &IssuerUrl,
) -> Result<CoreProviderMetadata, String> {
    let url = format!(
        "{}/.well-known/openid-configuration",
        issuer.as_str().trim_end_matches('/')
    );
    let mut response = http.get(&url).call().map_err(|e| e.to_string())?;
    if response.status() != 200 {
        return Err(format!("{url} answered {}", response.status()));
    }
    let metadata: CoreProviderMetadata = json(&mut response).map_err(|e| format!("{url}: {e}"))?;
    if !dashboard::microsoft_metadata_fits(issuer.as_str(), metadata.issuer().as_str()) {
        return Err(format!(
            "{url} names the issuer {}, not one of {}",
            metadata.issuer().as_str(),
            issuer.as_str()
        ));
    }
    let jwks = JsonWebKeySet::fetch(metadata.jwks_uri(), &http_client(http))
        .map_err(|e| error_chain(&e))?;
    Ok(metadata.set_jwks(jwks))
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
