//! The charge rule, pure: which operation is billed as what (`Endpoint`), and whether an
//! account can pay for N queries now (401 -> 402 -> 429, all or nothing).

use std::fmt;
use std::time::SystemTime;

use crate::domain::money::{Micros, PRICE_PER_QUERY};
use crate::domain::rate_limit::{Counters, Limits, RateStatus};

/// An authenticated caller: the account and the key (row ids) a request came with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Caller {
    pub account_id: i64,
    pub key_id: i64,
}

/// A billed (or free) operation of the API, as the ledger stores it (`ledger.endpoint`).
///
/// The stored names are these strings exactly, never a path: `lookup`, not `/api/lookup`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    Lookup,
    City,
    Metacode,
    Metazip,
    Validate,
    ValidateBulk,
    Nearest,
    Radius,
    Distance,
    Autocomplete,
    NearestBulk,
    Suggest,
    Places,
    Verify,
    VerifyBulk,
    /// Free: never charged (like `/api/aboutapi`).
    Countries,
    /// Free: never charged.
    Aboutapi,
    /// Free: the dataset's provenance and changes.
    Dataset,
}

impl Endpoint {
    pub const ALL: [Endpoint; 18] = [
        Endpoint::Lookup,
        Endpoint::City,
        Endpoint::Metacode,
        Endpoint::Metazip,
        Endpoint::Validate,
        Endpoint::ValidateBulk,
        Endpoint::Nearest,
        Endpoint::Radius,
        Endpoint::Distance,
        Endpoint::Autocomplete,
        Endpoint::NearestBulk,
        Endpoint::Suggest,
        Endpoint::Places,
        Endpoint::Verify,
        Endpoint::VerifyBulk,
        Endpoint::Countries,
        Endpoint::Aboutapi,
        Endpoint::Dataset,
    ];

    /// The name stored in `ledger.endpoint`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Endpoint::Lookup => "lookup",
            Endpoint::City => "city",
            Endpoint::Metacode => "metacode",
            Endpoint::Metazip => "metazip",
            Endpoint::Validate => "validate",
            Endpoint::ValidateBulk => "validate-bulk",
            Endpoint::Nearest => "nearest",
            Endpoint::Radius => "radius",
            Endpoint::Distance => "distance",
            Endpoint::Autocomplete => "autocomplete",
            Endpoint::NearestBulk => "nearest-bulk",
            Endpoint::Suggest => "suggest",
            Endpoint::Places => "places",
            Endpoint::Verify => "verify",
            Endpoint::VerifyBulk => "verify-bulk",
            Endpoint::Countries => "countries",
            Endpoint::Aboutapi => "aboutapi",
            Endpoint::Dataset => "dataset",
        }
    }

    /// The endpoint stored under `name`.
    pub fn parse(name: &str) -> Option<Endpoint> {
        Endpoint::ALL.into_iter().find(|e| e.as_str() == name)
    }

    /// Free operations are never charged nor counted in rate-limit windows.
    pub const fn is_free(self) -> bool {
        matches!(
            self,
            Endpoint::Countries | Endpoint::Aboutapi | Endpoint::Dataset
        )
    }

    /// The operations a checkout form needs, the only ones a publishable key reaches
    /// (docs/browser.md): what a page asks while a shopper types an address.
    pub const fn form_safe(self) -> bool {
        matches!(
            self,
            Endpoint::Lookup
                | Endpoint::City
                | Endpoint::Validate
                | Endpoint::Autocomplete
                | Endpoint::Suggest
                | Endpoint::Places
                | Endpoint::Verify
        )
    }

    /// Bulk operations are billed per record and refused with the bulk texts.
    pub const fn is_bulk(self) -> bool {
        matches!(
            self,
            Endpoint::ValidateBulk | Endpoint::NearestBulk | Endpoint::VerifyBulk
        )
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a charge is refused (nothing is charged or counted), in the contract's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Unknown or revoked key: 401.
    #[error("Invalid API key")]
    InvalidKey,
    /// The balance is below N x 0.000028 USD: 402.
    #[error("Insufficient balance")]
    InsufficientBalance,
    /// A window has no room for N more queries: 429, with `Retry-After`.
    #[error("Rate limit exceeded")]
    RateLimited { retry_after_secs: u64 },
}

/// What the envelope shows of an account: its balance and `rateLimit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccountStatus {
    pub balance: Micros,
    pub rate: RateStatus,
}

/// What a charge decision needs of an account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccountState {
    pub balance: Micros,
    pub limits: Limits,
    pub counters: Counters,
}

impl AccountState {
    /// Can the account pay for `queries` at `now`? Balance (402) before windows (429).
    /// `Ok` carries the cost.
    pub fn admits(&self, queries: u64, now: SystemTime) -> Result<Micros, Refusal> {
        let cost = PRICE_PER_QUERY
            .checked_mul(queries)
            .filter(|cost| *cost <= self.balance)
            .ok_or(Refusal::InsufficientBalance)?;
        self.counters
            .check(&self.limits, queries, now)
            .map_err(|retry_after_secs| Refusal::RateLimited { retry_after_secs })?;
        Ok(cost)
    }

    /// Charges `queries` at `now` when admitted: the balance goes down by the cost and
    /// every window counts them. Refused: nothing changes. Returns the cost.
    pub fn charge(&mut self, queries: u64, now: SystemTime) -> Result<Micros, Refusal> {
        let cost = self.admits(queries, now)?;
        // admits checked cost <= balance, both within bounds.
        self.balance = self.balance.checked_sub(cost).unwrap_or(Micros::ZERO);
        self.counters = self.counters.add(queries, now);
        Ok(cost)
    }

    /// Counts `queries` in every window at `now`, charging nothing (the replay of an
    /// answer already paid for), when every window has room for them; refused
    /// (`RateLimited`): nothing changes. The balance is not looked at.
    pub fn count(&mut self, queries: u64, now: SystemTime) -> Result<(), Refusal> {
        self.counters
            .check(&self.limits, queries, now)
            .map_err(|retry_after_secs| Refusal::RateLimited { retry_after_secs })?;
        self.counters = self.counters.add(queries, now);
        Ok(())
    }

    pub fn status(&self, now: SystemTime) -> AccountStatus {
        AccountStatus {
            balance: self.balance,
            rate: self.counters.status(&self.limits, now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(balance: i64, per_minute: Option<u64>) -> AccountState {
        AccountState {
            balance: Micros::new(balance).unwrap(),
            limits: Limits {
                per_minute,
                per_hour: None,
                per_day: None,
            },
            counters: Counters::default(),
        }
    }

    #[test]
    fn a_count_takes_nothing_and_is_refused_only_by_a_full_window() {
        let now = SystemTime::now();
        let mut a = account(0, Some(5));
        assert_eq!(a.count(3, now), Ok(()));
        assert_eq!(a.balance, Micros::ZERO);
        assert_eq!(a.status(now).rate.per_minute.current, Some(3));
        assert!(matches!(a.count(3, now), Err(Refusal::RateLimited { .. })));
        assert_eq!(a.status(now).rate.per_minute.current, Some(3));
        assert_eq!(a.count(2, now), Ok(()));
    }

    #[test]
    fn a_charge_takes_28_micros_per_query_and_counts_them() {
        let now = SystemTime::now();
        let mut a = account(100, Some(10));
        assert_eq!(a.charge(3, now), Ok(Micros::new(84).unwrap()));
        assert_eq!(a.balance, Micros::new(16).unwrap());
        assert_eq!(a.status(now).rate.per_minute.current, Some(3));
    }

    #[test]
    fn a_balance_short_of_the_whole_batch_is_refused_and_changes_nothing() {
        let now = SystemTime::now();
        let mut a = account(55, None);
        let before = a;
        assert_eq!(a.charge(2, now), Err(Refusal::InsufficientBalance));
        assert_eq!(a, before);
        assert_eq!(a.charge(1, now), Ok(PRICE_PER_QUERY));
    }

    #[test]
    fn the_balance_is_checked_before_the_windows() {
        let now = SystemTime::now();
        let mut a = account(28, Some(1));
        a.charge(1, now).unwrap();
        // Both fail now: the balance is the answer.
        assert_eq!(a.admits(1, now), Err(Refusal::InsufficientBalance));
        let mut b = account(1_000, Some(1));
        b.charge(1, now).unwrap();
        assert!(matches!(
            b.charge(1, now),
            Err(Refusal::RateLimited { retry_after_secs }) if retry_after_secs >= 1
        ));
        assert_eq!(b.balance, Micros::new(972).unwrap());
    }

    #[test]
    fn a_charge_of_zero_queries_costs_nothing() {
        let now = SystemTime::now();
        let mut a = account(0, None);
        assert_eq!(a.charge(0, now), Ok(Micros::ZERO));
    }

    #[test]
    fn every_endpoint_name_reads_back_as_itself() {
        for (at, e) in Endpoint::ALL.into_iter().enumerate() {
            assert_eq!(Endpoint::parse(e.as_str()), Some(e));
            // In the order of the variants: the metrics index a table by `e as usize`.
            assert_eq!(e as usize, at, "{e}");
        }
        assert_eq!(Endpoint::parse("/api/lookup"), None);
        assert_eq!(Endpoint::NearestBulk.as_str(), "nearest-bulk");
        assert!(Endpoint::Countries.is_free() && !Endpoint::Suggest.is_free());
    }
}
