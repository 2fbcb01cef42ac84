//! Stripe, the card processor of top-ups (docs/payments.md): its API as this server calls
//! it (a Checkout Session made, then read back), and its webhook.
//!
//! `POST /account/stripe/webhook` takes Stripe's events. The `Stripe-Signature` is checked
//! over the raw body before anything else (`domain::payments::verify_signature`); a bad,
//! missing or stale one is 400 and changes nothing. A paid Checkout Session
//! (`checkout.session.completed` with `payment_status` `paid`, or
//! `checkout.session.async_payment_succeeded`) is read back from Stripe's API, as Stripe's
//! fulfilment guide asks, and its `amount_total` credited to the top-up it names, once
//! (`Admin::credit_payment`: the top-up's row moves to `paid` in the ledger row's
//! transaction). `charge.refunded` takes the refund back from the balance, never below
//! zero. Other events are answered 200 and ignored. A failure of ours (the ledger, Stripe's
//! API) is 5xx, and Stripe delivers the event again later, for up to three days.

use std::collections::HashMap;
use std::sync::Arc;

use poem::web::{Data, Json};
use poem::{Body, IntoResponse, Request, Response, handler};
use secrecy::ExposeSecret;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Dashboard, now_unix};
use crate::accounts::{Credited, Payment, PaymentSettings, Refunded};
use crate::api::ApiError;
use crate::domain::ids::TopupId;
use crate::domain::money::Micros;
use crate::domain::payments::{self, TopupStatus};

/// The largest event body taken (Stripe's events are a few KB).
const MAX_EVENT_BYTES: usize = 256 * 1024;

/// A Checkout Session as Stripe's API answers it (the fields this server reads).
#[derive(Debug, Deserialize)]
pub(super) struct CheckoutSession {
    pub id: String,
    pub url: Option<String>,
    #[serde(default)]
    pub payment_status: String,
    pub amount_total: Option<i64>,
    pub currency: Option<String>,
    pub client_reference_id: Option<String>,
    #[serde(default)]
    pub metadata: HashMap<String, String>,
    pub payment_intent: Option<Value>,
}

impl CheckoutSession {
    /// The PaymentIntent's id (`pi_…`), whether Stripe gave it as an id or expanded.
    fn payment(&self) -> Option<String> {
        match &self.payment_intent {
            Some(Value::String(id)) => Some(id.clone()),
            Some(Value::Object(o)) => o.get("id").and_then(Value::as_str).map(str::to_owned),
            _ => None,
        }
    }
}

/// Why a call to Stripe failed: it could not be reached (or failed itself: 5xx, 429), or
/// it refused the request (4xx: a setting of the operator's is wrong).
#[derive(Debug)]
pub(super) enum StripeError {
    Unreachable(String),
    Refused(String),
}

impl StripeError {
    /// How a customer's request answers it: 503 to retry, or 500 (the operator must look).
    pub(super) fn into_api_error(self) -> ApiError {
        match self {
            StripeError::Unreachable(why) => {
                tracing::warn!("Stripe could not be reached: {why}");
                ApiError::unavailable(
                    "The payment processor could not be reached; try again in a minute",
                    60,
                )
            }
            StripeError::Refused(why) => {
                ApiError::internal(anyhow::anyhow!("Stripe refused the request: {why}"))
            }
        }
    }
}

/// Calls Stripe's API (`method` on `path` of the settings' base, a form body or none),
/// on a blocking thread: the answer's JSON object, or why not.
async fn call(
    dash: &Dashboard,
    settings: &PaymentSettings,
    method: &'static str,
    path: String,
    form: Option<String>,
    idempotency_key: Option<String>,
) -> Result<CheckoutSession, StripeError> {
    let agent = dash.http.clone();
    let url = format!("{}{path}", settings.api_base);
    let auth = format!("Bearer {}", settings.secret_key.expose_secret());
    dash.outside(move || {
        let mut request = ureq::http::Request::builder()
            .method(method)
            .uri(&url)
            .header("Authorization", auth)
            .header("Accept", "application/json");
        if let Some(key) = idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        let sent = match form {
            Some(body) => agent.run(
                request
                    .header("Content-Type", "application/x-www-form-urlencoded")
                    .body(body)
                    .map_err(|e| StripeError::Refused(e.to_string()))?,
            ),
            None => agent.run(
                request
                    .body(())
                    .map_err(|e| StripeError::Refused(e.to_string()))?,
            ),
        };
        let response = sent.map_err(|e| StripeError::Unreachable(e.to_string()))?;
        let status = response.status().as_u16();
        let text = response
            .into_body()
            .with_config()
            .limit(1 << 20)
            .read_to_string()
            .map_err(|e| StripeError::Unreachable(e.to_string()))?;
        if status == 429 || status >= 500 {
            return Err(StripeError::Unreachable(format!(
                "{method} {path}: {status}"
            )));
        }
        if status >= 400 {
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                .unwrap_or(text);
            return Err(StripeError::Refused(format!(
                "{method} {path}: {status} {message}"
            )));
        }
        serde_json::from_str(&text).map_err(|e| {
            StripeError::Refused(format!("{method} {path}: an answer not understood: {e}"))
        })
    })
    .await
    .map_err(|e| StripeError::Unreachable(e.text().to_owned()))?
}

/// Makes the Checkout Session of top-up `topup_id`: one line item of exactly `amount`
/// USD, the account as `client_reference_id`, the top-up in its metadata (and its
/// PaymentIntent's), back to the dashboard after payment or cancel. The top-up's id is
/// the `Idempotency-Key`: a retried creation gives the same session.
pub(super) async fn create_session(
    dash: &Dashboard,
    settings: &PaymentSettings,
    account_id: &str,
    topup_id: &TopupId,
    amount: Micros,
) -> Result<CheckoutSession, StripeError> {
    let back = format!("{}/account?topup={topup_id}", dash.public_url);
    let cents = payments::cents(amount).to_string();
    let name = format!("postal API credit ({amount} USD)");
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("mode", "payment")
        .append_pair("line_items[0][price_data][currency]", "usd")
        .append_pair("line_items[0][price_data][unit_amount]", &cents)
        .append_pair("line_items[0][price_data][product_data][name]", &name)
        .append_pair("line_items[0][quantity]", "1")
        .append_pair("client_reference_id", account_id)
        .append_pair("metadata[topup_id]", topup_id.as_str())
        .append_pair("metadata[account_id]", account_id)
        .append_pair("payment_intent_data[metadata][topup_id]", topup_id.as_str())
        .append_pair("payment_intent_data[metadata][account_id]", account_id)
        .append_pair("success_url", &back)
        .append_pair("cancel_url", &format!("{back}&cancelled=1"))
        .finish();
    let session = call(
        dash,
        settings,
        "POST",
        "/v1/checkout/sessions".to_owned(),
        Some(form),
        Some(topup_id.to_string()),
    )
    .await?;
    if session.url.is_none() {
        return Err(StripeError::Refused(format!(
            "Checkout Session {} has no url",
            session.id
        )));
    }
    Ok(session)
}

/// The Checkout Session as Stripe's API has it now.
async fn retrieve_session(
    dash: &Dashboard,
    settings: &PaymentSettings,
    session_id: &str,
) -> Result<CheckoutSession, StripeError> {
    call(
        dash,
        settings,
        "GET",
        format!("/v1/checkout/sessions/{session_id}"),
        None,
        None,
    )
    .await
}

/// An event as Stripe posts it.
#[derive(Debug, Deserialize)]
struct Event {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    data: EventData,
}

#[derive(Debug, Deserialize)]
struct EventData {
    object: Value,
}

/// Stripe's ids are ASCII letters, digits and `_`: anything else is not one (and never
/// reaches a URL path).
fn stripe_id<'a>(value: &'a Value, field: &str) -> Result<&'a str, ApiError> {
    value[field]
        .as_str()
        .filter(|id| {
            !id.is_empty()
                && id.len() <= 255
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        })
        .ok_or_else(|| ApiError::bad_request(format!("Invalid event: no valid '{field}'")))
}

/// `POST /account/stripe/webhook`.
#[handler]
pub(super) async fn webhook(req: &Request, body: Body, dash: Data<&Arc<Dashboard>>) -> Response {
    match receive(req, body, &dash).await {
        Ok(outcome) => Json(json!({"received": true, "outcome": outcome})).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn receive(req: &Request, body: Body, dash: &Arc<Dashboard>) -> Result<String, ApiError> {
    let raw = crate::api::contract::read_whole(body, MAX_EVENT_BYTES, "Invalid event body").await?;
    let settings = dash
        .admin(move |mut admin| async move { admin.payments().await })
        .await?
        .ok_or_else(|| ApiError::bad_request("Card payments are not set up on this server"))?;
    let now = now_unix();
    payments::verify_signature(
        req.header("Stripe-Signature"),
        &raw,
        settings.webhook_secret.expose_secret(),
        now,
    )
    .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let event: Event =
        serde_json::from_slice(&raw).map_err(|_| ApiError::bad_request("Invalid event body"))?;
    let object = &event.data.object;
    let actor = format!("Stripe (event {})", event.id);
    let outcome = match event.kind.as_str() {
        "checkout.session.completed" | "checkout.session.async_payment_succeeded" => {
            let session_id = stripe_id(object, "id")?;
            let session = retrieve_session(dash, &settings, session_id)
                .await
                .map_err(StripeError::into_api_error)?;
            fulfil(dash, actor, session, now).await?
        }
        "checkout.session.expired" | "checkout.session.async_payment_failed" => {
            let session_id = stripe_id(object, "id")?.to_owned();
            let topup_id = object["metadata"]["topup_id"].as_str().map(TopupId::new);
            let status = match event.kind.as_str() {
                "checkout.session.expired" => TopupStatus::Expired,
                _ => TopupStatus::Failed,
            };
            let closed = dash
                .admin_as(actor, move |mut admin| async move {
                    admin
                        .close_topup(topup_id.as_ref(), Some(&session_id), status)
                        .await
                })
                .await?;
            match closed {
                true => format!("top-up {status}"),
                false => "ignored: no pending top-up of this session".to_owned(),
            }
        }
        "charge.refunded" => {
            // A charge of another product on the same account (or of the legacy Charges
            // API, without a PaymentIntent) is not ours.
            if object["currency"].as_str() != Some("usd") || object["payment_intent"].is_null() {
                return Ok("ignored: not a USD payment of a PaymentIntent".to_owned());
            }
            let payment = stripe_id(object, "payment_intent")?.to_owned();
            let topup_id = object["metadata"]["topup_id"].as_str().map(TopupId::new);
            let total = object["amount_refunded"]
                .as_i64()
                .and_then(payments::from_cents)
                .ok_or_else(|| {
                    ApiError::bad_request("Invalid event: no valid 'amount_refunded'")
                })?;
            let refunded = dash
                .admin_as(actor, move |mut admin| async move {
                    admin
                        .refund_payment(&payment, topup_id.as_ref(), total, now)
                        .await
                })
                .await?;
            match refunded {
                Refunded::Now {
                    account_id, split, ..
                } => {
                    if split.shortfall > Micros::ZERO {
                        tracing::warn!(
                            event = %event.id,
                            "refund of account {account_id}: {} USD could not be taken back \
                             (spent, or held by nodes); see `postal account show {account_id}`",
                            split.shortfall
                        );
                    }
                    format!(
                        "refund taken back: {} USD, shortfall {} USD",
                        split.taken, split.shortfall
                    )
                }
                Refunded::Already => "refund counted before".to_owned(),
                // Stripe delivers it again (for up to three days), after the credit.
                Refunded::Early => {
                    tracing::warn!(event = %event.id, "a refund came before its payment's credit");
                    return Err(ApiError::unavailable(
                        "The refunded payment is not credited yet; deliver the refund again \
                         later",
                        60,
                    ));
                }
                Refunded::Unknown => "ignored: no top-up paid by this payment".to_owned(),
            }
        }
        _ => "ignored".to_owned(),
    };
    tracing::info!(event = %event.id, kind = %event.kind, "Stripe webhook: {outcome}");
    Ok(outcome)
}

/// Credits a Checkout Session Stripe's API says is paid, once.
async fn fulfil(
    dash: &Dashboard,
    actor: String,
    session: CheckoutSession,
    now: i64,
) -> Result<String, ApiError> {
    if session.payment_status != "paid" {
        return Ok(format!(
            "not credited: payment_status is {:?}",
            session.payment_status
        ));
    }
    if session.currency.as_deref() != Some("usd") {
        return Ok("ignored: not USD".to_owned());
    }
    let Some(amount) = session.amount_total.and_then(payments::from_cents) else {
        return Err(ApiError::bad_request(
            "Invalid session: no valid 'amount_total'",
        ));
    };
    let session_id = session.id.clone();
    let paid = Payment {
        payment: session.payment(),
        session_id: session.id,
        topup_id: session.metadata.get("topup_id").map(TopupId::new),
        account_id: session.client_reference_id,
        amount,
    };
    let credited = dash
        .admin_as(actor, move |mut admin| async move {
            admin.credit_payment(&paid, now).await
        })
        .await?;
    Ok(match credited {
        Credited::Now {
            topup_id, amount, ..
        } => format!("credited {amount} USD ({topup_id})"),
        Credited::Already { topup_id } => format!("credited before ({topup_id})"),
        Credited::Unknown => {
            tracing::warn!(
                session = %session_id,
                "a paid Checkout Session names no top-up of this server (or another account)"
            );
            "ignored: no top-up of this server".to_owned()
        }
    })
}
