use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::helpers::{
    Node, PgCluster, account_worth, assert_ledger_ok, charged_queries, one_at_a_time, postal,
    three_nodes,
};

/// Waits until at least `secs` seconds are left in the current UTC minute, so that a
/// scenario runs within one minute window.
fn wait_for_room_in_the_minute(secs: u64) {
    wait_for_room_in(60, secs);
}

/// Waits until at least `secs` seconds are left in the current UTC window of
/// `window_secs` seconds.
fn wait_for_room_in(window_secs: u128, secs: u64) {
    let into = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
        % (window_secs * 1000);
    let left = window_secs * 1000 - into;
    if left < u128::from(secs) * 1000 {
        thread::sleep(Duration::from_millis(left as u64 + 100));
    }
}

fn set_limit(url: &str, account_id: &str, per_minute: u64) {
    let run = postal(
        url,
        &[
            "account",
            "limits",
            account_id,
            "--per-minute",
            &per_minute.to_string(),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
}

/// The minute window's count of the account in the ledger (its newest minute).
fn minute_count(pg: &PgCluster, account_id: &str) -> i64 {
    pg.i64(&format!(
        "SELECT coalesce((SELECT count FROM window_counts w JOIN accounts a
             ON a.id = w.account_id WHERE a.public_id = '{account_id}' AND kind = 1
             ORDER BY window_start DESC LIMIT 1), 0)"
    ))
}

/// `requests` racing lookups spread over `nodes`: (status, body) of each.
fn race(nodes: &[Node], key: &str, requests: usize) -> Vec<(u16, Value)> {
    race_with(nodes, key, requests, false)
}

/// As `race`, with bulk validations of 3 records when `bulk`.
fn race_with(nodes: &[Node], key: &str, requests: usize, bulk: bool) -> Vec<(u16, Value)> {
    let start = Arc::new(Barrier::new(requests));
    let answers = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..requests)
        .map(|i| {
            let client = nodes[i % nodes.len()].client();
            let (key, start, answers) = (key.to_owned(), start.clone(), answers.clone());
            thread::spawn(move || {
                start.wait();
                let answer = if bulk {
                    let records = vec![json!({"postalCode": "90210", "countryCode": "US"}); 3];
                    client.post(
                        "/api/validate-bulk",
                        &json!({"apiKey": key, "records": records}),
                    )
                } else {
                    client.lookup(&key)
                };
                answers.lock().unwrap().push(answer);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    answers.lock().unwrap().clone()
}

/// Every refusal is the contract's 429: `{"error": "Rate limit exceeded", "retryAfter": n}`
/// with n within the minute.
fn assert_all_rate_limited(answers: &[(u16, Value)]) {
    for (status, body) in answers.iter().filter(|(s, _)| *s != 200) {
        assert_eq!(*status, 429, "{body}");
        let retry_after = body["retryAfter"].as_u64().unwrap_or(0);
        assert!((1..=60).contains(&retry_after), "{body}");
        assert_eq!(
            body,
            &json!({"error": "Rate limit exceeded", "retryAfter": retry_after})
        );
    }
}

#[test]
fn a_per_minute_limit_admits_exactly_its_limit_over_three_racing_nodes() {
    let _one = one_at_a_time();
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.url();
    let account = account_worth(&url, 100_000);
    set_limit(&url, &account.account_id, 30);
    let mut nodes = three_nodes(&url);
    wait_for_room_in_the_minute(25);

    let answers = race(&nodes, &account.api_key, 150);
    let ok = answers.iter().filter(|(s, _)| *s == 200).count() as i64;
    assert_all_rate_limited(&answers);
    assert_eq!(ok, 30, "{answers:?}");

    for node in &mut nodes {
        assert!(node.stop("TERM").success(), "{}", node.log());
    }
    assert_eq!(charged_queries(&pg, &account.account_id), ok);
    assert_eq!(minute_count(&pg, &account.account_id), ok);
    assert_eq!(pg.i64("SELECT count(*) FROM window_slices"), 0);
    assert_ledger_ok(&pg);
}

#[test]
fn racing_bulk_batches_over_three_nodes_fill_a_per_minute_limit_with_whole_batches_only() {
    let _one = one_at_a_time();
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.url();
    let account = account_worth(&url, 100_000);
    set_limit(&url, &account.account_id, 30);
    let mut nodes = three_nodes(&url);
    wait_for_room_in_the_minute(25);

    let answers = race_with(&nodes, &account.api_key, 45, true);
    let ok = answers.iter().filter(|(s, _)| *s == 200).count() as i64;
    for (status, body) in answers.iter().filter(|(s, _)| *s != 200) {
        assert_eq!(*status, 429, "{body}");
        assert_eq!(
            body["error"], "Rate limit would be exceeded by this bulk request",
            "{body}"
        );
    }
    // 30 queries are 10 batches of 3: never more. Fewer only by the early-429 tolerance
    // (docs/cluster.md): room left in fragments of other nodes' slices that a batch of 3
    // waited for through 5 recalls in vain (seen once in 6 runs before slices were cut
    // to whole multiples of the asking size).
    assert!((1..=10).contains(&ok), "{ok} batches admitted");
    if ok < 10 {
        eprintln!("early 429s: {ok} batches of 3 admitted on a limit of 30");
    }

    for node in &mut nodes {
        assert!(node.stop("TERM").success(), "{}", node.log());
    }
    assert_eq!(charged_queries(&pg, &account.account_id), 3 * ok);
    assert_eq!(minute_count(&pg, &account.account_id), 3 * ok);
    assert_ledger_ok(&pg);
}

#[test]
fn an_hour_limit_under_a_larger_minute_limit_admits_exactly_its_limit() {
    let _one = one_at_a_time();
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.url();
    let account = account_worth(&url, 100_000);
    let run = postal(
        &url,
        &[
            "account",
            "limits",
            &account.account_id,
            "--per-minute",
            "1000",
            "--per-hour",
            "20",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut nodes = three_nodes(&url);
    wait_for_room_in(3600, 25);

    let answers = race(&nodes, &account.api_key, 60);
    let ok = answers.iter().filter(|(s, _)| *s == 200).count() as i64;
    assert_eq!(ok, 20, "{answers:?}");
    for (status, body) in answers.iter().filter(|(s, _)| *s != 200) {
        assert_eq!(*status, 429, "{body}");
        assert_eq!(body["error"], "Rate limit exceeded", "{body}");
        // The hour blocks, not the minute: retry when the hour ends.
        let retry_after = body["retryAfter"].as_u64().unwrap_or(0);
        assert!((1..=3600).contains(&retry_after), "{body}");
    }

    for node in &mut nodes {
        assert!(node.stop("TERM").success(), "{}", node.log());
    }
    assert_eq!(charged_queries(&pg, &account.account_id), 20);
    assert_ledger_ok(&pg);
}

#[test]
fn a_window_count_survives_a_node_restart() {
    let _one = one_at_a_time();
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.url();
    let account = account_worth(&url, 100_000);
    set_limit(&url, &account.account_id, 20);
    wait_for_room_in_the_minute(25);

    let mut node = Node::start(&url);
    for _ in 0..15 {
        assert_eq!(node.client().lookup(&account.api_key).0, 200);
    }
    assert!(node.stop("TERM").success(), "{}", node.log());
    assert_eq!(minute_count(&pg, &account.account_id), 15);

    // A new node (a restart is a new node) knows the window's 15 and admits 5 more.
    let node = Node::start(&url);
    let (status, body) = node.client().lookup(&account.api_key);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["rateLimit"]["perMinute"]["current"], 16, "{body}");
    let answers: Vec<(u16, Value)> = (0..10)
        .map(|_| node.client().lookup(&account.api_key))
        .collect();
    let ok = answers.iter().filter(|(s, _)| *s == 200).count();
    assert_eq!(ok, 4, "{answers:?}");
    assert_all_rate_limited(&answers);
    drop(node);
    assert_ledger_ok(&pg);
}

#[test]
fn a_lowered_limit_holds_on_every_node_once_the_command_returns() {
    let _one = one_at_a_time();
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.url();
    let account = account_worth(&url, 100_000);
    set_limit(&url, &account.account_id, 1_000);
    let mut nodes = three_nodes(&url);
    wait_for_room_in_the_minute(25);

    // Each node takes slices of the 1,000.
    for node in &nodes {
        for _ in 0..4 {
            assert_eq!(node.client().lookup(&account.api_key).0, 200);
        }
    }
    // 12 admitted; lowered to 15: 3 more in all, whichever nodes ask.
    set_limit(&url, &account.account_id, 15);
    let answers = race(&nodes, &account.api_key, 30);
    let ok = answers.iter().filter(|(s, _)| *s == 200).count() as i64;
    assert_all_rate_limited(&answers);
    assert_eq!(ok, 3, "{answers:?}");

    for node in &mut nodes {
        assert!(node.stop("TERM").success(), "{}", node.log());
    }
    assert_eq!(minute_count(&pg, &account.account_id), 15);
    assert_eq!(charged_queries(&pg, &account.account_id), 15);
    assert_ledger_ok(&pg);
}
