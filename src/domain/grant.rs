//! Cluster mode's money rules (docs/cluster.md): how much of an account's free balance
//! (balance minus what is leased to nodes) a grant leases a node, and how a flush takes a
//! node's spend: from its grant first, then from the free balance, the rest forgiven; and
//! how much of the room left in a rate-limit window a slice leases a node (design study
//! §4.5, W1). `settle` is a whole flush of a node's charges, returns and top-ups over the
//! accounts it locked: the arithmetic `db::pg::node` then writes.

use std::collections::BTreeMap;

use crate::domain::money::{Micros, PRICE_PER_QUERY};
use crate::domain::rate_limit::WindowKey;

/// The grant for a node that needs `need` more and asks for `want` (at least `need`) when
/// `free` is not leased to anyone: nothing when less than `need` is free; otherwise half
/// of what is free, but at least `need` and at most `want`, in whole queries beyond the
/// need. Grants shrink as the free balance shrinks, so the last queries of a balance go
/// one request at a time; and since needs are whole queries (costs are), a grant never
/// leaves a node a fragment of a query that it cannot spend and another node lacks.
pub fn grant_size(free: Micros, need: Micros, want: Micros) -> Micros {
    if free < need || need == Micros::ZERO {
        return Micros::ZERO;
    }
    let whole = |m: i64| m - m.rem_euclid(PRICE_PER_QUERY.get());
    let half = Micros::new(whole(free.get() / 2)).unwrap_or(Micros::ZERO);
    let want = Micros::new(whole(want.get())).unwrap_or(Micros::ZERO);
    want.max(need).min(half.max(need))
}

/// How a charge of `amount` is taken when the node's grant holds `granted` and the
/// account has `free` unleased: (from the grant, from the free balance). Less than
/// `amount` in all only when the grant expired and was swept while the node could not
/// flush: the rest is forgiven, in the customer's favour.
pub fn take(amount: Micros, granted: Micros, free: Micros) -> (Micros, Micros) {
    let from_grant = amount.min(granted);
    let rest = amount.checked_sub(from_grant).unwrap_or(Micros::ZERO);
    (from_grant, rest.min(free))
}

/// The slice of a limited window for a node that needs `need` more queries and asks for
/// `want` (at least `need`) when `room` queries of the window are neither counted nor
/// leased to any node (`limit - count - reserved`): nothing when less than `need` is left;
/// otherwise half the room, but at least `need` and at most `want`, in whole multiples of
/// `need`: a node asked by requests of that size is not left a fragment of room that
/// they cannot use while another node lacks it (as money grants are whole queries). As
/// with money, slices shrink with the room, so the last queries of a window go one
/// request at a time.
pub fn slice_size(room: u64, need: u64, want: u64) -> u64 {
    if room < need || need == 0 {
        return 0;
    }
    let size = want.max(need).min((room / 2).max(need));
    size - size % need
}

/// The room left in a window of `limit` that counted `count` and has `reserved` leased
/// in slices (every node's); zero when a lowered limit is already exceeded.
pub fn window_room(limit: u64, count: u64, reserved: u64) -> u64 {
    limit.saturating_sub(count).saturating_sub(reserved)
}

/// An account a flush locked: its balance, what every node's grants lease of it, and
/// what this node's grant holds (`own <= leased <= balance`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Locked {
    pub balance: Micros,
    pub leased: Micros,
    pub own: Micros,
}

impl Locked {
    /// What no node holds a grant of.
    pub fn free(&self) -> Micros {
        less(self.balance, self.leased)
    }

    /// What other nodes' grants hold.
    pub fn elsewhere(&self) -> Micros {
        less(self.leased, self.own)
    }

    /// Grants this node `grant_size` of the free balance (for a node that needs `need`
    /// more and asks for `want`); what was granted.
    pub fn grant(&mut self, need: Micros, want: Micros) -> Micros {
        let granted = grant_size(self.free(), need, want);
        self.own = more(self.own, granted);
        self.leased = more(self.leased, granted);
        granted
    }
}

/// What a flush took for one charge: `taken` of the `wanted` amount (less only when a
/// grant expired while the node could not flush: the rest is forgiven), and the
/// account's balance after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    pub wanted: Micros,
    pub taken: Micros,
    pub balance_after: Micros,
}

/// What a flush does to the accounts it locked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settlement {
    /// One per charge, in the charges' order; `None` for an account not locked (it does
    /// not exist: its charge is dropped).
    pub charges: Vec<Option<Taken>>,
    /// Every locked account after the flush.
    pub accounts: BTreeMap<i64, Locked>,
}

/// A node's flush of the accounts it `locked`, in order: each charge `(account, amount)`
/// taken from the node's grant first, then from the free balance (`take`); each return
/// `(account, amount)` handed back from the grant (never more than it holds); each top-up
/// `(account, want)` adding `grant_size` of the free balance to the grant (a query's worth
/// at least, or nothing). Money is only moved: a balance goes down by exactly what its
/// charges took, and `leased` moves with `own`.
pub fn settle(
    mut locked: BTreeMap<i64, Locked>,
    charges: &[(i64, Micros)],
    returns: &[(i64, Micros)],
    topups: &[(i64, Micros)],
) -> Settlement {
    let charges = charges
        .iter()
        .map(|&(account_id, wanted)| {
            let account = locked.get_mut(&account_id)?;
            let (from_grant, from_free) = take(wanted, account.own, account.free());
            let taken = more(from_grant, from_free);
            account.own = less(account.own, from_grant);
            account.leased = less(account.leased, from_grant);
            account.balance = less(account.balance, taken);
            Some(Taken {
                wanted,
                taken,
                balance_after: account.balance,
            })
        })
        .collect();
    for &(account_id, amount) in returns {
        if let Some(account) = locked.get_mut(&account_id) {
            let back = amount.max(Micros::ZERO).min(account.own);
            account.own = less(account.own, back);
            account.leased = less(account.leased, back);
        }
    }
    for &(account_id, want) in topups {
        if let Some(account) = locked.get_mut(&account_id) {
            account.grant(PRICE_PER_QUERY, want);
        }
    }
    Settlement {
        charges,
        accounts: locked,
    }
}

/// `a - b`, never below zero (every subtraction of `settle` is of a part from its whole).
fn less(a: Micros, b: Micros) -> Micros {
    a.checked_sub(b)
        .filter(|d| !d.is_negative())
        .unwrap_or(Micros::ZERO)
}

/// `a + b` (every addition of `settle` stays within a balance).
fn more(a: Micros, b: Micros) -> Micros {
    a.checked_add(b).unwrap_or(Micros::MAX)
}

// The vocabulary of slices between the books (`billing::books::slices`) and the ledger
// (`db::pg::windows`).

/// Queries of one window of an account: admitted in it, left of a slice of it, or
/// counted in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct WindowQueries {
    pub account_id: i64,
    pub window: WindowKey,
    pub queries: u64,
}

/// A slice of a limited window asked for: `need` more queries of the window at least,
/// `want` at most. `keep`: the node's slice was leased under limits since changed; the
/// ledger first lowers it to this (what the node admitted and has not flushed yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceAsk {
    pub window: WindowKey,
    pub need: u64,
    pub want: u64,
    pub keep: Option<u64>,
}

/// What the ledger holds for a node on one window of an account after a slice request or
/// a flush: what is left of its slice, and the window's count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceHeld {
    pub account_id: i64,
    pub window: WindowKey,
    pub remaining: u64,
    pub count: u64,
    /// Nothing could be granted while other nodes hold enough of the window that handing
    /// it back could cover the need (they were asked to); false in a flush's report.
    pub elsewhere: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(v: i64) -> Micros {
        Micros::new(v).unwrap()
    }

    fn locked(balance: i64, leased: i64, own: i64) -> Locked {
        Locked {
            balance: m(balance),
            leased: m(leased),
            own: m(own),
        }
    }

    #[test]
    fn a_flush_takes_charges_from_the_grant_then_the_free_balance() {
        let accounts = BTreeMap::from([(1, locked(1_000, 300, 100)), (2, locked(500, 0, 0))]);
        let settled = settle(accounts, &[(1, m(56)), (1, m(84)), (3, m(28))], &[], &[]);
        assert_eq!(
            settled.charges,
            vec![
                Some(Taken {
                    wanted: m(56),
                    taken: m(56),
                    balance_after: m(944)
                }),
                // 44 left in the grant, 40 from the 700 free.
                Some(Taken {
                    wanted: m(84),
                    taken: m(84),
                    balance_after: m(860)
                }),
                None,
            ]
        );
        assert_eq!(settled.accounts[&1], locked(860, 200, 0));
        assert_eq!(settled.accounts[&2], locked(500, 0, 0));
    }

    #[test]
    fn what_an_expired_grant_cannot_cover_is_forgiven() {
        // The grant was swept: nothing of it left, 10 free.
        let settled = settle(
            BTreeMap::from([(1, locked(10, 0, 0))]),
            &[(1, m(28))],
            &[],
            &[],
        );
        assert_eq!(
            settled.charges[0],
            Some(Taken {
                wanted: m(28),
                taken: m(10),
                balance_after: m(0)
            })
        );
    }

    #[test]
    fn returns_hand_back_at_most_the_grant_and_topups_grow_it() {
        let accounts = BTreeMap::from([(1, locked(10_000, 500, 200)), (2, locked(1_400, 0, 0))]);
        let settled = settle(accounts, &[], &[(1, m(1_000))], &[(2, m(2_800))]);
        assert_eq!(settled.accounts[&1], locked(10_000, 300, 0));
        assert_eq!(settled.accounts[&2], locked(1_400, 700, 700));
    }

    #[test]
    fn a_grant_is_half_the_free_balance_within_need_and_want() {
        assert_eq!(grant_size(m(1_400), m(28), m(2_800)), m(700));
        assert_eq!(grant_size(m(700), m(28), m(2_800)), m(336));
        assert_eq!(grant_size(m(100_000), m(28), m(2_800)), m(2_800));
        assert_eq!(grant_size(m(40), m(28), m(2_800)), m(28));
    }

    #[test]
    fn nothing_is_granted_when_less_than_the_need_is_free() {
        assert_eq!(grant_size(m(27), m(28), m(2_800)), Micros::ZERO);
        assert_eq!(grant_size(m(0), m(28), m(28)), Micros::ZERO);
    }

    #[test]
    fn a_charge_is_taken_from_the_grant_then_the_free_balance_never_more() {
        assert_eq!(take(m(56), m(100), m(0)), (m(56), m(0)));
        assert_eq!(take(m(56), m(28), m(100)), (m(28), m(28)));
        assert_eq!(take(m(56), m(0), m(10)), (m(0), m(10)));
    }

    #[test]
    fn a_slice_is_half_the_room_within_need_and_want() {
        assert_eq!(slice_size(30, 1, 10), 10);
        assert_eq!(slice_size(14, 1, 10), 7);
        assert_eq!(slice_size(3, 1, 10), 1);
        assert_eq!(slice_size(1, 1, 10), 1);
        assert_eq!(slice_size(10, 4, 10), 4);
    }

    #[test]
    fn a_slice_is_whole_requests_of_the_asking_size() {
        assert_eq!(slice_size(30, 3, 10), 9);
        assert_eq!(slice_size(4, 3, 10), 3);
        assert_eq!(slice_size(20, 3, 30), 9);
    }

    #[test]
    fn no_slice_when_the_room_is_short_of_the_need() {
        assert_eq!(slice_size(0, 1, 10), 0);
        assert_eq!(slice_size(2, 3, 10), 0);
        assert_eq!(slice_size(5, 0, 10), 0);
    }

    #[test]
    fn the_room_of_an_exceeded_window_is_zero() {
        assert_eq!(window_room(30, 10, 5), 15);
        assert_eq!(window_room(10, 20, 0), 0);
        assert_eq!(window_room(10, 5, 6), 0);
    }
}
