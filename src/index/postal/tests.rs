//! `PostalIndex`'s own tests: stored records, and codes found by either query.

use super::*;
use crate::domain::postal_code::compact;

/// A country's codes from its stored codes, in source order.
fn codes_of(country: &str, stored: &[&str]) -> (CountryCode, CountryCodes) {
    let country = CountryCode::parse(country).expect("test country");
    let mut read = ReadCodes::default();
    for code in stored {
        let record = PlaceRecord {
            postal_code: code.to_string(),
            place_name: format!("place of {code}"),
            admin_name1: None,
            admin_code1: None,
            admin_name2: None,
            admin_code2: None,
            admin_name3: None,
            admin_code3: None,
            latitude: None,
            longitude: None,
            accuracy: None,
            timezone: None,
        };
        let at = read.records.len() as u32;
        read.by_key.entry(compact(code).into()).or_insert(at);
        read.records
            .push(StoredRecord::new(&record, &mut read.texts));
    }
    (country, CountryCodes::new(country, read))
}

/// What `check_code` answers from the short query, and from the postal query.
fn found(country: CountryCode, codes: &CountryCodes, input: &str) -> [Option<String>; 2] {
    let mut buffer = ShortBuffer::default();
    let short = match ShortQuery::parse(country, input.as_bytes(), &mut buffer) {
        ShortParse::Query(short) => short
            .first_found(|key| codes.rank_bytes(key))
            .and_then(|rank| codes.canonical(country, rank))
            .map(|code| code.as_str().to_owned()),
        ShortParse::Invalid | ShortParse::Long => None,
    };
    let slow = PostalQuery::parse(country, input).and_then(|query| {
        let record = query.candidates().find_map(|key| codes.get(key))?;
        Some(canonical(country, record.postal_code()))
    });
    [short, slow]
}

#[test]
fn every_key_packed_or_long_finds_its_code_and_gives_it_back() {
    for (country, stored) in [
        ("JP", &["100-0001", "1000001", "060-8588", "9999999"][..]),
        ("US", &["02134", "90210", "12345678", "123456789"]),
        ("FR", &["75001", "75754 CEDEX 15", "34063 CEDEX 2", "06000"]),
        ("GB", &["SW1A", "M1", "W1"]),
        ("LV", &["LV-1001", "LV-3601"]),
        ("MD", &["MD-2001"]),
        ("DE", &["Ø-1234", "東京-1", "12345"]),
    ] {
        let (country, codes) = codes_of(country, stored);
        for code in stored {
            let key = compact(code);
            let rank = codes.rank(&key).expect("a stored key");
            assert_eq!(codes.key(rank), key, "{code}");
            let record = codes.at(rank).expect("its record");
            let canonical = canonical(country, record.postal_code());
            assert_eq!(codes.canonical(country, rank).unwrap().as_str(), canonical);
        }
        assert_eq!(codes.rank("00000"), None);
        assert_eq!(codes.rank("000000000"), None);
        assert_eq!(codes.rank(""), None);
    }
}

/// A country, its stored codes, and inputs with what each finds.
type Case = (
    &'static str,
    &'static [&'static str],
    &'static [(&'static str, Option<&'static str>)],
);

#[test]
fn a_code_is_found_the_same_by_either_query() {
    let cases: [Case; 7] = [
        (
            "JP",
            &["100-0001", "060-8588"],
            &[
                ("100-0001", Some("1000001")),
                ("1000001", Some("1000001")),
                ("100 0001", Some("1000001")),
                ("0608588", Some("0608588")),
                ("100-0002", None),
            ],
        ),
        (
            "US",
            &["02134", "90210", "12345678"],
            &[
                ("02134-1234", Some("02134")),
                ("021341234", Some("02134")),
                ("90210", Some("90210")),
                ("12345678", Some("12345678")),
                ("99999", None),
            ],
        ),
        (
            "FR",
            &["75754 CEDEX 15", "75001"],
            &[
                ("75754 cedex 15", Some("75754 CEDEX 15")),
                ("75754CEDEX15", Some("75754 CEDEX 15")),
                ("75001", Some("75001")),
                ("75754 CEDEX 16", None),
            ],
        ),
        (
            "GB",
            &["SW1A", "M1"],
            &[
                ("SW1A 1AA", Some("SW1A")),
                ("sw1a1aa", Some("SW1A")),
                ("M1 1AE", Some("M1")),
                ("SW1B", None),
            ],
        ),
        (
            "LV",
            &["LV-1001"],
            &[
                ("1001", Some("LV-1001")),
                ("LV-1001", Some("LV-1001")),
                ("lv 1001", Some("LV-1001")),
                ("1002", None),
            ],
        ),
        ("MD", &["MD-2001"], &[("2001", Some("MD-2001"))]),
        (
            "DE",
            &["Ø-1234", "12345"],
            // Only ASCII letters and digits are well-formed input.
            &[("Ø1234", None), ("12345", Some("12345"))],
        ),
    ];
    for (country, stored, inputs) in cases {
        let (country, codes) = codes_of(country, stored);
        for (input, expected) in inputs {
            let [short, slow] = found(country, &codes, input);
            assert_eq!(slow.as_deref(), *expected, "{country:?} {input}");
            if input.is_ascii() && short.is_some() {
                assert_eq!(short, slow, "{country:?} {input}");
            }
            // A code of ASCII found by the postal query is found by the short one.
            if input.is_ascii() && expected.is_some() {
                assert_eq!(short.as_deref(), *expected, "{country:?} {input}");
            }
        }
    }
}

#[test]
fn a_stored_record_gives_back_every_field_and_every_absence() {
    let record = PlaceRecord {
        postal_code: "100-0001".into(),
        place_name: "Chiyoda".into(),
        admin_name1: Some("Tokyo To".into()),
        admin_code1: Some("40".into()),
        admin_name2: Some("Chiyoda Ku".into()),
        admin_code2: None,
        admin_name3: None,
        admin_code3: Some("x".into()),
        latitude: Some(35.6841),
        longitude: Some(139.7521),
        accuracy: None,
        timezone: Some("Asia/Tokyo".into()),
    };
    let mut texts = String::from("before\t");
    let stored = StoredRecord::new(&record, &mut texts);
    let at = |stored: &StoredRecord, texts: &str| stored.with_text(texts).record();
    assert_eq!(at(&stored, &texts), record);
    assert_eq!(stored.with_text(&texts).postal_code(), "100-0001");
    let elsewhere = PlaceRecord {
        latitude: None,
        longitude: None,
        accuracy: Some(4),
        ..record.clone()
    };
    let second = StoredRecord::new(&elsewhere, &mut texts);
    assert_eq!(at(&second, &texts), elsewhere);
    // The first is still whole after the arena grew.
    assert_eq!(at(&stored, &texts), record);
}
