use std::sync::{Arc, Barrier, Mutex};
use std::thread;

use serde_json::json;

use crate::helpers::{
    PgCluster, account_worth, assert_ledger_ok, balance, charged_queries, one_at_a_time,
    three_nodes,
};

/// `requests` racing requests spread over three nodes, on a balance of exactly 50
/// queries; lookups, or bulk validations of 3 records. The statuses seen.
fn race(pg: &PgCluster, requests: usize, bulk: bool) -> (String, Vec<u16>) {
    let account = account_worth(&pg.url(), 50);
    let mut nodes = three_nodes(&pg.url());
    let start = Arc::new(Barrier::new(requests));
    let statuses = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..requests)
        .map(|i| {
            let client = nodes[i % 3].client();
            let (key, start, statuses) = (account.api_key.clone(), start.clone(), statuses.clone());
            thread::spawn(move || {
                start.wait();
                let (status, body) = if bulk {
                    let records = vec![json!({"postalCode": "90210", "countryCode": "US"}); 3];
                    client.post(
                        "/api/validate-bulk",
                        &json!({"apiKey": key, "records": records}),
                    )
                } else {
                    client.lookup(&key)
                };
                if status != 200 && status != 402 {
                    eprintln!("unexpected {status}: {body}");
                }
                statuses.lock().unwrap().push(status);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Clean stops: every charge flushed, every grant handed back.
    for node in &mut nodes {
        assert!(node.stop("TERM").success(), "{}", node.log());
        for line in node.log().lines() {
            if line.contains("WARN") || line.contains("ERROR") {
                eprintln!("node: {line}");
            }
        }
    }
    let statuses = statuses.lock().unwrap().clone();
    (account.account_id, statuses)
}

#[test]
fn three_hundred_racing_requests_over_three_nodes_on_fifty_queries_charge_exactly_fifty() {
    let _one = one_at_a_time();
    let Some(pg) = PgCluster::start() else { return };
    let (account_id, statuses) = race(&pg, 300, false);
    let ok = statuses.iter().filter(|s| **s == 200).count() as i64;
    let payment = statuses.iter().filter(|s| **s == 402).count() as i64;
    assert_eq!((ok, payment), (50, 250), "{statuses:?}");
    assert_eq!(charged_queries(&pg, &account_id), 50);
    assert_eq!(balance(&pg, &account_id), 0);
    assert_eq!(pg.i64("SELECT count(*) FROM leases"), 0);
    assert_eq!(pg.i64("SELECT count(*) FROM nodes"), 0);
    assert_ledger_ok(&pg);
}

#[test]
fn racing_bulk_batches_over_three_nodes_on_fifty_queries_charge_whole_batches_only() {
    let _one = one_at_a_time();
    let Some(pg) = PgCluster::start() else { return };
    let (account_id, statuses) = race(&pg, 60, true);
    let ok = statuses.iter().filter(|s| **s == 200).count() as i64;
    let payment = statuses.iter().filter(|s| **s == 402).count() as i64;
    // 50 queries pay for 16 batches of 3; 2 queries stay.
    assert_eq!((ok, payment), (16, 44), "{statuses:?}");
    assert_eq!(charged_queries(&pg, &account_id), 48);
    assert_eq!(balance(&pg, &account_id), 2 * 28);
    assert_ledger_ok(&pg);
}
