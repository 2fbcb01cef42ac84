//! A node's grants in cluster mode (docs/cluster.md): for each account, what is left of
//! the slice of its balance the ledger leased this node, until when the node may spend it,
//! and how much to ask for next. The single file never leases (`Leasing::WholeBalance`).
//!
//! Deadlines are read on `CLOCK_BOOTTIME`, not `Instant`: `Instant` is `CLOCK_MONOTONIC`,
//! which stops while a VM is suspended, so a node resumed after the database expired its
//! grant would still think the grant alive and spend money another node now holds.
//! `CLOCK_BOOTTIME` keeps counting through a suspend.

use std::time::Duration;

use crate::domain::money::{Micros, PRICE_PER_QUERY};

/// How long a grant lives on the database clock after the grant or flush that set it.
pub const LEASE_TTL: Duration = Duration::from_secs(5);
/// A node stops spending a grant this long before the database may expire it: it absorbs
/// the two clocks running at different rates (20% of the TTL) and the round trip.
pub const MARGIN: Duration = Duration::from_secs(1);
/// The smallest grant asked for: 100 queries.
pub const MIN_GRANT_QUERIES: u64 = 100;
/// A grant not spent from for this long is handed back at the next flush.
pub const IDLE_RETURN: Duration = Duration::from_secs(3);
/// How long a node short of money waits for other nodes to hand back what it recalled
/// before it asks the ledger the last time (3 flush intervals).
pub const RECALL_WAIT: Duration = Duration::from_millis(30);
/// A grant this fresh is kept through a recall: requests of this node asked for it and
/// are about to spend it (handing it straight back makes the last cents of a balance
/// bounce between nodes).
pub(super) const RECALL_HOLD: Duration = Duration::from_millis(50);
/// A grant spent from this recently is topped up by the flush when it runs low.
const TOP_UP_ACTIVE: Duration = Duration::from_secs(1);
/// A grant is topped up at most this often.
const TOP_UP_EVERY: Duration = Duration::from_millis(500);
/// Recent spend is measured over windows this long.
const WANT_WINDOW: Duration = Duration::from_millis(200);
/// A grant asks for what the node would spend on the account in this long at its recent
/// rate: it outlasts a flush that waits for other nodes' (charges wait up to
/// `books::FLUSH_AGE`), and a top-up asked at half of it comes a second early.
const WANT_HORIZON: Duration = Duration::from_secs(2);

/// Time since boot on `CLOCK_BOOTTIME` (it counts a suspend).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct BootTime(Duration);

impl BootTime {
    pub fn now() -> BootTime {
        // libc's clock_gettime (the vDSO through the C library), not rustix's own vDSO
        // reader: valgrind and the sanitizers intercept the C library's call, while rustix's
        // parse of the vDSO crashed under valgrind (issue 37).
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a valid, writable timespec; CLOCK_BOOTTIME exists on every Linux
        // this builds for (2.6.39+), and on failure `t` stays zero (a deadline already past).
        unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut t) };
        BootTime(Duration::new(
            u64::try_from(t.tv_sec).unwrap_or(0),
            u32::try_from(t.tv_nsec).unwrap_or(0),
        ))
    }

    pub(super) fn since(self, earlier: BootTime) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    #[cfg(test)]
    pub(super) fn before(self, by: Duration) -> BootTime {
        BootTime(self.0.saturating_sub(by))
    }

    /// The last instant a grant set by a request sent at `self` may be spent.
    pub fn deadline(self) -> BootTime {
        BootTime(self.0 + LEASE_TTL - MARGIN)
    }
}

/// This node's grant on one account.
#[derive(Debug, Clone, Default)]
pub(super) struct Lease {
    /// What is left of the grant: the ledger's `remaining` minus this node's unflushed
    /// charges of the account.
    pub left: Micros,
    /// Spendable until then; `None`: no grant held.
    pub deadline: Option<BootTime>,
    /// Another node asked for this account's money: hand back what is left.
    pub recalled: bool,
    /// When a flush last asked to top it up.
    pub topped_up: Option<BootTime>,
    /// When it was last spent from and granted, and what it spent recently.
    usage: Usage<Micros>,
}

impl Lease {
    /// What may be spent now.
    pub fn usable(&self, now: BootTime) -> Micros {
        match self.deadline {
            Some(deadline) if now < deadline => self.left,
            _ => Micros::ZERO,
        }
    }

    pub fn spend(&mut self, cost: Micros, now: BootTime) {
        self.left = self.left.checked_sub(cost).unwrap_or(Micros::ZERO);
        self.usage.spend(cost, now);
    }

    /// How much to ask for when `need` more is needed: the recent spend over
    /// `WANT_HORIZON`, at least `MIN_GRANT_QUERIES` queries, at least `need`.
    pub fn want(&self, need: Micros) -> Micros {
        let minimum = PRICE_PER_QUERY
            .checked_mul(MIN_GRANT_QUERIES)
            .unwrap_or(Micros::MAX);
        let recent = self
            .usage
            .recent()
            .checked_mul((WANT_HORIZON.as_millis() / WANT_WINDOW.as_millis()) as u64)
            .unwrap_or(Micros::MAX);
        need.max(minimum).max(recent)
    }

    /// The top-up to ask of the next flush: what the node would ask for now (`want`),
    /// when it spent from the grant within `TOP_UP_ACTIVE` and less than half of that is
    /// left. Requests then keep spending while the flush refills the grant, instead of
    /// waiting for a grant of their own when it runs out. `None` when recalled or
    /// stopping; when nothing is left (handed back, or spent: a request short of it asks
    /// for a grant itself, and a top-up must not take back what a recall returned); and
    /// within `TOP_UP_EVERY` of the last ask (a drained account grants nothing, and would
    /// otherwise be flushed at every writer turn).
    pub fn top_up(&self, now: BootTime, stopping: bool) -> Option<Micros> {
        if stopping || self.recalled || self.left == Micros::ZERO {
            return None;
        }
        if self
            .topped_up
            .is_some_and(|asked| now.since(asked) < TOP_UP_EVERY)
        {
            return None;
        }
        let active = self
            .usage
            .last_used()
            .is_some_and(|used| now.since(used) < TOP_UP_ACTIVE);
        let want = self.want(PRICE_PER_QUERY);
        let low = self.left.checked_mul(2).is_some_and(|twice| twice < want);
        (active && low).then_some(want)
    }

    /// Should what is left go back at the next flush?
    pub fn to_return(&self, now: BootTime, stopping: bool) -> bool {
        if self.left == Micros::ZERO {
            return false;
        }
        stopping || self.usage.due_back(now, self.deadline, self.recalled)
    }

    /// The ledger granted it more at `now`.
    pub fn granted(&mut self, now: BootTime) {
        self.usage.granted(now);
    }
}

/// How what a node holds (a grant, or a window slice) has been used: when it was last
/// spent from or granted, when the ledger last granted it, and what it spent in the
/// current `WANT_WINDOW` and the one before (its recent rate, from which it asks for
/// more). One for both, so that a grant and a slice are measured and handed back alike.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Usage<T> {
    last_used: Option<BootTime>,
    granted_at: Option<BootTime>,
    window_start: Option<BootTime>,
    in_window: T,
    in_last_window: T,
}

/// What a holder counts its spending in (micro-dollars, queries): it adds without
/// overflowing, saturating at its largest value.
pub(super) trait Spending: Copy + Ord + Default {
    fn plus(self, more: Self) -> Self;
}

impl Spending for u64 {
    #[inline]
    fn plus(self, more: u64) -> u64 {
        self.saturating_add(more)
    }
}

impl Spending for Micros {
    #[inline]
    fn plus(self, more: Micros) -> Micros {
        self.checked_add(more).unwrap_or(Micros::MAX)
    }
}

impl<T: Spending> Usage<T> {
    /// `amount` spent at `now`; a new window starts when the current one is over.
    #[inline]
    pub(super) fn spend(&mut self, amount: T, now: BootTime) {
        self.last_used = Some(now);
        match self.window_start {
            Some(start) if now.since(start) < WANT_WINDOW => {}
            _ => {
                self.in_last_window = self.in_window;
                self.in_window = T::default();
                self.window_start = Some(now);
            }
        }
        self.in_window = self.in_window.plus(amount);
    }

    /// The ledger granted more at `now` (which counts as a use).
    pub(super) fn granted(&mut self, now: BootTime) {
        self.granted_at = Some(now);
        self.last_used = Some(now);
    }

    /// When it was last spent from, or granted.
    pub(super) fn last_used(&self) -> Option<BootTime> {
        self.last_used
    }

    /// The recent spend: the more of the current window's and the last one's.
    pub(super) fn recent(&self) -> T {
        self.in_window.max(self.in_last_window)
    }

    /// Whether what is held goes back at the next flush: unused for `IDLE_RETURN`, past
    /// its local `deadline`, or `recalled` by another node (unless granted within
    /// `RECALL_HOLD`: this node's requests are about to spend it).
    pub(super) fn due_back(
        &self,
        now: BootTime,
        deadline: Option<BootTime>,
        recalled: bool,
    ) -> bool {
        let idle = self
            .last_used
            .is_none_or(|used| now.since(used) >= IDLE_RETURN);
        let expired = deadline.is_none_or(|d| now >= d);
        let recalled = recalled
            && self
                .granted_at
                .is_none_or(|granted| now.since(granted) >= RECALL_HOLD);
        recalled || idle || expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_past_its_deadline_cannot_be_spent() {
        let now = BootTime::now();
        let lease = Lease {
            left: Micros::new(100).unwrap(),
            deadline: Some(now),
            ..Lease::default()
        };
        assert_eq!(lease.usable(now), Micros::ZERO);
        let alive = Lease {
            deadline: Some(now.deadline()),
            ..lease
        };
        assert_eq!(alive.usable(now), Micros::new(100).unwrap());
    }

    #[test]
    fn a_grant_asks_for_at_least_a_hundred_queries_and_at_least_the_need() {
        let lease = Lease::default();
        assert_eq!(
            lease.want(Micros::new(28).unwrap()),
            Micros::new(2_800).unwrap()
        );
        assert_eq!(
            lease.want(Micros::new(28_000).unwrap()),
            Micros::new(28_000).unwrap()
        );
    }

    #[test]
    fn a_grant_spent_from_lately_is_topped_up_below_half_of_what_it_would_ask() {
        let now = BootTime::now();
        let mut lease = Lease {
            left: Micros::new(1_400).unwrap(),
            deadline: Some(now.deadline()),
            ..Lease::default()
        };
        // Never spent from: no top-up.
        assert_eq!(lease.top_up(now, false), None);
        lease.spend(PRICE_PER_QUERY, now);
        // 1,372 left of the 2,800 (100 queries) it would ask for: less than half.
        assert_eq!(lease.top_up(now, false), Some(Micros::new(2_800).unwrap()));
        assert_eq!(lease.top_up(now, true), None, "stopping");
        let recalled = Lease {
            recalled: true,
            ..lease.clone()
        };
        assert_eq!(recalled.top_up(now, false), None);
        let plenty = Lease {
            left: Micros::new(1_400).unwrap(),
            ..lease.clone()
        };
        assert_eq!(plenty.top_up(now, false), None);
        // Not spent from for a second: not topped up (it will go back when idle).
        let later = BootTime(now.0 + TOP_UP_ACTIVE);
        assert_eq!(lease.top_up(later, false), None);
        // Asked for just now: not again before `TOP_UP_EVERY`.
        let asked = Lease {
            topped_up: Some(now),
            ..lease.clone()
        };
        assert_eq!(asked.top_up(now, false), None);
        // Nothing left: a request short of it asks for a grant itself.
        let spent = Lease {
            left: Micros::ZERO,
            ..lease
        };
        assert_eq!(spent.top_up(now, false), None);
    }

    #[test]
    fn boot_time_moves_forward() {
        let a = BootTime::now();
        let b = BootTime::now();
        assert!(b >= a);
    }
}
