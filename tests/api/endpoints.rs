//! Each endpoint's 200 shape, for a US and a non-US code.

use serde_json::json;

use crate::helpers::{code, spawn_app};

#[test]
fn lookup_answers_a_us_code_with_city_state_and_coordinates() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.lookup(code(&key, json!("90210"), None));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let body = &reply.body;
    assert_eq!(body["city"], "Beverly Hills");
    assert_eq!(body["state"], "California");
    assert_eq!(body["ST"], "CA");
    assert_eq!(body["latitude"], 34.0901);
    assert_eq!(body["longitude"], -118.4065);
    assert_eq!(body["balance"], 0.027972);
    for step in [
        "authTime",
        "rateLimitCheckTime",
        "balanceTime",
        "processingTime",
        "totalTime",
    ] {
        let text = body["performance"][step]
            .as_str()
            .unwrap_or_else(|| panic!("performance.{step}"));
        let number = text.strip_suffix("ms").expect("ends in ms");
        assert!(number.parse::<f64>().is_ok(), "{step}: {text}");
    }
    assert_eq!(
        body["rateLimit"],
        json!({
            "enabled": false,
            "perMinute": {"limit": null, "current": null, "approachingLimit": false},
            "perHour": {"limit": null, "current": null, "approachingLimit": false},
            "perDay": {"limit": null, "current": null, "approachingLimit": false},
        })
    );
    assert_eq!(
        reply.content_type.as_deref(),
        Some("application/json; charset=utf-8")
    );
}

#[test]
fn lookup_of_a_non_us_code_leaves_state_and_st_empty() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.lookup(code(&key, json!("01067"), Some("de")));
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.body["city"], "Dresden Innere Altstadt",
        "first record in source order"
    );
    assert_eq!(reply.body["state"], "");
    assert_eq!(reply.body["ST"], "");
    assert_eq!(reply.body["latitude"], 51.0507);
    assert_eq!(reply.body["longitude"], 13.7366);
}

#[test]
fn metacode_answers_the_us_shape_for_us_codes() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.metacode(code(&key, json!("90210"), Some("US")));
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.body["meta"],
        json!({
            "zipcode": "90210",
            "city": "Beverly Hills",
            "state": "California",
            "stateAbbrev": "CA",
            "county": "Los Angeles",
            "latitude": 34.0901,
            "longitude": -118.4065,
            "timezone": "America/Los_Angeles",
        })
    );
    assert_eq!(reply.body["balance"], 0.027972);
}

#[test]
fn metacode_answers_the_geonames_shape_without_empty_fields_elsewhere() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.metacode(code(&key, json!("100-0001"), Some("JP")));
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.body["meta"],
        json!({
            "postalCode": "1000001",
            "country": "JP",
            "placeName": "Chiyoda",
            "latitude": 35.6841,
            "longitude": 139.7521,
            "timezone": "Asia/Tokyo",
            "admin_name1": "Tokyo To",
            "admin_code1": "40",
            "admin_name2": "Chiyoda Ku",
        })
    );
}

#[test]
fn metazip_is_the_same_as_metacode() {
    let app = spawn_app();
    let key = app.api_key();
    let meta = app.metacode(code(&key, json!("VLT 1117"), Some("MT")));
    let zip = app.metazip(code(&key, json!("VLT 1117"), Some("MT")));
    assert_eq!((meta.status, zip.status), (200, 200));
    assert_eq!(meta.body["meta"], zip.body["meta"]);
    assert_eq!(zip.body["meta"]["placeName"], "Valletta");
    assert_eq!(zip.body["meta"]["admin_name1"], "Il-Belt Valletta");
    assert_eq!(zip.body["balance"], 0.027944);
}

#[test]
fn validate_answers_true_or_false_and_echoes_the_code() {
    let app = spawn_app();
    let key = app.api_key();
    let found = app.validate(code(&key, json!("SW1A 1AA"), Some("GB")));
    assert_eq!(found.status, 200);
    assert_eq!(found.body["valid"], true);
    assert_eq!(found.body["zipcode"], "SW1A 1AA");
    assert!(found.body["responseTime"].as_str().unwrap().ends_with("ms"));
    let unknown = app.validate(code(&key, json!(99999), None));
    assert_eq!(unknown.status, 200);
    assert_eq!(unknown.body["valid"], false);
    assert_eq!(
        unknown.body["zipcode"], 99999,
        "an integer is echoed as an integer"
    );
    assert_eq!(
        unknown.body["balance"], 0.027944,
        "an unknown code is still billed"
    );
}

#[test]
fn city_answers_the_codes_of_a_us_city_in_ascending_order() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.city(json!({"apiKey": key, "city": "beverly hills", "ST": "ca"}));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(
        reply.body["zipcodes"],
        json!(["90209", "90210", "90211", "90212", "90213"])
    );
    assert!(reply.body.get("matchedCity").is_none());
    assert_eq!(reply.body["balance"], 0.027972);
}

#[test]
fn city_answers_a_non_us_city_without_a_state() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.city(json!({"apiKey": key, "city": "Valletta", "country": "MT"}));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["zipcodes"], json!(["VLT"]));
}

#[test]
fn validate_bulk_answers_each_record_in_request_order() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.validate_bulk(json!({"apiKey": key, "records": [
        {"postalCode": "90210", "countryCode": " us"},
        {"postalCode": "SW1A 1AA", "countryCode": "GB"},
        {"postalCode": "99999", "countryCode": "US"},
        {"postalCode": "ABCDE", "countryCode": "US"},
        {"postalCode": "1234", "countryCode": "FR"},
        {"postalCode": "K1A 0B1", "countryCode": "CA"},
    ]}));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(
        reply.body["results"],
        json!([
            {"postalCode": "90210", "countryCode": " US", "valid": true, "normalized": "90210", "reason": null},
            {"postalCode": "SW1A 1AA", "countryCode": "GB", "valid": true, "normalized": "SW1A", "reason": null},
            {"postalCode": "99999", "countryCode": "US", "valid": false, "normalized": null, "reason": "not_found"},
            {"postalCode": "ABCDE", "countryCode": "US", "valid": false, "normalized": null, "reason": "invalid_format"},
            {"postalCode": "1234", "countryCode": "FR", "valid": false, "normalized": null, "reason": "unknown_country"},
            {"postalCode": "K1A 0B1", "countryCode": "CA", "valid": true, "normalized": "K1A", "reason": null},
        ])
    );
    assert_eq!(reply.body["totalCost"], 0.000168);
    assert_eq!(reply.body["balance"], 0.027832);
    assert_eq!(reply.body["rateLimit"]["enabled"], false);
    assert!(
        reply.body["rateLimit"]["perDay"].is_object(),
        "full rateLimit shape"
    );
}

#[test]
fn aboutapi_tells_version_and_coverage_for_free() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.aboutapi(json!({"apiKey": key}));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        reply.body["coverage"],
        "248,724 postal codes in 22 countries. Data: GeoNames (CC BY 4.0)"
    );
    assert!(reply.body["About"].as_str().unwrap().contains("postal"));
    assert!(reply.body["usage"].as_str().unwrap().contains("apiKey"));
    assert_eq!(reply.body["balance"], 0.028, "free");
    assert!(reply.body["performance"]["totalTime"].is_string());
}

#[test]
fn metacode_of_a_rich_schema_country_adds_its_admin_levels() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.metacode(code(&key, json!("20000"), Some("MX")));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(
        reply.body["meta"],
        json!({
            "postalCode": "20000",
            "country": "MX",
            "placeName": "Zona Centro",
            "latitude": 21.8734,
            "longitude": -102.2806,
            "timezone": "America/Mexico_City",
            "admin_name1": "Aguascalientes",
            "admin_code1": "01",
            "admin_name2": "Aguascalientes",
            "admin_name3": "Aguascalientes",
            "accuracy": 1,
            "adminLevel1": "Aguascalientes",
            "adminLevel2": "Aguascalientes",
            "municipality": "Aguascalientes",
            "city": "Aguascalientes",
        })
    );
}

#[test]
fn every_billed_endpoint_carries_the_whole_envelope() {
    let app = spawn_app();
    let key = app.api_key();
    let replies = [
        app.city(json!({"apiKey": key, "city": "Boston", "ST": "MA"})),
        app.metacode(code(&key, json!("90210"), None)),
        app.validate(code(&key, json!("90210"), None)),
    ];
    for reply in replies {
        assert_eq!(reply.status, 200);
        for step in [
            "authTime",
            "rateLimitCheckTime",
            "balanceTime",
            "processingTime",
            "totalTime",
        ] {
            assert!(
                reply.body["performance"][step]
                    .as_str()
                    .unwrap()
                    .ends_with("ms"),
                "{step}"
            );
        }
        assert_eq!(
            reply.body["rateLimit"]["perMinute"],
            json!({"limit": null, "current": null, "approachingLimit": false})
        );
        assert!(reply.body["balance"].is_number());
    }
}

#[test]
fn a_full_code_stored_as_such_is_found_before_its_short_form() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.lookup(code(&key, json!("T3T 0E5"), Some("CA")));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["city"], "Tsuut'ina");
    let reply = app.lookup(code(&key, json!("V3Y 0H3"), Some("CA")));
    assert_eq!(
        reply.status, 200,
        "an unknown full code falls back to its FSA"
    );
    assert_eq!(reply.body["city"], "Pitt Meadows");
}

#[test]
fn a_country_without_data_is_valid_false_and_city_404() {
    let app = spawn_app();
    let key = app.api_key();
    let reply = app.validate(code(&key, json!("75001"), Some("FR")));
    assert_eq!((reply.status, &reply.body["valid"]), (200, &json!(false)));
    let reply = app.city(json!({"apiKey": key, "city": "Paris", "country": "FR"}));
    assert_eq!(reply.status, 404);
}

#[test]
fn a_dataset_imported_while_the_server_runs_answers_within_seconds() {
    let app = spawn_app();
    let key = app.api_key();
    assert_eq!(app.lookup(code(&key, json!("90210"), None)).status, 200);
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_postal-import"))
        .arg("--db")
        .arg(&app.db)
        .arg("--country-info")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../shared/geonames/countryInfo.txt"
        ))
        // PL replaces every country of the sample: a shrink, allowed.
        .arg("--allow-shrink")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/PL.txt"
        ))
        .output()
        .expect("running postal-import");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let started = std::time::Instant::now();
    loop {
        let reply = app.lookup(code(&key, json!("90210"), None));
        if reply.status == 404 {
            break; // the new dataset (PL only) answers
        }
        assert_eq!(reply.status, 200, "{:?}", reply.body);
        assert!(
            started.elapsed().as_secs() < 30,
            "the new dataset never arrived"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let reply = app.metacode(code(&key, json!("00-002"), Some("PL")));
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.body["meta"]["placeName"], "Warszawa");
}
