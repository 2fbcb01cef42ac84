//! A calendar day in UTC (`2026-11-22`), as the admin CLI takes it (`ledger show --since`).

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// A valid proleptic Gregorian date from 1970-01-01 on; parse it with [`UtcDate::parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct UtcDate {
    /// Days since 1970-01-01.
    days: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a date: expected YYYY-MM-DD (UTC), from 1970-01-01 on")]
pub struct DateError(String);

impl UtcDate {
    /// `YYYY-MM-DD`, nothing else (no time, no offset).
    pub fn parse(input: &str) -> Result<UtcDate, DateError> {
        let bad = || DateError(input.to_owned());
        let b = input.as_bytes();
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return Err(bad());
        }
        let number = |s: &str| {
            s.bytes()
                .all(|c| c.is_ascii_digit())
                .then(|| s.parse::<i64>().ok())
                .flatten()
        };
        let (year, month, day) = (
            number(&input[0..4]).ok_or_else(bad)?,
            number(&input[5..7]).ok_or_else(bad)?,
            number(&input[8..10]).ok_or_else(bad)?,
        );
        if year < 1970 || !(1..=12).contains(&month) || day < 1 || day > days_in(year, month) {
            return Err(bad());
        }
        Ok(UtcDate {
            days: days_from_civil(year, month, day),
        })
    }

    /// Unix seconds at 00:00:00 UTC of this day.
    pub fn start_unix(self) -> i64 {
        self.days * 86_400
    }

    /// The UTC day of a unix second.
    pub fn of_unix(seconds: i64) -> UtcDate {
        UtcDate {
            days: seconds.div_euclid(86_400),
        }
    }
}

/// A time as both ledgers store it and the dashboard compares it: unix seconds (0 before
/// the epoch).
pub fn unix_secs(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A unix second as RFC 3339 in UTC: `2026-11-25T16:53:21Z`.
pub fn rfc3339(seconds: i64) -> String {
    let (y, m, d) = civil_from_days(seconds.div_euclid(86_400));
    let s = seconds.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// A unix second to the minute, as RFC 3339 in UTC: `2026-11-25T16:53:00Z`.
pub fn rfc3339_minute(seconds: i64) -> String {
    rfc3339(seconds - seconds.rem_euclid(60))
}

impl fmt::Display for UtcDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, m, d) = civil_from_days(self.days);
        write!(f, "{y:04}-{m:02}-{d:02}")
    }
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Howard Hinnant's `days_from_civil`: days since 1970-01-01.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`]: (year, month, day) of a count of days since
/// 1970-01-01 (also the access log's timestamps, `postal serve`).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_date_is_the_unix_second_of_its_midnight() {
        assert_eq!(UtcDate::parse("1970-01-01").unwrap().start_unix(), 0);
        assert_eq!(
            UtcDate::parse("2026-11-22").unwrap().start_unix(),
            1_795_305_600
        );
        assert_eq!(
            UtcDate::parse("2024-02-29").unwrap().start_unix(),
            1_709_164_800
        );
    }

    #[test]
    fn a_unix_second_prints_as_its_utc_day_and_rfc_3339_time() {
        assert_eq!(
            UtcDate::of_unix(1_795_305_600 + 86_399).to_string(),
            "2026-11-22"
        );
        assert_eq!(UtcDate::of_unix(0).to_string(), "1970-01-01");
        assert_eq!(rfc3339(1_795_305_600 + 3_723), "2026-11-22T01:02:03Z");
    }

    #[test]
    fn a_date_prints_as_it_was_written() {
        for text in ["1970-01-01", "2000-02-29", "2026-12-31"] {
            assert_eq!(UtcDate::parse(text).unwrap().to_string(), text);
        }
    }

    #[test]
    fn anything_but_a_real_yyyy_mm_dd_is_rejected() {
        for text in [
            "",
            "2026-1-22",
            "2026/11/22",
            "2026-11-31",
            "2023-02-29",
            "1969-12-31",
            "2026-11-22T00:00:00Z",
            "+026-11-22",
            "2026-13-01",
        ] {
            assert!(UtcDate::parse(text).is_err(), "{text}");
        }
    }
}
