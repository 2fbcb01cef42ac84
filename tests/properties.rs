//! Property tests (proptest) of the domain rules: money prints and parses back exactly,
//! normalisation is idempotent and ignores case and separators, rate-limit windows count
//! and refuse as a plain model of fixed UTC windows does; a cluster flush's settlement
//! (`domain::grant::settle`) only moves money.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use postal::domain::CountryCode;
use postal::domain::country::ISO_CODES;
use postal::domain::grant::{Locked, settle};
use postal::domain::money::Micros;
use postal::domain::postal_code::{PostalQuery, compact, shape};
use postal::domain::rate_limit::{Counters, Limits, Window};
use postal::domain::text::fold;
use proptest::prelude::*;

fn any_micros() -> impl Strategy<Value = Micros> {
    (-Micros::MAX.get()..=Micros::MAX.get()).prop_map(|m| Micros::new(m).expect("in range"))
}

fn any_country() -> impl Strategy<Value = CountryCode> {
    proptest::sample::select(ISO_CODES.to_vec())
        .prop_map(|code| CountryCode::parse(code).expect("an ISO code"))
}

/// Codes of the forms people type: letters, digits, spaces and hyphens, some other bytes.
fn code_like() -> impl Strategy<Value = String> {
    "[A-Za-z0-9 -]{0,12}|[ -~]{0,12}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn every_amount_prints_as_a_decimal_that_parses_back_to_it(m in any_micros()) {
        prop_assert_eq!(Micros::parse_usd(&m.to_string()), Ok(m));
    }

    #[test]
    fn the_json_number_of_an_amount_is_that_exact_decimal(m in any_micros()) {
        let text = serde_json::to_string(&m.to_json_number()).expect("a number prints");
        if text.contains('e') {
            // 1 to 9 micro-dollars print in exponent form (docs/money.md): same number.
            let value: f64 = text.parse().expect("a float");
            prop_assert_eq!(value, m.get() as f64 / 1e6);
        } else {
            prop_assert_eq!(Micros::parse_usd(&text), Ok(m));
        }
    }

    #[test]
    fn a_usd_decimal_parses_to_its_value_and_prints_in_shortest_form(
        negative in any::<bool>(),
        whole in 0u64..1_000_000_000,
        fraction in proptest::option::of("[0-9]{1,6}"),
    ) {
        let sign = if negative { "-" } else { "" };
        let text = match &fraction {
            Some(f) => format!("{sign}{whole}.{f}"),
            None => format!("{sign}{whole}"),
        };
        let parsed = Micros::parse_usd(&text).expect("a valid amount");
        let fraction_micros = fraction
            .as_deref()
            .map_or(0, |f| format!("{f:0<6}").parse::<i64>().expect("digits"));
        let magnitude = whole as i64 * 1_000_000 + fraction_micros;
        prop_assert_eq!(parsed.get(), if negative { -magnitude } else { magnitude });
        // Printing drops only zeros: it parses back to the same amount.
        let printed = parsed.to_string();
        prop_assert_eq!(Micros::parse_usd(&printed), Ok(parsed));
        prop_assert!(!printed.contains('.') || !printed.ends_with('0'), "{}", printed);
    }

    #[test]
    fn any_text_parses_to_an_amount_that_prints_back_or_is_refused(text in "\\PC{0,20}|[-+0-9.]{0,20}") {
        if let Ok(m) = Micros::parse_usd(&text) {
            prop_assert_eq!(Micros::parse_usd(&m.to_string()), Ok(m));
        }
    }

    #[test]
    fn normalising_a_normalised_key_changes_nothing(country in any_country(), input in code_like()) {
        if let Some(query) = PostalQuery::parse(country, &input) {
            let again = PostalQuery::parse(country, query.key());
            prop_assert_eq!(again.as_ref().map(PostalQuery::key), Some(query.key()), "{}", input);
        }
    }

    #[test]
    fn case_spaces_and_hyphens_never_change_the_key(
        country in any_country(),
        input in "[A-Za-z0-9]{1,10}",
        separators in proptest::collection::vec(proptest::sample::select(vec!["", " ", "-"]), 10),
    ) {
        let spaced: String = input
            .chars()
            .zip(separators.iter().cycle())
            .flat_map(|(c, sep)| std::iter::once(c.to_ascii_lowercase()).chain(sep.chars()))
            .collect();
        let plain = PostalQuery::parse(country, &input.to_ascii_uppercase());
        let varied = PostalQuery::parse(country, &format!(" {spaced} "));
        prop_assert_eq!(plain.as_ref().map(PostalQuery::key), varied.as_ref().map(PostalQuery::key));
    }

    #[test]
    fn a_key_is_compact_upper_case_letters_and_digits(country in any_country(), input in code_like()) {
        if let Some(query) = PostalQuery::parse(country, &input) {
            let key = query.key();
            prop_assert!(!key.is_empty());
            prop_assert!(key.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()), "{}", key);
            prop_assert_eq!(compact(key), key);
        }
    }

    #[test]
    fn compact_shape_and_fold_are_idempotent(text in "\\PC{0,30}") {
        prop_assert_eq!(compact(&compact(&text)), compact(&text));
        prop_assert_eq!(shape(&shape(&text)), shape(&text));
        prop_assert_eq!(fold(&fold(&text)), fold(&text));
    }
}

fn at(secs: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs as u64)
}

/// 2026-01-01T00:00:00Z.
const YEAR_START: i64 = 1_767_225_600;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    #[test]
    fn a_window_starts_on_its_utc_boundary_and_ends_within_its_length(
        secs in YEAR_START..YEAR_START + 3 * 86_400,
        millis in 0u64..1000,
    ) {
        let now = at(secs) + Duration::from_millis(millis);
        for window in Window::ALL {
            let start = window.start(now);
            prop_assert_eq!(start.rem_euclid(window.seconds()), 0);
            prop_assert!(start <= secs && secs < start + window.seconds());
            let left = window.seconds_left(now) as i64;
            prop_assert!((1..=window.seconds()).contains(&left));
            // The window ends `left` seconds from now, rounded up to a whole second.
            let end_ms = (start + window.seconds()) * 1000;
            let now_ms = secs * 1000 + millis as i64;
            prop_assert_eq!(left, ((end_ms - now_ms) + 999) / 1000);
        }
    }

    /// Requests at increasing times, each admitted or refused, against a model that keeps
    /// one count per (window, start).
    #[test]
    fn counters_admit_and_refuse_as_fixed_windows_do(
        per_minute in proptest::option::of(1u64..20),
        per_hour in proptest::option::of(1u64..60),
        per_day in proptest::option::of(1u64..200),
        steps in proptest::collection::vec((0i64..400, 1u64..8), 1..80),
    ) {
        let limits = Limits { per_minute, per_hour, per_day };
        let mut counters = Counters::default();
        let mut model: HashMap<(i64, i64), u64> = HashMap::new();
        let mut now = YEAR_START + 86_400 - 900;
        for (gap, queries) in steps {
            now += gap;
            let time = at(now);
            let count = |model: &HashMap<(i64, i64), u64>, w: Window| {
                model.get(&(w.seconds(), now - now.rem_euclid(w.seconds()))).copied().unwrap_or(0)
            };
            let blocking = Window::ALL.into_iter().find(|&w| {
                limits.of(w).is_some_and(|limit| count(&model, w) + queries > limit)
            });
            match (counters.check(&limits, queries, time), blocking) {
                (Ok(()), None) => {
                    counters = counters.add(queries, time);
                    for w in Window::ALL {
                        *model.entry((w.seconds(), now - now.rem_euclid(w.seconds()))).or_default() += queries;
                    }
                }
                (Err(retry_after), Some(w)) => {
                    prop_assert_eq!(retry_after, w.seconds_left(time));
                }
                (verdict, expected) => {
                    prop_assert!(false, "at {}: {:?}, model says {:?}", now, verdict, expected);
                }
            }
            for w in Window::ALL {
                prop_assert_eq!(counters.current(w, time), count(&model, w));
                if let Some(limit) = limits.of(w) {
                    prop_assert!(counters.current(w, time) <= limit);
                }
            }
        }
    }
}

/// Up to four accounts as a flush locks them: `own <= leased <= balance`.
fn any_locked() -> impl Strategy<Value = BTreeMap<i64, Locked>> {
    proptest::collection::btree_map(
        1i64..=4,
        (0i64..=100_000, 0u32..=100, 0u32..=100).prop_map(|(balance, leased, own)| {
            let leased = balance * i64::from(leased) / 100;
            let own = leased * i64::from(own) / 100;
            let m = |v: i64| Micros::new(v).expect("in range");
            Locked {
                balance: m(balance),
                leased: m(leased),
                own: m(own),
            }
        }),
        0..=4,
    )
}

/// Amounts of accounts 1 to 5 (5 is never locked: a missing account).
fn any_amounts() -> impl Strategy<Value = Vec<(i64, Micros)>> {
    proptest::collection::vec(
        (1i64..=5, 0i64..=20_000).prop_map(|(id, v)| (id, Micros::new(v).expect("in range"))),
        0..=12,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn a_settlement_only_moves_money(
        locked in any_locked(),
        charges in any_amounts(),
        returns in any_amounts(),
        topups in any_amounts(),
    ) {
        let settled = settle(locked.clone(), &charges, &returns, &topups);
        prop_assert_eq!(settled.charges.len(), charges.len());
        let mut taken: HashMap<i64, i64> = HashMap::new();
        for (&(id, wanted), result) in charges.iter().zip(&settled.charges) {
            match result {
                None => prop_assert!(!locked.contains_key(&id)),
                Some(t) => {
                    prop_assert_eq!(t.wanted, wanted);
                    prop_assert!(Micros::ZERO <= t.taken && t.taken <= wanted);
                    *taken.entry(id).or_default() += t.taken.get();
                }
            }
        }
        prop_assert_eq!(settled.accounts.len(), locked.len());
        for (id, before) in &locked {
            let after = settled.accounts[id];
            // A balance goes down by exactly what its charges took.
            prop_assert_eq!(
                before.balance.get() - after.balance.get(),
                taken.get(id).copied().unwrap_or(0)
            );
            prop_assert!(Micros::ZERO <= after.own);
            prop_assert!(after.own <= after.leased && after.leased <= after.balance);
            // Other nodes' grants are untouched.
            prop_assert_eq!(after.elsewhere(), before.elsewhere());
        }
    }
}
