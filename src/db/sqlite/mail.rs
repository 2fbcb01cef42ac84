//! The operator's mail relay (`postal mail`, docs/alerts.md): one row. No server holds it
//! in memory (a sender reads it when it sends), so, unlike the payment settings, a change
//! bumps no version. The twin of `db::pg::mail`.

use rusqlite::{Connection, OptionalExtension, params};

use crate::db::admin::{AccountError, MailSettings};

pub fn set_settings(conn: &Connection, s: &MailSettings) -> Result<(), AccountError> {
    conn.execute(
        "INSERT INTO mail_settings (id, url, sender, username, password, updated_at)
         VALUES (1, ?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (id) DO UPDATE SET url = excluded.url, sender = excluded.sender,
             username = excluded.username, password = excluded.password,
             updated_at = excluded.updated_at",
        params![s.url, s.sender, s.username, s.password, s.updated_at],
    )?;
    Ok(())
}

pub fn settings(conn: &Connection) -> Result<Option<MailSettings>, AccountError> {
    Ok(conn
        .query_row(
            "SELECT url, sender, username, password, updated_at FROM mail_settings",
            [],
            |r| {
                Ok(MailSettings {
                    url: r.get(0)?,
                    sender: r.get(1)?,
                    username: r.get(2)?,
                    password: r.get(3)?,
                    updated_at: r.get(4)?,
                })
            },
        )
        .optional()?)
}

/// Removes the relay (e-mail alerts off); whether there was one.
pub fn clear_settings(conn: &Connection) -> Result<bool, AccountError> {
    Ok(conn.execute("DELETE FROM mail_settings", [])? > 0)
}
