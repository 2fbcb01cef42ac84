//! A sign-in at a provider, whatever its kind: where to send the browser, and who came
//! back. OpenID Connect kinds (`oidc`, `google`, `microsoft`) are `oidc`'s; GitHub's OAuth
//! web flow is `github`'s. Each call blocks while it talks to the provider: the dashboard
//! runs it on the store's threads for outside calls (`Accounts::outside`).

use secrecy::SecretString;

pub use super::oidc::{Authorization, SignInError};
use super::{IdentityView, Provider, github, oidc};
use crate::domain::dashboard::ProviderKind;
use crate::domain::outside;

/// The authorization URL of a sign-in with `provider`, whose callback is `redirect`.
/// `again`: the person must sign in at the provider again, whatever session they have
/// there (a link, or a session's sign-in again): OpenID Connect's `prompt=login` and
/// `max_age=0`, GitHub's `prompt=select_account`.
pub fn authorize(
    http: &ureq::Agent,
    provider: &Provider,
    redirect: &str,
    again: bool,
) -> Result<Authorization, SignInError> {
    address_allowed(provider)?;
    match provider.kind {
        ProviderKind::Github => github::authorize(provider, redirect, again),
        ProviderKind::Oidc | ProviderKind::Google | ProviderKind::Microsoft => {
            oidc::authorize(http, provider, redirect, again)
        }
    }
}

/// What the provider sent back, with what the sign-in kept for it.
pub struct Returned<'a> {
    /// The callback URI the sign-in named (the code is bound to it).
    pub redirect: &'a str,
    pub code: String,
    /// The sign-in's PKCE code verifier.
    pub verifier: &'a SecretString,
    /// The sign-in's nonce (checked in the ID token; GitHub has none).
    pub nonce: String,
    /// When the identity is linked (unix seconds).
    pub now: i64,
    /// Whether the sign-in asked the person to sign in again (`authorize`'s `again`): an
    /// ID token's `auth_time`, when it has one, must then be after `started_at`.
    pub again: bool,
    /// When the sign-in started (unix seconds).
    pub started_at: i64,
}

/// The identity `provider` vouches for: the code exchanged with the sign-in's PKCE
/// verifier (and its nonce checked, where there is an ID token).
pub fn identity(
    http: &ureq::Agent,
    provider: &Provider,
    back: Returned<'_>,
) -> Result<IdentityView, SignInError> {
    address_allowed(provider)?;
    match provider.kind {
        ProviderKind::Github => github::identity(http, provider, back),
        ProviderKind::Oidc | ProviderKind::Google | ProviderKind::Microsoft => {
            oidc::identity(http, provider, back)
        }
    }
}

/// Whether the provider's stored address (its issuer, or the GitHub's) passes
/// `domain::outside`'s rule: checked at each sign-in too, since `provider add` refuses
/// only what is added from now on.
fn address_allowed(provider: &Provider) -> Result<(), SignInError> {
    if outside::allowed(&provider.issuer) {
        return Ok(());
    }
    tracing::warn!(
        provider = %provider.name,
        issuer = %provider.issuer,
        "sign-in refused: the provider's address is refused: only {}",
        outside::RULE
    );
    Err(SignInError::Unreachable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::ProviderName;

    fn github_at(url: &str) -> Provider {
        Provider {
            name: ProviderName::new("gh"),
            kind: ProviderKind::Github,
            issuer: url.to_owned(),
            client_id: "postal".to_owned(),
            client_secret: "secret".to_owned().into(),
            allowed: Vec::new(),
        }
    }

    #[test]
    fn a_provider_stored_with_plain_http_off_loopback_signs_nobody_in() {
        let http = super::super::oidc::outside_agent();
        let redirect = "https://api.example.com/account/callback/gh";
        // GitHub's sign-in starts without a call: only the rule stops it.
        let refused = authorize(
            &http,
            &github_at("http://github.example.com"),
            redirect,
            false,
        );
        assert!(
            matches!(refused, Err(SignInError::Unreachable)),
            "{refused:?}"
        );
        let started = authorize(&http, &github_at("http://127.0.0.1:9"), redirect, false);
        assert!(started.is_ok(), "{started:?}");
    }
}
