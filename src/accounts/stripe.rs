//! The Stripe client of top-ups (docs/payments.md): its API as this server calls it (a
//! Checkout Session made, then read back) and its events as its webhook posts them,
//! signature checked (`domain::payments::verify_signature`) before anything is read.
//!
//! Each API call blocks while it talks to Stripe (bounded by the outside agent's
//! timeout): the dashboard runs it on the store's threads for outside calls
//! (`Accounts::outside`), never the API's.

use std::collections::HashMap;

use secrecy::ExposeSecret;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::PaymentSettings;
use crate::domain::ids::{AccountId, TopupId};
use crate::domain::money::Micros;
use crate::domain::{outside, payments};

/// A Checkout Session as Stripe's API answers it (the fields this server reads).
#[derive(Debug, Deserialize)]
pub struct CheckoutSession {
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
    pub fn payment(&self) -> Option<String> {
        match &self.payment_intent {
            Some(Value::String(id)) => Some(id.clone()),
            Some(Value::Object(o)) => o.get("id").and_then(Value::as_str).map(str::to_owned),
            _ => None,
        }
    }
}

/// Why a call to Stripe failed: it could not be reached (or failed itself: 5xx, 429), it
/// refused the request (4xx: a setting of the operator's is wrong), or it answered what
/// this server does not pass on (a payment page off `domain::outside`'s rule).
#[derive(Debug)]
pub enum StripeError {
    Unreachable(String),
    Refused(String),
    BadAnswer(String),
}

/// A page of a listing as Stripe's API answers it.
#[derive(Debug, Deserialize)]
struct List<T> {
    data: Vec<T>,
}

/// Calls Stripe's API (`method` on `path` of the settings' base, a form body or none):
/// the answer's JSON object, or why not. A base off `domain::outside`'s rule (stored
/// before `payments stripe` refused it) is the operator's setting to fix: refused, never
/// sent the key.
fn call<T: DeserializeOwned>(
    http: &ureq::Agent,
    settings: &PaymentSettings,
    method: &'static str,
    path: String,
    form: Option<String>,
    idempotency_key: Option<String>,
) -> Result<T, StripeError> {
    if !outside::allowed(&settings.api_base) {
        return Err(StripeError::Refused(format!(
            "the API base {:?} is refused: only {}",
            settings.api_base,
            outside::RULE
        )));
    }
    let url = format!("{}{path}", settings.api_base);
    let auth = format!("Bearer {}", settings.secret_key.expose_secret());
    let mut request = ureq::http::Request::builder()
        .method(method)
        .uri(&url)
        .header("Authorization", auth)
        .header("Accept", "application/json");
    if let Some(key) = idempotency_key {
        request = request.header("Idempotency-Key", key);
    }
    let sent = match form {
        Some(body) => http.run(
            request
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(body)
                .map_err(|e| StripeError::Refused(e.to_string()))?,
        ),
        None => http.run(
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
}

/// Makes the Checkout Session of top-up `topup_id`: one line item of exactly `amount`
/// USD, the account as `client_reference_id`, the top-up in its metadata (and its
/// PaymentIntent's), back to `back` after payment (and `back` with `&cancelled=1` after
/// a cancel). The top-up's id is the `Idempotency-Key`: a retried creation gives the
/// same session.
pub fn create_session(
    http: &ureq::Agent,
    settings: &PaymentSettings,
    account_id: &AccountId,
    topup_id: &TopupId,
    amount: Micros,
    back: &str,
) -> Result<CheckoutSession, StripeError> {
    let cents = payments::cents(amount).to_string();
    let name = format!("postal API credit ({amount} USD)");
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("mode", "payment")
        .append_pair("line_items[0][price_data][currency]", "usd")
        .append_pair("line_items[0][price_data][unit_amount]", &cents)
        .append_pair("line_items[0][price_data][product_data][name]", &name)
        .append_pair("line_items[0][quantity]", "1")
        .append_pair("client_reference_id", account_id.as_str())
        .append_pair("metadata[topup_id]", topup_id.as_str())
        .append_pair("metadata[account_id]", account_id.as_str())
        .append_pair("payment_intent_data[metadata][topup_id]", topup_id.as_str())
        .append_pair(
            "payment_intent_data[metadata][account_id]",
            account_id.as_str(),
        )
        .append_pair("success_url", back)
        .append_pair("cancel_url", &format!("{back}&cancelled=1"))
        .finish();
    let session: CheckoutSession = call(
        http,
        settings,
        "POST",
        "/v1/checkout/sessions".to_owned(),
        Some(form),
        Some(topup_id.to_string()),
    )?;
    match &session.url {
        None => Err(StripeError::Refused(format!(
            "Checkout Session {} has no url",
            session.id
        ))),
        // The browser is sent there: only where this server would go itself.
        Some(url) if !outside::allowed(url) => Err(StripeError::BadAnswer(format!(
            "Checkout Session {} has the payment page {url:?}: only {} is sent to a browser",
            session.id,
            outside::RULE
        ))),
        Some(_) => Ok(session),
    }
}

/// The Checkout Session that made the PaymentIntent `payment` (`pi_…`), if any: how a
/// charge or dispute without the top-up's metadata finds its top-up.
pub fn session_of_payment(
    http: &ureq::Agent,
    settings: &PaymentSettings,
    payment: &str,
) -> Result<Option<CheckoutSession>, StripeError> {
    let list: List<CheckoutSession> = call(
        http,
        settings,
        "GET",
        format!("/v1/checkout/sessions?payment_intent={payment}&limit=1"),
        None,
        None,
    )?;
    Ok(list.data.into_iter().next())
}

/// The Checkout Session as Stripe's API has it now.
pub fn retrieve_session(
    http: &ureq::Agent,
    settings: &PaymentSettings,
    session_id: &str,
) -> Result<CheckoutSession, StripeError> {
    call(
        http,
        settings,
        "GET",
        format!("/v1/checkout/sessions/{session_id}"),
        None,
        None,
    )
}

/// An event as Stripe posts it.
#[derive(Debug, Deserialize)]
pub struct Event {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub data: EventData,
}

#[derive(Debug, Deserialize)]
pub struct EventData {
    pub object: Value,
}

/// Why an event posted to the webhook is not taken (its text is the answer's); nothing
/// changed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidEvent(String);

/// The event of `raw`, the body the webhook received with its `Stripe-Signature`
/// `signature`, once that is checked against the settings' webhook secret at `now`.
pub fn verified_event(
    signature: Option<&str>,
    raw: &[u8],
    settings: &PaymentSettings,
    now: i64,
) -> Result<Event, InvalidEvent> {
    payments::verify_signature(signature, raw, settings.webhook_secret.expose_secret(), now)
        .map_err(|e| InvalidEvent(e.to_string()))?;
    serde_json::from_slice(raw).map_err(|_| InvalidEvent("Invalid event body".to_owned()))
}

/// The id in `field` of an event's object. Stripe's ids are ASCII letters, digits and
/// `_`: anything else is not one (and never reaches a URL path).
pub fn stripe_id<'a>(value: &'a Value, field: &str) -> Result<&'a str, InvalidEvent> {
    value[field]
        .as_str()
        .filter(|id| {
            !id.is_empty()
                && id.len() <= 255
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        })
        .ok_or_else(|| InvalidEvent(format!("Invalid event: no valid '{field}'")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(api_base: &str) -> PaymentSettings {
        PaymentSettings {
            secret_key: "sk_test_x".to_owned().into(),
            webhook_secret: "whsec_x".to_owned().into(),
            api_base: api_base.to_owned(),
            max_topup: payments::DEFAULT_MAX_TOPUP,
        }
    }

    #[test]
    fn a_plain_http_api_base_off_loopback_is_refused_before_any_request() {
        let http = super::super::oidc::outside_agent();
        let refused = retrieve_session(&http, &settings("http://stripe-proxy.example.com"), "cs_1");
        match refused {
            Err(StripeError::Refused(why)) => assert_eq!(
                why,
                "the API base \"http://stripe-proxy.example.com\" is refused: only https, or http only to a loopback host (127.0.0.0/8, [::1], localhost)"
            ),
            other => panic!("{other:?}"),
        }
        // On loopback it is called (nothing listens on port 9: unreachable, not refused).
        let dead = retrieve_session(&http, &settings("http://127.0.0.1:9"), "cs_1");
        assert!(matches!(dead, Err(StripeError::Unreachable(_))), "{dead:?}");
    }
}
