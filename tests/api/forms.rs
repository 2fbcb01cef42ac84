//! What a checkout form asks (issue 20): every place of a code (`/api/places`), the typed
//! city against the code (`/api/verify`, `/api/verify-bulk`), and the GET forms of the
//! reads a page makes on every keystroke. Exact places from sample.zip.

use serde_json::{Value, json};

use crate::helpers::{TestApp, error, spawn_app};

/// The 400 of a secret key sent as a GET's `key=`.
const SECRET_KEY_IN_URL: &str = "Secret keys cannot be sent in a URL; send the key in the Authorization header, or use a publishable key";

fn place(city: &str, state: &str, st: &str, county: &str, lat: f64, lon: f64) -> Value {
    json!({"city": city, "state": state, "ST": st, "county": county,
           "latitude": lat, "longitude": lon})
}

/// DE 77716's three places, in the data's order.
fn haslach() -> Value {
    let bw = |city, lat, lon| place(city, "Baden-Württemberg", "BW", "Freiburg Region", lat, lon);
    json!([
        bw("Haslach im Kinzigtal", 48.2777, 8.0894),
        bw("Hofstetten", 48.2585, 8.066),
        bw("Fischerbach", 48.2869, 8.1096),
    ])
}

/// The body without the envelope's fields (balance, performance, rateLimit).
fn answer(mut body: Value) -> Value {
    let object = body.as_object_mut().expect("an object");
    for field in ["balance", "performance", "rateLimit"] {
        assert!(
            object.remove(field).is_some(),
            "{field} missing: {object:?}"
        );
    }
    body
}

/// `/api/places` of a code: its answer without the envelope.
fn places(app: &TestApp, key: &str, zipcode: &str, country: &str) -> Value {
    let reply = app.post(
        "/api/places",
        &json!({"apiKey": key, "zipcode": zipcode, "country": country}),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    answer(reply.body)
}

fn verify(app: &TestApp, key: &str, zipcode: &str, country: &str, city: &str) -> Value {
    let reply = app.post(
        "/api/verify",
        &json!({"apiKey": key, "zipcode": zipcode, "country": country, "city": city}),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    answer(reply.body)
}

#[test]
fn places_answers_every_place_of_a_code_first_the_one_lookup_answers() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let before = app.balance_micros(&account);

    let reply = app.post(
        "/api/places",
        &json!({"apiKey": key, "zipcode": "77716", "country": "de"}),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(answer(reply.body), json!({"places": haslach()}));
    let lookup = app.lookup(json!({"apiKey": key, "zipcode": "77716", "country": "DE"}));
    assert_eq!(lookup.body["city"], "Haslach im Kinzigtal");

    // GB: the region of every country, no county when the data has none.
    let west_sussex = |city, lat, lon| place(city, "England", "ENG", "West Sussex", lat, lon);
    assert_eq!(
        places(&app, &key, "bn11", "GB"),
        json!({"places": [
            west_sussex("West Worthing", 50.8105, -0.3903),
            west_sussex("Worthing", 50.818, -0.3754),
        ]})
    );
    // The US: one place, its county.
    let reply = app.post("/api/places", &json!({"apiKey": key, "zipcode": "90210"}));
    assert_eq!(
        answer(reply.body),
        json!({"places": [place("Beverly Hills", "California", "CA", "Los Angeles", 34.0901, -118.4065)]})
    );
    assert_eq!(app.balance_micros(&account), before - 4 * 28);

    // An unknown code is 404 and a bad request 400, neither charged.
    let reply = app.post(
        "/api/places",
        &json!({"apiKey": key, "zipcode": "99999", "country": "DE"}),
    );
    assert_eq!(
        (reply.status, reply.body),
        (404, error("ZIP code not found"))
    );
    let reply = app.post("/api/places", &json!({"apiKey": key, "country": "DE"}));
    assert_eq!(
        (reply.status, reply.body),
        (400, error("Missing required field: zipcode"))
    );
    assert_eq!(app.balance_micros(&account), before - 4 * 28);
}

#[test]
fn verify_says_match_fuzzy_match_conflict_or_not_found() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let before = app.balance_micros(&account);

    // Each of the code's places, as typed in any case and accents.
    for city in ["Haslach im Kinzigtal", "hofstetten", "FISCHERBACH"] {
        assert_eq!(
            verify(&app, &key, "77716", "DE", city),
            json!({"result": "match"}),
            "{city}"
        );
    }
    // A typo of one of them names it.
    assert_eq!(
        verify(&app, &key, "77716", "DE", "Haslach im Kinzigtl"),
        json!({"result": "fuzzy_match", "matchedCity": "Haslach im Kinzigtal",
               "matchedState": "Baden-Württemberg", "matchedST": "BW"})
    );
    // Another town, and a town of the same name in another region: the code's places.
    let conflict = json!({"result": "conflict", "places": haslach()});
    assert_eq!(verify(&app, &key, "77716", "DE", "Berlin"), conflict);
    // 200 characters that fold to 1,400 bytes, longer than any place's name can be with
    // codes and a country around it: not looked into, and not one of the code's places.
    let squared = "\u{33AF}".repeat(200);
    assert_eq!(verify(&app, &key, "77716", "DE", &squared), conflict);
    let typed = format!("{} Hofstetten", "\u{33AF}".repeat(80));
    assert_eq!(verify(&app, &key, "77716", "DE", &typed), conflict);
    let reply = app.post(
        "/api/verify",
        &json!({"apiKey": key, "zipcode": "77716", "country": "DE",
                "city": "Hofstetten", "state": "Bayern"}),
    );
    assert_eq!(answer(reply.body), conflict);
    let reply = app.post(
        "/api/verify",
        &json!({"apiKey": key, "zipcode": "77716", "country": "DE",
                "city": "Hofstetten", "state": "baden-wurttemberg", "ST": "bw"}),
    );
    assert_eq!(answer(reply.body), json!({"result": "match"}));
    // No such code.
    assert_eq!(
        verify(&app, &key, "99999", "DE", "Berlin"),
        json!({"result": "not_found"})
    );
    // Every answer is one billed query, whatever the result.
    assert_eq!(app.balance_micros(&account), before - 10 * 28);

    // Bad requests: 400, uncharged.
    for (request, text) in [
        (
            json!({"apiKey": key, "city": "Berlin", "country": "DE"}),
            "Missing required field: zipcode",
        ),
        (
            json!({"apiKey": key, "zipcode": "77716", "country": "DE"}),
            "Missing required field: city",
        ),
        (
            json!({"apiKey": key, "zipcode": "77716", "city": " ", "country": "DE"}),
            "Missing required field: city",
        ),
        (
            json!({"apiKey": key, "zipcode": "77716", "city": "Berlin", "state": 7}),
            "Invalid 'state'",
        ),
        (
            json!({"apiKey": key, "zipcode": "77716", "city": "Berlin", "country": "XX"}),
            "Invalid 'country'",
        ),
    ] {
        let reply = app.post("/api/verify", &request);
        assert_eq!((reply.status, reply.body), (400, error(text)), "{request}");
    }
    assert_eq!(app.balance_micros(&account), before - 10 * 28);
}

#[test]
fn verify_bulk_answers_a_thousand_records_in_order_billed_per_record() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    app.set_balance(&account, 1_000 * 28);
    let cases = [
        (
            json!({"postalCode": "77716", "countryCode": "de", "city": "Hofstetten"}),
            json!({"postalCode": "77716", "countryCode": "DE", "city": "Hofstetten",
                   "result": "match"}),
        ),
        (
            json!({"postalCode": "BN11", "countryCode": "GB", "city": "Worthng"}),
            json!({"postalCode": "BN11", "countryCode": "GB", "city": "Worthng",
                   "result": "fuzzy_match", "matchedCity": "Worthing",
                   "matchedState": "England", "matchedST": "ENG"}),
        ),
        (
            json!({"postalCode": "77716", "countryCode": "DE", "city": "Hofstetten",
                   "state": "Bayern"}),
            json!({"postalCode": "77716", "countryCode": "DE", "city": "Hofstetten",
                   "result": "conflict", "places": haslach()}),
        ),
        (
            json!({"postalCode": "99999", "countryCode": "DE", "city": "Berlin"}),
            json!({"postalCode": "99999", "countryCode": "DE", "city": "Berlin",
                   "result": "not_found"}),
        ),
    ];
    let records: Vec<Value> = (0..1_000).map(|i| cases[i % 4].0.clone()).collect();
    let reply = app.post(
        "/api/verify-bulk",
        &json!({"apiKey": key, "records": records}),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    let results = reply.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 1_000);
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result, &cases[i % 4].1, "record {i}");
    }
    assert_eq!(reply.body["totalCost"], 0.028);
    assert_eq!(app.balance_micros(&account), 0);

    // The balance cannot pay the whole batch: 402, nothing charged.
    app.set_balance(&account, 28 * 3 - 1);
    let reply = app.post(
        "/api/verify-bulk",
        &json!({"apiKey": key, "records": &records[..3]}),
    );
    assert_eq!(
        (reply.status, reply.body),
        (402, error("Insufficient balance for bulk request"))
    );
    assert_eq!(app.balance_micros(&account), 28 * 3 - 1);

    // A window cannot take the batch: 429, nothing counted (an account that has not
    // spent this hour).
    let (account, key) = app.create_account();
    app.set_balance(&account, 28 * 10);
    app.cli(&["account", "limits", &account, "--per-hour", "3"]);
    let reply = app.post(
        "/api/verify-bulk",
        &json!({"apiKey": key, "records": &records[..4]}),
    );
    assert_eq!(reply.status, 429);
    assert_eq!(
        reply.body["error"],
        "Rate limit would be exceeded by this bulk request"
    );
    assert!(reply.retry_after.is_some());
    let reply = app.post(
        "/api/verify-bulk",
        &json!({"apiKey": key, "records": &records[..3]}),
    );
    assert_eq!(reply.status, 200, "the refused batch counted nothing");
    assert_eq!(app.balance_micros(&account), 28 * 7);

    // Request-level 400s name the lowest failing record, uncharged.
    for (records, text) in [
        (
            json!([{"postalCode": "77716", "countryCode": "DE", "city": "X"},
                   {"postalCode": "77716", "countryCode": "DE"}]),
            "records[1].city must be a non-empty string",
        ),
        (
            json!([{"postalCode": "77716", "countryCode": "DE", "city": "X", "state": 1}]),
            "records[0].state must be a string",
        ),
        (
            json!([{"postalCode": 77716, "countryCode": "DE", "city": "X"}]),
            "records[0].postalCode must be a non-empty string",
        ),
        (
            json!([{"postalCode": "77716", "countryCode": "ZZ", "city": "X"}]),
            "records[0].countryCode must be a 2-letter ISO 3166-1 alpha-2 code",
        ),
        (json!([]), "records array must contain at least 1 record"),
    ] {
        let reply = app.post(
            "/api/verify-bulk",
            &json!({"apiKey": key, "records": records}),
        );
        assert_eq!((reply.status, reply.body), (400, error(text)), "{records}");
    }
    assert_eq!(app.balance_micros(&account), 28 * 7);
}

#[test]
fn the_reads_of_a_form_answer_get_as_post_and_may_be_kept_by_the_browser() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let shop = "https://shop.example";
    let created = app.cli(&["key", "create", &account, "--publishable", "--origin", shop]);
    let public = created["apiKey"].as_str().unwrap();
    let page = [("origin", shop)];
    let before = app.balance_micros(&account);
    let pairs: [(&str, Value, &str); 4] = [
        (
            "/api/lookup",
            json!({"zipcode": "77716", "country": "DE"}),
            "zipcode=77716&country=DE",
        ),
        (
            "/api/places",
            json!({"zipcode": "BN11", "country": "GB"}),
            "zipcode=BN11&country=GB",
        ),
        (
            "/api/city",
            json!({"city": "Beverly Hills", "ST": "CA"}),
            "city=Beverly%20Hills&ST=CA",
        ),
        (
            "/api/suggest",
            json!({"q": "Bever", "state": "California", "limit": 2}),
            "q=Bever&state=California&limit=2",
        ),
    ];
    // The page's per-IP count must not be cut by the minute's end.
    crate::browser::with_seconds_left_in_the_minute(20);
    for (visited, (path, mut request, query)) in pairs.into_iter().enumerate() {
        request["apiKey"] = json!(key);
        let post = app.post(path, &request);
        assert_eq!(post.status, 200, "{path}: {post:?}");
        let get = app.get_with(&format!("{path}?{query}&key={public}"), &page);
        assert_eq!(get.status, 200, "{path}: {}", get.text);
        let mut got: Value = serde_json::from_str(&get.text).unwrap();
        // A page's visitor sees no balance, and as the rate limit its own minute under
        // the key's per-IP limit (60), this request the n-th of the page's.
        assert_eq!(got.get("balance"), None, "{path}");
        let visited = visited + 1;
        assert_eq!(
            got["rateLimit"],
            json!({
                "enabled": true,
                "perMinute": {"limit": 60, "current": visited, "approachingLimit": false},
                "perHour": {"limit": null, "current": null, "approachingLimit": false},
                "perDay": {"limit": null, "current": null, "approachingLimit": false},
            }),
            "{path}"
        );
        assert_eq!(
            get.header("ratelimit-policy"),
            Some("\"minute\";q=60;w=60"),
            "{path}"
        );
        let left = format!("\"minute\";r={};t=", 60 - visited);
        assert!(
            get.header("ratelimit").unwrap().starts_with(&left),
            "{path}"
        );
        got["balance"] = post.body["balance"].clone();
        assert_eq!(answer(got), answer(post.body), "{path}");
        assert_eq!(
            get.header("cache-control"),
            Some("private, max-age=3600"),
            "{path}"
        );
        // The key in a header does as well.
        let header = format!("Bearer {key}");
        let get = app.get_with(&format!("{path}?{query}"), &[("authorization", &header)]);
        assert_eq!(get.status, 200, "{path}: {}", get.text);
        // A secret key in the URL (kept by history, proxies' logs, caches): 400 naming
        // the fix, uncharged, from a page or a server alike; with a header key, the
        // header's key is the one used.
        for headers in [&page[..], &[]] {
            let get = app.get_with(&format!("{path}?{query}&key={key}"), headers);
            assert_eq!(
                (
                    get.status,
                    serde_json::from_str::<Value>(&get.text).unwrap()
                ),
                (400, error(SECRET_KEY_IN_URL)),
                "{path}"
            );
            assert_eq!(get.header("cache-control"), None);
        }
        let get = app.get_with(
            &format!("{path}?{query}&key={key}"),
            &[("authorization", &header)],
        );
        assert_eq!(get.status, 200, "{path}: {}", get.text);
        // A header that gives no key (empty, or another scheme) leaves the URL's in use.
        for empty in [
            &[("x-api-key", "")][..],
            &[("authorization", "Basic dXNlcg==")],
        ] {
            let get = app.get_with(&format!("{path}?{query}&key={key}"), empty);
            assert_eq!(get.status, 400, "{path} {empty:?}: {}", get.text);
        }
    }
    assert_eq!(app.balance_micros(&account), before - 16 * 28);

    // The contract's errors, not cached, not charged.
    let reply = app.get_with(
        "/api/lookup?zipcode=99999&country=DE&key="
            .to_owned()
            .as_str(),
        &[],
    );
    assert_eq!(reply.status, 400, "{}", reply.text);
    let reply = app.get_with(
        &format!("/api/lookup?zipcode=99999&country=DE&key={public}"),
        &page,
    );
    assert_eq!(reply.status, 404, "{}", reply.text);
    assert_eq!(reply.header("cache-control"), None);
    let reply = app.get_with(&format!("/api/suggest?q=Bev&limit=x&key={public}"), &page);
    assert_eq!(
        (
            reply.status,
            serde_json::from_str::<Value>(&reply.text).unwrap()
        ),
        (400, error("Invalid 'limit'"))
    );
    assert_eq!(app.balance_micros(&account), before - 16 * 28);

    // GET stays refused where a page has no use for it.
    let reply = app.get("/api/validate");
    assert_eq!(
        (reply.status, reply.body),
        (405, error("Method not allowed"))
    );
}

#[test]
fn a_publishable_key_reads_places_and_verifies_from_its_origin_by_get_and_post() {
    let app = spawn_app();
    let (account, _) = app.create_account();
    let created = app.cli(&[
        "key",
        "create",
        &account,
        "--publishable",
        "--origin",
        "https://shop.example",
    ]);
    let key = created["apiKey"].as_str().unwrap();
    let origin = [("origin", "https://shop.example")];
    let before = app.balance_micros(&account);

    let reply = app.get_with(
        &format!("/api/places?zipcode=77716&country=DE&key={key}"),
        &origin,
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some("https://shop.example")
    );
    let reply = app.post_with(
        "/api/verify",
        &json!({"apiKey": key, "zipcode": "77716", "country": "DE", "city": "Hofstetten"}),
        &origin,
    );
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(app.balance_micros(&account), before - 2 * 28);

    // Bulk is not a form's: 403, uncharged; another origin: 403.
    let reply = app.post_with(
        "/api/verify-bulk",
        &json!({"apiKey": key, "records": [
            {"postalCode": "77716", "countryCode": "DE", "city": "Hofstetten"}]}),
        &origin,
    );
    assert_eq!(reply.status, 403, "{}", reply.text);
    let reply = app.get_with(
        &format!("/api/lookup?zipcode=77716&country=DE&key={key}"),
        &[("origin", "https://evil.example")],
    );
    assert_eq!(reply.status, 403, "{}", reply.text);
    assert_eq!(app.balance_micros(&account), before - 2 * 28);
}

#[test]
fn billed_answers_carry_the_rate_limit_headers_when_the_account_has_limits() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let request = json!({"apiKey": key, "zipcode": "90210"});
    // The minute's count must not be cut by the minute's end.
    crate::browser::with_seconds_left_in_the_minute(20);

    // No limits: no headers.
    let reply = app.post_with("/api/lookup", &request, &[]);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("ratelimit-policy"), None);
    assert_eq!(reply.header("ratelimit"), None);

    app.cli(&[
        "account",
        "limits",
        &account,
        "--per-minute",
        "100",
        "--per-day",
        "5000",
    ]);
    for (i, path) in ["/api/lookup", "/api/places"].into_iter().enumerate() {
        let reply = app.post_with(path, &request, &[]);
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(
            reply.header("ratelimit-policy"),
            Some("\"minute\";q=100;w=60, \"day\";q=5000;w=86400"),
            "{path}"
        );
        // `"minute";r=99;t=T, "day";r=4999;t=U`: left after this request, seconds to the
        // end of the fixed UTC window.
        let state = reply.header("ratelimit").expect("RateLimit").to_owned();
        let parts: Vec<(String, u64, u64)> = state
            .split(", ")
            .map(|item| {
                let fields: Vec<&str> = item.split(';').collect();
                let number = |prefix: &str| {
                    fields
                        .iter()
                        .find_map(|f| f.strip_prefix(prefix))
                        .and_then(|n| n.parse().ok())
                        .unwrap_or_else(|| panic!("{state}"))
                };
                (fields[0].to_owned(), number("r="), number("t="))
            })
            .collect();
        // The windows count every query, the one before the limits too.
        let used = i as u64 + 2;
        assert_eq!(parts[0].0, "\"minute\"");
        assert_eq!(parts[0].1, 100 - used, "{state}");
        assert!((1..=60).contains(&parts[0].2), "{state}");
        assert_eq!(parts[1].0, "\"day\"");
        assert_eq!(parts[1].1, 5000 - used, "{state}");
        assert!((1..=86_400).contains(&parts[1].2), "{state}");
    }
    // Free operations are never counted: no headers.
    let reply = app.post_with("/api/aboutapi", &json!({"apiKey": key}), &[]);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("ratelimit"), None);
}

#[test]
fn places_and_verify_on_the_whole_dataset_know_cities_by_every_name() {
    let _heavy = crate::helpers::loads_the_full_dataset();
    let app = crate::helpers::spawn_app_on(crate::helpers::full_template());
    let key = app.api_key();

    let paris = |city, lat, lon| place(city, "Île-de-France", "11", "Paris", lat, lon);
    assert_eq!(
        places(&app, &key, "75001", "FR"),
        json!({"places": [paris("Paris", 48.8534, 2.3488), paris("Paris 01", 48.8592, 2.3417)]})
    );
    let fuzzy = |city: &str, state: &str, st: &str| {
        json!({"result": "fuzzy_match", "matchedCity": city, "matchedState": state,
               "matchedST": st})
    };
    let conflict = json!("conflict");
    for (zipcode, country, city, expected) in [
        ("75001", "FR", "PARIS", json!({"result": "match"})),
        (
            "75001",
            "FR",
            "Pariss",
            fuzzy("Paris", "Île-de-France", "11"),
        ),
        ("75001", "FR", "Lyon", conflict.clone()),
        // Another language's name; the admin city of a district's code.
        ("80331", "DE", "Munich", fuzzy("München", "Bayern", "BY")),
        (
            "100-0001",
            "JP",
            "Tokyo",
            fuzzy("Tokyo To", "Tokyo To", "40"),
        ),
        // Another real city is a conflict, not a typo.
        ("90210", "US", "Los Angeles", conflict),
    ] {
        let got = verify(&app, &key, zipcode, country, city);
        let got = if expected.is_string() {
            got["result"].clone()
        } else {
            got
        };
        assert_eq!(got, expected, "{country} {zipcode} {city}");
    }
}
