//! Top-ups by card in the ledger, shared by every node: any node may receive the
//! processor's webhook, and the top-up's row (locked) is credited once. A credit or a
//! refund bumps the version (`changes::bump`), as `account topup` does, for the nodes to
//! hold it from the next request. The twin of `db::sqlite::payments`.

use secrecy::ExposeSecret;
use tokio_postgres::{Client, Row};

use crate::db::admin::{AccountError, Credited, Payment, PaymentSettings, Refunded, TopupView};
use crate::domain::admin::BalanceChange;
use crate::domain::ids::{AccountId, TopupId};
use crate::domain::money::Micros;
use crate::domain::payments::{self, Clawback, TopupStatus};

use super::accounts::write_change;
use super::changes::bump;
use super::decode::lock_account;
use super::reports::account_rowid;

/// Sets the settings; the version (`changes::bump`: the nodes reread them).
pub async fn set_settings(
    client: &mut Client,
    s: &PaymentSettings,
    now: i64,
) -> Result<i64, AccountError> {
    let tx = client.transaction().await?;
    tx.execute(
        "INSERT INTO payment_settings
                 (id, processor, secret_key, webhook_secret, api_base, max_topup, updated_at)
             VALUES (1, 'stripe', $1, $2, $3, $4, $5)
             ON CONFLICT (id) DO UPDATE SET secret_key = excluded.secret_key,
                 webhook_secret = excluded.webhook_secret, api_base = excluded.api_base,
                 max_topup = excluded.max_topup, updated_at = excluded.updated_at",
        &[
            &s.secret_key.expose_secret(),
            &s.webhook_secret.expose_secret(),
            &s.api_base,
            &s.max_topup,
            &now,
        ],
    )
    .await?;
    let version = bump(&tx).await?;
    tx.commit().await?;
    Ok(version)
}

pub async fn settings(client: &Client) -> Result<Option<PaymentSettings>, AccountError> {
    let row = client
        .query_opt(
            "SELECT secret_key, webhook_secret, api_base, max_topup FROM payment_settings",
            &[],
        )
        .await?;
    Ok(match row {
        Some(r) => Some(PaymentSettings {
            secret_key: r.get::<_, String>(0).into(),
            webhook_secret: r.get::<_, String>(1).into(),
            api_base: r.get(2),
            max_topup: r.try_get(3)?,
        }),
        None => None,
    })
}

/// Removes the settings: whether there were any, and the version.
pub async fn clear_settings(client: &mut Client) -> Result<(bool, i64), AccountError> {
    let tx = client.transaction().await?;
    let removed = tx.execute("DELETE FROM payment_settings", &[]).await? > 0;
    let version = bump(&tx).await?;
    tx.commit().await?;
    Ok((removed, version))
}

/// A new pending top-up of `amount` for the account; its public id. Refused beyond
/// [`payments::MAX_PENDING_TOPUPS`] unpaid ones of the last 24 hours.
pub async fn new_topup(
    client: &mut Client,
    account_id: &AccountId,
    amount: Micros,
    now: i64,
) -> Result<TopupId, AccountError> {
    let tx = client.transaction().await?;
    let rowid = account_rowid(&tx, account_id).await?;
    // Two starts of one account at once: the second waits, then counts the first.
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('topups ' || $1))",
        &[&account_id],
    )
    .await?;
    let frozen: Option<String> = tx
        .query_one(
            "SELECT topups_frozen FROM accounts WHERE id = $1",
            &[&rowid],
        )
        .await?
        .get(0);
    if frozen.is_some() {
        return Err(AccountError::Forbidden(payments::TOPUPS_FROZEN.to_owned()));
    }
    // Pending top-ups that can no longer be paid (`db::sqlite::payments::sweep`).
    tx.execute(
        "UPDATE topups SET status = CASE WHEN session_id IS NULL THEN 'failed' ELSE 'expired' END,
             url = NULL
         WHERE account_id = $1 AND status = 'pending'
           AND ((session_id IS NULL AND created_at < $2) OR created_at < $3)",
        &[
            &rowid,
            &(now - payments::SESSIONLESS_SECS),
            &(now - payments::STALE_PENDING_SECS),
        ],
    )
    .await?;
    let pending: i64 = tx
        .query_one(
            "SELECT count(*) FROM topups
             WHERE account_id = $1 AND status = 'pending' AND created_at > $2",
            &[&rowid, &(now - payments::PENDING_WINDOW_SECS)],
        )
        .await?
        .get(0);
    if pending >= payments::MAX_PENDING_TOPUPS {
        return Err(AccountError::Invalid(payments::too_many_pending()));
    }
    let topup_id = TopupId::fresh();
    tx.execute(
        "INSERT INTO topups (public_id, account_id, amount, status, created_at)
         VALUES ($1, $2, $3, 'pending', $4)",
        &[&topup_id, &rowid, &amount, &now],
    )
    .await?;
    tx.commit().await?;
    Ok(topup_id)
}

pub async fn topup_opened(
    client: &mut Client,
    topup_id: &TopupId,
    session_id: &str,
    url: &str,
) -> Result<(), AccountError> {
    client
        .execute(
            "UPDATE topups SET session_id = $2, url = $3
             WHERE public_id = $1 AND session_id IS NULL",
            &[&topup_id, &session_id, &url],
        )
        .await?;
    Ok(())
}

pub async fn close_topup(
    client: &mut Client,
    topup_id: Option<&TopupId>,
    session_id: Option<&str>,
    status: TopupStatus,
) -> Result<bool, AccountError> {
    Ok(client
        .execute(
            "UPDATE topups SET status = $3, url = NULL
             WHERE (public_id = $1 OR session_id = $2) AND status = 'pending'",
            &[&topup_id, &session_id, &status],
        )
        .await?
        > 0)
}

const TOPUP_COLUMNS: &str = "t.public_id, t.amount, t.status, t.session_id, t.url, t.payment,
    t.credited, t.refunded, t.taken_back, t.created_at, t.paid_at";

fn topup_at(r: &Row) -> Result<TopupView, tokio_postgres::Error> {
    Ok(TopupView {
        topup_id: r.get(0),
        amount: r.try_get(1)?,
        status: r.try_get(2)?,
        session_id: r.get(3),
        url: r.get(4),
        payment: r.get(5),
        credited: r.try_get(6)?,
        refunded: r.try_get(7)?,
        taken_back: r.try_get(8)?,
        created_at: r.get(9),
        paid_at: r.get(10),
    })
}

pub async fn topups(
    client: &Client,
    account_id: &AccountId,
) -> Result<Vec<TopupView>, AccountError> {
    let rowid = account_rowid(client, account_id).await?;
    let rows = client
        .query(
            &format!(
                "SELECT {TOPUP_COLUMNS} FROM topups t WHERE t.account_id = $1 ORDER BY t.id DESC"
            ),
            &[&rowid],
        )
        .await?;
    Ok(rows.iter().map(topup_at).collect::<Result<Vec<_>, _>>()?)
}

/// Credits a confirmed payment once; and the version to wait for when it did.
pub async fn credit(
    client: &mut Client,
    paid: &Payment,
    now: i64,
) -> Result<(Credited, Option<i64>), AccountError> {
    let tx = client.transaction().await?;
    // Two nodes given the same event at once: the second waits for the row, then finds it
    // paid.
    let found = tx
        .query_opt(
            "SELECT t.id, t.public_id, t.status, a.public_id, t.amount
             FROM topups t JOIN accounts a ON a.id = t.account_id
             WHERE t.session_id = $1 OR (t.public_id = $2 AND t.session_id IS NULL)
             ORDER BY t.session_id IS NULL LIMIT 1
             FOR UPDATE OF t",
            &[&paid.session_id, &paid.topup_id],
        )
        .await?;
    let Some(row) = found else {
        return Ok((Credited::Unknown, None));
    };
    let (id, topup_id, status, account_id): (i64, TopupId, TopupStatus, AccountId) =
        (row.get(0), row.get(1), row.try_get(2)?, row.get(3));
    if paid.account_id.as_ref().is_some_and(|a| *a != account_id) {
        return Ok((Credited::Unknown, None));
    }
    if status == TopupStatus::Paid {
        return Ok((Credited::Already { topup_id }, None));
    }
    let asked: Micros = row.try_get(4)?;
    let (account_row, balance, leased) = lock_account(&tx, &account_id).await?;
    // Read under the account's lock: a dispute freezing it waits, or has committed.
    let frozen: Option<String> = tx
        .query_one(
            "SELECT topups_frozen FROM accounts WHERE id = $1",
            &[&account_row],
        )
        .await?
        .get(0);
    let refused = Credited::refused(&account_id, &topup_id, frozen, paid, asked);
    if let Some(refused) = refused {
        // Failed, with its payment: a refund of it finds nothing credited to take back.
        tx.execute(
            "UPDATE topups SET status = 'failed', session_id = $2, payment = $3, url = NULL
             WHERE id = $1",
            &[&id, &paid.session_id, &paid.payment],
        )
        .await?;
        tx.commit().await?;
        return Ok((refused, None));
    }
    let change = BalanceChange::paid(
        paid.amount,
        payments::credit_note(&paid.session_id, paid.payment.as_deref()),
    )?;
    let after = write_change(&tx, account_row, (balance, leased), &change, now).await?;
    tx.execute(
        "UPDATE topups SET status = 'paid', session_id = $2, payment = $3, credited = $4,
             paid_at = $5, url = NULL
         WHERE id = $1",
        &[&id, &paid.session_id, &paid.payment, &paid.amount, &now],
    )
    .await?;
    let version = bump(&tx).await?;
    tx.commit().await?;
    Ok((
        Credited::Now {
            account_id,
            topup_id,
            amount: paid.amount,
            balance: after,
        },
        Some(version),
    ))
}

/// Takes back what was refunded (or disputed: `db::sqlite::payments::refund`) of
/// `payment` beyond what was counted, never what the nodes hold nor below zero; and the
/// version to wait for when the balance changed.
pub async fn refund(
    client: &mut Client,
    payment: &str,
    topup_id: Option<&TopupId>,
    clawback: &Clawback,
    now: i64,
) -> Result<(Refunded, Option<i64>), AccountError> {
    let tx = client.transaction().await?;
    let found = tx
        .query_opt(
            "SELECT t.id, t.public_id, t.credited, t.refunded, a.public_id
             FROM topups t JOIN accounts a ON a.id = t.account_id
             WHERE t.payment = $1 AND t.status = 'paid'
             FOR UPDATE OF t",
            &[&payment],
        )
        .await?;
    let Some(row) = found else {
        let uncredited = tx
            .query_opt(
                "SELECT 1 FROM topups WHERE public_id = $1 AND status IN ('pending', 'expired')",
                &[&topup_id],
            )
            .await?;
        return Ok((
            match uncredited {
                Some(_) => Refunded::Early,
                None => Refunded::Unknown,
            },
            None,
        ));
    };
    let (id, topup_id, account_id): (i64, TopupId, AccountId) =
        (row.get(0), row.get(1), row.get(4));
    let (credited, counted): (Micros, Micros) = (row.try_get(2)?, row.try_get(3)?);
    if let Clawback::Dispute { dispute } = clawback {
        // The topup's row is locked: a second delivery of the dispute waits, then finds it.
        let seen = tx
            .query_opt("SELECT 1 FROM disputes WHERE dispute = $1", &[dispute])
            .await?;
        if seen.is_some() {
            return Ok((Refunded::Already, None));
        }
    }
    let total = clawback.total(credited);
    let owed = total
        .checked_sub(counted)
        .unwrap_or(Micros::ZERO)
        .max(Micros::ZERO);
    let freezes = clawback.freezes(topup_id.as_str(), payment);
    if owed == Micros::ZERO && freezes.is_none() {
        return Ok((Refunded::Already, None));
    }
    let (account_row, balance, leased) = lock_account(&tx, &account_id).await?;
    let split = payments::refund_split(balance, leased, owed);
    let mut after = balance;
    let mut version = None;
    if split.taken > Micros::ZERO {
        let change = BalanceChange::refund(clawback, payment, owed, split)?;
        after = write_change(&tx, account_row, (balance, leased), &change, now).await?;
        version = Some(bump(&tx).await?);
    }
    tx.execute(
        "UPDATE topups SET refunded = greatest(refunded, $2), taken_back = taken_back + $3
         WHERE id = $1",
        &[&id, &total, &split.taken],
    )
    .await?;
    if let (Clawback::Dispute { dispute }, Some(why)) = (clawback, freezes) {
        tx.execute(
            "INSERT INTO disputes (dispute, topup_id, owed, taken_back, created_at)
             VALUES ($1, $2, $3, $4, $5)",
            &[dispute, &id, &owed, &split.taken, &now],
        )
        .await?;
        tx.execute(
            "UPDATE accounts SET topups_frozen = $2 WHERE id = $1",
            &[&account_row, &why],
        )
        .await?;
    }
    tx.commit().await?;
    Ok((
        Refunded::Now {
            account_id,
            topup_id,
            owed,
            split,
            balance: after,
        },
        version,
    ))
}

/// Lifts the account's freeze of top-ups: why it was frozen, or `None` when it was not.
pub async fn unfreeze(
    client: &mut Client,
    account_id: &AccountId,
) -> Result<Option<String>, AccountError> {
    let tx = client.transaction().await?;
    let rowid = account_rowid(&tx, account_id).await?;
    let was: Option<String> = tx
        .query_one(
            "SELECT topups_frozen FROM accounts WHERE id = $1 FOR UPDATE",
            &[&rowid],
        )
        .await?
        .get(0);
    tx.execute(
        "UPDATE accounts SET topups_frozen = NULL WHERE id = $1",
        &[&rowid],
    )
    .await?;
    tx.commit().await?;
    Ok(was)
}
