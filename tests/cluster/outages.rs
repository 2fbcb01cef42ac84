use std::sync::atomic::Ordering;

use sha2::Digest;
use std::thread;
use std::time::{Duration, Instant};

use crate::helpers::{
    PgCluster, account_worth, assert_ledger_ok, balance, charged_queries, join, load,
    one_at_a_time, three_nodes,
};

/// A grant's TTL on the database clock (docs/cluster.md).
const TTL: Duration = Duration::from_secs(5);

#[test]
fn a_node_paused_past_its_grants_ttl_does_not_spend_the_expired_grant_when_it_resumes() {
    let _one = one_at_a_time();
    let Some(pg) = PgCluster::start() else { return };
    let queries = 500;
    let account = account_worth(&pg.url(), queries);
    let mut nodes = three_nodes(&pg.url());
    let paused_id = nodes[0].node_id();
    // Node 0 takes a grant, flushes what it answered (within 500 ms, `FLUSH_AGE`), and
    // is paused holding the rest (before its idle hand-back, 3 s).
    let mut answered = 0;
    for _ in 0..3 {
        assert_eq!(nodes[0].client().lookup(&account.api_key).0, 200);
        answered += 1;
    }
    thread::sleep(Duration::from_millis(1000));
    nodes[0].signal("STOP");
    let paused_at = Instant::now();
    let held = pg.i64(&format!(
        "SELECT coalesce(sum(remaining), 0)::bigint FROM leases WHERE node_id = {paused_id}"
    ));
    assert!(held > 0, "the paused node holds no grant");
    assert_eq!(charged_queries(&pg, &account.account_id), answered);

    // The other nodes spend the balance, the paused node's grant included once it expired.
    let (stop, threads) = load(&[&nodes[1], &nodes[2]], &account.api_key, 2);
    thread::sleep((TTL + Duration::from_secs(2)).saturating_sub(paused_at.elapsed()));
    let until = Instant::now() + Duration::from_secs(10);
    while balance(&pg, &account.account_id) > 0 && Instant::now() < until {
        thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    let seen = join(threads, 2);
    assert_eq!(
        balance(&pg, &account.account_id),
        0,
        "the balance was not spent"
    );
    // The paused node's grant expired on the database clock and was swept.
    assert_eq!(
        pg.i64(&format!(
            "SELECT count(*) FROM leases WHERE node_id = {paused_id}"
        )),
        0
    );

    // Resumed, the node must not answer from the grant it still has in memory.
    nodes[0].signal("CONT");
    let resumed: Vec<u16> = (0..20)
        .map(|_| nodes[0].client().lookup(&account.api_key).0)
        .collect();
    for node in &mut nodes {
        assert!(node.stop("TERM").success(), "{}", node.log());
    }
    assert!(seen.other.is_empty(), "{:?}", seen.other);
    // 402, or 503 while its first call after the pause times out (its clock ran on
    // through the pause), or no answer (0) on the first request: the client's kept-alive
    // connection, idle through the pause, is closed by the resumed server (seen once in
    // 6 runs: [0, 402, 402, ...]). Never 200.
    assert!(
        resumed.iter().all(|s| matches!(s, 0 | 402 | 503)) && resumed.contains(&402),
        "the resumed node answered {resumed:?}: {}",
        nodes[0]
            .log()
            .lines()
            .filter(|l| !l.contains(" access "))
            .collect::<Vec<_>>()
            .join("\n")
    );
    answered += seen.ok.len() as i64;
    let charged = charged_queries(&pg, &account.account_id);
    assert_eq!(charged, answered, "every answer charged, none forgiven");
    assert!(charged <= queries, "charged {charged} of {queries}");
    assert_ledger_ok(&pg);
}

#[test]
fn postgresql_down_longer_than_the_grant_ttl_gives_503s_then_recovers_and_charges_every_answer() {
    let _one = one_at_a_time();
    let Some(mut pg) = PgCluster::start() else {
        return;
    };
    let queries = 1_000_000;
    let account = account_worth(&pg.url(), queries);
    let mut nodes = three_nodes(&pg.url());
    let ids: Vec<i64> = nodes.iter().map(|n| n.node_id()).collect();
    let (stop, threads) = load(&nodes.iter().collect::<Vec<_>>(), &account.api_key, 2);
    thread::sleep(Duration::from_millis(1500));
    pg.crash();
    let down_at = Instant::now();
    // Past the TTL: every grant the nodes held has expired on the database clock and
    // on their own (until then they answer from them).
    thread::sleep(TTL);
    let mut during = Vec::new();
    let mut free = Vec::new();
    while down_at.elapsed() < TTL + Duration::from_secs(3) {
        during.extend(nodes.iter().map(|n| n.client().lookup(&account.api_key).0));
        free.extend(nodes.iter().map(|n| n.client().countries(&account.api_key)));
        thread::sleep(Duration::from_millis(250));
    }
    pg.restart();
    let until = Instant::now() + Duration::from_secs(15);
    let mut after = Vec::new();
    let mut probes_ok = 0;
    while Instant::now() < until {
        after = nodes
            .iter()
            .map(|n| n.client().lookup(&account.api_key).0)
            .collect();
        probes_ok += after.iter().filter(|s| **s == 200).count() as i64;
        if after.iter().all(|s| *s == 200) {
            break;
        }
        thread::sleep(Duration::from_millis(100));
    }
    thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let seen = join(threads, 3);
    for node in &mut nodes {
        assert!(node.stop("TERM").success(), "{}", node.log());
    }
    assert!(during.iter().all(|s| *s == 503), "{during:?}");
    assert!(free.iter().all(|s| *s == 200), "{free:?}");
    assert_eq!(after, vec![200; 3], "{}", nodes[0].log());
    assert!(seen.other.is_empty(), "{:?}", seen.other);
    let answered = seen.ok.len() as i64 + probes_ok;
    let charged = charged_queries(&pg, &account.account_id);
    assert_eq!(charged, answered, "503s: {}", seen.unavailable);
    // No money created: the balance is what it was less what was charged.
    assert_eq!(
        balance(&pg, &account.account_id),
        (queries - charged) * 28,
        "balance"
    );
    let left = pg.i64("SELECT count(*) FROM leases");
    if left > 0 {
        let node = pg.i64("SELECT min(node_id) FROM leases");
        let remaining = pg.i64("SELECT min(remaining) FROM leases");
        let age = pg.i64("SELECT extract(epoch from now() - min(expires_at))::bigint FROM leases");
        let registered = pg.i64(&format!(
            "SELECT count(*) FROM nodes WHERE node_id = {node}"
        ));
        let which = ids.iter().position(|id| *id == node);
        panic!(
            "lease left: node {node} (ours: {which:?}), remaining {remaining}, expired {age} s ago, node row {registered}\n{}",
            which
                .map(|i| nodes[i]
                    .log()
                    .lines()
                    .filter(|l| !l.contains(" access "))
                    .collect::<Vec<_>>()
                    .join("\n"))
                .unwrap_or_default()
        );
    }
    assert_ledger_ok(&pg);
}

#[test]
fn sigterm_of_a_node_under_load_hands_back_its_grants_and_flushes_every_answer() {
    let _one = one_at_a_time();
    let Some(pg) = PgCluster::start() else { return };
    let account = account_worth(&pg.url(), 1_000_000);
    let mut nodes = three_nodes(&pg.url());
    let stopped_id = nodes[1].node_id();
    let (stop, threads) = load(&nodes.iter().collect::<Vec<_>>(), &account.api_key, 2);
    thread::sleep(Duration::from_millis(1500));
    assert!(
        pg.i64(&format!(
            "SELECT count(*) FROM leases WHERE node_id = {stopped_id}"
        )) > 0,
        "the node holds no grant under load"
    );
    // What the node tells its operator (docs/cluster.md): its id, its grants, its flushes.
    let (status, ready) = nodes[1].readyz();
    assert_eq!(status, 200, "{ready}");
    assert!(
        ready["cluster"]["grantsHeld"].as_u64() >= Some(1),
        "{ready}"
    );
    assert!(
        ready["cluster"]["grantRequests"].as_u64() >= Some(1),
        "{ready}"
    );
    assert!(ready["cluster"]["flushes"].as_u64() >= Some(1), "{ready}");
    assert_eq!(ready["cluster"]["flushFailures"], 0, "{ready}");
    // The dataset: the SHA-256 of the file every node's copy was imported from.
    let source = testkit::tiny();
    let sha256 = hex::encode(sha2::Sha256::digest(std::fs::read(source).unwrap()));
    for node in &nodes {
        assert_eq!(node.readyz().1["cluster"]["datasetSha256"], sha256.as_str());
    }
    let metrics = nodes[1].metrics();
    for series in [
        format!("postal_cluster_node{{node_id=\"{stopped_id}\"}} 1"),
        format!("postal_cluster_dataset{{sha256=\"{sha256}\"}} 1"),
        "postal_ledger_flush_failures_total 0".to_string(),
    ] {
        assert!(
            metrics.lines().any(|l| l == series),
            "{series} not in {metrics}"
        );
    }
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("postal_cluster_grant_requests_total ") && !l.ends_with(" 0")),
        "{metrics}"
    );
    assert!(nodes[1].stop("TERM").success(), "{}", nodes[1].log());
    // At once, not after the TTL: its grants are handed back and its row is gone.
    let leases_left = pg.i64(&format!(
        "SELECT count(*) FROM leases WHERE node_id = {stopped_id}"
    ));
    let row_left = pg.i64(&format!(
        "SELECT count(*) FROM nodes WHERE node_id = {stopped_id}"
    ));
    let charged_by_it = pg.i64(&format!(
        "SELECT coalesce(sum(query_count), 0)::bigint FROM ledger
         WHERE node_id = {stopped_id} AND kind = 'charge'"
    ));
    thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let seen = join(threads, 3);
    for i in [0, 2] {
        assert!(nodes[i].stop("TERM").success(), "{}", nodes[i].log());
    }
    assert_eq!(leases_left, 0, "grants of the stopped node left");
    assert_eq!(row_left, 0, "the stopped node's row left");
    assert!(seen.other.is_empty(), "{:?}", seen.other);
    assert_eq!(seen.payment, 0);
    assert_eq!(
        charged_by_it,
        seen.ok_per_node[1].len() as i64,
        "charged by the stopped node against its answers"
    );
    let answered = seen.ok.len() as i64;
    assert_eq!(charged_queries(&pg, &account.account_id), answered);
    assert_eq!(pg.i64("SELECT count(*) FROM leases"), 0);
    assert_ledger_ok(&pg);
}
