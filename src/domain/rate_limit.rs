//! Rate-limit windows: fixed per-minute/hour/day windows aligned to UTC, their counters,
//! and the decision "is there room for N more queries now". Pure arithmetic; the clock is
//! a `now: SystemTime` argument, so tests pass a fake one.
//!
//! A window's counter is stored as (window start, count). A counter whose start is not
//! the start of the window containing `now` belongs to a past window and counts 0: no
//! job resets counters, and a restart resets nothing.

use std::time::{SystemTime, UNIX_EPOCH};

/// One of the three fixed windows. Unix time has no leap seconds, so every UTC minute,
/// hour and day is a whole multiple of its length since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Window {
    Minute,
    Hour,
    Day,
}

impl Window {
    pub const ALL: [Window; 3] = [Window::Minute, Window::Hour, Window::Day];

    pub const fn seconds(self) -> i64 {
        match self {
            Window::Minute => 60,
            Window::Hour => 3_600,
            Window::Day => 86_400,
        }
    }

    /// The window's number in the cluster ledger (`window_counts.kind`; 0 is money in the
    /// design study's numbering).
    pub const fn kind(self) -> i16 {
        match self {
            Window::Minute => 1,
            Window::Hour => 2,
            Window::Day => 3,
        }
    }

    pub fn from_kind(kind: i16) -> Option<Window> {
        Window::ALL.into_iter().find(|w| w.kind() == kind)
    }

    /// Start (unix seconds) of this window containing `now`.
    pub fn start(self, now: SystemTime) -> i64 {
        self.start_at(unix_millis(now))
    }

    fn start_at(self, millis: i64) -> i64 {
        let secs = millis.div_euclid(1000);
        secs - secs.rem_euclid(self.seconds())
    }

    /// Whole seconds from `now` to the end of this window containing `now`, rounded up;
    /// at least 1 (at the very first instant of a window, a whole window remains).
    pub fn seconds_left(self, now: SystemTime) -> u64 {
        self.seconds_left_at(unix_millis(now))
    }

    fn seconds_left_at(self, millis: i64) -> u64 {
        let end_ms = (self.start_at(millis) + self.seconds()) * 1000;
        ((end_ms - millis) as u64).div_ceil(1000).max(1)
    }
}

/// Milliseconds since the Unix epoch (negative before it).
fn unix_millis(now: SystemTime) -> i64 {
    match now.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i64,
        Err(e) => -(e.duration().as_millis() as i64),
    }
}

/// One window of one kind: the minute, hour or day that starts at `start` (unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WindowKey {
    pub window: Window,
    pub start: i64,
}

/// An account's limits, in billed queries per window; `None` = no limit on that window.
/// All `None` means rate limiting is off (the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    pub per_minute: Option<u64>,
    pub per_hour: Option<u64>,
    pub per_day: Option<u64>,
}

impl Limits {
    pub const OFF: Limits = Limits {
        per_minute: None,
        per_hour: None,
        per_day: None,
    };

    pub fn enabled(&self) -> bool {
        self.per_minute.is_some() || self.per_hour.is_some() || self.per_day.is_some()
    }

    pub fn of(&self, window: Window) -> Option<u64> {
        match window {
            Window::Minute => self.per_minute,
            Window::Hour => self.per_hour,
            Window::Day => self.per_day,
        }
    }
}

/// The stored counter of one window: the start (unix seconds) of the window it counts,
/// and the billed queries counted in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WindowCount {
    pub start: i64,
    pub count: u64,
}

/// An account's three counters. They count every billed query, whether or not a limit is
/// set, so a limit switched on mid-day sees the day's real usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    pub minute: WindowCount,
    pub hour: WindowCount,
    pub day: WindowCount,
}

/// What the `rateLimit` object of a response says (postal-api.md 2.1; its JSON shape is
/// `api::envelope`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateStatus {
    pub enabled: bool,
    pub per_minute: WindowStatus,
    pub per_hour: WindowStatus,
    pub per_day: WindowStatus,
}

/// One window of `rateLimit`: `limit` and `current` are null when no limit is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowStatus {
    pub limit: Option<u64>,
    pub current: Option<u64>,
    pub approaching_limit: bool,
}

impl WindowStatus {
    pub const UNLIMITED: WindowStatus = WindowStatus {
        limit: None,
        current: None,
        approaching_limit: false,
    };

    /// A window of `limit` (none: unlimited) holding `current` queries.
    pub fn new(limit: Option<u64>, current: u64) -> WindowStatus {
        match limit {
            None => WindowStatus::UNLIMITED,
            Some(limit) => WindowStatus {
                limit: Some(limit),
                current: Some(current),
                // current >= 80% of limit, in integers.
                approaching_limit: u128::from(current) * 5 >= u128::from(limit) * 4,
            },
        }
    }
}

impl RateStatus {
    pub const DISABLED: RateStatus = RateStatus {
        enabled: false,
        per_minute: WindowStatus::UNLIMITED,
        per_hour: WindowStatus::UNLIMITED,
        per_day: WindowStatus::UNLIMITED,
    };
}

impl Counters {
    pub fn get(&self, window: Window) -> WindowCount {
        match window {
            Window::Minute => self.minute,
            Window::Hour => self.hour,
            Window::Day => self.day,
        }
    }

    pub fn get_mut(&mut self, window: Window) -> &mut WindowCount {
        match window {
            Window::Minute => &mut self.minute,
            Window::Hour => &mut self.hour,
            Window::Day => &mut self.day,
        }
    }

    /// Billed queries counted so far in the window containing `now`.
    pub fn current(&self, window: Window, now: SystemTime) -> u64 {
        self.current_at(window, unix_millis(now))
    }

    // The `_at` forms take `now` as unix milliseconds, converted once per call of the
    // public functions.
    fn current_at(&self, window: Window, millis: i64) -> u64 {
        let stored = self.get(window);
        if stored.start == window.start_at(millis) {
            stored.count
        } else {
            0
        }
    }

    /// `Ok` when every limited window has room for `queries` more at `now`; otherwise
    /// `Err(retry_after_secs)`: whole seconds, rounded up and at least 1, until the
    /// earliest blocking window ends (decisions.md, word for word). When several windows
    /// block (the minute and the day, say), that is the end of the shortest one: a retry
    /// then gets another 429 whose `retryAfter` names the next blocking window.
    pub fn check(&self, limits: &Limits, queries: u64, now: SystemTime) -> Result<(), u64> {
        let millis = unix_millis(now);
        let mut retry_after = None;
        // Window::ALL runs from the shortest window to the longest, and nested windows end
        // in that order, so the first blocking one ends first.
        for window in Window::ALL {
            if let Some(limit) = limits.of(window) {
                let after = self.current_at(window, millis).saturating_add(queries);
                if after > limit {
                    retry_after = Some(window.seconds_left_at(millis));
                    break;
                }
            }
        }
        match retry_after {
            None => Ok(()),
            Some(secs) => Err(secs),
        }
    }

    /// The counters after `queries` more billed queries at `now` (a window that has
    /// rolled over starts again from 0).
    pub fn add(&self, queries: u64, now: SystemTime) -> Counters {
        let millis = unix_millis(now);
        let mut next = *self;
        for window in Window::ALL {
            let current = self.current_at(window, millis);
            *next.get_mut(window) = WindowCount {
                start: window.start_at(millis),
                count: current.saturating_add(queries),
            };
        }
        next
    }

    /// The `rateLimit` object as of `now` (after the counters include the request, when
    /// it was billed).
    pub fn status(&self, limits: &Limits, now: SystemTime) -> RateStatus {
        if !limits.enabled() {
            return RateStatus::DISABLED;
        }
        let millis = unix_millis(now);
        let window = |w: Window| WindowStatus::new(limits.of(w), self.current_at(w, millis));
        RateStatus {
            enabled: true,
            per_minute: window(Window::Minute),
            per_hour: window(Window::Hour),
            per_day: window(Window::Day),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// 2026-11-21T00:00:00Z, a UTC midnight.
    const MIDNIGHT: u64 = 1_795_219_200;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn at_ms(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    fn limits(m: Option<u64>, h: Option<u64>, d: Option<u64>) -> Limits {
        Limits {
            per_minute: m,
            per_hour: h,
            per_day: d,
        }
    }

    #[test]
    fn the_fixed_clock_is_a_utc_midnight() {
        assert_eq!(MIDNIGHT % 86_400, 0);
    }

    #[test]
    fn a_window_kind_reads_back_as_its_window() {
        for window in Window::ALL {
            assert_eq!(Window::from_kind(window.kind()), Some(window));
        }
        assert_eq!(Window::from_kind(0), None);
    }

    #[test]
    fn windows_are_aligned_to_utc() {
        let now = at(MIDNIGHT + 3 * 3600 + 25 * 60 + 17);
        assert_eq!(
            Window::Minute.start(now),
            (MIDNIGHT + 3 * 3600 + 25 * 60) as i64
        );
        assert_eq!(Window::Hour.start(now), (MIDNIGHT + 3 * 3600) as i64);
        assert_eq!(Window::Day.start(now), MIDNIGHT as i64);
    }

    #[test]
    fn seconds_left_are_rounded_up_and_at_least_one() {
        assert_eq!(Window::Minute.seconds_left(at(MIDNIGHT)), 60);
        assert_eq!(Window::Minute.seconds_left(at(MIDNIGHT + 59)), 1);
        assert_eq!(
            Window::Minute.seconds_left(at_ms(MIDNIGHT * 1000 + 59_999)),
            1
        );
        assert_eq!(
            Window::Minute.seconds_left(at_ms(MIDNIGHT * 1000 + 58_001)),
            2
        );
        assert_eq!(Window::Minute.seconds_left(at_ms(MIDNIGHT * 1000 + 1)), 60);
        assert_eq!(Window::Hour.seconds_left(at(MIDNIGHT + 3599)), 1);
        assert_eq!(Window::Day.seconds_left(at(MIDNIGHT + 86_399)), 1);
        assert_eq!(Window::Day.seconds_left(at(MIDNIGHT + 1)), 86_399);
    }

    #[test]
    fn a_full_minute_blocks_until_its_last_second_and_frees_at_the_next() {
        let limits = limits(Some(10), None, None);
        let counters = Counters::default().add(10, at(MIDNIGHT + 5));
        assert_eq!(counters.check(&limits, 1, at(MIDNIGHT + 59)), Err(1));
        assert_eq!(counters.check(&limits, 1, at(MIDNIGHT + 30)), Err(30));
        assert_eq!(counters.check(&limits, 1, at(MIDNIGHT + 60)), Ok(()));
        assert_eq!(counters.current(Window::Minute, at(MIDNIGHT + 60)), 0);
    }

    #[test]
    fn the_hour_carries_across_minutes_and_ends_on_the_hour() {
        let limits = limits(None, Some(100), None);
        let mut counters = Counters::default();
        for minute in 0..10 {
            counters = counters.add(10, at(MIDNIGHT + minute * 60));
        }
        let last_second = at(MIDNIGHT + 3599);
        assert_eq!(counters.current(Window::Hour, last_second), 100);
        assert_eq!(counters.current(Window::Minute, last_second), 0);
        assert_eq!(counters.check(&limits, 1, last_second), Err(1));
        assert_eq!(counters.check(&limits, 1, at(MIDNIGHT + 600)), Err(3000));
        assert_eq!(counters.check(&limits, 100, at(MIDNIGHT + 3600)), Ok(()));
    }

    #[test]
    fn the_day_ends_at_utc_midnight() {
        let limits = limits(None, None, Some(1000));
        let counters = Counters::default().add(1000, at(MIDNIGHT + 12 * 3600));
        assert_eq!(counters.check(&limits, 1, at(MIDNIGHT + 86_399)), Err(1));
        assert_eq!(
            counters.check(&limits, 1, at(MIDNIGHT + 12 * 3600)),
            Err(12 * 3600)
        );
        let next_day = at(MIDNIGHT + 86_400);
        assert_eq!(counters.check(&limits, 1000, next_day), Ok(()));
        assert_eq!(counters.add(1, next_day).current(Window::Day, next_day), 1);
    }

    #[test]
    fn a_request_that_fits_exactly_passes_and_one_more_does_not() {
        let limits = limits(Some(5), Some(50), Some(500));
        let counters = Counters::default().add(3, at(MIDNIGHT));
        assert_eq!(counters.check(&limits, 2, at(MIDNIGHT + 1)), Ok(()));
        assert_eq!(counters.check(&limits, 3, at(MIDNIGHT + 1)), Err(59));
    }

    #[test]
    fn with_several_windows_blocking_retry_after_is_the_end_of_the_earliest() {
        let limits = limits(Some(10), Some(10), None);
        let counters = Counters::default().add(10, at(MIDNIGHT + 10));
        // Both the minute and the hour are full: the minute ends in 50 s, the hour in 3590 s.
        assert_eq!(counters.check(&limits, 1, at(MIDNIGHT + 10)), Err(50));
        // A minute later only the hour blocks.
        assert_eq!(counters.check(&limits, 1, at(MIDNIGHT + 60)), Err(3540));
        // Only the day blocks.
        let limits = super::Limits {
            per_minute: None,
            per_hour: None,
            per_day: Some(10),
        };
        assert_eq!(counters.check(&limits, 1, at(MIDNIGHT + 10)), Err(86_390));
    }

    #[test]
    fn a_bulk_request_larger_than_the_limit_is_refused() {
        let limits = limits(Some(100), None, None);
        assert_eq!(
            Counters::default().check(&limits, 101, at(MIDNIGHT + 20)),
            Err(40)
        );
    }

    #[test]
    fn approaching_limit_starts_at_eighty_percent() {
        let limits = limits(Some(10), Some(1000), None);
        let now = at(MIDNIGHT);
        let status = Counters::default().add(7, now).status(&limits, now);
        assert!(!status.per_minute.approaching_limit);
        let status = Counters::default().add(8, now).status(&limits, now);
        assert!(status.enabled);
        assert_eq!(
            status.per_minute,
            WindowStatus {
                limit: Some(10),
                current: Some(8),
                approaching_limit: true
            }
        );
        assert_eq!(
            status.per_hour,
            WindowStatus {
                limit: Some(1000),
                current: Some(8),
                approaching_limit: false
            }
        );
        assert_eq!(status.per_day, WindowStatus::UNLIMITED);
    }

    #[test]
    fn with_no_limit_the_status_is_disabled_and_counters_still_count() {
        let now = at(MIDNIGHT);
        let counters = Counters::default().add(3, now);
        assert_eq!(counters.status(&Limits::OFF, now), RateStatus::DISABLED);
        assert_eq!(counters.check(&Limits::OFF, u64::MAX, now), Ok(()));
        assert_eq!(counters.current(Window::Day, now), 3);
    }
}
