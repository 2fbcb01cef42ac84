//! The account dashboard's tables (docs/account.md): the OpenID Connect providers, the
//! identities that own accounts, the sign-ins under way and the sessions. The twin of
//! `db::pg::dashboard`.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use secrecy::ExposeSecret;

use crate::db::admin::{
    AccountError, AuditEntry, Audited, IdentityView, LinkOffer, Page, Paging, Provider,
    SessionIdentity, SessionRow, SessionView, SignIn, SignedIn, Signups, session_identity,
    session_query,
};
use crate::db::sqlite::accounts::insert_account;
use crate::db::sqlite::decode::find_account;
use crate::domain::admin::AuditAction;
use crate::domain::dashboard::{self, DashboardRefused};
use crate::domain::ids::{AccountId, KeyId, ProviderName, SessionId};

fn refused(why: DashboardRefused) -> AccountError {
    AccountError::Invalid(why.to_string())
}

pub fn add_provider(conn: &mut Connection, p: &Provider, now: i64) -> Result<(), AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let exists = tx
        .query_row(
            "SELECT 1 FROM oidc_providers WHERE name = ?1",
            [&p.name],
            |_| Ok(()),
        )
        .optional()?;
    if exists.is_some() {
        return Err(AccountError::Invalid(format!(
            "a provider named {:?} exists; remove it first",
            p.name.as_str()
        )));
    }
    tx.execute(
        "INSERT INTO oidc_providers (name, issuer, client_id, client_secret, created_at, kind,
                                     allowed)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            p.name,
            p.issuer,
            p.client_id,
            p.client_secret.expose_secret(),
            now,
            p.kind,
            p.allowed_stored(),
        ],
    )?;
    tx.commit()?;
    Ok(())
}

/// Every provider, by name.
pub fn providers(conn: &Connection) -> Result<Vec<Provider>, AccountError> {
    let mut stmt = conn.prepare(
        "SELECT name, kind, issuer, client_id, client_secret, allowed FROM oidc_providers
         ORDER BY name",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok(Provider {
                name: r.get(0)?,
                kind: r.get(1)?,
                issuer: r.get(2)?,
                client_id: r.get(3)?,
                client_secret: r.get::<_, String>(4)?.into(),
                allowed: Provider::allowed_from_stored(&r.get::<_, String>(5)?),
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

/// Removes the provider (identities it made stay with their accounts); whether it was there.
/// Sessions opened with its identities end with it.
pub fn remove_provider(
    conn: &mut Connection,
    name: &ProviderName,
    now: i64,
) -> Result<bool, AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let removed = tx.execute("DELETE FROM oidc_providers WHERE name = ?1", [name])? > 0;
    tx.execute(
        "UPDATE sessions SET ended_at = ?2 WHERE provider = ?1 AND ended_at IS NULL",
        params![name, now],
    )?;
    tx.commit()?;
    Ok(removed)
}

/// Keeps a sign-in under way (its state hashed) until its callback takes it.
pub fn put_signin(
    conn: &mut Connection,
    state_hash: &[u8; 32],
    signin: &SignIn,
    now: i64,
) -> Result<(), AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Sign-ins never completed are dropped once they can no longer complete.
    tx.execute(
        "DELETE FROM signins WHERE created_at < ?1",
        [now - dashboard::SIGNIN_SECS],
    )?;
    tx.execute(
        "INSERT INTO signins (state_hash, provider, nonce, verifier, link_account, created_at,
                              purpose, session_hash)
         VALUES (?1, ?2, ?3, ?4, (SELECT id FROM accounts WHERE public_id = ?5), ?6, ?7, ?8)",
        params![
            &state_hash[..],
            signin.provider,
            signin.nonce,
            signin.verifier.expose_secret(),
            signin.link_account,
            now,
            signin.purpose,
            signin.session_hash.as_ref().map(|h| &h[..]),
        ],
    )?;
    tx.commit()?;
    Ok(())
}

/// Takes (deletes) the sign-in of this state: `None` when unknown, taken or too old.
pub fn take_signin(
    conn: &mut Connection,
    state_hash: &[u8; 32],
    now: i64,
) -> Result<Option<SignIn>, AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let row = tx
        .query_row(
            "SELECT s.provider, s.nonce, s.verifier, a.public_id, s.created_at, s.purpose,
                    s.session_hash
             FROM signins s LEFT JOIN accounts a ON a.id = s.link_account
             WHERE s.state_hash = ?1",
            [&state_hash[..]],
            |r| {
                Ok((
                    SignIn {
                        provider: r.get(0)?,
                        nonce: r.get(1)?,
                        verifier: r.get::<_, String>(2)?.into(),
                        link_account: r.get(3)?,
                        purpose: r.get(5)?,
                        session_hash: r.get(6)?,
                        started_at: r.get(4)?,
                    },
                    r.get::<_, i64>(4)?,
                ))
            },
        )
        .optional()?;
    tx.execute(
        "DELETE FROM signins WHERE state_hash = ?1",
        [&state_hash[..]],
    )?;
    tx.commit()?;
    Ok(row.and_then(|(signin, at)| (now - at < dashboard::SIGNIN_SECS).then_some(signin)))
}

/// The account of identity (`issuer`, `subject`): found, or made now with the free
/// allowance when sign-ups are open. An unlinked identity is refused.
pub fn sign_in(
    conn: &mut Connection,
    identity: &IdentityView,
    signups: &Signups,
    now: i64,
) -> Result<SignedIn, AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found = tx
        .query_row(
            "SELECT a.public_id, i.unlinked_at IS NOT NULL
             FROM identities i JOIN accounts a ON a.id = i.account_id
             WHERE i.issuer = ?1 AND i.subject = ?2",
            params![identity.issuer, identity.subject],
            |r| Ok((r.get::<_, AccountId>(0)?, r.get::<_, bool>(1)?)),
        )
        .optional()?;
    let signed_in = match found {
        Some((_, true)) => return Err(refused(DashboardRefused::IdentityUnlinked)),
        Some((account_id, false)) => SignedIn {
            account_id,
            created: false,
        },
        None if !signups.open => return Err(refused(DashboardRefused::SignupsClosed)),
        None => {
            let made: i64 = tx.query_row(
                "SELECT count(*) FROM accounts WHERE created_from = ?1 AND created_at >= ?2",
                params![signups.from, dashboard::day_start(now)],
                |r| r.get(0),
            )?;
            if made >= i64::from(signups.per_address_day) {
                return Err(AccountError::Limited(
                    dashboard::TOO_MANY_NEW_ACCOUNTS.to_owned(),
                ));
            }
            let name = identity.account_name();
            let (rowid, account_id) = insert_account(&tx, Some(name), now)?;
            tx.execute(
                "UPDATE accounts SET created_from = ?2 WHERE id = ?1",
                params![rowid, signups.from],
            )?;
            insert_identity(&tx, rowid, identity, now)?;
            SignedIn {
                account_id,
                created: true,
            }
        }
    };
    tx.commit()?;
    Ok(signed_in)
}

fn insert_identity(
    conn: &Connection,
    account_rowid: i64,
    identity: &IdentityView,
    now: i64,
) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO identities (issuer, subject, account_id, provider, email, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            identity.issuer,
            identity.subject,
            account_rowid,
            identity.provider,
            identity.email,
            now
        ],
    )?;
    Ok(())
}

/// Links an identity to the account of a signed-in customer: refused when it belongs to
/// another account (or was unlinked from one); linking it again to its own is no change.
pub fn link(
    conn: &mut Connection,
    account_id: &AccountId,
    identity: &IdentityView,
    now: i64,
) -> Result<(), AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (rowid, _) = find_account(&tx, account_id)?;
    let owner = tx
        .query_row(
            "SELECT account_id, unlinked_at IS NOT NULL FROM identities
             WHERE issuer = ?1 AND subject = ?2",
            params![identity.issuer, identity.subject],
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, bool>(1)?)),
        )
        .optional()?;
    match owner {
        None => insert_identity(&tx, rowid, identity, now)?,
        Some((owner, _)) if owner != rowid => {
            return Err(refused(DashboardRefused::IdentityElsewhere));
        }
        Some((_, true)) => {
            tx.execute(
                "UPDATE identities SET unlinked_at = NULL WHERE issuer = ?1 AND subject = ?2",
                params![identity.issuer, identity.subject],
            )?;
        }
        Some((_, false)) => {}
    }
    tx.commit()?;
    Ok(())
}

/// Unlinks one of the account's identities, keeping at least one, and ends the sessions
/// opened with it; how many it ended.
pub fn unlink(
    conn: &mut Connection,
    account_id: &AccountId,
    issuer: &str,
    subject: &str,
    now: i64,
) -> Result<u64, AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (rowid, _) = find_account(&tx, account_id)?;
    let linked: i64 = tx.query_row(
        "SELECT count(*) FROM identities WHERE account_id = ?1 AND unlinked_at IS NULL",
        [rowid],
        |r| r.get(0),
    )?;
    let changed = tx.execute(
        "UPDATE identities SET unlinked_at = ?4
         WHERE account_id = ?1 AND issuer = ?2 AND subject = ?3 AND unlinked_at IS NULL",
        params![rowid, issuer, subject, now],
    )?;
    if changed == 0 {
        return Err(AccountError::Invalid(
            "no such identity on this account".into(),
        ));
    }
    if linked <= 1 {
        return Err(refused(DashboardRefused::LastIdentity));
    }
    let ended = tx.execute(
        "UPDATE sessions SET ended_at = ?4
         WHERE account_id = ?1 AND issuer = ?2 AND subject = ?3 AND ended_at IS NULL",
        params![rowid, issuer, subject, now],
    )?;
    tx.commit()?;
    Ok(ended as u64)
}

/// The account's linked identities, oldest first.
pub fn identities(
    conn: &Connection,
    account_id: &AccountId,
) -> Result<Vec<IdentityView>, AccountError> {
    let (rowid, _) = find_account(conn, account_id)?;
    let mut stmt = conn.prepare(
        "SELECT issuer, subject, provider, email, created_at FROM identities
         WHERE account_id = ?1 AND unlinked_at IS NULL ORDER BY created_at, issuer, subject",
    )?;
    let rows = stmt
        .query_map([rowid], |r| {
            Ok(IdentityView {
                issuer: r.get(0)?,
                subject: r.get(1)?,
                provider: r.get(2)?,
                email: r.get(3)?,
                name: None,
                created_at: r.get(4)?,
                signed_in_at: None,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

/// A new session of the account (its id hashed).
pub fn create_session(
    conn: &mut Connection,
    id_hash: &[u8; 32],
    session: &SessionRow,
) -> Result<(), AccountError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (rowid, _) = find_account(&tx, &session.account_id)?;
    tx.execute(
        "INSERT INTO sessions (id_hash, public_id, account_id, csrf, created_at, seen_at, client,
                               provider, issuer, subject, authenticated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8, ?9, ?10)",
        params![
            &id_hash[..],
            session.public_id,
            rowid,
            session.csrf.expose_secret(),
            session.created_at,
            session.client,
            session.identity.as_ref().map(|i| &i.provider),
            session.identity.as_ref().map(|i| &i.issuer),
            session.identity.as_ref().map(|i| &i.subject),
            session.authenticated_at,
        ],
    )?;
    tx.commit()?;
    Ok(())
}

/// The live session of this id, marked seen at `now` when its mark is a minute old; `None`
/// when unknown, ended or expired.
pub fn session(
    conn: &mut Connection,
    id_hash: &[u8; 32],
    now: i64,
) -> Result<Option<SessionRow>, AccountError> {
    let row = conn
        .query_row(&session_query('?'), [&id_hash[..]], |r| {
            Ok((
                SessionRow {
                    public_id: r.get(0)?,
                    account_id: r.get(1)?,
                    csrf: r.get::<_, String>(2)?.into(),
                    created_at: r.get(3)?,
                    client: r.get(5)?,
                    identity: session_identity(r.get(6)?, r.get(7)?, r.get(8)?),
                    authenticated_at: r.get(9)?,
                    link_offer: LinkOffer::from_stored(r.get::<_, Option<String>>(10)?.as_deref()),
                },
                r.get::<_, i64>(4)?,
            ))
        })
        .optional()?;
    let Some((row, seen)) = row else {
        return Ok(None);
    };
    if dashboard::session_expired(row.created_at, seen, now) {
        return Ok(None);
    }
    if dashboard::session_seen_is_stale(seen, now) {
        conn.execute(
            "UPDATE sessions SET seen_at = ?2 WHERE id_hash = ?1 AND seen_at < ?2",
            params![&id_hash[..], now],
        )?;
    }
    Ok(Some(row))
}

/// Records that the live session `id_hash` signed in again, now, with `identity`; whether
/// it was still live.
pub fn prove_session(
    conn: &mut Connection,
    id_hash: &[u8; 32],
    identity: &SessionIdentity,
    now: i64,
) -> Result<bool, AccountError> {
    Ok(conn.execute(
        "UPDATE sessions SET provider = ?2, issuer = ?3, subject = ?4, authenticated_at = ?5
         WHERE id_hash = ?1 AND ended_at IS NULL",
        params![
            &id_hash[..],
            identity.provider,
            identity.issuer,
            identity.subject,
            now
        ],
    )? > 0)
}

/// Keeps (or with `None`, drops) the identity a link brought back on the live session
/// `id_hash`, until its customer confirms it.
pub fn offer_link(
    conn: &mut Connection,
    id_hash: &[u8; 32],
    offer: Option<&LinkOffer>,
) -> Result<(), AccountError> {
    conn.execute(
        "UPDATE sessions SET link_offer = ?2 WHERE id_hash = ?1 AND ended_at IS NULL",
        params![&id_hash[..], offer.map(LinkOffer::stored)],
    )?;
    Ok(())
}

/// Ends the account's session named `public_id`; whether it was live.
pub fn end_session(
    conn: &mut Connection,
    account_id: &AccountId,
    public_id: &SessionId,
    now: i64,
) -> Result<bool, AccountError> {
    let (rowid, _) = find_account(conn, account_id)?;
    Ok(conn.execute(
        "UPDATE sessions SET ended_at = ?3
         WHERE account_id = ?1 AND public_id = ?2 AND ended_at IS NULL",
        params![rowid, public_id, now],
    )? > 0)
}

/// The account's live sessions, newest first.
pub fn sessions(
    conn: &Connection,
    account_id: &AccountId,
    now: i64,
) -> Result<Vec<SessionView>, AccountError> {
    let (rowid, _) = find_account(conn, account_id)?;
    let mut stmt = conn.prepare(
        "SELECT public_id, created_at, seen_at, client FROM sessions
         WHERE account_id = ?1 AND ended_at IS NULL ORDER BY created_at DESC, public_id",
    )?;
    let rows = stmt
        .query_map([rowid], |r| {
            Ok(SessionView {
                session_id: r.get(0)?,
                created_at: r.get(1)?,
                seen_at: r.get(2)?,
                client: r.get(3)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows
        .into_iter()
        .filter(|s| !dashboard::session_expired(s.created_at, s.seen_at, now))
        .collect())
}

/// Names (or unnames) a key of the account; `UnknownKey` when the account has no such key.
pub fn rename_key(
    conn: &mut Connection,
    account_id: &AccountId,
    key_id: &KeyId,
    name: Option<&str>,
) -> Result<(), AccountError> {
    let (rowid, _) = find_account(conn, account_id)?;
    let changed = conn.execute(
        "UPDATE api_keys SET name = ?3 WHERE account_id = ?1 AND public_id = ?2",
        params![rowid, key_id, name],
    )?;
    match changed {
        0 => Err(AccountError::UnknownKey(key_id.clone())),
        _ => Ok(()),
    }
}

/// Appends a line to the audit log of `whose` account.
pub fn audit(
    conn: &Connection,
    whose: Audited<'_>,
    at: i64,
    actor: &str,
    action: AuditAction,
    detail: &str,
) -> Result<(), AccountError> {
    let (insert, id) = whose.insert('?');
    conn.execute(&insert, params![id, at, actor, action, detail])?;
    Ok(())
}

/// A page of the account's audit log (`paging`: newest or oldest first).
pub fn audit_entries(
    conn: &Connection,
    account_id: &AccountId,
    paging: &Paging,
) -> Result<Page<AuditEntry>, AccountError> {
    let (rowid, _) = find_account(conn, account_id)?;
    let mut stmt = conn.prepare(&format!(
        "SELECT id, at, actor, action, detail FROM audit_log
         WHERE account_id = ?1 AND {}",
        paging.rows("?2", "?3")
    ))?;
    let (before, rows) = paging.bounds();
    let params = params![rowid, before, rows];
    let params = &params[..if paging.page.is_some() { 3 } else { 2 }];
    let rows = stmt
        .query_map(params, |r| {
            Ok((
                r.get(0)?,
                AuditEntry {
                    at: r.get(1)?,
                    actor: r.get(2)?,
                    action: r.get(3)?,
                    detail: r.get(4)?,
                },
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(paging.paged(rows))
}
