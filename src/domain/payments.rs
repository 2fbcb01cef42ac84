//! Top-ups by card (docs/payments.md): the amount a customer may pay, the signature of
//! the processor's webhook (Stripe's scheme), and what a refund takes back. Rules only;
//! the client is `accounts::stripe`, the webhook's HTTP `api::account::webhook`, the rows
//! `db::{sqlite,pg}::payments`.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::domain::money::{MIN_TOPUP, Micros};

words! {
    /// Where a top-up by card is: started and `Pending` until the processor confirms its
    /// payment (`Paid`, once) or it ends unpaid: its page expired (`Expired`) or was never
    /// made (`Failed`).
    pub enum TopupStatus {
        Pending => "pending",
        Paid => "paid",
        Expired => "expired",
        Failed => "failed",
    }
}

/// The largest top-up when the operator sets none: 1,000.00 USD.
pub const DEFAULT_MAX_TOPUP: Micros = match Micros::new(1_000_000_000) {
    Some(m) => m,
    None => Micros::ZERO,
};

/// How far a webhook's signed timestamp may be from now, in seconds (Stripe's libraries'
/// default tolerance): an older delivery is refused, so a captured one cannot be replayed
/// later.
pub const SIGNATURE_TOLERANCE_SECS: i64 = 300;

/// Micros in a cent (Stripe counts USD in cents).
const MICROS_PER_CENT: i64 = 10_000;

/// Why a top-up amount was refused: the customer's texts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmountRefused {
    #[error("amount must be USD in whole cents, such as \"5.00\": got {0:?}")]
    Malformed(String),
    #[error("a top-up must be at least {MIN_TOPUP} USD, got {0} USD")]
    BelowMinimum(Micros),
    #[error("a top-up can be at most {ceiling} USD on this server, got {amount} USD")]
    AboveCeiling { amount: Micros, ceiling: Micros },
}

/// A top-up the customer asked for (`"5.00"`): USD in whole cents, at least [`MIN_TOPUP`],
/// at most `ceiling`.
pub fn topup_amount(text: &str, ceiling: Micros) -> Result<Micros, AmountRefused> {
    let malformed = || AmountRefused::Malformed(text.to_owned());
    let amount = Micros::parse_usd(text).map_err(|_| malformed())?;
    if amount.is_negative() || amount.get() % MICROS_PER_CENT != 0 || text.starts_with('+') {
        return Err(malformed());
    }
    if amount < MIN_TOPUP {
        return Err(AmountRefused::BelowMinimum(amount));
    }
    if amount > ceiling {
        return Err(AmountRefused::AboveCeiling { amount, ceiling });
    }
    Ok(amount)
}

/// An amount in cents, as Stripe takes it (whole cents: `topup_amount` checked).
pub fn cents(amount: Micros) -> i64 {
    amount.get() / MICROS_PER_CENT
}

/// An amount Stripe gave in cents (none when out of range or negative).
pub fn from_cents(cents: i64) -> Option<Micros> {
    cents
        .checked_mul(MICROS_PER_CENT)
        .and_then(Micros::new)
        .filter(|m| !m.is_negative())
}

/// Unpaid top-ups an account may have started in the last [`PENDING_WINDOW_SECS`]: each
/// is a row and a call to Stripe, and Stripe keeps an unpaid session open for 24 hours.
pub const MAX_PENDING_TOPUPS: i64 = 10;
pub const PENDING_WINDOW_SECS: i64 = 24 * 60 * 60;

/// A pending top-up without a session this long after it started will never get one.
pub const SESSIONLESS_SECS: i64 = 60;
/// A pending top-up this old cannot be paid any more (Stripe expires a session after 24
/// hours; an hour more for its last payment's webhook).
pub const STALE_PENDING_SECS: i64 = 25 * 60 * 60;

/// The refusal of one top-up too many.
pub fn too_many_pending() -> String {
    format!(
        "{MAX_PENDING_TOPUPS} top-ups started in the last 24 hours are unpaid: pay one of \
         them (its link is in the list) or wait until it expires"
    )
}

/// Whether a paid Checkout Session of `amount` (its `amount_total` read as USD cents) in
/// `currency` pays for a top-up that asked `asked` USD: exactly that, in USD. Anything
/// else is credited nothing (an account-level setting of Stripe's, such as automatic tax
/// or promotion codes, or a wrong API base), for the operator to settle.
pub fn pays_for(amount: Micros, currency: &str, asked: Micros) -> bool {
    currency == "usd" && amount == asked
}

/// The ledger note of a card payment's credit.
pub fn credit_note(session_id: &str, payment: Option<&str>) -> String {
    match payment {
        Some(payment) => format!("card payment {payment} (Stripe Checkout {session_id})"),
        None => format!("card payment (Stripe Checkout {session_id})"),
    }
}

/// What takes a paid top-up's credit back: a refund (`total`: the processor's running
/// total refunded of its payment) or a dispute (a chargeback: everything left of the
/// credit, counted once per dispute id, and the account's top-ups frozen).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clawback {
    Refund { total: Micros },
    Dispute { dispute: String },
}

impl Clawback {
    /// What counts as refunded of a top-up that credited `credited` once this is taken:
    /// a refund's total (never above the credit), or, disputed, the whole credit.
    pub fn total(&self, credited: Micros) -> Micros {
        match self {
            Clawback::Refund { total } => (*total).min(credited),
            Clawback::Dispute { .. } => credited,
        }
    }

    /// The ledger note of `owed` taken back from the balance as `split` says.
    pub fn note(&self, payment: &str, owed: Micros, split: RefundSplit) -> String {
        let mut note = match self {
            Clawback::Refund { .. } => {
                format!("refund of card payment {payment}: {owed} USD refunded")
            }
            Clawback::Dispute { dispute } => {
                format!("dispute {dispute} of card payment {payment}: {owed} USD disputed")
            }
        };
        if split.shortfall > Micros::ZERO {
            note.push_str(&format!(
                ", {} USD could not be taken back",
                split.shortfall
            ));
        }
        note
    }

    /// Why a dispute froze the account's top-ups (`accounts.topups_frozen`; `None` for
    /// a refund, which freezes nothing).
    pub fn freezes(&self, topup_id: &str, payment: &str) -> Option<String> {
        match self {
            Clawback::Refund { .. } => None,
            Clawback::Dispute { dispute } => Some(format!(
                "dispute {dispute} of {topup_id} (card payment {payment})"
            )),
        }
    }
}

/// The refusal of a top-up while a dispute froze the account's (the dashboard's 403).
pub const TOPUPS_FROZEN: &str = "Top-ups by card are frozen for this account: one of its card \
     payments was disputed. Ask the operator of this server to review it.";

/// Why a webhook's `Stripe-Signature` was refused (the answer is 400, nothing changes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("Missing Stripe-Signature header")]
    Missing,
    #[error("Stripe-Signature has no timestamp or no v1 signature")]
    Malformed,
    #[error("No v1 signature of Stripe-Signature matches the webhook secret")]
    NoMatch,
    #[error("The Stripe-Signature timestamp is more than 300 s from now")]
    Stale,
}

/// The timestamp and the `v1` signatures of a `Stripe-Signature` header
/// (`t=<unix>,v1=<hex>[,v1=<hex>…]`): what can be refused without the secret.
pub fn signature_parts(header: Option<&str>) -> Result<(i64, Vec<Vec<u8>>), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = t.parse::<i64>().ok(),
            Some(("v1", hex_sig)) => signatures.extend(hex::decode(hex_sig).ok()),
            _ => {}
        }
    }
    match timestamp.filter(|_| !signatures.is_empty()) {
        Some(timestamp) => Ok((timestamp, signatures)),
        None => Err(SignatureError::Malformed),
    }
}

/// Checks `header` (`t=<unix>,v1=<hex>[,v1=<hex>…]`) over the raw `payload` as Stripe
/// documents it: each `v1` is HMAC-SHA256 of `"{t}.{payload}"` keyed with the endpoint's
/// secret (`whsec_…`, used as given); any one matching (compared in constant time) will do,
/// and `t` must be within [`SIGNATURE_TOLERANCE_SECS`] of `now`. Other schemes (`v0`) are
/// ignored, as Stripe's libraries do.
pub fn verify_signature(
    header: Option<&str>,
    payload: &[u8],
    secret: &str,
    now: i64,
) -> Result<(), SignatureError> {
    let (timestamp, signatures) = signature_parts(header)?;
    let mac = signed(payload, secret, timestamp);
    if !signatures
        .iter()
        .any(|s| mac.clone().verify_slice(s).is_ok())
    {
        return Err(SignatureError::NoMatch);
    }
    if (now - timestamp).abs() > SIGNATURE_TOLERANCE_SECS {
        return Err(SignatureError::Stale);
    }
    Ok(())
}

/// The `Stripe-Signature` header Stripe sends with `payload` at `timestamp` (for tests and
/// the operator's checks: `postal payments` never signs anything it receives).
pub fn signature_header(payload: &[u8], secret: &str, timestamp: i64) -> String {
    let code = signed(payload, secret, timestamp).finalize().into_bytes();
    format!("t={timestamp},v1={}", hex::encode(code))
}

fn signed(payload: &[u8], secret: &str, timestamp: i64) -> Hmac<Sha256> {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any size");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(payload);
    mac
}

/// What a refund takes back from a balance: at most what is not spent nor held (a
/// cluster's grants to its nodes); the rest is the shortfall, reported to the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefundSplit {
    pub taken: Micros,
    pub shortfall: Micros,
}

/// Splits a refund of `owed` against an account holding `balance`, of which `held` is
/// spoken for.
pub fn refund_split(balance: Micros, held: Micros, owed: Micros) -> RefundSplit {
    let free = balance
        .checked_sub(held)
        .filter(|f| !f.is_negative())
        .unwrap_or(Micros::ZERO);
    let taken = owed.min(free);
    RefundSplit {
        taken,
        shortfall: owed.checked_sub(taken).unwrap_or(Micros::ZERO),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(text: &str) -> Micros {
        Micros::parse_usd(text).unwrap()
    }

    #[test]
    fn each_topup_status_reads_back_from_its_text() {
        for status in TopupStatus::ALL {
            assert_eq!(TopupStatus::from_stored(status.as_str()), Some(*status));
        }
        assert_eq!(TopupStatus::from_stored("refunded"), None);
    }

    #[test]
    fn a_topup_is_whole_cents_from_the_minimum_to_the_ceiling() {
        let ceiling = DEFAULT_MAX_TOPUP;
        assert_eq!(topup_amount("5.00", ceiling), Ok(usd("5")));
        assert_eq!(topup_amount("5", ceiling), Ok(usd("5")));
        assert_eq!(topup_amount("1000.00", ceiling), Ok(usd("1000")));
        assert_eq!(cents(usd("12.34")), 1234);
        for (text, error) in [
            ("4.99", "a top-up must be at least 5 USD, got 4.99 USD"),
            ("0", "a top-up must be at least 5 USD, got 0 USD"),
            (
                "1000.01",
                "a top-up can be at most 1000 USD on this server, got 1000.01 USD",
            ),
            (
                "5.001",
                "amount must be USD in whole cents, such as \"5.00\": got \"5.001\"",
            ),
            (
                "-5",
                "amount must be USD in whole cents, such as \"5.00\": got \"-5\"",
            ),
            (
                "+5",
                "amount must be USD in whole cents, such as \"5.00\": got \"+5\"",
            ),
            (
                "5 USD",
                "amount must be USD in whole cents, such as \"5.00\": got \"5 USD\"",
            ),
            (
                "",
                "amount must be USD in whole cents, such as \"5.00\": got \"\"",
            ),
        ] {
            assert_eq!(
                topup_amount(text, ceiling).unwrap_err().to_string(),
                error,
                "{text}"
            );
        }
        assert_eq!(from_cents(500), Some(usd("5")));
        assert_eq!(from_cents(-1), None);
        assert_eq!(from_cents(i64::MAX), None);
    }

    /// Stripe's scheme, checked against a signature stripe-python 16.1.0 made
    /// (`WebhookSignature._compute_signature("1700000000.{\"id\":\"evt_1\"}", "whsec_test")`).
    #[test]
    fn a_signature_is_stripes_hmac_of_the_timestamp_and_the_raw_body() {
        let body = br#"{"id":"evt_1"}"#;
        let header = signature_header(body, "whsec_test", 1_700_000_000);
        assert_eq!(
            header,
            "t=1700000000,v1=c89214b5b5da833daed6f0b8c5bb6bd58cea9022bd80ccc78230f3942d632925"
        );
    }

    #[test]
    fn a_signature_is_refused_when_missing_wrong_stale_or_of_another_body() {
        let body = br#"{"id":"evt_1"}"#;
        let now = 1_700_000_000;
        let good = signature_header(body, "whsec_test", now);
        assert_eq!(
            verify_signature(Some(&good), body, "whsec_test", now),
            Ok(())
        );
        // Any v1 may match; v0 and unknown parts are ignored.
        let v1 = good.split_once(",v1=").unwrap().1;
        let several = format!("t={now},v0=00,v1={},v1={v1},x=1", "ab".repeat(32));
        assert_eq!(
            verify_signature(Some(&several), body, "whsec_test", now + 300),
            Ok(())
        );
        for (header, body, secret, at, error) in [
            (None, &body[..], "whsec_test", now, SignatureError::Missing),
            (Some(""), body, "whsec_test", now, SignatureError::Malformed),
            (
                Some(&format!("t={now}")[..]),
                body,
                "whsec_test",
                now,
                SignatureError::Malformed,
            ),
            (
                Some(&format!("v1={v1}")[..]),
                body,
                "whsec_test",
                now,
                SignatureError::Malformed,
            ),
            (
                Some(&good[..]),
                br#"{"id":"evt_2"}"#,
                "whsec_test",
                now,
                SignatureError::NoMatch,
            ),
            (
                Some(&good),
                body,
                "whsec_other",
                now,
                SignatureError::NoMatch,
            ),
            (
                Some(&good),
                body,
                "whsec_test",
                now + 301,
                SignatureError::Stale,
            ),
            (
                Some(&good),
                body,
                "whsec_test",
                now - 301,
                SignatureError::Stale,
            ),
        ] {
            assert_eq!(verify_signature(header, body, secret, at), Err(error));
        }
    }

    #[test]
    fn a_dispute_counts_the_whole_credit_refunded_and_freezes_while_a_refund_does_not() {
        let refund = Clawback::Refund { total: usd("7") };
        let dispute = Clawback::Dispute {
            dispute: "dp_1".to_owned(),
        };
        assert_eq!(refund.total(usd("5")), usd("5"));
        assert_eq!(
            Clawback::Refund { total: usd("2") }.total(usd("5")),
            usd("2")
        );
        assert_eq!(dispute.total(usd("5")), usd("5"));
        let split = refund_split(usd("0.528"), Micros::ZERO, usd("3"));
        assert_eq!(
            dispute.note("pi_1", usd("3"), split),
            "dispute dp_1 of card payment pi_1: 3 USD disputed, 2.472 USD could not be \
             taken back"
        );
        assert_eq!(
            refund.note(
                "pi_1",
                usd("2"),
                refund_split(usd("5"), Micros::ZERO, usd("2"))
            ),
            "refund of card payment pi_1: 2 USD refunded"
        );
        assert_eq!(refund.freezes("top_1", "pi_1"), None);
        assert_eq!(
            dispute.freezes("top_1", "pi_1").as_deref(),
            Some("dispute dp_1 of top_1 (card payment pi_1)")
        );
        assert!(pays_for(usd("5"), "usd", usd("5")));
        assert!(!pays_for(usd("6"), "usd", usd("5")));
        assert!(!pays_for(usd("5"), "eur", usd("5")));
    }

    #[test]
    fn a_refund_takes_back_what_is_neither_spent_nor_held() {
        let split = |b, h, o| refund_split(usd(b), usd(h), usd(o));
        let expect = |t, s| RefundSplit {
            taken: usd(t),
            shortfall: usd(s),
        };
        assert_eq!(split("5", "0", "2"), expect("2", "0"));
        assert_eq!(split("1.028", "0", "2"), expect("1.028", "0.972"));
        assert_eq!(split("1", "0.4", "2"), expect("0.6", "1.4"));
        assert_eq!(split("0", "0", "2"), expect("0", "2"));
        assert_eq!(split("0.1", "0.4", "2"), expect("0", "2"));
    }
}
