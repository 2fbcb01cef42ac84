//! `Micros`: money as integer micro-dollars, exact USD decimals at the edges.
//!
//! 1 USD = 1,000,000 micros; a query costs 28 (0.000028 USD). Inside the service money is
//! only ever this integer; USD decimals appear when parsing admin input ([`Micros::parse_usd`])
//! and when printing ([`fmt::Display`] for text, [`Micros::to_usd`] for JSON).
//!
//! Amounts are bounded to `|micros| <= MAX` (just under one billion USD): every amount then
//! has at most 15 significant decimal digits, which is what makes the JSON number exact
//! (see [`Micros::to_usd`]). Arithmetic is checked and refuses to leave the bound.

use std::fmt;

/// Micro-dollars per US dollar.
pub const MICROS_PER_USD: i64 = 1_000_000;

/// Price of one billed query: 0.000028 USD.
pub const PRICE_PER_QUERY: Micros = Micros(28);

/// Credit of a new account: 0.028 USD, the free 1,000 queries.
pub const FREE_GRANT: Micros = Micros(28_000);

/// Smallest top-up: 5.00 USD, credited in full.
pub const MIN_TOPUP: Micros = Micros(5_000_000);

/// An amount of money in micro-dollars, within `-MAX..=MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Micros(i64);

/// Why a USD decimal was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    #[error("not a USD amount (expected digits, optionally a sign and up to 6 decimals): {0:?}")]
    Malformed(String),
    #[error("more than 6 decimals (the smallest unit is 0.000001 USD): {0:?}")]
    TooPrecise(String),
    #[error("amount out of range (at most 999999999.999999 USD): {0:?}")]
    OutOfRange(String),
}

impl Micros {
    /// The largest magnitude: 999,999,999.999999 USD (15 significant digits).
    pub const MAX: Micros = Micros(999_999_999_999_999);
    pub const ZERO: Micros = Micros(0);

    /// `None` when `micros` is outside `-MAX..=MAX`.
    pub const fn new(micros: i64) -> Option<Micros> {
        if micros.unsigned_abs() <= Self::MAX.0 as u64 {
            Some(Micros(micros))
        } else {
            None
        }
    }

    pub const fn get(self) -> i64 {
        self.0
    }

    /// Parses a USD decimal exactly: an optional sign, digits, and optionally a point
    /// followed by 1 to 6 digits (`5`, `5.00`, `-1.5`, `+0.000028`). Nothing else: no
    /// spaces, exponents, thousands separators, or a bare point (`5.`, `.5`).
    pub fn parse_usd(input: &str) -> Result<Micros, AmountError> {
        let malformed = || AmountError::Malformed(input.to_owned());
        let (negative, unsigned) = match input.as_bytes().first() {
            Some(b'-') => (true, &input[1..]),
            Some(b'+') => (false, &input[1..]),
            _ => (false, input),
        };
        let (whole, fraction) = match unsigned.split_once('.') {
            Some((w, f)) => (w, Some(f)),
            None => (unsigned, None),
        };
        let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !all_digits(whole) || !fraction.is_none_or(all_digits) {
            return Err(malformed());
        }
        let fraction = fraction.unwrap_or("");
        if fraction.len() > 6 {
            return Err(AmountError::TooPrecise(input.to_owned()));
        }
        let out_of_range = || AmountError::OutOfRange(input.to_owned());
        let whole = whole.trim_start_matches('0');
        if whole.len() > 9 {
            return Err(out_of_range());
        }
        let whole: i64 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| malformed())?
        };
        let mut fraction_micros: i64 = 0;
        for (i, digit) in fraction.bytes().enumerate() {
            fraction_micros += i64::from(digit - b'0') * 10_i64.pow(5 - i as u32);
        }
        let magnitude = whole * MICROS_PER_USD + fraction_micros;
        let micros = if negative { -magnitude } else { magnitude };
        Micros::new(micros).ok_or_else(out_of_range)
    }

    pub fn checked_add(self, other: Micros) -> Option<Micros> {
        self.0.checked_add(other.0).and_then(Micros::new)
    }

    pub fn checked_sub(self, other: Micros) -> Option<Micros> {
        self.0.checked_sub(other.0).and_then(Micros::new)
    }

    /// `self * n`, e.g. the cost of `n` queries: `PRICE_PER_QUERY.checked_mul(n)`.
    pub fn checked_mul(self, n: u64) -> Option<Micros> {
        i64::try_from(n)
            .ok()
            .and_then(|n| self.0.checked_mul(n))
            .and_then(Micros::new)
    }

    pub fn is_negative(self) -> bool {
        self.0 < 0
    }

    /// The amount in USD as the API and the CLI print it (one rule for both): the `f64`
    /// nearest to the exact decimal. `micros / 1e6` is that `f64` (both operands are
    /// exact and IEEE division rounds correctly), and serde_json prints an `f64` as the
    /// shortest text that reads back as the same `f64`; a decimal of at most 15
    /// significant digits (every `Micros`, by its bound) is that text. So `4999972` prints
    /// as `4.999972`, never `4.9999720000001`, and whole dollars as `5.0`: always a
    /// floating-point number, so a client's JSON parser gives one type for every amount
    /// (test: `every_amount_prints_as_its_exact_decimal_in_json`).
    ///
    /// One oddity of the shortest layout, not of the value: amounts of 1 to 9 micros
    /// (0.000001 to 0.000009 USD, and their negatives) print in exponent form, `1e-6` ...
    /// `9e-6`, which is the same exact number.
    pub fn to_usd(self) -> f64 {
        self.0 as f64 / MICROS_PER_USD as f64
    }

    /// [`Micros::to_usd`] as a JSON number (for `serde_json::Value` output).
    pub fn to_json_number(self) -> serde_json::Number {
        // Finite: |micros| <= MAX.
        serde_json::Number::from_f64(self.to_usd()).unwrap_or_else(|| serde_json::Number::from(0))
    }
}

/// Prints USD as the shortest exact decimal: `5`, `0.028`, `4.999972`, `-1.5`, `0`.
impl fmt::Display for Micros {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let magnitude = self.0.unsigned_abs();
        let whole = magnitude / MICROS_PER_USD as u64;
        let fraction = magnitude % MICROS_PER_USD as u64;
        if fraction == 0 {
            return write!(f, "{sign}{whole}");
        }
        let digits = format!("{fraction:06}");
        write!(f, "{sign}{whole}.{}", digits.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    fn usd(s: &str) -> Micros {
        Micros::parse_usd(s).unwrap()
    }

    #[test]
    fn usd_decimals_parse_exactly() {
        assert_eq!(usd("5").get(), 5_000_000);
        assert_eq!(usd("5.00").get(), 5_000_000);
        assert_eq!(usd("-1.5").get(), -1_500_000);
        assert_eq!(usd("+2.25").get(), 2_250_000);
        assert_eq!(usd("0.000028").get(), 28);
        assert_eq!(usd("4.999972").get(), 4_999_972);
        assert_eq!(usd("000012.340000").get(), 12_340_000);
        assert_eq!(usd("999999999.999999"), Micros::MAX);
        assert_eq!(usd("-0").get(), 0);
    }

    #[test]
    fn more_than_six_decimals_are_rejected() {
        assert!(matches!(
            Micros::parse_usd("0.0000001"),
            Err(AmountError::TooPrecise(_))
        ));
        assert!(matches!(
            Micros::parse_usd("5.0000000"),
            Err(AmountError::TooPrecise(_))
        ));
    }

    #[test]
    fn garbage_is_rejected() {
        for input in [
            "", "-", "+", ".", "5.", ".5", "1e3", " 5", "5 ", "1,000", "5.a", "abc", "--1", "+-1",
            "0x10", "5..0", "NaN", "inf", "٣",
        ] {
            assert!(
                matches!(Micros::parse_usd(input), Err(AmountError::Malformed(_))),
                "{input:?} was accepted"
            );
        }
    }

    #[test]
    fn amounts_of_a_billion_dollars_or_more_are_out_of_range() {
        for input in ["1000000000", "-1000000000", "99999999999999999999999"] {
            assert!(matches!(
                Micros::parse_usd(input),
                Err(AmountError::OutOfRange(_))
            ));
        }
    }

    #[test]
    fn usd_prints_as_the_shortest_exact_decimal() {
        assert_eq!(Micros(4_999_972).to_string(), "4.999972");
        assert_eq!(FREE_GRANT.to_string(), "0.028");
        assert_eq!(MIN_TOPUP.to_string(), "5");
        assert_eq!(PRICE_PER_QUERY.to_string(), "0.000028");
        assert_eq!(Micros(-1_500_000).to_string(), "-1.5");
        assert_eq!(Micros(-1).to_string(), "-0.000001");
        assert_eq!(Micros(0).to_string(), "0");
        assert_eq!(Micros::MAX.to_string(), "999999999.999999");
    }

    #[test]
    fn printing_then_parsing_gives_back_the_amount() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..100_000 {
            let m = Micros(rng.random_range(-Micros::MAX.0..=Micros::MAX.0));
            assert_eq!(usd(&m.to_string()), m);
        }
    }

    #[test]
    fn arithmetic_is_checked_and_stays_within_the_bound() {
        assert_eq!(PRICE_PER_QUERY.checked_mul(1000), Some(FREE_GRANT));
        assert_eq!(Micros::MAX.checked_add(Micros(1)), None);
        assert_eq!(Micros(-Micros::MAX.0).checked_sub(Micros(1)), None);
        assert_eq!(PRICE_PER_QUERY.checked_mul(u64::MAX), None);
        assert_eq!(Micros::new(i64::MIN), None);
        assert_eq!(Micros(10).checked_sub(Micros(28)), Some(Micros(-18)));
    }

    fn json(m: Micros) -> String {
        serde_json::to_string(&serde_json::Value::Number(m.to_json_number())).unwrap()
    }

    #[test]
    fn json_numbers_match_the_examples() {
        assert_eq!(json(Micros(4_999_972)), "4.999972");
        assert_eq!(json(FREE_GRANT), "0.028");
        assert_eq!(json(MIN_TOPUP), "5.0");
        assert_eq!(json(Micros(0)), "0.0");
        assert_eq!(json(PRICE_PER_QUERY), "0.000028");
        assert_eq!(json(Micros(-1_500_000)), "-1.5");
        assert_eq!(json(Micros(1)), "1e-6");
    }

    /// The JSON text of every amount, read as a decimal, is the amount itself: checked for
    /// every amount below 3 USD, around each power of ten, and for random amounts up to the
    /// bound.
    #[test]
    fn every_amount_prints_as_its_exact_decimal_in_json() {
        let exact = |m: Micros| {
            let text = json(m);
            let back = match text.split_once("e-6") {
                Some((mantissa, _)) => Micros(mantissa.parse::<i64>().unwrap()),
                None => usd(&text),
            };
            assert_eq!(back, m, "{m:?} printed as {text}");
            assert!(text.contains(['.', 'e']), "{m:?} printed as {text}");
            assert_eq!(serde_json::to_string(&m.to_usd()).unwrap(), text);
        };
        for micros in -10..3_000_000 {
            exact(Micros(micros));
        }
        for power in 0..15 {
            let p = 10_i64.pow(power);
            for delta in -1000..=1000 {
                if let Some(m) = Micros::new(p + delta) {
                    exact(m);
                }
            }
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        for _ in 0..1_000_000 {
            exact(Micros(rng.random_range(-Micros::MAX.0..=Micros::MAX.0)));
        }
        exact(Micros::MAX);
        exact(Micros(-Micros::MAX.0));
    }
}
