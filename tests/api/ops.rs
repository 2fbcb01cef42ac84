//! The operator's routes: /healthz, /readyz, /metrics (exact counters after known
//! traffic, the bearer token) and the request id every response carries.

use postal::api::ops::Operations;
use serde_json::{Value, json};

use crate::helpers::{spawn_app, spawn_app_on, spawn_app_with};

#[test]
fn healthz_and_readyz_answer_200_without_a_key() {
    let app = spawn_app();
    let health = app.get_with("/healthz", &[]);
    assert_eq!(health.status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&health.text).unwrap(),
        json!({"status": "ok"})
    );
    let ready = app.get_with("/readyz", &[]);
    assert_eq!(ready.status, 200, "{}", ready.text);
    assert_eq!(
        serde_json::from_str::<Value>(&ready.text).unwrap(),
        json!({"status": "ready"})
    );
    assert!(
        ready
            .header("content-type")
            .unwrap()
            .starts_with("application/json")
    );
}

#[test]
fn readyz_is_503_with_a_reason_while_no_postal_data_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.db");
    postal::db::open(&empty).unwrap();
    let app = spawn_app_on(&empty);
    let ready = app.get_with("/readyz", &[]);
    assert_eq!(ready.status, 503);
    assert_eq!(
        serde_json::from_str::<Value>(&ready.text).unwrap(),
        json!({"status": "not ready", "reason": "postal index: no postal data loaded"})
    );
    // The process still answers.
    assert_eq!(app.get_with("/healthz", &[]).status, 200);
    // And says so to Prometheus; no import ever swapped data into this file.
    let m = app.get_with("/metrics", &[]).text;
    assert_eq!(sample(&m, "postal_ready"), Some(0.0), "{m}");
    assert_eq!(
        sample(&m, "postal_dataset_imported_timestamp_seconds"),
        Some(0.0)
    );
}

/// The value of the series `name` (with its labels exactly as written), or None.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name == series).then(|| value.parse().expect("a number"))
    })
}

#[test]
fn metrics_count_requests_charges_and_refusals_exactly() {
    let app = spawn_app();
    let (_, key) = app.create_account();
    let (poor, poor_key) = app.create_account();
    app.set_balance(&poor, 0);
    let (limited, limited_key) = app.create_account();
    app.cli(&["account", "limits", &limited, "--per-day", "1"]);

    for _ in 0..3 {
        assert_eq!(
            app.lookup(json!({"zipcode": "90210", "apiKey": key}))
                .status,
            200
        );
    }
    assert_eq!(
        app.lookup(json!({"zipcode": "00000", "apiKey": key}))
            .status,
        404
    );
    let bulk = json!({"apiKey": key, "records": [
        {"postalCode": "90210", "countryCode": "US"},
        {"postalCode": "SW1A 1AA", "countryCode": "GB"},
        {"postalCode": "ABCDE", "countryCode": "US"},
    ]});
    assert_eq!(app.validate_bulk(bulk).status, 200);
    for _ in 0..2 {
        let wrong = json!({"zipcode": "90210", "apiKey": "pk_wrong"});
        assert_eq!(app.lookup(wrong).status, 401);
    }
    assert_eq!(
        app.lookup(json!({"zipcode": "90210", "apiKey": poor_key}))
            .status,
        402
    );
    assert_eq!(
        app.lookup(json!({"zipcode": "90210", "apiKey": limited_key}))
            .status,
        200
    );
    assert_eq!(
        app.lookup(json!({"zipcode": "90210", "apiKey": limited_key}))
            .status,
        429
    );

    // Charges are written behind (every 10 ms): wait until the ledger holds all 7.
    let conn = postal::db::open(&app.db).unwrap();
    let ledgered = || -> i64 {
        conn.query_row(
            "SELECT COALESCE(SUM(query_count), 0) FROM ledger WHERE kind = 'charge'",
            [],
            |row| row.get(0),
        )
        .unwrap()
    };
    for _ in 0..500 {
        if ledgered() == 7 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(ledgered(), 7);
    drop(conn);

    let scrape = app.get_with("/metrics", &[]);
    assert_eq!(scrape.status, 200);
    assert!(
        scrape
            .header("content-type")
            .unwrap()
            .starts_with("application/openmetrics-text"),
        "{:?}",
        scrape.header("content-type")
    );
    let m = &scrape.text;
    let requests = |op: &str, status: u16| {
        sample(
            m,
            &format!("postal_http_requests_total{{operation=\"{op}\",status=\"{status}\"}}"),
        )
    };
    assert_eq!(requests("lookup", 200), Some(4.0), "{m}");
    assert_eq!(requests("lookup", 404), Some(1.0));
    assert_eq!(requests("lookup", 401), Some(2.0));
    assert_eq!(requests("lookup", 402), Some(1.0));
    assert_eq!(requests("lookup", 429), Some(1.0));
    assert_eq!(requests("validate-bulk", 200), Some(1.0));
    assert_eq!(
        requests("metrics", 200),
        None,
        "a scrape counts after it answers"
    );
    assert_eq!(
        sample(
            m,
            "postal_http_request_duration_seconds_count{operation=\"lookup\"}"
        ),
        Some(9.0)
    );
    // 3 + 3 (bulk) + 1 billed queries, 28 micro-dollars each.
    assert_eq!(sample(m, "postal_queries_charged_total"), Some(7.0));
    assert_eq!(sample(m, "postal_charged_micro_dollars_total"), Some(196.0));
    assert_eq!(
        sample(
            m,
            "postal_refusals_total{status=\"401\",reason=\"invalid_key\"}"
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(
            m,
            "postal_refusals_total{status=\"402\",reason=\"insufficient_balance\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            m,
            "postal_refusals_total{status=\"429\",reason=\"rate_limited\"}"
        ),
        Some(1.0)
    );
    assert_eq!(sample(m, "postal_requests_shed_total"), Some(0.0));
    // Written behind: the 7 queries took at least one flush, at most one per request.
    let flushes = sample(m, "postal_ledger_flushes_total").unwrap();
    assert!((1.0..=5.0).contains(&flushes), "{flushes} flushes");
    assert!(sample(m, "postal_ledger_flush_seconds_total").unwrap() > 0.0);
    assert_eq!(sample(m, "postal_ledger_pending_charges"), Some(0.0));
    assert_eq!(sample(m, "postal_ledger_lag_seconds"), Some(0.0));

    let conn = postal::db::open(&app.db).unwrap();
    let coverage = postal::db::postal::coverage(&conn).unwrap();
    assert_eq!(
        sample(m, "postal_dataset_records"),
        Some(coverage.records as f64)
    );
    assert_eq!(
        sample(m, "postal_dataset_countries"),
        Some(coverage.countries as f64)
    );
    let codes: i64 = conn
        .query_row(
            "SELECT count(*) FROM (SELECT DISTINCT country, compact_key FROM postal_codes)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(sample(m, "postal_index_postal_codes"), Some(codes as f64));
    let loaded = sample(m, "postal_dataset_loaded_timestamp_seconds").unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    // The dataset is loaded once per run and shared by the suite's servers: as old as the
    // run (a loaded machine's suite took 834 s), not as old as this server.
    assert!(loaded <= now && loaded > now - 3600.0, "{loaded}");
    assert!(sample(m, "postal_process_resident_memory_bytes").unwrap() > 1e6);
    let imported: i64 = conn
        .query_row("SELECT imported_at FROM dataset", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        sample(m, "postal_dataset_imported_timestamp_seconds"),
        Some(imported as f64)
    );
    assert_eq!(sample(m, "postal_ready"), Some(1.0));

    for secret in [&key, &poor_key, &limited_key] {
        assert!(!m.contains(secret.as_str()), "an API key in /metrics");
    }
    assert!(!m.contains("pk_"), "an API key in /metrics");

    // The scrape itself shows up in the next one.
    let again = app.get_with("/metrics", &[]).text;
    assert_eq!(
        sample(
            &again,
            "postal_http_requests_total{operation=\"metrics\",status=\"200\"}"
        ),
        Some(1.0)
    );
}

#[test]
fn metrics_with_a_token_answer_only_the_bearer_of_it() {
    let app = spawn_app_with(postal::api::Settings {
        operations: Operations {
            metrics_token: Some("s3cret-token".into()),
        },
        ..Default::default()
    });
    let none = app.get_with("/metrics", &[]);
    assert_eq!(none.status, 401);
    assert_eq!(none.header("www-authenticate"), Some("Bearer"));
    assert_eq!(
        serde_json::from_str::<Value>(&none.text).unwrap(),
        json!({"error": "Missing or wrong metrics token"})
    );
    let wrong = app.get_with("/metrics", &[("authorization", "Bearer nope")]);
    assert_eq!(wrong.status, 401);
    let right = app.get_with("/metrics", &[("authorization", "Bearer s3cret-token")]);
    assert_eq!(right.status, 200);
    assert!(right.text.contains("postal_http_requests_total"));
    assert!(!right.text.contains("s3cret-token"));
    // Refusals count the billed API only, not the metrics endpoint's own 401s.
    assert!(
        !right.text.contains("postal_refusals_total{"),
        "{}",
        right.text
    );
}

/// With a metrics token, `/readyz` tells anyone only its status; the reason (and a cluster
/// node's figures) only the token's bearer.
#[test]
fn with_a_metrics_token_readyz_tells_the_reason_only_its_bearer() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.db");
    postal::db::open(&empty).unwrap();
    let app = crate::helpers::spawn_app_on_with(
        &empty,
        postal::api::Settings {
            operations: Operations {
                metrics_token: Some("s3cret-token".into()),
            },
            ..Default::default()
        },
    );
    for (headers, body) in [
        (vec![], json!({"status": "not ready"})),
        (
            vec![("authorization", "Bearer nope")],
            json!({"status": "not ready"}),
        ),
        (
            vec![("authorization", "Bearer s3cret-token")],
            json!({"status": "not ready", "reason": "postal index: no postal data loaded"}),
        ),
    ] {
        let ready = app.get_with("/readyz", &headers);
        assert_eq!(ready.status, 503);
        assert_eq!(serde_json::from_str::<Value>(&ready.text).unwrap(), body);
    }
}

#[test]
fn every_response_carries_the_request_id_it_came_with_or_a_new_one() {
    let app = spawn_app();
    let echoed = app.get_with("/healthz", &[("x-request-id", "lb-7f3a-0001")]);
    assert_eq!(echoed.header("x-request-id"), Some("lb-7f3a-0001"));

    let fresh = app.post_with("/api/lookup", &json!({"zipcode": "90210"}), &[]);
    assert_eq!(fresh.status, 400); // no apiKey
    let id = fresh.header("x-request-id").expect("a request id");
    assert_eq!(id.len(), 32, "{id}");
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    let other = app.get_with("/healthz", &[]);
    assert_ne!(other.header("x-request-id"), Some(id));

    // An unreasonable id (spaces, too long) is replaced, not echoed.
    let long = "x".repeat(200);
    let replaced = app.get_with("/healthz", &[("x-request-id", long.as_str())]);
    assert_eq!(replaced.header("x-request-id").unwrap().len(), 32);
}

#[test]
fn postal_serve_logs_one_json_access_line_per_request_with_its_id_and_never_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("postal.db");
    std::fs::copy(crate::helpers::template(), &db).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let postal = env!("CARGO_BIN_EXE_postal");
    let created = std::process::Command::new(postal)
        .arg("--db")
        .arg(&db)
        .args(["account", "create"])
        .output()
        .unwrap();
    let key = serde_json::from_slice::<Value>(&created.stdout).unwrap()["apiKey"]
        .as_str()
        .unwrap()
        .to_owned();
    let log = dir.path().join("stderr.log");
    let mut server = std::process::Command::new(postal)
        .arg("--db")
        .arg(&db)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("POSTAL_LOG_FORMAT", "json")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let base = format!("http://127.0.0.1:{port}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while agent.get(format!("{base}/healthz")).call().is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the server did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let answer = agent
        .post(format!("{base}/api/lookup"))
        .header("content-type", "application/json")
        .header("x-request-id", "trace-42")
        .send(
            json!({"zipcode": "90210", "apiKey": key})
                .to_string()
                .as_bytes(),
        )
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    // The access line is written once the response is sent; give it a moment.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let _ = server.kill();
    let _ = server.wait();

    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains(&key), "the API key is in the log:\n{text}");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
        .collect();
    let access: Vec<&Value> = lines
        .iter()
        .filter(|l| l["request_id"] == "trace-42")
        .collect();
    assert_eq!(access.len(), 1, "{text}");
    let line = access[0];
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["message"], "access");
    assert_eq!(line["method"], "POST");
    assert_eq!(line["path"], "/api/lookup");
    assert_eq!(line["status"], 200);
    assert!(line["micros"].as_u64().is_some(), "{line}");
}
