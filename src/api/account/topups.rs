//! `/account/api/topups`: a signed-in customer adds funds by card (docs/payments.md). A
//! top-up is kept as pending, its Stripe Checkout Session made, and the browser sent to
//! its page (`accounts::stripe`); the credit comes with Stripe's webhook (`webhook`),
//! never from the browser's return.

use std::sync::Arc;

use super::answers::{Failed, Read, StartTopup};
use super::extract::{Body, DashboardBody, Recent, Signed};
use super::webhook::stripe_failed;
use super::{Dashboard, now_unix};
use crate::accounts::stripe;
use crate::accounts::{AccountError, TopupView};
use crate::api::{ApiError, ApiTags};
use crate::domain::ids::AccountId;
use crate::domain::money::{MIN_TOPUP, Micros};
use crate::domain::payments::{self, TopupStatus};
use poem::web::Data;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object, OpenApi};

/// The dashboard's top-up operations.
pub struct TopupsApi;

/// The amounts the page offers as buttons, USD (those within the operator's ceiling).
const PRESETS: [i64; 4] = [5, 20, 50, 100];

#[derive(Debug, Object)]
pub struct TopupRequest {
    /// USD in whole cents, as a string: at least "5.00", at most the server's `maximum`.
    #[oai(validator(max_length = 20))]
    pub amount: String,
}

impl DashboardBody for TopupRequest {}

/// A top-up made: pay it at `url` (Stripe's page); the balance grows when Stripe confirms.
#[derive(Debug, Object)]
pub struct TopupStarted {
    #[oai(rename = "topupId")]
    pub topup_id: String,
    /// The Stripe Checkout Session.
    #[oai(rename = "sessionId")]
    pub session_id: String,
    pub url: String,
}

#[derive(Debug, Object)]
pub struct TopupBody {
    #[oai(rename = "topupId")]
    pub topup_id: String,
    /// USD asked for.
    pub amount: f64,
    /// `pending`, `paid`, `expired` or `failed`.
    pub status: String,
    #[oai(rename = "createdAt")]
    pub created_at: String,
    #[oai(rename = "paidAt")]
    pub paid_at: Option<String>,
    /// USD paid and credited.
    pub credited: Option<f64>,
    /// USD refunded by the processor (taken back from the balance as far as it went).
    pub refunded: f64,
    /// The payment page, while pending.
    pub url: Option<String>,
}

impl TopupBody {
    fn of(t: TopupView) -> TopupBody {
        TopupBody {
            topup_id: t.topup_id.into(),
            amount: t.amount.to_usd(),
            status: t.status.as_str().to_owned(),
            created_at: crate::domain::date::rfc3339(t.created_at),
            paid_at: t.paid_at.map(crate::domain::date::rfc3339),
            credited: t.credited.map(Micros::to_usd),
            refunded: t.refunded.to_usd(),
            url: t.url,
        }
    }
}

/// Whether the server takes cards, its bounds, and the account's top-ups, newest first.
#[derive(Debug, Object)]
pub struct TopupsBody {
    /// Whether top-ups by card are set up on this server.
    pub enabled: bool,
    /// USD.
    pub minimum: f64,
    /// USD (0 when not enabled).
    pub maximum: f64,
    /// Amounts the page offers, USD.
    pub presets: Vec<f64>,
    /// Without card payments: how the operator tops the account up.
    #[oai(rename = "howTo", skip_serializing_if_is_none)]
    pub how_to: Option<String>,
    pub topups: Vec<TopupBody>,
}

#[derive(ApiResponse)]
pub enum Started {
    /// Pay at `url`; the top-up is pending until Stripe confirms the payment.
    #[oai(status = 201)]
    Created(Json<TopupStarted>),
}

#[OpenApi(prefix_path = "/account/api", tag = "ApiTags::Account")]
impl TopupsApi {
    /// Whether cards are taken, the bounds of a top-up, and the account's top-ups.
    #[oai(path = "/topups", method = "get", operation_id = "listTopups")]
    async fn topups(
        &self,
        dash: Data<&Arc<Dashboard>>,
        signed: Signed,
    ) -> Result<Json<TopupsBody>, Failed<Read>> {
        let account = signed.0.account();
        let wanted = account.clone();
        let (settings, topups) = dash
            .admin(move |mut admin| async move {
                Ok::<_, AccountError>((admin.payments().await?, admin.topups(&wanted).await?))
            })
            .await?;
        let maximum = settings.as_ref().map_or(Micros::ZERO, |s| s.max_topup);
        Ok(Json(TopupsBody {
            enabled: settings.is_some(),
            minimum: MIN_TOPUP.to_usd(),
            maximum: maximum.to_usd(),
            presets: PRESETS
                .iter()
                .filter_map(|usd| Micros::new(usd * 1_000_000))
                .filter(|p| *p <= maximum)
                .map(Micros::to_usd)
                .collect(),
            how_to: settings.is_none().then(|| not_set_up(&account)),
            topups: topups.into_iter().map(TopupBody::of).collect(),
        }))
    }

    /// Starts a top-up by card: a Stripe Checkout Session of exactly `amount` USD, whose
    /// page (`url`) the browser goes to. The balance grows by the amount paid once Stripe
    /// confirms the payment (its webhook), never before.
    #[oai(path = "/topups", method = "post", operation_id = "startTopup")]
    async fn start(
        &self,
        dash: Data<&Arc<Dashboard>>,
        changing: Recent,
        body: Body<TopupRequest>,
    ) -> Result<Started, Failed<StartTopup>> {
        let (account, actor) = (changing.0.account(), changing.0.actor());
        let amount = body.0.amount;
        let settings = dash
            .admin(move |mut admin| async move { admin.payments().await })
            .await?
            .ok_or_else(|| ApiError::forbidden(&not_set_up(&account)))?;
        let amount = payments::topup_amount(&amount, settings.max_topup)
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let now = now_unix();
        let owner = account.clone();
        let topup_id = dash
            .admin_as(actor.clone(), move |mut admin| async move {
                admin.start_topup(&owner, amount, now).await
            })
            .await?;
        let back = format!("{}/account?topup={topup_id}", dash.public_url);
        let (owner, made) = (account.clone(), topup_id.clone());
        let created = dash
            .stripe(move |http| {
                stripe::create_session(http, &settings, &owner, &made, amount, &back)
            })
            .await;
        let session = match created {
            Ok(session) => session,
            Err(e) => {
                let failed = topup_id.clone();
                dash.admin_as(actor, move |mut admin| async move {
                    admin
                        .close_topup(Some(&failed), None, TopupStatus::Failed)
                        .await
                })
                .await?;
                return Err(stripe_failed(e).into());
            }
        };
        let url = session.url.unwrap_or_default();
        let (opened, session_id, page) = (topup_id.clone(), session.id.clone(), url.clone());
        dash.admin(move |mut admin| async move {
            admin.topup_opened(&opened, &session_id, &page).await
        })
        .await?;
        Ok(Started::Created(Json(TopupStarted {
            topup_id: topup_id.into(),
            session_id: session.id,
            url,
        })))
    }
}

/// What a customer is told when the server takes no cards.
fn not_set_up(account: &AccountId) -> String {
    format!(
        "Top-ups by card are not set up on this server. The operator can top up this account: \
         postal account topup {account} --usd 5.00"
    )
}
