//! The operator's mail relay in the ledger (`postal mail`, docs/alerts.md): one row,
//! shared by every node. No node holds it in memory (a sender reads it when it sends), so,
//! unlike the payment settings, a change bumps no version and waits for no node. The twin
//! of `db::sqlite::mail`.

use tokio_postgres::Client;

use crate::db::admin::{AccountError, MailSettings};

pub async fn set_settings(client: &Client, s: &MailSettings) -> Result<(), AccountError> {
    client
        .execute(
            "INSERT INTO mail_settings (id, url, sender, username, password, updated_at)
             VALUES (1, $1, $2, $3, $4, $5)
             ON CONFLICT (id) DO UPDATE SET url = excluded.url, sender = excluded.sender,
                 username = excluded.username, password = excluded.password,
                 updated_at = excluded.updated_at",
            &[&s.url, &s.sender, &s.username, &s.password, &s.updated_at],
        )
        .await?;
    Ok(())
}

pub async fn settings(client: &Client) -> Result<Option<MailSettings>, AccountError> {
    let row = client
        .query_opt(
            "SELECT url, sender, username, password, updated_at FROM mail_settings",
            &[],
        )
        .await?;
    Ok(row.map(|r| MailSettings {
        url: r.get(0),
        sender: r.get(1),
        username: r.get(2),
        password: r.get(3),
        updated_at: r.get(4),
    }))
}

/// Removes the relay (e-mail alerts off); whether there was one.
pub async fn clear_settings(client: &Client) -> Result<bool, AccountError> {
    Ok(client.execute("DELETE FROM mail_settings", &[]).await? > 0)
}
