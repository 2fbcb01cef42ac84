//! The envelope of every 200 (postal-api.md 2.1): exact balance, measured step timings,
//! rate-limit status.

use std::time::{Duration, Instant, SystemTime};

use super::access::Audience;
use super::types::{Envelope, Millis, Performance, RateLimitStatus, WindowUse};
use crate::domain::charge::AccountStatus;
use crate::domain::money::Micros;
use crate::domain::rate_limit::{RateStatus, WindowStatus};

/// Time spent in each step of one request, read as laps: each step's end is the next
/// one's start, so a step costs one clock read (the billed path read the clock ten times
/// a request; now seven, issue 37). What lies between two steps counts in the second.
pub struct Timings {
    started: Instant,
    /// The end of the last step (or the start).
    last: Instant,
    pub auth: Duration,
    pub rate_limit_check: Duration,
    pub balance: Duration,
    pub processing: Duration,
}

/// A step of [`Timings`].
#[derive(Clone, Copy, Debug)]
pub enum Step {
    Auth,
    RateLimitCheck,
    Balance,
    Processing,
}

impl Timings {
    pub fn start() -> Timings {
        let now = Instant::now();
        Timings {
            started: now,
            last: now,
            auth: Duration::ZERO,
            rate_limit_check: Duration::ZERO,
            balance: Duration::ZERO,
            processing: Duration::ZERO,
        }
    }

    /// Adds the time since the last step ended to `step`, which ends now.
    pub fn lap(&mut self, step: Step) {
        let now = Instant::now();
        let spent = now.saturating_duration_since(self.last);
        self.last = now;
        *match step {
            Step::Auth => &mut self.auth,
            Step::RateLimitCheck => &mut self.rate_limit_check,
            Step::Balance => &mut self.balance,
            Step::Processing => &mut self.processing,
        } += spent;
    }

    /// Runs `step`, then ends a `Processing` lap.
    pub fn processing<R>(&mut self, step: impl FnOnce() -> R) -> R {
        let r = step();
        self.lap(Step::Processing);
        r
    }

    /// All five keys (billed endpoints).
    pub fn billed(&self) -> Performance {
        Performance {
            auth_time: Some(Millis(self.auth)),
            rate_limit_check_time: Some(Millis(self.rate_limit_check)),
            balance_time: Some(Millis(self.balance)),
            processing_time: Some(Millis(self.processing)),
            // Up to the end of the last step: the envelope is written right after it.
            total_time: Millis(self.last.saturating_duration_since(self.started)),
        }
    }

    /// `totalTime` only (the free /api/aboutapi).
    pub fn total_only(&self) -> Performance {
        Performance {
            auth_time: None,
            rate_limit_check_time: None,
            balance_time: None,
            processing_time: None,
            total_time: Millis(self.started.elapsed()),
        }
    }
}

impl Envelope {
    /// The envelope of a billed request: the balance and windows after its charge, for
    /// the account's own servers; for a page's visitor (a publishable key), no balance
    /// and the visitor's per-IP window alone (`Audience`).
    pub fn billed(
        balance: Micros,
        rate: &RateStatus,
        audience: Audience,
        timings: &Timings,
    ) -> Envelope {
        let (balance, rate_limit) = match audience {
            Audience::Account => (Some(balance.to_usd()), rate_limit_status(rate)),
            Audience::Visitor {
                per_minute,
                current,
            } => (None, visitor_window(per_minute, current)),
        };
        Envelope {
            balance,
            performance: timings.billed(),
            rate_limit,
            billed: true,
        }
    }

    /// The envelope of a free request (`totalTime` only): the account as it stands.
    pub fn free(account: &AccountStatus, timings: &Timings) -> Envelope {
        Envelope {
            balance: Some(account.balance.to_usd()),
            performance: timings.total_only(),
            rate_limit: rate_limit_status(&account.rate),
            billed: false,
        }
    }

    /// `RateLimit-Policy` and `RateLimit` (IETF httpapi draft, docs/browser.md) of a
    /// billed answer whose account has window limits: each limited window as a policy
    /// (`"minute";q=60;w=60`) and its state after this request (`"minute";r=59;t=42`:
    /// queries left, seconds to the window's end; windows are fixed UTC ones).
    /// `now` is read only then (not on the answers of accounts without limits).
    pub fn rate_limit_headers(&self, now: impl FnOnce() -> SystemTime) -> Option<(String, String)> {
        if !self.billed || !self.rate_limit.enabled {
            return None;
        }
        let secs = now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let windows = [
            ("minute", 60, &self.rate_limit.per_minute),
            ("hour", 3_600, &self.rate_limit.per_hour),
            ("day", 86_400, &self.rate_limit.per_day),
        ];
        let (mut policy, mut state) = (Vec::new(), Vec::new());
        for (name, length, window) in windows {
            let Some(quota) = window.limit else {
                continue;
            };
            let left = quota.saturating_sub(window.current.unwrap_or(0));
            policy.push(format!("\"{name}\";q={quota};w={length}"));
            state.push(format!("\"{name}\";r={left};t={}", length - secs % length));
        }
        (!policy.is_empty()).then(|| (policy.join(", "), state.join(", ")))
    }
}

/// The rate limit a page's visitor is told: its own requests this minute under the key's
/// per-IP limit, written as an account's minute window is; no hour or day.
fn visitor_window(per_minute: u32, current: u32) -> RateLimitStatus {
    rate_limit_status(&RateStatus {
        enabled: true,
        per_minute: WindowStatus::new(Some(per_minute.into()), current.into()),
        ..RateStatus::DISABLED
    })
}

fn rate_limit_status(status: &RateStatus) -> RateLimitStatus {
    let window = |w: &WindowStatus| WindowUse {
        limit: w.limit,
        current: w.current,
        approaching_limit: w.approaching_limit,
    };
    RateLimitStatus {
        enabled: status.enabled,
        per_minute: window(&status.per_minute),
        per_hour: window(&status.per_hour),
        per_day: window(&status.per_day),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(d: Duration) -> String {
        let text = Millis(d).to_string();
        // serde writes the same text, and it reads back to the microsecond.
        assert_eq!(
            serde_json::to_string(&Millis(d)).unwrap(),
            format!("\"{text}\"")
        );
        let back = <Millis as poem_openapi::types::ParseFromJSON>::parse_from_json(Some(
            serde_json::Value::String(text.clone()),
        ))
        .unwrap();
        assert_eq!(back.0.as_micros(), (d.as_nanos() + 500) / 1000);
        text
    }

    #[test]
    fn durations_are_milliseconds_with_three_decimals() {
        assert_eq!(ms(Duration::from_micros(142)), "0.142ms");
        assert_eq!(ms(Duration::from_millis(12)), "12.000ms");
        assert_eq!(ms(Duration::from_nanos(1_499)), "0.001ms");
        assert_eq!(ms(Duration::from_nanos(999_500)), "1.000ms");
        assert_eq!(ms(Duration::ZERO), "0.000ms");
        assert_eq!(ms(Duration::from_micros(123_456_789)), "123456.789ms");
        // Nanoseconds rounding up carry into the seconds.
        assert_eq!(ms(Duration::new(5, 999_999_600)), "6000.000ms");
        // Past 64-bit microseconds, the 128-bit path.
        assert_eq!(
            Millis(Duration::new(u64::MAX / 1000, 999_999_999)).to_string(),
            "18446744073709552000.000ms"
        );
        // The longest there is still fits the buffer.
        assert_eq!(
            Millis(Duration::MAX).to_string(),
            "18446744073709551616000.000ms"
        );
    }

    #[test]
    fn the_steps_add_up_to_the_total_and_each_has_its_own_time() {
        let pause = || std::thread::sleep(Duration::from_millis(2));
        let mut timings = Timings::start();
        pause();
        timings.lap(Step::Auth);
        timings.lap(Step::RateLimitCheck);
        let answer = timings.processing(|| {
            pause();
            7
        });
        assert_eq!(answer, 7);
        pause();
        timings.lap(Step::Balance);
        let steps = [
            timings.auth,
            timings.rate_limit_check,
            timings.processing,
            timings.balance,
        ];
        for step in [timings.auth, timings.processing, timings.balance] {
            assert!(step >= Duration::from_millis(2), "{steps:?}");
        }
        let performance = timings.billed();
        assert_eq!(performance.total_time.0, steps.iter().sum::<Duration>());
        // Read once: the envelope's total is where the last step ended.
        assert_eq!(timings.billed().total_time.0, performance.total_time.0);
    }

    #[test]
    fn only_the_written_shape_reads_back() {
        for bad in [
            "1ms",
            "1.00ms",
            ".123ms",
            "1.123",
            "-1.000ms",
            "1.0000ms",
            "a.123ms",
            "18446744073709551.999ms",
        ] {
            let parsed = <Millis as poem_openapi::types::ParseFromJSON>::parse_from_json(Some(
                serde_json::Value::String(bad.into()),
            ));
            assert!(parsed.is_err(), "{bad}");
        }
    }
}
