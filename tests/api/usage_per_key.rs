//! Usage per key: two keys of one account used 3 and 5 times (the 5 are a lookup and a
//! validate-bulk of 4 records, which counts 4, sent under an idempotency key and replayed
//! on one file): the dashboard's keys list, its usage of
//! each key and its CSV, `postal usage --by key` and `postal key list` say 3 and 5 and
//! when each key was last used, to the minute; on one file, after a restart, and over two
//! nodes of a cluster (each key used on both nodes: the figures are their sums). The move
//! of a file to a ledger keeps them (`migrate.rs`).

use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use crate::account::{Browser, providers, two_nodes};
use crate::helpers::spawn_app;

/// A validate-bulk body of 4 records.
fn bulk_of_4(key: &str) -> Value {
    json!({"apiKey": key, "records": [
        {"postalCode": "90210", "countryCode": "US"},
        {"postalCode": "10001", "countryCode": "US"},
        {"postalCode": "99999", "countryCode": "US"},
        {"postalCode": "10115", "countryCode": "DE"},
    ]})
}

/// POSTs `body` to `path` at `address`; the status.
fn post(address: &str, path: &str, body: &Value) -> u16 {
    post_with(address, path, body, &[])
}

fn post_with(address: &str, path: &str, body: &Value, headers: &[(&str, &str)]) -> u16 {
    let mut request = ureq::post(format!("{address}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request
        .config()
        .http_status_as_error(false)
        .build()
        .content_type("application/json")
        .send(body.to_string())
        .unwrap()
        .status()
        .as_u16()
}

fn lookup(address: &str, key: &str) -> u16 {
    post(
        address,
        "/api/lookup",
        &json!({"apiKey": key, "zipcode": "90210"}),
    )
}

/// Two keys made in the dashboard at `address`: (key id, secret) of `prod` and `staging`.
fn two_keys(browser: &mut Browser, address: &str) -> [(String, String); 2] {
    ["prod", "staging"].map(|name| {
        let (status, created) =
            browser.api_at(address, "POST", "/keys", Some(json!({"name": name})));
        assert_eq!(status, 201, "{created}");
        (
            created["keyId"].as_str().unwrap().to_owned(),
            created["apiKey"].as_str().unwrap().to_owned(),
        )
    })
}

/// The dashboard's keys list, once it counts `queries` for the keys in order (the flush
/// writes them within a second of the requests).
pub(crate) fn keys_counting(browser: &mut Browser, address: &str, queries: &[u64]) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, keys) = browser.api_at(address, "GET", "/keys", None);
        assert_eq!(status, 200, "{keys}");
        let keys = keys["keys"].as_array().unwrap().clone();
        let counted: Vec<u64> = keys
            .iter()
            .map(|k| k["queriesLast30Days"].as_u64().unwrap())
            .collect();
        if counted == queries {
            return keys;
        }
        assert!(Instant::now() < deadline, "{counted:?}, not {queries:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Each key's `lastUsedAt` is a minute from `since`'s to now's.
fn used_between(keys: &[Value], since: i64) {
    let (first, last) = (rfc3339_minute(since), rfc3339_minute(now()));
    for key in keys {
        let used = key["lastUsedAt"].as_str().unwrap();
        assert!(used.ends_with(":00Z"), "{key}");
        assert!(
            first.as_str() <= used && used <= last.as_str(),
            "{used} not in {first}..{last}"
        );
    }
}

/// What `queries` cost, in USD as the answers write it.
fn usd(queries: u64) -> f64 {
    (queries * 28) as f64 / 1e6
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A unix second to the minute, as the answers write it (`2026-11-28T21:04:00Z`).
fn rfc3339_minute(secs: i64) -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "-d", &format!("@{secs}"), "+%Y-%m-%dT%H:%M:00Z"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn today() -> String {
    rfc3339_minute(now())[..10].to_owned()
}

/// What the dashboard at `address` and the CLI (`target`: `--db FILE` or `--ledger URL`)
/// say of the account's two keys, used 3 and 5 times since `since` (the usage of a key is
/// the same whichever node answers).
fn check_usage(
    browser: &mut Browser,
    address: &str,
    target: &[&str],
    account: &str,
    keys: &[(String, String); 2],
    since: i64,
) {
    let (prod, staging) = (keys[0].0.as_str(), keys[1].0.as_str());
    let listed = keys_counting(browser, address, &[3, 5]);
    used_between(&listed, since);
    let day = today();
    let usage = |browser: &mut Browser, query: &str| {
        let (status, body) = browser.api_at(address, "GET", &format!("/usage{query}"), None);
        assert_eq!(status, 200, "{body}");
        body
    };
    let line = |endpoint: &str, queries: u64| {
        json!({"date": day, "endpoint": endpoint, "queries": queries,
               "charged": usd(queries)})
    };
    assert_eq!(
        usage(browser, &format!("?key={prod}")),
        json!({"accountId": account, "keyId": prod, "days": 30,
               "usage": [line("lookup", 3)]})
    );
    assert_eq!(
        usage(browser, &format!("?key={staging}&days=1")),
        json!({"accountId": account, "keyId": staging, "days": 1,
               "usage": [line("lookup", 1), line("validate-bulk", 4)]})
    );
    assert_eq!(
        usage(browser, ""),
        json!({"accountId": account, "keyId": null, "days": 30,
               "usage": [line("lookup", 4), line("validate-bulk", 4)]})
    );
    assert_eq!(
        browser.api_at(address, "GET", "/usage?key=key_000000000000", None),
        (404, json!({"error": "no key \"key_000000000000\""}))
    );
    let csv = browser.get(&format!("{address}/account/api/usage?format=csv"));
    assert_eq!(csv.status, 200);
    assert_eq!(
        csv.body,
        format!(
            "date,key_id,endpoint,queries,charged_usd\n\
             {day},{prod},lookup,3,0.000084\n\
             {day},{staging},lookup,1,0.000028\n\
             {day},{staging},validate-bulk,4,0.000112\n"
        )
    );

    // The CLI: the same lines and keys.
    let cli = |args: &[&str]| crate::migrate::cli(target, args);
    let by_key = cli(&["usage", "--by", "key", "--account", account, "--days", "1"]);
    let cli_line = |key: &str, endpoint: &str, queries: u64| {
        json!({"date": day, "accountId": account, "keyId": key, "endpoint": endpoint,
               "queries": queries, "usd": usd(queries)})
    };
    assert_eq!(
        by_key,
        json!({"days": 1, "usage": [
            cli_line(prod, "lookup", 3),
            cli_line(staging, "lookup", 1),
            cli_line(staging, "validate-bulk", 4),
        ]})
    );
    let listed_by_cli = cli(&["key", "list", account]);
    let figures = |keys: &[Value]| -> Vec<(Value, Value, Value)> {
        keys.iter()
            .map(|k| {
                (
                    k["keyId"].clone(),
                    k["lastUsedAt"].clone(),
                    k["queriesLast30Days"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(
        figures(listed_by_cli["keys"].as_array().unwrap()),
        figures(&listed)
    );
}

#[test]
fn two_keys_used_3_and_5_times_say_so_everywhere_and_after_a_restart() {
    let mut app = spawn_app();
    let Some(_providers) = providers(&app) else {
        return;
    };
    let since = now();
    let mut browser = Browser::new();
    browser.sign_in(&app, "p1", "erin");
    let (_, me) = browser.api(&app, "GET", "/me", None);
    let account = me["accountId"].as_str().unwrap().to_owned();
    let keys = two_keys(&mut browser, &app.address);
    // Made, never used: no last use, no queries.
    for key in browser.api(&app, "GET", "/keys", None).1["keys"]
        .as_array()
        .unwrap()
    {
        assert_eq!(
            (&key["lastUsedAt"], &key["queriesLast30Days"]),
            (&Value::Null, &json!(0)),
            "{key}"
        );
    }
    let address = app.address.clone();
    for _ in 0..3 {
        assert_eq!(lookup(&address, &keys[0].1), 200);
    }
    assert_eq!(lookup(&address, &keys[1].1), 200);
    // The bulk under an idempotency key (its charge held on the key until answered),
    // then replayed: counted once.
    for _ in 0..2 {
        let bulk = bulk_of_4(&keys[1].1);
        let once = [("Idempotency-Key", "usage-per-key-1")];
        assert_eq!(post_with(&address, "/api/validate-bulk", &bulk, &once), 200);
    }
    let db = app.db.clone();
    let target = ["--db", db.to_str().unwrap()];
    check_usage(&mut browser, &address, &target, &account, &keys, since);

    // A restart: the figures were written with the charges, and equal the ledger's.
    app.restart_after(|db| {
        let conn = rusqlite::Connection::open(db).unwrap();
        let sums = |sql: &str| -> Vec<(i64, i64, i64, String, i64, i64)> {
            conn.prepare(sql)
                .unwrap()
                .query_map([], |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                    ))
                })
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        let ledger = sums(
            "SELECT account_id, at - at % 86400, coalesce(key_id, 0), endpoint,
                    sum(query_count), -sum(amount)
             FROM ledger WHERE kind = 'charge' GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
        );
        assert!(ledger.len() >= 3, "{ledger:?}");
        assert_eq!(
            sums(
                "SELECT account_id, day, key_id, endpoint, queries, charged
                 FROM usage_days ORDER BY 1, 2, 3, 4"
            ),
            ledger
        );
    });
    browser.share_session(&address, &app.address);
    let address = app.address.clone();
    check_usage(&mut browser, &address, &target, &account, &keys, since);
}

#[test]
fn over_two_nodes_a_keys_figures_are_the_sum_of_both() {
    let _heavy = crate::helpers::timing_sensitive();
    let Some(cluster) = two_nodes() else {
        return;
    };
    let (a, b) = (cluster.a.as_str(), cluster.b.as_str());
    let since = now();
    let mut browser = Browser::new();
    browser.sign_in_at(a, "p1", "fred");
    browser.share_session(a, b);
    let (_, me) = browser.api_at(a, "GET", "/me", None);
    let account = me["accountId"].as_str().unwrap().to_owned();
    let keys = two_keys(&mut browser, a);
    // prod: 2 on node a, 1 on node b; staging: the lookup on a, the bulk of 4 on b.
    assert_eq!(lookup(a, &keys[0].1), 200);
    assert_eq!(lookup(a, &keys[0].1), 200);
    assert_eq!(lookup(b, &keys[0].1), 200);
    assert_eq!(lookup(a, &keys[1].1), 200);
    assert_eq!(post(b, "/api/validate-bulk", &bulk_of_4(&keys[1].1)), 200);
    let target = ["--ledger", cluster.url.as_str()];
    check_usage(&mut browser, a, &target, &account, &keys, since);
    check_usage(&mut browser, b, &target, &account, &keys, since);
}
