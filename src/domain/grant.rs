//! Cluster mode's money rules (docs/cluster.md): how much of an account's free balance
//! (balance minus what is leased to nodes) a grant leases a node, and how a flush takes a
//! node's spend: from its grant first, then from the free balance, the rest forgiven.

use crate::domain::money::{Micros, PRICE_PER_QUERY};

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

#[cfg(test)]
mod tests {
    use super::*;

    fn m(v: i64) -> Micros {
        Micros::new(v).unwrap()
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
}
