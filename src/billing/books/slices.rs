//! A node's slices of rate-limit windows in cluster mode (docs/cluster.md, design study
//! §4.5 W1): for each account and limited window, what is left of the room the ledger
//! leased this node in the current window, until when it may be spent, and how much to
//! ask for next; and how the books count the queries they admit in every window, take the
//! ledger's slices and counts in, and hand slices back. The single file never leases
//! windows: its books decide on the counters alone, as before.

use super::*;
use crate::billing::lease::Usage;
use crate::domain::grant::{SliceAsk, SliceHeld, WindowQueries};
use crate::domain::rate_limit::WindowKey;
use crate::domain::rate_limit::{Limits, Window, WindowCount};

/// The smallest slice asked for.
const MIN_SLICE_QUERIES: u64 = 10;

/// This node's slice of one limited window of an account.
#[derive(Debug, Clone, Default)]
pub(in crate::billing) struct Slice {
    /// The start of the window it is of: in any other window it is void.
    pub start: i64,
    /// What is left: the ledger's `remaining` minus this node's admissions it has not seen.
    pub left: u64,
    /// Spendable until then; `None`: none held.
    pub deadline: Option<BootTime>,
    /// Another node asked for room of this account: hand back what is left.
    pub recalled: bool,
    /// The window's limit changed: not to be spent any more; handed back at the next
    /// flush, or dropped in the ledger by the next slice asked for.
    pub void: bool,
    /// When it was last spent from and granted, and the queries it admitted recently
    /// (it asks for twice as many).
    pub usage: Usage<u64>,
}

impl Slice {
    /// What may be admitted now in the window starting at `start`.
    pub fn usable(&self, start: i64, now: BootTime) -> u64 {
        match self.deadline {
            Some(deadline) if now < deadline && start == self.start && !self.void => self.left,
            _ => 0,
        }
    }

    fn spend(&mut self, queries: u64, now: BootTime) {
        self.left = self.left.saturating_sub(queries);
        self.usage.spend(queries, now);
    }

    /// How much to ask for when `need` more is needed: twice the recent admissions, at
    /// least `MIN_SLICE_QUERIES`, at least `need`.
    fn want(&self, need: u64) -> u64 {
        let recent = self.usage.recent().saturating_mul(2);
        need.max(MIN_SLICE_QUERIES).max(recent)
    }

    /// Should what is left go back at the next flush (in the window starting at
    /// `current`)?
    fn to_return(&self, now: BootTime, current: i64, stopping: bool) -> bool {
        if self.left == 0 {
            return false;
        }
        stopping
            || self.void
            || self.start != current
            || self.usage.due_back(now, self.deadline, self.recalled)
    }
}

/// A charge some limited windows of which this node's slices do not cover: the queries,
/// when it was decided (which windows), and which windows are limited.
#[derive(Debug, Clone)]
pub(in crate::billing) struct WindowShort {
    pub queries: u64,
    pub at: SystemTime,
    pub windows: Vec<Window>,
}

fn limited(limits: &Limits) -> impl Iterator<Item = Window> + '_ {
    Window::ALL.into_iter().filter(|w| limits.of(*w).is_some())
}

impl Books {
    /// The slices the ledger just answered `asks` with (sent at `sent`) count as granted
    /// and used now.
    pub(in crate::billing) fn slices_granted(
        &mut self,
        account_id: i64,
        asks: &[SliceAsk],
        sent: BootTime,
    ) {
        for ask in asks {
            if let Some(slice) = self.slice_mut(account_id, ask.window.window) {
                slice.usage.granted(sent);
            }
        }
    }

    /// What this node's slice of the account's `window` can admit at `at`.
    pub(in crate::billing) fn slice_usable(
        &self,
        account_id: i64,
        window: WindowKey,
        at: BootTime,
    ) -> u64 {
        self.slice(account_id, window.window)
            .map_or(0, |s| s.usable(window.start, at))
    }

    /// With grants: when the slices of the caller's limited windows do not cover
    /// `queries` billed queries at `now`, which windows to ask the ledger for. `None`
    /// when they do, when no window is limited, or with the whole balance (the file).
    pub(in crate::billing) fn short_of_slices(
        &self,
        caller: Caller,
        queries: u64,
        billed: bool,
        now: SystemTime,
    ) -> Option<WindowShort> {
        if self.grants.is_none() || queries == 0 || !billed {
            return None;
        }
        let account = self.accounts.get(&caller.account_id)?;
        let boot = BootTime::now();
        let windows: Vec<Window> = limited(&account.limits)
            .filter(|w| {
                let usable = self
                    .slice(caller.account_id, *w)
                    .map_or(0, |s| s.usable(w.start(now), boot));
                usable < queries
            })
            .collect();
        (!windows.is_empty()).then_some(WindowShort {
            queries,
            at: now,
            windows,
        })
    }

    /// With grants: `queries` admitted at `now` count in every window of the account
    /// (limited or not: a limit set later sees them) and are taken from its slices.
    pub(in crate::billing) fn admit_in_windows(
        &mut self,
        account_id: i64,
        queries: u64,
        now: SystemTime,
    ) {
        if self.grants.is_none() || queries == 0 {
            return;
        }
        let boot = BootTime::now();
        for window in Window::ALL {
            let key = WindowKey {
                window,
                start: window.start(now),
            };
            *self.pending.windows.entry((account_id, key)).or_default() += queries;
            self.pending.since.entry(account_id).or_insert(boot);
            if let Some(slice) = self.slice_mut(account_id, window)
                && slice.start == key.start
            {
                slice.spend(queries, boot);
            }
        }
    }

    /// What to ask the ledger for the windows of `short` now (other requests may have
    /// spent or got some since): one ask per window still short.
    pub(in crate::billing) fn slice_asks(
        &self,
        account_id: i64,
        short: &WindowShort,
    ) -> Vec<SliceAsk> {
        let boot = BootTime::now();
        let unflushed = self.unflushed_windows(account_id);
        short
            .windows
            .iter()
            .filter_map(|w| {
                let key = WindowKey {
                    window: *w,
                    start: w.start(short.at),
                };
                let slice = self.slice(account_id, *w);
                let usable = slice.map_or(0, |s| s.usable(key.start, boot));
                let need = short.queries.checked_sub(usable).filter(|n| *n > 0)?;
                // A void slice is dropped by this ask: the ledger keeps only what this
                // node admitted and has not flushed (or hands back in the batch in flight).
                let keep = slice.filter(|s| s.void).map(|_| {
                    unflushed.get(&key).copied().unwrap_or(0)
                        + self.returning_slice(account_id, key)
                });
                Some(SliceAsk {
                    window: key,
                    need,
                    want: slice.map_or(need.max(MIN_SLICE_QUERIES), |s| s.want(need)),
                    keep,
                })
            })
            .collect()
    }

    /// Per window of the account, the queries this node admitted and the ledger has not
    /// counted yet (pending, and in the batch in flight).
    fn unflushed_windows(&self, account_id: i64) -> FastMap<WindowKey, u64> {
        let mut sums: FastMap<WindowKey, u64> = FastMap::default();
        let in_flight = self.in_flight().into_iter().flat_map(|b| &b.admitted);
        for q in in_flight.filter(|q| q.account_id == account_id) {
            *sums.entry(q.window).or_default() += q.queries;
        }
        for ((id, key), queries) in &self.pending.windows {
            if *id == account_id {
                *sums.entry(*key).or_default() += queries;
            }
        }
        sums
    }

    /// Room of the window handed back in the batch in flight: still in the ledger's
    /// `remaining` until that flush commits, no longer this node's to spend.
    fn returning_slice(&self, account_id: i64, key: WindowKey) -> u64 {
        self.in_flight()
            .into_iter()
            .flat_map(|b| &b.slice_returns)
            .fold(0, |sum, q| {
                if q.account_id == account_id && q.window == key {
                    sum + q.queries
                } else {
                    sum
                }
            })
    }

    /// Takes what the ledger holds for this node on windows of one account after a slice
    /// request or a flush sent at `sent`, and the windows' counts as it has them. A void
    /// slice stays void unless `asked`: the slice request (which dropped its void room,
    /// `SliceAsk::keep`) answered it.
    pub(in crate::billing) fn sync_slices_of(
        &mut self,
        account_id: i64,
        held: &[SliceHeld],
        sent: BootTime,
        asked: bool,
    ) {
        let unflushed = self.unflushed_windows(account_id);
        for h in held.iter().filter(|h| h.account_id == account_id) {
            let mine = unflushed.get(&h.window).copied().unwrap_or(0);
            let returning = self.returning_slice(account_id, h.window);
            let Some(grants) = &mut self.grants else {
                return;
            };
            let slice = grants
                .slices
                .entry((account_id, h.window.window))
                .or_default();
            slice.start = h.window.start;
            slice.left = h.remaining.saturating_sub(mine).saturating_sub(returning);
            slice.deadline = Some(sent.deadline());
            if asked {
                slice.void = false;
            }
            self.sync_count(account_id, h.window, h.count, mine);
        }
    }

    /// After a flush sent at `sent`: the slices and counts it reports as the ledger
    /// holds them (a slice of a touched account not listed is gone; one of another
    /// account not listed is as it was).
    pub(in crate::billing) fn sync_windows(&mut self, applied: &Applied, sent: BootTime) {
        if self.grants.is_none() {
            return;
        }
        for ((id, _), slice) in self.slices_mut() {
            if applied.touched.binary_search(id).is_ok() {
                slice.left = 0;
                slice.deadline = None;
            }
        }
        let mut accounts: Vec<i64> = applied.slices.iter().map(|h| h.account_id).collect();
        accounts.sort_unstable();
        accounts.dedup();
        for id in accounts {
            self.sync_slices_of(id, &applied.slices, sent, false);
        }
        self.sync_counts(&applied.counts);
    }

    /// The ledger's counts: each account's shown counters become the ledger's count
    /// plus what this node admitted since (a lower bound of the window's true count).
    pub(in crate::billing) fn sync_counts(&mut self, counts: &[WindowQueries]) {
        let mut by_account: FastMap<i64, FastMap<WindowKey, u64>> = FastMap::default();
        for c in counts {
            let unflushed = by_account
                .entry(c.account_id)
                .or_insert_with(|| self.unflushed_windows(c.account_id));
            let mine = unflushed.get(&c.window).copied().unwrap_or(0);
            self.sync_count(c.account_id, c.window, c.queries, mine);
        }
    }

    fn sync_count(&mut self, account_id: i64, key: WindowKey, counted: u64, mine: u64) {
        let Some(account) = self.accounts.get_mut(&account_id) else {
            return;
        };
        let shown = account.counters.get_mut(key.window);
        let count = counted.saturating_add(mine);
        if shown.start < key.start {
            *shown = WindowCount {
                start: key.start,
                count,
            };
        } else if shown.start == key.start {
            shown.count = shown.count.max(count);
        }
    }

    /// The slices to hand back in the batch being taken (their `left` goes to zero).
    pub(in crate::billing) fn take_slice_returns(&mut self, now: SystemTime) -> Vec<WindowQueries> {
        let boot = BootTime::now();
        let stopping = self.stop;
        let mut returns: Vec<WindowQueries> = self
            .slices_mut()
            .filter_map(|((id, window), slice)| {
                let back = slice
                    .to_return(boot, window.start(now), stopping)
                    .then_some(WindowQueries {
                        account_id: *id,
                        window: WindowKey {
                            window: *window,
                            start: slice.start,
                        },
                        queries: slice.left,
                    });
                if back.is_some() || slice.left == 0 {
                    slice.left = 0;
                    slice.recalled = false;
                    slice.void = false;
                }
                back
            })
            .collect();
        returns.sort_unstable();
        returns
    }

    /// Is a slice due to go back?
    pub(in crate::billing) fn slices_due(&self) -> bool {
        let (boot, now) = (BootTime::now(), SystemTime::now());
        self.slices()
            .any(|((_, w), s)| s.to_return(boot, w.start(now), self.stop))
    }

    /// Is room of a window still held?
    pub(in crate::billing) fn holds_slices(&self) -> bool {
        self.slices().any(|(_, s)| s.left > 0)
    }

    /// Other nodes asked for room of the account: hand back what is left.
    pub(in crate::billing) fn recall_slices(&mut self, account_id: i64) {
        for ((id, _), slice) in self.slices_mut() {
            if *id == account_id {
                slice.recalled = true;
            }
        }
    }

    /// The limits of an account changed (an admin command): its slices, leased under the
    /// old limits, are not spent any more.
    pub(in crate::billing) fn void_slices(&mut self, account_id: i64) {
        for ((id, _), slice) in self.slices_mut() {
            if *id == account_id {
                slice.void = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(start: i64, left: u64, now: BootTime) -> Slice {
        let mut slice = Slice {
            start,
            left,
            deadline: Some(now.deadline()),
            ..Slice::default()
        };
        slice.usage.granted(now);
        slice
    }

    #[test]
    fn a_slice_is_spent_only_in_its_own_window_before_its_deadline_and_not_void() {
        let now = BootTime::now();
        let live = slice(60, 5, now);
        assert_eq!(live.usable(60, now), 5);
        assert_eq!(live.usable(120, now), 0);
        let past = Slice {
            deadline: Some(now),
            ..live.clone()
        };
        assert_eq!(past.usable(60, now), 0);
        let void = Slice { void: true, ..live };
        assert_eq!(void.usable(60, now), 0);
    }

    #[test]
    fn a_slice_goes_back_when_void_of_a_past_window_or_at_a_stop_and_not_when_fresh() {
        let now = BootTime::now();
        let live = slice(60, 5, now);
        assert!(!live.to_return(now, 60, false));
        assert!(live.to_return(now, 120, false));
        assert!(live.to_return(now, 60, true));
        let void = Slice {
            void: true,
            ..live.clone()
        };
        assert!(void.to_return(now, 60, false));
        // Recalled just after it was granted: kept for the requests that asked for it.
        let recalled = Slice {
            recalled: true,
            ..live
        };
        assert!(!recalled.to_return(now, 60, false));
        let empty = slice(60, 0, now);
        assert!(!empty.to_return(now, 120, true));
    }

    #[test]
    fn a_slice_asks_for_at_least_ten_and_twice_the_recent_admissions() {
        let now = BootTime::now();
        let mut s = slice(60, 100, now);
        assert_eq!(s.want(1), 10);
        assert_eq!(s.want(25), 25);
        s.spend(30, now);
        assert_eq!(s.left, 70);
        assert_eq!(s.want(1), 60);
    }
}
