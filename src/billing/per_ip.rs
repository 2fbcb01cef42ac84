//! The limits of publishable keys, counted in memory: the per-client-IP limit
//! (`postal key create --per-ip-minute`: at most N requests a minute from one IP address
//! with one key) and the key's budget (`--max-per-minute`, `--max-per-day`: at most N
//! requests a minute and M a day with the key over every IP), in fixed UTC windows like
//! the account's (`domain::rate_limit::Window`).
//!
//! A page's key is public, so these limits are what keep one visitor (or a script that
//! copied the key) and many of them together (a botnet, an IPv6 range) from spending the
//! account: they hold beside the account's own limits, and a refused request costs
//! nothing and is counted nowhere. They live in memory only, each node counting what it
//! answers (in a cluster a key's budget is per node): a restart forgets at most one
//! minute of per-IP counts and one day of a budget's.
//!
//! Sixteen shards, each a mutex over a map of (key, IP) -> (minute, count) (`PerMinute`,
//! which also counts the dashboard's clients and sessions): a request takes one shard for
//! one hash lookup. A shard that grows past `PRUNE_AT` entries drops
//! those of past minutes, so memory follows the clients of the current minute. A key
//! with a budget has its totals in a shard of its own, taken while the IP's shard is held
//! (always in that order), so that both are checked before either is counted.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::SystemTime;

use crate::domain::api_key::Budget;
use crate::domain::rate_limit::Window;

const SHARDS: usize = 16;
/// Entries of a shard above which its past minutes (past days, for budgets) are dropped.
const PRUNE_AT: usize = 4096;

/// Requests a minute per `K` (a key and a client IP; the dashboard's client addresses and
/// sessions): `K` -> (minute start, requests in it), in sixteen shards.
pub struct PerMinute<K> {
    shards: [Mutex<HashMap<K, (i64, u32)>>; SHARDS],
    hasher: RandomState,
}

impl<K> Default for PerMinute<K> {
    fn default() -> Self {
        PerMinute {
            shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
            hasher: RandomState::new(),
        }
    }
}

impl<K: Hash + Eq + Copy> PerMinute<K> {
    /// Counts one request of `who` when the minute has room for it under `per_minute`,
    /// and tells the minute's count with it; a refused request is not counted.
    pub fn admit(&self, who: K, per_minute: u32, now: SystemTime) -> Result<u32, LimitExceeded> {
        self.admit_if(who, per_minute, now, || Ok(()))
    }

    /// As `admit`, once `also` (run with `who`'s shard held) admits the request too.
    fn admit_if(
        &self,
        who: K,
        per_minute: u32,
        now: SystemTime,
        also: impl FnOnce() -> Result<(), LimitExceeded>,
    ) -> Result<u32, LimitExceeded> {
        let minute = Window::Minute.start(now);
        let shard = &self.shards[self.hasher.hash_one(who) as usize % SHARDS];
        let mut counts = shard.lock().unwrap_or_else(|e| e.into_inner());
        if counts.len() >= PRUNE_AT && !counts.contains_key(&who) {
            counts.retain(|_, (start, _)| *start == minute);
        }
        let entry = counts.entry(who).or_insert((minute, 0));
        if entry.0 != minute {
            *entry = (minute, 0);
        }
        if entry.1 >= per_minute {
            return Err(LimitExceeded {
                retry_after: Window::Minute.seconds_left(now),
            });
        }
        also()?;
        entry.1 += 1;
        Ok(entry.1)
    }

    /// Entries held (tests: pruning bounds memory).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }
}

/// A key's requests over every IP: (minute start, requests in it), (day start, requests
/// in it).
#[derive(Clone, Copy, Default)]
struct Totals {
    minute: (i64, u32),
    day: (i64, u32),
}

pub struct PerIpLimiter {
    /// (key row id, client IP) -> its requests of the minute.
    counts: PerMinute<(i64, IpAddr)>,
    /// Key row id -> its totals, for keys with a budget.
    budgets: [Mutex<HashMap<i64, Totals>>; SHARDS],
    hasher: RandomState,
}

/// Refused: the key's requests from this IP this minute, or the key's budget of the
/// minute or of the day, are used up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitExceeded {
    /// Seconds until the window that is full ends (`Retry-After`), at least 1.
    pub retry_after: u64,
}

impl Default for PerIpLimiter {
    fn default() -> Self {
        PerIpLimiter {
            counts: PerMinute::default(),
            budgets: std::array::from_fn(|_| Mutex::new(HashMap::new())),
            hasher: RandomState::new(),
        }
    }
}

impl PerIpLimiter {
    /// Counts one request of `key_id` from `ip` when the minute has room for it under
    /// `per_minute`, and tells the minute's count with it; a refused request is not
    /// counted.
    pub fn admit(
        &self,
        key_id: i64,
        ip: IpAddr,
        per_minute: u32,
        now: SystemTime,
    ) -> Result<u32, LimitExceeded> {
        self.counts.admit((key_id, ip), per_minute, now)
    }

    /// As [`admit`](Self::admit), and within the key's `budget` too: the request is
    /// counted (in the IP's minute and the key's totals) only when all have room for it.
    /// The per-IP limit is checked first; a full day is answered before a full minute
    /// (its `retry_after` is the longer).
    pub fn admit_within(
        &self,
        key_id: i64,
        ip: IpAddr,
        per_minute: u32,
        budget: Budget,
        now: SystemTime,
    ) -> Result<u32, LimitExceeded> {
        self.counts.admit_if((key_id, ip), per_minute, now, || {
            match budget.is_unlimited() {
                true => Ok(()),
                false => self.spend(key_id, budget, now),
            }
        })
    }

    /// Counts one request in the key's totals when its budget has room for it.
    fn spend(&self, key_id: i64, budget: Budget, now: SystemTime) -> Result<(), LimitExceeded> {
        let (minute, day) = (Window::Minute.start(now), Window::Day.start(now));
        let shard = &self.budgets[self.hasher.hash_one(key_id) as usize % SHARDS];
        let mut totals = shard.lock().unwrap_or_else(|e| e.into_inner());
        if totals.len() >= PRUNE_AT && !totals.contains_key(&key_id) {
            totals.retain(|_, t| t.day.0 == day);
        }
        let t = totals.entry(key_id).or_default();
        if t.minute.0 != minute {
            t.minute = (minute, 0);
        }
        if t.day.0 != day {
            t.day = (day, 0);
        }
        let full = |limit: Option<u32>, spent: u32| limit.is_some_and(|n| spent >= n);
        if full(budget.per_day, t.day.1) {
            return Err(LimitExceeded {
                retry_after: Window::Day.seconds_left(now),
            });
        }
        if full(budget.per_minute, t.minute.1) {
            return Err(LimitExceeded {
                retry_after: Window::Minute.seconds_left(now),
            });
        }
        t.minute.1 += 1;
        t.day.1 += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn each_key_and_ip_gets_its_requests_a_minute() {
        let limiter = PerIpLimiter::default();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "2001:db8::1".parse().unwrap();
        let minute = 60 * 1_000_000;
        for n in 1..=3 {
            assert_eq!(limiter.admit(1, a, 3, at(minute + 15)), Ok(n));
        }
        assert_eq!(
            limiter.admit(1, a, 3, at(minute + 15)),
            Err(LimitExceeded { retry_after: 45 })
        );
        // A refusal is not counted; another IP and another key have their own.
        assert_eq!(
            limiter.admit(1, a, 3, at(minute + 59)),
            Err(LimitExceeded { retry_after: 1 })
        );
        assert_eq!(limiter.admit(1, b, 3, at(minute + 59)), Ok(1));
        assert_eq!(limiter.admit(2, a, 3, at(minute + 59)), Ok(1));
        // The next minute starts from zero.
        assert_eq!(limiter.admit(1, a, 3, at(minute + 60)), Ok(1));
    }

    #[test]
    fn a_keys_budget_bounds_its_requests_over_every_ip_a_minute_and_a_day() {
        let limiter = PerIpLimiter::default();
        let ip = |n: u32| IpAddr::from(n.to_be_bytes());
        let budget = Budget {
            per_minute: Some(3),
            per_day: Some(5),
        };
        let day = 86_400 * 20_000;
        // Three IPs, one request each: the minute's budget is spent.
        for n in 1..=3 {
            assert_eq!(
                limiter.admit_within(1, ip(n), 60, budget, at(day + 10)),
                Ok(1)
            );
        }
        assert_eq!(
            limiter.admit_within(1, ip(4), 60, budget, at(day + 10)),
            Err(LimitExceeded { retry_after: 50 })
        );
        // The refused IP was counted nowhere: its minute is untouched, and the next
        // minute it gets the key's fourth request of the day.
        assert_eq!(
            limiter.admit_within(1, ip(4), 60, budget, at(day + 60)),
            Ok(1)
        );
        // Another key has its own budget.
        assert_eq!(
            limiter.admit_within(2, ip(4), 60, budget, at(day + 60)),
            Ok(1)
        );
        assert_eq!(
            limiter.admit_within(1, ip(5), 60, budget, at(day + 61)),
            Ok(1)
        );
        // Five today: the day is full, a new minute does not help; until midnight UTC.
        assert_eq!(
            limiter.admit_within(1, ip(6), 60, budget, at(day + 120)),
            Err(LimitExceeded {
                retry_after: 86_400 - 120
            })
        );
        assert_eq!(
            limiter.admit_within(1, ip(6), 60, budget, at(day + 86_400)),
            Ok(1)
        );
    }

    #[test]
    fn a_request_over_its_ip_limit_does_not_spend_the_budget_nor_the_reverse() {
        let limiter = PerIpLimiter::default();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let budget = Budget {
            per_minute: Some(2),
            per_day: None,
        };
        assert_eq!(limiter.admit_within(1, a, 1, budget, at(60)), Ok(1));
        // Over a's per-IP limit: refused before the budget, which keeps its second.
        assert_eq!(
            limiter.admit_within(1, a, 1, budget, at(70)),
            Err(LimitExceeded { retry_after: 50 })
        );
        assert_eq!(limiter.admit_within(1, b, 5, budget, at(70)), Ok(1));
        // The budget is spent: b's refusal leaves b's own count at 1.
        assert_eq!(
            limiter.admit_within(1, b, 5, budget, at(71)),
            Err(LimitExceeded { retry_after: 49 })
        );
        let unlimited = Budget::UNLIMITED;
        assert_eq!(limiter.admit_within(1, b, 5, unlimited, at(72)), Ok(2));
    }

    #[test]
    fn past_minutes_are_dropped_as_clients_come() {
        let limiter = PerIpLimiter::default();
        let ip = |n: u32| IpAddr::from(n.to_be_bytes());
        for n in 0..40_000 {
            limiter.admit(1, ip(n), 1, at(60)).unwrap();
        }
        assert_eq!(limiter.counts.len(), 40_000);
        for n in 0..40_000 {
            limiter.admit(1, ip(1_000_000 + n), 1, at(120)).unwrap();
        }
        // About 2,500 + 2,500 a shard: each one passed PRUNE_AT and dropped the first
        // minute's clients; the second minute's are all there.
        assert_eq!(limiter.counts.len(), 40_000);
    }
}
