//! The rules of an operator's (and, next, a customer's) change to an account: a top-up,
//! an adjustment, a change of limits, a key's rules. Each change is a value its
//! constructor checks (`BalanceChange` and `LimitsChange` cannot be built otherwise;
//! `Publishable::new` is the checked way to a key's rules); the two ledgers (`db::sqlite`,
//! `db::pg`) take it already checked and only store it, so each rule is written once,
//! here.

use crate::domain::api_key::{Budget, Publishable};
use crate::domain::money::{MIN_TOPUP, Micros};
use crate::domain::origin::OriginPattern;
use crate::domain::payments::{Clawback, RefundSplit};
use crate::domain::rate_limit::Limits;

/// Why a change was refused: the caller's mistake, never the system's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("a top-up must be at least {MIN_TOPUP} USD, got {0} USD")]
    TopupBelowMinimum(Micros),
    #[error("a payment of 0 credits nothing")]
    NothingPaid,
    #[error("an adjustment of 0 changes nothing")]
    ZeroAdjustment,
    #[error("an adjustment needs a reason")]
    NoReason,
    #[error("the adjustment of {amount} USD would make the balance of {balance} USD negative")]
    WouldGoNegative { balance: Micros, amount: Micros },
    #[error("the balance would exceed {} USD", Micros::MAX)]
    BalanceTooLarge,
    #[error("a limit must be at least 1 (use --off to remove limits)")]
    ZeroLimit,
    #[error("a publishable key needs at least one origin")]
    NoOrigin,
    #[error("a publishable key's per-IP limit must be at least 1")]
    ZeroPerIp,
    #[error("a publishable key's budget must be at least 1 request")]
    ZeroBudget,
    #[error("a publishable key's limits and budgets are at most {MAX_KEY_RULE}")]
    RuleTooLarge,
}

/// The largest per-IP limit or budget a publishable key may have: what both ledgers
/// store (PostgreSQL's `integer`).
pub const MAX_KEY_RULE: u32 = i32::MAX as u32;

words! {
    /// What a row of an account's ledger records: a grant (the free allowance), a top-up,
    /// a charge for billed queries, an adjustment (signed, with its reason).
    pub enum LedgerKind {
        Grant => "grant",
        Topup => "topup",
        Charge => "charge",
        Adjustment => "adjustment",
    }
}

words! {
    /// What a line of an account's audit log says was done.
    pub enum AuditAction {
        AccountCreate => "account.create",
        LimitsSet => "limits.set",
        /// A top-up by the operator or paid by card (as its ledger row).
        Topup => "topup",
        Adjustment => "adjustment",
        TopupStart => "topup.start",
        Refund => "refund",
        /// A card payment disputed (a chargeback): what was left of its credit taken
        /// back, the account's top-ups frozen.
        Dispute => "dispute",
        /// The operator lifted a dispute's freeze (`postal account unfreeze`).
        TopupsUnfreeze => "topups.unfreeze",
        /// A paid Checkout Session whose amount or currency is not its top-up's: not
        /// credited.
        TopupMismatch => "topup.mismatch",
        /// A payment for a top-up of an account whose top-ups a dispute froze: not
        /// credited.
        TopupFrozen => "topup.frozen",
        KeyCreate => "key.create",
        KeyRename => "key.rename",
        KeyRoll => "key.roll",
        KeyRevoke => "key.revoke",
        IdentityLink => "identity.link",
        IdentityUnlink => "identity.unlink",
        /// A sign-in (which provider, identity, client address and browser).
        SessionStart => "session.start",
        SessionEnd => "session.end",
        /// A session's sign-in again, before a change that needs a recent one.
        SessionAgain => "session.reauth",
        /// The account's alert settings changed (`PUT /account/api/alerts`).
        AlertsSet => "alerts.set",
        /// The alerts' webhook got a new signing secret.
        AlertsSecretRoll => "alerts.roll-secret",
        /// A test alert was sent.
        AlertsTest => "alerts.test",
    }
}

/// A change of balance with its ledger row's kind and note: a top-up (credited in full,
/// by the operator or paid by card) or an adjustment (signed, with its reason; a card
/// payment's refund is one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BalanceChange {
    amount: Micros,
    kind: LedgerKind,
    note: Option<String>,
}

impl BalanceChange {
    /// A top-up of `amount`: at least [`MIN_TOPUP`].
    pub fn topup(amount: Micros) -> Result<BalanceChange, Refused> {
        if amount < MIN_TOPUP {
            return Err(Refused::TopupBelowMinimum(amount));
        }
        Ok(BalanceChange {
            amount,
            kind: LedgerKind::Topup,
            note: None,
        })
    }

    /// A top-up paid by card: what the processor says was paid (more than 0), credited
    /// in full, its note naming the payment.
    pub fn paid(amount: Micros, note: String) -> Result<BalanceChange, Refused> {
        if amount <= Micros::ZERO {
            return Err(Refused::NothingPaid);
        }
        Ok(BalanceChange {
            amount,
            kind: LedgerKind::Topup,
            note: Some(note),
        })
    }

    /// An adjustment of the signed `amount` (not 0) for `reason` (not blank).
    pub fn adjustment(amount: Micros, reason: &str) -> Result<BalanceChange, Refused> {
        if amount == Micros::ZERO {
            return Err(Refused::ZeroAdjustment);
        }
        if reason.trim().is_empty() {
            return Err(Refused::NoReason);
        }
        Ok(BalanceChange {
            amount,
            kind: LedgerKind::Adjustment,
            note: Some(reason.to_owned()),
        })
    }

    /// A card payment's refund or dispute taken back from the balance: the adjustment of
    /// minus `split.taken`, its note naming the payment (and the dispute) and what could
    /// not be taken back.
    pub fn refund(
        clawback: &Clawback,
        payment: &str,
        owed: Micros,
        split: RefundSplit,
    ) -> Result<BalanceChange, Refused> {
        BalanceChange::adjustment(
            Micros::ZERO
                .checked_sub(split.taken)
                .unwrap_or(Micros::ZERO),
            &clawback.note(payment, owed, split),
        )
    }

    pub fn amount(&self) -> Micros {
        self.amount
    }

    /// The ledger row's kind: `Topup` or `Adjustment`.
    pub fn kind(&self) -> LedgerKind {
        self.kind
    }

    /// The audit log's word for it, its ledger row's (a change is only ever a top-up or
    /// an adjustment: no constructor makes a grant or a charge).
    pub fn action(&self) -> AuditAction {
        match self.kind {
            LedgerKind::Adjustment => AuditAction::Adjustment,
            LedgerKind::Grant | LedgerKind::Topup | LedgerKind::Charge => AuditAction::Topup,
        }
    }

    /// The ledger row's note: an adjustment's reason, a card payment's name.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// The balance after the change of an account holding `balance`, of which `held` is
    /// spoken for (a cluster's grants to its nodes, being spent; nothing in the file): a
    /// negative change may take only what is not held.
    pub fn apply(&self, balance: Micros, held: Micros) -> Result<Micros, Refused> {
        let after = balance
            .checked_add(self.amount)
            .ok_or(Refused::BalanceTooLarge)?;
        if after < held {
            return Err(Refused::WouldGoNegative {
                balance: balance.checked_sub(held).unwrap_or(Micros::ZERO),
                amount: self.amount,
            });
        }
        Ok(after)
    }
}

/// The largest limit a window can have (both ledgers store a limit as a signed 64-bit
/// integer): a larger one given is this.
pub const MAX_LIMIT: u64 = i64::MAX as u64;

/// A change of an account's limits: all off, or new values for the windows given (the
/// others keep theirs; none given changes nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitsChange(Change);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Off,
    Set(Limits),
    Exactly(Limits),
}

impl LimitsChange {
    pub const OFF: LimitsChange = LimitsChange(Change::Off);

    /// New limits for the windows given (each at least 1; beyond [`MAX_LIMIT`], that);
    /// no window given keeps all.
    pub fn set(
        per_minute: Option<u64>,
        per_hour: Option<u64>,
        per_day: Option<u64>,
    ) -> Result<LimitsChange, Refused> {
        if [per_minute, per_hour, per_day].contains(&Some(0)) {
            return Err(Refused::ZeroLimit);
        }
        let capped = |limit: Option<u64>| limit.map(|l| l.min(MAX_LIMIT));
        Ok(LimitsChange(Change::Set(Limits {
            per_minute: capped(per_minute),
            per_hour: capped(per_hour),
            per_day: capped(per_day),
        })))
    }

    /// Exactly these limits, a window without one off (the dashboard's form, which shows
    /// all three): each at least 1, beyond [`MAX_LIMIT`] that.
    pub fn exactly(limits: Limits) -> Result<LimitsChange, Refused> {
        match LimitsChange::set(limits.per_minute, limits.per_hour, limits.per_day)?.0 {
            Change::Set(checked) => Ok(LimitsChange(Change::Exactly(checked))),
            other => Ok(LimitsChange(other)),
        }
    }

    /// The limits in force after the change of `current`.
    pub fn apply(self, current: Limits) -> Limits {
        match self.0 {
            Change::Off => Limits::OFF,
            Change::Exactly(new) => new,
            Change::Set(new) => Limits {
                per_minute: new.per_minute.or(current.per_minute),
                per_hour: new.per_hour.or(current.per_hour),
                per_day: new.per_day.or(current.per_day),
            },
        }
    }
}

impl Publishable {
    /// A publishable key's rules: at least one origin, at least 1 request a minute per
    /// client IP, a budget of at least 1 request where it has one.
    pub fn new(
        origins: Vec<OriginPattern>,
        per_ip_minute: u32,
        budget: Budget,
    ) -> Result<Publishable, Refused> {
        if origins.is_empty() {
            return Err(Refused::NoOrigin);
        }
        if per_ip_minute == 0 {
            return Err(Refused::ZeroPerIp);
        }
        if budget.per_minute == Some(0) || budget.per_day == Some(0) {
            return Err(Refused::ZeroBudget);
        }
        let rules = [Some(per_ip_minute), budget.per_minute, budget.per_day];
        if rules.into_iter().flatten().any(|n| n > MAX_KEY_RULE) {
            return Err(Refused::RuleTooLarge);
        }
        Ok(Publishable {
            origins,
            per_ip_minute,
            budget,
        })
    }

    /// The origins as both ledgers store them: one canonical pattern a line.
    pub fn stored_origins(&self) -> String {
        self.origins
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The rules from their stored columns (`stored_origins`, the per-IP limit and the
    /// budget); an error names what is corrupt.
    pub fn from_stored(
        origins: Option<&str>,
        per_ip_minute: Option<u32>,
        budget: Budget,
    ) -> Result<Publishable, String> {
        let origins = origins
            .unwrap_or("")
            .lines()
            .map(OriginPattern::parse)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("a stored origin: {e}"))?;
        // A file of an earlier version may hold a rule up to 4,294,967,295 (before
        // `MAX_KEY_RULE`): it loads as the most there is now, which bounds nothing either.
        let most = |n: u32| n.min(MAX_KEY_RULE);
        let budget = Budget {
            per_minute: budget.per_minute.map(most),
            per_day: budget.per_day.map(most),
        };
        match (origins.is_empty(), per_ip_minute) {
            (false, Some(per_ip_minute)) => Publishable::new(origins, most(per_ip_minute), budget)
                .map_err(|why| format!("a stored key: {why}")),
            _ => Err("a publishable key without origins or per-IP limit".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(text: &str) -> Micros {
        Micros::parse_usd(text).unwrap()
    }

    #[test]
    fn each_word_reads_back_from_its_text() {
        for kind in LedgerKind::ALL {
            assert_eq!(LedgerKind::from_stored(kind.as_str()), Some(*kind));
        }
        for action in AuditAction::ALL {
            assert_eq!(AuditAction::from_stored(&action.to_string()), Some(*action));
        }
        assert_eq!(LedgerKind::from_stored("Topup"), None);
    }

    #[test]
    fn a_topup_is_at_least_the_minimum() {
        assert_eq!(
            BalanceChange::topup(usd("4.99")).unwrap_err().to_string(),
            "a top-up must be at least 5 USD, got 4.99 USD"
        );
        let topup = BalanceChange::topup(usd("5")).unwrap();
        assert_eq!((topup.kind().as_str(), topup.note()), ("topup", None));
        assert_eq!(topup.action().as_str(), "topup");
        assert_eq!(topup.apply(usd("1"), Micros::ZERO), Ok(usd("6")));
    }

    #[test]
    fn an_adjustment_is_not_zero_and_has_a_reason() {
        assert_eq!(
            BalanceChange::adjustment(Micros::ZERO, "x"),
            Err(Refused::ZeroAdjustment)
        );
        assert_eq!(
            BalanceChange::adjustment(usd("1"), "  "),
            Err(Refused::NoReason)
        );
        let refund = BalanceChange::adjustment(usd("-2"), "refund").unwrap();
        assert_eq!(
            (refund.kind().as_str(), refund.note()),
            ("adjustment", Some("refund"))
        );
        assert_eq!(refund.action().as_str(), "adjustment");
    }

    #[test]
    fn a_negative_change_takes_only_what_is_not_held() {
        let take = BalanceChange::adjustment(usd("-2"), "refund").unwrap();
        assert_eq!(take.apply(usd("3"), Micros::ZERO), Ok(usd("1")));
        assert_eq!(take.apply(usd("2"), Micros::ZERO), Ok(Micros::ZERO));
        assert_eq!(
            take.apply(usd("3"), usd("1.5")),
            Err(Refused::WouldGoNegative {
                balance: usd("1.5"),
                amount: usd("-2")
            })
        );
        assert_eq!(
            take.apply(usd("1"), Micros::ZERO).unwrap_err().to_string(),
            "the adjustment of -2 USD would make the balance of 1 USD negative"
        );
        let huge = BalanceChange::topup(Micros::MAX).unwrap();
        assert_eq!(
            huge.apply(usd("1"), Micros::ZERO),
            Err(Refused::BalanceTooLarge)
        );
    }

    #[test]
    fn limits_change_only_the_windows_given() {
        let current = Limits {
            per_minute: Some(10),
            per_hour: None,
            per_day: Some(1000),
        };
        let none = LimitsChange::set(None, None, None).unwrap();
        assert_eq!(none.apply(current), current);
        assert_eq!(LimitsChange::OFF.apply(current), Limits::OFF);
        let hour = LimitsChange::set(None, Some(100), None).unwrap();
        assert_eq!(
            hour.apply(current),
            Limits {
                per_hour: Some(100),
                ..current
            }
        );
        let huge = LimitsChange::set(Some(u64::MAX), None, None).unwrap();
        assert_eq!(huge.apply(current).per_minute, Some(MAX_LIMIT));
        assert_eq!(
            LimitsChange::set(Some(0), None, None)
                .unwrap_err()
                .to_string(),
            "a limit must be at least 1 (use --off to remove limits)"
        );
    }

    #[test]
    fn publishable_rules_round_trip_through_their_stored_form() {
        let origins = vec![
            OriginPattern::parse("https://shop.example").unwrap(),
            OriginPattern::parse("https://*.example.org").unwrap(),
        ];
        let budget = Budget {
            per_minute: Some(100),
            per_day: None,
        };
        let rules = Publishable::new(origins, 30, budget).unwrap();
        let stored = rules.stored_origins();
        assert_eq!(
            Publishable::from_stored(Some(&stored), Some(30), budget),
            Ok(rules)
        );
        assert_eq!(Publishable::new(vec![], 30, budget), Err(Refused::NoOrigin));
        assert!(Publishable::from_stored(None, Some(30), budget).is_err());
        assert!(Publishable::from_stored(Some(&stored), None, budget).is_err());
    }

    #[test]
    fn a_rule_beyond_what_the_ledgers_store_is_refused() {
        let origins = vec![OriginPattern::parse("https://shop.example").unwrap()];
        let none = Budget {
            per_minute: None,
            per_day: None,
        };
        let over = MAX_KEY_RULE + 1;
        assert_eq!(
            Publishable::new(origins.clone(), over, none),
            Err(Refused::RuleTooLarge)
        );
        let day = Budget {
            per_day: Some(over),
            ..none
        };
        assert_eq!(
            Publishable::new(origins.clone(), 60, day),
            Err(Refused::RuleTooLarge)
        );
        let most = Budget {
            per_minute: Some(MAX_KEY_RULE),
            per_day: Some(MAX_KEY_RULE),
        };
        assert!(Publishable::new(origins, MAX_KEY_RULE, most).is_ok());
        // What an earlier version stored above it still loads, as the most there is.
        let stored =
            Publishable::from_stored(Some("https://shop.example"), Some(over), day).unwrap();
        assert_eq!(stored.per_ip_minute, MAX_KEY_RULE);
        assert_eq!(stored.budget.per_day, Some(MAX_KEY_RULE));
    }

    #[test]
    fn a_budget_of_zero_requests_is_refused() {
        let origins = vec![OriginPattern::parse("https://shop.example").unwrap()];
        for budget in [
            Budget {
                per_minute: Some(0),
                per_day: None,
            },
            Budget {
                per_minute: Some(5),
                per_day: Some(0),
            },
        ] {
            assert_eq!(
                Publishable::new(origins.clone(), 30, budget),
                Err(Refused::ZeroBudget)
            );
            assert!(
                Publishable::from_stored(Some("https://shop.example"), Some(30), budget).is_err()
            );
        }
    }
}
