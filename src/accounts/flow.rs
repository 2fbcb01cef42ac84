//! A sign-in at a provider, whatever its kind: where to send the browser, and who came
//! back. OpenID Connect kinds (`oidc`, `google`, `microsoft`) are `oidc`'s; GitHub's OAuth
//! web flow is `github`'s. Each call blocks while it talks to the provider: the dashboard
//! runs it on the store's threads for outside calls (`Accounts::outside`).

use secrecy::SecretString;

pub use super::oidc::{Authorization, SignInError};
use super::{IdentityView, Provider, github, oidc};
use crate::domain::dashboard::ProviderKind;

/// The authorization URL of a sign-in with `provider`, whose callback is `redirect`.
pub fn authorize(
    http: &ureq::Agent,
    provider: &Provider,
    redirect: &str,
) -> Result<Authorization, SignInError> {
    match provider.kind {
        ProviderKind::Github => github::authorize(provider, redirect),
        ProviderKind::Oidc | ProviderKind::Google | ProviderKind::Microsoft => {
            oidc::authorize(http, provider, redirect)
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
}

/// The identity `provider` vouches for: the code exchanged with the sign-in's PKCE
/// verifier (and its nonce checked, where there is an ID token).
pub fn identity(
    http: &ureq::Agent,
    provider: &Provider,
    back: Returned<'_>,
) -> Result<IdentityView, SignInError> {
    match provider.kind {
        ProviderKind::Github => github::identity(http, provider, back),
        ProviderKind::Oidc | ProviderKind::Google | ProviderKind::Microsoft => {
            oidc::identity(http, provider, back)
        }
    }
}
