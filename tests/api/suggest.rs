//! /api/suggest: names starting with `q`, then containing it, most postal codes first;
//! its 400s; billed one query.

use serde_json::{Value, json};

use crate::helpers::spawn_app;

fn cities(reply: &Value) -> Vec<(String, String, String, u64)> {
    reply["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["city"].as_str().unwrap().to_string(),
                r["state"].as_str().unwrap().to_string(),
                r["ST"].as_str().unwrap().to_string(),
                r["codes"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn names_starting_with_the_query_come_most_postal_codes_first() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.suggest(json!({"apiKey": key, "q": "San Fr", "ST": "CA", "limit": 3}));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let found = cities(&reply.body);
    assert_eq!(found[0].0, "San Francisco");
    assert_eq!(
        (found[0].1.as_str(), found[0].2.as_str()),
        ("California", "CA")
    );
    // `codes` is the number of postal codes /api/city answers for the place.
    let city = app.city(json!({"apiKey": key, "city": "San Francisco", "ST": "CA"}));
    assert_eq!(
        found[0].3,
        city.body["zipcodes"].as_array().unwrap().len() as u64
    );
    assert!(found.len() <= 3);
    // Names starting with the query first, then names containing it (South San Francisco).
    let starts: Vec<bool> = found
        .iter()
        .map(|f| f.0.to_lowercase().starts_with("san fr"))
        .collect();
    assert!(
        found.iter().all(|f| f.0.to_lowercase().contains("san fr")),
        "{found:?}"
    );
    assert!(starts.windows(2).all(|w| w[0] || !w[1]), "{found:?}");
}

#[test]
fn names_containing_the_query_follow_and_accents_are_folded() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.suggest(json!({"apiKey": key, "q": "unchen", "country": "de", "limit": 50}));
    assert_eq!(reply.status, 200);
    let found = cities(&reply.body);
    assert_eq!(found[0].0, "München", "{found:?}");
    let reply = app.suggest(json!({"apiKey": key, "q": "MUNCH", "country": "DE", "limit": 1}));
    assert_eq!(cities(&reply.body)[0].0, "München");
    assert_eq!(cities(&reply.body).len(), 1);
}

#[test]
fn without_a_match_the_results_are_empty_and_billed() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.suggest(json!({"apiKey": key, "q": "Qxzqxz", "country": "DE"}));
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["results"], json!([]));
    assert_eq!(reply.body["balance"], json!(0.027972));
    let reply = app.suggest(json!({"apiKey": key, "q": "Berlin", "country": "DE"}));
    assert_eq!(reply.body["balance"], json!(0.027944));
    for field in [
        "authTime",
        "rateLimitCheckTime",
        "balanceTime",
        "processingTime",
        "totalTime",
    ] {
        assert!(reply.body["performance"][field].is_string(), "{field}");
    }
}

#[test]
fn a_query_of_characters_the_folding_drops_matches_nothing_and_is_billed() {
    let app = spawn_app();
    let key = app.api_key();
    // `¿` is outside ASCII and not white space (the schema admits it), but folds to `?`.
    let reply = app.suggest(json!({"apiKey": key, "q": "¿ —"}));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["results"], json!([]));
    assert_eq!(reply.body["balance"], json!(0.027972));
}

#[test]
fn the_default_limit_is_ten() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.suggest(json!({"apiKey": key, "q": "San", "ST": "CA"}));
    assert_eq!(cities(&reply.body).len(), 10);
    let reply = app.suggest(json!({"apiKey": key, "q": "San", "ST": "CA", "limit": 50}));
    assert_eq!(cities(&reply.body).len(), 50);
}

#[test]
fn bad_parameters_are_400_with_their_texts_and_cost_nothing() {
    let app = spawn_app();
    let key = app.api_key();
    let cases = [
        (json!({"q": "Bos"}), "Missing required field: apiKey"),
        (json!({"apiKey": key}), "Missing required field: q"),
        (
            json!({"apiKey": key, "q": "  "}),
            "Missing required field: q",
        ),
        (json!({"apiKey": key, "q": 5}), "Missing required field: q"),
        (json!({"apiKey": key, "q": "?!"}), "Invalid 'q'"),
        // White space outside ASCII is no name character either.
        (
            json!({"apiKey": key, "q": "\u{a0}-\u{3000}"}),
            "Invalid 'q'",
        ),
        (json!({"apiKey": key, "q": "a".repeat(201)}), "Invalid 'q'"),
        (
            json!({"apiKey": key, "q": "Bos", "country": "XX"}),
            "Invalid 'country'",
        ),
        (
            json!({"apiKey": key, "q": "Bos", "limit": 0}),
            "Invalid 'limit'",
        ),
        (
            json!({"apiKey": key, "q": "Bos", "limit": 51}),
            "Invalid 'limit'",
        ),
        (
            json!({"apiKey": key, "q": "Bos", "limit": "5"}),
            "Invalid 'limit'",
        ),
        (
            json!({"apiKey": key, "q": "Bos", "limit": 2.5}),
            "Invalid 'limit'",
        ),
        // An optional field sent as `null` is a wrong value, not an absent one.
        (
            json!({"apiKey": key, "q": "Bos", "limit": null}),
            "Invalid 'limit'",
        ),
        (
            json!({"apiKey": key, "q": "Bos", "country": null}),
            "Invalid 'country'",
        ),
        (
            json!({"apiKey": key, "q": "Bos", "ST": null}),
            "Invalid 'ST'",
        ),
    ];
    for (body, text) in cases {
        let reply = app.suggest(body.clone());
        assert_eq!(reply.status, 400, "{body}");
        assert_eq!(reply.body, json!({"error": text}), "{body}");
    }
    let reply = app.suggest(json!({"apiKey": "pk_nope", "q": "Bos"}));
    assert_eq!(
        (reply.status, reply.body.clone()),
        (401, json!({"error": "Invalid API key"}))
    );
    let reply = app.suggest(json!({"apiKey": key, "q": "Boston", "ST": "MA"}));
    assert_eq!(
        reply.body["balance"],
        json!(0.027972),
        "only the 200 was charged"
    );
}
