//! The per-client-IP limit of publishable keys (`postal key create --per-ip-minute`): at
//! most N requests a minute from one IP address with one key, in fixed UTC minutes like
//! the account's windows (`domain::rate_limit::Window::Minute`).
//!
//! A page's key is public, so this limit is what keeps one visitor (or a script that
//! copied the key) from spending the account: it holds beside the account's own limits,
//! and a refused request costs nothing. It lives in memory only: counts are per minute,
//! so a restart forgets at most one minute of them.
//!
//! Sixteen shards, each a mutex over a map of (key, IP) -> (minute, count): a request
//! takes one shard for one hash lookup. A shard that grows past `PRUNE_AT` entries drops
//! those of past minutes, so memory follows the clients of the current minute.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::SystemTime;

use crate::domain::rate_limit::Window;

const SHARDS: usize = 16;
/// Entries of a shard above which its past minutes are dropped.
const PRUNE_AT: usize = 4096;

/// (key row id, client IP) -> (minute start, requests in it).
type Counts = HashMap<(i64, IpAddr), (i64, u32)>;

pub struct PerIpLimiter {
    shards: [Mutex<Counts>; SHARDS],
    hasher: RandomState,
}

/// Refused: the key's requests from this IP this minute are used up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerIpExceeded {
    /// Seconds until the minute ends (`Retry-After`), at least 1.
    pub retry_after: u64,
}

impl Default for PerIpLimiter {
    fn default() -> Self {
        PerIpLimiter {
            shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
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
    ) -> Result<u32, PerIpExceeded> {
        let minute = Window::Minute.start(now);
        let shard = &self.shards[self.hasher.hash_one((key_id, ip)) as usize % SHARDS];
        let mut counts = shard.lock().unwrap_or_else(|e| e.into_inner());
        if counts.len() >= PRUNE_AT && !counts.contains_key(&(key_id, ip)) {
            counts.retain(|_, (start, _)| *start == minute);
        }
        let entry = counts.entry((key_id, ip)).or_insert((minute, 0));
        if entry.0 != minute {
            *entry = (minute, 0);
        }
        if entry.1 >= per_minute {
            return Err(PerIpExceeded {
                retry_after: Window::Minute.seconds_left(now),
            });
        }
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
            Err(PerIpExceeded { retry_after: 45 })
        );
        // A refusal is not counted; another IP and another key have their own.
        assert_eq!(
            limiter.admit(1, a, 3, at(minute + 59)),
            Err(PerIpExceeded { retry_after: 1 })
        );
        assert_eq!(limiter.admit(1, b, 3, at(minute + 59)), Ok(1));
        assert_eq!(limiter.admit(2, a, 3, at(minute + 59)), Ok(1));
        // The next minute starts from zero.
        assert_eq!(limiter.admit(1, a, 3, at(minute + 60)), Ok(1));
    }

    #[test]
    fn past_minutes_are_dropped_as_clients_come() {
        let limiter = PerIpLimiter::default();
        let ip = |n: u32| IpAddr::from(n.to_be_bytes());
        for n in 0..40_000 {
            limiter.admit(1, ip(n), 1, at(60)).unwrap();
        }
        assert_eq!(limiter.len(), 40_000);
        for n in 0..40_000 {
            limiter.admit(1, ip(1_000_000 + n), 1, at(120)).unwrap();
        }
        // About 2,500 + 2,500 a shard: each one passed PRUNE_AT and dropped the first
        // minute's clients; the second minute's are all there.
        assert_eq!(limiter.len(), 40_000);
    }
}
