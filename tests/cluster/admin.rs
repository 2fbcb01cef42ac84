use std::thread;
use std::time::Duration;

use crate::helpers::{
    PgCluster, account_worth, assert_ledger_ok, join, load, one_at_a_time, postal, three_nodes,
};

#[test]
fn a_top_up_and_a_revocation_hold_on_every_node_from_the_next_request_under_load() {
    let _one = one_at_a_time();
    let Some(pg) = PgCluster::start() else { return };
    let url = pg.url();
    let busy = account_worth(&url, 1_000_000);
    let drained = account_worth(&url, 10);
    let nodes = three_nodes(&url);
    let (stop, threads) = load(&nodes.iter().collect::<Vec<_>>(), &busy.api_key, 1);

    // Drain the small account over all nodes, then every node answers 402.
    let mut ok = 0;
    for i in 0..30 {
        if nodes[i % 3].client().lookup(&drained.api_key).0 == 200 {
            ok += 1;
        }
    }
    assert_eq!(ok, 10);
    for node in &nodes {
        assert_eq!(node.client().lookup(&drained.api_key).0, 402);
    }
    let topped = postal(
        &url,
        &["account", "topup", &drained.account_id, "--usd", "5"],
    );
    assert_eq!(topped.json()["balance"], 5.0);
    for node in &nodes {
        assert_eq!(
            node.client().lookup(&drained.api_key).0,
            200,
            "{}",
            node.log()
        );
    }

    // A second key works everywhere; once `key revoke` returns, nowhere.
    let key = postal(&url, &["key", "create", &drained.account_id]).json();
    let (key_id, api_key) = (
        key["keyId"].as_str().unwrap().to_owned(),
        key["apiKey"].as_str().unwrap().to_owned(),
    );
    for node in &nodes {
        assert_eq!(node.client().lookup(&api_key).0, 200);
    }
    let revoked = postal(&url, &["key", "revoke", &key_id]);
    assert_eq!(revoked.json()["revoked"], true);
    assert!(
        !revoked.stderr.contains("did not confirm"),
        "{}",
        revoked.stderr
    );
    for node in &nodes {
        assert_eq!(node.client().lookup(&api_key).0, 401);
    }

    thread::sleep(Duration::from_millis(200));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let seen = join(threads, 3);
    assert!(seen.other.is_empty() && seen.unavailable == 0, "{seen:?}");
    drop(nodes);
    assert_ledger_ok(&pg);
}
