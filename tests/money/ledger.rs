use serde_json::json;

use crate::helpers::TestDb;

#[test]
fn a_balance_tampered_with_by_sql_makes_ledger_verify_fail() {
    let db = TestDb::new();
    let honest = db.create_account();
    let tampered = db.create_account();
    db.conn()
        .execute(
            "UPDATE accounts SET balance = balance + 5000000 WHERE public_id = ?1",
            [&tampered.account_id],
        )
        .unwrap();
    let run = db.postal(&["ledger", "verify"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.json(),
        json!({
            "accounts": 2,
            "entries": 2,
            "ok": false,
            "offendingAccounts": [
                {"accountId": tampered.account_id, "balance": 5.028, "ledgerSum": 0.028}
            ]
        })
    );
    assert!(!run.json().to_string().contains(&honest.account_id));
}

#[test]
fn the_ledger_refuses_updates_and_deletes() {
    let db = TestDb::new();
    db.create_account();
    let conn = db.conn();
    let update = conn.execute("UPDATE ledger SET amount = 1", []);
    assert!(update.unwrap_err().to_string().contains("append-only"));
    let delete = conn.execute("DELETE FROM ledger", []);
    assert!(delete.unwrap_err().to_string().contains("append-only"));
}

#[test]
fn a_negative_balance_cannot_be_stored() {
    let db = TestDb::new();
    db.create_account();
    assert!(
        db.conn()
            .execute("UPDATE accounts SET balance = -1", [])
            .is_err()
    );
}
