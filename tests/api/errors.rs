//! Every row of the error tables of postal-api.md 7.2 and decisions.md: status and exact text.

use serde_json::{Value, json};

use crate::helpers::{code, error, spawn_app};

const SINGLE: [&str; 4] = [
    "/api/lookup",
    "/api/metacode",
    "/api/metazip",
    "/api/validate",
];

fn assert_error(reply: crate::helpers::Reply, status: u16, text: &str) {
    assert_eq!((reply.status, &reply.body), (status, &error(text)));
    assert_eq!(
        reply.content_type.as_deref(),
        Some("application/json; charset=utf-8")
    );
}

#[test]
fn a_missing_api_key_is_a_400_on_every_billed_endpoint() {
    let app = spawn_app();
    for path in SINGLE {
        assert_error(
            app.post(path, &json!({"zipcode": "90210"})),
            400,
            "Missing required field: apiKey",
        );
    }
    assert_error(
        app.post("/api/city", &json!({"city": "Boston", "ST": "MA"})),
        400,
        "Missing required field: apiKey",
    );
    assert_error(
        app.post("/api/validate-bulk", &json!({"records": []})),
        400,
        "Missing required field: apiKey",
    );
    assert_error(app.aboutapi(json!({})), 400, "Missing or invalid 'apiKey'");
}

#[test]
fn an_api_key_that_is_not_a_non_empty_string_counts_as_missing() {
    let app = spawn_app();
    for bad in [
        json!(null),
        json!(""),
        json!(42),
        json!(["k"]),
        json!({"k": 1}),
    ] {
        assert_error(
            app.lookup(json!({"apiKey": bad, "zipcode": "90210"})),
            400,
            "Missing required field: apiKey",
        );
        assert_error(
            app.aboutapi(json!({"apiKey": bad})),
            400,
            "Missing or invalid 'apiKey'",
        );
    }
}

#[test]
fn an_unknown_key_is_a_401_everywhere_even_before_other_fields() {
    let app = spawn_app();
    let paths = SINGLE
        .iter()
        .chain(&["/api/city", "/api/validate-bulk", "/api/aboutapi"]);
    for path in paths {
        // The key is checked before any other parameter (decisions.md, order of checks).
        assert_error(
            app.post(path, &json!({"apiKey": "pk_nope"})),
            401,
            "Invalid API key",
        );
    }
}

#[test]
fn a_missing_or_unusable_zipcode_is_a_400() {
    let app = spawn_app();
    let key = app.api_key();
    for bad in [
        Value::Null,
        json!(""),
        json!("   "),
        json!(true),
        json!(1.5),
        json!([]),
        json!({}),
        json!(-5),
    ] {
        for path in SINGLE {
            let mut body = json!({"apiKey": key});
            if !bad.is_null() {
                body["zipcode"] = bad.clone();
            }
            assert_error(
                app.post(path, &body),
                400,
                "Missing required field: zipcode",
            );
        }
    }
}

#[test]
fn a_country_outside_the_iso_list_is_a_400() {
    let app = spawn_app();
    let key = app.api_key();
    for bad in [json!("XX"), json!("USA"), json!(""), json!(1), json!(true)] {
        for path in SINGLE {
            let mut body = code(&key, json!("90210"), None);
            body["country"] = bad.clone();
            assert_error(app.post(path, &body), 400, "Invalid 'country'");
        }
        assert_error(
            app.city(json!({"apiKey": key, "city": "Boston", "ST": "MA", "country": bad})),
            400,
            "Invalid 'country'",
        );
    }
}

#[test]
fn unknown_codes_and_countries_without_data_are_404_on_lookup_and_metacode() {
    let app = spawn_app();
    let key = app.api_key();
    for path in ["/api/lookup", "/api/metacode", "/api/metazip"] {
        assert_error(
            app.post(path, &code(&key, json!("00000"), None)),
            404,
            "ZIP code not found",
        );
        assert_error(
            app.post(path, &code(&key, json!("75001"), Some("FR"))),
            404,
            "ZIP code not found",
        );
        assert_error(
            app.post(path, &code(&key, json!("902!0"), None)),
            404,
            "ZIP code not found",
        );
    }
}

#[test]
fn city_errors_have_the_contract_texts() {
    let app = spawn_app();
    let key = app.api_key();
    for bad in [json!(null), json!(""), json!(7)] {
        assert_error(
            app.city(json!({"apiKey": key, "city": bad, "ST": "MA"})),
            400,
            "Missing required field: city",
        );
    }
    assert_error(
        app.city(json!({"apiKey": key, "ST": "MA"})),
        400,
        "Missing required field: city",
    );
    assert_error(
        app.city(json!({"apiKey": key, "city": "Boston"})),
        400,
        "Missing 'state' or 'ST' in request body",
    );
    assert_error(
        app.city(json!({"apiKey": key, "city": "Qwxzvbnm", "ST": "MA"})),
        404,
        "No ZIP codes found for the given city/state",
    );
}

#[test]
fn a_state_or_st_of_another_type_than_string_is_a_400_naming_the_field() {
    let app = spawn_app();
    let key = app.api_key();
    for bad in [json!(true), json!([]), json!({}), json!(5), json!(null)] {
        assert_error(
            app.city(json!({"apiKey": key, "city": "Boston", "state": bad, "ST": "MA"})),
            400,
            "Invalid 'state'",
        );
        assert_error(
            app.city(json!({"apiKey": key, "city": "Boston", "state": "Massachusetts", "ST": bad})),
            400,
            "Invalid 'ST'",
        );
    }
}

#[test]
fn a_null_country_is_not_a_code_and_is_a_400() {
    let app = spawn_app();
    let key = app.api_key();
    for path in SINGLE {
        assert_error(
            app.post(
                path,
                &json!({"apiKey": key, "zipcode": "90210", "country": null}),
            ),
            400,
            "Invalid 'country'",
        );
    }
    assert_error(
        app.city(json!({"apiKey": key, "city": "Boston", "ST": "MA", "country": null})),
        400,
        "Invalid 'country'",
    );
    // Absent still means US.
    let reply = app.lookup(json!({"apiKey": key, "zipcode": "90210"}));
    assert_eq!(reply.status, 200, "{reply:?}");
}

#[test]
fn bulk_request_errors_have_the_contract_texts() {
    let app = spawn_app();
    let key = app.api_key();
    let bulk = |records: Value| app.validate_bulk(json!({"apiKey": key, "records": records}));
    let missing = "Missing required field: records (must be an array)";
    assert_error(app.validate_bulk(json!({"apiKey": key})), 400, missing);
    assert_error(bulk(json!("90210")), 400, missing);
    assert_error(bulk(json!({"postalCode": "90210"})), 400, missing);
    assert_error(
        bulk(json!([])),
        400,
        "records array must contain at least 1 record",
    );
    let many: Vec<Value> = (0..1001)
        .map(|_| json!({"postalCode": "90210", "countryCode": "US"}))
        .collect();
    assert_error(
        bulk(json!(many)),
        400,
        "records array exceeds maximum of 1000 per request",
    );
    let good = json!({"postalCode": "90210", "countryCode": "US"});
    for bad_code in [json!(null), json!(""), json!("  "), json!(90210)] {
        assert_error(
            bulk(json!([good, {"postalCode": bad_code, "countryCode": "US"}])),
            400,
            "records[1].postalCode must be a non-empty string",
        );
    }
    for bad_country in [json!(null), json!("USA"), json!("XX"), json!(1)] {
        assert_error(
            bulk(json!([good, good, {"postalCode": "1", "countryCode": bad_country}])),
            400,
            "records[2].countryCode must be a 2-letter ISO 3166-1 alpha-2 code",
        );
    }
    // The lowest failing index wins; within a record postalCode comes first.
    assert_error(
        bulk(json!([good, {"countryCode": "XX"}, {"postalCode": ""}])),
        400,
        "records[1].postalCode must be a non-empty string",
    );
    assert_error(
        bulk(json!(["90210"])),
        400,
        "records[0].postalCode must be a non-empty string",
    );
}

#[test]
fn a_body_that_is_not_a_json_object_is_a_400() {
    let app = spawn_app();
    for path in SINGLE
        .iter()
        .chain(&["/api/city", "/api/validate-bulk", "/api/aboutapi"])
    {
        for body in [
            &b"{\"apiKey\": "[..],
            b"",
            b"[1,2]",
            b"\"text\"",
            b"null",
            b"\xff\xfe",
        ] {
            assert_error(
                app.post_raw(path, body, Some("application/json")),
                400,
                "Invalid JSON body",
            );
        }
    }
}

#[test]
fn the_body_is_read_as_json_whatever_the_content_type() {
    let app = spawn_app();
    let key = app.api_key();
    let body = code(&key, json!("90210"), None).to_string();
    for content_type in [
        None,
        Some("application/x-www-form-urlencoded"),
        Some("text/plain"),
    ] {
        let reply = app.post_raw("/api/lookup", body.as_bytes(), content_type);
        assert_eq!(reply.status, 200, "{content_type:?}: {:?}", reply.body);
    }
}

#[test]
fn a_body_over_one_mebibyte_is_a_413() {
    let app = spawn_app();
    let key = app.api_key();
    let padding = "x".repeat(1 << 20);
    let body = json!({"apiKey": key, "zipcode": "90210", "padding": padding}).to_string();
    assert_error(
        app.post_raw("/api/lookup", body.as_bytes(), Some("application/json")),
        413,
        "Request body too large",
    );
}

/// The 413 comes before the body is read; a client still sending it must get the answer,
/// not a reset (the server drains what it sends before closing: a lingering close).
#[test]
fn a_client_still_sending_a_body_over_one_mebibyte_gets_its_413() {
    let app = spawn_app();
    let key = app.api_key();
    for size in [2 << 20, 8 << 20, 2 << 20, 8 << 20, 2 << 20, 8 << 20] {
        let padding = "x".repeat(size);
        let body = json!({"apiKey": key, "zipcode": "90210", "padding": padding}).to_string();
        assert_error(
            app.post_raw("/api/lookup", body.as_bytes(), Some("application/json")),
            413,
            "Request body too large",
        );
    }
}

#[test]
fn unknown_paths_are_404_and_other_methods_405() {
    let app = spawn_app();
    assert_error(app.post("/api/nothing", &json!({})), 404, "Not found");
    assert_error(app.get("/nowhere"), 404, "Not found");
    let reply = app.get("/api/metacode");
    assert_eq!(
        (reply.status, reply.body),
        (405, error("Method not allowed"))
    );
}

#[test]
fn unknown_request_fields_are_ignored() {
    let app = spawn_app();
    let key = app.api_key();
    let mut body = code(&key, json!("90210"), None);
    body["extra"] = json!({"anything": [1, 2]});
    assert_eq!(app.lookup(body).status, 200);
}

#[test]
fn odd_unicode_in_fields_is_a_clean_answer_never_a_500() {
    let app = spawn_app();
    let key = app.api_key();
    for zipcode in ["\u{0}", "９０２１０", "💥", "\u{202e}01290", "a\u{301}"] {
        let reply = app.lookup(code(&key, json!(zipcode), None));
        assert_eq!(reply.status, 404, "{zipcode:?}: {:?}", reply.body);
    }
    let reply = app.city(json!({"apiKey": key, "city": "\u{0}💥", "ST": "\u{202e}"}));
    assert_eq!(reply.status, 404);
}

#[test]
fn free_text_longer_than_200_characters_is_a_400_naming_the_limit_and_charges_nothing() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let before = app.balance_micros(&account);
    // 200 characters pass (the longest place names are under 170); 201 do not, counted in
    // characters, not bytes.
    let at_limit = "ü".repeat(200);
    let over = "ü".repeat(201);
    let city = |city: &str| json!({"apiKey": key, "city": city, "state": "CA"});
    assert_eq!(app.post("/api/city", &city(&at_limit)).status, 404);
    assert_error(
        app.post("/api/city", &city(&over)),
        400,
        "city must be at most 200 characters",
    );
    assert_error(
        app.post(
            "/api/city",
            &json!({"apiKey": key, "city": "Beverly Hills", "ST": over}),
        ),
        400,
        "ST must be at most 200 characters",
    );
    let verify = json!({"apiKey": key, "zipcode": "90210", "city": "Beverly Hills", "state": over});
    assert_error(
        app.post("/api/verify", &verify),
        400,
        "state must be at most 200 characters",
    );
    assert_error(
        app.post(
            "/api/suggest",
            &json!({"apiKey": key, "q": "bev", "state": over}),
        ),
        400,
        "state must be at most 200 characters",
    );
    let good = json!({"postalCode": "90210", "countryCode": "US", "city": "Beverly Hills"});
    let long = json!({"postalCode": "90210", "countryCode": "US", "city": over});
    assert_error(
        app.post(
            "/api/verify-bulk",
            &json!({"apiKey": key, "records": [good, long]}),
        ),
        400,
        "records[1].city must be at most 200 characters",
    );
    // Nothing was charged: not the 400s, nor the 404 (an error is free).
    assert_eq!(app.balance_micros(&account), before);
}
