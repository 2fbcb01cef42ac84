use std::time::{Duration, SystemTime};

use postal::db::pg::{self, node};
use postal::db::rows::ChargeRow;
use postal::domain::charge::Endpoint;
use postal::domain::money::Micros;

use crate::helpers::{PgCluster, account_worth, assert_ledger_ok, one_at_a_time};

#[test]
fn a_flush_retried_under_its_number_is_applied_once() {
    let _one = one_at_a_time();
    let Some(pg) = PgCluster::start() else {
        return;
    };
    let account = account_worth(&pg.url(), 100);
    let id = pg.i64(&format!(
        "SELECT id FROM accounts WHERE public_id = '{}'",
        account.account_id
    ));
    let key_id = pg.i64(&format!(
        "SELECT id FROM api_keys WHERE account_id = {id} ORDER BY id LIMIT 1"
    ));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let ledger = pg::LedgerConfig::parse(&pg.url(), None).unwrap();
        let mut client = pg::connect(&ledger).await.unwrap();
        node::register(&client, 42).await.unwrap();
        let m = |v: i64| Micros::new(v).unwrap();
        let ttl = Duration::from_secs(5);
        let grant = node::grants(&mut client, 42, &[(id, m(280), m(280))], ttl)
            .await
            .unwrap()
            .remove(0);
        assert_eq!(grant.remaining, m(280));
        let charges = [ChargeRow {
            account_id: id,
            key_id,
            endpoint: Endpoint::Lookup,
            queries: 3,
            amount: m(84),
        }];
        let flush = node::Flush {
            node_id: 42,
            number: 1,
            at: SystemTime::now(),
            charges: &charges,
            returns: &[],
            topups: &[],
            answers: &[],
            released: &[],
            ttl,
        };
        let first = node::flush(&mut client, &flush).await.unwrap();
        assert!(!first.replayed);
        // Its COMMIT's answer lost: the same batch again, under the same number.
        let again = node::flush(&mut client, &flush).await.unwrap();
        assert!(again.replayed);
        assert_eq!(again.grants, first.grants);
        assert_eq!(first.grants[0].remaining, m(196));
        // The next batch hands back the rest.
        let back = node::flush(
            &mut client,
            &node::Flush {
                number: 2,
                charges: &[],
                returns: &[(id, m(196))],
                ..flush
            },
        )
        .await
        .unwrap();
        assert!(back.grants.is_empty());
        node::close(&mut client, 42).await.unwrap();
    });
    assert_eq!(
        pg.i64(&format!("SELECT balance FROM accounts WHERE id = {id}")),
        100 * 28 - 84
    );
    assert_eq!(
        pg.i64(&format!(
            "SELECT count(*) FROM ledger WHERE account_id = {id} AND kind = 'charge'"
        )),
        1
    );
    assert_eq!(
        pg.i64(&format!(
            "SELECT queries FROM usage_days WHERE account_id = {id} AND key_id = {key_id}"
        )),
        3,
        "the replayed batch is counted once per key too"
    );
    assert_eq!(pg.i64("SELECT count(*) FROM leases"), 0);
    assert_ledger_ok(&pg);
}
