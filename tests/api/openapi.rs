//! The committed `openapi.yaml` is the document the code generates.

#[test]
fn the_committed_openapi_yaml_equals_the_generated_document() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.yaml");
    let generated = postal::api::spec_yaml();
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(path, &generated).expect("writing openapi.yaml");
        return;
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "openapi.yaml is stale: regenerate it with `UPDATE_OPENAPI=1 cargo test --test api openapi`"
    );
}

#[test]
fn every_operation_of_the_contract_is_documented_with_its_errors() {
    let spec: serde_json::Value =
        serde_json::from_str(&postal::api::spec_json()).expect("spec JSON");
    for path in [
        "/api/lookup",
        "/api/city",
        "/api/metacode",
        "/api/metazip",
        "/api/validate",
        "/api/validate-bulk",
        "/api/aboutapi",
        "/api/suggest",
        "/api/places",
        "/api/verify",
        "/api/verify-bulk",
    ] {
        let responses = &spec["paths"][path]["post"]["responses"];
        for status in ["200", "400", "401", "402", "404", "413", "429", "500"] {
            assert!(
                responses.get(status).is_some(),
                "{path} documents no {status}"
            );
        }
    }
}

#[test]
fn the_get_forms_of_a_form_s_reads_are_documented_with_their_parameters_and_cache() {
    let spec: serde_json::Value =
        serde_json::from_str(&postal::api::spec_json()).expect("spec JSON");
    for (path, params) in [
        ("/api/lookup", &["zipcode", "country", "key"][..]),
        ("/api/places", &["zipcode", "country", "key"]),
        ("/api/city", &["city", "state", "ST", "country", "key"]),
        (
            "/api/suggest",
            &["q", "country", "state", "ST", "limit", "key"],
        ),
    ] {
        let get = &spec["paths"][path]["get"];
        let names: Vec<&str> = get["parameters"]
            .as_array()
            .unwrap_or_else(|| panic!("{path}: no parameters"))
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, params, "{path}");
        assert!(
            get["responses"]["200"]["headers"]
                .get("Cache-Control")
                .is_some(),
            "{path}"
        );
        for status in ["400", "401", "402", "403", "404", "429", "500"] {
            assert!(
                get["responses"].get(status).is_some(),
                "{path} GET: {status}"
            );
        }
    }
}

#[test]
fn only_the_bulk_operations_take_an_idempotency_key_and_document_409_and_422() {
    let spec: serde_json::Value =
        serde_json::from_str(&postal::api::spec_json()).expect("spec JSON");
    let mut keyed = Vec::new();
    for (path, operations) in spec["paths"].as_object().expect("paths") {
        for (method, operation) in operations.as_object().expect("operations") {
            let responses = &operation["responses"];
            let takes_key = operation["parameters"]
                .as_array()
                .is_some_and(|p| p.iter().any(|p| p["name"] == "Idempotency-Key"));
            let replays = responses["200"]["headers"]
                .get("Idempotent-Replayed")
                .is_some();
            let refuses = responses.get("409").is_some() && responses.get("422").is_some();
            assert_eq!(
                (takes_key, replays, refuses),
                (takes_key, takes_key, takes_key),
                "{method} {path}"
            );
            if takes_key {
                keyed.push(path.as_str());
                let body = &responses["422"]["content"]["application/json; charset=utf-8"]["schema"]
                    ["$ref"];
                assert_eq!(body, "#/components/schemas/KeyReusedBody");
            }
        }
    }
    keyed.sort_unstable();
    assert_eq!(keyed, ["/api/nearest-bulk", "/api/validate-bulk"]);
    let parameter = &spec["paths"]["/api/validate-bulk"]["post"]["parameters"][0];
    assert_eq!(parameter["in"], "header");
    assert_eq!(parameter["required"], false);
    assert_eq!(parameter["schema"]["maxLength"], 255);
    assert!(parameter["schema"]["example"].is_string());
    assert_eq!(
        spec["components"]["schemas"]["KeyReusedBody"]["example"]["error"],
        "Idempotency-Key already used with a different request body"
    );
}

/// Every free-text field and query parameter (`city`, `state`, `ST`) states the length the
/// server holds it to, so that a client, or a fuzzer, that keeps to the document is never
/// refused for length (a `city` without `maxLength` was: schemathesis sent 214 characters).
#[test]
fn every_free_text_field_states_its_length_limit() {
    let spec: serde_json::Value =
        serde_json::from_str(&postal::api::spec_json()).expect("spec JSON");
    let mut seen = Vec::new();
    let schemas = spec["components"]["schemas"].as_object().unwrap();
    // The bodies clients send (answers echo such fields without a limit of their own).
    for (name, schema) in schemas.iter().filter(|(name, _)| name.ends_with("Request")) {
        for (field, property) in schema["properties"].as_object().into_iter().flatten() {
            if ["city", "state", "ST"].contains(&field.as_str()) && property["type"] == "string" {
                assert_eq!(property["maxLength"], 200, "{name}.{field}");
                seen.push(format!("{name}.{field}"));
            }
        }
    }
    for (path, item) in spec["paths"].as_object().unwrap() {
        let parameters = item["get"]["parameters"].as_array().into_iter().flatten();
        for parameter in parameters {
            let field = parameter["name"].as_str().unwrap();
            if ["city", "state", "ST"].contains(&field) {
                assert_eq!(parameter["schema"]["maxLength"], 200, "{path} {field}");
                seen.push(format!("{path} {field}"));
            }
        }
    }
    seen.sort();
    assert!(
        seen.contains(&"VerifyRecordRequest.city".to_string()),
        "{seen:?}"
    );
    assert!(seen.contains(&"/api/city city".to_string()), "{seen:?}");
    assert!(seen.len() >= 12, "{seen:?}");
}

/// The dashboard's operations (`/account/api`) document their own errors: `Not signed in`
/// for 401, never the API's 401 of a key nor its 402 (which they never answer), 403 only
/// where a change is checked for its CSRF token and Origin.
#[test]
fn the_dashboard_s_operations_document_only_the_errors_they_answer() {
    let spec: serde_json::Value =
        serde_json::from_str(&postal::api::spec_json()).expect("spec JSON");
    let mut seen = 0;
    for (path, operations) in spec["paths"].as_object().expect("paths") {
        if !path.starts_with("/account/api/") {
            continue;
        }
        for (method, operation) in operations.as_object().expect("operations") {
            seen += 1;
            let responses = operation["responses"].as_object().expect("responses");
            let statuses: Vec<&str> = responses.keys().map(String::as_str).collect();
            let text = |status: &str| responses[status]["description"].as_str().unwrap();
            assert!(!statuses.contains(&"402"), "{method} {path}: {statuses:?}");
            assert!(text("401").contains("`Not signed in`"), "{method} {path}");
            assert!(
                text("500").contains("`Internal server error`"),
                "{method} {path}"
            );
            let changes = method != "get";
            assert_eq!(statuses.contains(&"403"), changes, "{method} {path}");
            if changes {
                assert!(
                    text("403").contains("`Missing or wrong X-CSRF-Token`"),
                    "{method} {path}"
                );
            }
            // A change of keys, limits, identities or money needs a recent sign-in.
            let recent = [
                "createKey",
                "linkIdentity",
                "rollKey",
                "revokeKey",
                "setLimits",
                "unlinkIdentity",
                "startTopup",
            ]
            .contains(&operation["operationId"].as_str().unwrap());
            assert_eq!(
                changes && text("403").contains("`Sign in again to do this: "),
                recent,
                "{method} {path}"
            );
            let takes_body = operation.get("requestBody").is_some();
            assert_eq!(statuses.contains(&"413"), takes_body, "{method} {path}");
            if takes_body {
                assert!(text("400").contains("`Invalid '"), "{method} {path}");
            }
        }
    }
    assert_eq!(seen, 22);
}
