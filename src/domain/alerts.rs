//! The alerts' events as the database records them, the body each is sent with, and when
//! a failed delivery is tried again.

use serde_json::{Value, json};

use crate::domain::date::rfc3339;
use crate::domain::money::Micros;

/// How long an event's deliveries are tried: after this, a failed attempt is the last.
pub const RETRY_FOR_SECS: i64 = 24 * 3600;
/// The longest pause between two attempts.
const RETRY_MAX_SECS: i64 = 6 * 3600;

/// What an account asks to hear of (`alert_settings`; no row: the defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertSettings {
    /// `balance.low` when a charge takes the balance below this.
    pub balance_below: Option<Micros>,
    /// `limit.near` when a window's count reaches this percent of its limit.
    pub limit_percent: Option<u8>,
    /// E-mail to the account's verified address (on by default).
    pub email: bool,
    pub webhook_url: Option<String>,
}

impl Default for AlertSettings {
    fn default() -> Self {
        AlertSettings {
            balance_below: None,
            limit_percent: None,
            email: true,
            webhook_url: None,
        }
    }
}

/// An account's alerts as its dashboard shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertsView {
    pub settings: AlertSettings,
    /// The last [`DELIVERIES_SHOWN`] attempts, newest first.
    pub deliveries: Vec<DeliveryLine>,
    /// The operator has a mail relay.
    pub mail_available: bool,
    /// The account has a verified e-mail address (from an identity).
    pub email_address: bool,
}

/// Attempts shown with the settings.
pub const DELIVERIES_SHOWN: u32 = 50;

/// One attempt of one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryLine {
    pub event: String,
    pub kind: String,
    pub channel: String,
    pub attempt: u32,
    /// `pending`, `delivered`, `retrying` or `failed`.
    pub status: String,
    /// When it was tried (unix seconds), or when it is due.
    pub at: i64,
    pub result: Option<String>,
}

/// A delivery a sender claimed, with what sending it needs (no `Debug`: it holds the
/// webhook's secret).
#[derive(Clone)]
pub struct Due {
    pub delivery_id: i64,
    pub account_id: i64,
    /// `acct_…`
    pub account: String,
    pub channel: String,
    pub attempt: u32,
    pub event: Event,
    /// The webhook's URL and secret now (the customer may have changed them).
    pub webhook: Option<(String, String)>,
    /// The account's verified address now.
    pub email_to: Option<String>,
}

/// How an attempt ended: delivered, or not (then `retry_at`, the next attempt's time, or
/// `None`: it was the last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub delivered: bool,
    pub result: String,
    pub retry_at: Option<i64>,
}

impl Finished {
    /// The attempt's status as its row records it.
    pub fn status(&self) -> &'static str {
        match (self.delivered, self.retry_at) {
            (true, _) => "delivered",
            (false, Some(_)) => "retrying",
            (false, None) => "failed",
        }
    }
}

/// An event, as its row holds it (`alert_events`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// `msg_…`: the webhook's `webhook-id`, the same on every attempt.
    pub public_id: String,
    /// `balance.low`, `balance.empty`, `limit.near`, `topup.succeeded`, `key.created`,
    /// `test`.
    pub kind: String,
    /// Unix seconds, when it was decided.
    pub at: i64,
    pub balance: Option<i64>,
    pub amount: Option<i64>,
    pub period: Option<String>,
    pub period_start: Option<i64>,
    pub queries: Option<i64>,
    pub lim: Option<i64>,
    pub subject: Option<String>,
}

/// USD as a decimal string (exact: `"0.95"`, `"1"`), `null` when absent.
fn usd(micros: Option<i64>) -> Value {
    micros
        .and_then(Micros::new)
        .map_or(Value::Null, |m| json!(m.to_string()))
}

impl Event {
    /// What the event says, for the account `account` (`acct_…`): the `data` of the
    /// webhook's body.
    pub fn data(&self, account: &str) -> Value {
        match self.kind.as_str() {
            "balance.low" => json!({
                "account": account,
                "balance": usd(self.balance),
                "threshold": usd(self.amount),
            }),
            "balance.empty" => json!({ "account": account, "balance": usd(self.balance) }),
            "limit.near" => {
                let percent = match (self.queries, self.lim) {
                    (Some(q), Some(l)) if l > 0 => json!(q * 100 / l),
                    _ => Value::Null,
                };
                json!({
                    "account": account,
                    "window": self.period,
                    "windowStart": self.period_start.map(rfc3339),
                    "queries": self.queries,
                    "limit": self.lim,
                    "percent": percent,
                })
            }
            "topup.succeeded" => json!({
                "account": account,
                "amount": usd(self.amount),
                "balance": usd(self.balance),
            }),
            "key.created" => json!({ "account": account, "key": self.subject }),
            _ => json!({ "account": account }),
        }
    }

    /// The webhook's body (Standard Webhooks): `{"type", "timestamp", "data"}`; the same
    /// bytes on every attempt.
    pub fn body(&self, account: &str) -> Vec<u8> {
        let body = json!({
            "type": self.kind,
            "timestamp": rfc3339(self.at),
            "data": self.data(account),
        });
        serde_json::to_vec(&body).expect("a JSON value serializes")
    }

    /// The e-mail's subject and text.
    pub fn email(&self, account: &str) -> (String, String) {
        let text = |m: Option<i64>| m.and_then(Micros::new).map(|m| m.to_string());
        let (balance, amount) = (text(self.balance), text(self.amount));
        let (subject, first) = match self.kind.as_str() {
            "balance.low" => (
                "Postal: your balance is low".to_owned(),
                format!(
                    "The balance of account {account} fell below {} USD: {} USD is left.",
                    amount.unwrap_or_default(),
                    balance.unwrap_or_default()
                ),
            ),
            "balance.empty" => (
                "Postal: your balance is spent".to_owned(),
                format!(
                    "Account {account} has {} USD left, less than its next query costs: \
                     its API keys are now answered 402 Payment Required until it is topped up.",
                    balance.unwrap_or_default()
                ),
            ),
            "limit.near" => (
                format!(
                    "Postal: {} of your per-{} limit used",
                    self.queries.unwrap_or(0),
                    self.period.as_deref().unwrap_or("window")
                ),
                format!(
                    "Account {account} has made {} of its {} queries per {} in the window that \
                     started at {}. Beyond the limit its requests are answered 429.",
                    self.queries.unwrap_or(0),
                    self.lim.unwrap_or(0),
                    self.period.as_deref().unwrap_or("window"),
                    self.period_start.map(rfc3339).unwrap_or_default()
                ),
            ),
            "topup.succeeded" => (
                "Postal: top-up received".to_owned(),
                format!(
                    "{} USD was credited to account {account}; its balance is {} USD.",
                    amount.unwrap_or_default(),
                    balance.unwrap_or_default()
                ),
            ),
            "key.created" => (
                "Postal: a new API key was made".to_owned(),
                format!(
                    "A new API key ({}) was made for account {account}. If you did not make \
                     it, revoke it in your dashboard and sign out your other sessions.",
                    self.subject.as_deref().unwrap_or("")
                ),
            ),
            _ => (
                "Postal: test alert".to_owned(),
                format!("This is a test of the alerts of account {account}."),
            ),
        };
        let text = format!(
            "{first}\n\nEvent {} ({}), {}.\nYour alert settings: the Alerts section of your \
             account dashboard.\n",
            self.public_id,
            self.kind,
            rfc3339(self.at)
        );
        (subject, text)
    }
}

/// When attempt `attempt` (1 = the first) having failed at `now`, the next is due: 5 s
/// after the first, four times longer each time, at most 6 hours apart, and the last one
/// [`RETRY_FOR_SECS`] after the event (`event_at`); `None` once that one failed.
/// `base_ms` is 5,000 but for tests (`serve --alert-retry-base-ms`).
pub fn next_attempt(event_at: i64, attempt: u32, now: i64, base_ms: u64) -> Option<i64> {
    let factor = 4u64.saturating_pow(attempt.saturating_sub(1));
    let pause_ms = base_ms
        .saturating_mul(factor)
        .min(RETRY_MAX_SECS as u64 * 1000);
    let due = now + (pause_ms.div_ceil(1000) as i64).max(1);
    let last = event_at + RETRY_FOR_SECS;
    // The last attempt is made at the end of the day, not skipped for being past it.
    (now < last).then_some(due.min(last))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str) -> Event {
        Event {
            public_id: "msg_0123456789abcdef01234567".into(),
            kind: kind.into(),
            at: 1_795_934_538,
            balance: Some(950_000),
            amount: Some(1_000_000),
            period: None,
            period_start: None,
            queries: None,
            lim: None,
            subject: None,
        }
    }

    #[test]
    fn a_crossing_is_sent_with_its_figures() {
        let body: Value = serde_json::from_slice(&event("balance.low").body("acct_a")).unwrap();
        assert_eq!(
            body,
            json!({
                "type": "balance.low",
                "timestamp": "2026-11-29T06:42:18Z",
                "data": {"account": "acct_a", "balance": "0.95", "threshold": "1"},
            })
        );
    }

    #[test]
    fn a_window_says_how_near_it_is() {
        let mut near = event("limit.near");
        (near.period, near.period_start) = (Some("minute".into()), Some(1_795_934_520));
        (near.queries, near.lim) = (Some(81), Some(100));
        assert_eq!(
            near.data("acct_a"),
            json!({"account": "acct_a", "window": "minute",
                   "windowStart": "2026-11-29T06:42:00Z", "queries": 81, "limit": 100,
                   "percent": 81})
        );
    }

    #[test]
    fn retries_back_off_for_a_day_then_stop() {
        let at = 1_000_000;
        let mut now = at;
        let mut pauses = Vec::new();
        let mut attempt = 1;
        while let Some(due) = next_attempt(at, attempt, now, 5_000) {
            pauses.push(due - now);
            now = due;
            attempt += 1;
        }
        assert_eq!(
            pauses,
            [5, 20, 80, 320, 1280, 5120, 20480, 21600, 21600, 15895]
        );
        assert_eq!(now, at + RETRY_FOR_SECS);
    }
}
