//! The signed-in customer: `/account/api/me` (who is signed in, their balance, limits,
//! identities and CSRF token), unlinking an identity, and signing out.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};
use secrecy::ExposeSecret;

use super::answers::{Failed, Read, SignOut, Unlink};
use super::extract::{Body, Changing, DashboardBody, Recent, Signed};
use super::limits::LimitsBody;
use super::shared::rfc3339;
use super::{Dashboard, now_unix};
use crate::accounts::AccountError;
use crate::api::ApiTags;

/// A provider identity linked to the account.
#[derive(Debug, Object)]
pub struct IdentityBody {
    /// The name of the provider it signed in with.
    pub provider: String,
    pub issuer: String,
    pub subject: String,
    /// Only when the provider said it is verified.
    pub email: Option<String>,
    #[oai(rename = "linkedAt")]
    pub linked_at: String,
}

/// Who is signed in, their balance and limits, and the CSRF token of their changes.
/// (`Debug` by hand: it leaves out the token.)
#[derive(Object)]
pub struct MeBody {
    #[oai(rename = "accountId")]
    pub account_id: String,
    pub name: Option<String>,
    /// USD.
    pub balance: f64,
    /// Queries the balance pays for at 0.000028 USD.
    #[oai(rename = "queriesLeft")]
    pub queries_left: i64,
    pub limits: LimitsBody,
    pub identities: Vec<IdentityBody>,
    /// The providers offered (`/account/link/{name}` links one).
    pub providers: Vec<String>,
    #[oai(rename = "sessionId")]
    pub session_id: String,
    /// Send it as `X-CSRF-Token` with every change.
    #[oai(rename = "csrfToken")]
    pub csrf_token: String,
}

impl std::fmt::Debug for MeBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeBody")
            .field("account_id", &self.account_id)
            .field("name", &self.name)
            .field("balance", &self.balance)
            .field("queries_left", &self.queries_left)
            .field("limits", &self.limits)
            .field("identities", &self.identities)
            .field("providers", &self.providers)
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Object)]
pub struct UnlinkRequest {
    pub issuer: String,
    pub subject: String,
}

impl DashboardBody for UnlinkRequest {}

#[derive(Debug, Object)]
pub struct UnlinkedBody {
    pub unlinked: bool,
}

#[derive(Debug, Object)]
pub struct SignedOutBody {
    #[oai(rename = "signedOut")]
    pub signed_out: bool,
}

#[derive(ApiResponse)]
pub enum SignedOut {
    /// Signed out; the session cookie is deleted.
    #[oai(status = 200)]
    Ok(Json<SignedOutBody>, #[oai(header = "Set-Cookie")] String),
}

/// `/account/api/me`.
pub struct MeApi;

#[OpenApi(prefix_path = "/account/api", tag = "ApiTags::Account")]
impl MeApi {
    /// Who is signed in: account, balance, limits, identities, and the CSRF token.
    #[oai(path = "/me", method = "get", operation_id = "accountMe")]
    async fn me(
        &self,
        dash: Data<&Arc<Dashboard>>,
        signed: Signed,
    ) -> Result<Json<MeBody>, Failed<Read>> {
        let session = signed.0;
        let account = session.account();
        let (view, identities, providers) = dash
            .admin(move |mut admin| async move {
                Ok::<_, AccountError>((
                    admin.show(&account).await?,
                    admin.identities(&account).await?,
                    admin.providers().await?,
                ))
            })
            .await?;
        Ok(Json(MeBody {
            account_id: view.account_id.into(),
            name: view.name,
            balance: view.balance.to_usd(),
            queries_left: view.balance.get() / crate::domain::money::PRICE_PER_QUERY.get(),
            limits: view.limits.into(),
            identities: identities
                .into_iter()
                .map(|i| IdentityBody {
                    provider: i.provider.into(),
                    issuer: i.issuer,
                    subject: i.subject,
                    email: i.email,
                    linked_at: rfc3339(i.created_at),
                })
                .collect(),
            providers: providers.into_iter().map(|p| p.name.into()).collect(),
            session_id: session.row.public_id.into(),
            csrf_token: session.row.csrf.expose_secret().to_owned(),
        }))
    }
}

/// `/account/api/identities/unlink` (a struct of its own: the document lists it after the
/// sessions).
pub struct UnlinkApi;

#[OpenApi(prefix_path = "/account/api", tag = "ApiTags::Account")]
impl UnlinkApi {
    /// Unlinks an identity; the account keeps at least one, and an unlinked identity
    /// cannot sign in again (nor make a new account).
    #[oai(
        path = "/identities/unlink",
        method = "post",
        operation_id = "unlinkIdentity"
    )]
    async fn unlink(
        &self,
        dash: Data<&Arc<Dashboard>>,
        changing: Recent,
        body: Body<UnlinkRequest>,
    ) -> Result<Json<UnlinkedBody>, Failed<Unlink>> {
        let (account, actor) = (changing.0.account(), changing.0.actor());
        let UnlinkRequest { issuer, subject } = body.0;
        let now = now_unix();
        dash.admin_as(actor, move |mut admin| async move {
            admin.unlink(&account, &issuer, &subject, now).await
        })
        .await?;
        Ok(Json(UnlinkedBody { unlinked: true }))
    }
}

/// `/account/api/signout` (a struct of its own: the document lists it last but the
/// top-ups).
pub struct SignOutApi;

#[OpenApi(prefix_path = "/account/api", tag = "ApiTags::Account")]
impl SignOutApi {
    /// Ends this session and deletes its cookie.
    #[oai(path = "/signout", method = "post", operation_id = "signOut")]
    async fn signout(
        &self,
        dash: Data<&Arc<Dashboard>>,
        changing: Changing,
    ) -> Result<SignedOut, Failed<SignOut>> {
        let session = changing.0;
        let (account, id, actor) = (
            session.account(),
            session.row.public_id.clone(),
            session.actor(),
        );
        let now = now_unix();
        dash.admin_as(actor, move |mut admin| async move {
            admin.end_session(&account, &id, now).await
        })
        .await?;
        let cookie = dash.set_cookie(dash.cookies().session, "", 0, "/");
        Ok(SignedOut::Ok(
            Json(SignedOutBody { signed_out: true }),
            cookie.to_str().unwrap_or("").to_owned(),
        ))
    }
}
