//! The books in memory (`billing`) driven directly: exactness under concurrency,
//! all-or-nothing batches, the flush (deltas, one row per account and endpoint), window
//! counters across restarts, CLI changes held from the next charge, the serve lock.

use std::time::Duration;

use postal::billing::{BillingError, BillingOptions};
use postal::domain::charge::{Endpoint, Refusal};
use postal::domain::money::Micros;

use crate::helpers::TestDb;

fn refused(e: &BillingError) -> Refusal {
    match e {
        BillingError::Refused(r) => *r,
        other => panic!("not a refusal: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn two_hundred_tasks_on_an_account_worth_fifty_queries_get_exactly_fifty_charges() {
    for durable in [false, true] {
        let db = TestDb::new();
        let account = db.account_worth(50);
        let caller = db.caller(&account.api_key).unwrap();
        let billing = db.billing_with(BillingOptions {
            durable,
            ..BillingOptions::default()
        });
        let tasks: Vec<_> = (0..200)
            .map(|_| {
                let billing = billing.clone();
                tokio::spawn(async move {
                    let charged = billing.charge(caller, 1, Endpoint::Lookup).await?;
                    if durable {
                        billing.committed(&charged).await?;
                    }
                    Ok::<_, BillingError>(charged)
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for task in tasks {
            outcomes.push(task.await.unwrap());
        }
        billing.shutdown();

        let charged: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
        assert_eq!(charged.len(), 50, "durable: {durable}");
        assert!(
            outcomes
                .iter()
                .filter_map(|o| o.as_ref().err())
                .all(|e| refused(e) == Refusal::InsufficientBalance)
        );
        // Every success saw its own balance: 49 x 28 down to 0, each once.
        let mut balances: Vec<i64> = charged.iter().map(|c| c.balance.get()).collect();
        balances.sort();
        assert_eq!(balances, (0..50).map(|i| i * 28).collect::<Vec<_>>());
        assert_eq!(db.balance(&account.account_id), Micros::ZERO);
        assert_eq!(db.charged_queries(), 50);
        db.assert_ledger_ok();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn racing_bulk_batches_are_charged_whole_or_not_at_all() {
    let db = TestDb::new();
    let account = db.account_worth(50);
    let caller = db.caller(&account.api_key).unwrap();
    let billing = db.billing();
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let billing = billing.clone();
            tokio::spawn(async move {
                billing
                    .charge(caller, 3, Endpoint::ValidateBulk)
                    .await
                    .is_ok()
            })
        })
        .collect();
    let mut accepted = 0;
    for task in tasks {
        accepted += usize::from(task.await.unwrap());
    }
    billing.shutdown();
    assert_eq!(accepted, 16); // 48 of the 50 queries; 2 left cannot take a batch of 3
    assert_eq!(db.balance(&account.account_id).get(), 2 * 28);
    assert_eq!(db.charged_queries(), 48);
    db.assert_ledger_ok();
}

#[tokio::test]
async fn a_flush_writes_one_ledger_row_per_account_and_endpoint() {
    let db = TestDb::new();
    let first = db.create_account();
    let second = db.create_account();
    let a = db.caller(&first.api_key).unwrap();
    let b = db.caller(&second.api_key).unwrap();
    // A long interval: everything below lands in one flush, the one at shutdown.
    let billing = db.billing_with(BillingOptions {
        flush_interval: Duration::from_secs(60),
        durable: false,
    });
    let entries = db.ledger_entries();
    for _ in 0..5 {
        billing.charge(a, 1, Endpoint::Lookup).await.unwrap();
        billing.charge(a, 2, Endpoint::ValidateBulk).await.unwrap();
        billing.charge(b, 1, Endpoint::Lookup).await.unwrap();
    }
    // Nothing is written before the flush.
    assert_eq!(db.ledger_entries(), entries);
    billing.shutdown();
    assert_eq!(db.ledger_entries(), entries + 3);
    let rows: Vec<(String, i64, i64)> = db
        .conn()
        .prepare(
            "SELECT endpoint, query_count, amount FROM ledger WHERE kind = 'charge'
             ORDER BY account_id, endpoint",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        rows,
        vec![
            ("lookup".to_string(), 5, -140),
            ("validate-bulk".to_string(), 10, -280),
            ("lookup".to_string(), 5, -140),
        ]
    );
    db.assert_ledger_ok();
}

#[tokio::test]
async fn window_counters_survive_a_restart() {
    let db = TestDb::new();
    let account = db.create_account();
    let caller = db.caller(&account.api_key).unwrap();
    db.postal(&["account", "limits", &account.account_id, "--per-day", "100"]);
    let billing = db.billing();
    billing
        .charge(caller, 60, Endpoint::ValidateBulk)
        .await
        .unwrap();
    billing.shutdown();
    drop(billing);

    let billing = db.billing();
    let over = billing
        .charge(caller, 41, Endpoint::ValidateBulk)
        .await
        .unwrap_err();
    assert!(matches!(refused(&over), Refusal::RateLimited { .. }));
    let charged = billing
        .charge(caller, 40, Endpoint::ValidateBulk)
        .await
        .unwrap();
    assert_eq!(charged.rate.per_day.current, Some(100));
}

#[tokio::test]
async fn cli_changes_hold_from_the_next_charge_and_flushes_never_overwrite_them() {
    let db = TestDb::new();
    let account = db.account_worth(3);
    let caller = db.caller(&account.api_key).unwrap();
    let billing = db.billing_with(BillingOptions {
        flush_interval: Duration::from_secs(60),
        durable: false,
    });
    // What `postal serve` runs beside its books: CLI commands announce their commits.
    let listener = postal::billing::notify::Listener::start(&db.path, billing.clone()).unwrap();
    billing
        .charge(caller, 2, Endpoint::ValidateBulk)
        .await
        .unwrap();
    // Charged in memory, not flushed; the CLI tops up the stored balance meanwhile.
    let run = db.postal(&["account", "topup", &account.account_id, "--usd", "5"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let charged = billing.charge(caller, 1, Endpoint::Lookup).await.unwrap();
    assert_eq!(charged.balance.get(), 5_000_000 + 3 * 28 - 3 * 28);
    let run = db.postal(&[
        "account",
        "limits",
        &account.account_id,
        "--per-minute",
        "3",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let over = billing
        .charge(caller, 1, Endpoint::Lookup)
        .await
        .unwrap_err();
    assert!(matches!(refused(&over), Refusal::RateLimited { .. }));
    let run = db.postal(&["key", "revoke", &account.key_id]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let revoked = billing
        .charge(caller, 1, Endpoint::Lookup)
        .await
        .unwrap_err();
    assert_eq!(refused(&revoked), Refusal::InvalidKey);
    drop(listener);
    billing.shutdown();
    assert_eq!(db.balance(&account.account_id).get(), 5_000_000);
    db.assert_ledger_ok();
}

#[test]
fn a_second_server_on_the_same_file_is_refused() {
    let db = TestDb::new();
    let billing = db.billing();
    let second = postal::billing::Billing::start(&db.path, BillingOptions::default());
    let message = format!("{:#}", second.err().expect("refused"));
    assert!(
        message.contains("another `postal serve` is already running"),
        "{message}"
    );
    billing.shutdown();
    drop(billing);
    // Released with the first.
    db.billing().shutdown();
}

#[tokio::test]
async fn after_shutdown_charges_are_refused_and_earlier_ones_are_in_the_ledger() {
    let db = TestDb::new();
    let account = db.create_account();
    let caller = db.caller(&account.api_key).unwrap();
    let billing = db.billing();
    for _ in 0..20 {
        billing.charge(caller, 1, Endpoint::Lookup).await.unwrap();
    }
    billing.shutdown();
    billing.shutdown();
    assert!(matches!(
        billing.charge(caller, 1, Endpoint::Lookup).await,
        Err(BillingError::Unavailable(_))
    ));
    assert_eq!(db.charged_queries(), 20);
    db.assert_ledger_ok();
}

/// The change socket is its owner's alone: mode 0600; a request other than `changed` or
/// `flush` (or 64 bytes without a newline: the read is bounded) is answered `error unknown
/// request`. As root:
/// a connection of another uid is closed unanswered (even through a socket made
/// world-writable), and a socket another user owns is not trusted (`notify::flush`, which
/// `postal backup` calls, refuses it).
#[test]
fn the_change_socket_is_its_owners_alone_and_answers_only_its_two_requests() {
    use std::io::{Read, Write};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::os::unix::net::UnixStream;
    use std::os::unix::process::CommandExt;

    let db = TestDb::new();
    let billing = db.billing();
    let listener = postal::billing::notify::Listener::start(&db.path, billing.clone()).unwrap();
    let socket = postal::billing::notify::socket_path(&db.path);
    assert_eq!(std::fs::metadata(&socket).unwrap().mode() & 0o777, 0o600);
    let ask = |line: &[u8]| -> String {
        let mut stream = UnixStream::connect(&socket).unwrap();
        stream.write_all(line).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    };
    assert_eq!(ask(b"changed\n"), "ok\n");
    assert_eq!(ask(b"flush\n"), "ok\n");
    assert_eq!(ask(b"reload everything\n"), "error unknown request\n");
    // 64 bytes and no newline: answered at once, not after waiting for the rest.
    assert_eq!(ask(&[b'x'; 64]), "error unknown request\n");

    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // The other user may reach the socket (its directory searchable), and write it.
        let parent = socket.parent().unwrap();
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o711)).unwrap();
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
        let other = std::process::Command::new("/usr/bin/perl")
            .args([
                "-MIO::Socket::UNIX",
                "-e",
                "$SIG{PIPE} = 'IGNORE'; \
                 my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die $!; \
                 print $s \"changed\\n\"; my $n = sysread($s, my $a, 100); \
                 print $n ? \"answered $a\" : \"no answer\";",
            ])
            .arg(&socket)
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        assert_eq!(
            (
                String::from_utf8_lossy(&other.stdout).as_ref(),
                String::from_utf8_lossy(&other.stderr).as_ref()
            ),
            ("no answer", "")
        );
        // A socket others may write is not trusted either.
        assert!(
            postal::billing::notify::flush(&db.path)
                .unwrap_err()
                .to_string()
                .contains("may be written by other users (mode 666)")
        );
        std::os::unix::fs::chown(&socket, Some(65534), None).unwrap();
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600)).unwrap();
        let refused = postal::billing::notify::flush(&db.path).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("is owned by uid 65534, not by the database's owner (uid 0)"),
            "{refused}"
        );
    }
    drop(listener);
    billing.shutdown();
}
