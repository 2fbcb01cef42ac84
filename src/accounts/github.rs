//! Sign-in with GitHub (`--kind github`): GitHub's OAuth web flow, which is OAuth 2.0 and
//! not OpenID Connect (no discovery, no ID token), and its REST API for who signed in.
//!
//! - The browser goes to `{github}/login/oauth/authorize` with `state` and a PKCE S256
//!   challenge (GitHub checks the verifier at the token exchange).
//! - The code is exchanged at `{github}/login/oauth/access_token` with the client secret,
//!   the redirect URI and the verifier, asking for JSON. GitHub answers a bad, used or
//!   expired code with HTTP 200 and `{"error": "bad_verification_code"}`: the body
//!   decides, not the status.
//! - `GET {api}/user` and `GET {api}/user/emails`, the token in `Authorization: Bearer`,
//!   never in a URL. With `--allowed-org`, `GET {api}/user/memberships/orgs/{org}` for
//!   each until one is active.
//!
//! The identity is (the GitHub's address, the numeric user id): a login is released on
//! rename and anyone may take it, the id never changes. The e-mail shown is the primary
//! one when GitHub says it is verified; a new account without one is named after the
//! login.

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::flow::Returned;
use super::oidc::{Authorization, SignInError, json};
use super::{IdentityView, Provider};
use crate::domain::dashboard;

/// The authorization URL of a sign-in with `provider` (no call to GitHub).
pub fn authorize(
    provider: &Provider,
    redirect: &str,
    again: bool,
) -> Result<Authorization, SignInError> {
    let mut url = url::Url::parse(&format!("{}/login/oauth/authorize", provider.issuer))
        .map_err(|e| unreachable(provider, e.to_string()))?;
    let (challenge, verifier) = openidconnect::PkceCodeChallenge::new_random_sha256();
    let state = dashboard::random_token();
    let scope = match provider.allowed.is_empty() {
        true => "read:user user:email",
        false => "read:user user:email read:org",
    };
    url.query_pairs_mut()
        .append_pair("client_id", &provider.client_id)
        .append_pair("redirect_uri", redirect)
        .append_pair("scope", scope)
        .append_pair("state", &state)
        .append_pair("code_challenge", challenge.as_str())
        .append_pair("code_challenge_method", "S256")
        .append_pair("allow_signup", "true");
    if again {
        // GitHub has no `prompt=login`: it shows its account picker, so the person
        // chooses (and GitHub may ask them to sign in) rather than pass through.
        url.query_pairs_mut()
            .append_pair("prompt", "select_account");
    }
    // GitHub has no ID token to carry a nonce; the sign-in row keeps one all the same.
    let nonce = dashboard::random_token();
    Ok(Authorization::new(url, state, nonce, &verifier))
}

/// The GitHub user the code stands for, exchanged with the sign-in's PKCE verifier.
pub fn identity(
    http: &ureq::Agent,
    provider: &Provider,
    back: Returned<'_>,
) -> Result<IdentityView, SignInError> {
    let token = access_token(http, provider, &back)?;
    let api = dashboard::github_api(&provider.issuer);
    let user: User = get(http, provider, &token, &format!("{api}/user"))?
        .ok_or_else(|| refused(provider, "/user answered 403 or 404".into()))?;
    let emails: Vec<Email> =
        get(http, provider, &token, &format!("{api}/user/emails"))?.unwrap_or_default();
    if !provider.allowed.is_empty() && !member(http, provider, &token, &api)? {
        tracing::info!(provider = %provider.name, login = %user.login, "sign-in refused: not a member of an allowed organization");
        return Err(SignInError::NotAllowed(format!(
            "Your GitHub account {} is not a member of {} (or has not granted this service access to it); only members may sign in here.",
            user.login,
            provider.allowed.join(", ")
        )));
    }
    let email = emails
        .into_iter()
        .find(|e| e.primary && e.verified)
        .map(|e| e.email);
    Ok(IdentityView {
        issuer: provider.issuer.clone(),
        subject: user.id.to_string(),
        provider: provider.name.clone(),
        email,
        name: Some(user.login),
        created_at: back.now,
        // GitHub says nothing of when its user signed in there: its sign-in counts as
        // now (docs/account.md: a sign-in again at GitHub is its account picker).
        signed_in_at: Some(back.now),
    })
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

#[derive(Deserialize)]
struct User {
    id: u64,
    login: String,
}

#[derive(Deserialize)]
struct Email {
    email: String,
    primary: bool,
    verified: bool,
}

#[derive(Deserialize)]
struct Membership {
    state: String,
}

fn unreachable(provider: &Provider, why: String) -> SignInError {
    tracing::warn!(provider = %provider.name, "GitHub could not be reached: {why}");
    SignInError::Unreachable
}

fn refused(provider: &Provider, why: String) -> SignInError {
    tracing::warn!(provider = %provider.name, "sign-in refused: {why}");
    SignInError::Unverified
}

fn access_token(
    http: &ureq::Agent,
    provider: &Provider,
    back: &Returned<'_>,
) -> Result<SecretString, SignInError> {
    let url = format!("{}/login/oauth/access_token", provider.issuer);
    let mut response = http
        .post(&url)
        .header("Accept", "application/json")
        .header("User-Agent", "postal")
        .send_form([
            ("client_id", provider.client_id.as_str()),
            ("client_secret", provider.client_secret.expose_secret()),
            ("code", back.code.as_str()),
            ("redirect_uri", back.redirect),
            ("code_verifier", back.verifier.expose_secret()),
        ])
        .map_err(|e| unreachable(provider, e.to_string()))?;
    let status = response.status();
    if status.is_server_error() {
        return Err(unreachable(
            provider,
            format!("the token endpoint answered {status}"),
        ));
    }
    let answer: TokenAnswer = json(&mut response).map_err(|e| {
        refused(
            provider,
            format!("the token endpoint's answer ({status}): {e}"),
        )
    })?;
    match (answer.access_token, answer.error) {
        (Some(token), None) if status.is_success() => Ok(token.into()),
        (_, error) => Err(refused(
            provider,
            format!(
                "the token endpoint answered {status}: {} {}",
                error.unwrap_or_default(),
                answer.error_description.unwrap_or_default()
            ),
        )),
    }
}

/// `url` of GitHub's API with the user's token, as JSON; `None` on 404.
fn get<T: serde::de::DeserializeOwned>(
    http: &ureq::Agent,
    provider: &Provider,
    token: &SecretString,
    url: &str,
) -> Result<Option<T>, SignInError> {
    let mut response = http
        .get(url)
        .header(
            "Authorization",
            &format!("Bearer {}", token.expose_secret()),
        )
        .header("Accept", "application/vnd.github+json")
        .header("X-GitHub-Api-Version", "2022-11-28")
        .header("User-Agent", "postal")
        .call()
        .map_err(|e| unreachable(provider, e.to_string()))?;
    let status = response.status();
    match status.as_u16() {
        200 => json(&mut response)
            .map(Some)
            .map_err(|e| unreachable(provider, format!("{url}: {e}"))),
        403 | 404 => Ok(None),
        // A token GitHub does not take (revoked between the exchange and now).
        401 => Err(refused(provider, format!("{url} answered 401"))),
        _ => Err(unreachable(provider, format!("{url} answered {status}"))),
    }
}

/// Whether the user is an active member of one of the provider's allowed organizations.
fn member(
    http: &ureq::Agent,
    provider: &Provider,
    token: &SecretString,
    api: &str,
) -> Result<bool, SignInError> {
    for org in &provider.allowed {
        let url = format!("{api}/user/memberships/orgs/{org}");
        let membership: Option<Membership> = get(http, provider, token, &url)?;
        if membership.is_some_and(|m| m.state == "active") {
            return Ok(true);
        }
    }
    Ok(false)
}
