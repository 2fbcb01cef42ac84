//! The dataset's history through the API: a live server sees an import that removes codes,
//! then answers them as retired on lookup, metacode, places, validate and validate-bulk;
//! `/api/dataset` tells the provenance and the changes, free.

use std::io::Read;
use std::path::Path;

use serde_json::{Value, json};

use crate::helpers::*;

const EXTRA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/extra-countries.txt"
);
const COUNTRY_INFO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/geonames/countryInfo.txt"
);
const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/geonames/sample.zip");

/// Imports the template's sources again into the live `db`, without the `removed` US codes.
fn import_without(db: &Path, removed: &[&str], dir: &Path) {
    let mut text = String::new();
    zip::ZipArchive::new(std::fs::File::open(SAMPLE).unwrap())
        .unwrap()
        .by_name("sample.txt")
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    let kept: String = text
        .lines()
        .filter(|line| {
            let mut columns = line.split('\t');
            !(columns.next() == Some("US") && removed.contains(&columns.next().unwrap_or("")))
        })
        .map(|line| format!("{line}\n"))
        .collect();
    let edited = dir.join("sample.txt");
    std::fs::write(&edited, kept).unwrap();
    let mut options = postal::import::Options::new(
        db.to_path_buf(),
        vec![edited.display().to_string(), EXTRA.to_string()],
    );
    options.country_info = Some(COUNTRY_INFO.to_string());
    postal::import::run(&options).expect("the second import");
}

/// `/api/dataset` once the server has loaded generation `generation`.
fn dataset_at(app: &TestApp, key: &str, generation: i64) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let reply = app.post("/api/dataset", &json!({"apiKey": key}));
        assert_eq!(reply.status, 200, "{:?}", reply.body);
        if reply.body["dataset"]["generation"] == generation {
            return reply.body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server did not load generation {generation}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn codes_an_import_removed_are_answered_as_retired_and_the_dataset_tells_the_change() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let dir = tempfile::tempdir().unwrap();
    // Before: 90209 exists.
    assert_eq!(app.lookup(code(&key, json!("90209"), None)).status, 200);
    let spent_before = 28;

    import_without(&app.db, &["90209", "90211"], dir.path());
    let answer = dataset_at(&app, &key, 2);
    let dataset = &answer["dataset"];
    let since = &dataset["importedAt"].as_str().unwrap()[..10];
    assert_eq!(dataset["retiredCodes"], 2);
    let removed: Vec<(&str, &str, &str)> = dataset["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["postalCode"].as_str().unwrap(),
                c["change"].as_str().unwrap(),
                c["city"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        removed,
        [
            ("90209", "removed", "Beverly Hills"),
            ("90211", "removed", "Beverly Hills")
        ]
    );
    let us = dataset["provenance"]["perCountry"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["country"] == "US")
        .unwrap();
    assert_eq!(
        (us["removed"].clone(), us["added"].clone()),
        (json!(2), json!(0))
    );

    let retired = json!({"error": "ZIP code not found", "retired": {"since": since, "city": "Beverly Hills"}});
    for path in [
        "/api/lookup",
        "/api/metacode",
        "/api/metazip",
        "/api/places",
    ] {
        let reply = app.post(path, &code(&key, json!("90209"), None));
        assert_eq!((reply.status, &reply.body), (404, &retired), "{path}");
        // An integer is the same code.
        let reply = app.post(path, &code(&key, json!(90209), Some("us")));
        assert_eq!((reply.status, &reply.body), (404, &retired), "{path}");
        // A code that never existed says only that.
        let reply = app.post(path, &code(&key, json!("90200"), None));
        assert_eq!(
            (reply.status, &reply.body),
            (404, &error("ZIP code not found")),
            "{path}"
        );
    }
    let validated = app.validate(code(&key, json!("90211"), None));
    assert_eq!(validated.status, 200);
    assert_eq!(validated.body["valid"], false);
    assert_eq!(
        validated.body["retired"],
        json!({"since": since, "city": "Beverly Hills"})
    );
    let never = app.validate(code(&key, json!("90200"), None));
    assert_eq!(never.body["valid"], false);
    assert!(never.body.get("retired").is_none(), "{}", never.body);
    let still = app.validate(code(&key, json!("90210"), None));
    assert_eq!(still.body["valid"], true);
    assert!(still.body.get("retired").is_none(), "{}", still.body);

    let record = |code: &str| json!({"postalCode": code, "countryCode": "US"});
    let bulk = app.validate_bulk(json!({
        "apiKey": key,
        // The retired codes not first and last: each day goes to its own record.
        "records": [record("90210"), record("90209"), record("90200"), record("9021"),
                    record("90211")],
    }));
    assert_eq!(bulk.status, 200);
    assert_eq!(
        bulk.body["results"],
        json!([
            {"postalCode": "90210", "countryCode": "US", "valid": true, "normalized": "90210",
             "reason": null},
            {"postalCode": "90209", "countryCode": "US", "valid": false, "normalized": null,
             "reason": "not_found", "retiredSince": since},
            {"postalCode": "90200", "countryCode": "US", "valid": false, "normalized": null,
             "reason": "not_found"},
            {"postalCode": "9021", "countryCode": "US", "valid": false, "normalized": null,
             "reason": "invalid_format"},
            {"postalCode": "90211", "countryCode": "US", "valid": false, "normalized": null,
             "reason": "not_found", "retiredSince": since},
        ])
    );
    // 404s cost nothing; validate 3 x 28, the bulk 5 x 28; /api/dataset is free.
    let spent = spent_before + 3 * 28 + 5 * 28;
    assert_eq!(app.balance_micros(&account), 28_000 - spent);
    app.post("/api/dataset", &json!({"apiKey": key}));
    assert_eq!(app.balance_micros(&account), 28_000 - spent);
}

#[test]
fn the_dataset_operation_needs_a_key_and_is_free() {
    let app = spawn_app();
    let (account, key) = app.create_account();
    let reply = app.post("/api/dataset", &json!({"apiKey": key}));
    assert_eq!(reply.status, 200);
    let dataset = &reply.body["dataset"];
    assert_eq!(dataset["generation"], 1);
    assert_eq!(dataset["retiredCodes"], 0);
    assert_eq!(dataset["changes"], json!([]));
    let sources: Vec<(&str, &str)> = dataset["provenance"]["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let location = s["location"].as_str().unwrap();
            (
                s["role"].as_str().unwrap(),
                location.rsplit('/').next().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        sources,
        [
            ("postal", "sample.zip"),
            ("postal", "extra-countries.txt"),
            ("country_info", "countryInfo.txt"),
            ("gazetteer", "cities500.zip"),
        ]
    );
    assert_eq!(reply.body["balance"], 0.028);
    assert_eq!(app.balance_micros(&account), 28_000);
    let reply = app.post("/api/dataset", &json!({"apiKey": "sk_nope"}));
    assert_eq!((reply.status, reply.body), (401, error("Invalid API key")));
    let reply = app.post("/api/dataset", &json!({}));
    assert_eq!(
        (reply.status, reply.body),
        (400, error("Missing required field: apiKey"))
    );
}
