//! The geography endpoints on the sample (docs/geography.md): shapes, texts, order of
//! checks, limits, and what each one charges.

use serde_json::{Value, json};

use crate::helpers::{TestApp, error, spawn_app, usd_to_micros};

/// The textbook haversine on the mean Earth radius, as docs/geography.md states it.
fn haversine_km(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    let (phi1, phi2) = (lat1.to_radians(), lat2.to_radians());
    let d_phi = (lat2 - lat1).to_radians();
    let d_lambda = (lon2 - lon1).to_radians();
    let a = (d_phi / 2.0).sin().powi(2) + phi1.cos() * phi2.cos() * (d_lambda / 2.0).sin().powi(2);
    2.0 * 6371.0088 * a.sqrt().min(1.0).asin()
}

fn metres(km: f64) -> f64 {
    (km * 1000.0).round() / 1000.0
}

/// `body` with `apiKey` set.
fn with_key(key: &str, mut body: Value) -> Value {
    body["apiKey"] = json!(key);
    body
}

/// The (country, zipcode) of each result.
fn codes(results: &Value) -> Vec<(String, String)> {
    results
        .as_array()
        .expect("results")
        .iter()
        .map(|p| {
            (
                p["country"].as_str().unwrap().to_string(),
                p["zipcode"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(c, z)| (c.to_string(), z.to_string()))
        .collect()
}

/// A fresh account with `micros` of balance: (account id, key).
fn account_with(app: &TestApp, micros: i64) -> (String, String) {
    let (account, key) = app.create_account();
    app.set_balance(&account, micros);
    (account, key)
}

#[test]
fn nearest_answers_each_codes_first_record_with_its_distance_nearest_first() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.nearest(with_key(
        &key,
        json!({"latitude": 51.5018, "longitude": -0.1328, "country": "gb", "limit": 3}),
    ));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let results = reply.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(
        results[0],
        json!({"zipcode": "SW1A", "country": "GB", "city": "Westminster Abbey", "state": "England",
               "ST": "ENG", "latitude": 51.5018, "longitude": -0.1328, "distanceKm": 0.0})
    );
    let mut last = 0.0;
    for place in results {
        let km = haversine_km(
            51.5018,
            -0.1328,
            place["latitude"].as_f64().unwrap(),
            place["longitude"].as_f64().unwrap(),
        );
        assert_eq!(place["distanceKm"].as_f64().unwrap(), metres(km));
        assert!(km >= last);
        last = km;
    }
    assert_eq!(usd_to_micros(&reply.body["balance"]), 28_000 - 28);
    for k in [
        "authTime",
        "rateLimitCheckTime",
        "balanceTime",
        "processingTime",
        "totalTime",
    ] {
        assert!(reply.body["performance"][k].is_string(), "{k}");
    }
    assert_eq!(reply.body["rateLimit"]["enabled"], json!(false));
}

#[test]
fn nearest_reaches_across_the_antimeridian_and_orders_equal_distances_by_code() {
    let app = spawn_app();
    let key = app.api_key();
    // West of 180° the Aleutians' 96507; east of it 96505 and 96506 (same place) and Adak.
    let reply = app.nearest(with_key(
        &key,
        json!({"latitude": 51.7, "longitude": 179.9, "country": "US", "limit": 4}),
    ));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(
        codes(&reply.body["results"]),
        pairs(&[
            ("US", "96507"),
            ("US", "96505"),
            ("US", "96506"),
            ("US", "99546")
        ])
    );
    let km = reply.body["results"][1]["distanceKm"].as_f64().unwrap();
    assert_eq!(km, metres(haversine_km(51.7, 179.9, 51.88, -176.6581)));
    assert!(km < 300.0, "{km}");
}

#[test]
fn nearest_without_a_country_answers_every_country_and_max_km_bounds_it() {
    let app = spawn_app();
    let key = app.api_key();
    // Andorra la Vella: Andorra's codes, then Spain's and France's are not in the sample.
    let reply = app.nearest(with_key(
        &key,
        json!({"latitude": 42.5, "longitude": 1.5, "limit": 100}),
    ));
    assert_eq!(reply.status, 200);
    let found = codes(&reply.body["results"]);
    assert_eq!(found.len(), 100);
    assert_eq!(found[0], ("AD".to_string(), "AD500".to_string()));
    let reply = app.nearest(with_key(
        &key,
        json!({"latitude": 42.5, "longitude": 1.5, "maxKm": 5.6}),
    ));
    assert_eq!(
        codes(&reply.body["results"]),
        pairs(&[("AD", "AD500"), ("AD", "AD600"), ("AD", "AD700")])
    );
    // A country without data has no codes near anything; still answered and billed.
    let reply = app.nearest(with_key(
        &key,
        json!({"latitude": 42.5, "longitude": 1.5, "country": "FR"}),
    ));
    assert_eq!(
        (reply.status, reply.body["results"].clone()),
        (200, json!([]))
    );
}

#[test]
fn radius_around_a_code_answers_every_country_within_it_nearest_first() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.radius(with_key(
        &key,
        json!({"zipcode": "AD500", "country": "AD", "radiusKm": 5.6}),
    ));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(
        codes(&reply.body["results"]),
        pairs(&[("AD", "AD500"), ("AD", "AD600"), ("AD", "AD700")])
    );
    assert_eq!(reply.body["truncated"], json!(false));
    assert_eq!(reply.body["results"][0]["distanceKm"], json!(0.0));
    // 500 km around Frankfurt holds more than 1,000 German codes.
    let reply = app.radius(with_key(
        &key,
        json!({"latitude": 50.11, "longitude": 8.68, "radiusKm": 500, "country": "DE"}),
    ));
    assert_eq!(reply.status, 200);
    let results = reply.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 1000);
    assert_eq!(reply.body["truncated"], json!(true));
    assert!(results.iter().all(|p| p["country"] == "DE"));
    let distances: Vec<f64> = results
        .iter()
        .map(|p| p["distanceKm"].as_f64().unwrap())
        .collect();
    assert!(distances.windows(2).all(|w| w[0] <= w[1]));
    // The integer form of a US code, as /api/lookup.
    let reply = app.radius(with_key(&key, json!({"zipcode": 90210, "radiusKm": 1})));
    assert_eq!(
        codes(&reply.body["results"])[0],
        ("US".into(), "90210".into())
    );
}

#[test]
fn distance_answers_km_miles_and_both_places_also_across_countries() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.distance(with_key(
        &key,
        json!({"from": {"zipcode": "90210"}, "to": {"zipcode": "SW1A 1AA", "country": "GB"}}),
    ));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let km = haversine_km(34.0901, -118.4065, 51.5018, -0.1328);
    assert_eq!(reply.body["km"].as_f64().unwrap(), metres(km));
    assert_eq!(reply.body["miles"].as_f64().unwrap(), metres(km / 1.609344));
    assert_eq!(
        reply.body["from"],
        json!({"zipcode": "90210", "country": "US", "city": "Beverly Hills", "state": "California",
               "ST": "CA", "latitude": 34.0901, "longitude": -118.4065})
    );
    assert_eq!(reply.body["to"]["zipcode"], json!("SW1A"));
    assert_eq!(usd_to_micros(&reply.body["balance"]), 28_000 - 28);
}

#[test]
fn autocomplete_answers_codes_starting_with_q_in_code_order() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.autocomplete(with_key(&key, json!({"q": "9021", "limit": 3})));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(
        reply.body["results"],
        json!([{"zipcode": "90210", "city": "Beverly Hills"}, {"zipcode": "90211", "city": "Beverly Hills"},
               {"zipcode": "90212", "city": "Beverly Hills"}])
    );
    let gb = app.autocomplete(with_key(
        &key,
        json!({"q": "sw1", "country": "GB", "limit": 20}),
    ));
    let found: Vec<&str> = gb.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["zipcode"].as_str().unwrap())
        .collect();
    assert_eq!(found[..3], ["SW1", "SW10", "SW11"]);
    // Code order is byte order of the compact forms: digits before letters.
    let sw19 = found.iter().position(|z| *z == "SW19").unwrap();
    assert_eq!(found[sw19 + 1], "SW1A");
    // JP codes are shown as seven digits; the hyphen of q is ignored.
    let jp = app.autocomplete(with_key(&key, json!({"q": "100-000", "country": "JP"})));
    assert_eq!(
        jp.body["results"][0],
        json!({"zipcode": "1000000", "city": "Chiyoda Ku"})
    );
    let none = app.autocomplete(with_key(&key, json!({"q": "ZZZ"})));
    assert_eq!(
        (none.status, none.body["results"].clone()),
        (200, json!([]))
    );
}

#[test]
fn countries_lists_every_country_with_data_for_free_even_without_balance() {
    let app = spawn_app();
    let (account, key) = account_with(&app, 0);
    let reply = app.countries(json!({"apiKey": key}));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let countries = reply.body["countries"].as_array().unwrap();
    let listed: Vec<&str> = countries
        .iter()
        .map(|c| c["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        [
            "AD", "AR", "BR", "CA", "CZ", "DE", "GB", "GG", "IE", "IM", "JE", "JP", "LV", "MD",
            "MT", "MX", "NL", "PL", "PT", "SE", "SK", "US"
        ]
    );
    assert_eq!(
        countries[0],
        json!({"code": "AD", "name": "Andorra", "records": 7, "codes": 7, "format": "AD###",
               "regex": "^(?:AD)*(\\d{3})$", "example": "AD100", "adminLevels": [1]})
    );
    let us = countries.iter().find(|c| c["code"] == "US").unwrap();
    assert_eq!(us["name"], json!("United States"));
    assert_eq!(us["format"], json!("#####-####"));
    // A few US records carry a municipality (admin 3), e.g. 08831 Monroe Township.
    assert_eq!(us["adminLevels"], json!([1, 2, 3]));
    assert_eq!(reply.body["balance"], json!(0.0));
    assert_eq!(app.balance_micros(&account), 0);
    assert_eq!(
        reply.body["performance"].as_object().unwrap().len(),
        1,
        "totalTime only"
    );
}

#[test]
fn nearest_bulk_answers_each_point_in_order_and_charges_per_point() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let reply = app.nearest_bulk(with_key(
        &key,
        json!({"records": [
            {"latitude": 42.5, "longitude": 1.5, "id": "andorra"},
            {"latitude": 51.7, "longitude": 179.9, "id": 7},
            {"latitude": 51.5018, "longitude": -0.1328}
        ], "limit": 2}),
    ));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let results = reply.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(
        (results[0]["index"].clone(), results[0]["id"].clone()),
        (json!(0), json!("andorra"))
    );
    assert_eq!(results[1]["id"], json!(7));
    assert!(results[2].get("id").is_none());
    assert_eq!(
        codes(&results[0]["results"]),
        pairs(&[("AD", "AD500"), ("AD", "AD600")])
    );
    assert_eq!(
        codes(&results[1]["results"])[0],
        ("US".into(), "96507".into())
    );
    assert_eq!(
        codes(&results[2]["results"])[0],
        ("GB".into(), "SW1A".into())
    );
    assert_eq!(usd_to_micros(&reply.body["totalCost"]), 84);
    assert_eq!(app.balance_micros(&account), 28_000 - 84);
}

#[test]
fn nearest_bulk_is_refused_whole_when_the_balance_cannot_pay_every_point() {
    let app = spawn_app();
    let (account, key) = account_with(&app, 55);
    let two = json!([{"latitude": 0, "longitude": 0}, {"latitude": 1, "longitude": 1}]);
    let reply = app.nearest_bulk(with_key(&key, json!({ "records": two })));
    assert_eq!(
        (reply.status, reply.body),
        (402, error("Insufficient balance for bulk request"))
    );
    assert_eq!(app.balance_micros(&account), 55);
    let one = json!([{"latitude": 0, "longitude": 0}]);
    let reply = app.nearest_bulk(with_key(&key, json!({ "records": one })));
    assert_eq!(reply.status, 200);
    assert_eq!(app.balance_micros(&account), 27);
}

#[test]
fn every_geography_query_answered_costs_28_micro_dollars_and_errors_cost_nothing() {
    let app = spawn_app();
    let cases: Vec<(&str, Value, u16, Value)> = vec![
        (
            "/api/nearest",
            json!({"latitude": 1, "longitude": 1}),
            200,
            Value::Null,
        ),
        (
            "/api/nearest",
            json!({"latitude": 91, "longitude": 1}),
            400,
            error("latitude must be a number from -90 to 90"),
        ),
        (
            "/api/nearest",
            json!({"latitude": 1, "longitude": 181}),
            400,
            error("longitude must be a number from -180 to 180"),
        ),
        (
            "/api/nearest",
            json!({"longitude": 1}),
            400,
            error("Missing required field: latitude"),
        ),
        (
            "/api/nearest",
            json!({"latitude": 1, "longitude": 1, "limit": 101}),
            400,
            error("limit must be an integer from 1 to 100"),
        ),
        (
            "/api/nearest",
            json!({"latitude": 1, "longitude": 1, "maxKm": -1}),
            400,
            error("maxKm must be a number greater than 0"),
        ),
        (
            "/api/nearest",
            json!({"latitude": 1, "longitude": 1, "country": "XX"}),
            400,
            error("Invalid 'country'"),
        ),
        (
            "/api/radius",
            json!({"zipcode": "90210", "radiusKm": 10}),
            200,
            Value::Null,
        ),
        (
            "/api/radius",
            json!({"zipcode": "00000", "radiusKm": 10}),
            404,
            error("ZIP code not found"),
        ),
        (
            "/api/radius",
            json!({"zipcode": "90210", "radiusKm": 501}),
            400,
            error("radiusKm must be a number greater than 0 and at most 500"),
        ),
        (
            "/api/radius",
            json!({"zipcode": "90210"}),
            400,
            error("Missing required field: radiusKm"),
        ),
        (
            "/api/radius",
            json!({"radiusKm": 1}),
            400,
            error("Missing 'zipcode' or 'latitude'/'longitude' in request body"),
        ),
        (
            "/api/radius",
            json!({"zipcode": "90210", "latitude": 1, "longitude": 1, "radiusKm": 1}),
            400,
            error("Send either 'zipcode' or 'latitude'/'longitude', not both"),
        ),
        (
            "/api/distance",
            json!({"from": {"zipcode": "90210"}, "to": {"zipcode": "10001"}}),
            200,
            Value::Null,
        ),
        (
            "/api/distance",
            json!({"from": {"zipcode": "90210"}, "to": {"zipcode": "00000"}}),
            404,
            error("ZIP code not found"),
        ),
        (
            "/api/distance",
            json!({"from": {"zipcode": "90210"}}),
            400,
            error("Missing required field: to"),
        ),
        (
            "/api/distance",
            json!({"from": {"zipcode": "90210", "country": "U"}, "to": {"zipcode": "1"}}),
            400,
            error("Invalid 'from.country'"),
        ),
        ("/api/autocomplete", json!({"q": "902"}), 200, Value::Null),
        ("/api/autocomplete", json!({"q": "ZZZ"}), 200, Value::Null),
        (
            "/api/autocomplete",
            json!({}),
            400,
            error("Missing required field: q"),
        ),
        (
            "/api/autocomplete",
            json!({"q": "90%"}),
            400,
            error("q may contain only letters, digits, spaces and hyphens"),
        ),
        ("/api/countries", json!({}), 200, Value::Null),
        (
            "/api/nearest-bulk",
            json!({"records": [{"latitude": 1, "longitude": 1}]}),
            200,
            Value::Null,
        ),
        (
            "/api/nearest-bulk",
            json!({"records": [{"latitude": 1, "longitude": 1}, {"latitude": "1", "longitude": 1}]}),
            400,
            error("records[1].latitude must be a number from -90 to 90"),
        ),
    ];
    for (path, fields, status, body) in cases {
        let (account, key) = app.create_account();
        let reply = app.post(path, &with_key(&key, fields.clone()));
        assert_eq!(reply.status, status, "{path} {fields} {:?}", reply.body);
        if status == 200 {
            let cost = if path == "/api/countries" { 0 } else { 28 };
            assert_eq!(
                app.balance_micros(&account),
                28_000 - cost,
                "{path} {fields}"
            );
        } else {
            assert_eq!(reply.body, body, "{path} {fields}");
            assert_eq!(app.balance_micros(&account), 28_000, "{path} {fields}");
        }
    }
}

#[test]
fn an_optional_field_sent_as_null_answers_its_400_and_a_required_one_is_missing() {
    let app = spawn_app();
    let key = app.api_key();
    let point = |extra: Value| {
        let mut body = json!({"latitude": 1, "longitude": 1});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "/api/nearest",
            point(json!({"country": null})),
            "Invalid 'country'",
        ),
        (
            "/api/nearest",
            point(json!({"limit": null})),
            "limit must be an integer from 1 to 100",
        ),
        (
            "/api/nearest",
            point(json!({"maxKm": null})),
            "maxKm must be a number greater than 0",
        ),
        (
            "/api/nearest",
            json!({"latitude": null, "longitude": 1}),
            "Missing required field: latitude",
        ),
        (
            "/api/radius",
            json!({"zipcode": "90210", "country": null, "radiusKm": 1}),
            "Invalid 'country'",
        ),
        (
            "/api/radius",
            json!({"zipcode": "90210", "latitude": null, "radiusKm": 1}),
            "Send either 'zipcode' or 'latitude'/'longitude', not both",
        ),
        (
            "/api/radius",
            json!({"zipcode": null, "radiusKm": 1}),
            "Missing required field: zipcode",
        ),
        (
            "/api/radius",
            json!({"latitude": 1, "longitude": null, "radiusKm": 1}),
            "Missing required field: longitude",
        ),
        (
            "/api/radius",
            json!({"latitude": 1, "longitude": 1, "country": null, "radiusKm": 1}),
            "Invalid 'country'",
        ),
        (
            "/api/distance",
            json!({"from": {"zipcode": "90210"}, "to": {"zipcode": "10001", "country": null}}),
            "Invalid 'to.country'",
        ),
        (
            "/api/autocomplete",
            json!({"q": "902", "country": null}),
            "Invalid 'country'",
        ),
        (
            "/api/autocomplete",
            json!({"q": "902", "limit": null}),
            "limit must be an integer from 1 to 100",
        ),
        (
            "/api/nearest-bulk",
            json!({"records": [{"latitude": 1, "longitude": 1, "id": null}]}),
            "records[0].id must be a string or an integer from -9007199254740991 to 9007199254740991",
        ),
        (
            "/api/nearest-bulk",
            json!({"records": [{"latitude": 1, "longitude": 1}], "maxKm": null}),
            "maxKm must be a number greater than 0",
        ),
    ];
    for (path, fields, text) in cases {
        let reply = app.post(path, &with_key(&key, fields.clone()));
        assert_eq!(reply.status, 400, "{path} {fields} {:?}", reply.body);
        assert_eq!(reply.body, error(text), "{path} {fields}");
    }
}

#[test]
fn autocomplete_q_may_be_wrapped_in_any_white_space_the_schema_names() {
    let app = spawn_app();
    let key = app.api_key();
    for q in ["\u{3000}9021\u{a0}", "\t- 9021 -\n"] {
        let reply = app.autocomplete(with_key(&key, json!({"q": q, "limit": 1})));
        assert_eq!(reply.status, 200, "{q:?} {:?}", reply.body);
        assert_eq!(reply.body["results"][0]["zipcode"], "90210", "{q:?}");
    }
    // U+001C is white space to Python's `\s`, not to Unicode (nor to the schema).
    let reply = app.autocomplete(with_key(&key, json!({"q": "902\u{1c}"})));
    assert_eq!(
        reply.body,
        error("q may contain only letters, digits, spaces and hyphens")
    );
}

#[test]
fn checks_run_in_the_contracts_order_key_then_parameters_then_balance_then_work() {
    let app = spawn_app();
    let (_, key) = account_with(&app, 0);
    for path in [
        "/api/nearest",
        "/api/radius",
        "/api/distance",
        "/api/autocomplete",
        "/api/countries",
        "/api/nearest-bulk",
    ] {
        let missing = app.post(path, &json!({"latitude": 1000}));
        assert_eq!(
            (missing.status, missing.body),
            (400, error("Missing required field: apiKey")),
            "{path}"
        );
        let unknown = app.post(path, &json!({"apiKey": "pk_unknown", "latitude": 1000}));
        assert_eq!(
            (unknown.status, unknown.body),
            (401, error("Invalid API key")),
            "{path}"
        );
    }
    // A bad parameter answers 400 before the empty balance answers 402 ...
    let reply = app.nearest(with_key(&key, json!({"latitude": 1000, "longitude": 0})));
    assert_eq!(reply.status, 400);
    // ... and the empty balance 402 before an unknown code 404.
    let reply = app.radius(with_key(&key, json!({"zipcode": "00000", "radiusKm": 1})));
    assert_eq!(
        (reply.status, reply.body),
        (402, error("Insufficient balance"))
    );
    let reply = app.distance(with_key(
        &key,
        json!({"from": {"zipcode": "00000"}, "to": {"zipcode": "00000"}}),
    ));
    assert_eq!(
        (reply.status, reply.body),
        (402, error("Insufficient balance"))
    );
    for path in ["/api/nearest", "/api/autocomplete"] {
        let reply = app.post(
            path,
            &with_key(&key, json!({"latitude": 1, "longitude": 1, "q": "1"})),
        );
        assert_eq!(
            (reply.status, reply.body),
            (402, error("Insufficient balance")),
            "{path}"
        );
    }
    let reply = app.countries(json!({"apiKey": key}));
    assert_eq!(reply.status, 200);
}

#[test]
fn rate_limits_refuse_geography_queries_with_the_contracts_429() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    app.cli(&["account", "limits", &account, "--per-minute", "2"]);
    let point = json!({"latitude": 1, "longitude": 1});
    assert_eq!(app.nearest(with_key(&key, point.clone())).status, 200);
    let bulk = app.nearest_bulk(with_key(
        &key,
        json!({"records": [point.clone(), point.clone()]}),
    ));
    assert_eq!(bulk.status, 429);
    assert_eq!(
        bulk.body["error"],
        json!("Rate limit would be exceeded by this bulk request")
    );
    assert_eq!(app.nearest(with_key(&key, point.clone())).status, 200);
    let third = app.nearest(with_key(&key, point));
    assert_eq!(
        (third.status, third.body["error"].clone()),
        (429, json!("Rate limit exceeded"))
    );
    assert_eq!(
        app.countries(json!({"apiKey": key})).status,
        200,
        "countries is never limited"
    );
    assert_eq!(app.balance_micros(&account), 28_000 - 56);
}
