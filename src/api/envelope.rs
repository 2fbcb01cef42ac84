//! The envelope of every 200 (postal-api.md 2.1): exact balance, measured step timings,
//! rate-limit status.

use std::future::Future;
use std::time::{Duration, Instant};

use super::types::{Performance, RateLimitStatus, WindowUse};
use crate::domain::money::Micros;
use crate::domain::rate_limit::{RateStatus, WindowStatus};

/// USD as a JSON number. `micros / 1e6` is the double nearest the exact decimal (both
/// operands are exact and IEEE division rounds correctly), and serde_json prints the
/// shortest text that reads back as that double, so 4999972 prints `4.999972`.
pub fn usd(amount: Micros) -> f64 {
    amount.get() as f64 / 1_000_000.0
}

/// Time spent in each step of one request.
pub struct Timings {
    started: Instant,
    pub auth: Duration,
    pub rate_limit_check: Duration,
    pub balance: Duration,
    pub processing: Duration,
}

impl Timings {
    pub fn start() -> Timings {
        Timings {
            started: Instant::now(),
            auth: Duration::ZERO,
            rate_limit_check: Duration::ZERO,
            balance: Duration::ZERO,
            processing: Duration::ZERO,
        }
    }

    /// Runs `step`, adding its time to `processing`.
    pub fn processing<R>(&mut self, step: impl FnOnce() -> R) -> R {
        let t = Instant::now();
        let r = step();
        self.processing += t.elapsed();
        r
    }

    /// Runs `step`, adding its time to `processing`.
    pub async fn processing_async<R>(&mut self, step: impl Future<Output = R>) -> R {
        let t = Instant::now();
        let r = step.await;
        self.processing += t.elapsed();
        r
    }

    /// All five keys (billed endpoints).
    pub fn billed(&self) -> Performance {
        Performance {
            auth_time: Some(ms(self.auth)),
            rate_limit_check_time: Some(ms(self.rate_limit_check)),
            balance_time: Some(ms(self.balance)),
            processing_time: Some(ms(self.processing)),
            total_time: ms(self.started.elapsed()),
        }
    }

    /// `totalTime` only (the free /api/aboutapi).
    pub fn total_only(&self) -> Performance {
        Performance {
            auth_time: None,
            rate_limit_check_time: None,
            balance_time: None,
            processing_time: None,
            total_time: ms(self.started.elapsed()),
        }
    }
}

/// `"0.142ms"`: milliseconds with three decimals.
fn ms(d: Duration) -> String {
    format!("{:.3}ms", d.as_secs_f64() * 1000.0)
}

pub fn rate_limit_status(status: &RateStatus) -> RateLimitStatus {
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

    #[test]
    fn usd_amounts_print_exactly() {
        for (micros, text) in [
            (4_999_972, "4.999972"),
            (28_000, "0.028"),
            (28, "0.000028"),
            (5_000_000, "5.0"),
        ] {
            let amount = Micros::new(micros).unwrap();
            assert_eq!(serde_json::to_string(&usd(amount)).unwrap(), text);
        }
    }

    #[test]
    fn every_micro_dollar_amount_up_to_ten_thousand_usd_round_trips() {
        for micros in (0..10_000_000_000_i64).step_by(9_999_991) {
            let text = serde_json::to_string(&usd(Micros::new(micros).unwrap())).unwrap();
            let back: f64 = text.parse().unwrap();
            assert_eq!((back * 1_000_000.0).round() as i64, micros, "{text}");
            let decimals = text.split('.').nth(1).map_or(0, str::len);
            assert!(decimals <= 6, "{text}");
        }
    }

    #[test]
    fn durations_are_milliseconds_with_three_decimals() {
        assert_eq!(ms(Duration::from_micros(142)), "0.142ms");
        assert_eq!(ms(Duration::from_millis(12)), "12.000ms");
    }
}
