//! `/account/api/alerts`: what the signed-in account hears of and where (docs/alerts.md):
//! its settings, its last deliveries, a test event and the webhook's signing secret.

use std::sync::Arc;

use poem::web::Data;
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use super::Dashboard;
use super::answers::{AlertsRead, Failed, RollSecret, SetAlerts, TestAlert};
use super::extract::{Body, Changing, DashboardBody, Signed};
use super::shared::{refused, rfc3339};
use crate::alerts::webhook;
use crate::api::{ApiError, ApiTags};
use crate::domain::alerts::{AlertSettings, AlertsView, DeliveryLine};
use crate::domain::money::Micros;

/// What the account hears of, and where.
#[derive(Debug, Object)]
pub struct AlertsRequest {
    /// `balance.low` when a charge takes the balance below this many USD (`"1.00"`);
    /// `null` or absent: never.
    #[oai(rename = "balanceBelow", validator(max_length = 20))]
    pub balance_below: Option<String>,
    /// `limit.near` when a rate-limit window's queries reach this percent of its limit;
    /// `null` or absent: never.
    #[oai(
        rename = "limitPercent",
        validator(minimum(value = "1"), maximum(value = "100"))
    )]
    pub limit_percent: Option<u8>,
    /// E-mail to the account's verified address (needs the operator's mail relay).
    pub email: bool,
    /// The https URL signed webhooks are posted to; `null` or absent: none.
    #[oai(rename = "webhookUrl", validator(max_length = 2000))]
    pub webhook_url: Option<String>,
}

impl DashboardBody for AlertsRequest {}

/// The settings as stored.
#[derive(Debug, Object)]
pub struct AlertSettingsBody {
    #[oai(rename = "balanceBelow")]
    pub balance_below: Option<String>,
    #[oai(rename = "limitPercent")]
    pub limit_percent: Option<u8>,
    pub email: bool,
    #[oai(rename = "webhookUrl")]
    pub webhook_url: Option<String>,
}

impl From<&AlertSettings> for AlertSettingsBody {
    fn from(s: &AlertSettings) -> Self {
        AlertSettingsBody {
            balance_below: s.balance_below.map(|m| m.to_string()),
            limit_percent: s.limit_percent,
            email: s.email,
            webhook_url: s.webhook_url.clone(),
        }
    }
}

/// One attempt to deliver an event.
#[derive(Debug, Object)]
pub struct DeliveryBody {
    /// The event's id (`msg_…`, the webhook's `webhook-id`).
    pub event: String,
    /// `balance.low`, `balance.empty`, `limit.near`, `topup.succeeded`, `key.created` or
    /// `test`.
    #[oai(rename = "type")]
    pub kind: String,
    /// `email` or `webhook`.
    pub channel: String,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// `pending`, `delivered`, `retrying` (another attempt follows) or `failed` (the last).
    pub status: String,
    /// When it was tried, or is due (RFC 3339, UTC).
    pub at: String,
    /// What the receiver answered (`HTTP 200`, `timed out after 10 s`, the relay's reply).
    pub result: Option<String>,
}

impl From<DeliveryLine> for DeliveryBody {
    fn from(d: DeliveryLine) -> Self {
        DeliveryBody {
            event: d.event,
            kind: d.kind,
            channel: d.channel,
            attempt: d.attempt,
            status: d.status,
            at: rfc3339(d.at),
            result: d.result,
        }
    }
}

#[derive(Debug, Object)]
pub struct AlertsAnswer {
    pub settings: AlertSettingsBody,
    /// The operator set a mail relay: without one, no e-mail is sent.
    #[oai(rename = "mailAvailable")]
    pub mail_available: bool,
    /// The account has a verified e-mail address (from a linked identity).
    #[oai(rename = "emailAddress")]
    pub email_address: bool,
    /// The last 50 attempts, newest first.
    pub deliveries: Vec<DeliveryBody>,
}

impl From<AlertsView> for AlertsAnswer {
    fn from(v: AlertsView) -> Self {
        AlertsAnswer {
            settings: (&v.settings).into(),
            mail_available: v.mail_available,
            email_address: v.email_address,
            deliveries: v.deliveries.into_iter().map(Into::into).collect(),
        }
    }
}

#[derive(Debug, Object)]
pub struct SetAlertsAnswer {
    pub settings: AlertSettingsBody,
    /// The webhook's signing secret (`whsec_…`), shown once: when `webhookUrl` was set or
    /// changed; absent otherwise.
    #[oai(rename = "webhookSecret", skip_serializing_if_is_none)]
    pub webhook_secret: Option<String>,
}

#[derive(Debug, Object)]
pub struct SecretAnswer {
    /// The webhook's new signing secret, shown once; the old one signs nothing from now.
    #[oai(rename = "webhookSecret")]
    pub webhook_secret: String,
}

#[derive(Debug, Object)]
pub struct TestAnswer {
    /// The test event's id.
    pub event: String,
    /// Where it goes: `email`, `webhook`; none when the account has no channel.
    pub channels: Vec<String>,
}

/// `/account/api/alerts`.
pub struct AlertsApi;

#[OpenApi(prefix_path = "/account/api", tag = "ApiTags::Account")]
impl AlertsApi {
    /// The account's alert settings and its last 50 delivery attempts.
    #[oai(path = "/alerts", method = "get", operation_id = "accountAlerts")]
    async fn alerts(
        &self,
        dash: Data<&Arc<Dashboard>>,
        signed: Signed,
    ) -> Result<Json<AlertsAnswer>, Failed<AlertsRead>> {
        let account = signed.0.account();
        let view = dash
            .admin(move |mut admin| async move { admin.alerts(&account).await })
            .await?;
        Ok(Json(view.into()))
    }

    /// Sets what the account hears of and where, all at once; a new or changed
    /// `webhookUrl` gets a new signing secret, answered once.
    #[oai(path = "/alerts", method = "put", operation_id = "setAlerts")]
    async fn set_alerts(
        &self,
        dash: Data<&Arc<Dashboard>>,
        changing: Changing,
        body: Body<AlertsRequest>,
    ) -> Result<Json<SetAlertsAnswer>, Failed<SetAlerts>> {
        let (account, actor) = (changing.0.account(), changing.0.actor());
        let request = body.0;
        let balance_below = request
            .balance_below
            .as_deref()
            .map(threshold)
            .transpose()?;
        if let Some(url) = request.webhook_url.clone() {
            let allow = dash.allow_private_webhooks;
            dash.outside(move || webhook::check_url(&url, allow))
                .await?
                .map_err(refused)?;
        }
        let settings = AlertSettings {
            balance_below,
            limit_percent: request.limit_percent,
            email: request.email,
            webhook_url: request.webhook_url,
        };
        let fresh = webhook::new_secret();
        let stored = settings.clone();
        let shown = dash
            .admin_as(actor, move |mut admin| async move {
                admin.set_alerts(&account, &stored, &fresh).await
            })
            .await?;
        Ok(Json(SetAlertsAnswer {
            settings: (&settings).into(),
            webhook_secret: shown,
        }))
    }

    /// Sends a `test` event to each of the account's channels.
    #[oai(path = "/alerts/test", method = "post", operation_id = "testAlerts")]
    async fn test(
        &self,
        dash: Data<&Arc<Dashboard>>,
        changing: Changing,
    ) -> Result<Json<TestAnswer>, Failed<TestAlert>> {
        let (account, actor) = (changing.0.account(), changing.0.actor());
        let (event, channels) = dash
            .admin_as(actor, move |mut admin| async move {
                admin.test_alert(&account).await
            })
            .await?;
        dash.accounts.wake_sender();
        Ok(Json(TestAnswer { event, channels }))
    }

    /// Gives the webhook a new signing secret, answered once.
    #[oai(
        path = "/alerts/roll-secret",
        method = "post",
        operation_id = "rollAlertSecret"
    )]
    async fn roll_secret(
        &self,
        dash: Data<&Arc<Dashboard>>,
        changing: Changing,
    ) -> Result<Json<SecretAnswer>, Failed<RollSecret>> {
        let (account, actor) = (changing.0.account(), changing.0.actor());
        let fresh = webhook::new_secret();
        let secret = fresh.clone();
        dash.admin_as(actor, move |mut admin| async move {
            admin.roll_alert_secret(&account, &secret).await
        })
        .await?;
        Ok(Json(SecretAnswer {
            webhook_secret: fresh,
        }))
    }
}

/// `balanceBelow`: a positive USD amount, at most 6 decimals.
fn threshold(text: &str) -> Result<Micros, ApiError> {
    match Micros::parse_usd(text) {
        Ok(m) if m > Micros::ZERO => Ok(m),
        _ => Err(refused(format!(
            "balanceBelow must be a positive USD amount such as \"1.00\": got {text:?}"
        ))),
    }
}
