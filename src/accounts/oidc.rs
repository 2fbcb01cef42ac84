//! The OpenID Connect client of sign-in: the provider's metadata by discovery, the
//! authorization URL of the code flow with PKCE (S256), `state` and `nonce`, and the
//! code exchanged for an ID token checked by the `openidconnect` crate (signature from the
//! JWKS, `iss`, `aud`, `exp`, `nonce`). The crate's HTTP requests go through our ureq
//! agent (redirects off, bounded in time, https only off loopback: [`outside_agent`]).
//!
//! What the provider's metadata says is not taken on trust: every endpoint it names must
//! pass `domain::outside`'s rule (a sign-in is refused otherwise), and the ID token's
//! signature must be in an asymmetric algorithm ([`ID_TOKEN_ALGS`]) whatever the metadata
//! lists: the crate would otherwise copy its `id_token_signing_alg_values_supported` and
//! take HS256, keyed with the client secret, from whoever holds that secret.
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

use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreIdTokenVerifier, CoreJwsSigningAlgorithm,
    CoreProviderMetadata,
};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointMaybeSet, EndpointNotSet,
    EndpointSet, HttpRequest, HttpResponse, IssuerUrl, JsonWebKeySet, Nonce, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, Scope, TokenResponse,
};
use secrecy::{ExposeSecret, SecretString};

use super::flow::Returned;
use super::{IdentityView, Provider, store::OUTSIDE_TIMEOUT};
use crate::domain::dashboard::{self, ProviderKind};
use crate::domain::outside;

type Client = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// The agent of every call to a provider or Stripe: no redirects (the `openidconnect`
/// crate's SSRF warning), 4xx and 5xx as answers, not errors, at most
/// [`OUTSIDE_TIMEOUT`] in all, and no request that `domain::outside` refuses (plain http
/// off loopback), whoever built its URL.
pub fn outside_agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .timeout_global(Some(OUTSIDE_TIMEOUT))
        .middleware(only_allowed)
        .build()
        .into()
}

/// The agent's guard: a request to a URL off `domain::outside`'s rule fails before any
/// lookup or connection (ureq's `https_only` would refuse the tests' loopback stand-ins).
fn only_allowed(
    request: ureq::http::Request<ureq::SendBody>,
    next: ureq::middleware::MiddlewareNext,
) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
    let uri = request.uri();
    if !outside::allowed_parts(uri.scheme_str().unwrap_or(""), uri.host().unwrap_or("")) {
        return Err(ureq::Error::RequireHttpsOnly(format!(
            "{uri} (only {})",
            outside::RULE
        )));
    }
    next.handle(request)
}

/// The algorithms an ID token may be signed in: RSA (PKCS#1 v1.5 and PSS), ECDSA P-256
/// and P-384, EdDSA. Never HS256/384/512 (keyed with the client secret), nor `none`.
pub const ID_TOKEN_ALGS: [CoreJwsSigningAlgorithm; 9] = [
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha384,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha512,
    CoreJwsSigningAlgorithm::RsaSsaPssSha256,
    CoreJwsSigningAlgorithm::RsaSsaPssSha384,
    CoreJwsSigningAlgorithm::RsaSsaPssSha512,
    CoreJwsSigningAlgorithm::EcdsaP256Sha256,
    CoreJwsSigningAlgorithm::EcdsaP384Sha384,
    CoreJwsSigningAlgorithm::EdDsa,
];

/// The client's ID-token verifier with [`ID_TOKEN_ALGS`] in place of the algorithms the
/// provider's metadata lists.
fn id_token_verifier(client: &Client) -> CoreIdTokenVerifier<'_> {
    client.id_token_verifier().set_allowed_algs(ID_TOKEN_ALGS)
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

/// The URL without its query, which carries the `state`.
impl std::fmt::Debug for Authorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let endpoint = self.url.split(['?', '#']).next().unwrap_or_default();
        f.debug_struct("Authorization")
            .field("endpoint", &endpoint)
            .finish_non_exhaustive()
    }
}

/// How far the provider's clock may be behind ours when its `auth_time` is compared
/// with the start of a sign-in again.
const CLOCK_SKEW_SECS: i64 = 60;

/// The authorization URL of a sign-in with `provider`, whose callback is `redirect`.
pub fn authorize(
    http: &ureq::Agent,
    provider: &Provider,
    redirect: &str,
    again: bool,
) -> Result<Authorization, SignInError> {
    let (client, _) = client(http, provider, redirect)?;
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let mut request = client
        .authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            || CsrfToken::new(dashboard::random_token()),
            || Nonce::new(dashboard::random_token()),
        )
        .add_scope(Scope::new("email".to_string()))
        .set_pkce_challenge(challenge);
    request = match again {
        true => request
            .add_prompt(openidconnect::core::CoreAuthPrompt::Login)
            .set_max_age(std::time::Duration::ZERO),
        // A plain sign-in may pass through the provider's own session; `max_age` (as long
        // as a session lives) makes its ID token say when the person last signed in
        // (`auth_time`), which tells whether the session starts recent (`RECENT_SIGNIN_SECS`).
        false => request.set_max_age(std::time::Duration::from_secs(
            dashboard::ABSOLUTE_SECS as u64,
        )),
    };
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
    let verifier = id_token_verifier(&client).require_issuer_match(!microsoft);
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
    let signed_in_at = claims.auth_time().map(|at| at.timestamp());
    if back.again
        && let Some(at) = signed_in_at
        && at < back.started_at - CLOCK_SKEW_SECS
    {
        // Asked to sign in again (`max_age=0`), the provider says the person last signed
        // in before this sign-in started: a session it kept, not a new sign-in.
        return Err(refused(format!(
            "asked to sign in again, the ID token's auth_time {at} is older than the sign-in ({})",
            back.started_at
        )));
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
        signed_in_at,
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
    .map_err(&unreachable)?;
    endpoints_allowed(&metadata).map_err(unreachable)?;
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

/// Whether every endpoint of the metadata this server calls or sends a browser to passes
/// `domain::outside`'s rule (its JWKS was read through the agent, which refuses the same).
/// `userinfo_endpoint` is not one: the identity comes from the ID token alone.
fn endpoints_allowed(metadata: &CoreProviderMetadata) -> Result<(), String> {
    let named = [
        (
            "authorization_endpoint",
            Some(metadata.authorization_endpoint().as_str()),
        ),
        (
            "token_endpoint",
            metadata.token_endpoint().map(|u| u.as_str()),
        ),
        ("jwks_uri", Some(metadata.jwks_uri().as_str())),
    ];
    for (field, url) in named {
        if let Some(url) = url.filter(|url| !outside::allowed(url)) {
            return Err(format!(
                "the discovery document's {field} {url:?} is refused: only {}",
                outside::RULE
            ));
        }
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use hmac::{Hmac, KeyInit, Mac};
    use openidconnect::core::CoreIdToken;
    use serde_json::json;
    use sha2::Sha256;

    use super::*;

    const ISSUER: &str = "https://idp.example.com";
    const SECRET: &str = "the-client-secret-of-postal-at-least-32-bytes";

    fn metadata(algs: &[&str]) -> CoreProviderMetadata {
        serde_json::from_value(json!({
            "issuer": ISSUER,
            "authorization_endpoint": format!("{ISSUER}/auth"),
            "token_endpoint": format!("{ISSUER}/token"),
            "jwks_uri": format!("{ISSUER}/jwks"),
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": algs,
        }))
        .unwrap()
    }

    fn client(metadata: CoreProviderMetadata) -> Client {
        CoreClient::from_provider_metadata(
            metadata,
            ClientId::new("postal".into()),
            Some(ClientSecret::new(SECRET.into())),
        )
    }

    /// An ID token for `postal` signed HS256 with the client secret, as anyone who holds
    /// the secret can make one.
    fn hs256_token() -> CoreIdToken {
        use base64::Engine;
        let b64 = |v: serde_json::Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let signing_input = format!(
            "{}.{}",
            b64(json!({"alg": "HS256", "typ": "JWT"})),
            b64(json!({"iss": ISSUER, "sub": "anyone", "aud": "postal",
                       "iat": now, "exp": now + 600, "nonce": "n"}))
        );
        let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
        mac.update(signing_input.as_bytes());
        let signature =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{signing_input}.{signature}").parse().unwrap()
    }

    #[test]
    fn an_hs256_id_token_is_refused_though_the_metadata_lists_hs256() {
        let client = client(metadata(&["RS256", "HS256"]));
        let token = hs256_token();
        // What the crate does with the metadata's list alone: the token passes.
        assert!(
            token
                .claims(&client.id_token_verifier(), &Nonce::new("n".into()))
                .is_ok()
        );
        let refused = token.claims(&id_token_verifier(&client), &Nonce::new("n".into()));
        assert!(refused.is_err(), "an HS256 ID token was accepted");
    }

    #[test]
    fn only_asymmetric_algorithms_sign_an_id_token() {
        let names: Vec<String> = ID_TOKEN_ALGS
            .iter()
            .map(|alg| {
                serde_json::to_value(alg)
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(
            names,
            [
                "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"
            ]
        );
    }

    #[test]
    fn a_discovery_document_naming_plain_http_off_loopback_is_refused() {
        assert_eq!(endpoints_allowed(&metadata(&["RS256"])), Ok(()));
        for field in ["authorization_endpoint", "token_endpoint", "jwks_uri"] {
            let mut document = serde_json::to_value(metadata(&["RS256"])).unwrap();
            document[field] = json!("http://idp.example.com/x");
            let metadata: CoreProviderMetadata = serde_json::from_value(document).unwrap();
            assert_eq!(
                endpoints_allowed(&metadata),
                Err(format!(
                    "the discovery document's {field} \"http://idp.example.com/x\" is refused: only https, or http only to a loopback host (127.0.0.0/8, [::1], localhost)"
                ))
            );
        }
        let mut document = serde_json::to_value(metadata(&["RS256"])).unwrap();
        document["token_endpoint"] = json!("http://127.0.0.1:8080/token");
        document["userinfo_endpoint"] = json!("http://idp.example.com/userinfo");
        let metadata: CoreProviderMetadata = serde_json::from_value(document).unwrap();
        assert_eq!(endpoints_allowed(&metadata), Ok(()));
    }

    #[test]
    fn the_outside_agent_sends_nothing_over_plain_http_off_loopback() {
        let agent = outside_agent();
        match agent
            .get("http://idp.example.com/.well-known/openid-configuration")
            .call()
        {
            Err(ureq::Error::RequireHttpsOnly(why)) => assert_eq!(
                why,
                "http://idp.example.com/.well-known/openid-configuration (only https, or http only to a loopback host (127.0.0.0/8, [::1], localhost))"
            ),
            other => panic!("{other:?}"),
        }
        // On loopback it goes out (nothing listens on port 9).
        let on_loopback = agent.get("http://127.0.0.1:9/").call();
        assert!(
            !matches!(on_loopback, Err(ureq::Error::RequireHttpsOnly(_))),
            "{on_loopback:?}"
        );
    }
}
