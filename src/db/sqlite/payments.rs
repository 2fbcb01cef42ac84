//! Top-ups by card (docs/payments.md): the processor's settings, the top-ups customers
//! start, their credit (once: the top-up's status moves to `paid` in the transaction that
//! writes its ledger row) and their refunds. The twin of `db::pg::payments`.

use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};
use secrecy::ExposeSecret;

use crate::db::admin::{AccountError, Credited, Payment, PaymentSettings, Refunded, TopupView};
use crate::db::sqlite::accounts::write_change;
use crate::db::sqlite::decode::find_account;
use crate::domain::admin::BalanceChange;
use crate::domain::ids::{AccountId, TopupId};
use crate::domain::money::Micros;
use crate::domain::payments::{self, Clawback, TopupStatus};

pub fn set_settings(
    conn: &mut Connection,
    s: &PaymentSettings,
    now: i64,
) -> Result<(), AccountError> {
    conn.execute(
        "INSERT INTO payment_settings
             (id, processor, secret_key, webhook_secret, api_base, max_topup, updated_at)
         VALUES (1, 'stripe', ?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (id) DO UPDATE SET secret_key = excluded.secret_key,
             webhook_secret = excluded.webhook_secret, api_base = excluded.api_base,
             max_topup = excluded.max_topup, updated_at = excluded.updated_at",
        params![
            s.secret_key.expose_secret(),
            s.webhook_secret.expose_secret(),
            s.api_base,
            s.max_topup,
            now
        ],
    )?;
    Ok(())
}

pub fn settings(conn: &Connection) -> Result<Option<PaymentSettings>, AccountError> {
    Ok(conn
        .query_row(
            "SELECT secret_key, webhook_secret, api_base, max_topup FROM payment_settings",
            [],
            |r| {
                Ok(PaymentSettings {
                    secret_key: r.get::<_, String>(0)?.into(),
                    webhook_secret: r.get::<_, String>(1)?.into(),
                    api_base: r.get(2)?,
                    max_topup: r.get(3)?,
                })
            },
        )
        .optional()?)
}

/// Turns card payments off; whether they were on. Without settings no webhook can be
/// verified: a top-up paid meanwhile is credited when Stripe's retries find them back on.
pub fn clear_settings(conn: &mut Connection) -> Result<bool, AccountError> {
    Ok(conn.execute("DELETE FROM payment_settings", [])? > 0)
}

/// A new pending top-up of `amount` for the account; its public id. Refused beyond
/// [`payments::MAX_PENDING_TOPUPS`] unpaid ones of the last 24 hours.
pub fn new_topup(
    conn: &mut Connection,
    account_id: &AccountId,
    amount: Micros,
    now: i64,
) -> Result<TopupId, AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (rowid, _) = find_account(&tx, account_id)?;
    let frozen: Option<String> = tx.query_row(
        "SELECT topups_frozen FROM accounts WHERE id = ?1",
        [rowid],
        |r| r.get(0),
    )?;
    if frozen.is_some() {
        return Err(AccountError::Forbidden(payments::TOPUPS_FROZEN.to_owned()));
    }
    sweep(&tx, rowid, now)?;
    let pending: i64 = tx.query_row(
        "SELECT count(*) FROM topups
         WHERE account_id = ?1 AND status = 'pending' AND created_at > ?2",
        params![rowid, now - payments::PENDING_WINDOW_SECS],
        |r| r.get(0),
    )?;
    if pending >= payments::MAX_PENDING_TOPUPS {
        return Err(AccountError::Invalid(payments::too_many_pending()));
    }
    let topup_id = TopupId::fresh();
    tx.execute(
        "INSERT INTO topups (public_id, account_id, amount, status, created_at)
         VALUES (?1, ?2, ?3, 'pending', ?4)",
        params![topup_id, rowid, amount, now],
    )?;
    tx.commit()?;
    Ok(topup_id)
}

/// Pending top-ups that can no longer be paid: without a session after a minute (the
/// server stopped between the row and Stripe's answer) `failed`; a day and an hour old
/// (Stripe expires an unpaid session after 24 hours) `expired`. A payment that still comes
/// for one is credited: only `paid` is final.
fn sweep(conn: &Connection, account_row: i64, now: i64) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE topups SET status = CASE WHEN session_id IS NULL THEN 'failed' ELSE 'expired' END,
             url = NULL
         WHERE account_id = ?1 AND status = 'pending'
           AND ((session_id IS NULL AND created_at < ?2) OR created_at < ?3)",
        params![
            account_row,
            now - payments::SESSIONLESS_SECS,
            now - payments::STALE_PENDING_SECS
        ],
    )?;
    Ok(())
}

/// The processor made the top-up's session: its id and payment page.
pub fn topup_opened(
    conn: &mut Connection,
    topup_id: &TopupId,
    session_id: &str,
    url: &str,
) -> Result<(), AccountError> {
    conn.execute(
        "UPDATE topups SET session_id = ?2, url = ?3
         WHERE public_id = ?1 AND session_id IS NULL",
        params![topup_id, session_id, url],
    )?;
    Ok(())
}

/// A pending top-up (by its id or its session's) ends unpaid: `expired` or `failed`.
/// Whether it was pending.
pub fn close_topup(
    conn: &mut Connection,
    topup_id: Option<&TopupId>,
    session_id: Option<&str>,
    status: TopupStatus,
) -> Result<bool, AccountError> {
    Ok(conn.execute(
        "UPDATE topups SET status = ?3, url = NULL
         WHERE (public_id = ?1 OR session_id = ?2) AND status = 'pending'",
        params![topup_id, session_id, status],
    )? > 0)
}

const TOPUP_COLUMNS: &str = "t.public_id, t.amount, t.status, t.session_id, t.url, t.payment,
    t.credited, t.refunded, t.taken_back, t.created_at, t.paid_at";

fn topup_at(r: &Row<'_>) -> rusqlite::Result<TopupView> {
    Ok(TopupView {
        topup_id: r.get(0)?,
        amount: r.get(1)?,
        status: r.get(2)?,
        session_id: r.get(3)?,
        url: r.get(4)?,
        payment: r.get(5)?,
        credited: r.get(6)?,
        refunded: r.get(7)?,
        taken_back: r.get(8)?,
        created_at: r.get(9)?,
        paid_at: r.get(10)?,
    })
}

/// The account's top-ups, newest first.
pub fn topups(conn: &Connection, account_id: &AccountId) -> Result<Vec<TopupView>, AccountError> {
    let (rowid, _) = find_account(conn, account_id)?;
    let mut stmt = conn.prepare(&format!(
        "SELECT {TOPUP_COLUMNS} FROM topups t WHERE t.account_id = ?1 ORDER BY t.id DESC"
    ))?;
    let rows = stmt
        .query_map([rowid], topup_at)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

/// Credits a confirmed payment to its top-up's account, once.
pub fn credit(conn: &mut Connection, paid: &Payment, now: i64) -> Result<Credited, AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // By the session, or (its id never stored: a crash after the processor made it) by
    // the top-up the session names, which has no other session.
    let found = tx
        .query_row(
            "SELECT t.id, t.public_id, t.status, a.id, a.public_id, a.balance, t.amount
             FROM topups t JOIN accounts a ON a.id = t.account_id
             WHERE t.session_id = ?1 OR (t.public_id = ?2 AND t.session_id IS NULL)
             ORDER BY t.session_id IS NULL LIMIT 1",
            params![paid.session_id, paid.topup_id],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, TopupId>(1)?,
                    r.get::<_, TopupStatus>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, AccountId>(4)?,
                    r.get::<_, Micros>(5)?,
                    r.get::<_, Micros>(6)?,
                ))
            },
        )
        .optional()?;
    let Some((id, topup_id, status, account_row, account_id, balance, asked)) = found else {
        return Ok(Credited::Unknown);
    };
    if paid.account_id.as_ref().is_some_and(|a| *a != account_id) {
        return Ok(Credited::Unknown);
    }
    if status == TopupStatus::Paid {
        return Ok(Credited::Already { topup_id });
    }
    let frozen: Option<String> = tx.query_row(
        "SELECT topups_frozen FROM accounts WHERE id = ?1",
        [account_row],
        |r| r.get(0),
    )?;
    let refused = Credited::refused(&account_id, &topup_id, frozen, paid, asked);
    if let Some(refused) = refused {
        // Failed, with its payment: a refund of it finds nothing credited to take back.
        tx.execute(
            "UPDATE topups SET status = 'failed', session_id = ?2, payment = ?3, url = NULL
             WHERE id = ?1",
            params![id, paid.session_id, paid.payment],
        )?;
        tx.commit()?;
        return Ok(refused);
    }
    let change = BalanceChange::paid(
        paid.amount,
        payments::credit_note(&paid.session_id, paid.payment.as_deref()),
    )?;
    let after = write_change(&tx, account_row, balance, &change, now)?;
    tx.execute(
        "UPDATE topups SET status = 'paid', session_id = ?2, payment = ?3, credited = ?4,
             paid_at = ?5, url = NULL
         WHERE id = ?1",
        params![id, paid.session_id, paid.payment, paid.amount, now],
    )?;
    tx.commit()?;
    Ok(Credited::Now {
        account_id,
        topup_id,
        amount: paid.amount,
        balance: after,
    })
}

/// Takes back what the processor refunded of `payment` beyond what was counted before
/// (a refund's running total; a dispute: all that is left, once per dispute id, and the
/// account's top-ups frozen), never below a zero balance. `topup_id`: the top-up the
/// charge's metadata (or its PaymentIntent's session) names, to tell one that came before
/// its credit.
pub fn refund(
    conn: &mut Connection,
    payment: &str,
    topup_id: Option<&TopupId>,
    clawback: &Clawback,
    now: i64,
) -> Result<Refunded, AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found = tx
        .query_row(
            "SELECT t.id, t.public_id, t.credited, t.refunded, a.id, a.public_id, a.balance
             FROM topups t JOIN accounts a ON a.id = t.account_id
             WHERE t.payment = ?1 AND t.status = 'paid'",
            [payment],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, TopupId>(1)?,
                    r.get::<_, Micros>(2)?,
                    r.get::<_, Micros>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, AccountId>(5)?,
                    r.get::<_, Micros>(6)?,
                ))
            },
        )
        .optional()?;
    let Some((id, topup_id, credited, counted, account_row, account_id, balance)) = found else {
        let uncredited = tx
            .query_row(
                "SELECT 1 FROM topups WHERE public_id = ?1 AND status IN ('pending', 'expired')",
                [topup_id],
                |_| Ok(()),
            )
            .optional()?;
        return Ok(match uncredited {
            Some(()) => Refunded::Early,
            None => Refunded::Unknown,
        });
    };
    if let Clawback::Dispute { dispute } = clawback {
        let seen = tx
            .query_row(
                "SELECT 1 FROM disputes WHERE dispute = ?1",
                [dispute],
                |_| Ok(()),
            )
            .optional()?;
        if seen.is_some() {
            return Ok(Refunded::Already);
        }
    }
    let total = clawback.total(credited);
    let owed = total
        .checked_sub(counted)
        .unwrap_or(Micros::ZERO)
        .max(Micros::ZERO);
    let freezes = clawback.freezes(topup_id.as_str(), payment);
    if owed == Micros::ZERO && freezes.is_none() {
        return Ok(Refunded::Already);
    }
    let split = payments::refund_split(balance, Micros::ZERO, owed);
    let mut after = balance;
    if split.taken > Micros::ZERO {
        let change = BalanceChange::refund(clawback, payment, owed, split)?;
        after = write_change(&tx, account_row, balance, &change, now)?;
    }
    tx.execute(
        "UPDATE topups SET refunded = max(refunded, ?2), taken_back = taken_back + ?3
         WHERE id = ?1",
        params![id, total, split.taken],
    )?;
    if let (Clawback::Dispute { dispute }, Some(why)) = (clawback, freezes) {
        tx.execute(
            "INSERT INTO disputes (dispute, topup_id, owed, taken_back, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![dispute, id, owed, split.taken, now],
        )?;
        tx.execute(
            "UPDATE accounts SET topups_frozen = ?2 WHERE id = ?1",
            params![account_row, why],
        )?;
    }
    tx.commit()?;
    Ok(Refunded::Now {
        account_id,
        topup_id,
        owed,
        split,
        balance: after,
    })
}

/// Lifts the account's freeze of top-ups: why it was frozen, or `None` when it was not.
pub fn unfreeze(
    conn: &mut Connection,
    account_id: &AccountId,
) -> Result<Option<String>, AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (rowid, _) = find_account(&tx, account_id)?;
    let was: Option<String> = tx.query_row(
        "SELECT topups_frozen FROM accounts WHERE id = ?1",
        [rowid],
        |r| r.get(0),
    )?;
    if was.is_some() {
        tx.execute(
            "UPDATE accounts SET topups_frozen = NULL WHERE id = ?1",
            [rowid],
        )?;
    }
    tx.commit()?;
    Ok(was)
}
