//! /api/city matching: case, accents and punctuation folded; close names found when no
//! exact one exists; unrelated words find nothing.

use serde_json::json;

use crate::helpers::spawn_app;

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
