//! /api/city matching: case, accents and punctuation folded; close names found when no
//! exact one exists; unrelated words find nothing.

use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app, spawn_city_app};

#[test]
fn case_and_accents_do_not_matter() {
    let app = spawn_app();
    let key = app.api_key();
    for city in ["München", "MUNCHEN", "munchen"] {
        let reply = app.city(json!({"apiKey": key, "city": city, "country": "DE"}));
        assert_eq!(reply.status, 200, "{city}");
        assert!(
            reply.body.get("matchedCity").is_none(),
            "{city}: exact after folding"
        );
        let zipcodes = reply.body["zipcodes"].as_array().unwrap();
        assert!(zipcodes.contains(&json!("80331")), "{city}");
    }
}

#[test]
fn a_typo_finds_the_intended_city_and_says_which() {
    let app = spawn_app();
    let key = app.api_key();
    let cases = [
        (
            json!({"city": "San Fransisco", "state": "California"}),
            "San Francisco",
            "California",
            "CA",
            "94102",
        ),
        (
            json!({"city": "Pittsburg", "ST": "PA"}),
            "Pittsburgh",
            "Pennsylvania",
            "PA",
            "15201",
        ),
        (
            json!({"city": "Mnchen", "country": "DE"}),
            "München",
            "Bayern",
            "BY",
            "80331",
        ),
        (
            json!({"city": "Bostn", "ST": "ma"}),
            "Boston",
            "Massachusetts",
            "MA",
            "02108",
        ),
    ];
    for (mut body, city, state, st, one_code) in cases {
        body["apiKey"] = json!(key);
        let reply = app.city(body.clone());
        assert_eq!(reply.status, 200, "{body}: {:?}", reply.body);
        assert_eq!(reply.body["matchedCity"], city, "{body}");
        assert_eq!(reply.body["matchedState"], state, "{body}");
        assert_eq!(reply.body["matchedST"], st, "{body}");
        assert!(
            reply.body["zipcodes"]
                .as_array()
                .unwrap()
                .contains(&json!(one_code)),
            "{body}"
        );
    }
}

#[test]
fn an_exact_name_in_another_state_is_not_an_exact_match() {
    let app = spawn_app();
    let key = app.api_key();
    // Pittsburg exists in KS; asked for in KS it is exact.
    let reply = app.city(json!({"apiKey": key, "city": "Pittsburg", "ST": "KS"}));
    assert_eq!(reply.status, 200);
    assert!(reply.body.get("matchedCity").is_none());
}

#[test]
fn unrelated_words_find_nothing() {
    let app = spawn_app();
    let key = app.api_key();
    for (city, st) in [
        ("Hello World", "CA"),
        ("Qwerty", "NY"),
        ("Xylophone", "TX"),
        ("zz", "CA"),
    ] {
        let reply = app.city(json!({"apiKey": key, "city": city, "ST": st}));
        assert_eq!(reply.status, 404, "{city}: {:?}", reply.body);
    }
}

#[test]
fn the_state_may_be_a_name_or_a_code_in_any_case() {
    let app = spawn_app();
    let key = app.api_key();
    let mut answers = Vec::new();
    for filter in [
        json!({"state": "massachusetts"}),
        json!({"state": "MA"}),
        json!({"ST": "ma"}),
    ] {
        let mut body = filter.clone();
        body["apiKey"] = json!(key);
        body["city"] = json!("Boston");
        let reply = app.city(body);
        assert_eq!(reply.status, 200, "{filter}");
        answers.push(reply.body["zipcodes"].clone());
    }
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[1], answers[2]);
    let zipcodes = answers[0].as_array().unwrap();
    let mut sorted = zipcodes.clone();
    sorted.sort_by_key(|v| v.as_str().unwrap().to_string());
    sorted.dedup();
    assert_eq!(&sorted, zipcodes, "unique and ascending");
}

#[test]
fn outside_the_us_state_and_st_filter_on_admin_name_and_code() {
    let app = spawn_app();
    let key = app.api_key();
    let reply =
        app.city(json!({"apiKey": key, "city": "München", "country": "DE", "state": "bayern"}));
    assert_eq!(reply.status, 200);
    let reply = app.city(json!({"apiKey": key, "city": "München", "country": "DE", "ST": "BY"}));
    assert_eq!(reply.status, 200);
    let reply = app.city(json!({"apiKey": key, "city": "München", "country": "DE", "ST": "SN"}));
    assert_eq!(reply.status, 404, "{:?}", reply.body);
}

/// Asks `/api/city` and returns (status, zipcodes, matchedCity, matchedState, matchedST).
fn ask(
    app: &TestApp,
    key: &str,
    mut body: Value,
) -> (
    u16,
    Vec<String>,
    Option<String>,
    Option<String>,
    Option<String>,
) {
    body["apiKey"] = json!(key);
    let reply = app.city(body);
    let text = |k: &str| reply.body.get(k).and_then(Value::as_str).map(String::from);
    let zipcodes = reply.body["zipcodes"]
        .as_array()
        .map(|a| a.iter().map(|z| z.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    (
        reply.status,
        zipcodes,
        text("matchedCity"),
        text("matchedState"),
        text("matchedST"),
    )
}

/// A query that must answer the place `(city, state, st)` non-exactly, with exactly the
/// codes the exact name answers in that region.
fn assert_finds(app: &TestApp, key: &str, query: Value, city: &str, state: &str, st: &str) {
    let (status, zipcodes, m_city, m_state, m_st) = ask(app, key, query.clone());
    assert_eq!(status, 200, "{query}");
    assert_eq!(m_city.as_deref(), Some(city), "{query}");
    assert_eq!(m_state.as_deref(), Some(state), "{query}");
    assert_eq!(m_st.as_deref(), Some(st), "{query}");
    let mut exact = json!({"city": city, "ST": st});
    exact["country"] = query.get("country").cloned().unwrap_or(json!("US"));
    let (status, expected, m_city, _, _) = ask(app, key, exact.clone());
    assert_eq!((status, m_city), (200, None), "{exact}");
    assert!(!expected.is_empty());
    assert_eq!(zipcodes, expected, "{query}: the place's own codes");
}

#[test]
fn abbreviations_find_the_long_word_the_data_writes() {
    let app = spawn_app();
    let key = app.api_key();
    assert_finds(
        &app,
        &key,
        json!({"city": "St. Louis", "ST": "MO"}),
        "Saint Louis",
        "Missouri",
        "MO",
    );
    assert_finds(
        &app,
        &key,
        json!({"city": "st louis", "state": "Missouri"}),
        "Saint Louis",
        "Missouri",
        "MO",
    );
    assert_finds(
        &app,
        &key,
        json!({"city": "Ft Worth", "ST": "TX"}),
        "Fort Worth",
        "Texas",
        "TX",
    );
    assert_finds(
        &app,
        &key,
        json!({"city": "Mt. Vernon", "ST": "NY"}),
        "Mount Vernon",
        "New York",
        "NY",
    );
    assert_finds(
        &app,
        &key,
        json!({"city": "Pt Huron", "ST": "MI"}),
        "Port Huron",
        "Michigan",
        "MI",
    );
    assert_finds(
        &app,
        &key,
        json!({"city": "St. Augustin", "country": "DE"}),
        "Sankt Augustin",
        "Nordrhein-Westfalen",
        "NW",
    );
}

#[test]
fn typed_umlauts_find_the_place() {
    let app = spawn_app();
    let key = app.api_key();
    assert_finds(
        &app,
        &key,
        json!({"city": "Koeln", "country": "DE"}),
        "Köln",
        "Nordrhein-Westfalen",
        "NW",
    );
    assert_finds(
        &app,
        &key,
        json!({"city": "Muenchen", "country": "DE"}),
        "München",
        "Bayern",
        "BY",
    );
    assert_finds(
        &app,
        &key,
        json!({"city": "Duesseldorf", "country": "DE"}),
        "Düsseldorf",
        "Nordrhein-Westfalen",
        "NW",
    );
}

#[test]
fn spacing_and_punctuation_do_not_matter() {
    let app = spawn_app();
    let key = app.api_key();
    assert_finds(
        &app,
        &key,
        json!({"city": "LosAngeles", "ST": "CA"}),
        "Los Angeles",
        "California",
        "CA",
    );
    // Punctuation folds to a space: the same folded name, an exact match.
    for (city, st) in [("Las-Vegas", "NV"), ("Winston Salem", "NC")] {
        let (status, zipcodes, matched, _, _) = ask(&app, &key, json!({"city": city, "ST": st}));
        assert_eq!((status, matched), (200, None), "{city}");
        assert!(!zipcodes.is_empty());
    }
}

#[test]
fn trailing_words_naming_the_state_or_city_are_extra() {
    let app = spawn_app();
    let key = app.api_key();
    assert_finds(
        &app,
        &key,
        json!({"city": "New York City", "ST": "NY"}),
        "New York",
        "New York",
        "NY",
    );
    assert_finds(
        &app,
        &key,
        json!({"city": "Brooklyn NY", "ST": "NY"}),
        "Brooklyn",
        "New York",
        "NY",
    );
    assert_finds(
        &app,
        &key,
        json!({"city": "Brooklyn New York", "state": "new york"}),
        "Brooklyn",
        "New York",
        "NY",
    );
    assert_finds(
        &app,
        &key,
        json!({"city": "München Bayern", "country": "DE"}),
        "München",
        "Bayern",
        "BY",
    );
}

#[test]
fn the_first_words_of_a_longer_name_find_its_largest_place() {
    let app = spawn_app();
    let key = app.api_key();
    assert_finds(
        &app,
        &key,
        json!({"city": "Frankfurt", "country": "DE"}),
        "Frankfurt am Main",
        "Hessen",
        "HE",
    );
    assert_finds(
        &app,
        &key,
        json!({"city": "Freiburg", "country": "DE"}),
        "Freiburg im Breisgau",
        "Baden-Württemberg",
        "BW",
    );
}

#[test]
fn among_equally_close_places_more_postal_codes_win() {
    let app = spawn_city_app();
    let key = app.api_key();
    assert_finds(
        &app,
        &key,
        json!({"city": "Milanno", "country": "IT"}),
        "Milano",
        "Lombardia",
        "09",
    );
}

#[test]
fn a_city_written_as_numbered_districts_answers_with_all_of_them() {
    let app = spawn_city_app();
    let key = app.api_key();
    let (status, zipcodes, matched, _, _) =
        ask(&app, &key, json!({"city": "Paris", "country": "FR"}));
    assert_eq!((status, matched), (200, None));
    let mut expected: Vec<String> = (0..=20).map(|n| format!("750{n:02}")).collect();
    expected.extend(
        [
            "75021 CEDEX 01",
            "75060 CEDEX 02",
            "75114 CEDEX 08",
            "75115 CEDEX 15",
            "75116",
            "75122 CEDEX 03",
            "75125 CEDEX 11",
            "75131 CEDEX 12",
            "75138 CEDEX 07",
            "75144 CEDEX 19",
            "75158 CEDEX 14",
            "75161 CEDEX 04",
            "75172 CEDEX 17",
            "75201 CEDEX 13",
            "75221 CEDEX 05",
            "75260 CEDEX 06",
            "75304 CEDEX 09",
            "75460 CEDEX 10",
            "75860 CEDEX 18",
            "75960 CEDEX 20",
        ]
        .map(String::from),
    );
    assert_eq!(zipcodes, expected);
    let (status, zipcodes, matched, _, _) =
        ask(&app, &key, json!({"city": "Lyon", "country": "FR"}));
    assert_eq!((status, matched), (200, None));
    assert_eq!(
        zipcodes,
        (1..=9).map(|n| format!("6900{n}")).collect::<Vec<_>>()
    );
    // A district by its own name answers only its codes.
    let (status, zipcodes, matched, _, _) =
        ask(&app, &key, json!({"city": "Paris 15", "country": "FR"}));
    assert_eq!((status, matched), (200, None));
    assert_eq!(zipcodes, ["75015", "75115 CEDEX 15"]);
}

#[test]
fn unrelated_words_find_nothing_in_any_country() {
    let app = spawn_city_app();
    let key = app.api_key();
    for country in ["US", "DE", "GB", "CA", "JP", "FR", "IT", "LV", "MD"] {
        for city in ["Hello World", "Qwerty", "Xylophone", "zzqxv", "Blorptangle"] {
            let mut body = json!({"city": city, "country": country});
            if country == "US" {
                body["ST"] = json!("CA");
            }
            let (status, ..) = ask(&app, &key, body);
            assert_eq!(status, 404, "{city} in {country}");
        }
    }
}
