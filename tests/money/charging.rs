use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::SystemTime;

use postal::db::accounts::{self, LimitsChange};
use postal::db::billing::apply;
use postal::db::{Charge, Refusal};
use postal::domain::money::Micros;

use crate::helpers::TestDb;

fn lookup(caller: postal::db::Caller, queries: u64) -> Charge {
    Charge {
        caller,
        queries,
        endpoint: "/api/lookup",
    }
}

#[test]
fn two_hundred_threads_on_an_account_worth_fifty_queries_get_exactly_fifty_charges() {
    let db = TestDb::new();
    let account = db.account_worth(50);
    let caller = db.caller(&account.api_key).unwrap();
    let billing = db.billing();
    let threads: Vec<_> = (0..200)
        .map(|_| {
            let billing = billing.clone();
            thread::spawn(move || billing.charge_blocking(lookup(caller, 1)).unwrap())
        })
        .collect();
    let outcomes: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    billing.shutdown();

    let charged: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
    assert_eq!(charged.len(), 50);
    assert!(
        outcomes
            .iter()
            .filter_map(|o| o.as_ref().err())
            .all(|r| *r == Refusal::InsufficientBalance)
    );
    // Every success saw its own balance: 49 x 28 down to 0, each once.
    let mut balances: Vec<i64> = charged.iter().map(|c| c.balance.get()).collect();
    balances.sort();
    assert_eq!(balances, (0..50).map(|i| i * 28).collect::<Vec<_>>());
    assert_eq!(db.balance(&account.account_id), Micros::ZERO);
    db.assert_ledger_ok();
}

#[test]
fn charges_stay_exact_while_another_process_tops_up() {
    let db = TestDb::new();
    let account = db.account_worth(50);
    let caller = db.caller(&account.api_key).unwrap();
    let billing = db.billing();
    let charged = Arc::new(AtomicU64::new(0));
    let topping_up = Arc::new(AtomicBool::new(true));
    let threads: Vec<_> = (0..200)
        .map(|_| {
            let billing = billing.clone();
            let charged = charged.clone();
            let topping_up = topping_up.clone();
            thread::spawn(move || {
                while topping_up.load(Ordering::Relaxed) {
                    match billing.charge_blocking(lookup(caller, 1)).unwrap() {
                        Ok(_) => charged.fetch_add(1, Ordering::Relaxed),
                        Err(Refusal::InsufficientBalance) => 0,
                        Err(other) => panic!("unexpected refusal {other:?}"),
                    };
                }
            })
        })
        .collect();
    for _ in 0..3 {
        let status = db
            .postal_command(&["account", "topup", &account.account_id, "--usd", "5"])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    }
    topping_up.store(false, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    billing.shutdown();

    let charged = charged.load(Ordering::Relaxed) as i64;
    assert!(charged > 50, "only {charged} charges passed");
    assert_eq!(
        db.balance(&account.account_id).get(),
        50 * 28 + 3 * 5_000_000 - charged * 28
    );
    db.assert_ledger_ok();
}

#[test]
fn a_batch_the_balance_cannot_cover_changes_nothing() {
    let db = TestDb::new();
    let account = db.account_worth(100);
    let caller = db.caller(&account.api_key).unwrap();
    let billing = db.billing();
    let entries = db.ledger_entries();

    let outcome = billing.charge_blocking(lookup(caller, 101)).unwrap();
    assert_eq!(outcome, Err(Refusal::InsufficientBalance));
    assert_eq!(db.balance(&account.account_id).get(), 2_800);
    assert_eq!(db.ledger_entries(), entries);

    let charged = billing
        .charge_blocking(lookup(caller, 100))
        .unwrap()
        .unwrap();
    assert_eq!(charged.balance, Micros::ZERO);
    assert_eq!(db.ledger_entries(), entries + 1);
    db.assert_ledger_ok();
}

#[test]
fn a_batch_a_window_cannot_cover_changes_nothing() {
    let db = TestDb::new();
    let account = db.account_worth(1_000);
    let caller = db.caller(&account.api_key).unwrap();
    accounts::set_limits(
        &mut db.conn(),
        &account.account_id,
        LimitsChange::Set {
            per_minute: Some(10),
            per_hour: None,
            per_day: Some(500),
        },
    )
    .unwrap();
    let billing = db.billing();
    let entries = db.ledger_entries();

    match billing.charge_blocking(lookup(caller, 11)).unwrap() {
        Err(Refusal::RateLimited { retry_after_secs }) => {
            assert!((1..=60).contains(&retry_after_secs))
        }
        other => panic!("expected 429, got {other:?}"),
    }
    assert_eq!(db.balance(&account.account_id).get(), 28_000);
    assert_eq!(db.ledger_entries(), entries);
    let status = accounts::status(&db.conn(), caller.account_id, SystemTime::now()).unwrap();
    assert_eq!(status.rate.per_minute.current, Some(0));

    let charged = billing.charge_blocking(lookup(caller, 8)).unwrap().unwrap();
    assert!(charged.rate.enabled);
    assert_eq!(charged.rate.per_minute.limit, Some(10));
    assert_eq!(charged.rate.per_minute.current, Some(8));
    assert!(charged.rate.per_minute.approaching_limit);
    assert_eq!(charged.rate.per_hour.limit, None);
    assert_eq!(charged.rate.per_hour.current, None);
    assert_eq!(charged.rate.per_day.current, Some(8));
    assert!(!charged.rate.per_day.approaching_limit);
    assert_eq!(charged.balance.get(), 28_000 - 8 * 28);
    db.assert_ledger_ok();
}

#[test]
fn refused_charges_in_a_batch_leave_the_others_alone() {
    let db = TestDb::new();
    let account = db.account_worth(10);
    let caller = db.caller(&account.api_key).unwrap();
    let mut conn = db.conn();
    let outcomes = apply(
        &mut conn,
        &[
            lookup(caller, 4),
            lookup(caller, 7), // only 6 left: refused whole
            Charge {
                endpoint: "/api/validate-bulk",
                ..lookup(caller, 6)
            },
            lookup(caller, 1), // nothing left
        ],
        SystemTime::now(),
    )
    .unwrap();
    assert_eq!(outcomes[0].unwrap().balance.get(), 6 * 28);
    assert_eq!(outcomes[1], Err(Refusal::InsufficientBalance));
    assert_eq!(outcomes[2].unwrap().balance.get(), 0);
    assert_eq!(outcomes[3], Err(Refusal::InsufficientBalance));
    // One row per endpoint, each with its query count and the balance after it.
    let rows: Vec<(String, i64, i64, i64)> = conn
        .prepare(
            "SELECT endpoint, query_count, amount, balance_after FROM ledger
             WHERE kind = 'charge' ORDER BY id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        rows,
        vec![
            ("/api/lookup".to_owned(), 4, -112, 168),
            ("/api/validate-bulk".to_owned(), 6, -168, 0),
        ]
    );
    db.assert_ledger_ok();
}

#[test]
fn a_revoked_key_fails_while_a_sibling_key_works() {
    let db = TestDb::new();
    let account = db.create_account();
    let sibling = db.postal(&["key", "create", &account.account_id]).json();
    let first = db.caller(&account.api_key).unwrap();
    let second = db.caller(sibling["apiKey"].as_str().unwrap()).unwrap();
    assert_eq!(first.account_id, second.account_id);
    let billing = db.billing();
    assert!(billing.charge_blocking(lookup(first, 1)).unwrap().is_ok());

    // Revoked by another process while the writer runs.
    let run = db.postal(&["key", "revoke", &account.key_id]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    assert_eq!(
        billing.charge_blocking(lookup(first, 1)).unwrap(),
        Err(Refusal::InvalidKey)
    );
    let charged = billing.charge_blocking(lookup(second, 1)).unwrap().unwrap();
    assert_eq!(charged.balance.get(), 28_000 - 2 * 28);
    assert_eq!(db.caller(&account.api_key), None);
    assert_eq!(db.caller("pk_not_a_key"), None);
    assert_eq!(
        accounts::check(&db.conn(), &first, 1, SystemTime::now()).unwrap(),
        Err(Refusal::InvalidKey)
    );
    db.assert_ledger_ok();
}

#[test]
fn check_and_status_answer_without_charging() {
    let db = TestDb::new();
    let account = db.account_worth(3);
    let caller = db.caller(&account.api_key).unwrap();
    let conn = db.conn();
    let now = SystemTime::now();
    let status = accounts::check(&conn, &caller, 3, now).unwrap().unwrap();
    assert_eq!(status.balance.get(), 84);
    assert!(!status.rate.enabled);
    assert_eq!(
        accounts::check(&conn, &caller, 4, now).unwrap(),
        Err(Refusal::InsufficientBalance)
    );
    assert_eq!(
        accounts::status(&conn, caller.account_id, now).unwrap(),
        status
    );
    assert_eq!(db.balance(&account.account_id).get(), 84);
}

#[test]
fn window_counters_survive_a_restart_of_the_writer() {
    let db = TestDb::new();
    let account = db.create_account();
    let caller = db.caller(&account.api_key).unwrap();
    db.postal(&["account", "limits", &account.account_id, "--per-day", "100"]);
    let billing = db.billing();
    billing
        .charge_blocking(lookup(caller, 60))
        .unwrap()
        .unwrap();
    billing.shutdown();
    drop(billing);

    let billing = db.billing();
    assert!(matches!(
        billing.charge_blocking(lookup(caller, 41)).unwrap(),
        Err(Refusal::RateLimited { .. })
    ));
    let charged = billing
        .charge_blocking(lookup(caller, 40))
        .unwrap()
        .unwrap();
    assert_eq!(charged.rate.per_day.current, Some(100));
}

#[test]
fn after_shutdown_charges_fail_and_earlier_ones_were_answered() {
    let db = TestDb::new();
    let account = db.create_account();
    let caller = db.caller(&account.api_key).unwrap();
    let billing = db.billing();
    let pending: Vec<_> = (0..20)
        .map(|_| {
            let billing = billing.clone();
            thread::spawn(move || billing.charge_blocking(lookup(caller, 1)))
        })
        .collect();
    let answered: Vec<_> = pending.into_iter().map(|t| t.join().unwrap()).collect();
    billing.shutdown();
    billing.shutdown();
    assert!(answered.iter().all(|a| matches!(a, Ok(Ok(_)))));
    assert!(billing.charge_blocking(lookup(caller, 1)).is_err());
    assert_eq!(db.balance(&account.account_id).get(), 28_000 - 20 * 28);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_callers_are_answered_through_the_same_writer() {
    let db = TestDb::new();
    let account = db.account_worth(100);
    let caller = db.caller(&account.api_key).unwrap();
    let billing = db.billing();
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let billing = billing.clone();
            tokio::spawn(async move { billing.charge(lookup(caller, 2)).await.unwrap() })
        })
        .collect();
    let mut charged = 0;
    for task in tasks {
        if task.await.unwrap().is_ok() {
            charged += 1;
        }
    }
    assert_eq!(charged, 50);
    assert_eq!(db.balance(&account.account_id), Micros::ZERO);
    let billing_for_shutdown = billing.clone();
    tokio::task::spawn_blocking(move || billing_for_shutdown.shutdown())
        .await
        .unwrap();
}

#[test]
fn changes_committed_by_others_hold_from_the_next_charge() {
    let db = TestDb::new();
    let account = db.account_worth(10);
    let caller = db.caller(&account.api_key).unwrap();
    let billing = db.billing();
    assert_eq!(
        billing
            .charge_blocking(lookup(caller, 4))
            .unwrap()
            .unwrap()
            .balance
            .get(),
        6 * 28
    );
    // Another process lowers the balance to 2 queries: a charge of 3 is now refused.
    let run = db.postal(&[
        "account",
        "adjust",
        &account.account_id,
        "--usd",
        "-0.000112",
        "--reason",
        "test",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        billing.charge_blocking(lookup(caller, 3)).unwrap(),
        Err(Refusal::InsufficientBalance)
    );
    // Another process sets a daily limit below what was used today.
    db.postal(&["account", "limits", &account.account_id, "--per-day", "5"]);
    assert!(matches!(
        billing.charge_blocking(lookup(caller, 2)).unwrap(),
        Err(Refusal::RateLimited { .. })
    ));
    db.postal(&["account", "limits", &account.account_id, "--off"]);
    let charged = billing.charge_blocking(lookup(caller, 2)).unwrap().unwrap();
    assert_eq!(charged.balance, Micros::ZERO);
    assert!(!charged.rate.enabled);
    db.assert_ledger_ok();
}

#[test]
fn one_transaction_over_many_accounts_records_one_row_per_account_and_endpoint() {
    let db = TestDb::new();
    let callers: Vec<_> = (0..90)
        .map(|_| db.caller(&db.create_account().api_key).unwrap())
        .collect();
    let mut charges = Vec::new();
    for endpoint in ["/api/lookup", "/api/validate"] {
        for round in 1..=2 {
            for caller in &callers {
                charges.push(Charge {
                    caller: *caller,
                    queries: round,
                    endpoint,
                });
            }
        }
    }
    let entries = db.ledger_entries();
    let outcomes = apply(&mut db.conn(), &charges, SystemTime::now()).unwrap();
    assert!(outcomes.iter().all(|o| o.is_ok()));
    // Each account: 1 + 2 lookups, then 1 + 2 validations, 6 queries in all.
    let last = outcomes[charges.len() - 1].unwrap();
    assert_eq!(last.balance.get(), 28_000 - 6 * 28);
    assert_eq!(db.ledger_entries(), entries + 90 * 2);
    let (rows, queries): (i64, i64) = db
        .conn()
        .query_row(
            "SELECT count(*), sum(query_count) FROM ledger
             WHERE kind = 'charge' AND balance_after = 28000 - 6 * 28 AND endpoint = '/api/validate'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((rows, queries), (90, 270));
    db.assert_ledger_ok();
}
