//! The hot path (`POST /api/lookup` answered before poem's routing) answers exactly what
//! poem's route answers: two servers on copies of the same database, one of them with
//! `without_hot_path`, get the same requests in the same order; status, headers and body
//! must be equal but for the request id, the date and the timings.

use serde_json::{Value, json};

use crate::helpers::*;

/// A request: body bytes and extra headers.
struct Sent {
    body: Vec<u8>,
    headers: Vec<(&'static str, String)>,
}

fn sent(body: &str, headers: &[(&'static str, &str)]) -> Sent {
    Sent {
        body: body.as_bytes().to_vec(),
        headers: headers.iter().map(|(n, v)| (*n, v.to_string())).collect(),
    }
}

/// What may differ between two answers to the same request: the request id (new per
/// request), the date, and the time it took.
fn comparable(raw: &Raw) -> (u16, Vec<(String, String)>, Value) {
    let mut headers: Vec<(String, String)> = raw
        .headers
        .iter()
        .filter(|(name, _)| *name != "date")
        .map(|(name, value)| {
            let value = if *name == "x-request-id" {
                "(id)".to_string()
            } else if *name == "access-control-allow-origin"
                && value.as_bytes().starts_with(b"http://127.0.0.1:")
            {
                "(the server's own origin)".to_string()
            } else {
                value.to_str().unwrap_or("(binary)").to_string()
            };
            (name.to_string(), value)
        })
        .collect();
    headers.sort();
    let mut body: Value = serde_json::from_str(&raw.text).unwrap_or(Value::Null);
    if let Some(times) = body.get_mut("performance").and_then(Value::as_object_mut) {
        for time in times.values_mut() {
            *time = json!("(time)");
        }
    }
    (raw.status, headers, body)
}

#[test]
fn the_hot_path_answers_lookup_exactly_as_the_poem_route_does() {
    let hot = spawn_app();
    let routed = spawn_app_with(postal::api::Settings {
        without_hot_path: true,
        ..Default::default()
    });
    let (hot_account, hot_key) = hot.create_account();
    let (routed_account, routed_key) = routed.create_account();
    // The same rate limits on both accounts: the RateLimit headers are compared too.
    for (app, account) in [(&hot, &hot_account), (&routed, &routed_account)] {
        app.cli(&["account", "limits", account, "--per-day", "100000"]);
    }
    let requests = |key: &str, address: &str| -> Vec<Sent> {
        let bearer = format!("Bearer {key}");
        vec![
            sent(&format!(r#"{{"apiKey":"{key}","zipcode":"90210"}}"#), &[]),
            sent(
                &format!(r#"{{"apiKey":"{key}","zipcode":10115,"country":"de"}}"#),
                &[],
            ),
            sent(
                r#"{"zipcode":"SW1A 1AA","country":"GB"}"#,
                &[("authorization", &bearer), ("content-type", "text/plain")],
            ),
            sent(&format!(r#"{{"apiKey":"{key}","zipcode":"00000"}}"#), &[]),
            sent(&format!(r#"{{"apiKey":"{key}","zipcode":"  "}}"#), &[]),
            sent(
                &format!(r#"{{"apiKey":"{key}","zipcode":"90210","country":"ZZ"}}"#),
                &[],
            ),
            sent(r#"{"zipcode":"90210"}"#, &[]),
            sent(r#"{"apiKey":"sk_not_a_key","zipcode":"90210"}"#, &[]),
            sent("[1, 2]", &[]),
            sent("{not json", &[]),
            sent("", &[]),
            sent(
                &format!(r#"{{"apiKey":"{key}","zipcode":"90210"}}"#),
                &[("x-request-id", "req-123")],
            ),
            // A secret key from another site's page: 403 with the CORS headers.
            sent(
                &format!(r#"{{"apiKey":"{key}","zipcode":"90210"}}"#),
                &[("origin", "https://shop.example")],
            ),
            // The same site (the server's own origin): answered, with the CORS headers.
            sent(
                &format!(r#"{{"apiKey":"{key}","zipcode":"90210"}}"#),
                &[("origin", address)],
            ),
        ]
    };
    let send = |app: &TestApp, request: &Sent| {
        let headers: Vec<(&str, &str)> = request
            .headers
            .iter()
            .map(|(n, v)| (*n, v.as_str()))
            .collect();
        app.post_bytes_with("/api/lookup", &request.body, &headers)
    };
    let (hot_requests, routed_requests) = (
        requests(&hot_key, &hot.address),
        requests(&routed_key, &routed.address),
    );
    for (i, (h, r)) in hot_requests.iter().zip(&routed_requests).enumerate() {
        let (hot_answer, routed_answer) = (send(&hot, h), send(&routed, r));
        assert_eq!(
            comparable(&hot_answer),
            comparable(&routed_answer),
            "request {i}: {}",
            String::from_utf8_lossy(&h.body)
        );
    }
    // Both charged the same queries: the same balance.
    assert_eq!(
        hot.balance_micros(&hot_account),
        routed.balance_micros(&routed_account)
    );
    // 90210, 10115, SW1A, 90210 with an id, 90210 from the same site.
    assert_eq!(hot.balance_micros(&hot_account), 28_000 - 5 * 28);
}

#[test]
fn the_hot_path_answers_the_get_of_lookup_exactly_as_the_poem_route_does() {
    let hot = spawn_app();
    let routed = spawn_app_with(postal::api::Settings {
        without_hot_path: true,
        ..Default::default()
    });
    let shop = "https://shop.example";
    // Per app: a secret key and a publishable key of the shop's origin, on one account.
    let keys = |app: &TestApp| {
        let (account, secret) = app.create_account();
        let created = app.cli(&["key", "create", &account, "--publishable", "--origin", shop]);
        let publishable = created["apiKey"].as_str().unwrap().to_string();
        (account, secret, publishable)
    };
    let (hot_account, hot_secret, hot_pub) = keys(&hot);
    let (routed_account, routed_secret, routed_pub) = keys(&routed);
    // (path and query with {pub} and {secret} for the app's keys, headers)
    let requests: Vec<(&str, Vec<(&str, &str)>)> = vec![
        (
            "/api/lookup?zipcode=90210&key={pub}",
            vec![("origin", shop)],
        ),
        (
            "/api/lookup?zipcode=10115&country=de&key={pub}",
            vec![("origin", shop)],
        ),
        // Percent-encoding, `+` for a space, a repeated name (the first counts).
        (
            "/api/lookup?zipcode=SW1A+1AA&country=GB&key={pub}",
            vec![("origin", shop)],
        ),
        (
            "/api/lookup?zipcode=SW1A%201AA&country=G%42&key={pub}",
            vec![("origin", shop)],
        ),
        (
            "/api/lookup?zipcode=90210&zipcode=10115&key={pub}&key=x",
            vec![("origin", shop)],
        ),
        // Not found, blank, missing, a bad country, an unknown key: the contract's errors.
        (
            "/api/lookup?zipcode=00000&key={pub}",
            vec![("origin", shop)],
        ),
        ("/api/lookup?zipcode=&key={pub}", vec![("origin", shop)]),
        ("/api/lookup?key={pub}", vec![("origin", shop)]),
        (
            "/api/lookup?zipcode=90210&country=ZZ&key={pub}",
            vec![("origin", shop)],
        ),
        (
            "/api/lookup?zipcode=90210&key=pub_not_a_key",
            vec![("origin", shop)],
        ),
        ("/api/lookup?zipcode=90210", vec![("origin", shop)]),
        ("/api/lookup", vec![]),
        // The publishable key from another origin, and with no origin at all.
        (
            "/api/lookup?zipcode=90210&key={pub}",
            vec![("origin", "https://evil.example")],
        ),
        ("/api/lookup?zipcode=90210&key={pub}", vec![]),
        // A secret key in the query from a page; in a header from a server; an id.
        (
            "/api/lookup?zipcode=90210&key={secret}",
            vec![("origin", shop)],
        ),
        ("/api/lookup?zipcode=90210&key={secret}", vec![]),
        ("/api/lookup?zipcode=90210", vec![("x-api-key", "{secret}")]),
        (
            "/api/lookup?zipcode=90210&key={pub}",
            vec![("origin", shop), ("x-request-id", "r-1")],
        ),
        // Other paths and methods are poem's: the same answers either way.
        ("/api/lookup/", vec![]),
        (
            "/api/lookups?zipcode=90210&key={pub}",
            vec![("origin", shop)],
        ),
    ];
    let fill = |text: &str, public: &str, secret: &str| {
        text.replace("{pub}", public).replace("{secret}", secret)
    };
    for (i, (path, headers)) in requests.iter().enumerate() {
        let answers: Vec<Raw> = [
            (&hot, &hot_pub, &hot_secret),
            (&routed, &routed_pub, &routed_secret),
        ]
        .iter()
        .map(|(app, public, secret)| {
            let filled: Vec<(&str, String)> = headers
                .iter()
                .map(|(n, v)| (*n, fill(v, public, secret)))
                .collect();
            let headers: Vec<(&str, &str)> = filled.iter().map(|(n, v)| (*n, v.as_str())).collect();
            app.get_with(&fill(path, public, secret), &headers)
        })
        .collect();
        assert_eq!(
            comparable(&answers[0]),
            comparable(&answers[1]),
            "request {i}: {path}"
        );
    }
    assert_eq!(
        hot.balance_micros(&hot_account),
        routed.balance_micros(&routed_account)
    );
    // 90210, 10115, SW1A twice, 90210 (first of two), the secret key from a server, the id.
    assert_eq!(hot.balance_micros(&hot_account), 28_000 - 7 * 28);
}
