//! Every row of the normalisation table of decisions.md, through /api/validate-bulk
//! (`normalized` is the stored key) and /api/lookup.

use serde_json::{Value, json};

use crate::helpers::{code, spawn_app};

/// (country, input, expected normalized or None when invalid, expected reason)
const CASES: &[(&str, &str, Option<&str>, Option<&str>)] = &[
    // Spaces and hyphens never decide a match.
    ("SE", "10005", Some("100 05"), None),
    ("SE", "100 05", Some("100 05"), None),
    ("PT", "1000001", Some("1000-001"), None),
    ("PT", "1000-001", Some("1000-001"), None),
    ("LV", "LV1001", Some("LV-1001"), None),
    // US: first five digits.
    ("US", "02134", Some("02134"), None),
    ("US", "02134-1234", Some("02134"), None),
    ("US", "021341234", Some("02134"), None),
    ("US", " 90210 ", Some("90210"), None),
    // Whitespace trimmed as `str::trim` does, ASCII before Unicode (a spreadsheet's cell).
    ("US", "90210\t\u{A0}", Some("90210"), None),
    ("US", "\u{2003}\n90210", Some("90210"), None),
    // GB, IM, JE, GG: outward code.
    ("GB", "SW1A 1AA", Some("SW1A"), None),
    ("GB", "sw1a1aa", Some("SW1A"), None),
    ("GB", "SW1A", Some("SW1A"), None),
    ("IM", "IM1 1AA", Some("IM1"), None),
    ("JE", "JE4 8PJ", Some("JE4"), None),
    ("GG", "GY1 1AA", Some("GY1"), None),
    // CA: forward sortation area.
    ("CA", "K1A 0B1", Some("K1A"), None),
    ("CA", "K1A0B1", Some("K1A"), None),
    ("CA", "k1a", Some("K1A"), None),
    // IE: routing key.
    ("IE", "D02 X285", Some("D02"), None),
    ("IE", "D02X285", Some("D02"), None),
    ("IE", "D02", Some("D02"), None),
    // NL: the four digits.
    ("NL", "1012 AB", Some("1012"), None),
    ("NL", "1012AB", Some("1012"), None),
    ("NL", "1012", Some("1012"), None),
    // AR: CPA to the four digits.
    ("AR", "A4123ABC", Some("4123"), None),
    ("AR", "4123", Some("4123"), None),
    // MT: three-letter prefix.
    ("MT", "VLT 1117", Some("VLT"), None),
    ("MT", "VLT1117", Some("VLT"), None),
    ("MT", "vlt", Some("VLT"), None),
    // LV, MD: with or without the prefix.
    ("LV", "LV-1001", Some("LV-1001"), None),
    ("LV", "1001", Some("LV-1001"), None),
    ("MD", "MD-6501", Some("MD-6501"), None),
    ("MD", "6501", Some("MD-6501"), None),
    // JP: seven digits without the hyphen.
    ("JP", "100-0001", Some("1000001"), None),
    ("JP", "1000001", Some("1000001"), None),
    // Others: the data's form, with or without its hyphen or space.
    ("PL", "00-910", Some("00-910"), None),
    ("PL", "00910", Some("00-910"), None),
    ("BR", "69945000", Some("69945-000"), None),
    ("CZ", "11000", Some("110 00"), None),
    ("SK", "811-01", Some("811 01"), None),
    // invalid_format and not_found (decisions.md examples).
    ("US", "ABCDE", None, Some("invalid_format")),
    ("US", "99999", None, Some("not_found")),
    ("US", "123456", None, Some("invalid_format")),
    ("US", "1234567", None, Some("invalid_format")),
    ("US", "12345678", None, Some("invalid_format")),
    ("IE", "D02X2855555", None, Some("invalid_format")),
    ("US", "1234567890", None, Some("invalid_format")),
    ("US", "9021", None, Some("invalid_format")),
    ("US", "90210!", None, Some("invalid_format")),
    ("GB", "123", None, Some("invalid_format")),
    ("GB", "ZZ9 9ZZ", None, Some("not_found")),
    ("DE", "99999", None, Some("not_found")),
    ("JP", "999-9999", None, Some("not_found")),
];

#[test]
fn every_accepted_form_normalises_to_the_stored_key() {
    let app = spawn_app();
    let key = app.api_key();
    let records: Vec<Value> = CASES
        .iter()
        .map(|(country, input, _, _)| json!({"postalCode": input, "countryCode": country}))
        .collect();
    let reply = app.validate_bulk(json!({"apiKey": key, "records": records}));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let results = reply.body["results"].as_array().unwrap();
    for ((country, input, normalized, reason), result) in CASES.iter().zip(results) {
        assert_eq!(result["postalCode"], *input);
        assert_eq!(result["valid"], normalized.is_some(), "{country} {input}");
        assert_eq!(result["normalized"], json!(normalized), "{country} {input}");
        assert_eq!(result["reason"], json!(reason), "{country} {input}");
    }
}

#[test]
fn every_accepted_form_is_found_by_lookup_too() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    app.cli(&["account", "topup", &account, "--usd", "5"]);
    for (country, input, normalized, _) in CASES {
        let reply = app.lookup(code(&key, json!(input), Some(country)));
        let expected = if normalized.is_some() { 200 } else { 404 };
        assert_eq!(
            reply.status, expected,
            "{country} {input}: {:?}",
            reply.body
        );
    }
}

#[test]
fn an_integer_zipcode_keeps_the_leading_zeros_of_fixed_length_codes() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.lookup(code(&key, json!(2134), None));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["city"], "Allston");
    let reply = app.metacode(code(&key, json!(1067), Some("DE")));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["meta"]["postalCode"], "01067");
    let reply = app.lookup(code(&key, json!(1000001), Some("JP")));
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["city"], "Chiyoda");
}

#[test]
fn the_same_code_in_two_countries_is_never_mixed_up() {
    let app = spawn_app();
    let key = app.api_key();
    // 01067 exists in DE; in the US it does not (the sample's US 01067 is absent).
    let de = app.lookup(code(&key, json!("01067"), Some("DE")));
    assert_eq!(de.body["city"], "Dresden Innere Altstadt");
    let us = app.validate(code(&key, json!("01067"), Some("US")));
    assert_eq!(us.body["valid"], false);
}
