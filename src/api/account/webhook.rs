//! `POST /account/stripe/webhook`: Stripe's events (docs/payments.md), as the client in
//! `accounts::stripe` verifies and reads them.
//!
//! The `Stripe-Signature` is checked over the raw body before anything else; a bad,
//! missing or stale one is 400 and changes nothing. A stranger's delivery costs the store
//! nothing: a header of the wrong shape is refused before the settings are looked at, and
//! the signature is checked against the webhook secret held in memory (`held`: read again
//! when the books reloaded after a change made elsewhere, `postal payments ...` telling
//! every server before it returns, after 10 s, or, at most once a second, when a
//! signature matches no secret held: a secret just changed by other means). A paid Checkout Session
//! (`checkout.session.completed` with `payment_status` `paid`, or
//! `checkout.session.async_payment_succeeded`) is read back from Stripe's API, as Stripe's
//! fulfilment guide asks, and its `amount_total` credited to the top-up it names, once
//! (`Admin::credit_payment`: the top-up's row moves to `paid` in the ledger row's
//! transaction), when it is exactly the top-up's amount in USD (otherwise nothing is
//! credited, answered 200 and audited). `charge.refunded` takes the refund back from the
//! balance, never below zero; `charge.dispute.created` takes back what is left of the
//! top-up's credit, once per dispute, and freezes the account's top-ups. Either finds its
//! top-up by its PaymentIntent (through Stripe's Checkout Session of it when no paid
//! top-up holds it). Other events are answered 200 and ignored. A failure of ours (the
//! ledger, Stripe's API) is 5xx, and Stripe delivers the event again later, for up to
//! three days.

use std::sync::Arc;
use std::time::Instant;

use poem::web::{Data, Json};
use poem::{Body, IntoResponse, Request, Response, handler};
use serde_json::json;

use super::{Dashboard, now_unix};
use crate::accounts::stripe::{self, CheckoutSession, InvalidEvent, StripeError, stripe_id};
use crate::accounts::{Credited, Payment, PaymentSettings, Refunded};
use crate::api::ApiError;
use crate::domain::ids::{AccountId, TopupId};
use crate::domain::money::Micros;
use crate::domain::payments::{self, Clawback, TopupStatus};

/// The largest event body taken (Stripe's events are a few KB).
const MAX_EVENT_BYTES: usize = 256 * 1024;
impl Dashboard {
    /// The payment settings held in memory (`held`), or read again when stale (`reread`:
    /// also when read more than a second ago).
    async fn payment_settings(
        &self,
        reread: bool,
    ) -> Result<Option<Arc<PaymentSettings>>, ApiError> {
        let reloads = self.billing.reloads();
        if let Some(settings) = self.payments.fresh(reloads, reread) {
            return Ok(settings);
        }
        let read_at = Instant::now();
        let settings = self
            .admin(move |mut admin| async move { admin.payments().await })
            .await?
            .map(Arc::new);
        self.payments.put(settings.clone(), read_at, reloads);
        Ok(settings)
    }

    /// Runs `call` (to Stripe's API) on the store's threads for outside calls, never the
    /// API's; all taken: Stripe is as good as unreachable.
    pub(super) async fn stripe<T, F>(&self, call: F) -> Result<T, StripeError>
    where
        T: Send + 'static,
        F: FnOnce(&ureq::Agent) -> Result<T, StripeError> + Send + 'static,
    {
        let http = self.http.clone();
        self.outside(move || call(&http))
            .await
            .map_err(|e| StripeError::Unreachable(e.text().to_owned()))?
    }
}

/// How a customer's request (or Stripe's delivery) answers a failed call to Stripe: 503
/// to retry, or 500 (the operator must look).
pub(super) fn stripe_failed(e: StripeError) -> ApiError {
    match e {
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
        StripeError::BadAnswer(why) => {
            tracing::error!("Stripe's answer refused: {why}");
            ApiError::bad_gateway(
                "The payment processor answered a payment page this server does not send \
                 browsers to",
            )
        }
    }
}

/// An event not taken: 400, nothing changed.
fn invalid(e: InvalidEvent) -> ApiError {
    ApiError::bad_request(e.to_string())
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
    let signature = req.header("Stripe-Signature");
    payments::signature_parts(signature).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let now = now_unix();
    let verified = |settings: &Option<Arc<PaymentSettings>>| {
        settings
            .as_ref()
            .map(|s| stripe::verified_event(signature, &raw, s, now))
    };
    let mut settings = dash.payment_settings(false).await?;
    let mut event = verified(&settings);
    if !matches!(event, Some(Ok(_))) {
        // Settings just changed by other means than the CLI: read again (at most once a
        // second, whatever strangers send).
        settings = dash.payment_settings(true).await?;
        event = verified(&settings);
    }
    let (Some(settings), Some(event)) = (settings, event) else {
        return Err(ApiError::bad_request(
            "Card payments are not set up on this server",
        ));
    };
    let event = event.map_err(invalid)?;
    let object = &event.data.object;
    let actor = format!("Stripe (event {})", event.id);
    let outcome = match event.kind.as_str() {
        "checkout.session.completed" | "checkout.session.async_payment_succeeded" => {
            let session_id = stripe_id(object, "id").map_err(invalid)?.to_owned();
            let session = dash
                .stripe(move |http| stripe::retrieve_session(http, &settings, &session_id))
                .await
                .map_err(stripe_failed)?;
            fulfil(dash, actor, session, now).await?
        }
        "checkout.session.expired" | "checkout.session.async_payment_failed" => {
            let session_id = stripe_id(object, "id").map_err(invalid)?.to_owned();
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
            let total = object["amount_refunded"]
                .as_i64()
                .and_then(payments::from_cents)
                .ok_or_else(|| {
                    ApiError::bad_request("Invalid event: no valid 'amount_refunded'")
                })?;
            let topup_id = object["metadata"]["topup_id"].as_str().map(TopupId::new);
            let clawback = Clawback::Refund { total };
            take_back(dash, &settings, &event.id, object, topup_id, clawback, now).await?
        }
        "charge.dispute.created" => {
            // A Dispute names its charge's PaymentIntent, never the top-up.
            if object["currency"].as_str() != Some("usd") || object["payment_intent"].is_null() {
                return Ok("ignored: not a USD payment of a PaymentIntent".to_owned());
            }
            let dispute = stripe_id(object, "id").map_err(invalid)?.to_owned();
            let clawback = Clawback::Dispute { dispute };
            take_back(dash, &settings, &event.id, object, None, clawback, now).await?
        }
        _ => "ignored".to_owned(),
    };
    tracing::info!(event = %event.id, kind = %event.kind, "Stripe webhook: {outcome}");
    Ok(outcome)
}

/// Takes back a refund or a dispute of the PaymentIntent `object` names (a Charge, a
/// Dispute) from its top-up's account. `topup_id`: the top-up its metadata names; without
/// one, a payment no paid top-up has is looked up at Stripe (the Checkout Session of that
/// PaymentIntent, whose metadata names its top-up), to tell one that came before its
/// credit (503: Stripe delivers it again) from another product's (ignored).
async fn take_back(
    dash: &Dashboard,
    settings: &Arc<PaymentSettings>,
    event: &str,
    object: &serde_json::Value,
    topup_id: Option<TopupId>,
    clawback: Clawback,
    now: i64,
) -> Result<String, ApiError> {
    let payment = stripe_id(object, "payment_intent")
        .map_err(invalid)?
        .to_owned();
    let actor = format!("Stripe (event {event})");
    let refund = |topup_id: Option<TopupId>| {
        let (payment, clawback, actor) = (payment.clone(), clawback.clone(), actor.clone());
        async move {
            dash.admin_as(actor, move |mut admin| async move {
                admin
                    .refund_payment(&payment, topup_id.as_ref(), &clawback, now)
                    .await
            })
            .await
        }
    };
    let mut taken = refund(topup_id.clone()).await?;
    if taken == Refunded::Unknown && topup_id.is_none() {
        let (settings, asked) = (settings.clone(), payment.clone());
        let session = dash
            .stripe(move |http| stripe::session_of_payment(http, &settings, &asked))
            .await
            .map_err(stripe_failed)?;
        if let Some(named) = session.and_then(|s| s.metadata.get("topup_id").cloned()) {
            taken = refund(Some(TopupId::new(named))).await?;
        }
    }
    let (what, done) = match clawback {
        Clawback::Refund { .. } => ("refund", "refunded"),
        Clawback::Dispute { .. } => ("dispute", "disputed"),
    };
    Ok(match taken {
        Refunded::Now {
            account_id, split, ..
        } => {
            if let Clawback::Dispute { dispute } = &clawback {
                tracing::error!(
                    event,
                    "card payment {payment} of account {account_id} disputed ({dispute}): {} \
                     USD taken back, {} USD could not be; its top-ups are frozen until \
                     `postal account unfreeze {account_id}`",
                    split.taken,
                    split.shortfall
                );
            } else if split.shortfall > Micros::ZERO {
                tracing::warn!(
                    event,
                    "refund of account {account_id}: {} USD could not be taken back \
                     (spent, or held by nodes); see `postal account show {account_id}`",
                    split.shortfall
                );
            }
            format!(
                "{what} taken back: {} USD, shortfall {} USD",
                split.taken, split.shortfall
            )
        }
        Refunded::Already => format!("{what} counted before"),
        // Stripe delivers it again (for up to three days), after the credit.
        Refunded::Early => {
            tracing::warn!(event, "a {what} came before its payment's credit");
            return Err(ApiError::unavailable(
                &format!("The {done} payment is not credited yet; deliver the {what} again later"),
                60,
            ));
        }
        Refunded::Unknown => "ignored: no top-up paid by this payment".to_owned(),
    })
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
    let Some(amount) = session.amount_total.and_then(payments::from_cents) else {
        return Err(ApiError::bad_request(
            "Invalid session: no valid 'amount_total'",
        ));
    };
    let session_id = session.id.clone();
    let currency = session.currency.clone().unwrap_or_default();
    let paid = Payment {
        payment: session.payment(),
        currency: currency.clone(),
        session_id: session.id,
        topup_id: session.metadata.get("topup_id").map(TopupId::new),
        account_id: session.client_reference_id.map(AccountId::new),
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
        // Answered 200: Stripe's retries would read the same session back, and a 4xx
        // would only have it retry for three days and then disable the endpoint. The
        // operator settles it (refund in Stripe's Dashboard, or `postal account topup`).
        Credited::Mismatch {
            account_id,
            topup_id,
            asked,
        } => {
            tracing::error!(
                session = %session_id,
                "a paid Checkout Session of account {account_id} reports {amount} {} for \
                 {topup_id}, which asked {asked} USD: nothing credited; settle it in \
                 Stripe's Dashboard",
                currency
            );
            format!(
                "not credited: amount mismatch, {amount} {currency} paid for a top-up of \
                 {asked} USD ({topup_id})"
            )
        }
        Credited::Frozen {
            account_id,
            topup_id,
            why,
        } => {
            tracing::error!(
                session = %session_id,
                "a paid Checkout Session of account {account_id} for {topup_id} came while \
                 its top-ups are frozen ({why}): nothing credited; refund it in Stripe's \
                 Dashboard, or unfreeze the account and credit it with `account topup`"
            );
            format!("not credited: top-ups of this account are frozen ({topup_id})")
        }
        Credited::Unknown => {
            tracing::warn!(
                session = %session_id,
                "a paid Checkout Session names no top-up of this server (or another account)"
            );
            "ignored: no top-up of this server".to_owned()
        }
    })
}
