use std::sync::{Arc, Barrier};
use std::thread;

use serde_json::{Value, json};

use crate::helpers::{
    Client, PgCluster, account_worth, assert_ledger_ok, charged_queries, one_at_a_time, postal,
    three_nodes,
};

const OTHER_BODY: &str = "Idempotency-Key already used with a different request body";

fn three_records(key: &str, code: &str) -> Value {
    let records = vec![json!({"postalCode": code, "countryCode": "US"}); 3];
    json!({"apiKey": key, "records": records})
}

fn error(text: &str) -> String {
    json!({ "error": text }).to_string()
}

/// Asserts every charge was flushed, every claim is gone and the ledger adds up.
fn assert_settled(pg: &PgCluster, account_id: &str, queries: i64) {
    assert_eq!(charged_queries(pg, account_id), queries);
    assert_eq!(pg.i64("SELECT count(*) FROM idempotency_claims"), 0);
    assert_eq!(pg.i64("SELECT count(*) FROM leases"), 0);
    assert_ledger_ok(pg);
}

#[test]
fn a_retry_on_any_node_gets_the_first_answer_byte_for_byte_and_is_charged_once() {
    let _one = one_at_a_time();
    let Some(pg) = PgCluster::start() else { return };
    let account = account_worth(&pg.url(), 100);
    let mut nodes = three_nodes(&pg.url());
    let clients: Vec<Client> = nodes.iter().map(|n| n.client()).collect();
    let body = three_records(&account.api_key, "90210");

    let (status, replayed, first) = clients[0].post_keyed("/api/validate-bulk", &body, "order-1");
    assert_eq!((status, replayed.as_deref()), (200, None), "{first}");
    // Another node, at once (the answer may not be flushed yet: 409 until it is), then
    // after the flush; and the first node again, once its own answer left its memory.
    let (status, _, _) = clients[1].post_keyed("/api/validate-bulk", &body, "order-1");
    assert!(status == 200 || status == 409, "{status}");
    thread::sleep(std::time::Duration::from_millis(200));
    for client in [&clients[1], &clients[2], &clients[0]] {
        let (status, replayed, again) = client.post_keyed("/api/validate-bulk", &body, "order-1");
        assert_eq!((status, replayed.as_deref()), (200, Some("true")));
        assert_eq!(again, first);
    }
    // The same key with another body, or on the other operation, on a third node.
    let other = three_records(&account.api_key, "10001");
    let (status, _, text) = clients[2].post_keyed("/api/validate-bulk", &other, "order-1");
    assert_eq!((status, text), (422, error(OTHER_BODY)));
    let nearest = json!({
        "apiKey": account.api_key,
        "records": [{"latitude": 34.09, "longitude": -118.41}]
    });
    let (status, _, text) = clients[1].post_keyed("/api/nearest-bulk", &nearest, "order-1");
    assert_eq!(
        (status, text),
        (
            422,
            error("Idempotency-Key already used on /api/validate-bulk")
        )
    );

    for node in &mut nodes {
        assert!(node.stop("TERM").success(), "{}", node.log());
    }
    assert_settled(&pg, &account.account_id, 3);
    assert_eq!(pg.i64("SELECT count(*) FROM idempotent_answers"), 1);
}

#[test]
fn the_same_key_racing_on_three_nodes_runs_once() {
    let _one = one_at_a_time();
    let Some(pg) = PgCluster::start() else { return };
    let account = account_worth(&pg.url(), 100);
    let mut nodes = three_nodes(&pg.url());
    let body = three_records(&account.api_key, "90210");
    let start = Arc::new(Barrier::new(30));
    let threads: Vec<_> = (0..30)
        .map(|i| {
            let (client, body, start) = (nodes[i % 3].client(), body.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                client.post_keyed("/api/validate-bulk", &body, "race-1")
            })
        })
        .collect();
    let seen: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let ran: Vec<_> = seen
        .iter()
        .filter(|(s, r, _)| *s == 200 && r.is_none())
        .collect();
    assert_eq!(ran.len(), 1, "{seen:?}");
    for (status, replayed, text) in &seen {
        match status {
            200 => assert_eq!(text, &ran[0].2, "{replayed:?}"),
            409 => assert_eq!(
                text,
                &error("A request with this Idempotency-Key is still in progress; retry shortly")
            ),
            other => panic!("{other}: {text}"),
        }
    }
    for node in &mut nodes {
        assert!(node.stop("TERM").success(), "{}", node.log());
    }
    assert_settled(&pg, &account.account_id, 3);
}

#[test]
fn a_key_whose_request_failed_is_free_on_every_node() {
    let _one = one_at_a_time();
    let Some(pg) = PgCluster::start() else { return };
    // Two queries: a batch of three is refused 402 after its key was claimed.
    let account = account_worth(&pg.url(), 2);
    let mut nodes = three_nodes(&pg.url());
    let body = three_records(&account.api_key, "90210");
    let (status, _, _) = nodes[0]
        .client()
        .post_keyed("/api/validate-bulk", &body, "retry-1");
    assert_eq!(status, 402);
    postal(
        &pg.url(),
        &["account", "topup", &account.account_id, "--usd", "5"],
    )
    .json();
    let (status, replayed, _) =
        nodes[1]
            .client()
            .post_keyed("/api/validate-bulk", &body, "retry-1");
    assert_eq!((status, replayed), (200, None));
    for node in &mut nodes {
        assert!(node.stop("TERM").success(), "{}", node.log());
    }
    assert_settled(&pg, &account.account_id, 3);
}
