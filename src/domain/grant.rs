//! Cluster mode's money rules (docs/cluster.md): how much of an account's free balance
//! (balance minus what is leased to nodes) a grant leases a node, and how a flush takes a
//! node's spend: from its grant first, then from the free balance, the rest forgiven; and
//! how much of the room left in a rate-limit window a slice leases a node (design study
//! §4.5, W1).

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
