//! gzip of answers over 1 KiB (docs/http.md, "Compression"), read off the wire: what
//! a client that accepts gzip gets decodes to what one that does not gets.

use serde_json::{Value, json};

use crate::helpers::{TestApp, Wire, spawn_app, usd_to_micros};

/// A validate-bulk body of `n` records (valid, not found and malformed codes).
fn validate_bulk_body(key: &str, n: usize) -> Value {
    let codes = [
        ("90210", "US"),
        ("10001", "US"),
        ("99999", "US"),
        ("ABCDE", "US"),
        ("SW1A 1AA", "GB"),
        ("10115", "DE"),
        ("K1A 0B1", "CA"),
    ];
    let records: Vec<Value> = (0..n)
        .map(|i| {
            let (code, country) = codes[i % codes.len()];
            json!({"postalCode": code, "countryCode": country})
        })
        .collect();
    json!({"apiKey": key, "records": records})
}

/// A nearest-bulk body of 40 points, 5 codes each.
fn nearest_bulk_body(key: &str) -> Value {
    let records: Vec<Value> = (0..40)
        .map(|i| json!({"latitude": 34.0 + f64::from(i) * 0.1, "longitude": -118.4, "id": i}))
        .collect();
    json!({"apiKey": key, "records": records, "limit": 5})
}

fn post(app: &TestApp, path: &str, body: &Value, headers: &[(&str, &str)]) -> Wire {
    let answer = app.post_wire(path, body.to_string().as_bytes(), headers);
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.decoded())
    );
    answer
}

/// `answer`'s JSON with the fields that change from one request to the next (its
/// timings, its balance) made those of `like`; the balances must differ by `totalCost`.
fn as_if_answered_with(mut answer: Value, like: &Value) -> Value {
    let cost = usd_to_micros(&answer["totalCost"]);
    assert_eq!(
        usd_to_micros(&answer["balance"]),
        usd_to_micros(&like["balance"]) - cost,
        "the second answer is charged once more"
    );
    answer["balance"] = like["balance"].clone();
    answer["performance"] = like["performance"].clone();
    answer
}

#[test]
fn a_gzipped_validate_bulk_answer_decodes_to_the_json_of_the_plain_answer() {
    let app = spawn_app();
    let key = app.api_key();
    let body = validate_bulk_body(&key, 300);
    let plain = post(&app, "/api/validate-bulk", &body, &[]);
    let gzipped = post(
        &app,
        "/api/validate-bulk",
        &body,
        &[("Accept-Encoding", "gzip")],
    );
    assert_eq!(plain.header("content-encoding"), None);
    assert_eq!(gzipped.header("content-encoding"), Some("gzip"));
    assert_eq!(
        gzipped.header("content-length"),
        Some(gzipped.body.len().to_string().as_str())
    );
    assert!(
        gzipped.body.len() * 5 < plain.body.len(),
        "{} bytes gzipped, {} plain",
        gzipped.body.len(),
        plain.body.len()
    );
    assert_eq!(gzipped.header("content-type"), plain.header("content-type"));
    let (plain, gzipped) = (plain.json(), gzipped.json());
    assert_eq!(plain["results"].as_array().map(Vec::len), Some(300));
    assert_eq!(as_if_answered_with(gzipped, &plain), plain);
}

#[test]
fn a_gzipped_nearest_bulk_answer_decodes_to_the_json_of_the_plain_answer() {
    let app = spawn_app();
    let key = app.api_key();
    let body = nearest_bulk_body(&key);
    let accepted = [("Accept-Encoding", "br;q=1.0, gzip;q=0.8, *;q=0.1")];
    let plain = post(&app, "/api/nearest-bulk", &body, &[]);
    let gzipped = post(&app, "/api/nearest-bulk", &body, &accepted);
    assert_eq!(gzipped.header("content-encoding"), Some("gzip"));
    assert!(gzipped.body.len() * 4 < plain.body.len());
    let (plain, gzipped) = (plain.json(), gzipped.json());
    assert_eq!(
        plain["results"][39]["results"].as_array().map(Vec::len),
        Some(5)
    );
    assert_eq!(as_if_answered_with(gzipped, &plain), plain);
}

#[test]
fn every_answer_that_could_be_compressed_varies_on_accept_encoding() {
    let app = spawn_app();
    let key = app.api_key();
    let body = validate_bulk_body(&key, 50);
    for headers in [&[][..], &[("Accept-Encoding", "gzip")]] {
        let answer = post(&app, "/api/validate-bulk", &body, headers);
        assert_eq!(answer.all("vary"), ["Accept-Encoding"], "{headers:?}");
    }
}

#[test]
fn a_small_answer_is_not_compressed_even_when_gzip_is_accepted() {
    let app = spawn_app();
    let key = app.api_key();
    let lookup = json!({"apiKey": key, "zipcode": "90210"});
    let answer = post(&app, "/api/lookup", &lookup, &[("Accept-Encoding", "gzip")]);
    assert!(answer.body.len() <= 1024, "{}", answer.body.len());
    assert_eq!(answer.header("content-encoding"), None);
    assert_eq!(answer.header("vary"), None);
    assert_eq!(answer.json()["city"], "Beverly Hills");
}

#[test]
fn without_accept_encoding_or_with_gzip_weighted_zero_the_answer_is_identity() {
    let app = spawn_app();
    let key = app.api_key();
    let body = validate_bulk_body(&key, 100);
    for headers in [
        &[][..],
        &[("Accept-Encoding", "identity")],
        &[("Accept-Encoding", "gzip;q=0")],
        &[("Accept-Encoding", "gzip;q=0, *")],
        &[("Accept-Encoding", "br, *;q=0")],
    ] {
        let answer = post(&app, "/api/validate-bulk", &body, headers);
        assert_eq!(answer.header("content-encoding"), None, "{headers:?}");
        let json: Value = serde_json::from_slice(&answer.body).expect("plain JSON");
        assert_eq!(json["results"].as_array().map(Vec::len), Some(100));
    }
}

#[test]
fn errors_and_the_document_leave_through_the_same_compression() {
    let app = spawn_app();
    // An error body is small: identity.
    let refused = app.post_wire(
        "/api/validate-bulk",
        br#"{"apiKey": "sk_nope", "records": []}"#,
        &[("Accept-Encoding", "gzip")],
    );
    assert_eq!(refused.status, 401);
    assert_eq!(refused.header("content-encoding"), None);
    // The OpenAPI document (a GET of the same server) is compressed like any answer.
    let address = app.address.trim_start_matches("http://").to_string();
    let document = crate::helpers::raw_bytes(
        &address,
        format!(
            "GET /openapi.json HTTP/1.1\r\nHost: {address}\r\nAccept-Encoding: gzip\r\n\
             Connection: close\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_eq!(document.status, 200);
    assert_eq!(document.header("content-encoding"), Some("gzip"));
    assert_eq!(document.json()["info"]["title"], postal::api::TITLE);
}
