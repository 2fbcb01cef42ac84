use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::helpers::{TestApp, raw_request, spawn_app, spawn_app_with};

const SHOP: &str = "https://shop.example";
const ORIGIN_NOT_ALLOWED: &str = "Origin not allowed for this key";
const OPERATION_NOT_ALLOWED: &str = "Operation not allowed for a publishable key";
const SECRET_KEY_IN_PAGE: &str =
    "Secret keys cannot be used from a web page; create a publishable key for it";

/// A publishable key of the account, for `origins`; its text.
fn publishable(app: &TestApp, account: &str, origins: &[&str], per_ip_minute: u32) -> String {
    let mut args = vec!["key", "create", account, "--publishable"];
    for origin in origins {
        args.extend(["--origin", origin]);
    }
    let limit = per_ip_minute.to_string();
    args.extend(["--per-ip-minute", limit.as_str()]);
    let created = app.cli(&args);
    created["apiKey"].as_str().unwrap().to_owned()
}

fn body(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// Waits, when needed, until at least `seconds` of the current UTC minute are left, so that
/// a per-minute count is not cut by the minute's end.
pub(crate) fn with_seconds_left_in_the_minute(seconds: u64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let left = 60 - now % 60;
    if left < seconds {
        std::thread::sleep(Duration::from_secs(left + 1));
    }
}

#[test]
fn a_publishable_key_answers_its_origins_on_the_operations_of_a_form_only() {
    let app = spawn_app();
    let (account, _) = app.create_account();
    let key = publishable(&app, &account, &[SHOP, "https://*.shop.example"], 1000);
    let origin = [("origin", SHOP)];

    // The form's operations answer, charged as with a secret key, readable by the page.
    let before = app.balance_micros(&account);
    let lookup = app.post_with(
        "/api/lookup",
        &json!({"apiKey": key, "zipcode": "90210"}),
        &origin,
    );
    assert_eq!(lookup.status, 200, "{}", lookup.text);
    assert_eq!(body(&lookup.text)["city"], "Beverly Hills");
    assert_eq!(lookup.header("access-control-allow-origin"), Some(SHOP));
    assert_eq!(lookup.header("vary"), Some("Origin"));
    assert_eq!(app.balance_micros(&account), before - 28);
    let sub = [("origin", "https://checkout.shop.example")];
    let allowed: [(&str, Value); 5] = [
        ("/api/validate", json!({"apiKey": key, "zipcode": "90210"})),
        (
            "/api/city",
            json!({"apiKey": key, "city": "Beverly Hills", "state": "California"}),
        ),
        (
            "/api/suggest",
            json!({"apiKey": key, "q": "Bever", "country": "US"}),
        ),
        (
            "/api/autocomplete",
            json!({"apiKey": key, "q": "9021", "country": "US"}),
        ),
        ("/api/lookup", json!({"apiKey": key, "zipcode": "90210"})),
    ];
    for (path, request) in &allowed {
        let reply = app.post_with(path, request, &sub);
        assert_eq!(reply.status, 200, "{path}: {}", reply.text);
    }
    assert_eq!(app.balance_micros(&account), before - 6 * 28);

    // Every other operation: 403, uncharged, and the page can read why.
    let before = app.balance_micros(&account);
    let refused: [(&str, Value); 9] = [
        ("/api/metacode", json!({"apiKey": key, "zipcode": "90210"})),
        ("/api/metazip", json!({"apiKey": key, "zipcode": "90210"})),
        (
            "/api/validate-bulk",
            json!({"apiKey": key, "records": [{"postalCode": "90210", "countryCode": "US"}]}),
        ),
        (
            "/api/nearest",
            json!({"apiKey": key, "latitude": 34.09, "longitude": -118.4}),
        ),
        (
            "/api/radius",
            json!({"apiKey": key, "zipcode": "90210", "country": "US", "radiusKm": 5}),
        ),
        (
            "/api/distance",
            json!({"apiKey": key, "from": {"zipcode": "90210", "country": "US"},
                   "to": {"zipcode": "10001", "country": "US"}}),
        ),
        (
            "/api/nearest-bulk",
            json!({"apiKey": key, "points": [{"latitude": 34.09, "longitude": -118.4}]}),
        ),
        ("/api/countries", json!({"apiKey": key})),
        ("/api/aboutapi", json!({"apiKey": key})),
    ];
    for (path, request) in &refused {
        let reply = app.post_with(path, request, &origin);
        assert_eq!(reply.status, 403, "{path}: {}", reply.text);
        assert_eq!(
            body(&reply.text),
            json!({"error": OPERATION_NOT_ALLOWED}),
            "{path}"
        );
        assert_eq!(reply.header("access-control-allow-origin"), Some(SHOP));
    }
    assert_eq!(app.balance_micros(&account), before);

    // Another origin, no origin (a script off the page), `null`, http for https, the bare
    // host of a wildcard: 403 before anything else, uncharged.
    for origin in [
        Some("https://evil.example"),
        None,
        Some("null"),
        Some("http://shop.example"),
        Some("https://shop.example:8443"),
        Some("https://evilshop.example"),
    ] {
        let headers: Vec<(&str, &str)> = origin.map(|o| ("origin", o)).into_iter().collect();
        for (path, request) in allowed.iter().chain(&refused) {
            let reply = app.post_with(path, request, &headers);
            assert_eq!(reply.status, 403, "{origin:?} {path}: {}", reply.text);
            assert_eq!(body(&reply.text), json!({"error": ORIGIN_NOT_ALLOWED}));
        }
    }
    assert_eq!(app.balance_micros(&account), before);
    // A revoked publishable key is an unknown key.
    let listed = app.cli(&["key", "list", &account]);
    let key_id = listed["keys"][1]["keyId"].as_str().unwrap().to_owned();
    assert_eq!(listed["keys"][1]["kind"], "publishable");
    app.cli(&["key", "revoke", &key_id]);
    let reply = app.post_with("/api/lookup", &allowed[4].1, &origin);
    assert_eq!(reply.status, 401, "{}", reply.text);
}

#[test]
fn a_publishable_key_is_limited_per_client_ip_beside_the_account() {
    let app = spawn_app();
    let (account, _) = app.create_account();
    let key = publishable(&app, &account, &[SHOP], 3);
    let origin = [("origin", SHOP)];
    let request = json!({"apiKey": key, "zipcode": "90210"});
    with_seconds_left_in_the_minute(20);
    for _ in 0..3 {
        let reply = app.post_with("/api/lookup", &request, &origin);
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    let before = app.balance_micros(&account);
    let refused = app.post_with("/api/lookup", &request, &origin);
    assert_eq!(refused.status, 429, "{}", refused.text);
    let retry_after: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert_eq!(
        body(&refused.text),
        json!({"error": "Rate limit exceeded", "retryAfter": retry_after})
    );
    assert_eq!(refused.header("access-control-allow-origin"), Some(SHOP));
    assert_eq!(app.balance_micros(&account), before);
    // The X-Forwarded-For of an untrusted peer names nobody: still the same client.
    let forwarded = [("origin", SHOP), ("x-forwarded-for", "203.0.113.7")];
    assert_eq!(
        app.post_with("/api/lookup", &request, &forwarded).status,
        429
    );
    // Another key of the account has its own count.
    let other = publishable(&app, &account, &[SHOP], 3);
    let reply = app.post_with(
        "/api/lookup",
        &json!({"apiKey": other, "zipcode": "90210"}),
        &origin,
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
}

#[test]
fn behind_a_trusted_proxy_each_forwarded_client_has_its_own_count() {
    let app = spawn_app_with(postal::api::Settings {
        trusted_proxies: vec!["127.0.0.1/32".parse().unwrap()],
        ..Default::default()
    });
    let (account, _) = app.create_account();
    let key = publishable(&app, &account, &[SHOP], 1);
    let request = json!({"apiKey": key, "zipcode": "90210"});
    let from = |client: &'static str| [("origin", SHOP), ("x-forwarded-for", client)];
    with_seconds_left_in_the_minute(20);
    assert_eq!(
        app.post_with("/api/lookup", &request, &from("198.51.100.1"))
            .status,
        200
    );
    assert_eq!(
        app.post_with("/api/lookup", &request, &from("198.51.100.1"))
            .status,
        429
    );
    assert_eq!(
        app.post_with("/api/lookup", &request, &from("198.51.100.2"))
            .status,
        200
    );
    // A client cannot pose as another by prepending: the last untrusted hop counts.
    let spoofed = [
        ("origin", SHOP),
        ("x-forwarded-for", "198.51.100.9, 198.51.100.2"),
    ];
    assert_eq!(app.post_with("/api/lookup", &request, &spoofed).status, 429);
}

#[test]
fn a_secret_key_answers_servers_and_its_own_site_but_not_other_sites_pages() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let request = json!({"apiKey": key, "zipcode": "90210"});
    let before = app.balance_micros(&account);
    let refused = app.post_with("/api/lookup", &request, &[("origin", SHOP)]);
    assert_eq!(refused.status, 403, "{}", refused.text);
    assert_eq!(body(&refused.text), json!({"error": SECRET_KEY_IN_PAGE}));
    assert_eq!(app.balance_micros(&account), before);
    // Swagger UI at /docs is a page of this server: its origin is the request's host.
    let own = app.address.clone();
    let same_site = app.post_with("/api/lookup", &request, &[("origin", own.as_str())]);
    assert_eq!(same_site.status, 200, "{}", same_site.text);
    assert_eq!(app.post_with("/api/lookup", &request, &[]).status, 200);
}

#[test]
fn the_key_may_come_in_a_header_which_wins_over_the_body() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let no_key = json!({"zipcode": "90210"});
    let bearer = format!("Bearer {key}");
    for headers in [
        [("authorization", bearer.as_str())],
        [("x-api-key", key.as_str())],
    ] {
        let reply = app.post_with("/api/lookup", &no_key, &headers);
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(body(&reply.text)["city"], "Beverly Hills");
    }
    let with_wrong_body = json!({"apiKey": "sk_wrong", "zipcode": "90210"});
    let header = [("x-api-key", key.as_str())];
    assert_eq!(
        app.post_with("/api/lookup", &with_wrong_body, &header)
            .status,
        200
    );
    let wrong_header = [("authorization", "Bearer sk_wrong")];
    let reply = app.post_with(
        "/api/lookup",
        &json!({"apiKey": key, "zipcode": "90210"}),
        &wrong_header,
    );
    assert_eq!(reply.status, 401);
    assert_eq!(body(&reply.text), json!({"error": "Invalid API key"}));
    // No key anywhere: the contract's 400, and an empty header is no key.
    let reply = app.post_with("/api/lookup", &no_key, &[("x-api-key", "")]);
    assert_eq!(reply.status, 400);
    assert_eq!(
        body(&reply.text),
        json!({"error": "Missing required field: apiKey"})
    );
    // The free operations read it too.
    let about = app.post_with(
        "/api/aboutapi",
        &json!({}),
        &[("authorization", bearer.as_str())],
    );
    assert_eq!(about.status, 200, "{}", about.text);
    assert_eq!(app.balance_micros(&account), 28_000 - 3 * 28);
}

#[test]
fn a_preflight_is_answered_for_every_api_operation() {
    let app = spawn_app();
    let address = app.address.trim_start_matches("http://");
    for path in [
        "/api/lookup",
        "/api/city",
        "/api/validate-bulk",
        "/api/suggest",
    ] {
        let request = format!(
            "OPTIONS {path} HTTP/1.1\r\nHost: {address}\r\nOrigin: {SHOP}\r\n\
             Access-Control-Request-Method: POST\r\n\
             Access-Control-Request-Headers: content-type, x-api-key\r\n\
             Connection: close\r\n\r\n"
        );
        let reply = raw_request(address, request.as_bytes(), Duration::from_secs(10));
        assert_eq!(reply.status, 204, "{path}: {}", reply.head);
        for line in [
            "access-control-allow-origin: https://shop.example",
            "access-control-allow-methods: GET, POST, OPTIONS",
            "access-control-allow-headers: Authorization, Content-Type, X-Api-Key, X-Request-Id",
            "access-control-max-age: 86400",
            "vary: Origin",
        ] {
            assert!(
                reply.head.contains(&line.to_lowercase()),
                "{path}: {line} in {}",
                reply.head
            );
        }
    }
    // Without a preflight's headers OPTIONS is what it was: 405, allowing POST.
    let request =
        format!("OPTIONS /api/lookup HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    let reply = raw_request(address, request.as_bytes(), Duration::from_secs(10));
    assert_eq!(reply.status, 405, "{}", reply.head);
}
