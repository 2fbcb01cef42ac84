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

/// The identity `provider` vouches for: `code` exchanged with the sign-in's PKCE
/// `verifier` (and its `nonce` checked, where there is an ID token); `now` is when it is
/// linked.
pub fn identity(
    http: &ureq::Agent,
    provider: &Provider,
    redirect: &str,
    code: String,
    verifier: &SecretString,
    nonce: String,
    now: i64,
) -> Result<IdentityView, SignInError> {
    match provider.kind {
        ProviderKind::Github => github::identity(http, provider, redirect, code, verifier, now),
        ProviderKind::Oidc | ProviderKind::Google | ProviderKind::Microsoft => {
            oidc::identity(http, provider, redirect, code, verifier, nonce, now)
        }
    }
}
